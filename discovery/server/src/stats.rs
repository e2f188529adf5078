// SPDX-License-Identifier: Apache-2.0
//! The stats page: `GET /stats` answers a small JSON object of counts, `GET /` a line of text
//! saying what this port is. It is served on the gRPC port itself: a connection whose first
//! bytes are not the HTTP/2 preface is read as one HTTP/1.1 request (and closed after the
//! answer); over HTTP/2, a request that is not gRPC gets the same answers.

use crate::registry::Totals;

/// The most bytes an HTTP/1.1 request head may have.
pub const HEAD_LIMIT: usize = 8 * 1024;

pub const LANDING: &str =
    "keelson-discovery-server: a discovery service for Talos and keelson nodes \
(gRPC sidero.discovery.server.Cluster). GET /stats for counts.\n";

/// The counts as JSON.
pub fn json(t: &Totals) -> String {
    format!(
        "{{\"clusters\":{},\"affiliates\":{},\"endpoints\":{},\"watchers\":{},\"bytes\":{}}}\n",
        t.clusters, t.affiliates, t.endpoints, t.watchers, t.bytes
    )
}

/// The status, content type and body for a request path.
pub fn answer(path: &str, t: &Totals) -> (u16, &'static str, String) {
    match path.split('?').next().unwrap_or_default() {
        "/stats" => (200, "application/json", json(t)),
        "/" => (200, "text/plain; charset=utf-8", LANDING.to_owned()),
        _ => (404, "text/plain; charset=utf-8", "not found\n".to_owned()),
    }
}

/// What an HTTP/1.1 request head asks for, once it is complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Head {
    /// More bytes are needed.
    Partial,
    /// A GET or HEAD of this path.
    Get { path: String, head_only: bool },
    /// Anything else: answered 400/405 and closed.
    Bad(u16),
}

/// Parse the head of an HTTP/1.1 request from the bytes read so far. A request line, not a
/// status line: keelson's response parser (`init/src/fetch/http.rs`) does the client's job and
/// is not shared with this server, which links no node code.
pub fn parse_head(buf: &[u8]) -> Head {
    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return if buf.len() >= HEAD_LIMIT { Head::Bad(431) } else { Head::Partial };
    };
    let line_end = buf[..end].windows(2).position(|w| w == b"\r\n").unwrap_or(end);
    let Ok(line) = std::str::from_utf8(&buf[..line_end]) else {
        return Head::Bad(400);
    };
    let mut parts = line.split(' ');
    let (Some(method), Some(path), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Head::Bad(400);
    };
    if !version.starts_with("HTTP/1.") || !path.starts_with('/') {
        return Head::Bad(400);
    }
    match method {
        "GET" => Head::Get { path: path.to_owned(), head_only: false },
        "HEAD" => Head::Get { path: path.to_owned(), head_only: true },
        _ => Head::Bad(405),
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        _ => "Bad Request",
    }
}

/// A whole HTTP/1.1 response that closes the connection.
pub fn http1_response(status: u16, content_type: &str, body: &str, head_only: bool) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status} {}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\
         cache-control: no-store\r\nconnection: close\r\n\r\n",
        reason(status),
        body.len()
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(body.as_bytes());
    }
    out
}

/// The response to a complete request head (None while it is partial).
pub fn respond(buf: &[u8], t: &Totals) -> Option<Vec<u8>> {
    match parse_head(buf) {
        Head::Partial => None,
        Head::Get { path, head_only } => {
            let (status, ctype, body) = answer(&path, t);
            Some(http1_response(status, ctype, &body, head_only))
        }
        Head::Bad(status) => {
            Some(http1_response(status, "text/plain; charset=utf-8", "bad request\n", false))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_and_landing_over_http1() {
        let t = Totals { clusters: 1, affiliates: 2, endpoints: 3, watchers: 4, bytes: 5 };
        assert_eq!(respond(b"GET /stats HTTP/1.1\r\nHost: x\r\n", &t), None);
        let r = respond(b"GET /stats HTTP/1.1\r\nHost: x\r\n\r\n", &t).unwrap();
        let r = String::from_utf8(r).unwrap();
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"));
        assert!(r.ends_with(
            "\r\n\r\n{\"clusters\":1,\"affiliates\":2,\"endpoints\":3,\"watchers\":4,\"bytes\":5}\n"
        ));
        let r = respond(b"GET /nope HTTP/1.0\r\n\r\n", &t).unwrap();
        assert!(r.starts_with(b"HTTP/1.1 404"));
        let r = respond(b"POST / HTTP/1.1\r\n\r\n", &t).unwrap();
        assert!(r.starts_with(b"HTTP/1.1 405"));
        assert_eq!(parse_head(&[b'a'; HEAD_LIMIT]), Head::Bad(431));
        assert_eq!(parse_head(b"\xff\xfe\r\n\r\n"), Head::Bad(400));
    }
}
