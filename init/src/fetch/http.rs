// SPDX-License-Identifier: Apache-2.0
//! The config fetch's HTTP/1.1 exchange, without I/O (RFC 9112): [`request`] writes the one GET
//! the fetch sends, and [`ResponseParser`] collects a whole response through keelson's one
//! HTTP/1 response parser, [`base::http1::ResponseDecoder`], with the body bounded at
//! [`MAX_BODY`]. The kubelet health probe (`node::health`) reads only the status line, through
//! [`status_line`], and the demo workload's probe uses [`ResponseParser`] too. Servers (the
//! demo workload, the discovery server's stats page, the metrics listener) parse request heads,
//! a different grammar, and keep their own.

pub use base::http1::{status_line, HttpError, ResponseDecoder};

/// The body's limit: a machine config is a few hundred KiB at most.
pub const MAX_BODY: usize = 4 << 20;

/// A complete response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Reason phrase, as sent (printable ASCII only; at most 64 bytes kept).
    pub reason: String,
    /// `Location`, when present.
    pub location: Option<String>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

/// The request line and headers of a GET.
pub fn request(host_header: &str, target: &str) -> Vec<u8> {
    format!(
        "GET {target} HTTP/1.1\r\nHost: {host_header}\r\nUser-Agent: keelson/{}\r\nAccept: */*\r\nConnection: close\r\n\r\n",
        env!("CARGO_PKG_VERSION")
    )
    .into_bytes()
}

/// Feed it bytes; it says when the response is complete.
#[derive(Debug)]
pub struct ResponseParser {
    decoder: ResponseDecoder,
    body: Vec<u8>,
}

impl Default for ResponseParser {
    fn default() -> Self {
        Self { decoder: ResponseDecoder::new(MAX_BODY), body: Vec::new() }
    }
}

impl ResponseParser {
    /// A parser whose body may be at most `limit` bytes.
    pub fn with_limit(limit: usize) -> Self {
        Self { decoder: ResponseDecoder::new(limit), body: Vec::new() }
    }

    /// Take more bytes; `Ok(true)` when the response is complete.
    pub fn feed(&mut self, data: &[u8]) -> Result<bool, HttpError> {
        self.decoder.feed(data, &mut self.body)
    }

    /// The connection ended: the response, if that completes it.
    pub fn finish(mut self) -> Result<Response, HttpError> {
        self.decoder.finish()?;
        self.into_response()
    }

    /// The response, once [`ResponseParser::feed`] said it was complete.
    pub fn into_response(self) -> Result<Response, HttpError> {
        if !self.decoder.done() {
            return Err(HttpError::Truncated);
        }
        Ok(Response {
            status: self.decoder.status().unwrap_or_default(),
            reason: self.decoder.reason().to_owned(),
            location: self.decoder.location().map(str::to_owned),
            body: self.body,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base::http1::MAX_HEADER;

    /// Feed `input` in pieces of `step` bytes, then end the connection.
    fn parse_in(input: &[u8], step: usize) -> Result<Response, HttpError> {
        let mut p = ResponseParser::default();
        for piece in input.chunks(step.max(1)) {
            if p.feed(piece)? {
                return p.into_response();
            }
        }
        p.finish()
    }

    /// Every split of the input gives the same answer.
    fn parse(input: &[u8]) -> Result<Response, HttpError> {
        let whole = parse_in(input, input.len());
        for step in [1, 2, 3, 7, 64] {
            assert_eq!(parse_in(input, step), whole, "step {step}");
        }
        whole
    }

    fn ok(input: &str) -> Response {
        parse(input.as_bytes()).unwrap_or_else(|e| unreachable!("{e}: {input:?}"))
    }

    #[test]
    fn request_line() {
        let r = String::from_utf8(request("10.0.2.2:8000", "/a?b=c")).unwrap_or_default();
        assert!(r.starts_with("GET /a?b=c HTTP/1.1\r\nHost: 10.0.2.2:8000\r\n"), "{r}");
        assert!(r.ends_with("Connection: close\r\n\r\n"));
    }

    #[test]
    fn content_length() {
        let r = ok("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX: y\r\n\r\nhelloEXTRA");
        assert_eq!((r.status, r.reason.as_str(), r.body.as_slice()), (200, "OK", &b"hello"[..]));
        let r = ok("HTTP/1.0 200 OK\r\nContent-Length: 3, 3\r\n\r\nabc");
        assert_eq!(r.body, b"abc");
    }

    #[test]
    fn until_close_and_bare_lf() {
        let r = ok("HTTP/1.0 200 OK\nServer: x\n\nversion: v1alpha1\n");
        assert_eq!(r.body, b"version: v1alpha1\n");
        assert_eq!(ok("HTTP/1.1 200 OK\r\n\r\n").body, b"");
    }

    #[test]
    fn chunked() {
        let r = ok("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 99\r\n\r\n5;ext=1\r\nhello\r\nA\r\n, world!!!\r\n0\r\nTrailer: t\r\n\r\nIGNORED");
        assert_eq!(r.body, b"hello, world!!!");
        assert_eq!(
            parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel"),
            Err(HttpError::Truncated)
        );
        assert_eq!(
            parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"),
            Err(HttpError::Chunk)
        );
        assert_eq!(
            parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n0\r\n\r\n"),
            Err(HttpError::Chunk)
        );
        assert_eq!(
            parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n123456789\r\n"),
            Err(HttpError::Chunk)
        );
        assert_eq!(
            parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"),
            Err(HttpError::Coding("gzip".into()))
        );
    }

    #[test]
    fn statuses() {
        let r = ok("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 302 Found\r\nLocation: /next\r\nContent-Length: 0\r\n\r\n");
        assert_eq!((r.status, r.location.as_deref()), (302, Some("/next")));
        let r = ok("HTTP/1.1 404 Not\u{7}Found\r\nContent-Length: 2\r\n\r\nno");
        assert_eq!((r.status, r.reason.as_str()), (404, "NotFound"));
        assert_eq!(ok("HTTP/1.1 204 No Content\r\n\r\n").body, b"");
        let many = "HTTP/1.1 100 Continue\r\n\r\n".repeat(5) + "HTTP/1.1 200 OK\r\n\r\n";
        assert_eq!(parse(many.as_bytes()), Err(HttpError::Interim));
    }

    #[test]
    fn limits() {
        let big = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", MAX_BODY + 1);
        assert_eq!(parse(big.as_bytes()), Err(HttpError::BodyTooLarge(MAX_BODY)));
        let mut long = b"HTTP/1.1 200 OK\r\n\r\n".to_vec();
        long.resize(long.len() + MAX_BODY + 1, b'x');
        assert_eq!(parse_in(&long, 65536), Err(HttpError::BodyTooLarge(MAX_BODY)));
        let mut chunks = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        for _ in 0..5 {
            chunks.extend_from_slice(format!("{:x}\r\n", 1 << 20).as_bytes());
            chunks.resize(chunks.len() + (1 << 20), b'y');
            chunks.extend_from_slice(b"\r\n");
        }
        assert_eq!(parse_in(&chunks, 65536), Err(HttpError::BodyTooLarge(MAX_BODY)));
        let headers = format!("HTTP/1.1 200 OK\r\nX: {}\r\n\r\n", "a".repeat(MAX_HEADER));
        assert_eq!(parse(headers.as_bytes()), Err(HttpError::HeaderTooLarge));
        // A header section that never ends is refused once it passes the limit.
        let endless = format!("HTTP/1.1 200 OK\r\n{}", "X: y\r\n".repeat(MAX_HEADER / 6 + 1));
        assert_eq!(parse_in(endless.as_bytes(), 100), Err(HttpError::HeaderTooLarge));
        let trailers = format!(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n{}",
            "T: t\r\n".repeat(MAX_HEADER / 6 + 1)
        );
        assert_eq!(parse(trailers.as_bytes()), Err(HttpError::HeaderTooLarge));
    }

    #[test]
    fn garbage() {
        for (input, e) in [
            (&b"SSH-2.0-OpenSSH_9.2\r\n\r\n"[..], HttpError::StatusLine),
            (b"HTTP/2 200\r\n\r\n", HttpError::StatusLine),
            (b"HTTP/1.1 20 OK\r\n\r\n", HttpError::StatusLine),
            (b"HTTP/1.1 999 OK\r\n\r\n", HttpError::StatusLine),
            (b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n", HttpError::Header),
            (b"HTTP/1.1 200 OK\r\nX: a\r\n folded\r\n\r\n", HttpError::Header),
            (b"HTTP/1.1 200 OK\r\nBad Name: a\r\n\r\n", HttpError::Header),
            (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", HttpError::ContentLength),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                HttpError::ContentLength,
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n",
                HttpError::Coding("gzip".into()),
            ),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", HttpError::Truncated),
            (b"HTTP/1.1 200 OK\r\nContent-", HttpError::Truncated),
            (b"", HttpError::Truncated),
        ] {
            assert_eq!(parse(input), Err(e), "{}", String::from_utf8_lossy(input));
        }
        let mut bin = b"HTTP/1.1 200 OK\r\n".to_vec();
        bin.extend_from_slice(&[0xff, 0, 0x80, b':', b'\r', b'\n', b'\r', b'\n']);
        assert_eq!(parse(&bin), Err(HttpError::Header));
    }
}
