// SPDX-License-Identifier: Apache-2.0
//! The API server, driven by the node's event loop: a non-blocking listener and non-blocking
//! connections, each with its own epoll token. No threads, and nothing here ever blocks.
//!
//! Bounds, so that no client can stall or exhaust the node:
//! - a request line is at most [`MAX_REQUEST`] bytes; a longer one gets an error and the
//!   connection is closed;
//! - a request line must be complete within [`REQUEST_DEADLINE`] of its first byte: a client
//!   dripping bytes is answered with an error and closed, however often it sends;
//! - a connection with no stream open that does nothing for [`IDLE`] is closed;
//! - at most [`MAX_CONNECTIONS`]. When the table is full, a new connection takes the place of
//!   the oldest one that has no stream open and no answer waiting (that one gets an error
//!   line and is closed), so a new client always gets an answer; only when every connection
//!   streams does the new one get `too many connections`;
//! - output waiting for a slow reader is capped at [`WRITE_CAP`]; a watcher over the cap is
//!   dropped (it can reconnect and get the current state again).
//!
//! The socket path is ours only while we serve: at bind, a socket that still answers belongs
//! to a running node and is never replaced (only one that refuses connections is stale), and
//! anything that is not a socket is left alone; at shutdown the path is removed only if it is
//! still the socket we bound (same device and inode).

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use net::config::MachineConfig;
use net::controllers::{self, CMDLINE_ID, MACHINE_CONFIG_ID, NETWORK_STATUS_ID};
use net::resource::{
    HostnameStatus, Kind, LinkStatus, Namespace, NetworkStatus, Resource, ServiceStatus,
    HOSTNAME_ID,
};
use net::runtime::{Change, ChangeKind, Runtime};
use serde_json::{json, Value};

use super::diff::{self, Specs};
use super::protocol::{self, ProtocolError, Query, Request, MAX_REQUEST};
use crate::logring;
use crate::reactor::Reactor;

/// Closed after this long without a byte in either direction (unless streaming).
pub const IDLE: Duration = Duration::from_secs(10);
/// Longest time from the first byte of a request line to its newline.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(5);
/// Most open connections, unless the node is told otherwise (`run --api-max-connections`).
pub const MAX_CONNECTIONS: usize = 256;
/// Most bytes queued for one connection before a streaming one is dropped.
pub const WRITE_CAP: usize = 4 << 20;
/// Bytes read from one connection per wakeup (level-triggered epoll brings us back): one busy
/// client cannot monopolise a loop iteration.
const READ_BUDGET: usize = 256 << 10;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// Socket setup failed.
    #[error("api socket {}: {what}: {source}", path.display())]
    Io {
        /// The socket path.
        path: PathBuf,
        /// What was attempted.
        what: &'static str,
        /// The error.
        source: std::io::Error,
    },
    /// Another process answers on the path: a running node's socket is never replaced.
    #[error("api socket {}: another process answers on it (is another keelson running?); not replacing it", path.display())]
    InUse {
        /// The socket path.
        path: PathBuf,
    },
    /// Something other than a socket is at the path.
    #[error("api socket {}: the path exists and is not a socket (a {kind}); not replacing it", path.display())]
    NotASocket {
        /// The socket path.
        path: PathBuf,
        /// What is there.
        kind: &'static str,
    },
    /// Registering with epoll failed.
    #[error("api socket: {0}")]
    Reactor(#[from] crate::reactor::ReactorError),
}

/// Node facts the runtime's store does not hold.
#[derive(Debug, Clone, Copy)]
pub struct Machine {
    /// When the loop started.
    pub started: Instant,
    /// All controllers ran without error at least once.
    pub settled: bool,
}

struct Conn {
    stream: UnixStream,
    rbuf: Vec<u8>,
    wbuf: Vec<u8>,
    /// Bytes of `wbuf` already written.
    woff: usize,
    /// When the connection was accepted: the oldest idle one makes room for a new one.
    accepted: Instant,
    last_activity: Instant,
    /// When the first byte of the unfinished request line in `rbuf` arrived.
    line_started: Option<Instant>,
    watch: Option<Query>,
    /// Following logs from this sequence number.
    follow: Option<u64>,
    /// Stop reading; close once the output is written.
    closing: bool,
    /// What epoll watches for now (read, write).
    interest: (bool, bool),
}

impl Conn {
    fn pending(&self) -> usize {
        self.wbuf.len() - self.woff
    }

    fn streaming(&self) -> bool {
        self.watch.is_some() || self.follow.is_some()
    }

    fn send(&mut self, v: &Value) {
        // Serializing a `Value` cannot fail.
        let _ = serde_json::to_writer(&mut self.wbuf, v);
        self.wbuf.push(b'\n');
    }

    /// Write what the socket takes. Err: the peer is gone.
    fn flush(&mut self, now: Instant) -> std::io::Result<()> {
        while self.woff < self.wbuf.len() {
            match self.stream.write(&self.wbuf[self.woff..]) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.woff += n;
                    self.last_activity = now;
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

    fn idle_deadline(&self) -> Option<Instant> {
        (!self.streaming() || self.closing).then(|| self.last_activity + IDLE)
    }

    fn line_deadline(&self) -> Option<Instant> {
        self.line_started.filter(|_| !self.closing).map(|t| t + REQUEST_DEADLINE)
    }

    fn deadline(&self) -> Option<Instant> {
        [self.idle_deadline(), self.line_deadline()].into_iter().flatten().min()
    }

    /// May make room for a new connection: nothing streams and no answer is waiting.
    fn evictable(&self) -> bool {
        !self.streaming() && self.pending() == 0
    }

    /// Answer with an error and stop reading; the connection closes once it is written.
    fn refuse(&mut self, why: &str) {
        self.send(&protocol::error(why));
        self.rbuf = Vec::new();
        self.line_started = None;
        self.closing = true;
    }
}

/// The listening socket and its connections.
pub struct Server {
    listener: UnixListener,
    path: PathBuf,
    token: u64,
    next_token: u64,
    conns: BTreeMap<u64, Conn>,
    max_connections: usize,
    /// The bound socket's (device, inode): at shutdown the path is removed only if it is
    /// still this socket.
    bound: (u64, u64),
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("path", &self.path)
            .field("conns", &self.conns.len())
            .finish()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        match std::fs::symlink_metadata(&self.path) {
            Ok(m) if m.file_type().is_socket() && (m.dev(), m.ino()) == self.bound => {
                let _ = std::fs::remove_file(&self.path);
            }
            Ok(_) => {
                log::warn!(target: "api", "{}: no longer the socket this node bound; left in place", self.path.display());
            }
            Err(_) => {}
        }
    }
}

/// Make way for binding `path`: nothing there, or a stale socket (nobody accepts on it),
/// which is removed. A socket that answers belongs to a running node; anything else is not
/// ours to remove.
fn claim(path: &Path) -> Result<(), ServerError> {
    use nix::errno::Errno;
    use nix::sys::socket::{connect, socket, AddressFamily, SockFlag, SockType, UnixAddr};
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(path, "inspect")(e)),
    };
    if !meta.file_type().is_socket() {
        let kind = kind_of(meta.file_type());
        return Err(ServerError::NotASocket { path: path.to_owned(), kind });
    }
    // Non-blocking: a live node with a full backlog answers EAGAIN instead of blocking us.
    let errno = |e: Errno| std::io::Error::from_raw_os_error(e as i32);
    let probe = socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(|e| io(path, "probe socket")(errno(e)))?;
    let addr = UnixAddr::new(path).map_err(|e| io(path, "probe address")(errno(e)))?;
    match connect(std::os::fd::AsRawFd::as_raw_fd(&probe), &addr) {
        Err(Errno::ECONNREFUSED) => {
            log::info!(target: "api", "{}: removing a stale socket (nobody accepts on it)", path.display());
            match std::fs::remove_file(path) {
                Err(e) if e.kind() != ErrorKind::NotFound => {
                    Err(io(path, "remove stale socket")(e))
                }
                _ => Ok(()),
            }
        }
        // Gone meanwhile: nothing to remove.
        Err(Errno::ENOENT) => Ok(()),
        Ok(()) | Err(Errno::EAGAIN) => Err(ServerError::InUse { path: path.to_owned() }),
        Err(e) => Err(io(path, "probe existing socket")(errno(e))),
    }
}

fn kind_of(ft: std::fs::FileType) -> &'static str {
    if ft.is_dir() {
        "directory"
    } else if ft.is_file() {
        "regular file"
    } else if ft.is_symlink() {
        "symbolic link"
    } else if ft.is_fifo() {
        "FIFO"
    } else if ft.is_char_device() || ft.is_block_device() {
        "device"
    } else {
        "special file"
    }
}

fn io<'a>(path: &'a Path, what: &'static str) -> impl Fn(std::io::Error) -> ServerError + 'a {
    move |source| ServerError::Io { path: path.to_owned(), what, source }
}

impl Server {
    /// Listen on `path` (mode 0600: only root may connect), registering the listener as
    /// `token`; connections get tokens above it.
    pub fn bind(
        path: &Path,
        reactor: &Reactor,
        token: u64,
        max_connections: usize,
    ) -> Result<Self, ServerError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io(path, "create directory"))?;
        }
        claim(path)?;
        // The umask closes the window between bind and chmod in which others could connect.
        let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o177));
        let bound = UnixListener::bind(path);
        nix::sys::stat::umask(old);
        let listener = bound.map_err(io(path, "bind"))?;
        let meta = std::fs::symlink_metadata(path).map_err(io(path, "stat"))?;
        let bound = (meta.dev(), meta.ino());
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(io(path, "chmod"))?;
        listener.set_nonblocking(true).map_err(io(path, "set non-blocking"))?;
        reactor.add(listener.as_fd(), token)?;
        log::info!(target: "api", "listening on {}", path.display());
        Ok(Self {
            listener,
            path: path.to_owned(),
            token,
            next_token: token + 1,
            conns: BTreeMap::new(),
            max_connections,
            bound,
        })
    }

    /// True when `token` is the listener's or a connection's.
    pub fn owns(&self, token: u64) -> bool {
        token == self.token || self.conns.contains_key(&token)
    }

    /// The earliest idle deadline.
    pub fn poll_at(&self) -> Option<Instant> {
        self.conns.values().filter_map(Conn::deadline).min()
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
        if token == self.token {
            self.accept(reactor, now);
            return;
        }
        let Some(mut conn) = self.conns.remove(&token) else { return };
        let keep = serve(&mut conn, rt, machine, now);
        if keep && Self::settle(token, &mut conn, reactor, now) {
            self.conns.insert(token, conn);
        }
    }

    /// After the runtime ran: stream store changes to watchers and new log lines to
    /// followers, close idle connections, and update what epoll watches for.
    pub fn after_run(&mut self, rt: &Runtime, changes: &[Change], reactor: &Reactor, now: Instant) {
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
            if conn.streaming() && conn.pending() > WRITE_CAP {
                log::warn!(target: "api", "dropping a client that does not read ({} bytes queued)", conn.pending());
                continue;
            }
            if conn.line_deadline().is_some_and(|d| d <= now) {
                log::debug!(target: "api", "closing a connection whose request did not end in time");
                conn.refuse(&format!(
                    "request not completed within {} s",
                    REQUEST_DEADLINE.as_secs()
                ));
            } else if conn.idle_deadline().is_some_and(|d| d <= now) {
                log::debug!(target: "api", "closing an idle connection");
                if conn.closing {
                    continue;
                }
                // Said once, so a client that was too slow to send learns why it was closed.
                conn.refuse(&format!("closed after {} s without a request", IDLE.as_secs()));
            }
            if Self::settle(token, &mut conn, reactor, now) {
                self.conns.insert(token, conn);
            }
        }
    }

    fn accept(&mut self, reactor: &Reactor, now: Instant) {
        loop {
            let stream = match self.listener.accept() {
                Ok((s, _)) => s,
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
            if self.conns.len() >= self.max_connections && !self.evict_oldest() {
                let mut s = stream;
                let mut line = protocol::error("too many connections").to_string();
                line.push('\n');
                let _ = s.write(line.as_bytes());
                continue;
            }
            let token = self.next_token;
            self.next_token += 1;
            if let Err(e) = reactor.add(stream.as_fd(), token) {
                log::warn!(target: "api", "{e}");
                continue;
            }
            let conn = Conn {
                stream,
                rbuf: Vec::new(),
                wbuf: Vec::new(),
                woff: 0,
                accepted: now,
                last_activity: now,
                line_started: None,
                watch: None,
                follow: None,
                closing: false,
                interest: (true, false),
            };
            self.conns.insert(token, conn);
        }
    }

    /// Close the oldest connection that neither streams nor has an answer waiting, to make
    /// room for a new one; false when there is none.
    fn evict_oldest(&mut self) -> bool {
        let oldest = self
            .conns
            .iter()
            .filter(|(_, c)| c.evictable())
            .min_by_key(|(_, c)| c.accepted)
            .map(|(t, _)| *t);
        let Some(mut conn) = oldest.and_then(|t| self.conns.remove(&t)) else { return false };
        log::debug!(target: "api", "closing the oldest idle connection to make room for a new one");
        let mut line = protocol::error("too many connections: closed to make room").to_string();
        line.push('\n');
        let _ = conn.stream.write(line.as_bytes());
        true
    }

    /// Flush and update the epoll interest; false when the connection is done.
    fn settle(token: u64, conn: &mut Conn, reactor: &Reactor, now: Instant) -> bool {
        if conn.flush(now).is_err() {
            return false;
        }
        if conn.closing && conn.pending() == 0 {
            return false;
        }
        let want = (!conn.closing, conn.pending() > 0);
        if want != conn.interest {
            if let Err(e) = reactor.interest(conn.stream.as_fd(), token, want.0, want.1) {
                log::warn!(target: "api", "{e}");
                return false;
            }
            conn.interest = want;
        }
        true
    }
}

/// Read what is there and answer every complete request line; false when the connection is
/// to be dropped now.
fn serve(conn: &mut Conn, rt: &mut Runtime, machine: Machine, now: Instant) -> bool {
    let mut budget = READ_BUDGET;
    let mut chunk = [0u8; 16 << 10];
    let mut completed = false;
    while !conn.closing && budget > 0 {
        match conn.stream.read(&mut chunk) {
            Ok(0) => {
                // The client finished sending: answer what it sent, then close. A watcher
                // keeps its write side open.
                conn.closing = true;
            }
            Ok(n) => {
                conn.rbuf.extend_from_slice(&chunk[..n]);
                conn.last_activity = now;
                budget = budget.saturating_sub(n);
                if conn.rbuf.len() > MAX_REQUEST + 1 && !conn.rbuf.contains(&b'\n') {
                    break;
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    while let Some(pos) = conn.rbuf.iter().position(|b| *b == b'\n') {
        let line: Vec<u8> = conn.rbuf.drain(..=pos).collect();
        let line = &line[..pos];
        completed = true;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        handle(conn, line, rt, machine, now);
    }
    // The deadline runs from the first byte of the unfinished line: bytes after a newline
    // read now start a new line now.
    conn.line_started = match conn.line_started {
        _ if conn.rbuf.is_empty() => None,
        Some(t) if !completed => Some(t),
        _ => Some(now),
    };
    if conn.rbuf.len() > MAX_REQUEST {
        conn.refuse(&ProtocolError::TooLong.to_string());
    }
    true
}

fn handle(conn: &mut Conn, line: &[u8], rt: &mut Runtime, machine: Machine, now: Instant) {
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
    let node = node_name(rt);
    let reply = match request {
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
        Request::ApplyConfig { config, dry_run } => match apply_config(rt, &config, dry_run) {
            Ok(v) => v,
            Err(e) => protocol::error(&e),
        },
        Request::MachineStatus => machine_status(rt, machine, &node, now),
    };
    conn.send(&reply);
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
    json!({
        "ok": true,
        "node": node,
        "uptimeSeconds": now.saturating_duration_since(machine.started).as_secs_f64(),
        "settled": machine.settled,
        "networkReady": ready,
        "network": network,
        "kubelet": store.get_spec::<ServiceStatus>(Namespace::Runtime, "kubelet"),
        "errors": rt.controllers().iter().filter_map(|c| c.last_error.as_ref().map(|e| format!("{}: {e}", c.name))).collect::<Vec<_>>(),
    })
}

/// The merged spec kinds an `apply-config` diff covers: the layered kinds of the kind table.
const SPEC_KINDS: &[Kind] = Kind::LAYERED;

fn merged_specs<'a>(resources: impl Iterator<Item = &'a Resource>) -> Specs {
    resources
        .filter(|r| {
            r.metadata.namespace == Namespace::Network && SPEC_KINDS.contains(&r.metadata.kind)
        })
        .map(|r| {
            let key = (r.metadata.kind.short_name().to_owned(), r.metadata.id.clone());
            (key, serde_json::to_value(&r.spec).unwrap_or(Value::Null))
        })
        .collect()
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
    let err = |e: net::runtime::StoreError| e.to_string();
    let store = live.store();
    // Layers the config does not produce (DHCP and other operators) stay as they are: copy
    // them, or the diff would report their addresses and routes as removed.
    for r in store.iter().filter(|r| {
        r.metadata.namespace == Namespace::NetworkConfig
            && !ours.contains(&r.metadata.owner.as_str())
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

/// Validate, diff against the live merged specs, and apply unless `dry_run`.
fn apply_config(rt: &mut Runtime, text: &str, dry_run: bool) -> Result<Value, String> {
    let cfg = net::config::parse(text).map_err(|e| format!("invalid config: {e}"))?;
    let planned = plan(rt, &cfg)?;
    let live = merged_specs(rt.store().iter());
    let changes = diff::diff(&live, &planned);
    let warnings = cfg.warnings.clone();
    if !dry_run {
        rt.put_input(crate::node::SOURCE, Namespace::Config, MACHINE_CONFIG_ID, cfg)
            .map_err(|e| e.to_string())?;
        log::info!(target: "api", "applied a new machine config ({} resource changes)", changes.len());
    }
    Ok(json!({"ok": true, "dryRun": dry_run, "changes": changes, "warnings": warnings}))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let put = |rt: &mut Runtime| -> Result<(), net::runtime::StoreError> {
            rt.put_input("test", Namespace::Runtime, CMDLINE_ID, net::cmdline::parse(""))?;
            rt.put_input("test", Namespace::Network, "eth0", link)?;
            let cfg = net::config::parse(&config(addr)).unwrap_or_else(|e| unreachable!("{e}"));
            rt.put_input(crate::node::SOURCE, Namespace::Config, MACHINE_CONFIG_ID, cfg)
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
        let same = apply_config(&mut rt, &config("10.0.0.2/24"), true)
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(same["changes"], json!([]), "{same}");

        let dry = apply_config(&mut rt, &config("10.0.0.3/24"), true)
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(ids(&dry, "added"), ["AddressSpec eth0/10.0.0.3/24"], "{dry}");
        assert_eq!(ids(&dry, "removed"), ["AddressSpec eth0/10.0.0.2/24"], "{dry}");
        // A dry run changes nothing.
        assert!(!rt.has_work());
        assert!(rt
            .store()
            .get(Namespace::Network, Kind::AddressSpec, "eth0/10.0.0.2/24")
            .is_some());

        let applied = apply_config(&mut rt, &config("10.0.0.3/24"), false)
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
    fn apply_config_refuses_a_bad_config_with_its_line() {
        let mut rt = live("10.0.0.2/24");
        let e = apply_config(
            &mut rt,
            "version: v1alpha1\nmachine:\n  network:\n    interfaces: 3\n",
            false,
        )
        .err()
        .unwrap_or_default();
        assert!(e.contains("line"), "{e}");
        assert!(!rt.has_work());
    }
}
