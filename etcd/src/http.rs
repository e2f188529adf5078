// SPDX-License-Identifier: Apache-2.0
//! HTTP/1.1 for the gateway, without I/O (RFC 9112): [`post`] writes a request with a
//! `Content-Length` body (the gateway answers a streaming call only once the request body is
//! complete), and [`ResponseDecoder`] takes the server's bytes in whatever pieces they come and
//! hands the de-chunked body out as it arrives, so a watch's frames can be read before the
//! response ends. Bounded: the header section, each chunk-size line and, when asked, the body.

/// The header section's limit (status line, headers, trailers).
pub const MAX_HEADER: usize = 16 << 10;
/// A chunk-size line (hex size and extensions).
const MAX_CHUNK_LINE: usize = 1024;
/// Interim (1xx) responses skipped before giving up.
const MAX_INTERIM: usize = 4;

/// Why a response was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    #[error("not an HTTP/1.x status line")]
    StatusLine,
    #[error("malformed header line")]
    Header,
    #[error("header section larger than {MAX_HEADER} bytes")]
    HeaderTooLarge,
    #[error("more than {MAX_INTERIM} interim (1xx) responses")]
    Interim,
    #[error("invalid Content-Length")]
    ContentLength,
    #[error("unsupported transfer coding")]
    Coding,
    #[error("body larger than {0} bytes")]
    BodyTooLarge(usize),
    #[error("malformed chunk")]
    Chunk,
    #[error("connection closed before the response was complete")]
    Truncated,
}

/// A POST of `body` to `path` on a kept-alive connection.
pub fn post(host: &str, path: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: keelson/{}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        env!("CARGO_PKG_VERSION"),
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

/// A GET (the `/health` endpoint is not on the gateway's POST mux).
pub fn get(host: &str, path: &str) -> Vec<u8> {
    format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: keelson/{}\r\n\r\n",
        env!("CARGO_PKG_VERSION")
    )
    .into_bytes()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    Length(usize),
    Chunked,
    Close,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Head,
    Body,
    ChunkSize,
    ChunkData(usize),
    ChunkEnd,
    Trailers,
    Done,
}

/// Feed it bytes; body bytes come out as they are decoded.
#[derive(Debug)]
pub struct ResponseDecoder {
    state: State,
    buf: Vec<u8>,
    head_bytes: usize,
    interim: usize,
    status: u16,
    framing: Framing,
    keep_alive: bool,
    /// Body bytes allowed in total (`usize::MAX` for a stream, bounded per frame instead).
    body_limit: usize,
    body_seen: usize,
}

impl ResponseDecoder {
    /// A decoder refusing bodies larger than `body_limit`.
    pub fn new(body_limit: usize) -> Self {
        Self {
            state: State::Head,
            buf: Vec::new(),
            head_bytes: 0,
            interim: 0,
            status: 0,
            framing: Framing::Close,
            keep_alive: true,
            body_limit,
            body_seen: 0,
        }
    }

    /// The status code, once the head is in.
    pub fn status(&self) -> Option<u16> {
        (self.state != State::Head).then_some(self.status)
    }

    /// True once the whole response was read.
    pub fn done(&self) -> bool {
        self.state == State::Done
    }

    /// True when the connection may carry another request after this response.
    pub fn reusable(&self) -> bool {
        self.done() && self.keep_alive && self.framing != Framing::Close && self.buf.is_empty()
    }

    /// Take `data`; decoded body bytes are appended to `body`. `Ok(true)` when complete.
    pub fn feed(&mut self, data: &[u8], body: &mut Vec<u8>) -> Result<bool, HttpError> {
        self.buf.extend_from_slice(data);
        loop {
            let progressed = match self.state {
                State::Done => return Ok(true),
                State::Head => self.head()?,
                State::Body => self.body_bytes(body)?,
                State::ChunkSize => self.chunk_size()?,
                State::ChunkData(left) => self.chunk_data(left, body)?,
                State::ChunkEnd => self.chunk_end()?,
                State::Trailers => self.trailers()?,
            };
            if !progressed {
                return Ok(self.done());
            }
        }
    }

    /// The connection ended: fine for a body delimited by the close, an error otherwise.
    pub fn finish(&mut self) -> Result<(), HttpError> {
        if self.state == State::Body && self.framing == Framing::Close {
            self.state = State::Done;
        }
        if self.done() {
            Ok(())
        } else {
            Err(HttpError::Truncated)
        }
    }

    fn count_head(&mut self, n: usize) -> Result<(), HttpError> {
        self.head_bytes = self.head_bytes.saturating_add(n);
        if self.head_bytes > MAX_HEADER {
            return Err(HttpError::HeaderTooLarge);
        }
        Ok(())
    }

    fn count_body(&mut self, n: usize) -> Result<(), HttpError> {
        self.body_seen = self.body_seen.saturating_add(n);
        if self.body_seen > self.body_limit {
            return Err(HttpError::BodyTooLarge(self.body_limit));
        }
        Ok(())
    }

    fn head(&mut self) -> Result<bool, HttpError> {
        let Some(end) = find_head_end(&self.buf) else {
            if self.head_bytes.saturating_add(self.buf.len()) > MAX_HEADER {
                return Err(HttpError::HeaderTooLarge);
            }
            return Ok(false);
        };
        self.count_head(end)?;
        let head: Vec<u8> = self.buf.drain(..end).collect();
        let text = std::str::from_utf8(&head).map_err(|_| HttpError::Header)?;
        let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
        let status = parse_status(lines.next().unwrap_or(""))?;
        if (100..200).contains(&status) {
            self.interim += 1;
            if self.interim > MAX_INTERIM {
                return Err(HttpError::Interim);
            }
            return Ok(true);
        }
        self.status = status;
        let mut length: Option<usize> = None;
        let mut chunked = false;
        for line in lines.filter(|l| !l.is_empty()) {
            let (name, value) = line.split_once(':').ok_or(HttpError::Header)?;
            if name.is_empty() || name.bytes().any(|b| b <= b' ' || b >= 0x7f) {
                return Err(HttpError::Header);
            }
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                for v in value.split(',') {
                    let v = v.trim();
                    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
                        return Err(HttpError::ContentLength);
                    }
                    let n: usize = v.parse().map_err(|_| HttpError::ContentLength)?;
                    if length.is_some_and(|l| l != n) {
                        return Err(HttpError::ContentLength);
                    }
                    length = Some(n);
                }
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                for coding in value.split(',').map(str::trim).filter(|c| !c.is_empty()) {
                    if coding.eq_ignore_ascii_case("chunked") {
                        chunked = true;
                    } else if !coding.eq_ignore_ascii_case("identity") {
                        return Err(HttpError::Coding);
                    }
                }
            } else if name.eq_ignore_ascii_case("content-encoding") {
                if !value.eq_ignore_ascii_case("identity") {
                    return Err(HttpError::Coding);
                }
            } else if name.eq_ignore_ascii_case("connection")
                && value.split(',').any(|t| t.trim().eq_ignore_ascii_case("close"))
            {
                self.keep_alive = false;
            }
        }
        self.framing = if chunked {
            Framing::Chunked
        } else if let Some(n) = length {
            if n > self.body_limit {
                return Err(HttpError::BodyTooLarge(self.body_limit));
            }
            Framing::Length(n)
        } else if status == 204 || status == 304 {
            Framing::Length(0)
        } else {
            Framing::Close
        };
        self.state = match self.framing {
            Framing::Chunked => State::ChunkSize,
            Framing::Length(0) => State::Done,
            _ => State::Body,
        };
        Ok(true)
    }

    fn body_bytes(&mut self, body: &mut Vec<u8>) -> Result<bool, HttpError> {
        if self.buf.is_empty() {
            return Ok(false);
        }
        let take = match self.framing {
            Framing::Length(n) => (n - self.body_seen).min(self.buf.len()),
            _ => self.buf.len(),
        };
        self.count_body(take)?;
        body.extend(self.buf.drain(..take));
        if let Framing::Length(n) = self.framing {
            if self.body_seen == n {
                self.state = State::Done;
            }
        }
        Ok(true)
    }

    fn chunk_size(&mut self) -> Result<bool, HttpError> {
        let Some((used, line)) = take_line(&self.buf) else {
            if self.buf.len() > MAX_CHUNK_LINE {
                return Err(HttpError::Chunk);
            }
            return Ok(false);
        };
        if used > MAX_CHUNK_LINE {
            return Err(HttpError::Chunk);
        }
        let hex = line.split(|b| *b == b';').next().unwrap_or(&[]);
        let hex = std::str::from_utf8(hex).map_err(|_| HttpError::Chunk)?.trim();
        if hex.is_empty() || hex.len() > 8 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(HttpError::Chunk);
        }
        let size = usize::from_str_radix(hex, 16).map_err(|_| HttpError::Chunk)?;
        self.buf.drain(..used);
        self.state = if size == 0 { State::Trailers } else { State::ChunkData(size) };
        Ok(true)
    }

    fn chunk_data(&mut self, left: usize, body: &mut Vec<u8>) -> Result<bool, HttpError> {
        if self.buf.is_empty() {
            return Ok(false);
        }
        let take = left.min(self.buf.len());
        self.count_body(take)?;
        body.extend(self.buf.drain(..take));
        self.state = if take == left { State::ChunkEnd } else { State::ChunkData(left - take) };
        Ok(true)
    }

    fn chunk_end(&mut self) -> Result<bool, HttpError> {
        if self.buf.starts_with(b"\r\n") {
            self.buf.drain(..2);
        } else if self.buf.starts_with(b"\n") {
            self.buf.drain(..1);
        } else if self.buf.len() >= 2 || self.buf.first().is_some_and(|b| *b != b'\r') {
            return Err(HttpError::Chunk);
        } else {
            return Ok(false);
        }
        self.state = State::ChunkSize;
        Ok(true)
    }

    fn trailers(&mut self) -> Result<bool, HttpError> {
        let Some((used, line)) = take_line(&self.buf) else {
            self.count_head(0)?;
            if self.head_bytes.saturating_add(self.buf.len()) > MAX_HEADER {
                return Err(HttpError::HeaderTooLarge);
            }
            return Ok(false);
        };
        let last = line.is_empty();
        self.count_head(used)?;
        self.buf.drain(..used);
        if last {
            self.state = State::Done;
        }
        Ok(true)
    }
}

/// The position after the first LF in `buf` and the line without its CR LF.
fn take_line(buf: &[u8]) -> Option<(usize, &[u8])> {
    let i = buf.iter().position(|b| *b == b'\n')?;
    let line = buf.get(..i)?;
    Some((i + 1, line.strip_suffix(b"\r").unwrap_or(line)))
}

/// The end of the header section (after the blank line), CRLF or bare LF.
fn find_head_end(buf: &[u8]) -> Option<usize> {
    let mut i = 0;
    while let Some(off) = buf.get(i..)?.iter().position(|b| *b == b'\n') {
        let nl = i + off;
        let rest = buf.get(nl + 1..)?;
        if rest.starts_with(b"\n") {
            return Some(nl + 2);
        }
        if rest.starts_with(b"\r\n") {
            return Some(nl + 3);
        }
        i = nl + 1;
    }
    None
}

fn parse_status(line: &str) -> Result<u16, HttpError> {
    let rest = line.strip_prefix("HTTP/1.").ok_or(HttpError::StatusLine)?;
    let mut parts = rest.splitn(3, ' ');
    let minor = parts.next().unwrap_or("");
    if minor.len() != 1 || !minor.bytes().all(|b| b.is_ascii_digit()) {
        return Err(HttpError::StatusLine);
    }
    let code = parts.next().unwrap_or("");
    if code.len() != 3 || !code.bytes().all(|b| b.is_ascii_digit()) {
        return Err(HttpError::StatusLine);
    }
    let status: u16 = code.parse().map_err(|_| HttpError::StatusLine)?;
    if status < 100 {
        return Err(HttpError::StatusLine);
    }
    Ok(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(input: &[u8], limit: usize) -> Result<(u16, Vec<u8>, bool), HttpError> {
        let mut d = ResponseDecoder::new(limit);
        let mut body = Vec::new();
        let done = d.feed(input, &mut body)?;
        Ok((d.status().unwrap_or(0), body, done))
    }

    #[test]
    fn a_chunked_stream_hands_out_each_chunk_as_it_comes() {
        let mut d = ResponseDecoder::new(usize::MAX);
        let mut body = Vec::new();
        let head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert!(!d.feed(head, &mut body).unwrap());
        assert_eq!(d.status(), Some(200));
        assert!(!d.feed(b"5\r\nhel", &mut body).unwrap());
        assert_eq!(body, b"hel");
        assert!(!d.feed(b"lo\r\n", &mut body).unwrap());
        assert!(d.feed(b"0\r\n\r\n", &mut body).unwrap());
        assert_eq!(body, b"hello");
        assert!(d.reusable());
    }

    #[test]
    fn content_length_and_limits() {
        let (s, b, done) =
            all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\n{}", 10).unwrap();
        assert_eq!((s, b.as_slice(), done), (404, &b"{}"[..], true));
        assert_eq!(
            all(b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n", 10),
            Err(HttpError::BodyTooLarge(10))
        );
        assert_eq!(
            all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nb\r\n", 10).map(|r| r.2),
            Ok(false)
        );
        assert_eq!(
            all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nb\r\nhello world\r\n", 10),
            Err(HttpError::BodyTooLarge(10))
        );
        assert_eq!(
            all(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 10),
            Err(HttpError::ContentLength)
        );
        assert_eq!(all(b"HTTP/1.1 2x0 OK\r\n\r\n", 10), Err(HttpError::StatusLine));
        assert_eq!(
            all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", 10),
            Err(HttpError::Coding)
        );
    }

    #[test]
    fn a_close_delimited_body_ends_with_the_connection() {
        let mut d = ResponseDecoder::new(100);
        let mut body = Vec::new();
        assert!(!d.feed(b"HTTP/1.0 200 OK\r\n\r\nabc", &mut body).unwrap());
        d.finish().unwrap();
        assert_eq!(body, b"abc");
        assert!(!d.reusable());
        let mut d = ResponseDecoder::new(100);
        d.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab", &mut body).unwrap();
        assert_eq!(d.finish(), Err(HttpError::Truncated));
    }

    #[test]
    fn an_endless_header_is_refused() {
        let mut d = ResponseDecoder::new(100);
        let mut body = Vec::new();
        d.feed(b"HTTP/1.1 200 OK\r\n", &mut body).unwrap();
        let line = vec![b'a'; MAX_HEADER];
        assert_eq!(d.feed(&line, &mut body), Err(HttpError::HeaderTooLarge));
    }

    #[test]
    fn post_carries_its_length() {
        let r = post("127.0.0.1:2379", "/v3/kv/range", b"{}");
        let text = String::from_utf8(r).unwrap();
        assert!(text.starts_with("POST /v3/kv/range HTTP/1.1\r\nHost: 127.0.0.1:2379\r\n"));
        assert!(text.ends_with("Content-Length: 2\r\n\r\n{}"));
    }
}
