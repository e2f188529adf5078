// SPDX-License-Identifier: Apache-2.0
//! Talos's gRPC machine API on an API connection that opened with the HTTP/2 client preface:
//! the sans-IO HTTP/2 engine of the `grpc` crate (server role) carries calls that are routed
//! by `:path` to the handlers in [`dispatch`]. The connection's transport, slots, trust and
//! deadlines stay those of every API connection ([`super::conn`]); this adds the bounds of
//! HTTP/2 and gRPC:
//! - at most [`MAX_STREAMS`] calls open at once; a request message above its method's limit
//!   is `ResourceExhausted` as soon as its length prefix arrives, and the request bodies of
//!   one connection hold at most [`BODY_BUDGET`] bytes together;
//! - a request must be complete within [`super::transport::REQUEST_DEADLINE`] of its head;
//! - a server stream is fed only while less than [`STREAM_HIGH`] bytes wait behind the
//!   client's flow-control window; a stream whose waiting bytes do not move for [`STALL`] is
//!   reset (its client stopped reading), and the other calls go on.

mod cosi;
mod deferred;
pub mod dispatch;
mod etcd;
pub mod events;
mod feeds;
mod keelson;
mod kubeconfig;
mod machine;
pub mod proxy;
mod routes;
mod service_ops;
pub mod stats;
mod storage;
mod time;
pub mod trustd;

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
    Receiving {
        method: &'static Method,
        body: Vec<u8>,
        started: Instant,
        /// Where it is served (the `nodes`/`node` metadata: [`proxy`]).
        route: proxy::Route,
    },
    /// A server stream.
    Streaming(Streaming),
}

impl CallState {
    /// The call's method.
    fn method(&self) -> &'static str {
        match self {
            Self::Receiving { method, .. } => method.path,
            Self::Streaming(s) => s.method,
        }
    }
}

struct Streaming {
    feed: Box<dyn dispatch::Feed>,
    /// Its method, for the metrics when it ends.
    method: &'static str,
    /// Bytes waiting on the stream when last looked at, and when they last moved.
    waiting: usize,
    moved: Instant,
    /// The feed filled the room it was given: it likely has more, to be asked for as soon as
    /// there is room again (nothing else may wake the loop when the client's window is open).
    hungry: bool,
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

    /// Bytes it holds behind flow-control windows the client has not opened (not counting
    /// frames just made and not yet handed to the socket).
    pub fn blocked(&self) -> usize {
        self.h2.queued_total()
    }

    /// The store kinds its streams need the changes of.
    pub fn kinds(&self) -> impl Iterator<Item = net::resource::Kind> + '_ {
        self.calls.values().flat_map(|c| match c {
            CallState::Streaming(s) => s.feed.kinds(),
            CallState::Receiving { .. } => Vec::new(),
        })
    }

    /// A stream's feed has messages ready and the client has room for them: pump again now,
    /// not when the client next sends something (a client with a wide window sends nothing
    /// while it takes a long list).
    pub fn wants_pump(&self) -> bool {
        self.held() < CONN_HIGH
            && self.calls.iter().any(|(stream, c)| match c {
                CallState::Streaming(s) => self.h2.queued(*stream) < STREAM_HIGH && s.feed.ready(),
                CallState::Receiving { .. } => false,
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

    /// Say goodbye (GOAWAY, with `why` as its debug data); calls in progress finish.
    pub fn go_away(&mut self, why: &str) {
        self.h2.go_away_saying(h2::code::NO_ERROR, why.as_bytes());
    }

    /// The connection's rights are gone: streams end with `Unavailable`, answers already
    /// queued still go out, and the connection closes after them (the caller stops reading).
    /// No GOAWAY: some clients (grpclib) fail a call whose answer arrives in the same read as
    /// a GOAWAY, and the apply that ended maintenance must get its answer.
    pub fn revoke(&mut self) {
        let status = Status::new(code::UNAVAILABLE, "the node's TLS trust changed: reconnect");
        for (stream, call) in std::mem::take(&mut self.calls) {
            stats::ended(Some(call.method()), status.code);
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
                    Some(*started + super::transport::REQUEST_DEADLINE)
                }
                CallState::Streaming(s) => {
                    let waiting = self.h2.queued(*stream);
                    let stall = (waiting > 0).then_some(s.moved + STALL);
                    let again = (s.hungry && waiting < STREAM_HIGH).then_some(s.moved);
                    [stall, s.feed.poll_at(), again].into_iter().flatten().min()
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
                    self.data(stream, &data);
                    if end_stream {
                        self.finish(stream, call);
                    }
                }
                Event::Reset { stream, .. } => {
                    if let Some(c) = self.calls.remove(&stream) {
                        stats::ended(Some(c.method()), code::CANCELLED);
                    }
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
        let route_of = routes::route(&path).map(|m| m.path);
        let refuse = |h: &mut h2::Connection, status: Status| {
            stats::ended(route_of, status.code);
            send_status(h, stream, &status)
        };
        if field(fields, ":method") != Some(b"POST") {
            return refuse(h, Status::new(code::UNIMPLEMENTED, "gRPC calls are POSTs"));
        }
        if field(fields, "grpc-encoding").is_some_and(|e| e != b"identity") {
            return refuse(
                h,
                Status::new(code::UNIMPLEMENTED, "no message compression is supported"),
            );
        }
        let Some(method) = routes::route(&path) else {
            let shown: String = path.chars().take(128).collect();
            log::debug!(target: "api", "gRPC: unknown method {}", base::names::escape(&shown, 512));
            return refuse(h, Status::new(code::UNIMPLEMENTED, format!("unknown method {shown}")));
        };
        if let Err(status) = dispatch::authorize(call.access, method.path) {
            log::debug!(target: "api", "gRPC: {} refused: {status}", method.path);
            return refuse(h, status);
        }
        if method.path == talos_api::security::CERTIFICATE {
            if let Err(status) = trustd::authenticate(fields, call.rt) {
                // The token itself is never logged.
                log::warn!(target: "trustd", "refused a caller: {}", status.message);
                return refuse(h, status);
            }
        }
        let route = match proxy::route(fields, method.path) {
            Ok(r) => r,
            Err(status) => return refuse(h, status),
        };
        self.calls.insert(
            stream,
            CallState::Receiving { method, body: Vec::new(), started: call.now, route },
        );
    }

    /// Request body bytes: kept within the method's limit and the connection's budget.
    fn data(&mut self, stream: u32, data: &[u8]) {
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
            stats::ended(Some(method.path), code::RESOURCE_EXHAUSTED);
            self.calls.remove(&stream);
            send_status(&mut self.h2, stream, &Status::new(code::RESOURCE_EXHAUSTED, why));
            // It may still be sending: it need not.
            self.h2.reset(stream, h2::code::NO_ERROR);
        }
    }

    /// The client sent its whole request: run the call.
    fn finish(&mut self, stream: u32, call: &mut Call<'_>) {
        if !matches!(self.calls.get(&stream), Some(CallState::Receiving { .. })) {
            return;
        }
        let Some(CallState::Receiving { method, body, route, started }) =
            self.calls.remove(&stream)
        else {
            return;
        };
        let reply = one_message(&body, method.max_request).and_then(|m| match route {
            proxy::Route::Local => (method.handler)(call, &m),
            other => proxy::start(other, method.path, &m, call).map(Reply::Stream),
        });
        let h = &mut self.h2;
        match reply {
            Ok(Reply::Unary(msg)) => {
                let _ = h.send_headers(stream, &grpc::response_headers(), false);
                let _ = h.send_data(stream, &grpc::frame_message(&msg), false);
                send_trailers(h, stream, &Status::new(code::OK, ""));
                stats::ended(Some(method.path), code::OK);
                stats::unary(method.path, started.elapsed().as_secs_f64());
            }
            Ok(Reply::Stream(feed)) => {
                let _ = h.send_headers(stream, &grpc::response_headers(), false);
                let s = Streaming {
                    feed,
                    method: method.path,
                    waiting: 0,
                    moved: call.now,
                    hungry: true,
                };
                self.calls.insert(stream, CallState::Streaming(s));
            }
            Err(status) => {
                log::debug!(target: "api", "gRPC: {}: {status}", method.path);
                stats::ended(Some(method.path), status.code);
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
                    if now.saturating_duration_since(*started) >= super::transport::REQUEST_DEADLINE
                    {
                        let why = format!(
                            "request not completed within {} s",
                            super::transport::REQUEST_DEADLINE.as_secs()
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
                let room = STREAM_HIGH - waiting;
                let flow = s.feed.next(ctx, room, &mut out);
                s.hungry = out.iter().map(Vec::len).sum::<usize>() >= room;
                for m in &out {
                    let _ = self.h2.send_data(stream, &grpc::frame_message(m), false);
                }
                if let Flow::Done(status) = flow {
                    ended.push((stream, Some(status)));
                }
            } else {
                // Full: the client's next WINDOW_UPDATE, or the socket taking the output,
                // wakes the loop again.
                s.hungry = false;
            }
            s.waiting = self.h2.queued(stream);
        }
        for (stream, status) in ended {
            let removed = self.calls.remove(&stream);
            let was_receiving = matches!(removed, Some(CallState::Receiving { .. }));
            if let Some(c) = &removed {
                stats::ended(Some(c.method()), status.as_ref().map_or(code::CANCELLED, |s| s.code));
            }
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
    use crate::api::transport::Access;
    use crate::verbs::Effects;
    use events::EventLog;
    use grpc::{Response, ResponseReader};
    use runtime::Runtime;

    /// A server connection and an HTTP/2 client, wired together without I/O.
    struct Pair {
        server: GrpcConn,
        client: h2::Connection,
        rt: Runtime,
        effects: Effects,
        events: EventLog,
        /// COSI's watch history (none: these tests watch no resources).
        cosi: crate::api::cosi::watch::History,
        now: Instant,
        /// The client's events so far.
        seen: Vec<Event>,
    }

    impl Pair {
        fn new() -> Self {
            Self::with_window(h2::Config::default().stream_window)
        }

        /// With the client's stream window at `window` bytes.
        fn with_window(window: u32) -> Self {
            let cfg = h2::Config { stream_window: window, ..h2::Config::default() };
            Self {
                server: GrpcConn::new(),
                client: h2::Connection::new(Role::Client, cfg),
                rt: Runtime::new(),
                effects: Effects::default(),
                events: EventLog::default(),
                cosi: Default::default(),
                now: Instant::now(),
                seen: Vec::new(),
            }
        }

        /// Move bytes both ways until neither side has more, as `access`.
        fn exchange(&mut self, access: Access) {
            for _ in 0..8 {
                let up = self.client.take_output();
                let machine = crate::machine::Machine { started: self.now, settled: true };
                let mut call = Call {
                    access,
                    rt: &mut self.rt,
                    machine,
                    effects: &mut self.effects,
                    events: &self.events,
                    cosi: &self.cosi,
                    bell: None,
                    now: self.now,
                };
                self.server.recv(&up, &mut call);
                let down = self.server.take_output();
                let _ = self.client.recv(&down);
                if up.is_empty() && down.is_empty() {
                    break;
                }
            }
        }

        fn open(&mut self, path: &str, body: &[u8], end: bool) -> u32 {
            let head = grpc::request_headers(false, "node", path, "test", None);
            let id = self.client.open_stream(&head, false).unwrap_or_else(|e| unreachable!("{e}"));
            let _ = self.client.send_data(id, body, end);
            id
        }

        /// What the client got on `stream` (events of other streams are kept for later).
        fn responses(&mut self, stream: u32) -> Vec<Response> {
            while let Some(ev) = self.client.poll_event() {
                self.seen.push(ev);
            }
            let mut reader = ResponseReader::new(1 << 20);
            let mut out = Vec::new();
            for ev in &self.seen {
                match ev {
                    Event::Headers { stream: s, fields, end_stream } if *s == stream => {
                        reader.on_headers(fields, *end_stream, &mut out)
                    }
                    Event::Data { stream: s, data, end_stream } if *s == stream => {
                        reader.on_data(data, *end_stream, &mut out)
                    }
                    Event::Reset { stream: s, code } if *s == stream => {
                        reader.on_reset(*code, &mut out)
                    }
                    _ => {}
                }
            }
            out
        }

        fn status(&mut self, stream: u32) -> Option<u32> {
            self.responses(stream).into_iter().find_map(|r| match r {
                Response::Status(s) => Some(s.code),
                Response::Message(_) => None,
            })
        }
    }

    #[test]
    fn a_unary_call_end_to_end_without_io() {
        let mut p = Pair::new();
        let id = p.open("/machine.MachineService/Version", &grpc::frame_message(&[]), true);
        p.exchange(Access::Admin);
        let got = p.responses(id);
        let Some(Response::Message(m)) = got.first() else { unreachable!("{got:?}") };
        let reply: talos_api::machine::VersionResponse =
            dispatch::decode(m).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(reply.messages.len(), 1);
        assert!(reply.messages[0].features.is_some());
        assert_eq!(got.last(), Some(&Response::Status(Status::new(code::OK, ""))));
        assert!(!p.server.busy());
    }

    #[test]
    fn refusals_come_before_the_body() {
        let mut p = Pair::new();
        let unknown = p.open("/machine.MachineService/Nope", &[], false);
        let denied = p.open("/machine.MachineService/Reboot", &[], false);
        // The prefix says 2 MiB for a call whose limit is 64 KiB: refused from the prefix alone.
        let huge = p.open("/machine.MachineService/Version", &[0, 0, 0x20, 0, 0], false);
        p.exchange(Access::Reader);
        assert_eq!(p.status(unknown), Some(code::UNIMPLEMENTED));
        assert_eq!(p.status(denied), Some(code::PERMISSION_DENIED));
        assert_eq!(p.status(huge), Some(code::RESOURCE_EXHAUSTED));
        assert!(p.effects.power.is_none());
        assert!(!p.server.busy(), "nothing is kept of refused calls");
        // Maintenance: what its service does not have is unimplemented.
        let mut p = Pair::new();
        let reboot = p.open("/machine.MachineService/Reboot", &grpc::frame_message(&[]), true);
        p.exchange(Access::Maintenance);
        assert_eq!(p.status(reboot), Some(code::UNIMPLEMENTED));
    }

    #[test]
    fn etcd_calls_on_a_node_without_etcd_answer_as_talos_does() {
        let last_status = |p: &mut Pair, id: u32| {
            p.responses(id).into_iter().find_map(|r| match r {
                Response::Status(s) => Some(s),
                Response::Message(_) => None,
            })
        };
        for (name, api) in [
            ("EtcdMemberList", "member list"),
            ("EtcdStatus", "etcd status"),
            ("EtcdLeaveCluster", "etcd leave"),
            ("EtcdForfeitLeadership", "etcd forfeit leadership"),
        ] {
            let mut p = Pair::new();
            let path = format!("/machine.MachineService/{name}");
            let id = p.open(&path, &grpc::frame_message(&[]), true);
            p.exchange(Access::Admin);
            let want = format!("{api} is only available on control plane nodes");
            assert_eq!(last_status(&mut p, id), Some(Status::new(code::UNIMPLEMENTED, want)));
            assert!(!p.server.busy(), "{name}");
        }
        // The ID is checked first; a reader lists but does not remove.
        let mut p = Pair::new();
        let zero =
            p.open("/machine.MachineService/EtcdRemoveMemberByID", &grpc::frame_message(&[]), true);
        p.exchange(Access::Admin);
        assert_eq!(last_status(&mut p, zero).map(|s| s.code), Some(code::INVALID_ARGUMENT));
        let mut p = Pair::new();
        let remove = p.open("/machine.MachineService/EtcdRemoveMemberByID", &[], false);
        let list =
            p.open("/machine.MachineService/EtcdMemberList", &grpc::frame_message(&[]), true);
        p.exchange(Access::Reader);
        assert_eq!(p.status(remove), Some(code::PERMISSION_DENIED));
        assert_eq!(p.status(list), Some(code::UNIMPLEMENTED));
    }

    /// A feed of `total` bytes in 1 KiB messages.
    struct Bulk {
        left: usize,
    }

    impl dispatch::Feed for Bulk {
        fn next(&mut self, _: &FeedCtx<'_>, room: usize, out: &mut Vec<Vec<u8>>) -> Flow {
            let mut used = 0;
            while used < room && self.left > 0 {
                let n = self.left.min(1024);
                out.push(vec![b'x'; n]);
                self.left -= n;
                used += n;
            }
            if self.left == 0 {
                Flow::Done(Status::new(code::OK, ""))
            } else {
                Flow::More
            }
        }
    }

    /// A stream whose feed is [`Bulk`], opened by `p`'s client.
    fn bulk_stream(p: &mut Pair, total: usize) -> u32 {
        let id = p.open("/machine.MachineService/Events", &grpc::frame_message(&[]), true);
        p.exchange(Access::Admin);
        let feed: Box<dyn dispatch::Feed> = Box::new(Bulk { left: total });
        let s = Streaming {
            feed,
            method: "/machine.MachineService/Events",
            waiting: 0,
            moved: p.now,
            hungry: true,
        };
        p.server.calls.insert(id, CallState::Streaming(s));
        id
    }

    #[test]
    fn a_stream_flows_as_the_client_reads_and_asks_to_be_fed_again() {
        let mut p = Pair::new();
        let id = bulk_stream(&mut p, 1 << 20);
        let mut rounds = 0;
        while p.server.busy() {
            rounds += 1;
            assert!(rounds < 100, "the stream did not end");
            // With room on the stream, the feed is asked again at once.
            assert!(p.server.deadline().is_some_and(|d| d <= p.now), "no wake-up while fed");
            let ctx =
                FeedCtx { rt: &p.rt, changes: &[], events: &p.events, cosi: &p.cosi, now: p.now };
            p.server.pump(&ctx, 0);
            let down = p.server.take_output();
            let _ = p.client.recv(&down);
            p.exchange(Access::Admin);
        }
        let got = p.responses(id);
        let bytes: usize = got
            .iter()
            .map(|r| match r {
                Response::Message(m) => m.len(),
                Response::Status(_) => 0,
            })
            .sum();
        assert_eq!(bytes, 1 << 20);
        assert_eq!(got.last(), Some(&Response::Status(Status::new(code::OK, ""))));
    }

    #[test]
    fn a_stream_whose_client_stops_reading_is_bounded_then_reset() {
        let mut p = Pair::with_window(16 << 10);
        let id = bulk_stream(&mut p, 16 << 20);
        // The client reads nothing more: no WINDOW_UPDATE reaches the server.
        let mut t = p.now;
        for _ in 0..50 {
            let ctx = FeedCtx { rt: &p.rt, changes: &[], events: &p.events, cosi: &p.cosi, now: t };
            p.server.pump(&ctx, 0);
            let _ = p.server.take_output();
            t += Duration::from_millis(100);
        }
        // What waits is bounded by one feeding beyond the window, not by the 16 MiB.
        let waiting = p.server.h2.queued(id);
        assert!(waiting > 0 && waiting <= 2 * STREAM_HIGH, "{waiting}");
        let due = p.server.deadline().unwrap_or_else(|| unreachable!());
        assert!(due <= p.now + STALL, "the stall is due");
        let ctx = FeedCtx {
            rt: &p.rt,
            changes: &[],
            events: &p.events,
            cosi: &p.cosi,
            now: p.now + STALL,
        };
        p.server.pump(&ctx, 0);
        assert!(!p.server.busy(), "the stream is dropped");
        assert_eq!(p.server.h2.queued(id), 0, "and what waited for it with it");
    }

    #[test]
    fn a_request_that_does_not_finish_in_time_is_ended() {
        let mut p = Pair::new();
        let id = p.open("/machine.MachineService/Version", &[0, 0], false);
        p.exchange(Access::Admin);
        assert!(p.server.busy());
        let due = p.server.deadline().unwrap_or_else(|| unreachable!());
        assert_eq!(due, p.now + super::super::transport::REQUEST_DEADLINE);
        let ctx = FeedCtx { rt: &p.rt, changes: &[], events: &p.events, cosi: &p.cosi, now: due };
        p.server.pump(&ctx, 0);
        let _ = p.client.recv(&p.server.take_output());
        assert_eq!(p.status(id), Some(code::DEADLINE_EXCEEDED));
        assert!(!p.server.busy());
    }

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
