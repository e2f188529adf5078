// SPDX-License-Identifier: Apache-2.0
//! The gateway's answers, without I/O: a unary body for its HTTP status ([`unary`]), and a
//! streamed body cut into its JSON frames ([`FrameSplitter`]) and each frame read
//! ([`frame`]). A stream is a series of `{"result":…}` objects, usually one per line, and
//! may end with an `{"error":…}` object without a newline (3.4's gateway on shutdown), so the
//! splitter follows JSON's nesting instead of lines. Everything is bounded: a frame larger
//! than its limit is an error, not a growing buffer.

use serde::de::DeserializeOwned;
use serde::Deserialize;

/// The largest unary body read (a range of many keys can be big; etcd's own request limit is
/// 1.5 MiB, its default response limit is gRPC's 2 GiB, which no caller here wants).
pub const MAX_BODY: usize = 16 << 20;
/// The largest streamed frame (one watch response: events are batched by the server).
pub const MAX_FRAME: usize = 16 << 20;
/// Server text kept in an error (escaped).
const MAX_MESSAGE: usize = 256;

/// Why an answer was refused, or what the server said went wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The server answered with an error (`code` is the gRPC code; 0 when it gave none).
    #[error("etcd answered {status}: {message} (code {code})")]
    Server { status: u16, code: i64, message: String },
    /// The body is not the message expected.
    #[error("malformed {what}: {detail}")]
    Json { what: &'static str, detail: String },
    /// A streamed frame passed [`MAX_FRAME`] or is not a JSON object.
    #[error("malformed stream frame at byte {0}")]
    Frame(usize),
    #[error("stream frame larger than {MAX_FRAME} bytes")]
    FrameTooLarge,
}

impl DecodeError {
    /// The gRPC code the server gave, if this is a server error.
    pub fn code(&self) -> Option<i64> {
        match self {
            Self::Server { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// The server's message, if this is a server error.
    pub fn message(&self) -> Option<&str> {
        match self {
            Self::Server { message, .. } => Some(message),
            _ => None,
        }
    }

    /// "required revision has been compacted" (gRPC OutOfRange).
    pub fn is_compacted(&self) -> bool {
        self.message().is_some_and(|m| m.contains("required revision has been compacted"))
    }
}

/// An error body. 3.4/3.5's gateway sends `error` and `message` and `code`; 3.6's sends
/// `code` and `message`; a stream's error frame has `grpc_code`/`http_code` on 3.4.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ErrorBody {
    error: Option<String>,
    message: Option<String>,
    code: Option<i64>,
    grpc_code: Option<i64>,
    http_code: Option<u16>,
}

impl ErrorBody {
    fn into_error(self, status: u16) -> DecodeError {
        let text = self.message.or(self.error).unwrap_or_default();
        DecodeError::Server {
            status: self.http_code.unwrap_or(status),
            code: self.grpc_code.or(self.code).unwrap_or(0),
            message: base::names::escape(&text, MAX_MESSAGE),
        }
    }
}

fn json_error(what: &'static str, e: &serde_json::Error) -> DecodeError {
    DecodeError::Json { what, detail: base::names::escape(&e.to_string(), MAX_MESSAGE) }
}

/// A unary answer: the message for a 2xx status, the server's error otherwise.
pub fn unary<T: DeserializeOwned>(
    what: &'static str,
    status: u16,
    body: &[u8],
) -> Result<T, DecodeError> {
    if !(200..300).contains(&status) {
        let parsed: ErrorBody = serde_json::from_slice(body).unwrap_or_default();
        return Err(parsed.into_error(status));
    }
    serde_json::from_slice(body).map_err(|e| json_error(what, &e))
}

#[derive(Debug, Deserialize)]
struct Frame<T> {
    result: Option<T>,
    error: Option<ErrorBody>,
}

/// One streamed frame: the message, or the error the server ended the stream with.
pub fn frame<T: DeserializeOwned>(what: &'static str, bytes: &[u8]) -> Result<T, DecodeError> {
    let f: Frame<T> = serde_json::from_slice(bytes).map_err(|e| json_error(what, &e))?;
    match (f.result, f.error) {
        (_, Some(e)) => Err(e.into_error(200)),
        (Some(r), None) => Ok(r),
        (None, None) => {
            Err(DecodeError::Json { what, detail: "frame without result or error".into() })
        }
    }
}

/// Cuts a streamed body into top-level JSON objects. Scanning state survives between pushes,
/// so a frame arriving a byte at a time is scanned once.
#[derive(Debug)]
pub struct FrameSplitter {
    buf: Vec<u8>,
    /// Where scanning resumes in `buf`.
    pos: usize,
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// Bytes consumed before `buf` (for error positions).
    offset: usize,
    max: usize,
}

impl Default for FrameSplitter {
    fn default() -> Self {
        Self::new(MAX_FRAME)
    }
}

impl FrameSplitter {
    pub fn new(max: usize) -> Self {
        Self { buf: Vec::new(), pos: 0, depth: 0, in_string: false, escaped: false, offset: 0, max }
    }

    /// Bytes held that are not a complete frame yet.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The next complete frame, if one is in.
    pub fn next_frame(&mut self) -> Result<Option<Vec<u8>>, DecodeError> {
        while self.pos < self.buf.len() {
            if self.depth == 0 {
                // Separators between frames are dropped as they are seen (at depth 0 the
                // scan is always at the start of the buffer).
                let blanks = self.buf.iter().take_while(|b| b.is_ascii_whitespace()).count();
                if blanks > 0 {
                    self.buf.drain(..blanks);
                    self.offset += blanks;
                    continue;
                }
                let b = self.buf.first().copied().unwrap_or(b' ');
                if b != b'{' {
                    return Err(DecodeError::Frame(self.offset + self.pos));
                }
                self.depth = 1;
                self.pos += 1;
                continue;
            }
            let b = self.buf.get(self.pos).copied().unwrap_or(b' ');
            self.pos += 1;
            if self.pos > self.max {
                return Err(DecodeError::FrameTooLarge);
            }
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    self.depth -= 1;
                    if self.depth == 0 && b != b'}' {
                        // `{ ... ]`: the brackets do not match, so this is not one object.
                        return Err(DecodeError::Frame(self.offset + self.pos - 1));
                    }
                    if self.depth == 0 {
                        let frame: Vec<u8> = self.buf.drain(..self.pos).collect();
                        self.offset += self.pos;
                        self.pos = 0;
                        return Ok(Some(frame));
                    }
                }
                _ => {}
            }
        }
        if self.buf.len() > self.max {
            return Err(DecodeError::FrameTooLarge);
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{
        EventType, LeaseKeepAliveResponse, RangeResponse, TxnResponse, WatchResponse,
    };

    #[test]
    fn frames_split_across_reads_and_without_a_final_newline() {
        let stream = b"{\"result\":{\"created\":true}}\n{\"result\":{\"header\":{\"revision\":\"8\"},\"events\":[{\"kv\":{\"key\":\"L3cveA==\",\"value\":\"e30=\"}}]}}\n{\"error\":{\"grpc_code\":14,\"http_code\":503,\"message\":\"transport is closing\"}}";
        for step in [1, 3, 7, stream.len()] {
            let mut s = FrameSplitter::default();
            let mut frames = Vec::new();
            for piece in stream.chunks(step) {
                s.push(piece);
                while let Some(f) = s.next_frame().unwrap() {
                    frames.push(f);
                }
            }
            assert_eq!(frames.len(), 3, "step {step}");
            let w: WatchResponse = frame("watch", &frames[0]).unwrap();
            assert!(w.created);
            let w: WatchResponse = frame("watch", &frames[1]).unwrap();
            assert_eq!(w.header.revision, 8);
            assert_eq!(w.events[0].kind, EventType::Put);
            assert_eq!(w.events[0].kv.key, b"/w/x");
            assert_eq!(w.events[0].kv.value, b"{}");
            let e = frame::<WatchResponse>("watch", &frames[2]).unwrap_err();
            assert_eq!(e.code(), Some(14));
            assert_eq!(e.message(), Some("transport is closing"));
        }
    }

    #[test]
    fn braces_inside_strings_do_not_end_a_frame() {
        let mut s = FrameSplitter::default();
        s.push(br#"{"error":{"message":"a } \" { b","code":2}}{"result":{}}"#);
        let e = frame::<WatchResponse>("watch", &s.next_frame().unwrap().unwrap()).unwrap_err();
        assert_eq!(e.message(), Some("a } \" { b"));
        assert!(s.next_frame().unwrap().is_some());
        assert_eq!(s.pending(), 0);
    }

    #[test]
    fn an_oversized_or_foreign_frame_is_an_error() {
        let mut s = FrameSplitter::new(16);
        s.push(b"{\"result\":{\"header\":{}}}");
        assert_eq!(s.next_frame(), Err(DecodeError::FrameTooLarge));
        let mut s = FrameSplitter::new(16);
        s.push(b"  [1]");
        assert_eq!(s.next_frame(), Err(DecodeError::Frame(2)));
    }

    #[test]
    fn a_frame_closed_by_a_bracket_is_not_an_object() {
        // Found by the fuzz target: an object whose nesting was balanced by a closing `]`.
        let mut s = FrameSplitter::default();
        s.push(br#"{"a":[{"b":1}]]"#);
        assert_eq!(s.next_frame(), Err(DecodeError::Frame(14)));
    }

    #[test]
    fn unary_answers_as_the_gateway_writes_them() {
        let body = br#"{"header":{"cluster_id":"14841639068965178418","member_id":"10276657743932975437","revision":"4","raft_term":"2"},"kvs":[{"key":"YQ==","create_revision":"2","mod_revision":"4","version":"3","value":"Yg=="}],"count":"1"}"#;
        let r: RangeResponse = unary("range", 200, body).unwrap();
        assert_eq!(r.header.revision, 4);
        assert_eq!(r.header.cluster_id as u64, 14841639068965178418);
        assert_eq!((r.kvs[0].version, r.kvs[0].create_revision, r.count), (3, 2, 1));
        // A failed compare: no `succeeded`, the failure branch's answers.
        let body = br#"{"header":{"revision":"4"},"responses":[{"response_range":{"header":{"revision":"4"},"kvs":[{"key":"YQ==","create_revision":"4","mod_revision":"4","version":"1","value":"bm9kZS1h"}],"count":"1"}}]}"#;
        let t: TxnResponse = unary("txn", 200, body).unwrap();
        assert!(!t.succeeded);
        assert_eq!(t.range(0).unwrap().kvs[0].value, b"node-a");
        // A lease that is gone: 200 and no TTL.
        let k: LeaseKeepAliveResponse =
            frame("keepalive", br#"{"result":{"header":{},"ID":"7"}}"#).unwrap();
        assert_eq!((k.id, k.ttl), (7, 0));
    }

    #[test]
    fn error_bodies_of_both_gateway_generations() {
        let v1 = br#"{"error":"etcdserver: requested lease not found","message":"etcdserver: requested lease not found","code":5}"#;
        let e = unary::<RangeResponse>("revoke", 404, v1).unwrap_err();
        assert_eq!(e.code(), Some(5));
        assert_eq!(e.message(), Some("etcdserver: requested lease not found"));
        let v2 =
            br#"{"code":11,"message":"etcdserver: mvcc: required revision has been compacted"}"#;
        assert!(unary::<RangeResponse>("range", 400, v2).unwrap_err().is_compacted());
        // Whatever the body, a non-2xx status is an error, and its text is escaped.
        let e = unary::<RangeResponse>("range", 502, b"\x1b[31m<html>").unwrap_err();
        assert_eq!(e, DecodeError::Server { status: 502, code: 0, message: String::new() });
        let e = unary::<RangeResponse>("range", 500, br#"{"message":"a\u001bb"}"#).unwrap_err();
        assert!(!e.message().unwrap().contains('\u{1b}'));
    }

    #[test]
    fn hostile_numbers_and_bytes_are_errors() {
        assert!(unary::<RangeResponse>("range", 200, br#"{"count":"1e99"}"#).is_err());
        assert!(unary::<RangeResponse>("range", 200, br#"{"kvs":[{"key":"_-8"}]}"#).is_err());
        assert!(unary::<RangeResponse>("range", 200, br#"{"count":1.5}"#).is_err());
        assert!(unary::<RangeResponse>("range", 200, br#""x""#).is_err());
    }
}
