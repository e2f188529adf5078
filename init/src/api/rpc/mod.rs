// SPDX-License-Identifier: Apache-2.0
//! Talos's gRPC machine API on an API connection that opened with the HTTP/2 client preface:
//! the sans-IO HTTP/2 engine of the `grpc` crate (server role) carries calls that are routed
//! by `:path` to the handlers in [`dispatch`]. The connection's transport, slots, trust and
//! deadlines stay those of every API connection ([`super::conn`]); this adds the bounds of
//! HTTP/2 and gRPC:
//! - at most [`MAX_STREAMS`] calls open at once; a request message above its method's limit
//!   is `ResourceExhausted` as soon as its length prefix arrives, and the request bodies of
//!   one connection hold at most [`BODY_BUDGET`] bytes together;
//! - a request must be complete within [`super::conn::REQUEST_DEADLINE`] of its head;
//! - a server stream is fed only while less than [`STREAM_HIGH`] bytes wait behind the
//!   client's flow-control window; a stream whose waiting bytes do not move for [`STALL`] is
//!   reset (its client stopped reading), and the other calls go on.

pub mod dispatch;
pub mod events;
mod feeds;
mod machine;
mod storage;
mod time;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use grpc::h2::{self, field, Event, Role};
use grpc::{code, Status};

use dispatch::{Call, FeedCtx, Flow, Method, Reply};

/// Calls one connection may have open at once.
pub const MAX_STREAMS: u32 = 16;
/// Bytes of unfinished request bodies one connection may hold.
pub const BODY_BUDGET: usize = 2 << 20;
/// A stream's feed is asked for more only while less than this waits on the stream.
pub const STREAM_HIGH: usize = 64 << 10;
/// A stream whose waiting bytes do not move for this long is dropped.
pub const STALL: Duration = Duration::from_secs(10);
/// Feeds are asked for more only while the connection holds less than this in all.
const CONN_HIGH: usize = 1 << 20;

fn h2_config() -> h2::Config {
    h2::Config {
        stream_window: 1 << 20,
        conn_window: 2 << 20,
        max_header_list: 16 << 10,
        max_concurrent_streams: MAX_STREAMS,
    }
}

/// One call on the connection.
enum CallState {
    /// The request is arriving.
    Receiving { method: &'static Method, body: Vec<u8>, started: Instant },
    /// A server stream.
    Streaming(Streaming),
}

struct Streaming {
    feed: Box<dyn dispatch::Feed>,
    /// Bytes waiting on the stream when last looked at, and when they last moved.
    waiting: usize,
    moved: Instant,
}

/// The gRPC side of one connection.
pub struct GrpcConn {
    h2: h2::Connection,
    calls: BTreeMap<u32, CallState>,
}

impl std::fmt::Debug for GrpcConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrpcConn").field("calls", &self.calls.len()).finish()
    }
}

impl Default for GrpcConn {
    fn default() -> Self {
        Self::new()
    }
}

impl GrpcConn {
    /// A server connection; its SETTINGS are queued.
    pub fn new() -> Self {
        Self { h2: h2::Connection::new(Role::Server, h2_config()), calls: BTreeMap::new() }
    }

    /// Bytes to write to the transport.
    pub fn take_output(&mut self) -> Vec<u8> {
        self.h2.take_output()
    }

    /// Bytes it holds for the client: frames not taken yet and data behind closed windows.
    pub fn held(&self) -> usize {
        self.h2.output_len() + self.h2.queued_total()
    }

    /// The store kinds its streams need the changes of.
    pub fn kinds(&self) -> impl Iterator<Item = net::resource::Kind> + '_ {
        self.calls.values().flat_map(|c| match c {
            CallState::Streaming(s) => s.feed.kinds(),
            CallState::Receiving { .. } => Vec::new(),
        })
    }

    /// A call is open (the connection is not idle).
    pub fn busy(&self) -> bool {
        !self.calls.is_empty()
    }

    /// Nothing more will happen on it: a connection error, or going away with no call left.
    pub fn done(&self) -> bool {
        self.h2.is_closed() || (self.h2.is_going_away() && self.calls.is_empty())
    }

    /// Say goodbye (GOAWAY); calls in progress finish.
    pub fn go_away(&mut self) {
        self.h2.go_away(h2::code::NO_ERROR);
    }

    /// The connection's rights are gone: streams end with `Unavailable`, answers already
    /// queued still go out, and the connection closes after them (the caller stops reading).
    /// No GOAWAY: some clients (grpclib) fail a call whose answer arrives in the same read as
    /// a GOAWAY, and the apply that ended maintenance must get its answer.
    pub fn revoke(&mut self) {
        let status = Status::new(code::UNAVAILABLE, "the node's TLS trust changed: reconnect");
        for (stream, call) in std::mem::take(&mut self.calls) {
            match call {
                CallState::Streaming(_) => send_trailers(&mut self.h2, stream, &status),
                CallState::Receiving { .. } => send_status(&mut self.h2, stream, &status),
            }
        }
    }

    /// The earliest time something is due: a request's deadline, a stalled stream's drop, a
    /// feed that wants to be asked again.
    pub fn deadline(&self) -> Option<Instant> {
        self.calls
            .iter()
            .filter_map(|(stream, c)| match c {
                CallState::Receiving { started, .. } => {
                    Some(*started + super::conn::REQUEST_DEADLINE)
                }
                CallState::Streaming(s) => {
                    let stall = (self.h2.queued(*stream) > 0).then_some(s.moved + STALL);
                    [stall, s.feed.poll_at()].into_iter().flatten().min()
                }
            })
            .min()
    }

    /// Feed bytes read from the client and run the calls that are complete.
    pub fn recv(&mut self, data: &[u8], call: &mut Call<'_>) {
        if let Err(e) = self.h2.recv(data) {
            log::debug!(target: "api", "gRPC: {e}");
        }
        while let Some(ev) = self.h2.poll_event() {
            match ev {
                Event::Headers { stream, fields, end_stream } => {
                    if self.calls.contains_key(&stream) {
                        // Trailers from the client: its side is done.
                        if end_stream {
                            self.finish(stream, call);
                        }
                        continue;
                    }
                    self.start(stream, &fields, call);
                    if end_stream {
                        // No body at all: the call decides (it needs exactly one message).
                        self.finish(stream, call);
                    }
                }
                Event::Data { stream, data, end_stream } => {
                    self.data(stream, &data, call.now);
                    if end_stream {
                        self.finish(stream, call);
                    }
                }
                Event::Reset { stream, .. } => {
                    self.calls.remove(&stream);
                }
                Event::GoAway { .. } | Event::PingAck(_) => {}
            }
        }
    }

    /// A request head on a new stream.
    fn start(&mut self, stream: u32, fields: &[h2::Field], call: &Call<'_>) {
        let h = &mut self.h2;
        let grpc =
            field(fields, "content-type").is_some_and(|v| v.starts_with(b"application/grpc"));
        if !grpc {
            let _ = h.send_headers(stream, &[(":status", "415")], true);
            return;
        }
        let path = String::from_utf8_lossy(field(fields, ":path").unwrap_or_default()).into_owned();
        let refuse = |h: &mut h2::Connection, status: Status| send_status(h, stream, &status);
        if field(fields, ":method") != Some(b"POST") {
            return refuse(h, Status::new(code::UNIMPLEMENTED, "gRPC calls are POSTs"));
        }
        if field(fields, "grpc-encoding").is_some_and(|e| e != b"identity") {
            return refuse(
                h,
                Status::new(code::UNIMPLEMENTED, "no message compression is supported"),
            );
        }
        let Some(method) = dispatch::route(&path) else {
            let shown: String = path.chars().take(128).collect();
            log::debug!(target: "api", "gRPC: unknown method {}", base::names::escape(&shown, 128));
            return refuse(h, Status::new(code::UNIMPLEMENTED, format!("unknown method {shown}")));
        };
        if let Err(status) = dispatch::authorize(call.access, method.path) {
            log::debug!(target: "api", "gRPC: {} refused: {status}", method.path);
            return refuse(h, status);
        }
        self.calls
            .insert(stream, CallState::Receiving { method, body: Vec::new(), started: call.now });
    }

    /// Request body bytes: kept within the method's limit and the connection's budget.
    fn data(&mut self, stream: u32, data: &[u8], _now: Instant) {
        let held: usize = self
            .calls
            .values()
            .map(|c| match c {
                CallState::Receiving { body, .. } => body.len(),
                CallState::Streaming(_) => 0,
            })
            .sum();
        let Some(CallState::Receiving { method, body, .. }) = self.calls.get_mut(&stream) else {
            return;
        };
        let limit = method.max_request;
        let over = if held + data.len() > BODY_BUDGET {
            Some(format!("requests on this connection exceed {BODY_BUDGET} bytes"))
        } else {
            body.extend_from_slice(data);
            declared(body).filter(|n| *n > limit).map(|n| {
                format!("message of {n} bytes exceeds the {limit} byte limit of {}", method.path)
            })
        };
        if let Some(why) = over {
            log::debug!(target: "api", "gRPC: {why}");
            self.calls.remove(&stream);
            send_status(&mut self.h2, stream, &Status::new(code::RESOURCE_EXHAUSTED, why));
            // It may still be sending: it need not.
            self.h2.reset(stream, h2::code::NO_ERROR);
        }
    }

    /// The client sent its whole request: run the call.
    fn finish(&mut self, stream: u32, call: &mut Call<'_>) {
        let Some(CallState::Receiving { method, body, .. }) = self.calls.remove(&stream) else {
            return;
        };
        let reply = one_message(&body, method.max_request).and_then(|m| (method.handler)(call, &m));
        let h = &mut self.h2;
        match reply {
            Ok(Reply::Unary(msg)) => {
                let _ = h.send_headers(stream, &grpc::response_headers(), false);
                let _ = h.send_data(stream, &grpc::frame_message(&msg), false);
                send_trailers(h, stream, &Status::new(code::OK, ""));
            }
            Ok(Reply::Stream(feed)) => {
                let _ = h.send_headers(stream, &grpc::response_headers(), false);
                let s = Streaming { feed, waiting: 0, moved: call.now };
                self.calls.insert(stream, CallState::Streaming(s));
            }
            Err(status) => {
                log::debug!(target: "api", "gRPC: {}: {status}", method.path);
                send_status(h, stream, &status);
            }
        }
    }

    /// Give server streams what their feeds have, while their clients keep up; drop streams
    /// whose clients stopped reading and requests that did not arrive in time. `outside`:
    /// what the connection holds outside the HTTP/2 engine.
    pub fn pump(&mut self, ctx: &FeedCtx<'_>, outside: usize) {
        let now = ctx.now;
        let mut ended = Vec::new();
        for (&stream, c) in &mut self.calls {
            let s = match c {
                CallState::Receiving { started, .. } => {
                    if now.saturating_duration_since(*started) >= super::conn::REQUEST_DEADLINE {
                        let why = format!(
                            "request not completed within {} s",
                            super::conn::REQUEST_DEADLINE.as_secs()
                        );
                        ended.push((stream, Some(Status::new(code::DEADLINE_EXCEEDED, why))));
                    }
                    continue;
                }
                CallState::Streaming(s) => s,
            };
            let waiting = self.h2.queued(stream);
            if waiting < s.waiting || waiting == 0 {
                s.moved = now;
            }
            if waiting > 0 && now.saturating_duration_since(s.moved) >= STALL {
                log::warn!(target: "api", "gRPC: dropping a stream whose client stopped reading ({waiting} bytes waiting for {} s)", STALL.as_secs());
                self.h2.reset(stream, h2::code::CANCEL);
                ended.push((stream, None));
                continue;
            }
            let held = outside + self.h2.output_len() + self.h2.queued_total();
            if waiting < STREAM_HIGH && held < CONN_HIGH {
                let mut out = Vec::new();
                let flow = s.feed.next(ctx, STREAM_HIGH - waiting, &mut out);
                for m in &out {
                    let _ = self.h2.send_data(stream, &grpc::frame_message(m), false);
                }
                if let Flow::Done(status) = flow {
                    ended.push((stream, Some(status)));
                }
            }
            s.waiting = self.h2.queued(stream);
        }
        for (stream, status) in ended {
            let was_receiving =
                matches!(self.calls.remove(&stream), Some(CallState::Receiving { .. }));
            match status {
                Some(st) if was_receiving => {
                    send_status(&mut self.h2, stream, &st);
                    self.h2.reset(stream, h2::code::NO_ERROR);
                }
                Some(st) => send_trailers(&mut self.h2, stream, &st),
                None => {}
            }
        }
    }
}

/// The length a message's prefix declares, once the 5-byte prefix is there.
fn declared(body: &[u8]) -> Option<usize> {
    let p = body.get(..5)?;
    Some(u32::from_be_bytes([p[1], p[2], p[3], p[4]]) as usize)
}

/// The one request message of a unary or server-streaming call.
fn one_message(body: &[u8], max: usize) -> Result<Vec<u8>, Status> {
    let mut messages = Vec::new();
    let mut decoder = grpc::MessageDecoder::new(max);
    decoder.push(body, &mut messages)?;
    match (messages.pop(), messages.is_empty(), decoder.partial()) {
        (Some(m), true, 0) => Ok(m),
        _ => Err(Status::new(code::INVALID_ARGUMENT, "expected exactly one request message")),
    }
}

/// A status with no message (Trailers-Only).
fn send_status(h: &mut h2::Connection, stream: u32, status: &Status) {
    let mut fields = grpc::response_headers();
    fields.extend(grpc::trailers(status));
    let _ = h.send_headers(stream, &fields, true);
}

/// The trailers that end a call whose head went out.
fn send_trailers(h: &mut h2::Connection, stream: u32, status: &Status) {
    let _ = h.send_headers(stream, &grpc::trailers(status), true);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_request_message_exactly() {
        let framed = grpc::frame_message(b"abc");
        assert_eq!(one_message(&framed, 10).ok(), Some(b"abc".to_vec()));
        assert_eq!(one_message(&[], 10).err().map(|s| s.code), Some(code::INVALID_ARGUMENT));
        let two = [framed.clone(), framed.clone()].concat();
        assert_eq!(one_message(&two, 10).err().map(|s| s.code), Some(code::INVALID_ARGUMENT));
        assert_eq!(
            one_message(&framed[..6], 10).err().map(|s| s.code),
            Some(code::INVALID_ARGUMENT)
        );
        assert_eq!(
            one_message(&grpc::frame_message(&[0; 11]), 10).err().map(|s| s.code),
            Some(code::RESOURCE_EXHAUSTED)
        );
        assert_eq!(declared(&[0, 0, 0, 1, 0]), Some(256));
        assert_eq!(declared(&[0, 0, 0, 1]), None);
    }
}
