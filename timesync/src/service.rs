// SPDX-License-Identifier: Apache-2.0
//! Time sync in the event loop: follows the merged time servers and `machine.time`, drives
//! the NTP engine ([`crate::ntp`]) over two non-blocking UDP sockets, steps and slews the
//! clock when it may, and publishes [`TimeStatus`].
//!
//! Whether the clock is touched is the caller's choice ([`TimeSync::new`]'s `adjust`): PID 1
//! owns the clock; `keelson run` only measures unless asked (`--set-clock`), so a node run on
//! a workstation or in a test namespace never moves the host's time.
//!
//! A server is an address literal (`192.0.2.1`, `2001:db8::1`, or with a port,
//! `192.0.2.1:123`, `[2001:db8::1]:123`) or a name, looked up through the node's resolvers
//! with the stub resolver ([`crate::dns`]) over the same sockets; each name gives up to four
//! servers (a pool name gives several).
//!
//! With NTS (`useNTS`), each server is first a key exchange server (port 4460 unless given):
//! the exchange runs on a thread of its own ([`crate::nts::exchange`]); when it succeeds, the NTP
//! server it names joins the engine with its keys and cookies, and when the engine runs out of
//! cookies or stops trusting the replies it asks for another exchange. A server whose exchange
//! fails is not used: one log line, the reason in `TimeStatus.ntsErrors`, retries backing off
//! from 16 s to 1024 s.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use model::config::{MachineConfig, MACHINE_CONFIG_ID};
use model::names;
use model::resource::{
    Namespace, NetworkStatus, ResolverStatus, Rfc3339, TimeServerStatus, TimeStatus,
    NETWORK_STATUS_ID, RESOLVER_ID, TIMESERVER_ID, TIME_STATUS_ID,
};
use runtime::Runtime;

use crate::clock;
use crate::dns::{Event, Stub};
use crate::ntp::{ClientConfig, Input, NtpClient, Output, Unsynced, NTP_PORT};
use crate::nts::exchange::{ExchangeError, Outcome};
use crate::nts::ke::KE_PORT;
use crate::nts::{verify, Exchanges, Request, Session, Trust};

/// The owner of the time status.
pub const SOURCE: &str = "timesync";
/// The IPv4 socket's key (see [`evloop::EventSource`]; the loop gives the epoll token).
pub const KEY_V4: u64 = 0;
/// The IPv6 socket's key.
pub const KEY_V6: u64 = 1;
/// The key of the socket NTS key exchanges ring when they finish.
pub const KEY_KE: u64 = 2;
/// The first retry after a failed key exchange; it doubles up to [`KE_RETRY_MAX`].
const KE_RETRY: Duration = Duration::from_secs(16);
/// The longest wait between key exchange attempts.
const KE_RETRY_MAX: Duration = Duration::from_secs(1024);
/// Datagrams read per wakeup: a flood cannot keep the loop here.
const MAX_READS: usize = 64;
/// The receive buffer: a header plus room for NTS extension fields; longer is truncated.
const RECV_BUF: usize = 1500;

/// The node's time sync.
#[derive(Debug)]
pub struct TimeSync {
    adjust: bool,
    boot: Instant,
    v4: Option<UdpSocket>,
    v6: Option<UdpSocket>,
    sockets_tried: bool,
    new_keys: Vec<u64>,
    engine: Option<NtpClient>,
    disabled: bool,
    boot_timeout: Option<Duration>,
    boot_timeout_passed: bool,
    /// No engine yet because the node has no address.
    waiting_network: bool,
    /// Names already reported as unusable.
    skipped: BTreeSet<String>,
    /// Looks up server names.
    dns: Stub,
    epoch: u32,
    published: Option<TimeStatus>,
    was_synced: bool,
    /// NTS is asked for.
    use_nts: bool,
    /// Where NTS-KE certificates are checked against.
    trust: Trust,
    /// The key exchanges' threads; opened with the first NTS server.
    exchanges: Option<Exchanges>,
    exchanges_tried: bool,
    next_exchange: u64,
    /// NTS servers by their configured entry.
    nts: BTreeMap<String, NtsSource>,
}

/// One configured NTS server: where its key exchange goes and what came of it.
#[derive(Debug)]
struct NtsSource {
    /// The name the certificate must carry: a DNS name or an IP literal.
    host: String,
    /// The key exchange address of an IP literal (names are looked up).
    literal: Option<SocketAddr>,
    /// The key exchange port.
    port: u16,
    /// The exchange running for it.
    running: Option<u64>,
    /// When to start an exchange; `None` when none is needed.
    start_at: Option<Instant>,
    /// Failed exchanges (and authentication failures) in a row.
    failures: u32,
    /// Why it is not usable, for `TimeStatus` (cleared by a successful exchange).
    error: Option<String>,
    /// The NTP server the exchange named, when it is a name to look up.
    ntp_name: Option<String>,
    /// The NTP port.
    ntp_port: u16,
    /// The NTP server the engine polls for it.
    ntp: Option<SocketAddr>,
    /// Keys and cookies not yet handed to the engine.
    fresh: Option<Session>,
}

impl NtsSource {
    fn new(host: String, literal: Option<SocketAddr>, port: u16, now: Instant) -> Self {
        Self {
            host,
            literal,
            port,
            running: None,
            start_at: Some(now),
            failures: 0,
            error: None,
            ntp_name: None,
            ntp_port: NTP_PORT,
            ntp: None,
            fresh: None,
        }
    }

    fn backoff(&self) -> Duration {
        let shift = self.failures.saturating_sub(1).min(6);
        (KE_RETRY * (1u32 << shift)).min(KE_RETRY_MAX)
    }
}

/// An NTS server entry as (certificate name, literal key exchange address, port); `None`
/// for an entry that is neither an address nor a valid name.
fn nts_target(entry: &str) -> Option<(String, Option<SocketAddr>, u16)> {
    if let Ok(ip) = entry.parse::<IpAddr>() {
        return Some((ip.to_string(), Some(SocketAddr::new(ip, KE_PORT)), KE_PORT));
    }
    if let Ok(a) = entry.parse::<SocketAddr>() {
        return Some((a.ip().to_string(), Some(a), a.port()));
    }
    name_port(entry).map(|(name, port)| (name, None, port.unwrap_or(KE_PORT)))
}

/// A configured server as an address: an IP literal (port 123) or a socket address literal.
fn literal(server: &str) -> Option<SocketAddr> {
    if let Ok(ip) = server.parse::<IpAddr>() {
        return Some(SocketAddr::new(ip, NTP_PORT));
    }
    server.parse::<SocketAddr>().ok()
}

/// A configured server name, with its port when written `name:port`; lowercased, without the
/// root dot. `None` when the name is not valid.
fn name_port(server: &str) -> Option<(String, Option<u16>)> {
    let (host, port) = match server.rsplit_once(':') {
        Some((host, port)) => (host, Some(port.parse::<u16>().ok().filter(|p| *p != 0)?)),
        None => (server, None),
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    names::is_domain(&host).then_some((host, port))
}

fn bind(addr: SocketAddr) -> io::Result<UdpSocket> {
    let s = UdpSocket::bind(addr)?;
    s.set_nonblocking(true)?;
    Ok(s)
}

fn log_event(e: Event) {
    match e {
        Event::Resolved(name, addrs) => {
            let list: Vec<String> = addrs.iter().map(ToString::to_string).collect();
            log::info!(target: "time", "time server {name}: {}", list.join(", "));
        }
        Event::Failed(name, why) => {
            log::warn!(target: "time", "time server {name}: lookup failed: {why}");
        }
    }
}

fn format_ms(ns: i64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

impl TimeSync {
    /// Time sync that steps and slews the clock only with `adjust`; the boot timeout counts
    /// from `boot`.
    pub fn new(adjust: bool, boot: Instant) -> Self {
        Self {
            adjust,
            boot,
            v4: None,
            v6: None,
            sockets_tried: false,
            new_keys: Vec::new(),
            engine: None,
            disabled: false,
            boot_timeout: None,
            boot_timeout_passed: false,
            waiting_network: false,
            skipped: BTreeSet::new(),
            dns: Stub::new(u64::from(std::process::id()) ^ clock::wall_now().0.rotate_left(17)),
            epoch: 0,
            published: None,
            was_synced: false,
            use_nts: false,
            trust: Trust::default(),
            exchanges: None,
            exchanges_tried: false,
            next_exchange: 0,
            nts: BTreeMap::new(),
        }
    }

    /// Check NTS-KE certificates against these roots instead of the image's CA bundle alone.
    pub fn with_trust(mut self, trust: Trust) -> Self {
        self.trust = trust;
        self
    }

    /// Follow the store (servers, `machine.time`), fire the engine's timer when due, check
    /// the boot timeout and publish the status. Returns whether it wrote to the store.
    pub fn tick(&mut self, rt: &mut Runtime, now: Instant) -> bool {
        self.follow(rt, now);
        if self.dns.poll_at().is_some_and(|at| at <= now) {
            let (queries, events) = self.dns.on_timer(now);
            for (to, bytes) in queries {
                self.send(to, &bytes);
            }
            events.into_iter().for_each(log_event);
            self.follow(rt, now);
        }
        if self.engine.as_ref().and_then(NtpClient::poll_at).is_some_and(|at| at <= now) {
            self.drive(now, Input::Timer);
        }
        self.check_boot_timeout(now);
        self.publish(rt)
    }

    /// The socket behind `key` is readable: feed what it holds to the engine. A key that is
    /// none of these sockets' changes nothing.
    pub fn ready(&mut self, key: u64, rt: &mut Runtime, now: Instant) -> bool {
        if key == KEY_KE {
            self.exchanges_finished(now);
            self.follow(rt, now);
            return self.publish(rt);
        }
        if key != KEY_V4 && key != KEY_V6 {
            return false;
        }
        let mut buf = [0u8; RECV_BUF];
        let mut resolved = false;
        for _ in 0..MAX_READS {
            let socket = if key == KEY_V6 { self.v6.as_ref() } else { self.v4.as_ref() };
            let Some(socket) = socket else { break };
            match socket.recv_from(&mut buf) {
                Ok((n, from)) => {
                    let bytes = buf.get(..n).unwrap_or_default();
                    if self.dns.is_server(from) {
                        if let Some(e) = self.dns.on_packet(from, bytes, now) {
                            log_event(e);
                            resolved = true;
                        }
                    } else {
                        self.drive(now, Input::Packet { from, bytes });
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // ICMP errors (port unreachable) surface here; the engine's backoff
                    // already handles silence.
                    log::debug!(target: "time", "receive: {e}");
                    break;
                }
            }
        }
        if resolved {
            self.follow(rt, now);
        }
        self.check_boot_timeout(now);
        self.publish(rt)
    }

    /// When the engine or the boot timeout next needs a tick.
    pub fn poll_at(&self) -> Option<Instant> {
        let timeout = match self.boot_timeout {
            Some(t) if !self.disabled && !self.boot_timeout_passed && !self.was_synced => {
                self.boot.checked_add(t)
            }
            _ => None,
        };
        let dns = if self.disabled { None } else { self.dns.poll_at() };
        // Only exchanges that can start: one waiting for its name to resolve or for a free
        // slot is woken by the lookup's answer or a finished exchange, not by the timer.
        let exchange = match &self.exchanges {
            Some(x) if !self.disabled && x.running() < crate::nts::exchange::MAX_RUNNING => self
                .nts
                .values()
                .filter(|s| s.running.is_none() && !self.exchange_addrs(s).is_empty())
                .filter_map(|s| s.start_at)
                .min(),
            _ => None,
        };
        self.engine
            .as_ref()
            .and_then(NtpClient::poll_at)
            .into_iter()
            .chain(timeout)
            .chain(dns)
            .chain(exchange)
            .min()
    }

    /// The socket behind `key`.
    pub fn fd(&self, key: u64) -> Option<BorrowedFd<'_>> {
        match key {
            KEY_V4 => self.v4.as_ref().map(|s| s.as_fd()),
            KEY_V6 => self.v6.as_ref().map(|s| s.as_fd()),
            KEY_KE => self.exchanges.as_ref().map(Exchanges::fd),
            _ => None,
        }
    }

    /// Keys of sockets opened since the last call, to add to the event loop.
    pub fn take_new_keys(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.new_keys)
    }

    fn open_sockets(&mut self) {
        if self.sockets_tried {
            return;
        }
        self.sockets_tried = true;
        match bind(SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0))) {
            Ok(s) => {
                self.v4 = Some(s);
                self.new_keys.push(KEY_V4);
            }
            Err(e) => log::warn!(target: "time", "IPv4 NTP socket: {e}"),
        }
        match bind(SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0))) {
            Ok(s) => {
                self.v6 = Some(s);
                self.new_keys.push(KEY_V6);
            }
            Err(e) => log::info!(target: "time", "IPv6 NTP socket: {e} (IPv6 servers unused)"),
        }
    }

    fn follow(&mut self, rt: &Runtime, now: Instant) {
        let store = rt.store();
        let time = store
            .get_spec::<MachineConfig>(Namespace::Config, MACHINE_CONFIG_ID)
            .map(|c| c.machine.time.clone())
            .unwrap_or_default();
        self.disabled = time.disabled;
        self.boot_timeout = time.boot_timeout.filter(|d| !d.is_zero());
        if self.disabled {
            if self.engine.take().is_some() {
                log::info!(target: "time", "time sync disabled");
            }
            return;
        }
        // A request sent before the node has an address is lost (no source, no route) and the
        // burst waits 2 s for its next try: start once there is one.
        if self.engine.is_none() {
            let addressed = store
                .get_spec::<NetworkStatus>(Namespace::Network, NETWORK_STATUS_ID)
                .is_some_and(|s| s.address_ready);
            self.waiting_network = !addressed;
            if !addressed {
                return;
            }
        }
        let (configured, use_nts) = store
            .get_spec::<TimeServerStatus>(Namespace::Network, TIMESERVER_ID)
            .map(|s| (s.time_servers.clone(), s.use_nts))
            .unwrap_or_default();
        let resolvers = store
            .get_spec::<ResolverStatus>(Namespace::Network, RESOLVER_ID)
            .map(|r| r.dns_servers.clone())
            .unwrap_or_default();
        if use_nts != self.use_nts {
            self.use_nts = use_nts;
            self.nts.clear();
        }
        let mut servers = Vec::new();
        let mut lookups = BTreeSet::new();
        if use_nts {
            self.follow_nts(&configured, now, &mut lookups);
        } else {
            for name in &configured {
                if let Some(a) = literal(name) {
                    servers.push(a);
                    continue;
                }
                let Some((name, port)) = name_port(name) else {
                    if self.skipped.insert(name.clone()) {
                        log::warn!(target: "time", "time server {}: neither an address nor a valid name, skipped", names::escape(name, 253));
                    }
                    continue;
                };
                let port = port.unwrap_or(NTP_PORT);
                servers
                    .extend(self.dns.addresses(&name).iter().map(|ip| SocketAddr::new(*ip, port)));
                lookups.insert(name);
            }
        }
        if !lookups.is_empty() && resolvers.is_empty() {
            for name in &lookups {
                if self.skipped.insert(name.clone()) {
                    log::warn!(target: "time", "time server {name}: no resolvers to look it up yet");
                }
            }
        }
        if !lookups.is_empty() {
            self.open_sockets();
        }
        self.dns.set_servers(resolvers, now);
        self.dns.want(&lookups, now);
        let nts_servers: Vec<SocketAddr> = self.nts.values().filter_map(|s| s.ntp).collect();
        servers.extend(nts_servers.iter().copied());
        servers.retain(|a| a.is_ipv4() || self.v6.is_some() || !self.sockets_tried);
        let mut seen = BTreeSet::new();
        servers.retain(|a| seen.insert(*a));
        let same = self.engine.as_ref().is_some_and(|e| e.servers().eq(servers.iter().copied()));
        if !same {
            self.open_sockets();
            let shown: Vec<String> = servers.iter().map(ToString::to_string).collect();
            log::info!(target: "time", "servers: {}{} ({})", if shown.is_empty() { "none".to_owned() } else { shown.join(", ") }, if use_nts { " (NTS)" } else { "" }, if self.adjust { "adjusting the clock" } else { "measuring only" });
            let adjust = self.adjust;
            let engine = self.engine.get_or_insert_with(|| {
                let seed = u64::from(std::process::id()) ^ clock::wall_now().0;
                NtpClient::new(
                    ClientConfig { servers: Vec::new(), adjust_clock: adjust },
                    now,
                    seed,
                )
            });
            engine.set_servers(&servers, &nts_servers, now);
        }
        if let Some(engine) = &mut self.engine {
            for src in self.nts.values_mut() {
                if let (Some(addr), Some(session)) = (src.ntp, src.fresh.take()) {
                    engine.set_session(addr, session, now);
                }
            }
        }
        self.start_exchanges(now);
    }

    /// Track the NTS sources of `configured`: their key exchange names and negotiated NTP
    /// server names go into `lookups`; the negotiated servers' addresses are filled in.
    fn follow_nts(&mut self, configured: &[String], now: Instant, lookups: &mut BTreeSet<String>) {
        let mut keep = BTreeSet::new();
        for entry in configured {
            let Some((host, literal, port)) = nts_target(entry) else {
                if self.skipped.insert(entry.clone()) {
                    log::warn!(target: "time", "time server {}: neither an address nor a valid name, skipped", names::escape(entry, 253));
                }
                continue;
            };
            keep.insert(entry.clone());
            let src = self
                .nts
                .entry(entry.clone())
                .or_insert_with(|| NtsSource::new(host.clone(), literal, port, now));
            if src.literal.is_none() {
                lookups.insert(host);
            }
            if let Some(name) = &src.ntp_name {
                lookups.insert(name.clone());
                src.ntp =
                    self.dns.addresses(name).first().map(|ip| SocketAddr::new(*ip, src.ntp_port));
            }
        }
        self.nts.retain(|k, _| keep.contains(k));
    }

    /// Where `src`'s key exchange can go now.
    fn exchange_addrs(&self, src: &NtsSource) -> Vec<SocketAddr> {
        exchange_addrs(&self.dns, src)
    }

    /// Start the exchanges that are due and have an address to go to.
    fn start_exchanges(&mut self, now: Instant) {
        if self.nts.is_empty() {
            return;
        }
        if self.exchanges.is_none() && !self.exchanges_tried {
            self.exchanges_tried = true;
            match Exchanges::new() {
                Ok(x) => {
                    self.exchanges = Some(x);
                    self.new_keys.push(KEY_KE);
                }
                Err(e) => log::warn!(target: "time", "NTS: cannot set up key exchanges: {e}"),
            }
        }
        let relaxed = !(self.was_synced || clock::kernel_synced())
            || clock::wall_now().unix_secs() < verify::FLOOR.as_secs();
        let Some(exchanges) = &mut self.exchanges else {
            for src in self.nts.values_mut() {
                src.error.get_or_insert_with(|| "cannot set up key exchanges".to_owned());
                src.start_at = None;
            }
            return;
        };
        for src in self.nts.values_mut() {
            if src.running.is_some() || src.start_at.is_none_or(|at| at > now) {
                continue;
            }
            if exchanges.running() >= crate::nts::exchange::MAX_RUNNING {
                break;
            }
            let addrs = exchange_addrs(&self.dns, src);
            if addrs.is_empty() {
                continue;
            }
            let id = self.next_exchange;
            self.next_exchange += 1;
            let req = Request {
                name: src.host.clone(),
                addrs,
                trust: self.trust.clone(),
                relaxed_time: relaxed,
            };
            match exchanges.start(id, req) {
                Ok(()) => {
                    src.running = Some(id);
                    src.start_at = None;
                }
                Err(e) => {
                    src.failures = src.failures.saturating_add(1);
                    src.start_at = Some(now + src.backoff());
                    log::warn!(target: "time", "NTS server {}: {e}", src.host);
                }
            }
        }
    }

    /// Take the results of finished key exchanges.
    fn exchanges_finished(&mut self, now: Instant) {
        let Some(exchanges) = &mut self.exchanges else { return };
        for (id, result) in exchanges.finished() {
            let Some(src) = self.nts.values_mut().find(|s| s.running == Some(id)) else {
                continue;
            };
            src.running = None;
            match result {
                Ok(outcome) => nts_succeeded(src, outcome),
                Err(e) => nts_failed(src, &e, now),
            }
        }
    }

    /// The engine wants new keys for `server`.
    fn rekey(&mut self, server: SocketAddr, why: &'static str, now: Instant) {
        let Some(src) = self.nts.values_mut().find(|s| s.ntp == Some(server)) else { return };
        log::info!(target: "time", "NTS server {} ({server}): {why}; new key exchange", src.host);
        if why == crate::ntp::REKEY_AUTH_FAILED {
            // Keys that keep failing mean something is wrong: back off like a failed
            // exchange rather than looping.
            src.failures = src.failures.saturating_add(1);
            src.error = Some(why.to_owned());
            src.start_at = Some(now + src.backoff());
        } else if src.running.is_none() {
            src.start_at = Some(now);
        }
    }

    fn send(&self, to: SocketAddr, bytes: &[u8]) {
        let socket = if to.is_ipv6() { self.v6.as_ref() } else { self.v4.as_ref() };
        if let Some(Err(e)) = socket.map(|s| s.send_to(bytes, to)) {
            log::debug!(target: "time", "{to}: send: {e}");
        }
    }

    fn drive(&mut self, now: Instant, input: Input<'_>) {
        let Some(engine) = &mut self.engine else { return };
        let outputs = engine.handle(now, clock::wall_now(), input);
        for o in outputs {
            match o {
                Output::Send { to, packet } => self.send(to, &packet),
                Output::Step { offset_ns } => {
                    if !self.adjust {
                        continue;
                    }
                    match clock::step(offset_ns) {
                        Ok(()) => {
                            self.epoch = self.epoch.saturating_add(1);
                            log::info!(target: "time", "clock stepped by {:.3} s", offset_ns as f64 / 1e9);
                        }
                        Err(e) => log::warn!(target: "time", "step the clock: {e}"),
                    }
                }
                Output::Rekey { server, why } => self.rekey(server, why, now),
                Output::Slew { offset_ns, max_error_us, est_error_us, time_constant } => {
                    if !self.adjust {
                        continue;
                    }
                    if let Err(e) =
                        clock::slew(offset_ns, max_error_us, est_error_us, time_constant)
                    {
                        log::warn!(target: "time", "slew the clock: {e}");
                    }
                }
            }
        }
    }

    fn check_boot_timeout(&mut self, now: Instant) {
        let synced = self.engine.as_ref().is_some_and(|e| e.report().synced);
        let (Some(timeout), false, false) = (self.boot_timeout, self.boot_timeout_passed, synced)
        else {
            return;
        };
        // A timeout too large to add to an Instant never passes.
        let passed = self.boot.checked_add(timeout).is_some_and(|end| now >= end);
        if self.was_synced || self.disabled || !passed {
            return;
        }
        self.boot_timeout_passed = true;
        let why = self
            .engine
            .as_ref()
            .and_then(|e| e.report().reason)
            .unwrap_or(Unsynced::NoServers)
            .as_str();
        log::warn!(target: "time", "TIME NOT SYNCED after bootTimeout {} s ({why}): starting the kubelet anyway", timeout.as_secs());
    }

    fn status(&self) -> TimeStatus {
        let mut s = TimeStatus {
            sync_disabled: self.disabled,
            epoch: self.epoch,
            mode: if self.adjust { "adjust" } else { "measure" }.to_owned(),
            boot_timeout_passed: self.boot_timeout_passed,
            ..TimeStatus::default()
        };
        if self.disabled {
            return s;
        }
        let Some(engine) = &self.engine else {
            s.reason = if self.waiting_network {
                "waiting for a network address"
            } else {
                Unsynced::NoServers.as_str()
            }
            .to_owned();
            return s;
        };
        let r = engine.report();
        s.synced = r.synced;
        s.reason = r.reason.map(|u| u.as_str().to_owned()).unwrap_or_default();
        s.nts = r.synced && r.selected_nts;
        s.nts_errors = self
            .nts
            .values()
            .filter_map(|src| src.error.as_ref().map(|e| format!("{}: {e}", src.host)))
            .collect();
        let no_server = engine.servers().next().is_none();
        if self.use_nts && no_server && !self.nts.is_empty() {
            s.reason = if self.nts.values().all(|src| src.error.is_some()) {
                "NTS failed for every server (see ntsErrors)"
            } else {
                "waiting for NTS key exchange"
            }
            .to_owned();
        }
        s.server = r.selected.map(|a| a.to_string()).unwrap_or_default();
        s.offset_ns = r.offset_ns;
        s.round_trip_ns = r.delay_ns;
        s.stratum = r.stratum;
        s.last_sync = r
            .last_sync
            .map(|t| {
                let at = std::time::UNIX_EPOCH + Duration::from_secs(t.unix_secs());
                Rfc3339(at).to_string()
            })
            .unwrap_or_default();
        s.falsetickers = r.falsetickers.iter().map(ToString::to_string).collect();
        s.servers = engine.servers().map(|a| a.to_string()).collect();
        s
    }

    fn publish(&mut self, rt: &mut Runtime) -> bool {
        let status = self.status();
        if self.published.as_ref() == Some(&status) {
            return false;
        }
        if status.synced && !self.was_synced {
            log::info!(target: "time", "synced to {} (offset {}, round trip {}, stratum {})", status.server, format_ms(status.offset_ns), format_ms(status.round_trip_ns), status.stratum);
        } else if !status.synced && self.was_synced {
            log::warn!(target: "time", "no longer synced: {}", status.reason);
        }
        self.was_synced = status.synced;
        let changed = self.published.as_ref().map(|p| (&p.reason, &p.falsetickers))
            != Some((&status.reason, &status.falsetickers));
        if changed && !status.reason.is_empty() {
            let liars = if status.falsetickers.is_empty() {
                String::new()
            } else {
                format!(" ({})", status.falsetickers.join(", "))
            };
            log::info!(target: "time", "not synced: {}{liars}", status.reason);
        }
        self.published = Some(status.clone());
        match rt.put_input(SOURCE, Namespace::Runtime, TIME_STATUS_ID, status) {
            Ok(()) => true,
            Err(e) => {
                log::warn!(target: "time", "{e}");
                false
            }
        }
    }
}

/// Where `src`'s key exchange can go: its literal address, or its name's addresses so far.
fn exchange_addrs(dns: &Stub, src: &NtsSource) -> Vec<SocketAddr> {
    match src.literal {
        Some(a) => vec![a],
        None => dns.addresses(&src.host).iter().map(|ip| SocketAddr::new(*ip, src.port)).collect(),
    }
}

/// A key exchange worked: the NTP server it names, with fresh keys for the engine.
fn nts_succeeded(src: &mut NtsSource, outcome: Outcome) {
    let Outcome { addr, keys, response, secret, forgave_time } = outcome;
    let cookies = response.cookies.len();
    src.ntp_port = response.port.unwrap_or(NTP_PORT);
    src.ntp_name = None;
    let server = match response.server.as_deref() {
        None => Some(addr.ip()),
        Some(name) if name == src.host => Some(addr.ip()),
        Some(name) => match name.parse::<IpAddr>() {
            Ok(ip) => Some(ip),
            Err(_) if names::is_domain(name) => {
                src.ntp_name = Some(name.to_owned());
                None
            }
            Err(_) => Some(addr.ip()),
        },
    };
    if let Some(ip) = server {
        src.ntp = Some(SocketAddr::new(ip, src.ntp_port));
    }
    let to = src.ntp.map_or_else(
        || format!("{}:{}", src.ntp_name.as_deref().unwrap_or("?"), src.ntp_port),
        |a| a.to_string(),
    );
    let forgiven = if forgave_time {
        "; certificate validity dates not checked: the clock is not synchronised yet"
    } else {
        ""
    };
    log::info!(target: "time", "NTS key exchange with {} ({addr}): {cookies} cookies, NTP server {to}{forgiven}", src.host);
    src.failures = 0;
    src.error = None;
    src.fresh = Some(Session::new(keys, response.cookies, secret));
}

/// A key exchange failed: one line per new reason, then retries with backoff.
fn nts_failed(src: &mut NtsSource, e: &ExchangeError, now: Instant) {
    src.failures = src.failures.saturating_add(1);
    src.start_at = Some(now + src.backoff());
    // A certificate error can quote names from the server's certificate.
    let why = names::escape(&e.to_string(), 512);
    if src.error.as_deref() != Some(why.as_str()) {
        log::warn!(target: "time", "NTS server {}: key exchange failed: {why}; not used, retrying in {} s", src.host, src.backoff().as_secs());
    }
    src.error = Some(why);
}

impl evloop::EventSource<Runtime> for TimeSync {
    fn take_new_keys(&mut self) -> Vec<u64> {
        TimeSync::take_new_keys(self)
    }

    fn fd(&self, key: u64) -> Option<BorrowedFd<'_>> {
        TimeSync::fd(self, key)
    }

    fn ready(&mut self, key: u64, rt: &mut Runtime, now: Instant) {
        TimeSync::ready(self, key, rt, now);
    }

    fn poll_at(&self) -> Option<Instant> {
        TimeSync::poll_at(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_literals_and_names() {
        assert_eq!(literal("192.0.2.1"), Some(SocketAddr::from(([192, 0, 2, 1], 123))));
        assert_eq!(literal("192.0.2.1:1123"), Some(SocketAddr::from(([192, 0, 2, 1], 1123))));
        assert_eq!(literal("2001:db8::1").map(|a| a.port()), Some(123));
        assert_eq!(literal("[2001:db8::1]:9").map(|a| a.port()), Some(9));
        assert_eq!(literal("time.cloudflare.com"), None);
        assert_eq!(literal("192.0.2.1:x"), None);
        assert_eq!(name_port("NTP.test."), Some(("ntp.test".to_owned(), None)));
        assert_eq!(name_port("ntp.test:1123"), Some(("ntp.test".to_owned(), Some(1123))));
        assert_eq!(name_port("ntp.test:0"), None);
        assert_eq!(name_port("ntp test"), None);
        assert_eq!(nts_target("ntp.test").map(|t| t.2), Some(KE_PORT));
        assert_eq!(nts_target("ntp.test:4461").map(|t| t.2), Some(4461));
        let ip = nts_target("192.0.2.1").unwrap();
        assert_eq!((ip.0.as_str(), ip.1.map(|a| a.port())), ("192.0.2.1", Some(KE_PORT)));
    }
}
