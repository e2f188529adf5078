// SPDX-License-Identifier: Apache-2.0
//! One API connection: its buffers, its deadlines and the bounds that keep a client from
//! stalling or exhausting the node.
//! - a request line is at most [`MAX_REQUEST`] bytes; a longer one gets an error and the
//!   connection is closed;
//! - a request line must be complete within [`REQUEST_DEADLINE`] of its first byte: a client
//!   dripping bytes is answered with an error and closed, however often it sends;
//! - a connection with no stream open that does nothing for [`IDLE`] is closed;
//! - at most [`READ_BUDGET`] bytes are read per wakeup;
//! - output waiting for a slow reader is capped at [`WRITE_CAP`]; a watcher over the cap is
//!   dropped (it can reconnect and get the current state again);
//! - a TLS handshake must be done within [`REQUEST_DEADLINE`] of the accept.
//!
//! A connection whose first bytes are the HTTP/2 client preface speaks gRPC
//! ([`super::rpc`]) instead of JSON lines; the same bounds hold, and on top of them output
//! that the client does not take for [`super::rpc::STALL`] drops the connection.

use std::io::ErrorKind;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::protocol::{self, ProtocolError, Query, MAX_REQUEST};
use super::rpc::GrpcConn;
use super::slots::{Class, Source};
use super::transport::{Access, Transport};
use crate::reactor::Reactor;

/// Closed after this long without a byte in either direction (unless streaming).
pub const IDLE: Duration = Duration::from_secs(10);
pub use super::transport::REQUEST_DEADLINE;
/// Most bytes queued for one connection before a streaming one is dropped.
pub const WRITE_CAP: usize = 4 << 20;
/// Bytes read from one connection per wakeup (level-triggered epoll brings us back): one busy
/// client cannot monopolise a loop iteration.
const READ_BUDGET: usize = 256 << 10;

/// What a connection speaks, from its first bytes.
pub enum Proto {
    /// Not known yet: the bytes so far are a prefix of the HTTP/2 client preface.
    Sniff,
    /// JSON lines (anything that is not the HTTP/2 preface).
    Json,
    /// gRPC over HTTP/2.
    Grpc(Box<GrpcConn>),
}

/// A client connection.
pub struct Conn {
    pub(super) stream: Box<dyn Transport>,
    rbuf: Vec<u8>,
    wbuf: Vec<u8>,
    /// Bytes of `wbuf` already written.
    woff: usize,
    /// When the connection was accepted: the oldest idle one makes room for a new one.
    pub(super) accepted: Instant,
    last_activity: Instant,
    /// When output last moved (or started waiting).
    last_write: Instant,
    /// What it speaks.
    pub(super) proto: Proto,
    /// When the first byte of the unfinished request line in `rbuf` arrived.
    line_started: Option<Instant>,
    /// The watch this connection streams.
    pub(super) watch: Option<Query>,
    /// Following logs from this sequence number.
    pub(super) follow: Option<u64>,
    /// Stop reading; close once the output is written.
    closing: bool,
    /// What epoll watches for now (read, write).
    interest: (bool, bool),
    /// The slots it counts in.
    pub(super) class: Class,
    /// Where a TLS connection comes from (none for the local socket).
    pub(super) source: Option<Source>,
}

impl Conn {
    /// A connection just accepted (and registered for reading), counted as `class`.
    pub fn new(stream: Box<dyn Transport>, class: Class, now: Instant) -> Self {
        Self {
            stream,
            rbuf: Vec::new(),
            wbuf: Vec::new(),
            woff: 0,
            accepted: now,
            last_activity: now,
            last_write: now,
            proto: Proto::Sniff,
            line_started: None,
            watch: None,
            follow: None,
            closing: false,
            interest: (true, false),
            class,
            source: None,
        }
    }

    /// Bytes queued and not yet written.
    pub fn pending(&self) -> usize {
        self.wbuf.len() - self.woff + self.grpc().map_or(0, GrpcConn::held)
    }

    /// Bytes made for the socket and not written yet (outside the HTTP/2 engine).
    pub fn unwritten(&self) -> usize {
        self.wbuf.len() - self.woff
    }

    /// It watches resources or follows the log, or has gRPC calls open.
    pub fn streaming(&self) -> bool {
        self.watch.is_some() || self.follow.is_some() || self.grpc().is_some_and(GrpcConn::busy)
    }

    /// Its gRPC side, once it spoke the HTTP/2 preface.
    pub fn grpc(&self) -> Option<&GrpcConn> {
        match &self.proto {
            Proto::Grpc(g) => Some(g),
            _ => None,
        }
    }

    /// Its gRPC side, mutable.
    pub fn grpc_mut(&mut self) -> Option<&mut GrpcConn> {
        match &mut self.proto {
            Proto::Grpc(g) => Some(g),
            _ => None,
        }
    }

    /// Decide what it speaks from the first bytes read: the HTTP/2 client preface makes it a
    /// gRPC connection, anything else a JSON one; a prefix of the preface waits for more.
    pub fn sniff(&mut self) {
        if !matches!(self.proto, Proto::Sniff) || self.rbuf.is_empty() {
            return;
        }
        let preface = grpc::h2::PREFACE;
        let n = self.rbuf.len().min(preface.len());
        if self.rbuf[..n] != preface[..n] {
            self.proto = Proto::Json;
        } else if n == preface.len() {
            self.proto = Proto::Grpc(Box::default());
        }
    }

    /// Everything read so far (a gRPC connection's input goes to its HTTP/2 engine whole).
    pub fn take_input(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.rbuf)
    }

    /// Queue one line.
    pub fn send(&mut self, v: &Value) {
        if self.grpc().is_some() {
            // A JSON answer (an error line) means nothing to an HTTP/2 client.
            return;
        }
        if self.wbuf.len() == self.woff {
            self.last_write = Instant::now();
        }
        // Serializing a `Value` cannot fail.
        let _ = serde_json::to_writer(&mut self.wbuf, v);
        self.wbuf.push(b'\n');
    }

    /// What the client may do (the role its certificate carries, for TLS).
    pub fn access(&self) -> Access {
        self.stream.access()
    }

    /// Write what the socket takes. Err: the peer is gone.
    fn flush(&mut self, now: Instant) -> std::io::Result<()> {
        self.stream.flush_queued()?;
        if let Proto::Grpc(g) = &mut self.proto {
            let out = g.take_output();
            if !out.is_empty() {
                if self.wbuf.len() == self.woff {
                    self.last_write = now;
                }
                self.wbuf.extend_from_slice(&out);
            }
        }
        while self.woff < self.wbuf.len() {
            match self.stream.write(&self.wbuf[self.woff..]) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.woff += n;
                    self.last_activity = now;
                    self.last_write = now;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.woff == self.wbuf.len() {
            self.wbuf.clear();
            self.woff = 0;
        } else if self.woff > (64 << 10) {
            self.wbuf.drain(..self.woff);
            self.woff = 0;
        }
        Ok(())
    }

    /// Output waiting that does not move drops a gRPC connection after this.
    fn write_deadline(&self) -> Option<Instant> {
        (self.grpc().is_some() && self.unwritten() > 0).then(|| self.last_write + super::rpc::STALL)
    }

    fn idle_deadline(&self) -> Option<Instant> {
        (!self.streaming() || self.closing).then(|| self.last_activity + IDLE)
    }

    fn line_deadline(&self) -> Option<Instant> {
        self.line_started.filter(|_| !self.closing).map(|t| t + REQUEST_DEADLINE)
    }

    fn handshake_deadline(&self) -> Option<Instant> {
        self.stream.handshaking().then_some(self.accepted + REQUEST_DEADLINE)
    }

    /// When it next times out.
    pub fn deadline(&self) -> Option<Instant> {
        let grpc = self.grpc().and_then(GrpcConn::deadline);
        // A stream with more to give and room for it is due now (once the socket took what
        // was written: while it is full, its writability wakes the loop).
        let pump = (self.unwritten() == 0 && self.grpc().is_some_and(GrpcConn::wants_pump))
            .then_some(self.last_activity);
        [
            self.idle_deadline(),
            self.line_deadline(),
            self.handshake_deadline(),
            self.write_deadline(),
            grpc,
            pump,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// May make room for a new connection: nothing streams and no answer is waiting.
    pub fn evictable(&self) -> bool {
        !self.streaming() && self.pending() == 0
    }

    /// Its rights are gone (the node's TLS trust changed): nothing more is streamed to it, it
    /// is read no more, and it closes once what is queued is written.
    pub fn revoke(&mut self) {
        if let Some(g) = self.grpc_mut() {
            g.revoke();
        }
        self.watch = None;
        self.follow = None;
        self.finish();
    }

    /// Stop reading; close once what is queued is written.
    pub fn finish(&mut self) {
        self.rbuf = Vec::new();
        self.line_started = None;
        self.closing = true;
    }

    /// Answer with an error and stop reading; the connection closes once it is written.
    fn refuse(&mut self, why: &str) {
        if let Some(g) = self.grpc_mut() {
            g.go_away();
        }
        self.send(&protocol::error(why));
        self.rbuf = Vec::new();
        self.line_started = None;
        self.closing = true;
    }

    /// Read what is there, within the budget; false when the connection is to be dropped.
    pub fn read(&mut self, now: Instant) -> bool {
        let mut budget = READ_BUDGET;
        let mut chunk = [0u8; 16 << 10];
        while !self.closing && budget > 0 {
            match self.stream.read(&mut chunk) {
                Ok(0) => {
                    // The client finished sending: answer what it sent, then close. A watcher
                    // keeps its write side open.
                    self.closing = true;
                }
                Ok(n) => {
                    self.rbuf.extend_from_slice(&chunk[..n]);
                    self.last_activity = now;
                    budget = budget.saturating_sub(n);
                    let json = matches!(self.proto, Proto::Json);
                    if json && self.rbuf.len() > MAX_REQUEST + 1 && !self.rbuf.contains(&b'\n') {
                        break;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        true
    }

    /// The complete request lines read (blank ones skipped), without their newlines.
    pub fn take_lines(&mut self, now: Instant) -> Vec<Vec<u8>> {
        let mut lines = Vec::new();
        let mut completed = false;
        while let Some(pos) = self.rbuf.iter().position(|b| *b == b'\n') {
            let mut line: Vec<u8> = self.rbuf.drain(..=pos).collect();
            line.truncate(pos);
            completed = true;
            if !line.iter().all(u8::is_ascii_whitespace) {
                lines.push(line);
            }
        }
        // The deadline runs from the first byte of the unfinished line: bytes after a newline
        // read now start a new line now.
        self.line_started = match self.line_started {
            _ if self.rbuf.is_empty() => None,
            Some(t) if !completed => Some(t),
            _ => Some(now),
        };
        lines
    }

    /// Refuse an unfinished line that is already too long (after answering the lines
    /// before it).
    pub fn refuse_overlong(&mut self) {
        if self.rbuf.len() > MAX_REQUEST {
            self.refuse(&ProtocolError::TooLong.to_string());
        }
    }

    /// Enforce the write cap and the deadlines; false when the connection is to be dropped
    /// now.
    pub fn check_bounds(&mut self, now: Instant) -> bool {
        let grpc = self.grpc().is_some();
        if (self.streaming() || grpc) && self.pending() > WRITE_CAP {
            log::warn!(target: "api", "dropping a client that does not read ({} bytes queued)", self.pending());
            return false;
        }
        if self.write_deadline().is_some_and(|d| d <= now) {
            log::warn!(target: "api", "dropping a gRPC client that does not read ({} bytes waiting for {} s)", self.unwritten(), super::rpc::STALL.as_secs());
            return false;
        }
        if self.handshake_deadline().is_some_and(|d| d <= now) {
            log::debug!(target: "api", "dropping a client whose TLS handshake did not end in time");
            return false;
        }
        if self.line_deadline().is_some_and(|d| d <= now) {
            log::debug!(target: "api", "closing a connection whose request did not end in time");
            self.refuse(&format!("request not completed within {} s", REQUEST_DEADLINE.as_secs()));
        } else if self.idle_deadline().is_some_and(|d| d <= now) {
            log::debug!(target: "api", "closing an idle connection");
            if self.closing {
                return false;
            }
            // Said once, so a client that was too slow to send learns why it was closed.
            self.refuse(&format!("closed after {} s without a request", IDLE.as_secs()));
        }
        true
    }

    /// Flush and update the epoll interest; false when the connection is done.
    pub fn settle(&mut self, token: u64, reactor: &Reactor, now: Instant) -> bool {
        if self.flush(now).is_err() {
            return false;
        }
        if self.grpc().is_some_and(GrpcConn::done) {
            self.closing = true;
        }
        if self.closing && self.pending() == 0 && !self.stream.wants_write() {
            self.stream.close();
            return false;
        }
        let want = (!self.closing, self.pending() > 0 || self.stream.wants_write());
        if want != self.interest {
            if let Err(e) = reactor.interest(self.stream.fd(), token, want.0, want.1) {
                log::warn!(target: "api", "{e}");
                return false;
            }
            self.interest = want;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    fn pair() -> (Conn, UnixStream) {
        let (ours, theirs) = UnixStream::pair().unwrap_or_else(|e| unreachable!("{e}"));
        ours.set_nonblocking(true).unwrap_or_else(|e| unreachable!("{e}"));
        (Conn::new(Box::new(ours), Class::Local, Instant::now()), theirs)
    }

    #[test]
    fn the_first_bytes_decide_the_protocol() {
        let (mut c, _peer) = pair();
        c.rbuf = b"PRI * HTTP/2".to_vec();
        c.sniff();
        assert!(matches!(c.proto, Proto::Sniff), "a prefix of the preface waits");
        c.rbuf.extend_from_slice(b".0\r\n\r\nSM\r\n\r\n");
        c.sniff();
        assert!(c.grpc().is_some());
        let (mut c, _peer) = pair();
        c.rbuf = b"{\"op\":\"version\"}\n".to_vec();
        c.sniff();
        assert!(matches!(c.proto, Proto::Json));
        let (mut c, _peer) = pair();
        c.rbuf = b"PRX".to_vec();
        c.sniff();
        assert!(matches!(c.proto, Proto::Json), "one byte off the preface is JSON");
    }

    #[test]
    fn a_grpc_client_that_takes_no_output_is_dropped_after_the_stall() {
        let (mut c, _peer) = pair();
        c.proto = Proto::Grpc(Box::default());
        let now = Instant::now();
        // More than the socket buffer takes; the peer never reads.
        c.wbuf = vec![0; 8 << 20];
        c.last_write = now;
        assert!(c.flush(now).is_ok());
        assert!(c.unwritten() > 0);
        assert_eq!(c.write_deadline(), Some(now + super::super::rpc::STALL));
        // Over the 4 MiB cap already: dropped at once, whatever the deadline.
        assert!(!c.check_bounds(now));
        // Under the cap, it is the stall that drops it.
        c.wbuf.truncate(c.woff + (1 << 20));
        assert!(c.check_bounds(now + Duration::from_secs(1)));
        assert!(!c.check_bounds(now + super::super::rpc::STALL));
    }
}
