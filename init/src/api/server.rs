// SPDX-License-Identifier: Apache-2.0
//! The API server, driven by the node's event loop: a non-blocking listener and non-blocking
//! connections, each with its own epoll token. No threads, and nothing here ever blocks.
//! Requests are answered here; each connection's bounds are in [`super::conn`], the socket
//! path's ownership in [`super::socket`], the TCP listeners and TLS mode in
//! [`super::remote`]. The local socket and TLS connections share the same connection code
//! and bounds; what a client may call depends on how it connected.
//!
//! At most [`MAX_CONNECTIONS`], split into slots per class ([`super::slots`]: a pool for TLS
//! handshakes, reserves for the local socket and for `os:admin`). When a class's slots are
//! full, a new connection takes the place of the oldest one of that class that has no call
//! open and no answer waiting (that one is told why in a GOAWAY and closed), so a new client
//! always gets an answer; only when every such connection streams does the new one get
//! `too many connections`.
//!
//! When the node's TLS trust changes (maintenance ends, `machine.ca` changes, TLS is turned
//! off), every TLS connection accepted before loses its rights and is closed, whether its
//! handshake finished or not.
//!
//! Every connection speaks gRPC (Talos's machine API, COSI and keelson's extension:
//! [`super::rpc`]): its first bytes must be the HTTP/2 client preface, anything else is
//! closed. What a client may call is checked per method ([`super::rpc::dispatch::authorize`]).

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use evloop::Tag;
use net::config::MachineConfig;
use net::controllers::MACHINE_CONFIG_ID;
use net::resource::{Kind, Namespace};
use runtime::{Change, Runtime};

use super::conn::Conn;
use super::cosi::watch::History;
use super::remote::{Remote, MAX_LISTENERS};
use super::rpc::dispatch::{Call, FeedCtx};
use super::rpc::events::{self, EventLog};
use super::rpc::GrpcConn;
use super::slots::{self, Class, Counts, Limits, Source};
pub use super::socket::ServerError;
use super::socket::Socket;
use super::transport::{Access, Transport};
use crate::machine::{Machine, Power};
use crate::reactor::Reactor;
pub use crate::verbs::Effects;

/// Most open connections, unless the node is told otherwise (`run --api-max-connections`).
pub const MAX_CONNECTIONS: usize = 256;

/// The kinds the TLS mode and certificate follow (the config, addresses and hostname).
const TLS_FOLLOWS: [Kind; 3] = [Kind::AddressStatus, Kind::HostnameStatus, Kind::MachineConfig];

/// The key (under the API's tag) of the local socket; the TLS listeners' follow it.
const KEY_SOCKET: u64 = 0;
/// The key of the bell worker threads ring (calls forwarded to other nodes).
const KEY_BELL: u64 = 1 + MAX_LISTENERS as u64;
/// The first of trustd's listeners' keys.
const KEY_TRUSTD: u64 = KEY_BELL + 1;
/// The first connection's key, above every listener's and the bell's.
const FIRST_CONN_KEY: u64 = KEY_TRUSTD + MAX_LISTENERS as u64;

/// The key after `key` for the next connection: keys (2^48 of them) outlast any number of
/// connections, and should they wrap, they skip the listeners'.
fn next_conn_key(key: u64) -> u64 {
    let next = key.wrapping_add(1) & evloop::tokens::KEY_MASK;
    next.max(FIRST_CONN_KEY)
}

/// The listening sockets and their connections.
pub struct Server {
    socket: Option<Socket>,
    remote: Option<Remote>,
    tag: Tag,
    next_key: u64,
    conns: BTreeMap<u64, Conn>,
    limits: Limits,
    /// What requests did beyond their answer: a reboot or shutdown for the loop to take, a
    /// config on trial.
    effects: Effects,
    /// The node's recent events, for gRPC's `Events`.
    events: EventLog,
    /// The recent changes of every kind, for COSI's watches.
    cosi: History,
    /// Rung by the threads of forwarded calls ([`super::rpc::proxy`]): their answers wait
    /// in the calls' feeds, pumped after every loop iteration; and by the trustd client's
    /// thread, whose answer the next refresh takes.
    bell: Option<evloop::Bell>,
}

/// Where a connection whose TLS handshake just ended goes.
enum Placed {
    /// Its slots (or it was placed before).
    Kept,
    /// Nowhere: no slot for its role; it is told why and closed.
    Refused,
    /// Nowhere: it has no rights (the trust moved on during its handshake).
    Gone,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("path", &self.socket.as_ref().map(Socket::path))
            .field("remote", &self.remote)
            .field("conns", &self.conns.len())
            .finish()
    }
}

impl Server {
    /// Listen on `path` (mode 0600: only root may connect) and over TLS on each of
    /// `listen`, their fds reported as tokens of `tag`, the connections' too.
    pub fn bind(
        path: Option<&Path>,
        listen: &[SocketAddr],
        reactor: &Reactor,
        tag: Tag,
        max_connections: usize,
    ) -> Result<Self, ServerError> {
        let socket = path.map(|p| Socket::bind(p, reactor, tag.token(KEY_SOCKET))).transpose()?;
        let remote = match listen {
            [] => None,
            addrs => Some(Remote::bind(addrs, reactor, tag.token(KEY_SOCKET + 1))?),
        };
        // Without a bell, forwarded calls still end: their feeds are asked at their deadline.
        let bell = evloop::Bell::new().map_err(|e| e.to_string()).and_then(|b| {
            let fd = std::os::fd::AsFd::as_fd(&b);
            reactor.add(fd, tag.token(KEY_BELL)).map(|()| b).map_err(|e| e.to_string())
        });
        let bell =
            bell.map_err(|e| log::warn!(target: "api", "no bell for forwarded calls: {e}")).ok();
        // The same bell wakes the loop for trustd's answer.
        let mut remote = remote;
        if let (Some(r), Some(b)) = (remote.as_mut(), bell.as_ref()) {
            r.wake_with(b.ringer());
        }
        Ok(Self {
            socket,
            remote,
            tag,
            next_key: FIRST_CONN_KEY,
            conns: BTreeMap::new(),
            limits: Limits::new(max_connections),
            effects: Effects::default(),
            events: EventLog::default(),
            cosi: History::default(),
            bell,
        })
    }

    /// Serve trustd (TLS, `securityapi.SecurityService/Certificate` only) on each of `listen`
    /// once the node has a `machine.ca` with its key; needs the TLS API.
    pub fn listen_trustd(
        &mut self,
        listen: &[SocketAddr],
        reactor: &Reactor,
    ) -> Result<(), ServerError> {
        let Some(remote) = &mut self.remote else {
            return Err(ServerError::from(super::remote::ListenError::NoApi));
        };
        remote.bind_trustd(listen, reactor, self.tag.token(KEY_TRUSTD))?;
        Ok(())
    }

    /// How long the certificates trustd signs are valid (`None`: a year).
    pub fn trustd_cert_lifetime(&mut self, lifetime: Option<Duration>) {
        self.effects.trustd_lifetime = lifetime;
    }

    /// Keep applied configs in `path` (the config file the node reads at start).
    pub fn keep_config_in(&mut self, path: Option<PathBuf>) {
        self.effects.config_path = path;
    }

    /// Trust roots for an upgrade's https downloads.
    pub fn fetch_roots(&mut self, roots: Vec<PathBuf>) {
        self.effects.roots = roots;
    }

    /// Where `Bootstrap` looks and what it writes.
    pub fn etcd_paths(&mut self, paths: crate::etcd::bootstrap::Paths) {
        self.effects.etcd = Some(paths);
    }

    /// `Bootstrap` accepted since the last call.
    pub fn take_bootstrap(&mut self) -> bool {
        std::mem::take(&mut self.effects.bootstrap)
    }

    /// `EtcdLeaveCluster` removed this node's member since the last call.
    pub fn take_etcd_stop(&mut self) -> bool {
        std::mem::take(&mut self.effects.etcd_stop)
    }

    /// A service restart asked for since the last call.
    pub fn take_restart(&mut self) -> Option<String> {
        self.effects.restart.take()
    }

    /// A service start or stop asked for since the last call.
    pub fn take_service_op(&mut self) -> Option<(String, crate::supervisor::Op)> {
        self.effects.service_op.take()
    }

    /// A reboot or shutdown asked for since the last call.
    pub fn take_power(&mut self) -> Option<Power> {
        self.effects.power.take()
    }

    /// True when `token` is a listener's or a connection's.
    pub fn owns(&self, token: u64) -> bool {
        (token == self.tag.token(KEY_SOCKET) && self.socket.is_some())
            || (token == self.tag.token(KEY_BELL) && self.bell.is_some())
            || self.remote.as_ref().is_some_and(|r| r.owns(token))
            || self.conns.contains_key(&token)
    }

    /// Open connections (TLS or the local socket, handshaking or not).
    pub fn open_connections(&self) -> usize {
        self.conns.len()
    }

    /// The earliest idle deadline.
    pub fn poll_at(&self) -> Option<Instant> {
        let reissue = self.remote.as_ref().and_then(Remote::poll_at);
        let trial = self.effects.trial.as_ref().map(|t| t.deadline);
        let upgrade = self.effects.upgrade.as_ref().map(crate::upgrade::Job::poll_at);
        self.conns
            .values()
            .filter_map(Conn::deadline)
            .chain(reissue)
            .chain(trial)
            .chain(upgrade)
            .min()
    }

    /// Handle readiness of one of our tokens.
    pub fn ready(
        &mut self,
        token: u64,
        rt: &mut Runtime,
        machine: Machine,
        reactor: &Reactor,
        now: Instant,
    ) {
        if token == self.tag.token(KEY_SOCKET) {
            self.accept_local(reactor, now);
            return;
        }
        if token == self.tag.token(KEY_BELL) {
            // What rang waits in a feed: the loop's next `after_run` pumps it.
            if let Some(b) = &self.bell {
                b.drain();
            }
            return;
        }
        if self.remote.as_ref().is_some_and(|r| r.owns(token)) {
            self.accept_tls(token, reactor, now);
            return;
        }
        let Some(mut conn) = self.conns.remove(&token) else { return };
        let ringer = self.bell.as_ref().map(evloop::Bell::ringer);
        let shared = (&self.events, &self.cosi, ringer.as_ref());
        if !serve(&mut conn, rt, machine, now, &mut self.effects, shared) {
            return;
        }
        match self.place(&mut conn) {
            Placed::Kept => {
                if conn.settle(token, reactor, now) {
                    self.conns.insert(token, conn);
                }
            }
            // Told why, as far as the socket takes it now; dropped either way, so it never
            // holds a slot beyond its class's.
            Placed::Refused => {
                let _ = conn.settle(token, reactor, now);
                conn.stream.close();
            }
            Placed::Gone => {}
        }
    }

    /// Once a TLS handshake is done, move the connection from the handshake pool to its
    /// role's slots.
    fn place(&mut self, conn: &mut Conn) -> Placed {
        if conn.class != Class::Handshake || conn.stream.handshaking() {
            return Placed::Kept;
        }
        let class = match conn.access() {
            Access::Admin => Class::Admin,
            Access::Revoked | Access::Pending => return Placed::Gone,
            Access::Operator | Access::Reader | Access::Maintenance | Access::Trustd => {
                Class::Other
            }
        };
        if !self.make_room(class) {
            log::debug!(target: "api", "no slot left for a {:?} TLS client", conn.access());
            conn.refuse("too many connections: every slot for this client's role is busy");
            return Placed::Refused;
        }
        conn.class = class;
        Placed::Kept
    }

    fn counts(&self) -> Counts {
        let mut counts = Counts::default();
        for c in self.conns.values() {
            counts.add(c.class);
        }
        counts
    }

    /// Room for one more connection of `class`, closing an idle one if need be; false when
    /// there is none.
    fn make_room(&mut self, class: Class) -> bool {
        // One close makes room for any class (see `slots::fits`); twice for safety.
        for _ in 0..2 {
            match slots::fits(&self.limits, &self.counts(), class) {
                Ok(()) => return true,
                Err(victims) => {
                    if !self.evict_oldest(victims) {
                        return false;
                    }
                }
            }
        }
        slots::fits(&self.limits, &self.counts(), class).is_ok()
    }

    /// Before the runtime runs: say which changes [`Api::after_run`] will read, and roll a
    /// config on trial back once its time is up.
    pub fn before_run(&mut self, rt: &mut Runtime, now: Instant) {
        rt.journal_only(Some(self.journaled_kinds()));
        if self.effects.trial.as_ref().is_some_and(|t| t.deadline <= now) {
            if let Some(t) = self.effects.trial.take() {
                t.roll_back(rt);
            }
        }
        crate::verbs::follow_upgrade(&mut self.effects);
        crate::verbs::follow_reset(&mut self.effects);
        crate::verbs::follow_etcd_leave(&mut self.effects);
    }

    /// The kinds whose changes matter here: what the TLS identity follows, and every watch.
    fn journaled_kinds(&self) -> Vec<Kind> {
        let mut kinds = TLS_FOLLOWS.to_vec();
        kinds.extend(events::KINDS);
        kinds.extend(self.conns.values().filter_map(Conn::grpc).flat_map(|g| g.kinds()));
        // COSI's rings keep the recent changes of every kind (a watch may ask for the last
        // events of any kind), so every kind is journaled.
        kinds.extend_from_slice(Kind::ALL);
        kinds
    }

    /// After the runtime ran: feed the gRPC streams (watches, followed logs), close idle
    /// connections, and update what epoll watches for.
    pub fn after_run(&mut self, rt: &Runtime, changes: &[Change], reactor: &Reactor, now: Instant) {
        self.events.record(rt, changes, now);
        self.cosi.record(changes);
        let relevant = changes.iter().any(|c| TLS_FOLLOWS.contains(&c.kind));
        if self
            .remote
            .as_mut()
            .is_some_and(|r| r.wants_refresh(now, relevant) && r.refresh(rt, now))
        {
            self.revoke_stale();
        }
        let tokens: Vec<u64> = self.conns.keys().copied().collect();
        for token in tokens {
            let Some(mut conn) = self.conns.remove(&token) else { continue };
            let outside = conn.unwritten();
            if let Some(g) = conn.grpc_mut() {
                let ctx = FeedCtx { rt, changes, events: &self.events, cosi: &self.cosi, now };
                g.pump(&ctx, outside);
            }
            if conn.check_bounds(now) && conn.settle(token, reactor, now) {
                self.conns.insert(token, conn);
            }
        }
    }

    /// The TLS trust changed: every connection accepted under the old one goes. One still in
    /// its handshake is closed now; one that has a session finishes writing what it was
    /// answered (the `apply-config` that ended maintenance gets its answer) and is read no
    /// more.
    fn revoke_stale(&mut self) {
        let stale: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, c)| c.access() == Access::Revoked)
            .map(|(t, _)| *t)
            .collect();
        if !stale.is_empty() {
            log::info!(target: "api", "the TLS trust changed: closing {} connection(s) made before", stale.len());
        }
        for token in stale {
            let Some(mut conn) = self.conns.remove(&token) else { continue };
            if conn.stream.handshaking() {
                conn.stream.close();
                continue;
            }
            conn.revoke();
            self.conns.insert(token, conn);
        }
    }

    fn accept_local(&mut self, reactor: &Reactor, now: Instant) {
        loop {
            let Some(socket) = &self.socket else { return };
            let stream = match socket.accept() {
                Ok(s) => s,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    // EMFILE and friends: the backlog keeps the rest; try again next wakeup.
                    log::warn!(target: "api", "accept: {e}");
                    return;
                }
            };
            if stream.set_nonblocking(true).is_err() {
                continue;
            }
            self.admit(Box::new(stream), Class::Local, None, reactor, now);
        }
    }

    fn accept_tls(&mut self, token: u64, reactor: &Reactor, now: Instant) {
        loop {
            let Some(remote) = &self.remote else { return };
            let tcp = match remote.accept(token) {
                Ok(Some(s)) => s,
                Ok(None) => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    log::warn!(target: "api", "accept: {e}");
                    return;
                }
            };
            let source = tcp.peer_addr().ok().map(|a| Source::of(a.ip()));
            if let Some(stream) = remote.wrap(tcp, token) {
                self.admit(Box::new(stream), Class::Handshake, source, reactor, now);
            }
        }
    }

    /// Take a new connection, making room if its class's slots are full.
    fn admit(
        &mut self,
        mut stream: Box<dyn Transport>,
        class: Class,
        source: Option<Source>,
        reactor: &Reactor,
        now: Instant,
    ) {
        if !self.make_room(class) {
            // Before its preface: the server's preface, then a GOAWAY saying why.
            let mut g = GrpcConn::new();
            g.go_away("too many connections");
            stream.refuse_raw(&g.take_output());
            return;
        }
        let token = self.tag.token(self.next_key);
        self.next_key = next_conn_key(self.next_key);
        if let Err(e) = reactor.add(stream.fd(), token) {
            log::warn!(target: "api", "{e}");
            return;
        }
        let mut conn = Conn::new(stream, class, now);
        conn.source = source;
        self.conns.insert(token, conn);
    }

    /// Close the oldest connection of one of `classes` that neither streams nor has an answer
    /// waiting, to make room for a new one; false when there is none.
    /// A full handshake pool closes the oldest handshake of the busiest source instead (see
    /// [`slots::handshake_victim`]).
    fn evict_oldest(&mut self, classes: &[Class]) -> bool {
        let evictable = |c: &Conn| classes.contains(&c.class) && c.evictable();
        let oldest = if classes == [Class::Handshake] {
            let pending: Vec<_> = self
                .conns
                .iter()
                .filter(|(_, c)| evictable(c))
                .map(|(t, c)| (*t, c.source, c.accepted))
                .collect();
            slots::handshake_victim(&pending)
        } else {
            self.conns
                .iter()
                .filter(|(_, c)| evictable(c))
                .min_by_key(|(_, c)| c.accepted)
                .map(|(t, _)| *t)
        };
        let Some(mut conn) = oldest.and_then(|t| self.conns.remove(&t)) else { return false };
        log::debug!(target: "api", "closing the oldest idle connection to make room for a new one");
        conn.refuse_now("too many connections: closed to make room", Instant::now());
        true
    }
}

/// Read what is there and run the gRPC calls it completes; false when the connection is to
/// be dropped now.
fn serve(
    conn: &mut Conn,
    rt: &mut Runtime,
    machine: Machine,
    now: Instant,
    effects: &mut Effects,
    (events, cosi, bell): (&EventLog, &History, Option<&evloop::Ringer>),
) -> bool {
    if !conn.read(now) || !conn.sniff(now) {
        return false;
    }
    if conn.grpc().is_some() {
        let input = conn.take_input();
        let access = access(conn, rt);
        let mut call = Call { access, rt, machine, effects, events, cosi, bell, now };
        if let Some(g) = conn.grpc_mut() {
            g.recv(&input, &mut call);
        }
        if effects.power.is_some() {
            // The answer is written before services stop; the connection then closes. No
            // GOAWAY: some clients (grpclib) fail the call a GOAWAY follows in the same read.
            conn.finish();
        }
    }
    true
}

/// What the client may do now. Maintenance ends the moment a config is in the store, before
/// the listener follows it (later in the loop iteration): a maintenance client's next
/// request, even in the same batch of reads, has no rights.
fn access(conn: &Conn, rt: &Runtime) -> Access {
    match conn.access() {
        Access::Maintenance
            if rt
                .store()
                .get_spec::<MachineConfig>(Namespace::Config, MACHINE_CONFIG_ID)
                .is_some() =>
        {
            Access::Revoked
        }
        a => a,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_keys_stay_above_the_listeners_even_when_they_wrap() {
        assert_eq!(next_conn_key(FIRST_CONN_KEY), FIRST_CONN_KEY + 1);
        assert_eq!(next_conn_key(evloop::tokens::KEY_MASK), FIRST_CONN_KEY);
        assert!(FIRST_CONN_KEY > KEY_SOCKET + MAX_LISTENERS as u64);
        assert!(KEY_TRUSTD > KEY_BELL && FIRST_CONN_KEY >= KEY_TRUSTD + MAX_LISTENERS as u64);
    }
}
