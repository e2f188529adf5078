// SPDX-License-Identifier: Apache-2.0
//! The remote API: TCP listeners (port 50000 on the node, as Talos's apid) whose
//! connections speak TLS, and the mode the node's TLS is in, followed from the store:
//! - **maintenance**: no machine config at all: a self-signed certificate made once per
//!   start, its SHA-256 fingerprint and the addresses to reach the node said loudly on the
//!   console; clients connect with `--insecure`;
//! - **mutual TLS**: the config's `machine.ca` is the trust root; the node issues its own
//!   server certificate from it with its hostname and addresses as SANs, again whenever they
//!   change;
//! - **off**: a config without a usable `machine.ca`: a node that has a config is never in
//!   maintenance mode, so TCP connections are closed at once and only the local socket
//!   serves (said once in the log).
//!
//! Every change between these, and every change of `machine.ca`, moves the [`Trust`]
//! generation on: connections accepted before have no rights any more and are closed.

use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use net::config::MachineConfig;
use net::controllers::MACHINE_CONFIG_ID;
use net::resource::{AddressStatus, HostnameStatus, Namespace, HOSTNAME_ID};
use runtime::Runtime;
use rustls::ServerConfig;

use super::identity::{self, Ca, Identity, Sans};
use super::tls::{self, Mode, TlsStream, Trust};
use super::trustd_client::{Ask, Fetch, Poll};
use crate::reactor::Reactor;

/// The port Talos's API listens on, and keelson's.
pub use cli::DEFAULT_PORT;
pub use cli::TRUSTD_PORT;
/// Most listen addresses.
pub const MAX_LISTENERS: usize = 8;
/// Most addresses the server certificate names: loopback first, then the others in order
/// (a node with thousands of addresses must not make a certificate of megabytes).
const MAX_SAN_ADDRESSES: usize = 32;
/// Shortest time between two server certificates: addresses that churn do not make the
/// loop sign a certificate per change.
const REISSUE_EVERY: Duration = Duration::from_secs(2);

/// Why a listener could not be bound.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// bind/listen failed.
    #[error("api listen {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The error.
        source: std::io::Error,
    },
    /// More listen addresses than allowed.
    #[error("at most {MAX_LISTENERS} API listen addresses")]
    TooMany,
    /// trustd without the TLS API.
    #[error("trustd needs the TLS API (--api-listen)")]
    NoApi,
    /// Registering with epoll failed.
    #[error("api listen: {0}")]
    Reactor(#[from] crate::reactor::ReactorError),
}

/// What the TLS side currently serves with.
enum State {
    /// Nothing decided yet (before the first refresh).
    Unset,
    Maintenance {
        config: Arc<ServerConfig>,
        /// The addresses last announced on the console.
        announced: Vec<IpAddr>,
    },
    Mutual {
        config: Arc<ServerConfig>,
        /// trustd's: the same certificate, no client certificate asked for; `None` on a node
        /// whose certificate a control plane signed (it cannot sign).
        trustd: Option<Arc<ServerConfig>>,
        /// The `machine.ca` text it was built from, and the names it was issued for.
        ca: (String, Option<String>),
        sans: Sans,
    },
    /// A config without a usable `machine.ca`: no TLS at all.
    Off {
        /// Why, as logged.
        why: String,
    },
}

/// What the trust rests on: when it changes, the [`Trust`] generation moves on.
#[derive(PartialEq, Eq)]
enum TrustKey {
    Unset,
    Maintenance,
    Mutual((String, Option<String>)),
    Off,
}

impl State {
    fn trust_key(&self) -> TrustKey {
        match self {
            State::Unset => TrustKey::Unset,
            State::Maintenance { .. } => TrustKey::Maintenance,
            State::Mutual { ca, .. } => TrustKey::Mutual(ca.clone()),
            State::Off { .. } => TrustKey::Off,
        }
    }
}

/// The TCP listeners and the TLS mode.
pub struct Remote {
    listeners: Vec<(u64, TcpListener, SocketAddr)>,
    /// trustd's listeners (port 50001); served only in mutual TLS.
    trustd: Vec<(u64, TcpListener, SocketAddr)>,
    state: State,
    /// Maintenance mode's certificate, made on first use and kept for the life of the loop
    /// (its fingerprint is what clients pin).
    maintenance: Option<Identity>,
    /// When the server certificate was last issued, and whether a new one is waiting for
    /// [`REISSUE_EVERY`] to pass.
    issued: Option<Instant>,
    reissue_due: Option<Instant>,
    trust: Trust,
    /// The unusable `machine.ca` TLS is off for (tried once, not again for each change of
    /// the names).
    off_for: Option<(String, Option<String>)>,
    /// A control plane's trustd being asked for the server certificate (a `machine.ca`
    /// without its key), with what it was asked for.
    fetch: Option<(Fetch, (String, Option<String>), Sans)>,
    /// Rung by the trustd client's thread when it ends: the loop then looks at once.
    bell: Option<evloop::Ringer>,
    /// When the certificate trustd signed is to be renewed (two thirds of the way to its
    /// end); cleared once the renewal is asked for.
    renew_at: Option<Instant>,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let addrs: Vec<_> = self.listeners.iter().map(|l| l.2).collect();
        f.debug_struct("Remote").field("listen", &addrs).finish()
    }
}

impl Remote {
    /// Listen on each address, the listeners reported as `first_token` and the tokens
    /// after it.
    pub fn bind(
        addrs: &[SocketAddr],
        reactor: &Reactor,
        first_token: u64,
    ) -> Result<Self, ListenError> {
        if addrs.len() > MAX_LISTENERS {
            return Err(ListenError::TooMany);
        }
        let mut listeners = Vec::new();
        for (token, addr) in (first_token..).zip(addrs) {
            let l = TcpListener::bind(addr)
                .and_then(|l| l.set_nonblocking(true).map(|()| l))
                .map_err(|source| ListenError::Bind { addr: *addr, source })?;
            let bound = l.local_addr().unwrap_or(*addr);
            reactor.add(l.as_fd(), token)?;
            log::info!(target: "api", "listening on {bound} (TLS)");
            listeners.push((token, l, bound));
        }
        Ok(Self {
            listeners,
            trustd: Vec::new(),
            state: State::Unset,
            maintenance: None,
            issued: None,
            reissue_due: None,
            trust: Trust::default(),
            off_for: None,
            fetch: None,
            bell: None,
            renew_at: None,
        })
    }

    /// Ring `bell` when a trustd request has an answer (without one the loop polls for it).
    pub fn wake_with(&mut self, bell: evloop::Ringer) {
        self.bell = Some(bell);
    }

    /// Listen for trustd on each address, as `first_token` and the tokens after it.
    pub fn bind_trustd(
        &mut self,
        addrs: &[SocketAddr],
        reactor: &Reactor,
        first_token: u64,
    ) -> Result<(), ListenError> {
        if addrs.len() > MAX_LISTENERS {
            return Err(ListenError::TooMany);
        }
        // All or none (a failed bind is tried again with other addresses, on the same tokens).
        let mut bound = Vec::new();
        for (token, addr) in (first_token..).zip(addrs) {
            let l = TcpListener::bind(addr)
                .and_then(|l| l.set_nonblocking(true).map(|()| l))
                .map_err(|source| ListenError::Bind { addr: *addr, source })?;
            let at = l.local_addr().unwrap_or(*addr);
            bound.push((token, l, at));
        }
        // On an error the listeners are dropped: closing them takes them out of epoll.
        for (token, l, _) in &bound {
            reactor.add(l.as_fd(), *token)?;
        }
        for (_, _, at) in &bound {
            log::info!(target: "trustd", "listening on {at} (TLS; served with a machine.ca key)");
        }
        self.trustd = bound;
        Ok(())
    }

    /// True when `token` is one of its listeners'.
    pub fn owns(&self, token: u64) -> bool {
        self.listeners.iter().chain(&self.trustd).any(|l| l.0 == token)
    }

    /// Take one waiting connection on the listener of `token`: `Ok(None)` when none waits.
    pub fn accept(&self, token: u64) -> std::io::Result<Option<TcpStream>> {
        let Some((_, l, _)) = self.listeners.iter().chain(&self.trustd).find(|l| l.0 == token)
        else {
            return Ok(None);
        };
        match l.accept() {
            Ok((s, _)) => s.set_nonblocking(true).map(|()| Some(s)),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A TLS connection for an accepted socket, under the current mode; `None` before the
    /// mode is known, and when TLS is off (the socket is then closed).
    /// A connection to trustd's port is served only in mutual TLS (a node that can sign).
    pub fn wrap(&self, tcp: TcpStream, token: u64) -> Option<TlsStream> {
        let to_trustd = self.trustd.iter().any(|l| l.0 == token);
        let (config, mode) = match &self.state {
            State::Unset | State::Off { .. } => return None,
            State::Maintenance { .. } if to_trustd => return None,
            State::Maintenance { config, .. } => (config.clone(), Mode::Maintenance),
            State::Mutual { trustd: None, .. } if to_trustd => return None,
            State::Mutual { trustd: Some(t), .. } if to_trustd => (t.clone(), Mode::Trustd),
            State::Mutual { config, .. } => (config.clone(), Mode::Mutual),
        };
        match TlsStream::new(tcp, config, mode, self.trust.clone()) {
            Ok(s) => Some(s),
            Err(e) => {
                log::warn!(target: "api", "TLS: {e}");
                None
            }
        }
    }

    /// Whether [`Remote::refresh`] has anything to do: the store changed what it follows, the
    /// mode is not known yet, or a held-back certificate is due.
    pub fn wants_refresh(&self, now: Instant, changed: bool) -> bool {
        changed
            || matches!(self.state, State::Unset)
            || self.reissue_due.is_some_and(|t| t <= now)
            || self.renew_at.is_some_and(|t| t <= now)
            || self.fetch.as_ref().is_some_and(|(f, _, _)| f.ended())
    }

    /// When a held-back certificate is due, or trustd's is to be renewed.
    pub fn poll_at(&self) -> Option<Instant> {
        evloop::source::earliest([self.reissue_due, self.renew_at])
    }

    /// Follow the store: the mode, and the server certificate's names. True when the trust
    /// changed (the mode, or `machine.ca`): the connections accepted before have no rights
    /// any more and are to be closed.
    pub fn refresh(&mut self, rt: &Runtime, now: Instant) -> bool {
        let before = self.state.trust_key();
        self.follow(rt, now);
        let changed = self.state.trust_key() != before;
        if changed {
            self.trust.advance();
        }
        changed
    }

    fn follow(&mut self, rt: &Runtime, now: Instant) {
        if self.listeners.is_empty() {
            return;
        }
        // Keys come from getrandom(2), which blocks until the kernel's pool is ready (a second
        // or two into a boot under QEMU): PID 1 asks again shortly instead of waiting.
        if !entropy_ready() {
            if self.reissue_due.is_none() {
                log::info!(target: "api", "waiting for the kernel's random pool before making TLS keys");
            }
            self.reissue_due = Some(now + ENTROPY_RETRY);
            return;
        }
        let store = rt.store();
        let config = store.get_spec::<MachineConfig>(Namespace::Config, MACHINE_CONFIG_ID);
        let sans = sans(rt);
        let Some(config) = config else {
            self.enter_maintenance(&sans, now);
            return;
        };
        let Some(ca) = config.machine.ca.as_ref() else {
            self.turn_off("the machine config has no machine.ca".into());
            return;
        };
        let key = (ca.crt.clone(), ca.key.clone());
        if key.1.is_none() {
            self.follow_trustd(config, key, sans, now);
            return;
        }
        self.fetch = None;
        self.renew_at = None;
        if let State::Mutual { ca: had, sans: issued, .. } = &self.state {
            if *had == key && *issued == sans {
                self.reissue_due = None;
                return;
            }
            // Only the names changed: not more often than REISSUE_EVERY.
            let next = self.issued.map(|t| t + REISSUE_EVERY);
            if *had == key && next.is_some_and(|t| now < t) {
                self.reissue_due = next;
                return;
            }
        }
        if let State::Off { .. } = &self.state {
            // Already refused: not tried (and logged) again for a change of names alone.
            if self.off_for.as_ref() == Some(&key) {
                self.reissue_due = None;
                return;
            }
        }
        self.issued = Some(now);
        self.reissue_due = None;
        match mutual(&key, &sans) {
            Ok((config, trustd)) => {
                log::info!(target: "api", "API: mutual TLS with the machine config's CA; server certificate for {}", describe(&sans));
                self.off_for = None;
                self.state = State::Mutual { config, trustd: Some(trustd), ca: key, sans };
            }
            Err(e) => {
                self.turn_off(format!("machine.ca: {e}"));
                self.off_for = Some(key);
            }
        }
    }

    /// A `machine.ca` without its key: the server certificate comes from a control plane's
    /// trustd. Until the first one arrives, TLS is off; when the names change, or two thirds
    /// of its lifetime have passed (Talos's nodes renew theirs too), the old one serves until
    /// the new one arrives.
    fn follow_trustd(
        &mut self,
        config: &MachineConfig,
        key: (String, Option<String>),
        sans: Sans,
        now: Instant,
    ) {
        let asked = self.fetch.as_ref().is_some_and(|(_, k, s)| *k == key && *s == sans);
        if let State::Mutual { ca: had, sans: issued, .. } = &self.state {
            if *had == key && *issued == sans && !asked {
                if self.renew_at.is_none_or(|t| t > now) {
                    self.fetch = None;
                    self.reissue_due = None;
                    return;
                }
                log::info!(target: "api", "API: the server certificate from trustd is two thirds through its lifetime: asking for a new one (the current one serves meanwhile)");
            }
        }
        // Names that churn start a new request (a thread) not more often than REISSUE_EVERY.
        let next = self.issued.map(|t| t + REISSUE_EVERY);
        if !asked && next.is_some_and(|t| now < t) {
            self.reissue_due = next;
            return;
        }
        if !asked {
            self.issued = Some(now);
            self.renew_at = None;
            let ask = match trustd_ask(config, &key, &sans) {
                Ok(ask) => ask,
                Err(why) => {
                    self.fetch = None;
                    self.turn_off(why);
                    return;
                }
            };
            let endpoints = ask.endpoints.join(", ");
            match Fetch::start(ask, self.bell.clone()) {
                Ok(f) => {
                    log::info!(target: "api", "API: machine.ca has no key: asking trustd at {endpoints} (port {TRUSTD_PORT}) for a server certificate for {}", describe(&sans));
                    self.fetch = Some((f, key.clone(), sans.clone()));
                }
                Err(e) => log::warn!(target: "api", "cannot start the trustd client: {e}"),
            }
            if !matches!(&self.state, State::Mutual { ca: had, .. } if *had == key) {
                self.state = State::Off { why: "waiting for a certificate from trustd".into() };
            }
        }
        let polled = self.fetch.as_ref().map(|(f, _, _)| f.poll());
        match polled {
            Some(Poll::Done(id, from)) => {
                self.fetch = None;
                self.reissue_due = None;
                let ca_cert = trustd_ca(&key.0);
                match ca_cert.and_then(|c| tls::mutual_config(&c, &id).map_err(|e| e.to_string())) {
                    Ok(config) => {
                        let renew_in = renew_in(&id, std::time::SystemTime::now());
                        self.renew_at = Some(now + renew_in);
                        log::info!(target: "api", "API: mutual TLS with the machine config's CA; server certificate signed by trustd at {from} for {}; renewed in {} s", describe(&sans), renew_in.as_secs());
                        self.state = State::Mutual { config, trustd: None, ca: key, sans };
                    }
                    Err(e) => log::error!(target: "api", "API: the certificate from trustd: {e}"),
                }
            }
            // The thread rings the bell when it has an answer; polled only without one.
            Some(Poll::Waiting) if self.bell.is_some() => self.reissue_due = None,
            Some(Poll::Waiting) => self.reissue_due = Some(now + TRUSTD_POLL),
            Some(Poll::Gone) => {
                // Asked again at the next look.
                self.fetch = None;
                self.reissue_due = Some(now + REISSUE_EVERY);
            }
            None => self.reissue_due = Some(now + REISSUE_EVERY),
        }
    }

    /// A config without a usable CA: no TLS, said once.
    fn turn_off(&mut self, why: String) {
        self.reissue_due = None;
        if matches!(&self.state, State::Off { why: had } if *had == why) {
            return;
        }
        // A config that simply has no CA is a choice (a node managed locally); one whose CA
        // cannot be used is a mistake.
        let level =
            if why.starts_with("machine.ca") { log::Level::Error } else { log::Level::Warn };
        log::log!(target: "api", level, "API: {why}: the TLS API is off (a node with a config never falls back to maintenance); only the local socket serves");
        self.state = State::Off { why };
    }

    fn enter_maintenance(&mut self, sans: &Sans, now: Instant) {
        let reachable: Vec<IpAddr> = sans
            .addresses
            .iter()
            .copied()
            .filter(|a| !a.is_loopback() && !is_link_local(a))
            .collect();
        if let State::Maintenance { announced, .. } = &self.state {
            if *announced == reachable {
                self.reissue_due = None;
                return;
            }
            // Said again when the addresses change, not more often than REISSUE_EVERY.
            let next = self.issued.map(|t| t + REISSUE_EVERY);
            if next.is_some_and(|t| now < t) {
                self.reissue_due = next;
                return;
            }
        }
        self.issued = Some(now);
        self.reissue_due = None;
        let id = match self.maintenance.take() {
            Some(id) => id,
            None => match identity::self_signed(&Sans::default()) {
                Ok(id) => id,
                Err(e) => {
                    log::error!(target: "api", "maintenance certificate: {e}");
                    return;
                }
            },
        };
        let config = match &self.state {
            State::Maintenance { config, .. } => Ok(config.clone()),
            _ => tls::maintenance_config(&id),
        };
        match config {
            Ok(config) => {
                self.announce(&id, &reachable);
                self.state = State::Maintenance { config, announced: reachable };
            }
            Err(e) => log::error!(target: "api", "maintenance TLS: {e}"),
        }
        self.maintenance = Some(id);
    }

    fn announce(&self, id: &Identity, reachable: &[IpAddr]) {
        let ports: Vec<u16> = self.listeners.iter().map(|l| l.2.port()).collect();
        let mut at: Vec<String> = Vec::new();
        for a in reachable {
            for p in &ports {
                at.push(SocketAddr::new(*a, *p).to_string());
            }
        }
        if at.is_empty() {
            at = self.listeners.iter().map(|l| l.2.to_string()).collect();
        }
        log::warn!(target: "api", "*** MAINTENANCE MODE: no machine config with machine.ca; the node waits for one ***");
        log::warn!(target: "api", "*** apply it with: keelson apply-config --insecure -n ADDRESS FILE; reachable at {} ***", at.join(", "));
        log::warn!(target: "api", "*** maintenance certificate SHA256 fingerprint: {} ***", id.fingerprint());
    }
}

/// The soonest a certificate from trustd is renewed after it arrived: a short lifetime, or a
/// clock that makes it look expired, does not make the node ask in a tight loop.
const RENEW_MIN: Duration = Duration::from_secs(10);

/// How long until a certificate from trustd is to be renewed: two thirds of what is left of
/// it (by this node's clock), at least [`RENEW_MIN`]. One that cannot be read is renewed
/// then too.
fn renew_in(id: &Identity, now: std::time::SystemTime) -> Duration {
    let now = now.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let end = id.chain.first().and_then(|c| pki::der::not_after(c).ok());
    let left = end.and_then(|e| u64::try_from(e).ok()).map_or(0, |e| e.saturating_sub(now));
    Duration::from_secs(left / 3 * 2).max(RENEW_MIN)
}

/// How often the loop looks whether trustd answered, when it has no bell to be woken by.
const TRUSTD_POLL: Duration = Duration::from_millis(200);

/// What to ask trustd with, from the config: Err, one line, when it cannot be asked.
fn trustd_ask(
    config: &MachineConfig,
    key: &(String, Option<String>),
    sans: &Sans,
) -> Result<Ask, String> {
    let token = config.machine.token.clone().filter(|t| !t.is_empty());
    let endpoint = config
        .cluster
        .as_ref()
        .and_then(|c| c.control_plane.as_ref())
        .and_then(|c| c.endpoint_host());
    let (Some(token), Some(endpoint)) = (token, endpoint) else {
        return Err("machine.ca has no key, and without machine.token and cluster.controlPlane.endpoint no control plane can be asked to sign the node's certificate".into());
    };
    let ca_pem = decode(&key.0, "machine.ca.crt").map_err(|e| format!("machine.ca: {e}"))?;
    Ok(Ask { ca_pem, token, endpoints: vec![endpoint], sans: sans.clone() })
}

/// `machine.ca.crt` (base64 of PEM) as DER.
fn trustd_ca(crt: &str) -> Result<rustls::pki_types::CertificateDer<'static>, String> {
    let pem = decode(crt, "crt")?;
    let der = pki::identity::pem_block("machine.ca.crt", &pem).map_err(|e| e.to_string())?;
    Ok(der.into())
}

/// How soon to look again when the random pool is not ready.
const ENTROPY_RETRY: Duration = Duration::from_millis(250);

/// Would getrandom(2) answer now without blocking? The first time it would not, one helper
/// thread makes the blocking call: the kernel gathers jitter entropy only for a caller that
/// waits (a quiet VM without RDRAND or virtio-rng may otherwise wait minutes), and that thread
/// waits instead of the event loop.
fn entropy_ready() -> bool {
    use std::sync::atomic::{AtomicBool, Ordering};
    static NUDGED: AtomicBool = AtomicBool::new(false);
    let mut b = [0u8; 1];
    // SAFETY: writes at most 1 byte into `b`, which is 1 byte long.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), 1, libc::GRND_NONBLOCK) };
    if n == 1 {
        return true;
    }
    if !NUDGED.swap(true, Ordering::Relaxed) {
        let spawned = evloop::spawn_worker("entropy", || {
            let mut b = [0u8; 1];
            // SAFETY: as above; without GRND_NONBLOCK this waits until the pool is ready.
            unsafe { libc::getrandom(b.as_mut_ptr().cast(), 1, 0) };
        });
        if let Err(e) = spawned {
            log::warn!(target: "api", "cannot start the entropy helper: {e}");
        }
    }
    false
}

fn is_link_local(a: &IpAddr) -> bool {
    match a {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
    }
}

/// The node's hostname and addresses, sorted, as the server certificate names them.
fn sans(rt: &Runtime) -> Sans {
    let store = rt.store();
    let hostname = store
        .get_spec::<HostnameStatus>(Namespace::Network, HOSTNAME_ID)
        .map(|h| h.hostname.clone())
        .filter(|h| !h.is_empty());
    let mut addresses: Vec<IpAddr> = store
        .list_specs::<AddressStatus>(Namespace::Network)
        .map(|(_, a)| a.address.addr())
        .collect();
    net::sort::by_key(&mut addresses, |a| (!a.is_loopback(), is_link_local(a), *a));
    addresses.dedup();
    addresses.truncate(MAX_SAN_ADDRESSES);
    Sans { hostname, addresses }
}

fn describe(sans: &Sans) -> String {
    let mut names: Vec<String> = sans.hostname.iter().cloned().collect();
    names.extend(sans.addresses.iter().map(IpAddr::to_string));
    names.join(", ")
}

/// Can the node serve mutual TLS with this `machine.ca`: both parts decode, the
/// certificate is DER a TLS stack accepts as a trust root, the key is the certificate's and
/// issues a server certificate. Exactly what the switch to mutual TLS will do, so a config
/// this accepts cannot leave the node without a way in.
/// A `machine.ca` without its key is checked for what asking trustd needs instead.
pub fn check_ca(config: &MachineConfig, ca: &net::config::PemKeyPair) -> Result<(), String> {
    if ca.key.is_none() {
        let key = (ca.crt.clone(), None);
        trustd_ca(&ca.crt)?;
        return trustd_ask(config, &key, &Sans::default()).map(|_| ());
    }
    mutual(&(ca.crt.clone(), ca.key.clone()), &Sans::default()).map(|_| ())
}

/// Mutual TLS from `machine.ca` (base64 of PEM) with a server certificate for `sans`.
/// Also trustd's configuration: the same certificate, no client certificate.
type Configs = (Arc<ServerConfig>, Arc<ServerConfig>);

fn mutual((crt, key): &(String, Option<String>), sans: &Sans) -> Result<Configs, String> {
    let key = key.as_deref().ok_or("no key: the node cannot issue its own certificate")?;
    let crt_pem = decode(crt, "crt")?;
    let key_pem = decode(key, "key")?;
    let ca = Ca::from_pem(&crt_pem, &key_pem).map_err(|e| e.to_string())?;
    let id = ca.issue_server(sans).map_err(|e| e.to_string())?;
    let api = tls::mutual_config(&ca.cert, &id).map_err(|e| e.to_string())?;
    let trustd = tls::maintenance_config(&id).map_err(|e| e.to_string())?;
    Ok((api, trustd))
}

/// Base64 (either alphabet, as the config parser accepts) to text.
pub(crate) fn decode(b64: &str, what: &str) -> Result<String, String> {
    use base64::Engine;
    let engines =
        [base64::engine::general_purpose::STANDARD, base64::engine::general_purpose::URL_SAFE];
    let bytes = engines
        .iter()
        .find_map(|e| e.decode(b64.trim()).ok())
        .ok_or_else(|| format!("{what}: not base64"))?;
    String::from_utf8(bytes).map_err(|_| format!("{what}: not PEM text"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// An identity as trustd would sign it, valid `lifetime` from now.
    fn signed(lifetime: Duration) -> Identity {
        let sans = Sans { hostname: Some("worker".into()), addresses: vec![] };
        let (key, pem) = pki::csr::request(&sans).unwrap();
        let csr = pki::csr::parse(pem.as_bytes()).unwrap();
        let crt = Ca::generate("demo").unwrap().sign_csr_for(&csr, lifetime).unwrap();
        pki::csr::identity(&key, &crt).unwrap()
    }

    #[test]
    fn renewal_is_two_thirds_through_what_is_left_and_never_sooner_than_the_minimum() {
        let now = std::time::SystemTime::now();
        let year = 365 * 86400;
        let d = renew_in(&signed(Duration::from_secs(year)), now).as_secs();
        assert!((d as i64 - (year as i64 * 2 / 3)).abs() <= 2, "{d}");
        let d = renew_in(&signed(Duration::from_secs(300)), now).as_secs();
        assert!((199..=200).contains(&d), "{d}");
        // Short, or already over by this node's clock: the minimum.
        assert_eq!(renew_in(&signed(Duration::from_secs(3)), now), RENEW_MIN);
        let later = now + Duration::from_secs(1000);
        assert_eq!(renew_in(&signed(Duration::from_secs(300)), later), RENEW_MIN);
        // A certificate that cannot be read: the minimum too.
        let mut broken = signed(Duration::from_secs(300));
        broken.chain = vec![rustls::pki_types::CertificateDer::from(vec![0x30, 0x00])];
        assert_eq!(renew_in(&broken, now), RENEW_MIN);
    }
}
