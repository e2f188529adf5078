// SPDX-License-Identifier: Apache-2.0
//! gRPC over HTTP/2: length-prefixed messages, the request head, and the call's outcome from
//! the response head and trailers (including Trailers-Only responses). No compression: we
//! never send `grpc-encoding`, and a compressed message from the peer is an error. The service
//! (its paths) and the message limit are the caller's: each service bounds its own messages.

use std::time::Duration;

use crate::h2::{field, Field};

/// gRPC status codes (<https://grpc.github.io/grpc/core/md_doc_statuscodes.html>).
pub mod code {
    pub const OK: u32 = 0;
    pub const CANCELLED: u32 = 1;
    pub const UNKNOWN: u32 = 2;
    pub const INVALID_ARGUMENT: u32 = 3;
    pub const DEADLINE_EXCEEDED: u32 = 4;
    pub const NOT_FOUND: u32 = 5;
    pub const ALREADY_EXISTS: u32 = 6;
    pub const PERMISSION_DENIED: u32 = 7;
    pub const RESOURCE_EXHAUSTED: u32 = 8;
    pub const FAILED_PRECONDITION: u32 = 9;
    pub const ABORTED: u32 = 10;
    pub const OUT_OF_RANGE: u32 = 11;
    pub const UNIMPLEMENTED: u32 = 12;
    pub const INTERNAL: u32 = 13;
    pub const UNAVAILABLE: u32 = 14;
    pub const DATA_LOSS: u32 = 15;
    pub const UNAUTHENTICATED: u32 = 16;
}

/// A call's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub code: u32,
    pub message: String,
}

impl Status {
    pub fn new(code: u32, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }

    pub fn is_ok(&self) -> bool {
        self.code == code::OK
    }
}

/// gRPC's name of a status code (`PermissionDenied`); `code` for a number it does not define.
pub fn code_name(code: u32) -> &'static str {
    match code {
        0 => "OK",
        1 => "Canceled",
        2 => "Unknown",
        3 => "InvalidArgument",
        4 => "DeadlineExceeded",
        5 => "NotFound",
        6 => "AlreadyExists",
        7 => "PermissionDenied",
        8 => "ResourceExhausted",
        9 => "FailedPrecondition",
        10 => "Aborted",
        11 => "OutOfRange",
        12 => "Unimplemented",
        13 => "Internal",
        14 => "Unavailable",
        15 => "DataLoss",
        16 => "Unauthenticated",
        _ => "code",
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = code_name(self.code);
        write!(f, "{name} ({}): {}", self.code, base::names::escape(&self.message, 512))
    }
}

/// One message with its 5-byte prefix (uncompressed flag, big-endian length).
pub fn frame_message(msg: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(msg.len() + 5);
    out.push(0);
    out.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    out.extend_from_slice(msg);
    out
}

/// Splits a stream's DATA into messages, each at most `max` bytes.
#[derive(Debug)]
pub struct MessageDecoder {
    buf: Vec<u8>,
    max: usize,
}

impl MessageDecoder {
    pub fn new(max: usize) -> Self {
        Self { buf: Vec::new(), max }
    }

    /// Add bytes and take the complete messages out.
    pub fn push(&mut self, data: &[u8], out: &mut Vec<Vec<u8>>) -> Result<(), Status> {
        self.buf.extend_from_slice(data);
        loop {
            if self.buf.len() < 5 {
                return Ok(());
            }
            if self.buf[0] != 0 {
                return Err(Status::new(
                    code::INTERNAL,
                    "compressed message, but no compression was negotiated",
                ));
            }
            let n =
                u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]) as usize;
            if n > self.max {
                return Err(Status::new(
                    code::RESOURCE_EXHAUSTED,
                    format!("message of {n} bytes exceeds the {} byte limit", self.max),
                ));
            }
            if self.buf.len() < 5 + n {
                return Ok(());
            }
            out.push(self.buf[5..5 + n].to_vec());
            self.buf.drain(..5 + n);
        }
    }

    /// Bytes of an unfinished message.
    pub fn partial(&self) -> usize {
        self.buf.len()
    }
}

/// The request head of a call to `path` (`/package.Service/Method`). `timeout` becomes
/// `grpc-timeout`.
pub fn request_headers(
    tls: bool,
    authority: &str,
    path: &str,
    user_agent: &str,
    timeout: Option<Duration>,
) -> Vec<(String, String)> {
    let mut h = vec![
        (":method".to_string(), "POST".to_string()),
        (":scheme".to_string(), if tls { "https" } else { "http" }.to_string()),
        (":path".to_string(), path.to_string()),
        (":authority".to_string(), authority.to_string()),
        ("content-type".to_string(), "application/grpc".to_string()),
        ("te".to_string(), "trailers".to_string()),
        ("user-agent".to_string(), user_agent.to_string()),
    ];
    if let Some(t) = timeout {
        h.push((
            "grpc-timeout".to_string(),
            format!("{}m", u64::try_from(t.as_millis()).unwrap_or(u64::MAX).min(99_999_999)),
        ));
    }
    h
}

/// The server's response head.
pub fn response_headers() -> Vec<(String, String)> {
    vec![(":status".into(), "200".into()), ("content-type".into(), "application/grpc".into())]
}

/// The server's trailers for `status` (`grpc-message` percent-encoded).
pub fn trailers(status: &Status) -> Vec<(String, String)> {
    let mut t = vec![("grpc-status".to_string(), status.code.to_string())];
    if !status.message.is_empty() {
        t.push(("grpc-message".to_string(), percent_encode(&status.message)));
    }
    t
}

/// gRPC's percent-encoding of `grpc-message`: printable ASCII except `%` stays.
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if (0x20..0x7f).contains(&b) && b != b'%' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Undo [`percent_encode`]; malformed escapes are kept as they are.
pub fn percent_decode(b: &[u8]) -> String {
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            if let Some(v) = hex {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What a call produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    Message(Vec<u8>),
    /// The end of the call; nothing follows.
    Status(Status),
}

/// Follows one call's response stream.
#[derive(Debug)]
pub struct ResponseReader {
    head_seen: bool,
    done: bool,
    messages: MessageDecoder,
}

impl ResponseReader {
    pub fn new(max_message: usize) -> Self {
        Self { head_seen: false, done: false, messages: MessageDecoder::new(max_message) }
    }

    pub fn is_done(&self) -> bool {
        self.done
    }

    fn finish(&mut self, status: Status, out: &mut Vec<Response>) {
        if !self.done {
            self.done = true;
            out.push(Response::Status(status));
        }
    }

    fn status_of(fields: &[Field]) -> Status {
        let Some(raw) = field(fields, "grpc-status") else {
            return Status::new(code::INTERNAL, "response ended without grpc-status");
        };
        let code = std::str::from_utf8(raw)
            .ok()
            .and_then(|s| s.parse::<u32>().ok())
            .unwrap_or(code::UNKNOWN);
        let message = field(fields, "grpc-message").map(percent_decode).unwrap_or_default();
        Status { code, message }
    }

    /// A HEADERS event on the call's stream.
    pub fn on_headers(&mut self, fields: &[Field], end_stream: bool, out: &mut Vec<Response>) {
        if self.done {
            return;
        }
        if !self.head_seen {
            self.head_seen = true;
            let status = field(fields, ":status").unwrap_or_default();
            if status != b"200" {
                let s = String::from_utf8_lossy(status).into_owned();
                // gRPC's mapping of HTTP errors from proxies and non-gRPC servers.
                let c = match status {
                    b"429" | b"502" | b"503" | b"504" => code::UNAVAILABLE,
                    b"404" => code::UNIMPLEMENTED,
                    _ => code::UNKNOWN,
                };
                return self.finish(Status::new(c, format!("HTTP status {s}")), out);
            }
            let ct = field(fields, "content-type").unwrap_or_default();
            if !ct.starts_with(b"application/grpc") {
                return self.finish(
                    Status::new(code::UNKNOWN, "response is not gRPC (content-type)"),
                    out,
                );
            }
            if field(fields, "grpc-encoding").is_some_and(|e| e != b"identity") {
                return self.finish(
                    Status::new(code::INTERNAL, "response uses a compression we did not offer"),
                    out,
                );
            }
            if end_stream {
                // Trailers-Only: the status is in the head.
                self.finish(Self::status_of(fields), out);
            }
            return;
        }
        if !end_stream {
            return self.finish(Status::new(code::INTERNAL, "trailers without END_STREAM"), out);
        }
        if self.messages.partial() > 0 {
            return self.finish(Status::new(code::INTERNAL, "stream ended inside a message"), out);
        }
        self.finish(Self::status_of(fields), out);
    }

    /// A DATA event on the call's stream.
    pub fn on_data(&mut self, data: &[u8], end_stream: bool, out: &mut Vec<Response>) {
        if self.done {
            return;
        }
        if !self.head_seen {
            return self.finish(Status::new(code::INTERNAL, "DATA before the response head"), out);
        }
        let mut msgs = Vec::new();
        if let Err(s) = self.messages.push(data, &mut msgs) {
            return self.finish(s, out);
        }
        out.extend(msgs.into_iter().map(Response::Message));
        if end_stream {
            self.finish(Status::new(code::INTERNAL, "stream ended without trailers"), out);
        }
    }

    /// The stream was reset (or refused by GOAWAY).
    pub fn on_reset(&mut self, h2_code: u32, out: &mut Vec<Response>) {
        let c = match h2_code {
            crate::h2::code::REFUSED_STREAM => code::UNAVAILABLE,
            crate::h2::code::CANCEL => code::CANCELLED,
            crate::h2::code::ENHANCE_YOUR_CALM => code::RESOURCE_EXHAUSTED,
            _ => code::INTERNAL,
        };
        self.finish(Status::new(c, format!("stream reset with HTTP/2 error {h2_code:#x}")), out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The message limit of these tests.
    const MAX: usize = 16 << 20;

    fn fields(p: &[(&str, &str)]) -> Vec<Field> {
        p.iter().map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec())).collect()
    }

    #[test]
    fn messages_split_across_frames() {
        let mut d = MessageDecoder::new(10);
        let mut out = Vec::new();
        let mut bytes = frame_message(b"abc");
        bytes.extend(frame_message(b""));
        bytes.extend(frame_message(b"0123456789"));
        for b in &bytes {
            d.push(&[*b], &mut out).unwrap();
        }
        assert_eq!(out, vec![b"abc".to_vec(), vec![], b"0123456789".to_vec()]);
        assert_eq!(
            d.push(&frame_message(&[0; 11])[..5], &mut out).unwrap_err().code,
            code::RESOURCE_EXHAUSTED
        );
        let mut d = MessageDecoder::new(10);
        assert_eq!(d.push(&[1, 0, 0, 0, 1, 0], &mut out).unwrap_err().code, code::INTERNAL);
    }

    #[test]
    fn unary_and_trailers_only() {
        let mut r = ResponseReader::new(MAX);
        let mut out = Vec::new();
        r.on_headers(
            &fields(&[(":status", "200"), ("content-type", "application/grpc+proto")]),
            false,
            &mut out,
        );
        r.on_data(&frame_message(b"x"), false, &mut out);
        r.on_headers(&fields(&[("grpc-status", "0")]), true, &mut out);
        assert_eq!(
            out,
            vec![Response::Message(b"x".to_vec()), Response::Status(Status::new(0, ""))]
        );
        assert!(r.is_done());

        let mut r = ResponseReader::new(MAX);
        let mut out = Vec::new();
        let head = [
            (":status", "200"),
            ("content-type", "application/grpc"),
            ("grpc-status", "3"),
            ("grpc-message", "cluster ID can%27t be empty%0A%E2%9C%93%zz"),
        ];
        r.on_headers(&fields(&head), true, &mut out);
        assert_eq!(
            out,
            vec![Response::Status(Status::new(3, "cluster ID can't be empty\n\u{2713}%zz"))]
        );
        // Logged escaped, on one line.
        assert_eq!(Status::new(3, "a\nb").to_string(), "InvalidArgument (3): a\\nb");
    }

    #[test]
    fn broken_responses() {
        let run = |steps: &dyn Fn(&mut ResponseReader, &mut Vec<Response>)| {
            let mut r = ResponseReader::new(MAX);
            let mut out = Vec::new();
            steps(&mut r, &mut out);
            match out.last() {
                Some(Response::Status(s)) => s.code,
                o => panic!("{o:?}"),
            }
        };
        let ok = fields(&[(":status", "200"), ("content-type", "application/grpc")]);
        assert_eq!(
            run(&|r, o| r.on_headers(&fields(&[(":status", "503")]), true, o)),
            code::UNAVAILABLE
        );
        assert_eq!(
            run(&|r, o| r.on_headers(
                &fields(&[(":status", "200"), ("content-type", "text/html")]),
                false,
                o
            )),
            code::UNKNOWN
        );
        assert_eq!(run(&|r, o| r.on_data(b"", true, o)), code::INTERNAL);
        assert_eq!(
            run(&|r, o| {
                r.on_headers(&ok, false, o);
                r.on_data(&[0, 0, 0, 0, 9, 1], false, o);
                r.on_headers(&fields(&[("grpc-status", "0")]), true, o);
            }),
            code::INTERNAL
        );
        assert_eq!(
            run(&|r, o| {
                r.on_headers(&ok, false, o);
                r.on_data(&frame_message(b"m"), true, o);
            }),
            code::INTERNAL
        );
        assert_eq!(run(&|r, o| r.on_headers(&ok, true, o)), code::INTERNAL);
        assert_eq!(run(&|r, o| r.on_reset(crate::h2::code::REFUSED_STREAM, o)), code::UNAVAILABLE);
    }

    #[test]
    fn request_head_and_trailers() {
        let h = request_headers(
            false,
            "127.0.0.1:3000",
            "/sidero.discovery.server.Cluster/Hello",
            "keelson-discovery/0.1.0",
            Some(Duration::from_secs(10)),
        );
        assert_eq!(h[2], (":path".into(), "/sidero.discovery.server.Cluster/Hello".into()));
        assert_eq!(h[1].1, "http");
        assert!(h.contains(&("te".into(), "trailers".into())));
        assert!(h.contains(&("grpc-timeout".into(), "10000m".into())));
        assert!(!h.iter().any(|(n, _)| n == "grpc-encoding"));
        let t = trailers(&Status::new(8, "100% full\n"));
        assert_eq!(t[1].1, "100%25 full%0A");
        assert_eq!(percent_decode(t[1].1.as_bytes()), "100% full\n");
    }
}
