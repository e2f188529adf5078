// SPDX-License-Identifier: Apache-2.0
//! The API server, driven by the node's event loop: a non-blocking listener and non-blocking
//! connections, each with its own epoll token. No threads, and nothing here ever blocks.
//! Requests are answered here; each connection's bounds are in [`super::conn`], the socket
//! path's ownership in [`super::socket`], the TCP listeners and TLS mode in
//! [`super::remote`]. The local socket and TLS connections share the same connection code
//! and bounds; what a client may call depends on how it connected ([`allowed`]).
//!
//! At most [`MAX_CONNECTIONS`], split into slots per class ([`super::slots`]: a pool for TLS
//! handshakes, reserves for the local socket and for `os:admin`). When a class's slots are
//! full, a new connection takes the place of the oldest one of that class that has no stream
//! open and no answer waiting (that one gets an error line and is closed), so a new client
//! always gets an answer; only when every such connection streams does the new one get
//! `too many connections`.
//!
//! When the node's TLS trust changes (maintenance ends, `machine.ca` changes, TLS is turned
//! off), every TLS connection accepted before loses its rights and is closed, whether its
//! handshake finished or not.
//!
//! Each connection speaks what its first bytes say: the HTTP/2 client preface makes it a
//! gRPC connection (Talos's machine API, [`super::rpc`]), anything else stays on the JSON
//! lines protocol. Both share the slots, the trust generations and the connection bounds.

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Instant;

use evloop::Tag;
use net::config::MachineConfig;
use net::controllers::{self, CMDLINE_ID, MACHINE_CONFIG_ID, NETWORK_STATUS_ID};
use net::resource::{
    HostnameStatus, Kind, LinkStatus, MachineStatus, Namespace, NetworkStatus, Resource,
    ServiceStatus, TimeStatus, HOSTNAME_ID, MACHINE_STATUS_ID, TIME_STATUS_ID,
};
use runtime::{Change, ChangeKind, Runtime};
use serde_json::{json, Value};

use super::conn::Conn;
use super::diff::{self, Specs};
use super::protocol::{self, ApplyMode, Query, Request};
use super::remote::{self, Remote, MAX_LISTENERS};
use super::rpc::dispatch::{Call, FeedCtx};
use super::rpc::events::{self, EventLog};
use super::slots::{self, Class, Counts, Limits, Source};
pub use super::socket::ServerError;
use super::socket::Socket;
use super::transport::{Access, Transport};
use super::trial::{self, Trial};
use crate::logring;
use crate::machine::{Machine, Power};
use crate::reactor::Reactor;

/// Most open connections, unless the node is told otherwise (`run --api-max-connections`).
pub const MAX_CONNECTIONS: usize = 256;

/// The kinds the TLS mode and certificate follow (the config, addresses and hostname).
const TLS_FOLLOWS: [Kind; 3] = [Kind::AddressStatus, Kind::HostnameStatus, Kind::MachineConfig];

/// The key (under the API's tag) of the local socket; the TLS listeners' follow it.
const KEY_SOCKET: u64 = 0;
/// The first connection's key, above every listener's.
const FIRST_CONN_KEY: u64 = 1 + MAX_LISTENERS as u64;

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
}

/// Where a connection whose TLS handshake just ended goes.
enum Placed {
    /// Its slots (or it was placed before).
    Kept,
    /// Nowhere: no slot for its role; it gets an error line and is closed.
    Refused,
    /// Nowhere: it has no rights (the trust moved on during its handshake).
    Gone,
}

/// What requests leave behind for the server and the loop.
#[derive(Debug, Default)]
pub struct Effects {
    pub(crate) power: Option<Power>,
    pub(crate) trial: Option<Trial>,
    /// A supervised service to restart (its id).
    pub(crate) restart: Option<String>,
    /// Where the node reads its config from: an applied config is written there.
    pub(crate) config_path: Option<PathBuf>,
    /// etcd's data directory and the file that keeps a bootstrap request.
    pub(crate) etcd: Option<crate::etcd::bootstrap::Paths>,
    /// `Bootstrap` was accepted: start etcd as a new cluster.
    pub(crate) bootstrap: bool,
}

impl Effects {
    /// Keep `text` in the config file; what to tell the client.
    pub(crate) fn keep(&self, text: &str) -> Value {
        match &self.config_path {
            Some(p) => match trial::write_back(p, text) {
                Ok(()) => {
                    log::info!(target: "api", "the applied config is kept in {}", p.display());
                    // The newest config wins: a config staged before would undo it at the
                    // next start.
                    let staged = crate::staged::path_for(p);
                    if std::fs::remove_file(&staged).is_ok() {
                        log::info!(target: "api", "{} dropped: a newer config was applied", staged.display());
                    }
                    json!(p.display().to_string())
                }
                Err(e) => {
                    log::error!(target: "api", "the applied config could not be kept: {e}");
                    json!(format!("not kept for the next start: {e}"))
                }
            },
            None => json!("not kept for the next start: the node has no config file"),
        }
    }
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
        Ok(Self {
            socket,
            remote,
            tag,
            next_key: FIRST_CONN_KEY,
            conns: BTreeMap::new(),
            limits: Limits::new(max_connections),
            effects: Effects::default(),
            events: EventLog::default(),
        })
    }

    /// Keep applied configs in `path` (the config file the node reads at start).
    pub fn keep_config_in(&mut self, path: Option<PathBuf>) {
        self.effects.config_path = path;
    }

    /// Where `Bootstrap` looks and what it writes.
    pub fn etcd_paths(&mut self, paths: crate::etcd::bootstrap::Paths) {
        self.effects.etcd = Some(paths);
    }

    /// `Bootstrap` accepted since the last call.
    pub fn take_bootstrap(&mut self) -> bool {
        std::mem::take(&mut self.effects.bootstrap)
    }

    /// A service restart asked for since the last call.
    pub fn take_restart(&mut self) -> Option<String> {
        self.effects.restart.take()
    }

    /// A reboot or shutdown asked for since the last call.
    pub fn take_power(&mut self) -> Option<Power> {
        self.effects.power.take()
    }

    /// True when `token` is a listener's or a connection's.
    pub fn owns(&self, token: u64) -> bool {
        (token == self.tag.token(KEY_SOCKET) && self.socket.is_some())
            || self.remote.as_ref().is_some_and(|r| r.owns(token))
            || self.conns.contains_key(&token)
    }

    /// The earliest idle deadline.
    pub fn poll_at(&self) -> Option<Instant> {
        let reissue = self.remote.as_ref().and_then(Remote::poll_at);
        let trial = self.effects.trial.as_ref().map(|t| t.deadline);
        self.conns.values().filter_map(Conn::deadline).chain(reissue).chain(trial).min()
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
        if self.remote.as_ref().is_some_and(|r| r.owns(token)) {
            self.accept_tls(token, reactor, now);
            return;
        }
        let Some(mut conn) = self.conns.remove(&token) else { return };
        if !serve(&mut conn, rt, machine, now, &mut self.effects, &self.events) {
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
            Access::Operator | Access::Reader | Access::Maintenance => Class::Other,
        };
        if !self.make_room(class) {
            log::debug!(target: "api", "no slot left for a {:?} TLS client", conn.access());
            conn.send(&protocol::error(
                "too many connections: every slot for this client's role is busy",
            ));
            conn.finish();
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
    }

    /// The kinds whose changes matter here: what the TLS identity follows, and every watch.
    fn journaled_kinds(&self) -> Vec<Kind> {
        let mut kinds = TLS_FOLLOWS.to_vec();
        kinds.extend(events::KINDS);
        kinds.extend(self.conns.values().filter_map(|c| c.watch.as_ref().map(|q| q.kind)));
        kinds.extend(self.conns.values().filter_map(Conn::grpc).flat_map(|g| g.kinds()));
        kinds
    }

    /// After the runtime ran: stream store changes to watchers and new log lines to
    /// followers, close idle connections, and update what epoll watches for.
    pub fn after_run(&mut self, rt: &Runtime, changes: &[Change], reactor: &Reactor, now: Instant) {
        self.events.record(rt, changes, now);
        let relevant = changes.iter().any(|c| TLS_FOLLOWS.contains(&c.kind));
        if self
            .remote
            .as_mut()
            .is_some_and(|r| r.wants_refresh(now, relevant) && r.refresh(rt, now))
        {
            self.revoke_stale();
        }
        let (log_lines, log_next) = if self.conns.values().any(|c| c.follow.is_some()) {
            logring::since(0)
        } else {
            (vec![], 0)
        };
        let first_kept = log_next - log_lines.len() as u64;
        let node = node_name(rt);
        let tokens: Vec<u64> = self.conns.keys().copied().collect();
        for token in tokens {
            let Some(mut conn) = self.conns.remove(&token) else { continue };
            if let Some(q) = conn.watch.clone() {
                for ch in changes.iter().filter(|c| matches(&q, c)) {
                    conn.send(&event(rt, ch, &node));
                }
            }
            if let Some(from) = conn.follow {
                let skip = usize::try_from(from.saturating_sub(first_kept)).unwrap_or(usize::MAX);
                let new: Vec<&String> = log_lines.iter().skip(skip).collect();
                if !new.is_empty() {
                    conn.send(&json!({"ok": true, "lines": new}));
                }
                conn.follow = Some(log_next);
            }
            let outside = conn.unwritten();
            if let Some(g) = conn.grpc_mut() {
                let ctx = FeedCtx { rt, changes, events: &self.events, now };
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
            if let Some(stream) = remote.wrap(tcp) {
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
            let mut line = protocol::error("too many connections").to_string();
            line.push('\n');
            stream.refuse_raw(&line);
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
        if conn.grpc().is_none() {
            // A gRPC client would take an error line for a broken frame: it just sees the
            // close.
            let mut line = protocol::error("too many connections: closed to make room").to_string();
            line.push('\n');
            conn.stream.refuse_raw(&line);
        }
        conn.stream.close();
        true
    }
}

/// Read what is there and answer every complete request line; false when the connection is
/// to be dropped now.
fn serve(
    conn: &mut Conn,
    rt: &mut Runtime,
    machine: Machine,
    now: Instant,
    effects: &mut Effects,
    events: &EventLog,
) -> bool {
    if !conn.read(now) {
        return false;
    }
    conn.sniff();
    if conn.grpc().is_some() {
        let input = conn.take_input();
        let access = access(conn, rt);
        let mut call = Call { access, rt, machine, effects, events, now };
        if let Some(g) = conn.grpc_mut() {
            g.recv(&input, &mut call);
        }
        if effects.power.is_some() {
            // The answer is written before services stop; the connection then closes. No
            // GOAWAY: some clients (grpclib) fail the call a GOAWAY follows in the same read.
            conn.finish();
        }
        return true;
    }
    if matches!(conn.proto, super::conn::Proto::Sniff) {
        return true;
    }
    for line in conn.take_lines(now) {
        handle(conn, &line, rt, machine, now, effects);
    }
    conn.refuse_overlong();
    true
}

fn handle(
    conn: &mut Conn,
    line: &[u8],
    rt: &mut Runtime,
    machine: Machine,
    now: Instant,
    effects: &mut Effects,
) {
    let request = match protocol::parse(line) {
        Ok(r) => r,
        Err(e) => {
            conn.send(&protocol::error(&e.to_string()));
            return;
        }
    };
    if conn.streaming() {
        conn.send(&protocol::error("this connection is streaming; open another for new requests"));
        return;
    }
    if let Err(why) = allowed(access(conn, rt), &request) {
        conn.send(&protocol::error(&why));
        return;
    }
    let node = node_name(rt);
    let reply = match request.clone() {
        Request::Get(q) => {
            let id = q.id.clone().unwrap_or_default();
            match rt.store().get(q.namespace, q.kind, &id) {
                Some(r) => json!({"ok": true, "node": node, "resource": r}),
                None => protocol::error(&format!(
                    "{} {id:?} not found in namespace {}",
                    q.kind, q.namespace
                )),
            }
        }
        Request::List(q) => {
            let list: Vec<&Resource> = rt.store().list(q.namespace, q.kind).collect();
            json!({"ok": true, "node": node, "resources": list})
        }
        Request::Watch(q) => {
            for r in rt.store().list(q.namespace, q.kind) {
                if q.id.as_ref().is_none_or(|id| *id == r.metadata.id) {
                    conn.send(
                        &json!({"ok": true, "event": "created", "node": node, "resource": r}),
                    );
                }
            }
            conn.watch = Some(q);
            json!({"ok": true, "event": "bootstrapped"})
        }
        Request::Logs { follow } => {
            let (lines, next) = logring::since(0);
            if follow {
                conn.follow = Some(next);
            }
            json!({"ok": true, "lines": lines})
        }
        Request::ApplyConfig { config, dry_run, mode, allow_partial } => {
            let apply = Apply { text: &config, dry_run, partial: allow_partial };
            match apply_with_mode(rt, apply, mode, effects, now) {
                Ok(v) => v,
                Err(e) => protocol::error(&e),
            }
        }
        Request::ConfirmConfig => match effects.trial.take() {
            Some(t) => {
                log::info!(target: "api", "the config on trial is confirmed");
                json!({"ok": true, "node": node, "kept": effects.keep(&t.text)})
            }
            None => protocol::error("no config on trial (apply-config --mode try first)"),
        },
        Request::MachineStatus => machine_status(rt, machine, &node, now),
        Request::Version => json!({
            "ok": true,
            "node": node,
            "version": env!("CARGO_PKG_VERSION"),
            "maintenance": access(conn, rt) == Access::Maintenance,
        }),
        Request::Disks => super::hostinfo::disks(Path::new("/sys/block")),
        Request::Dmesg => super::hostinfo::dmesg(Path::new("/dev/kmsg")),
        Request::Reboot { staged: true }
            if !effects
                .config_path
                .as_deref()
                .is_some_and(|p| crate::staged::path_for(p).is_file()) =>
        {
            protocol::error(
                "reboot --mode staged: no staged config (apply-config --mode staged first)",
            )
        }
        Request::Reboot { .. } | Request::Shutdown => {
            let what = if request_is_reboot(&request) { Power::Reboot } else { Power::Shutdown };
            effects.power = Some(what);
            // The answer is written before services stop; the connection then closes.
            conn.finish();
            json!({"ok": true, "node": node, "action": format!("{what:?}").to_lowercase()})
        }
    };
    conn.send(&reply);
}

fn request_is_reboot(r: &Request) -> bool {
    matches!(r, Request::Reboot { .. })
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

/// May a client with `access` make this request? Err: why not, for the client.
fn allowed(access: Access, request: &Request) -> Result<(), String> {
    let changes_config = matches!(request, Request::ApplyConfig { .. } | Request::ConfirmConfig);
    let power = matches!(request, Request::Reboot { .. } | Request::Shutdown);
    match access {
        Access::Admin => Ok(()),
        Access::Reader if power => Err("permission denied: os:reader may not reboot or shut down (os:admin or os:operator)".into()),
        Access::Operator | Access::Reader if changes_config => Err(format!(
            "permission denied: {} may not apply a config (os:admin only)",
            role_name(access)
        )),
        Access::Operator | Access::Reader => Ok(()),
        Access::Maintenance => match request {
            Request::Version | Request::Disks | Request::ApplyConfig { .. } => Ok(()),
            Request::Get(q) | Request::List(q)
                if matches!(q.namespace, Namespace::Network | Namespace::NetworkConfig) =>
            {
                Ok(())
            }
            // The stage tells an operator where the machine is (it says `maintenance`).
            Request::Get(q) | Request::List(q) if q.kind == Kind::MachineStatus => Ok(()),
            _ => Err("not available in maintenance mode: apply a machine config with machine.ca first (maintenance allows version, disks, get/list of network resources and machinestatus, apply-config)".into()),
        },
        Access::Pending => Err("not authenticated".into()),
        Access::Revoked => Err("this connection was made under a TLS trust the node no longer has (maintenance ended, or machine.ca changed): reconnect with a certificate from the node's CA".into()),
    }
}

fn role_name(access: Access) -> &'static str {
    match access {
        Access::Operator => "os:operator",
        Access::Reader => "os:reader",
        _ => "this client",
    }
}

/// Does a change concern a watch?
fn matches(q: &Query, ch: &Change) -> bool {
    ch.namespace == q.namespace && ch.kind == q.kind && q.id.as_ref().is_none_or(|id| *id == ch.id)
}

/// A store change as a watch event. The resource is read now, so several changes of one
/// resource in one loop iteration all show its latest version.
fn event(rt: &Runtime, ch: &Change, node: &str) -> Value {
    let what = match ch.what {
        ChangeKind::Created => "created",
        ChangeKind::Updated | ChangeKind::TearingDown | ChangeKind::Finalizers => "updated",
        ChangeKind::Destroyed => "destroyed",
    };
    match rt.store().get(ch.namespace, ch.kind, &ch.id).filter(|_| what != "destroyed") {
        Some(r) => json!({"ok": true, "event": what, "node": node, "resource": r}),
        // Gone: only its identity is left.
        None => json!({"ok": true, "event": "destroyed", "node": node, "resource": {
            "metadata": {"namespace": ch.namespace, "type": ch.kind, "id": ch.id}
        }}),
    }
}

/// The node's hostname, or empty (the NODE column).
fn node_name(rt: &Runtime) -> String {
    rt.store()
        .get_spec::<HostnameStatus>(Namespace::Network, HOSTNAME_ID)
        .map(|h| h.hostname.clone())
        .unwrap_or_default()
}

fn machine_status(rt: &Runtime, machine: Machine, node: &str, now: Instant) -> Value {
    let store = rt.store();
    let network = store.get_spec::<NetworkStatus>(Namespace::Network, NETWORK_STATUS_ID);
    let ready =
        network.is_some_and(|s| s.address_ready && s.connectivity_ready && s.etc_files_ready);
    let status = store.get_spec::<MachineStatus>(Namespace::Runtime, MACHINE_STATUS_ID);
    json!({
        "ok": true,
        "node": node,
        "stage": status.map(|s| s.stage),
        "ready": status.is_some_and(|s| s.status.ready),
        "unmetConditions": status.map(|s| &s.status.unmet_conditions),
        "uptimeSeconds": now.saturating_duration_since(machine.started).as_secs_f64(),
        "settled": machine.settled,
        "networkReady": ready,
        "network": network,
        "kubelet": store.get_spec::<ServiceStatus>(Namespace::Runtime, "kubelet"),
        "time": store.get_spec::<TimeStatus>(Namespace::Runtime, TIME_STATUS_ID),
        "state": crate::state::status(),
        "errors": rt.controllers().iter().filter_map(|c| c.last_error.as_ref().map(|e| format!("{}: {e}", c.name))).collect::<Vec<_>>(),
    })
}

/// The merged spec kinds an `apply-config` diff covers: the layered kinds of the kind table.
const SPEC_KINDS: &[Kind] = Kind::LAYERED;

fn merged_specs<'a>(resources: impl Iterator<Item = &'a Resource>) -> Specs {
    net::sort::into_map(
        resources
            .filter(|r| {
                r.metadata.namespace == Namespace::Network && SPEC_KINDS.contains(&r.metadata.kind)
            })
            .map(|r| {
                let key = (r.metadata.kind.short_name().to_owned(), r.metadata.id.clone());
                (key, serde_json::to_value(&r.spec).unwrap_or(Value::Null))
            }),
    )
}

/// What the config and merge controllers make of `cfg` with the running node's command line
/// and links (what `plan` does, with the live inputs).
fn plan(live: &Runtime, cfg: &MachineConfig) -> Result<Specs, String> {
    const SOURCE: &str = "api";
    let mut rt = Runtime::new();
    let mut ours = Vec::new();
    for c in controllers::config_and_merge() {
        ours.push(c.name());
        rt.register(c).map_err(|e| e.to_string())?;
    }
    let err = |e: runtime::StoreError| e.to_string();
    let store = live.store();
    // Layers the config does not produce (DHCP and other operators) stay as they are: copy
    // them, or the diff would report their addresses and routes as removed.
    for r in store.iter().filter(|r| {
        r.metadata.namespace == Namespace::NetworkConfig && !ours.contains(&r.metadata.owner)
    }) {
        if Kind::LAYERED.contains(&r.spec.kind()) {
            let id = r.metadata.id.as_str();
            rt.put_input_any(SOURCE, Namespace::NetworkConfig, id, r.spec.clone()).map_err(err)?;
        }
    }
    if let Some(cmdline) =
        store.get_spec::<net::cmdline::CmdlineNetwork>(Namespace::Runtime, CMDLINE_ID)
    {
        rt.put_input(SOURCE, Namespace::Runtime, CMDLINE_ID, cmdline.clone()).map_err(err)?;
    }
    for (id, link) in store.list_specs::<LinkStatus>(Namespace::Network) {
        rt.put_input(SOURCE, Namespace::Network, id, link.clone()).map_err(err)?;
    }
    rt.put_input(SOURCE, Namespace::Config, MACHINE_CONFIG_ID, cfg.clone()).map_err(err)?;
    let now = Instant::now();
    while rt.has_work() {
        rt.run(now);
    }
    Ok(merged_specs(rt.store().iter()))
}

/// `apply_config`, then what the mode asks: a trial to roll back, a reboot.
pub(crate) fn apply_with_mode(
    rt: &mut Runtime,
    apply: Apply<'_>,
    mode: ApplyMode,
    effects: &mut Effects,
    now: Instant,
) -> Result<Value, String> {
    let Apply { text, dry_run, .. } = apply;
    if mode == ApplyMode::Staged {
        return stage(rt, apply, effects);
    }
    let trial = match mode {
        ApplyMode::Try(t) if !dry_run => {
            Some(Trial::start(rt, effects.trial.take(), t, now, text)?)
        }
        _ => None,
    };
    let mut v = apply_config(rt, apply)?;
    if dry_run {
        return Ok(v);
    }
    match (mode, trial) {
        (ApplyMode::Try(t), Some(trial)) => {
            log::warn!(target: "api", "*** config on trial for {} s: `keelson config confirm` keeps it, otherwise it is rolled back ***", t.as_secs());
            effects.trial = Some(trial);
            v["trialSeconds"] = json!(t.as_secs());
        }
        (ApplyMode::Reboot, _) => {
            effects.trial = None;
            effects.power = Some(Power::Reboot);
            v["reboot"] = json!(true);
            v["kept"] = effects.keep(text);
        }
        _ => {
            effects.trial = None;
            v["kept"] = effects.keep(text);
        }
    }
    Ok(v)
}

/// `--mode staged`: validate and diff, then keep the config beside the config file for the
/// next start, which boots into it; nothing changes now.
fn stage(rt: &mut Runtime, apply: Apply<'_>, effects: &Effects) -> Result<Value, String> {
    let Apply { text, dry_run, .. } = apply;
    let Some(config) = &effects.config_path else {
        return Err("--mode staged: the node has no config file to stage a config beside".into());
    };
    let mut v = apply_config(rt, Apply { dry_run: true, ..apply })?;
    v["dryRun"] = json!(dry_run);
    if dry_run {
        return Ok(v);
    }
    let staged = crate::staged::path_for(config);
    trial::write_back(&staged, text).map_err(|e| format!("--mode staged: {e}"))?;
    log::info!(target: "api", "a config is staged in {}: the next start boots into it", staged.display());
    v["staged"] = json!(staged.display().to_string());
    Ok(v)
}

/// An `apply-config` request's config and how to take it.
#[derive(Clone, Copy)]
pub(crate) struct Apply<'a> {
    /// The YAML text.
    pub(crate) text: &'a str,
    /// Only report the diff.
    pub(crate) dry_run: bool,
    /// `--allow-partial`: drop invalid entries and apply the rest.
    pub(crate) partial: bool,
}

/// The config an apply brings. Any invalid entry refuses it whole and the running config
/// stays (Talos's rule for applies), unless the caller allowed a partial apply: then the
/// invalid entries are dropped, each logged, and the rest applies.
pub(crate) fn load_applied(
    text: &str,
    partial: bool,
) -> Result<net::config::MachineConfig, String> {
    let report = net::config::check(text);
    if report.errors.is_empty() {
        return Ok(report.config);
    }
    if partial && report.kept {
        for line in &report.config.dropped {
            log::warn!(target: "api", "applied config: {line}");
        }
        return Ok(report.config);
    }
    // Every invalid entry, up to a bound: the answer is one line.
    const SHOWN: usize = 16;
    let mut lines: Vec<String> =
        report.errors.iter().take(SHOWN).map(ToString::to_string).collect();
    if report.errors.len() > SHOWN {
        lines.push(format!("and {} more", report.errors.len() - SHOWN));
    }
    let hint = if report.kept { "; --allow-partial applies the rest" } else { "" };
    Err(format!("invalid config: {}; nothing applied{hint}", lines.join("; ")))
}

/// Validate, diff against the live merged specs, and apply unless `dry_run`.
fn apply_config(rt: &mut Runtime, apply: Apply<'_>) -> Result<Value, String> {
    let Apply { text, dry_run, partial } = apply;
    let cfg = load_applied(text, partial)?;
    // A CA the node cannot serve with would leave it with no way in over the network.
    if let Some(ca) = &cfg.machine.ca {
        remote::check_ca(ca).map_err(|e| format!("invalid config: machine.ca: {e}"))?;
    }
    if !dry_run {
        crate::state::check_install(&cfg).map_err(|e| {
            log::error!(target: "api", "config refused: {e}");
            format!("config refused: {e}")
        })?;
    }
    let planned = plan(rt, &cfg)?;
    let live = merged_specs(rt.store().iter());
    let changes = diff::diff(&live, &planned);
    let warnings = cfg.warnings.clone();
    let dropped = cfg.dropped.clone();
    if !dry_run {
        rt.put_input(crate::machine::SOURCE, Namespace::Config, MACHINE_CONFIG_ID, cfg)
            .map_err(|e| e.to_string())?;
        log::info!(target: "api", "applied a new machine config ({} resource changes)", changes.len());
    }
    Ok(
        json!({"ok": true, "dryRun": dry_run, "changes": changes, "warnings": warnings, "dropped": dropped}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_keys_stay_above_the_listeners_even_when_they_wrap() {
        assert_eq!(next_conn_key(FIRST_CONN_KEY), FIRST_CONN_KEY + 1);
        assert_eq!(next_conn_key(evloop::tokens::KEY_MASK), FIRST_CONN_KEY);
        assert!(FIRST_CONN_KEY > KEY_SOCKET + MAX_LISTENERS as u64);
    }

    /// An all-or-nothing apply of `text`.
    fn strict(text: &str, dry_run: bool) -> Apply<'_> {
        Apply { text, dry_run, partial: false }
    }

    fn config(addr: &str) -> String {
        format!(
            "version: v1alpha1\nmachine:\n  network:\n    interfaces:\n      - interface: eth0\n        addresses: [{addr}]\n"
        )
    }

    /// A runtime with only the config and merge controllers, an `eth0` and a config.
    fn live(addr: &str) -> Runtime {
        let mut rt = Runtime::new();
        for c in controllers::config_and_merge() {
            rt.register(c).unwrap_or_else(|e| unreachable!("{e}"));
        }
        let link = LinkStatus {
            index: 2,
            operational_state: "up".into(),
            link_state: true,
            hardware_addr: net::resource::nethelpers::HardwareAddr(vec![2, 0, 0, 0, 0, 2]),
            ..LinkStatus::default()
        };
        let put = |rt: &mut Runtime| -> Result<(), runtime::StoreError> {
            rt.put_input("test", Namespace::Runtime, CMDLINE_ID, net::cmdline::parse(""))?;
            rt.put_input("test", Namespace::Network, "eth0", link)?;
            let cfg = net::config::parse(&config(addr)).unwrap_or_else(|e| unreachable!("{e}"));
            rt.put_input(crate::machine::SOURCE, Namespace::Config, MACHINE_CONFIG_ID, cfg)
        };
        put(&mut rt).unwrap_or_else(|e| unreachable!("{e}"));
        while rt.has_work() {
            rt.run(Instant::now());
        }
        rt
    }

    fn ids(v: &Value, action: &str) -> Vec<String> {
        v["changes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["action"] == action)
            .map(|c| {
                format!("{} {}", c["type"].as_str().unwrap_or(""), c["id"].as_str().unwrap_or(""))
            })
            .collect()
    }

    #[test]
    fn apply_config_diffs_then_applies() {
        let mut rt = live("10.0.0.2/24");
        let same = apply_config(&mut rt, strict(&config("10.0.0.2/24"), true))
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(same["changes"], json!([]), "{same}");

        let dry = apply_config(&mut rt, strict(&config("10.0.0.3/24"), true))
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(ids(&dry, "added"), ["AddressSpec eth0/10.0.0.3/24"], "{dry}");
        assert_eq!(ids(&dry, "removed"), ["AddressSpec eth0/10.0.0.2/24"], "{dry}");
        // A dry run changes nothing.
        assert!(!rt.has_work());
        assert!(rt
            .store()
            .get(Namespace::Network, Kind::AddressSpec, "eth0/10.0.0.2/24")
            .is_some());

        let applied = apply_config(&mut rt, strict(&config("10.0.0.3/24"), false))
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(applied["changes"], dry["changes"]);
        while rt.has_work() {
            rt.run(Instant::now());
        }
        assert!(rt
            .store()
            .get(Namespace::Network, Kind::AddressSpec, "eth0/10.0.0.3/24")
            .is_some());
        assert!(rt
            .store()
            .get(Namespace::Network, Kind::AddressSpec, "eth0/10.0.0.2/24")
            .is_none());
    }

    #[test]
    fn who_may_do_what() {
        let q = |ns: Namespace| Query { kind: Kind::AddressStatus, namespace: ns, id: None };
        let apply = Request::ApplyConfig {
            config: String::new(),
            dry_run: false,
            mode: ApplyMode::Auto,
            allow_partial: false,
        };
        let cases = [
            (Access::Admin, apply.clone(), true),
            (Access::Admin, Request::Reboot { staged: false }, true),
            (Access::Operator, apply.clone(), false),
            (Access::Operator, Request::Shutdown, true),
            (Access::Reader, apply.clone(), false),
            (Access::Reader, Request::Reboot { staged: false }, false),
            (Access::Reader, Request::Logs { follow: true }, true),
            (Access::Maintenance, apply.clone(), true),
            (Access::Maintenance, Request::Version, true),
            (Access::Maintenance, Request::Disks, true),
            (Access::Maintenance, Request::List(q(Namespace::Network)), true),
            (Access::Maintenance, Request::Get(q(Namespace::NetworkConfig)), true),
            (Access::Maintenance, Request::List(q(Namespace::Config)), false),
            (
                Access::Maintenance,
                Request::Get(Query {
                    kind: Kind::MachineStatus,
                    namespace: Namespace::Runtime,
                    id: Some("machine".into()),
                }),
                true,
            ),
            (Access::Maintenance, Request::Watch(q(Namespace::Network)), false),
            (Access::Maintenance, Request::Logs { follow: false }, false),
            (Access::Maintenance, Request::Dmesg, false),
            (Access::Maintenance, Request::Reboot { staged: false }, false),
            (Access::Maintenance, Request::MachineStatus, false),
            (Access::Pending, Request::Version, false),
            (Access::Revoked, Request::Version, false),
            (Access::Revoked, apply.clone(), false),
        ];
        for (access, request, ok) in cases {
            assert_eq!(allowed(access, &request).is_ok(), ok, "{access:?} {request:?}");
        }
    }

    #[test]
    fn apply_config_refuses_a_bad_config_with_its_line() {
        let mut rt = live("10.0.0.2/24");
        let e = apply_config(
            &mut rt,
            strict("version: v1alpha1\nmachine:\n  network:\n    interfaces: 3\n", false),
        )
        .err()
        .unwrap_or_default();
        assert!(e.contains("line"), "{e}");
        assert!(!rt.has_work());
    }

    #[test]
    fn apply_config_with_an_invalid_entry_is_refused_whole_unless_partial_is_asked() {
        let mut rt = live("10.0.0.2/24");
        let text = format!(
            "{}        mtu: 65536\n      - interface: eth1\n        addresses: [10.0.1.1/24]\n",
            config("10.0.0.3/24")
        );
        let e = apply_config(&mut rt, strict(&text, false)).err().unwrap_or_default();
        assert!(e.contains("machine.network.interfaces[0].mtu (line 7"), "{e}");
        assert!(e.contains("nothing applied; --allow-partial applies the rest"), "{e}");
        assert!(!rt.has_work(), "the running config stays");
        let v = apply_config(&mut rt, Apply { text: &text, dry_run: false, partial: true })
            .unwrap_or_else(|e| unreachable!("{e}"));
        let dropped = v["dropped"].as_array().cloned().unwrap_or_default();
        assert_eq!(dropped.len(), 1, "{v}");
        assert!(dropped[0].as_str().unwrap_or_default().contains("interfaces[0].mtu"), "{v}");
        assert!(rt.has_work(), "the rest is applied");
        let cfg =
            rt.store().get_spec::<net::config::MachineConfig>(Namespace::Config, MACHINE_CONFIG_ID);
        let addrs: Vec<String> = cfg
            .map(|c| {
                c.machine
                    .network
                    .interfaces
                    .iter()
                    .flat_map(|d| d.addresses.iter().map(ToString::to_string))
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(addrs, ["10.0.0.3/24", "10.0.1.1/24"]);
        // Nothing valid at all: refused even when partial, and no hint.
        let e = apply_config(
            &mut rt,
            Apply { text: "\u{1}\u{2}garbage", dry_run: false, partial: true },
        )
        .err()
        .unwrap_or_default();
        assert!(e.contains("not YAML") && !e.contains("--allow-partial"), "{e}");
    }
}
