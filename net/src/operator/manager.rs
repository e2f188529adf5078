// SPDX-License-Identifier: Apache-2.0
//! The operator manager: starts and stops DHCP clients as the merged operator specs and the
//! links change, moves packets between their sockets and their engines, and writes what the
//! engines learn into `network-config` at the operator layer, where the merge picks it up like
//! any other layer (docs/talos.md: DHCPv4).
//!
//! Everything an operator writes is owned by [`SOURCE`] and remembered per operator, so a new
//! lease replaces exactly the old lease's specs and a stopped operator leaves nothing behind.

use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::BorrowedFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::dhcp4_socket::PacketSocket;
use super::dhcp6_socket::Dhcp6Socket;
use super::engine::{Engine, Event, Input, Lease, Recv};
use super::leases;
use super::plan::{self, Want};
use crate::dhcp4::{self, Dhcp4Client};
use crate::dhcp6::{self, Dhcp6Client, DuidConfig};
use crate::resource::{
    layered_id, operator_output_id, AddressFlags, AddressStatus, HostnameStatus, Kind, LayerSpecs,
    LinkStatus, LinkView, Namespace, Operator, OperatorSpec, OperatorStatus, HOSTNAME_ID,
};
use crate::runtime::Runtime;

/// The owner of every resource operators write.
pub const SOURCE: &str = "operator";
/// How long to wait before retrying an operator whose socket could not be opened.
const START_RETRY: Duration = Duration::from_secs(5);
/// The largest datagram read: an Ethernet MTU; larger DHCP messages are not accepted.
const FRAME_BUF: usize = 1536;
/// The operators this manager runs (VIP is not one of them yet).
const KINDS: [Operator; 2] = [Operator::Dhcp4, Operator::Dhcp6];

#[derive(Debug)]
struct Running {
    want: Want,
    /// Its socket's key (see [`evloop::EventSource`]).
    key: u64,
    engine: Engine,
    /// `(kind, id)` of every spec written for the current lease.
    written: BTreeSet<(Kind, String)>,
    status: OperatorStatus,
}

/// All operators of the node.
#[derive(Debug)]
pub struct Operators {
    state_dir: Option<PathBuf>,
    running: BTreeMap<String, Running>,
    /// Operators whose start failed, and when to try again.
    retry: BTreeMap<String, Instant>,
    next_key: u64,
    /// Keys of sockets opened since [`Operators::take_new_keys`] was last called.
    new_keys: Vec<u64>,
}

/// The log target of an operator: its protocol.
fn target(want: &Want) -> &'static str {
    match want.spec.operator {
        Operator::Dhcp6 => "dhcp6",
        _ => "dhcp4",
    }
}

/// Whether `link` has a link-local IPv6 address that has left DAD.
fn link_local_ready<'a>(
    mut addresses: impl Iterator<Item = (&'a str, &'a AddressStatus)>,
    link: &str,
) -> bool {
    addresses.any(|(_, a)| {
        a.link_name == link
            && matches!(a.address.addr(), std::net::IpAddr::V6(ip) if ip.is_unicast_link_local())
            && !a.flags.contains(AddressFlags::TENTATIVE)
    })
}

impl Operators {
    /// No operators yet; leases are kept in `state_dir` when there is one.
    pub fn new(state_dir: Option<PathBuf>) -> Self {
        Self {
            state_dir,
            running: BTreeMap::new(),
            retry: BTreeMap::new(),
            next_key: 0,
            new_keys: Vec::new(),
        }
    }

    /// Start, stop and restart operators to match the store; tell engines about carrier
    /// and link-local changes. Returns whether it wrote anything (the runtime then has work).
    pub fn sync(&mut self, rt: &mut Runtime, now: Instant) -> bool {
        let (wants, ready_links) = {
            let store = rt.store();
            let links = LinkView::new(store.list_specs::<LinkStatus>(Namespace::Network));
            let wants =
                plan::wanted(store.list_specs::<OperatorSpec>(Namespace::Network), &links, &KINDS);
            let ready: BTreeSet<String> = wants
                .iter()
                .filter(|w| w.spec.operator == Operator::Dhcp6)
                .filter(|w| {
                    let addresses = store.list_specs::<AddressStatus>(Namespace::Network);
                    link_local_ready(addresses, &w.spec.link_name)
                })
                .map(|w| w.spec.link_name.clone())
                .collect();
            (wants, ready)
        };
        let wanted_ids: BTreeSet<&str> = wants.iter().map(|w| w.id.as_str()).collect();
        let mut wrote = false;
        let stale: Vec<String> = self
            .running
            .iter()
            .filter(|(id, r)| {
                !wanted_ids.contains(id.as_str())
                    || wants.iter().any(|w| &w.id == *id && !w.same_instance(&r.want))
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in stale {
            if let Some(r) = self.running.remove(&id) {
                log::info!(target: target(&r.want), "{id}: stopped");
                wrote |= forget_all(rt, &id, r.written);
                wrote |=
                    rt.remove_input(SOURCE, Namespace::Network, Kind::OperatorStatus, &id).is_ok();
            }
        }
        self.retry.retain(|id, _| wanted_ids.contains(id.as_str()));
        for want in wants {
            let ready = want.up && ready_links.contains(&want.spec.link_name);
            match self.running.get_mut(&want.id) {
                Some(r) => {
                    let mut inputs = Vec::new();
                    if r.want.up != want.up {
                        log::info!(target: target(&want), "{}: link {}", want.id, if want.up { "up" } else { "down" });
                        r.want.up = want.up;
                        inputs.push(if want.up { Input::LinkUp } else { Input::LinkDown });
                    }
                    if ready && (r.engine.needs_link_local() || !inputs.is_empty()) {
                        inputs.push(Input::LinkLocalReady);
                    }
                    for input in inputs {
                        wrote |= self.step(rt, &want.id, input, now);
                    }
                }
                None if self.retry.get(&want.id).is_some_and(|at| now < *at) => {}
                None => wrote |= self.start(rt, want, ready, now),
            }
        }
        wrote |= self.tick(rt, now);
        wrote
    }

    fn open(&self, rt: &Runtime, want: &Want, now: Instant) -> Result<Engine, String> {
        let hostname = rt
            .store()
            .get_spec::<HostnameStatus>(Namespace::Network, HOSTNAME_ID)
            .map(|h| h.hostname.clone())
            .filter(|h| !h.is_empty());
        let seed = seed(&want.mac, want.index);
        match want.spec.operator {
            Operator::Dhcp6 => {
                let settings = want.spec.dhcp6.clone().unwrap_or_default();
                let socket = Dhcp6Socket::open(&want.spec.link_name, want.index)
                    .map_err(|e| e.to_string())?;
                let mut config = dhcp6::ClientConfig::new(want.mac);
                config.duid = DuidConfig::from_client_identifier(&settings.client_identifier);
                config.hostname = hostname;
                let client = Box::new(Dhcp6Client::new(config, now, seed));
                Ok(Engine::V6 { client, socket, link_local_ready: false })
            }
            _ => {
                let settings = want.spec.dhcp4.clone().unwrap_or_default();
                let socket = PacketSocket::open(want.index).map_err(|e| e.to_string())?;
                let mut config = dhcp4::ClientConfig::new(want.mac);
                config.client_id = settings.client_identifier;
                config.route_metric = settings.route_metric;
                config.skip_hostname_request = settings.skip_hostname_request;
                config.hostname = hostname;
                config.previous_lease = self
                    .state_dir
                    .as_deref()
                    .and_then(|d| leases::load(d, &want.spec.link_name, &want.mac));
                let client = Box::new(Dhcp4Client::new(config, now, seed));
                Ok(Engine::V4 { client, socket, sender: None })
            }
        }
    }

    fn start(
        &mut self,
        rt: &mut Runtime,
        want: Want,
        link_local_ready: bool,
        now: Instant,
    ) -> bool {
        let engine = match self.open(rt, &want, now) {
            Ok(e) => e,
            Err(e) => {
                log::warn!(target: target(&want), "{}: {e}; retrying in {} s", want.id, START_RETRY.as_secs());
                self.retry.insert(want.id, now + START_RETRY);
                return false;
            }
        };
        self.retry.remove(&want.id);
        // Keys are never reused while the loop may still hold an old one for a closed socket;
        // wrapping takes 2^64 starts.
        let key = self.next_key;
        self.next_key = self.next_key.wrapping_add(1);
        self.new_keys.push(key);
        let how = if engine.rebooting() { "INIT-REBOOT with the saved lease" } else { "INIT" };
        log::info!(target: target(&want), "{}: started ({how})", want.id);
        let id = want.id.clone();
        let up = want.up;
        let status = OperatorStatus {
            operator: want.spec.operator,
            link_name: want.spec.link_name.clone(),
            ..OperatorStatus::default()
        };
        self.running
            .insert(id.clone(), Running { want, key, engine, written: BTreeSet::new(), status });
        let mut wrote = true;
        if !up {
            wrote |= self.step(rt, &id, Input::LinkDown, now);
        } else if link_local_ready {
            wrote |= self.step(rt, &id, Input::LinkLocalReady, now);
        }
        wrote
    }

    /// Whether an operator whose start failed is due for another try (the one reason to
    /// [`Operators::sync`] when the store has not changed).
    pub fn retry_due(&self, now: Instant) -> bool {
        self.retry.values().any(|at| *at <= now)
    }

    /// Keys of newly opened sockets, to add to the event loop with [`Operators::fd`].
    pub fn take_new_keys(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.new_keys)
    }

    /// The socket behind `key`.
    pub fn fd(&self, key: u64) -> Option<BorrowedFd<'_>> {
        self.running.values().find(|r| r.key == key).map(|r| r.engine.fd())
    }

    /// The earliest engine deadline or start retry.
    pub fn poll_at(&self) -> Option<Instant> {
        let engines = self.running.values().filter_map(|r| r.engine.poll_at());
        engines.chain(self.retry.values().copied()).min()
    }

    /// Fire every engine timer that is due. Returns whether anything was written.
    pub fn tick(&mut self, rt: &mut Runtime, now: Instant) -> bool {
        let due: Vec<String> = self
            .running
            .iter()
            .filter(|(_, r)| r.engine.poll_at().is_some_and(|at| at <= now))
            .map(|(id, _)| id.clone())
            .collect();
        let mut wrote = false;
        for id in due {
            wrote |= self.step(rt, &id, Input::Timer, now);
        }
        wrote
    }

    /// Read everything queued on the socket behind `key` (a closed socket's: nothing).
    pub fn ready(&mut self, key: u64, rt: &mut Runtime, now: Instant) -> bool {
        let Some(id) = self.running.iter().find(|(_, r)| r.key == key).map(|(id, _)| id.clone())
        else {
            return false;
        };
        let mut buf = [0u8; FRAME_BUF];
        let mut wrote = false;
        loop {
            let Some(r) = self.running.get_mut(&id) else { return wrote };
            let payload = match r.engine.recv(&mut buf) {
                Ok(Some(range)) => range,
                Ok(None) => return wrote,
                Err(Recv::Skip(why)) => {
                    log::debug!(target: target(&r.want), "{id}: ignoring {why}");
                    continue;
                }
                Err(Recv::Socket(e)) => {
                    log::warn!(target: target(&r.want), "{id}: {e}");
                    return wrote;
                }
            };
            let bytes = buf.get(payload).unwrap_or_default();
            wrote |= self.step(rt, &id, Input::Packet(bytes), now);
        }
    }

    /// Stop every operator: with `release`, leases are given back and their specs removed;
    /// without, the kernel keeps the addresses so a restarting node keeps its traffic.
    pub fn shutdown(&mut self, rt: &mut Runtime, now: Instant, release: bool) {
        let ids: Vec<String> = self.running.keys().cloned().collect();
        for id in ids {
            self.step(rt, &id, Input::Shutdown { release }, now);
        }
    }

    /// Feed one input to operator `id` and carry out what it asks. An engine that panics is
    /// stopped (its specs go) and started afresh after [`START_RETRY`], like a failing
    /// controller.
    fn step(&mut self, rt: &mut Runtime, id: &str, input: Input<'_>, now: Instant) -> bool {
        let Some(r) = self.running.get_mut(id) else { return false };
        match guarded(id, || r.engine.handle(now, input)) {
            Some(events) => self.apply(rt, id, events, now),
            None => {
                let Some(r) = self.running.remove(id) else { return false };
                log::error!(target: target(&r.want), "{id}: restarting in {} s", START_RETRY.as_secs());
                self.retry.insert(id.to_owned(), now + START_RETRY);
                let removed = forget_all(rt, id, r.written);
                rt.remove_input(SOURCE, Namespace::Network, Kind::OperatorStatus, id).is_ok()
                    || removed
            }
        }
    }

    /// Carry out an engine's events. Returns whether anything was written.
    fn apply(&mut self, rt: &mut Runtime, id: &str, events: Vec<Event>, now: Instant) -> bool {
        let Some(r) = self.running.get_mut(id) else { return false };
        let link = r.want.spec.link_name.clone();
        let log_target = target(&r.want);
        let mut wrote = false;
        for event in events {
            match event {
                Event::Send4 { .. } | Event::Send6(_) => {
                    // A lost send is a lost packet: the engine retransmits on its own schedule.
                    if let Err(e) = r.engine.send(&link, &event) {
                        log::debug!(target: log_target, "{id}: {e}");
                    }
                }
                Event::Bound(lease) => {
                    let network = lease.network();
                    if r.status.address == Some(network) {
                        log::info!(target: log_target, "{id}: renewed {network} for {} s", lease.seconds().unwrap_or(u32::MAX));
                    } else {
                        let from = lease.server().map(|s| format!(" from {s}")).unwrap_or_default();
                        log::info!(target: log_target, "{id}: bound {network}{from} for {} s", lease.seconds().unwrap_or(u32::MAX));
                    }
                    let skip_routes = r.want.spec.dhcp4.as_ref().is_some_and(|d| d.skip_routes);
                    let specs = lease.specs(&link, r.engine.route_metric(), skip_routes, now);
                    wrote |= write_all(rt, id, specs, &mut r.written);
                    if let (Some(dir), Lease::V4(l)) = (&self.state_dir, &lease) {
                        if let Err(e) = leases::save(dir, &link, &r.want.mac, l) {
                            log::warn!(target: log_target, "{id}: saving the lease: {e}");
                        }
                    }
                    r.status.reason.clear();
                    r.status.address = Some(network);
                    r.status.server = lease.server();
                    r.status.lease_seconds = lease.seconds();
                }
                Event::Expired => {
                    let what = r.status.address.map(|a| a.to_string()).unwrap_or_default();
                    log::warn!(target: log_target, "{id}: lease of {what} ended; removing its address and routes");
                    wrote |= forget_all(rt, id, std::mem::take(&mut r.written));
                    r.engine.lease_gone();
                    if let (Some(dir), Operator::Dhcp4) = (&self.state_dir, r.want.spec.operator) {
                        if let Err(e) = leases::forget(dir, &link) {
                            log::warn!(target: log_target, "{id}: {e}");
                        }
                    }
                    r.status.address = None;
                    r.status.server = None;
                    r.status.lease_seconds = None;
                }
                Event::Status(reason) => {
                    if r.status.reason != reason {
                        log::warn!(target: log_target, "{id}: {reason}");
                        r.status.reason = reason.to_owned();
                    }
                }
            }
        }
        r.status.state = r.engine.state_name().to_owned();
        let status = r.status.clone();
        wrote |= rt.put_input(SOURCE, Namespace::Network, id, status).is_ok();
        wrote
    }
}

/// Run one engine step, catching a panic: one operator's bug must not take PID 1 down.
fn guarded<T>(id: &str, step: impl FnOnce() -> T) -> Option<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(step)) {
        Ok(out) => Some(out),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            log::error!(target: "operator", "{id}: the client panicked: {what}");
            None
        }
    }
}

/// A seed for the engine's xids and jitter. Not `RandomState`/`getrandom(0)`: early in boot
/// they block until the kernel's pool is initialised (seconds under QEMU), and xids need only
/// differ between clients and boots, not be secret (RFC 2131 §4.4.1).
fn seed(mac: &[u8; 6], index: u32) -> u64 {
    let mut buf = [0u8; 8];
    // SAFETY: the buffer is live and its length is passed; GRND_INSECURE never blocks.
    let got = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), libc::GRND_INSECURE) };
    let random = if got == 8 { u64::from_ne_bytes(buf) } else { 0 };
    let clock = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut mac8 = [0u8; 8];
    mac8[..6].copy_from_slice(mac);
    random ^ clock.rotate_left(17) ^ u64::from_ne_bytes(mac8) ^ u64::from(index).rotate_left(48)
}

/// Write `specs` as operator `id`'s output and remove what it wrote before but no longer
/// produces. Returns whether anything changed.
fn write_all(
    rt: &mut Runtime,
    id: &str,
    specs: LayerSpecs,
    written: &mut BTreeSet<(Kind, String)>,
) -> bool {
    let mut now = BTreeSet::new();
    for (natural, layer, spec) in specs.into_entries() {
        let rid = layered_id(layer, &operator_output_id(id, &natural));
        let kind = spec.kind();
        if let Err(e) = rt.put_input_any(SOURCE, Namespace::NetworkConfig, &rid, spec) {
            log::warn!(target: "operator", "{id}: {e}");
        }
        now.insert((kind, rid));
    }
    let stale: BTreeSet<(Kind, String)> = written.difference(&now).cloned().collect();
    let changed = forget_all(rt, id, stale) || now != *written;
    *written = now;
    changed
}

/// Remove every resource in `written`. Returns whether anything was removed.
fn forget_all(rt: &mut Runtime, id: &str, written: BTreeSet<(Kind, String)>) -> bool {
    let mut removed = false;
    for (kind, rid) in written {
        match rt.remove_input(SOURCE, Namespace::NetworkConfig, kind, &rid) {
            Ok(()) => removed = true,
            Err(e) => log::warn!(target: "operator", "{id}: {e}"),
        }
    }
    removed
}

impl evloop::EventSource<Runtime> for Operators {
    fn take_new_keys(&mut self) -> Vec<u64> {
        Operators::take_new_keys(self)
    }

    fn fd(&self, key: u64) -> Option<BorrowedFd<'_>> {
        Operators::fd(self, key)
    }

    fn ready(&mut self, key: u64, rt: &mut Runtime, now: Instant) {
        Operators::ready(self, key, rt, now);
    }

    fn poll_at(&self) -> Option<Instant> {
        Operators::poll_at(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_engine_step_is_caught() {
        assert_eq!(guarded("dhcp4/eth0", || 7), Some(7));
        let caught: Option<u32> = guarded("dhcp4/eth0", || panic!("bad option 52"));
        assert_eq!(caught, None);
    }

    #[test]
    fn seeds_differ_between_links() {
        assert_ne!(seed(&[2, 0, 0, 0, 0, 1], 2), seed(&[2, 0, 0, 0, 0, 2], 3));
    }
}
