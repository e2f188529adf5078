// SPDX-License-Identifier: Apache-2.0
//! One API connection: its buffers, its deadlines and the bounds that keep a client from
//! stalling or exhausting the node. A connection speaks gRPC ([`super::rpc`]): its first
//! bytes must be the HTTP/2 client preface, anything else is closed at once.
//! - the preface must be complete within [`REQUEST_DEADLINE`] of its first byte, and each
//!   request within the same time of its head ([`super::rpc`]): a client dripping bytes is
//!   told why (GOAWAY with a reason) and closed, however often it sends;
//! - a connection with no call open that does nothing for [`IDLE`] is closed;
//! - at most [`READ_BUDGET`] bytes are read per wakeup;
//! - output waiting for a slow reader is capped at [`WRITE_CAP`], and output that does not
//!   move for [`super::rpc::STALL`] drops the connection;
//! - a TLS handshake must be done within [`REQUEST_DEADLINE`] of the accept.

use std::io::ErrorKind;
use std::time::{Duration, Instant};

use super::rpc::GrpcConn;
use super::slots::{Class, Source};
use super::transport::{Access, Transport};
use crate::reactor::Reactor;

/// Closed after this long without a byte in either direction (unless a call is open).
pub const IDLE: Duration = Duration::from_secs(10);
pub use super::transport::REQUEST_DEADLINE;
/// Most bytes queued for one connection before it is dropped.
pub const WRITE_CAP: usize = 4 << 20;
/// Bytes read from one connection per wakeup (level-triggered epoll brings us back): one busy
/// client cannot monopolise a loop iteration.
const READ_BUDGET: usize = 256 << 10;

/// Where a connection is, from its first bytes.
pub enum Proto {
    /// Not known yet: the bytes so far are a prefix of the HTTP/2 client preface.
    Sniff,
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
    /// Since when output waits that the client does not take (in the socket, behind its
    /// flow-control windows, in the TLS session), as of the last flush; moves with it.
    held_since: Option<Instant>,
    /// Whether the preface came.
    pub(super) proto: Proto,
    /// When the first byte of an unfinished preface arrived.
    preface_started: Option<Instant>,
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
            held_since: None,
            proto: Proto::Sniff,
            preface_started: None,
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

    /// It has gRPC calls open (a stream, or a call being answered).
    pub fn streaming(&self) -> bool {
        self.grpc().is_some_and(GrpcConn::busy)
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

    /// Check the first bytes read against the HTTP/2 client preface: the whole preface makes
    /// it a gRPC connection, a prefix of it waits for more (within [`REQUEST_DEADLINE`]).
    /// False: anything else, which is no protocol the node speaks; the connection is to be
    /// dropped.
    pub fn sniff(&mut self, now: Instant) -> bool {
        if !matches!(self.proto, Proto::Sniff) || self.rbuf.is_empty() {
            return true;
        }
        let preface = grpc::h2::PREFACE;
        let n = self.rbuf.len().min(preface.len());
        if self.rbuf[..n] != preface[..n] {
            log::debug!(target: "api", "closing a connection that does not speak HTTP/2");
            return false;
        }
        if n == preface.len() {
            self.proto = Proto::Grpc(Box::default());
            self.preface_started = None;
        } else {
            self.preface_started.get_or_insert(now);
        }
        true
    }

    /// Everything read so far (a gRPC connection's input goes to its HTTP/2 engine whole).
    pub fn take_input(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.rbuf)
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

    /// Output waiting that does not move drops a gRPC connection: bytes the socket does not
    /// take, after [`super::rpc::STALL`]; bytes held further up (behind flow-control windows
    /// the client never opens again, in the TLS session), after twice that, so a stalled
    /// stream is reset on its own first ([`super::rpc`]) and the connection goes only when
    /// nothing moves at all (a watcher that stopped reading, whose stream ended meanwhile).
    fn write_deadline(&self) -> Option<Instant> {
        self.grpc()?;
        let stall = super::rpc::STALL;
        if self.unwritten() > 0 {
            Some(self.last_write + stall)
        } else {
            self.held_since.map(|t| t + 2 * stall)
        }
    }

    fn idle_deadline(&self) -> Option<Instant> {
        (!self.streaming() || self.closing).then(|| self.last_activity + IDLE)
    }

    fn preface_deadline(&self) -> Option<Instant> {
        self.preface_started.filter(|_| !self.closing).map(|t| t + REQUEST_DEADLINE)
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
            self.preface_deadline(),
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
        self.finish();
    }

    /// Stop reading; close once what is queued is written.
    pub fn finish(&mut self) {
        self.rbuf = Vec::new();
        self.preface_started = None;
        self.closing = true;
    }

    /// Say why it is closed (a GOAWAY whose debug data is `why`; before the preface is
    /// complete, after the server's own preface) and stop reading; the connection closes once
    /// it is written.
    pub fn refuse(&mut self, why: &str) {
        if matches!(self.proto, Proto::Sniff) {
            self.proto = Proto::Grpc(Box::default());
        }
        if let Some(g) = self.grpc_mut() {
            g.go_away(why);
        }
        self.finish();
    }

    /// Say why (see [`Self::refuse`]), write what the socket takes now, and close.
    pub fn refuse_now(&mut self, why: &str, now: Instant) {
        self.refuse(why);
        let _ = self.flush(now);
        self.stream.close();
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
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        true
    }

    /// Enforce the write cap and the deadlines; false when the connection is to be dropped
    /// now.
    pub fn check_bounds(&mut self, now: Instant) -> bool {
        if self.pending() > WRITE_CAP {
            log::warn!(target: "api", "dropping a client that does not read ({} bytes queued)", self.pending());
            return false;
        }
        if self.write_deadline().is_some_and(|d| d <= now) {
            log::warn!(target: "api", "dropping a client that does not read (gRPC: {} bytes waiting)", self.pending());
            return false;
        }
        if self.handshake_deadline().is_some_and(|d| d <= now) {
            log::debug!(target: "api", "dropping a client whose TLS handshake did not end in time");
            return false;
        }
        if self.preface_deadline().is_some_and(|d| d <= now) {
            log::debug!(target: "api", "closing a connection whose preface did not end in time");
            self.refuse(&format!("request not completed within {} s", REQUEST_DEADLINE.as_secs()));
        } else if self.idle_deadline().is_some_and(|d| d <= now) {
            // Frames made this turn (a stream's reset) are given their chance to go first.
            let fresh = self.grpc().is_some_and(|g| g.held() > g.blocked());
            if self.held_since.is_some() && !fresh {
                // Idle with output that never left (a watcher whose stream was reset because
                // it stopped reading): nothing it would be told would reach it either.
                log::warn!(target: "api", "dropping a client that does not read ({} bytes waiting, idle for {} s)", self.pending(), IDLE.as_secs());
                return false;
            }
            log::debug!(target: "api", "closing an idle connection");
            if self.closing {
                return false;
            }
            // Said once, so a client that was too slow to send learns why it was closed.
            self.refuse(&format!("closed after {} s without a call", IDLE.as_secs()));
        }
        true
    }

    /// Flush and update the epoll interest; false when the connection is done.
    pub fn settle(&mut self, token: u64, reactor: &Reactor, now: Instant) -> bool {
        if self.flush(now).is_err() {
            return false;
        }
        let blocked = self.grpc().map_or(0, GrpcConn::blocked);
        let held = self.unwritten() > 0 || blocked > 0 || self.stream.wants_write();
        self.held_since = match self.held_since {
            _ if !held => None,
            None => Some(now),
            // Output that moved starts the wait again.
            Some(t) => Some(t.max(self.last_write)),
        };
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
    fn only_the_http2_preface_opens_a_connection() {
        let now = Instant::now();
        let (mut c, _peer) = pair();
        c.rbuf = b"PRI * HTTP/2".to_vec();
        assert!(c.sniff(now));
        assert!(matches!(c.proto, Proto::Sniff), "a prefix of the preface waits");
        assert_eq!(c.deadline(), Some(now + REQUEST_DEADLINE), "but not for long");
        c.rbuf.extend_from_slice(b".0\r\n\r\nSM\r\n\r\n");
        assert!(c.sniff(now));
        assert!(c.grpc().is_some());
        let (mut c, _peer) = pair();
        c.rbuf = b"{\"op\":\"version\"}\n".to_vec();
        assert!(!c.sniff(now), "JSON lines are no longer spoken");
        let (mut c, _peer) = pair();
        c.rbuf = b"PRX".to_vec();
        assert!(!c.sniff(now), "one byte off the preface");
    }

    #[test]
    fn a_preface_that_drips_is_told_why_and_closed() {
        let now = Instant::now();
        let (mut c, _peer) = pair();
        c.rbuf = b"PRI".to_vec();
        assert!(c.sniff(now));
        assert!(c.check_bounds(now + Duration::from_secs(1)));
        assert!(c.check_bounds(now + REQUEST_DEADLINE), "told, then closed once written");
        let said = c.grpc_mut().map(|g| g.take_output()).unwrap_or_default();
        let text = String::from_utf8_lossy(&said);
        assert!(text.contains("request not completed within 5 s"), "{text}");
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
