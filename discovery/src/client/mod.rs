// SPDX-License-Identifier: Apache-2.0
//! The reference client's loop as a sans-IO state machine. Time is passed in; the engine asks
//! for a connection ([`Action::Connect`]), is fed the bytes read, and hands back bytes to
//! write and events for its owner. [`driver`] runs it over TCP or TLS on its own thread.
//!
//! The loop: wait a backoff, connect, Hello (10 s for connect and Hello together), follow a
//! redirect, open the Watch, then refresh: AffiliateUpdate for ourselves, then one
//! endpoint-only AffiliateUpdate per other affiliate we report for, all within 30 s. Refresh
//! again every TTL/2, on a local change, and after every reconnect. Any failure (a call's
//! status, the watch ending, the connection dropping, a missed keepalive) drops the
//! connection and starts over after the next backoff; a successful refresh resets it.

pub mod backoff;
pub mod driver;
pub mod warn_limit;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::crypto::{Cipher, GCM_OVERHEAD};
use crate::interface::{Command, Discovered, Event, LocalData};
use crate::proto::Affiliate;
use crate::proto::{
    AffiliateDeleteRequest, AffiliateUpdateRequest, HelloRequest, HelloResponse, Message,
    WatchRequest, WatchResponse,
};
use crate::service;
use crate::target::Target;
use backoff::Backoff;
use base::names::escape;
use grpc::h2::{self, Connection, Role};
use grpc::vecmap::VecMap;
use grpc::{Response, ResponseReader, Status};
use warn_limit::WarnLimit;

/// The service's limits (they are also what Talos nodes respect).
pub const MAX_DATA: usize = 2048;
pub const MAX_ENDPOINTS: usize = 64;
pub const MAX_AFFILIATES: usize = 1024;
pub const MAX_TTL: Duration = Duration::from_secs(30 * 60);

const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
const REFRESH_TIMEOUT: Duration = Duration::from_secs(30);
const PING_ACK_TIMEOUT: Duration = Duration::from_secs(20);
const MIN_PING_INTERVAL: Duration = Duration::from_secs(10);
/// Warnings about affiliates that cannot be used: a few per minute, then a count.
const WARN_INTERVAL: Duration = Duration::from_secs(60);
const WARN_BURST: u32 = 4;

/// What the engine needs from its environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Open a transport to this target and call [`Engine::connected`] (or
    /// [`Engine::connect_failed`]).
    Connect(Target),
    /// Close the current transport (after writing any pending output).
    Disconnect,
    Notify(Event),
}

/// The engine's settings (the parts of [`crate::Config`] it uses).
#[derive(Debug, Clone)]
pub struct Settings {
    pub target: Target,
    pub cluster_id: String,
    pub affiliate_id: String,
    pub client_version: String,
    pub ttl: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Waiting { until: Instant },
    Connecting { deadline: Instant },
    Hello { stream: u32, deadline: Instant },
    Running,
    Stopped,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CallKind {
    Hello,
    Watch,
    Refresh,
}

/// Our data, encrypted once per change.
#[derive(Debug)]
struct Sealed {
    plain: LocalData,
    data: Vec<u8>,
    endpoints: Vec<Vec<u8>>,
    others: Vec<(String, Vec<Vec<u8>>)>,
}

#[derive(Debug, Default)]
struct Refresh {
    pending: bool,
    queue: VecDeque<Vec<u8>>,
    queue_methods: VecDeque<&'static str>,
    in_flight: Option<u32>,
    deadline: Option<Instant>,
    next: Option<Instant>,
}

#[derive(Debug)]
struct Ping {
    next: Instant,
    outstanding: Option<([u8; 8], Instant)>,
    counter: u64,
}

/// The client state machine.
#[derive(Debug)]
pub struct Engine {
    cfg: Settings,
    cipher: Cipher,
    target: Target,
    phase: Phase,
    backoff: Backoff,
    conn: Option<Connection>,
    calls: VecMap<u32, (CallKind, ResponseReader)>,
    watch_first: bool,
    refresh: Refresh,
    local: Option<Sealed>,
    delete: bool,
    discovered: VecMap<String, Discovered>,
    last_members: Option<Vec<Discovered>>,
    ping: Ping,
    actions: VecDeque<Action>,
    /// Output of a connection just dropped (its GOAWAY), written before closing.
    tail: Vec<u8>,
    /// Affiliates that could not be decrypted or decoded.
    unreadable: WarnLimit,
    /// Affiliates past [`MAX_AFFILIATES`].
    too_many: WarnLimit,
}

impl Engine {
    /// An engine that connects at its first tick; `seed` drives the backoff jitter of later
    /// attempts. The reference client waits a backoff (0.25-0.75 s) before its first attempt
    /// too; a booting node's peers wait for that, and the boots of machines started together
    /// already spread far wider than it.
    pub fn new(
        cfg: Settings,
        key: &[u8; 32],
        now: Instant,
        seed: u64,
    ) -> Result<Self, crate::crypto::CryptoError> {
        let cipher = Cipher::new(key)?;
        Ok(Self {
            target: cfg.target.clone(),
            cfg,
            cipher,
            phase: Phase::Waiting { until: now },
            backoff: Backoff::new(seed),
            conn: None,
            calls: VecMap::new(),
            watch_first: false,
            refresh: Refresh::default(),
            local: None,
            delete: false,
            discovered: VecMap::new(),
            last_members: None,
            ping: Ping { next: now, outstanding: None, counter: 0 },
            actions: VecDeque::new(),
            tail: Vec::new(),
            unreadable: WarnLimit::new(WARN_INTERVAL, WARN_BURST),
            too_many: WarnLimit::new(WARN_INTERVAL, WARN_BURST),
        })
    }

    /// The target currently in use (a redirect replaces it).
    pub fn target(&self) -> &Target {
        &self.target
    }

    pub fn is_stopped(&self) -> bool {
        self.phase == Phase::Stopped
    }

    /// Is the engine waiting for the transport it asked for?
    pub fn is_connecting(&self) -> bool {
        matches!(self.phase, Phase::Connecting { .. })
    }

    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// Bytes to write to the transport.
    pub fn take_output(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.tail);
        if let Some(c) = self.conn.as_mut() {
            out.extend(c.take_output());
        }
        out
    }

    fn ping_interval(&self) -> Duration {
        MIN_PING_INTERVAL.max(self.ttl() / 10)
    }

    fn ttl(&self) -> Duration {
        self.cfg.ttl.min(MAX_TTL)
    }

    /// When [`Engine::tick`] next has something to do.
    pub fn next_deadline(&self) -> Option<Instant> {
        let timers = self.phase_deadline();
        if self.phase == Phase::Stopped {
            return timers;
        }
        [timers, self.unreadable.due(), self.too_many.due()].into_iter().flatten().min()
    }

    fn phase_deadline(&self) -> Option<Instant> {
        match self.phase {
            Phase::Waiting { until } => Some(until),
            Phase::Connecting { deadline } | Phase::Hello { deadline, .. } => Some(deadline),
            Phase::Running => {
                let ping = match self.ping.outstanding {
                    Some((_, sent)) => sent + PING_ACK_TIMEOUT,
                    None => self.ping.next,
                };
                [Some(ping), self.refresh.deadline, self.refresh.next].into_iter().flatten().min()
            }
            Phase::Stopped => None,
        }
    }

    /// Run the timers.
    pub fn tick(&mut self, now: Instant) {
        self.warn_summaries(now);
        match self.phase {
            Phase::Waiting { until } if now >= until => {
                self.phase = Phase::Connecting { deadline: now + HELLO_TIMEOUT };
                self.actions.push_back(Action::Connect(self.target.clone()));
            }
            Phase::Connecting { deadline } | Phase::Hello { deadline, .. } if now >= deadline => {
                self.fail(
                    now,
                    format!(
                        "{}: no Hello answer within {:?}",
                        self.target.authority(),
                        HELLO_TIMEOUT
                    ),
                );
            }
            Phase::Running => {
                if self.refresh.deadline.is_some_and(|d| now >= d) {
                    return self.fail(now, format!("refresh not done within {REFRESH_TIMEOUT:?}"));
                }
                if let Some((_, sent)) = self.ping.outstanding {
                    if now >= sent + PING_ACK_TIMEOUT {
                        return self.fail(now, "keepalive PING not answered".into());
                    }
                } else if now >= self.ping.next {
                    self.ping.counter += 1;
                    let payload = self.ping.counter.to_be_bytes();
                    self.ping.outstanding = Some((payload, now));
                    if let Some(c) = self.conn.as_mut() {
                        c.ping(payload);
                    }
                }
                if self.refresh.next.is_some_and(|n| now >= n) {
                    self.refresh.next = None;
                    self.refresh.pending = true;
                }
                self.maybe_refresh(now);
            }
            _ => {}
        }
    }

    /// The transport asked for is up.
    pub fn connected(&mut self, now: Instant) {
        let Phase::Connecting { deadline } = self.phase else { return };
        // Whatever the last connection left unsent belongs to it, not to this one.
        self.tail.clear();
        let mut conn = Connection::new(Role::Client, h2::Config::default());
        let req = HelloRequest {
            cluster_id: self.cfg.cluster_id.clone(),
            client_version: self.cfg.client_version.clone(),
        };
        let left = deadline.saturating_duration_since(now);
        match self.open_call(&mut conn, "Hello", &req.encode(), Some(left)) {
            Ok(stream) => {
                self.calls
                    .insert(stream, (CallKind::Hello, ResponseReader::new(service::MAX_MESSAGE)));
                self.conn = Some(conn);
                self.phase = Phase::Hello { stream, deadline };
            }
            Err(e) => self.fail(now, e),
        }
    }

    pub fn connect_failed(&mut self, now: Instant, why: &str) {
        if matches!(self.phase, Phase::Connecting { .. }) {
            self.fail(now, format!("{}: {why}", self.target.authority()));
        }
    }

    /// The transport closed (EOF or a read/write error).
    pub fn closed(&mut self, now: Instant, why: &str) {
        if self.conn.is_some() {
            self.fail(now, format!("connection to {} lost: {why}", self.target.authority()));
        }
    }

    /// Bytes read from the transport.
    pub fn recv(&mut self, now: Instant, bytes: &[u8]) {
        let Some(conn) = self.conn.as_mut() else { return };
        if let Err(e) = conn.recv(bytes) {
            return self.fail(now, format!("HTTP/2 from {}: {e}", self.target.authority()));
        }
        let mut events = Vec::new();
        while let Some(e) = conn.poll_event() {
            events.push(e);
        }
        for e in events {
            if self.conn.is_none() {
                return;
            }
            self.h2_event(now, e);
        }
        if self.phase == Phase::Running {
            self.maybe_refresh(now);
        }
    }

    pub fn command(&mut self, now: Instant, cmd: Command) {
        match cmd {
            Command::Stop => {
                if let Some(c) = self.conn.as_mut() {
                    c.go_away(h2::code::NO_ERROR);
                }
                self.drop_connection();
                self.phase = Phase::Stopped;
            }
            Command::Delete => {
                self.local = None;
                self.delete = true;
                self.refresh.pending = true;
            }
            Command::Publish(data) => {
                if self.local.as_ref().is_some_and(|l| l.plain == data) && !self.delete {
                    // Unchanged: sending it again would only bounce back through the watch.
                    return;
                }
                match self.seal(data) {
                    Ok(s) => {
                        self.local = Some(s);
                        self.delete = false;
                        self.refresh.pending = true;
                    }
                    Err(e) => self.notify(Event::Error(e)),
                }
            }
        }
        if self.phase == Phase::Running {
            self.maybe_refresh(now);
        }
    }

    fn seal(&self, plain: LocalData) -> Result<Sealed, String> {
        let pb = plain.affiliate.encode();
        if pb.len() + GCM_OVERHEAD > MAX_DATA {
            return Err(format!(
                "affiliate data is {} bytes encrypted, over the service's {MAX_DATA}-byte limit: not published",
                pb.len() + GCM_OVERHEAD
            ));
        }
        let data = self.cipher.seal(&pb).map_err(|e| format!("sealing affiliate data: {e}"))?;
        let seal_all = |eps: &[std::net::SocketAddr]| -> Vec<Vec<u8>> {
            let mut out: Vec<Vec<u8>> = Vec::new();
            for ep in eps {
                if let Ok(b) = self.cipher.seal_endpoint(ep) {
                    if !out.contains(&b) && out.len() < MAX_ENDPOINTS {
                        out.push(b);
                    }
                }
            }
            out
        };
        let endpoints = seal_all(&plain.endpoints);
        let others = plain
            .others
            .iter()
            .filter(|(id, eps)| !id.is_empty() && id.len() <= 256 && !eps.is_empty())
            .map(|(id, eps)| (id.clone(), seal_all(eps)))
            .collect();
        Ok(Sealed { plain, data, endpoints, others })
    }

    fn notify(&mut self, e: Event) {
        self.actions.push_back(Action::Notify(e));
    }

    fn open_call(
        &self,
        conn: &mut Connection,
        method: &str,
        body: &[u8],
        timeout: Option<Duration>,
    ) -> Result<u32, String> {
        let head =
            service::request_headers(self.target.tls, &self.target.authority(), method, timeout);
        let stream = conn.open_stream(&head, false).map_err(|e| format!("{method}: {e}"))?;
        conn.send_data(stream, &grpc::frame_message(body), true)
            .map_err(|e| format!("{method}: {e}"))?;
        Ok(stream)
    }

    fn drop_connection(&mut self) {
        if let Some(mut c) = self.conn.take() {
            self.tail.extend(c.take_output());
            self.actions.push_back(Action::Disconnect);
        }
        self.calls.clear();
        self.refresh.in_flight = None;
        self.refresh.deadline = None;
        self.refresh.queue.clear();
        self.refresh.queue_methods.clear();
        self.ping.outstanding = None;
    }

    /// Report, drop the connection, and try again after the next backoff.
    fn fail(&mut self, now: Instant, why: String) {
        if self.phase == Phase::Stopped {
            return;
        }
        self.notify(Event::Error(escape(&why, 512)));
        self.drop_connection();
        // Everything is published again on the next connection.
        self.refresh.pending = true;
        self.refresh.next = None;
        self.phase = Phase::Waiting { until: now + self.backoff.next_delay() };
    }

    fn h2_event(&mut self, now: Instant, e: h2::Event) {
        let mut out = Vec::new();
        let stream = match e {
            h2::Event::Headers { stream, fields, end_stream } => {
                if let Some((_, r)) = self.calls.get_mut(&stream) {
                    r.on_headers(&fields, end_stream, &mut out);
                }
                stream
            }
            h2::Event::Data { stream, data, end_stream } => {
                if let Some((_, r)) = self.calls.get_mut(&stream) {
                    r.on_data(&data, end_stream, &mut out);
                }
                stream
            }
            h2::Event::Reset { stream, code } => {
                if let Some((_, r)) = self.calls.get_mut(&stream) {
                    r.on_reset(code, &mut out);
                }
                stream
            }
            h2::Event::GoAway { code, .. } => {
                return self.fail(
                    now,
                    format!("{} sent GOAWAY (HTTP/2 error {code:#x})", self.target.authority()),
                );
            }
            h2::Event::PingAck(p) => {
                if self.ping.outstanding.is_some_and(|(sent, _)| sent == p) {
                    self.ping.outstanding = None;
                    self.ping.next = now + self.ping_interval();
                }
                return;
            }
        };
        let Some(&(kind, _)) = self.calls.get(&stream) else { return };
        for r in out {
            if self.conn.is_none() {
                return;
            }
            match r {
                Response::Message(m) => self.message(now, kind, stream, &m),
                Response::Status(s) => {
                    self.calls.remove(&stream);
                    self.status(now, kind, s);
                }
            }
        }
    }

    fn message(&mut self, now: Instant, kind: CallKind, stream: u32, m: &[u8]) {
        match kind {
            CallKind::Hello => match HelloResponse::decode(m) {
                Ok(h) => self.hello(now, stream, h),
                Err(e) => self.fail(now, format!("Hello response: {e}")),
            },
            CallKind::Watch => match WatchResponse::decode(m) {
                Ok(w) => self.apply_watch(now, w),
                Err(e) => self.fail(now, format!("Watch message: {e}")),
            },
            // AffiliateUpdate/Delete responses are empty.
            CallKind::Refresh => {}
        }
    }

    fn status(&mut self, now: Instant, kind: CallKind, s: Status) {
        match kind {
            CallKind::Hello if !s.is_ok() => self.fail(now, format!("Hello: {s}")),
            CallKind::Hello => {
                if let Phase::Hello { .. } = self.phase {
                    self.fail(now, "Hello returned no message".into());
                }
            }
            CallKind::Watch => self.fail(now, format!("watch ended: {s}")),
            CallKind::Refresh if !s.is_ok() => self.fail(now, format!("refresh: {s}")),
            CallKind::Refresh => {
                self.refresh.in_flight = None;
                self.send_next_refresh(now);
            }
        }
    }

    fn hello(&mut self, now: Instant, stream: u32, h: HelloResponse) {
        if !matches!(self.phase, Phase::Hello { stream: s, .. } if s == stream) {
            return;
        }
        if let Some(ip) = crate::proto::payload::ip_from_bytes(&h.client_ip) {
            self.notify(Event::PublicIp(ip));
        }
        if let Some(r) = h.redirect.filter(|r| !r.endpoint.is_empty()) {
            match Target::from_endpoint(&r.endpoint, self.target.tls) {
                Ok(t) => {
                    log::info!(target: "discovery", "redirected from {} to {}", self.target.authority(), t.authority());
                    self.target = t;
                    return self.fail(now, format!("redirected to {}", escape(&r.endpoint, 512)));
                }
                Err(e) => {
                    return self.fail(
                        now,
                        format!("redirect to {:?} refused: {e}", escape(&r.endpoint, 512)),
                    )
                }
            }
        }
        let req = WatchRequest { cluster_id: self.cfg.cluster_id.clone() };
        let Some(mut conn) = self.conn.take() else { return };
        let opened = self.open_call(&mut conn, "Watch", &req.encode(), None);
        self.conn = Some(conn);
        match opened {
            Ok(w) => {
                self.calls.insert(w, (CallKind::Watch, ResponseReader::new(service::MAX_MESSAGE)));
                self.watch_first = true;
                self.phase = Phase::Running;
                self.refresh.pending = true;
                self.ping.next = now + self.ping_interval();
                self.notify(Event::Connected { endpoint: self.target.authority() });
            }
            Err(e) => self.fail(now, e),
        }
    }

    fn maybe_refresh(&mut self, now: Instant) {
        if self.phase != Phase::Running || !self.refresh.pending || self.refresh.in_flight.is_some()
        {
            return;
        }
        self.refresh.pending = false;
        let ttl = Some(crate::proto::Duration::from_std(self.ttl()));
        let (cluster, me) = (self.cfg.cluster_id.clone(), self.cfg.affiliate_id.clone());
        self.refresh.queue.clear();
        self.refresh.queue_methods.clear();
        if self.delete {
            let req = AffiliateDeleteRequest { cluster_id: cluster, affiliate_id: me };
            self.refresh.queue.push_back(req.encode());
            self.refresh.queue_methods.push_back("AffiliateDelete");
        } else if let Some(l) = &self.local {
            let own = AffiliateUpdateRequest {
                cluster_id: cluster.clone(),
                affiliate_id: me,
                affiliate_data: Some(l.data.clone()),
                affiliate_endpoints: l.endpoints.clone(),
                ttl,
            };
            self.refresh.queue.push_back(own.encode());
            self.refresh.queue_methods.push_back("AffiliateUpdate");
            for (id, eps) in &l.others {
                let req = AffiliateUpdateRequest {
                    cluster_id: cluster.clone(),
                    affiliate_id: id.clone(),
                    affiliate_data: None,
                    affiliate_endpoints: eps.clone(),
                    ttl,
                };
                self.refresh.queue.push_back(req.encode());
                self.refresh.queue_methods.push_back("AffiliateUpdate");
            }
        }
        self.refresh.deadline = Some(now + REFRESH_TIMEOUT);
        self.send_next_refresh(now);
    }

    /// One call at a time, as the reference client does.
    fn send_next_refresh(&mut self, now: Instant) {
        let (Some(body), Some(method)) =
            (self.refresh.queue.pop_front(), self.refresh.queue_methods.pop_front())
        else {
            // Done.
            self.refresh.deadline = None;
            self.refresh.next = Some(now + self.ttl() / 2);
            self.backoff.reset();
            return;
        };
        let left = self.refresh.deadline.map(|d| d.saturating_duration_since(now));
        let Some(mut conn) = self.conn.take() else { return };
        let opened = self.open_call(&mut conn, method, &body, left);
        self.conn = Some(conn);
        match opened {
            Ok(s) => {
                self.calls
                    .insert(s, (CallKind::Refresh, ResponseReader::new(service::MAX_MESSAGE)));
                self.refresh.in_flight = Some(s);
            }
            Err(e) => self.fail(now, e),
        }
    }

    /// Say the summaries of warnings held back, once their interval is over.
    fn warn_summaries(&mut self, now: Instant) {
        let secs = WARN_INTERVAL.as_secs();
        if let Some(n) = self.unreadable.summary(now) {
            self.notify(Event::Error(format!(
                "{n} more affiliate(s) that could not be decrypted or decoded in the last {secs} s"
            )));
        }
        if let Some(n) = self.too_many.summary(now) {
            self.notify(Event::Error(format!(
                "{n} more affiliate(s) past the limit of {MAX_AFFILIATES} ignored in the last {secs} s"
            )));
        }
    }

    /// A warning about an affiliate, unless too many were said lately (then only counted).
    fn warn_unreadable(&mut self, now: Instant, line: String) {
        if self.unreadable.allow(now) {
            self.notify(Event::Error(escape(&line, 512)));
        }
    }

    fn apply_watch(&mut self, now: Instant, w: WatchResponse) {
        self.warn_summaries(now);
        if std::mem::take(&mut self.watch_first) {
            self.discovered.clear();
        }
        for a in w.affiliates {
            if a.id == self.cfg.affiliate_id {
                continue;
            }
            if w.deleted {
                self.discovered.remove(&a.id);
                continue;
            }
            if a.data.is_empty() {
                continue;
            }
            let affiliate = match self.cipher.open(&a.data) {
                Ok(pt) => match Affiliate::decode(&pt) {
                    Ok(af) => af,
                    Err(e) => {
                        self.warn_unreadable(now, format!("affiliate {}: {e}", a.id));
                        continue;
                    }
                },
                Err(e) => {
                    // A stale entry for this ID stays, as the reference client keeps it.
                    self.warn_unreadable(now, format!("affiliate {}: {e}", a.id));
                    continue;
                }
            };
            if !self.discovered.contains_key(&a.id) && self.discovered.len() >= MAX_AFFILIATES {
                if self.too_many.allow(now) {
                    self.notify(Event::Error(format!(
                        "more than {MAX_AFFILIATES} affiliates: the rest ignored"
                    )));
                }
                continue;
            }
            let endpoints = a
                .endpoints
                .iter()
                .take(MAX_ENDPOINTS)
                .filter_map(|e| self.cipher.open_endpoint(e).ok())
                .collect();
            self.discovered.insert(a.id.clone(), Discovered { id: a.id, affiliate, endpoints });
        }
        let members: Vec<Discovered> = self.discovered.values().cloned().collect();
        if self.last_members.as_ref() != Some(&members) {
            self.last_members = Some(members.clone());
            self.notify(Event::Members(members));
        }
    }
}

#[cfg(test)]
mod tests;
