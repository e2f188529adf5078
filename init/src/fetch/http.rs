// SPDX-License-Identifier: Apache-2.0
//! A minimal HTTP/1.1 client engine (RFC 9112), without I/O: [`request`] writes the one GET
//! the fetch sends, and [`ResponseParser`] takes the bytes the server sends, in whatever
//! pieces they arrive, until the response is complete. Bodies framed by `Content-Length`,
//! by chunked transfer coding, or by the end of the connection. Everything a server chooses
//! is bounded: the header section, the number of interim (1xx) responses, each chunk-size
//! line, and the body.
//!
//! This is keelson's one HTTP/1 response parser: the kubelet health probe
//! (`node::health`) reads only the status line, through [`status_line`], and the demo
//! workload's probe includes this file. The servers (the demo workload, the discovery
//! server's stats page) parse request heads, a different grammar, and keep their own.

/// The header section's limit (status line, headers, and a chunked body's trailers).
pub const MAX_HEADER: usize = 16 << 10;
/// The body's limit: a machine config is a few hundred KiB at most.
pub const MAX_BODY: usize = 4 << 20;
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
    /// A transfer or content coding other than chunked/identity.
    #[error("unsupported coding {0:?}")]
    Coding(String),
    /// The body passed [`MAX_BODY`] (or said it would).
    #[error("body larger than {MAX_BODY} bytes")]
    BodyTooLarge,
    /// A chunk-size line that is not hex, or too long.
    #[error("malformed chunk")]
    Chunk,
    /// The connection ended before the response did.
    #[error("connection closed before the response was complete")]
    Truncated,
}

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

/// How the body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    Length(usize),
    Chunked,
    Close,
}

/// Where the parser is.
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

/// Feed it bytes; it says when the response is complete.
#[derive(Debug)]
pub struct ResponseParser {
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
    body: Vec<u8>,
}

impl Default for ResponseParser {
    fn default() -> Self {
        Self {
            state: State::Head,
            buf: Vec::new(),
            head_bytes: 0,
            interim: 0,
            status: 0,
            reason: String::new(),
            location: None,
            framing: Framing::Close,
            body: Vec::new(),
        }
    }
}

/// The position after the first CRLF (or bare LF) in `buf`, and the line without it.
pub fn take_line(buf: &[u8]) -> Option<(usize, &[u8])> {
    let i = buf.iter().position(|b| *b == b'\n')?;
    let line = &buf[..i];
    Some((i + 1, line.strip_suffix(b"\r").unwrap_or(line)))
}

impl ResponseParser {
    /// True once a whole response was read (the rest of the connection is ignored).
    pub fn done(&self) -> bool {
        self.state == State::Done
    }

    /// Take more bytes; `Ok(true)` when the response is complete.
    pub fn feed(&mut self, data: &[u8]) -> Result<bool, HttpError> {
        self.buf.extend_from_slice(data);
        loop {
            let progressed = match self.state {
                State::Done => return Ok(true),
                State::Head => self.head()?,
                State::Body => self.body_bytes()?,
                State::ChunkSize => self.chunk_size()?,
                State::ChunkData(left) => self.chunk_data(left)?,
                State::ChunkEnd => self.chunk_end()?,
                State::Trailers => self.trailers()?,
            };
            if !progressed {
                return Ok(self.done());
            }
        }
    }

    /// The connection ended: the response, if that completes it.
    pub fn finish(mut self) -> Result<Response, HttpError> {
        if self.state == State::Body && self.framing == Framing::Close {
            self.state = State::Done;
        }
        self.into_response()
    }

    /// The response, once [`ResponseParser::feed`] said it was complete.
    pub fn into_response(self) -> Result<Response, HttpError> {
        if self.state != State::Done {
            return Err(HttpError::Truncated);
        }
        Ok(Response {
            status: self.status,
            reason: self.reason,
            location: self.location,
            body: self.body,
        })
    }

    /// Count header-section bytes against the limit.
    fn count_head(&mut self, n: usize) -> Result<(), HttpError> {
        self.head_bytes += n;
        if self.head_bytes > MAX_HEADER {
            return Err(HttpError::HeaderTooLarge);
        }
        Ok(())
    }

    /// The status line and headers, when all of them are in.
    fn head(&mut self) -> Result<bool, HttpError> {
        let Some(end) = find_head_end(&self.buf) else {
            if self.head_bytes + self.buf.len() > MAX_HEADER {
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
                // The request asked for no coding; a server that compresses anyway is refused
                // rather than handed to the config parser as binary.
                "content-encoding"
                    if !value.trim().is_empty()
                        && !value.trim().eq_ignore_ascii_case("identity") =>
                {
                    return Err(HttpError::Coding(short(value.trim())));
                }
                "location" => location = Some(value),
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
        // Chunked wins over a length (RFC 9112 6.3); 204 and 304 have no body.
        self.framing = if status == 204 || status == 304 {
            Framing::Length(0)
        } else if chunked {
            Framing::Chunked
        } else if let Some(n) = length {
            if n > MAX_BODY {
                return Err(HttpError::BodyTooLarge);
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
    fn body_bytes(&mut self) -> Result<bool, HttpError> {
        if self.buf.is_empty() {
            return Ok(false);
        }
        let want = match self.framing {
            Framing::Length(n) => n - self.body.len(),
            _ => self.buf.len(),
        };
        let take = want.min(self.buf.len());
        self.push_body(take)?;
        if self.framing == Framing::Length(self.body.len()) {
            self.state = State::Done;
        }
        Ok(true)
    }

    fn push_body(&mut self, take: usize) -> Result<(), HttpError> {
        if self.body.len() + take > MAX_BODY {
            return Err(HttpError::BodyTooLarge);
        }
        self.body.extend(self.buf.drain(..take));
        Ok(())
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
        if self.body.len().saturating_add(size) > MAX_BODY {
            return Err(HttpError::BodyTooLarge);
        }
        self.buf.drain(..used);
        self.state = if size == 0 { State::Trailers } else { State::ChunkData(size) };
        Ok(true)
    }

    fn chunk_data(&mut self, left: usize) -> Result<bool, HttpError> {
        if self.buf.is_empty() {
            return Ok(false);
        }
        let take = left.min(self.buf.len());
        self.push_body(take)?;
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
            if self.head_bytes + self.buf.len() > MAX_HEADER {
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
        assert_eq!(parse(big.as_bytes()), Err(HttpError::BodyTooLarge));
        let mut long = b"HTTP/1.1 200 OK\r\n\r\n".to_vec();
        long.resize(long.len() + MAX_BODY + 1, b'x');
        assert_eq!(parse_in(&long, 65536), Err(HttpError::BodyTooLarge));
        let mut chunks = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        for _ in 0..5 {
            chunks.extend_from_slice(format!("{:x}\r\n", 1 << 20).as_bytes());
            chunks.resize(chunks.len() + (1 << 20), b'y');
            chunks.extend_from_slice(b"\r\n");
        }
        assert_eq!(parse_in(&chunks, 65536), Err(HttpError::BodyTooLarge));
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
