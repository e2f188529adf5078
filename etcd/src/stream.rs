// SPDX-License-Identifier: Apache-2.0
//! A streamed answer (watch, lease keep-alive) read without I/O: the caller feeds the bytes its
//! socket gave, in any pieces, and gets the decoded messages out. PID 1 can drive it from a
//! non-blocking socket; the blocking driver's [`crate::client::Watch`] is a loop around it.
//!
//! A 2xx answer is a series of frames; anything else is one error message, collected whole
//! (at most [`MAX_BODY`]) and returned as the server's error.

use std::collections::VecDeque;

use serde::de::DeserializeOwned;

use crate::decode::{self, DecodeError, FrameSplitter, MAX_BODY};
use crate::http::{HttpError, ResponseDecoder};
use crate::wire::HeaderOnly;

/// Why a stream ended badly.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    #[error("HTTP: {0}")]
    Http(#[from] HttpError),
    #[error("{0}")]
    Decode(#[from] DecodeError),
    /// The answer ended (its last chunk, or the connection) after these frames.
    #[error("the stream ended")]
    Ended,
}

/// One streamed answer.
#[derive(Debug)]
pub struct StreamReader<T> {
    what: &'static str,
    decoder: ResponseDecoder,
    splitter: FrameSplitter,
    /// An error answer's body, collected until it is complete.
    error_body: Vec<u8>,
    ready: VecDeque<T>,
    ended: bool,
}

impl<T: DeserializeOwned> StreamReader<T> {
    /// A reader of frames of `T` (`what` names them in errors).
    pub fn new(what: &'static str) -> Self {
        Self {
            what,
            // A stream has no total limit; each frame has (`MAX_FRAME`), an error body too.
            decoder: ResponseDecoder::new(usize::MAX),
            splitter: FrameSplitter::default(),
            error_body: Vec::new(),
            ready: VecDeque::new(),
            ended: false,
        }
    }

    /// Take bytes from the connection. Frames decoded come out of [`StreamReader::next_frame`]; an
    /// error answer, a malformed frame or an error frame is an error here.
    pub fn feed(&mut self, data: &[u8]) -> Result<(), StreamError> {
        let mut body = Vec::new();
        // What decoded before a framing error is still delivered: the frames a server sent
        // before it broke the stream do not depend on how the bytes were cut into reads.
        let framing = self.decoder.feed(data, &mut body);
        if framing == Ok(true) {
            self.ended = true;
        }
        let Some(status) = self.decoder.status() else {
            return framing.map(drop).map_err(Into::into);
        };
        if !(200..300).contains(&status) {
            self.error_body.extend_from_slice(&body);
            if self.error_body.len() > MAX_BODY {
                return Err(HttpError::BodyTooLarge(MAX_BODY).into());
            }
            framing?;
            if self.ended {
                return Err(self.server_error(status));
            }
            return Ok(());
        }
        self.splitter.push(&body);
        while let Some(f) = self.splitter.next_frame()? {
            self.ready.push_back(decode::frame(self.what, &f)?);
        }
        framing.map(drop).map_err(Into::into)
    }

    /// The connection closed.
    pub fn eof(&mut self) -> Result<(), StreamError> {
        let done = self.decoder.finish();
        self.ended = true;
        match self.decoder.status() {
            Some(status) if !(200..300).contains(&status) => Err(self.server_error(status)),
            _ => done.map_err(Into::into),
        }
    }

    fn server_error(&self, status: u16) -> StreamError {
        match decode::unary::<HeaderOnly>(self.what, status, &self.error_body) {
            Err(e) => e.into(),
            Ok(_) => StreamError::Ended,
        }
    }

    /// The next decoded frame; `Err(Ended)` once none is left and the answer is over.
    pub fn next_frame(&mut self) -> Result<Option<T>, StreamError> {
        match self.ready.pop_front() {
            Some(t) => Ok(Some(t)),
            None if self.ended => Err(StreamError::Ended),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::WatchResponse;

    #[test]
    fn frames_come_out_as_their_bytes_arrive() {
        let answer = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1c\r\n{\"result\":{\"created\":true}}\n\r\n";
        let mut s = StreamReader::<WatchResponse>::new("watch");
        for b in answer.chunks(5) {
            s.feed(b).unwrap();
        }
        assert!(s.next_frame().unwrap().unwrap().created);
        assert_eq!(s.next_frame(), Ok(None));
        s.feed(b"0\r\n\r\n").unwrap();
        assert_eq!(s.next_frame(), Err(StreamError::Ended));
    }

    #[test]
    fn an_error_answer_is_read_whole_and_returned_as_the_servers_error() {
        let body = r#"{"error":"unexpected EOF","message":"unexpected EOF","code":2}"#;
        let answer = format!(
            "HTTP/1.1 500 Internal Server Error\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let (a, b) = answer.as_bytes().split_at(answer.len() - 10);
        let mut s = StreamReader::<WatchResponse>::new("watch");
        s.feed(a).unwrap();
        match s.feed(b) {
            Err(StreamError::Decode(e)) => {
                assert_eq!((e.code(), e.message()), (Some(2), Some("unexpected EOF")))
            }
            other => panic!("{other:?}"),
        }
        // Cut off by the connection: the part that came is still the error.
        let mut s = StreamReader::<WatchResponse>::new("watch");
        s.feed(b"HTTP/1.1 503 Service Unavailable\r\n\r\n{\"code\":14,\"message\":\"x\"}").unwrap();
        assert!(matches!(s.eof(), Err(StreamError::Decode(e)) if e.code() == Some(14)));
    }

    #[test]
    fn frames_before_a_broken_chunk_come_out_however_the_bytes_were_read() {
        // Found by the fuzz target: in one read the chunk error hid the frames before it.
        let answer = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1c\r\n{\"result\":{\"created\":true}}\n\r\nzz\r\n";
        let mut s = StreamReader::<WatchResponse>::new("watch");
        assert_eq!(s.feed(answer), Err(StreamError::Http(HttpError::Chunk)));
        assert!(s.next_frame().unwrap().unwrap().created);
    }

    #[test]
    fn an_error_frame_and_a_broken_stream_are_errors() {
        let mut s = StreamReader::<WatchResponse>::new("watch");
        let e = s.feed(b"HTTP/1.1 200 OK\r\n\r\n{\"error\":{\"grpc_code\":14,\"message\":\"transport is closing\"}}");
        assert!(matches!(e, Err(StreamError::Decode(d)) if d.code() == Some(14)));
        let mut s = StreamReader::<WatchResponse>::new("watch");
        s.feed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"res").unwrap();
        assert_eq!(s.eof(), Err(StreamError::Http(HttpError::Truncated)));
    }
}
