// SPDX-License-Identifier: Apache-2.0
//! The metrics listener's HTTP/1.1: one request head in, one response out, then the
//! connection closes. Pure: bytes to a parsed head, a head to a response.

use base::metrics::Format;

/// The largest request head accepted; a longer one gets 431.
pub const MAX_HEAD: usize = 8 * 1024;

/// A request head as far as the listener cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `HEAD` (the response has no body).
    pub head_only: bool,
    /// The path, without a query.
    pub path: String,
    /// The scrape's format, from `Accept`.
    pub format: Format,
}

/// What a head that is not served gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Not HTTP/1.x, or a malformed line: 400.
    BadRequest,
    /// A method other than GET and HEAD: 405.
    Method,
    /// Longer than [`MAX_HEAD`]: 431.
    TooLarge,
}

/// The head in `buf`, once it is complete: `Ok(None)` while more is needed.
pub fn parse(buf: &[u8]) -> Result<Option<Request>, Refusal> {
    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return if buf.len() > MAX_HEAD { Err(Refusal::TooLarge) } else { Ok(None) };
    };
    if end + 4 > MAX_HEAD {
        return Err(Refusal::TooLarge);
    }
    let head = buf.get(..end).ok_or(Refusal::BadRequest)?;
    let mut lines = head.split(|b| *b == b'\n').map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let line = lines.next().ok_or(Refusal::BadRequest)?;
    let mut parts = line.split(|b| *b == b' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Refusal::BadRequest);
    };
    if !matches!(version, b"HTTP/1.1" | b"HTTP/1.0") || !target.starts_with(b"/") {
        return Err(Refusal::BadRequest);
    }
    let head_only = match method {
        b"GET" => false,
        b"HEAD" => true,
        _ => return Err(Refusal::Method),
    };
    let path = target.split(|b| *b == b'?').next().unwrap_or(target);
    let path = String::from_utf8(path.to_vec()).map_err(|_| Refusal::BadRequest)?;
    let mut accept = None;
    for l in lines {
        let Some(colon) = l.iter().position(|b| *b == b':') else {
            return Err(Refusal::BadRequest);
        };
        let (name, value) = l.split_at(colon);
        if name.eq_ignore_ascii_case(b"accept") {
            accept = value.get(1..);
        }
    }
    Ok(Some(Request { head_only, path, format: Format::from_accept(accept) }))
}

/// A whole response: status line, headers (`Connection: close`), and the body unless
/// `head_only`.
pub fn response(code: u16, content_type: &str, body: &str, head_only: bool) -> Vec<u8> {
    response_into(Vec::new(), code, content_type, body, head_only)
}

/// [`response`] into `buf` (cleared first), keeping its allocation.
pub fn response_into(
    mut buf: Vec<u8>,
    code: u16,
    content_type: &str,
    body: &str,
    head_only: bool,
) -> Vec<u8> {
    use std::io::Write;
    let reason = match code {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        _ => "Error",
    };
    buf.clear();
    let mut out = buf;
    // Writing into a Vec cannot fail.
    let _ = write!(
        out,
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if code == 405 {
        out.extend_from_slice(b"Allow: GET, HEAD\r\n");
    }
    out.extend_from_slice(b"\r\n");
    if !head_only {
        out.extend_from_slice(body.as_bytes());
    }
    out
}

/// The response to a refused head.
pub fn refusal(r: Refusal) -> Vec<u8> {
    let (code, text) = match r {
        Refusal::BadRequest => (400, "bad request\n"),
        Refusal::Method => (405, "only GET and HEAD\n"),
        Refusal::TooLarge => (431, "request head larger than 8 KiB\n"),
    };
    response(code, "text/plain; charset=utf-8", text, false)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_get_head_is_parsed_once_complete_with_its_accept_and_without_the_query() {
        let req = b"GET /metrics?x=1 HTTP/1.1\r\nHost: n\r\nAccept: application/openmetrics-text; version=1.0.0\r\n\r\n";
        assert_eq!(parse(&req[..20]), Ok(None));
        let r = parse(req).unwrap().unwrap();
        assert_eq!(
            (r.head_only, r.path.as_str(), r.format),
            (false, "/metrics", Format::OpenMetrics)
        );
        let r = parse(b"HEAD / HTTP/1.0\r\n\r\n").unwrap().unwrap();
        assert_eq!((r.head_only, r.path.as_str(), r.format), (true, "/", Format::Prometheus));
    }

    #[test]
    fn bad_heads_are_refused_with_their_reason() {
        assert_eq!(parse(b"POST /metrics HTTP/1.1\r\n\r\n"), Err(Refusal::Method));
        assert_eq!(parse(b"GET /metrics HTTP/2\r\n\r\n"), Err(Refusal::BadRequest));
        assert_eq!(parse(b"GET metrics HTTP/1.1\r\n\r\n"), Err(Refusal::BadRequest));
        assert_eq!(parse(b"GET / HTTP/1.1\r\nno colon\r\n\r\n"), Err(Refusal::BadRequest));
        let mut long = b"GET / HTTP/1.1\r\nX: ".to_vec();
        long.resize(MAX_HEAD + 1, b'a');
        assert_eq!(parse(&long), Err(Refusal::TooLarge));
        long.extend_from_slice(b"\r\n\r\n");
        assert_eq!(parse(&long), Err(Refusal::TooLarge));
    }

    #[test]
    fn a_head_response_has_the_length_but_no_body() {
        let r = response(200, "text/plain", "abc", true);
        assert_eq!(
            r,
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\nConnection: close\r\n\r\n"
        );
        assert!(refusal(Refusal::TooLarge).starts_with(b"HTTP/1.1 431 "));
    }
}
