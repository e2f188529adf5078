// SPDX-License-Identifier: Apache-2.0
//! keelson's one HTTP/1.1 response parser (RFC 9112), without I/O: [`ResponseDecoder`] takes
//! the bytes a server sends, in whatever pieces they arrive, and hands the de-chunked body out
//! as it is decoded, so a caller may collect a whole body (the config fetch, the kubelet
//! probe) or read a stream's frames before the response ends (etcd's watches). Bodies framed
//! by `Content-Length`, by chunked transfer coding, or by the end of the connection.
//! Everything a server chooses is bounded: the header section, the number of interim (1xx)
//! responses, each chunk-size line, and the body (a limit the caller gives).
//!
//! Request heads, which servers parse, are a different grammar and live with each server.

/// The header section's limit (status line, headers, and a chunked body's trailers).
pub const MAX_HEADER: usize = 16 << 10;
/// Interim responses (`100 Continue`, `103 Early Hints`) skipped before giving up.
const MAX_INTERIM: usize = 4;
/// A chunk-size line (hex size and extensions).
const MAX_CHUNK_LINE: usize = 1024;

/// Why a response was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    /// The status line is not `HTTP/1.x NNN reason`.
    #[error("not an HTTP/1.x status line")]
    StatusLine,
    /// A header line without a name and a colon, or with bytes no header may hold.
    #[error("malformed header line")]
    Header,
    /// The header section passed [`MAX_HEADER`].
    #[error("header section larger than {MAX_HEADER} bytes")]
    HeaderTooLarge,
    /// Too many interim responses.
    #[error("more than {MAX_INTERIM} interim (1xx) responses")]
    Interim,
    /// `Content-Length` that is not one number (or several that differ).
    #[error("invalid Content-Length")]
    ContentLength,
    /// A transfer or content coding other than chunked/identity (its first 32 characters).
    #[error("unsupported coding {0:?}")]
    Coding(String),
    /// The body passed the caller's limit (or said it would).
    #[error("body larger than {0} bytes")]
    BodyTooLarge(usize),
    /// A chunk-size line that is not hex, or too long; a chunk not ended by its line end.
    #[error("malformed chunk")]
    Chunk,
    /// The connection ended before the response did.
    #[error("connection closed before the response was complete")]
    Truncated,
}

/// How the body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    Length(usize),
    Chunked,
    Close,
}

/// Where the decoder is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading the status line and headers.
    Head,
    /// Reading a body of known length or to the end of the connection.
    Body,
    /// Reading a chunk-size line.
    ChunkSize,
    /// Inside a chunk: this many bytes left, then CRLF.
    ChunkData(usize),
    /// The CRLF after a chunk's data.
    ChunkEnd,
    /// Trailer lines after the last chunk.
    Trailers,
    /// Complete.
    Done,
}

/// Feed it bytes; body bytes come out as they are decoded.
#[derive(Debug)]
pub struct ResponseDecoder {
    state: State,
    /// Bytes not consumed yet (a partial line).
    buf: Vec<u8>,
    /// Header-section bytes seen so far (with trailers).
    head_bytes: usize,
    interim: usize,
    status: u16,
    reason: String,
    location: Option<String>,
    framing: Framing,
    keep_alive: bool,
    /// Body bytes allowed in total (`usize::MAX` for a stream bounded per frame instead).
    body_limit: usize,
    body_seen: usize,
}

impl ResponseDecoder {
    /// A decoder refusing bodies larger than `body_limit` bytes.
    pub fn new(body_limit: usize) -> Self {
        Self {
            state: State::Head,
            buf: Vec::new(),
            head_bytes: 0,
            interim: 0,
            status: 0,
            reason: String::new(),
            location: None,
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

    /// The reason phrase as sent (printable ASCII only, at most 64 characters).
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// `Location`, when the response has one.
    pub fn location(&self) -> Option<&str> {
        self.location.as_deref()
    }

    /// True once the whole response was read.
    pub fn done(&self) -> bool {
        self.state == State::Done
    }

    /// True when the connection may carry another request after this response.
    pub fn reusable(&self) -> bool {
        self.done() && self.keep_alive && self.framing != Framing::Close && self.buf.is_empty()
    }

    /// Take `data`; decoded body bytes are appended to `body`. `Ok(true)` when complete (the
    /// rest of the connection is then ignored).
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

    /// Count header-section bytes against the limit.
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

    /// The status line and headers, when all of them are in.
    fn head(&mut self) -> Result<bool, HttpError> {
        let Some(end) = find_head_end(&self.buf) else {
            if self.head_bytes.saturating_add(self.buf.len()) > MAX_HEADER {
                return Err(HttpError::HeaderTooLarge);
            }
            return Ok(false);
        };
        self.count_head(end)?;
        let head: Vec<u8> = self.buf.drain(..end).collect();
        let mut lines = head.split(|b| *b == b'\n').map(|l| l.strip_suffix(b"\r").unwrap_or(l));
        let status_line = lines.next().unwrap_or_default();
        let (status, reason) = parse_status(status_line)?;
        let mut length: Option<usize> = None;
        let mut chunked = false;
        let mut location = None;
        let mut keep_alive = true;
        for line in lines.filter(|l| !l.is_empty()) {
            let (name, value) = parse_header(line)?;
            match name.to_ascii_lowercase().as_str() {
                "content-length" => {
                    let n = parse_length(&value)?;
                    if length.is_some_and(|l| l != n) {
                        return Err(HttpError::ContentLength);
                    }
                    length = Some(n);
                }
                "transfer-encoding" => {
                    for coding in value.split(',').map(str::trim).filter(|c| !c.is_empty()) {
                        if coding.eq_ignore_ascii_case("chunked") {
                            chunked = true;
                        } else if !coding.eq_ignore_ascii_case("identity") {
                            return Err(HttpError::Coding(short(coding)));
                        }
                    }
                }
                // No request asks for a coding; a server that compresses anyway is refused
                // rather than handed on as binary.
                "content-encoding"
                    if !value.trim().is_empty()
                        && !value.trim().eq_ignore_ascii_case("identity") =>
                {
                    return Err(HttpError::Coding(short(value.trim())));
                }
                "location" => location = Some(value),
                "connection" => {
                    keep_alive &= !value.split(',').any(|t| t.trim().eq_ignore_ascii_case("close"))
                }
                _ => {}
            }
        }
        if (100..200).contains(&status) {
            // An interim response: the real one follows.
            self.interim += 1;
            if self.interim > MAX_INTERIM {
                return Err(HttpError::Interim);
            }
            return Ok(true);
        }
        self.status = status;
        self.reason = reason;
        self.location = location;
        self.keep_alive = keep_alive;
        // 204 and 304 have no body; chunked wins over a length (RFC 9112 6.3).
        self.framing = if status == 204 || status == 304 {
            Framing::Length(0)
        } else if chunked {
            Framing::Chunked
        } else if let Some(n) = length {
            if n > self.body_limit {
                return Err(HttpError::BodyTooLarge(self.body_limit));
            }
            Framing::Length(n)
        } else {
            Framing::Close
        };
        self.state = match self.framing {
            Framing::Length(0) => State::Done,
            Framing::Chunked => State::ChunkSize,
            _ => State::Body,
        };
        Ok(true)
    }

    /// Body bytes of a length-framed or close-framed body.
    fn body_bytes(&mut self, body: &mut Vec<u8>) -> Result<bool, HttpError> {
        if self.buf.is_empty() {
            return Ok(false);
        }
        let take = match self.framing {
            Framing::Length(n) => n.saturating_sub(self.body_seen).min(self.buf.len()),
            _ => self.buf.len(),
        };
        self.count_body(take)?;
        body.extend(self.buf.drain(..take));
        if self.framing == Framing::Length(self.body_seen) {
            self.state = State::Done;
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
        // Extensions after `;` are ignored.
        let hex = line.split(|b| *b == b';').next().unwrap_or_default();
        let hex = std::str::from_utf8(hex).map_err(|_| HttpError::Chunk)?.trim();
        if hex.is_empty() || hex.len() > 8 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(HttpError::Chunk);
        }
        let size = usize::from_str_radix(hex, 16).map_err(|_| HttpError::Chunk)?;
        // A chunk that says it will pass the limit is refused before its data comes.
        if self.body_seen.saturating_add(size) > self.body_limit {
            return Err(HttpError::BodyTooLarge(self.body_limit));
        }
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
        match take_line(&self.buf) {
            Some((used, [])) => {
                self.buf.drain(..used);
                self.state = State::ChunkSize;
                Ok(true)
            }
            Some(_) => Err(HttpError::Chunk),
            None if self.buf.len() > 2 => Err(HttpError::Chunk),
            None => Ok(false),
        }
    }

    /// Trailer lines are skipped (counted against the header limit) until the empty line.
    fn trailers(&mut self) -> Result<bool, HttpError> {
        let Some((used, line)) = take_line(&self.buf) else {
            if self.head_bytes.saturating_add(self.buf.len()) > MAX_HEADER {
                return Err(HttpError::HeaderTooLarge);
            }
            return Ok(false);
        };
        let empty = line.is_empty();
        self.count_head(used)?;
        self.buf.drain(..used);
        if empty {
            self.state = State::Done;
        }
        Ok(true)
    }
}

/// The position after the first CRLF (or bare LF) in `buf`, and the line without it.
pub fn take_line(buf: &[u8]) -> Option<(usize, &[u8])> {
    let i = buf.iter().position(|b| *b == b'\n')?;
    let line = &buf[..i];
    Some((i + 1, line.strip_suffix(b"\r").unwrap_or(line)))
}

/// The end of the header section (after the empty line), CRLF or bare LF line ends.
fn find_head_end(buf: &[u8]) -> Option<usize> {
    let mut start = 0;
    while let Some((used, line)) = take_line(&buf[start..]) {
        start += used;
        if line.is_empty() {
            return Some(start);
        }
    }
    None
}

fn short(s: &str) -> String {
    s.chars().take(32).collect()
}

/// The status code and reason of the status line that starts `buf`, once its line end is in
/// (`None` before that).
pub fn status_line(buf: &[u8]) -> Option<Result<(u16, String), HttpError>> {
    take_line(buf).map(|(_, line)| parse_status(line))
}

/// `HTTP/1.0` or `HTTP/1.1`, one space, three digits in 100..=599, then an optional reason
/// (kept as printable ASCII, at most 64 characters).
fn parse_status(line: &[u8]) -> Result<(u16, String), HttpError> {
    let line = std::str::from_utf8(line).map_err(|_| HttpError::StatusLine)?;
    let rest = line
        .strip_prefix("HTTP/1.1 ")
        .or_else(|| line.strip_prefix("HTTP/1.0 "))
        .ok_or(HttpError::StatusLine)?;
    let (code, reason) = rest.split_once(' ').unwrap_or((rest, ""));
    if code.len() != 3 || !code.bytes().all(|b| b.is_ascii_digit()) {
        return Err(HttpError::StatusLine);
    }
    let status: u16 = code.parse().map_err(|_| HttpError::StatusLine)?;
    if !(100..600).contains(&status) {
        return Err(HttpError::StatusLine);
    }
    let reason: String = reason.chars().filter(|c| (' '..='~').contains(c)).take(64).collect();
    Ok((status, reason))
}

fn parse_header(line: &[u8]) -> Result<(String, String), HttpError> {
    // Obsolete line folding (a line starting with blank) is refused, as RFC 9112 5.2 lets a
    // client do.
    if line.first().is_some_and(|b| *b == b' ' || *b == b'\t') {
        return Err(HttpError::Header);
    }
    let colon = line.iter().position(|b| *b == b':').ok_or(HttpError::Header)?;
    let (name, value) = (&line[..colon], &line[colon + 1..]);
    let token = |b: &u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(b);
    if name.is_empty() || !name.iter().all(token) {
        return Err(HttpError::Header);
    }
    if value.iter().any(|b| *b == 0 || *b == b'\r' || *b == b'\n') {
        return Err(HttpError::Header);
    }
    let value = String::from_utf8_lossy(value).trim().to_owned();
    Ok((String::from_utf8_lossy(name).into_owned(), value))
}

fn parse_length(v: &str) -> Result<usize, HttpError> {
    // `Content-Length: 5, 5` is one length said twice; anything else is refused.
    let mut n = None;
    for part in v.split(',').map(str::trim) {
        if part.is_empty() || part.len() > 12 || !part.bytes().all(|b| b.is_ascii_digit()) {
            return Err(HttpError::ContentLength);
        }
        let x: usize = part.parse().map_err(|_| HttpError::ContentLength)?;
        if n.is_some_and(|m| m != x) {
            return Err(HttpError::ContentLength);
        }
        n = Some(x);
    }
    n.ok_or(HttpError::ContentLength)
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
        // A chunk that announces more than the limit is refused at its size line.
        assert_eq!(
            all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nb\r\n", 10),
            Err(HttpError::BodyTooLarge(10))
        );
        assert_eq!(
            all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", 10).map(|r| r.2),
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
            Err(HttpError::Coding("gzip".into()))
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
}
