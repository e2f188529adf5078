//! The operator manager: starts and stops DHCP clients as the merged operator specs and the
//! links change, moves packets between their sockets and their engines, and writes what the
//! engines learn into `network-config` at the operator layer, where the merge picks it up like
//! any other layer (TB §6).
//!
//! Everything an operator writes is owned by [`SOURCE`] and remembered per operator, so a new
//! lease replaces exactly the old lease's specs and a stopped operator leaves nothing behind.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use ipnet::IpNet;

use super::dhcp4_socket::{PacketSocket, UdpSender};
use super::plan::{self, Want};
use super::{frame, leases};
use crate::dhcp4::{self, ClientConfig, Destination, Dhcp4Client, Dhcp4State, Lease};
use crate::resource::{
    layered_id, operator_output_id, HostnameStatus, Kind, LayerSpecs, LinkStatus, LinkView,
    Namespace, Operator, OperatorSpec, OperatorStatus, SpecType, HOSTNAME_ID, RESOLVER_ID,
    TIMESERVER_ID,
};
use crate::runtime::Runtime;

/// The owner of every resource operators write.
pub const SOURCE: &str = "operator";
/// Tokens for operator sockets start here, far above the node's own.
pub const FIRST_TOKEN: u64 = 1 << 40;
/// How long to wait before retrying an operator whose socket could not be opened.
const START_RETRY: Duration = Duration::from_secs(5);
/// The largest frame read: an Ethernet MTU; larger DHCP messages are not accepted (option 57).
const FRAME_BUF: usize = 1536;

/// A running DHCPv4 client and its sockets.
#[derive(Debug)]
struct Dhcp4Io {
    client: Dhcp4Client,
    socket: PacketSocket,
    /// The unicast sender, while a lease exists.
    sender: Option<UdpSender>,
}

#[derive(Debug)]
struct Running {
    want: Want,
    token: u64,
    io: Dhcp4Io,
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
    next_token: u64,
    /// Tokens of sockets opened since [`Operators::take_new_tokens`] was last called.
    new_tokens: Vec<u64>,
}

impl Operators {
    /// No operators yet; leases are kept in `state_dir` when there is one.
    pub fn new(state_dir: Option<PathBuf>) -> Self {
        Self {
            state_dir,
            running: BTreeMap::new(),
            retry: BTreeMap::new(),
            next_token: FIRST_TOKEN,
            new_tokens: Vec::new(),
        }
    }

    /// Start, stop and restart operators to match the store; tell engines about carrier
    /// changes. Returns whether it wrote anything (the runtime then has work).
    pub fn sync(&mut self, rt: &mut Runtime, now: Instant) -> bool {
        let wants = {
            let store = rt.store();
            let links = LinkView::new(store.list_specs::<LinkStatus>(Namespace::Network));
            plan::wanted(
                store.list_specs::<OperatorSpec>(Namespace::Network),
                &links,
                &[Operator::Dhcp4],
            )
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
                log::info!(target: "dhcp4", "{id}: stopped");
                wrote |= forget_all(rt, &id, r.written);
                wrote |=
                    rt.remove_input(SOURCE, Namespace::Network, Kind::OperatorStatus, &id).is_ok();
            }
        }
        self.retry.retain(|id, _| wanted_ids.contains(id.as_str()));
        for want in wants {
            match self.running.get_mut(&want.id) {
                Some(r) if r.want.up != want.up => {
                    let input = if want.up { dhcp4::Input::LinkUp } else { dhcp4::Input::LinkDown };
                    log::info!(target: "dhcp4", "{}: link {}", want.id, if want.up { "up" } else { "down" });
                    r.want.up = want.up;
                    let out = r.io.client.handle(now, input);
                    wrote |= self.apply(rt, &want.id, out, now);
                }
                Some(_) => {}
                None if self.retry.get(&want.id).is_some_and(|at| now < *at) => {}
                None => wrote |= self.start(rt, want, now),
            }
        }
        wrote |= self.tick(rt, now);
        wrote
    }

    fn start(&mut self, rt: &mut Runtime, want: Want, now: Instant) -> bool {
        let socket = match PacketSocket::open(want.index) {
            Ok(s) => s,
            Err(e) => {
                log::warn!(target: "dhcp4", "{}: {e}; retrying in {} s", want.id, START_RETRY.as_secs());
                self.retry.insert(want.id, now + START_RETRY);
                return false;
            }
        };
        self.retry.remove(&want.id);
        let settings = want.spec.dhcp4.clone().unwrap_or_default();
        let mut config = ClientConfig::new(want.mac);
        config.client_id = settings.client_identifier;
        config.route_metric = settings.route_metric;
        config.hostname = rt
            .store()
            .get_spec::<HostnameStatus>(Namespace::Network, HOSTNAME_ID)
            .map(|h| h.hostname.clone())
            .filter(|h| !h.is_empty());
        config.previous_lease = self
            .state_dir
            .as_deref()
            .and_then(|d| leases::load(d, &want.spec.link_name, &want.mac));
        let seed = seed(&want.mac, want.index);
        let mut client = Dhcp4Client::new(config, now, seed);
        let token = self.next_token;
        self.next_token += 1;
        self.new_tokens.push(token);
        log::info!(target: "dhcp4", "{}: started ({})", want.id, if client.state() == Dhcp4State::InitReboot { "INIT-REBOOT with the saved lease" } else { "INIT" });
        let first = if want.up { Vec::new() } else { client.handle(now, dhcp4::Input::LinkDown) };
        let id = want.id.clone();
        let status = OperatorStatus {
            operator: Operator::Dhcp4,
            link_name: want.spec.link_name.clone(),
            ..OperatorStatus::default()
        };
        self.running.insert(
            id.clone(),
            Running {
                want,
                token,
                io: Dhcp4Io { client, socket, sender: None },
                written: BTreeSet::new(),
                status,
            },
        );
        self.apply(rt, &id, first, now);
        true
    }

    /// Tokens of newly opened sockets, to add to the event loop with [`Operators::fd`].
    pub fn take_new_tokens(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.new_tokens)
    }

    /// The socket behind `token`.
    pub fn fd(&self, token: u64) -> Option<BorrowedFd<'_>> {
        self.running.values().find(|r| r.token == token).map(|r| r.io.socket.as_fd())
    }

    /// Whether `token` is an operator socket's.
    pub fn owns(&self, token: u64) -> bool {
        token >= FIRST_TOKEN
    }

    /// The earliest engine deadline or start retry.
    pub fn poll_at(&self) -> Option<Instant> {
        let engines = self.running.values().filter_map(|r| r.io.client.poll_at());
        engines.chain(self.retry.values().copied()).min()
    }

    /// Fire every engine timer that is due. Returns whether anything was written.
    pub fn tick(&mut self, rt: &mut Runtime, now: Instant) -> bool {
        let due: Vec<String> = self
            .running
            .iter()
            .filter(|(_, r)| r.io.client.poll_at().is_some_and(|at| at <= now))
            .map(|(id, _)| id.clone())
            .collect();
        let mut wrote = false;
        for id in due {
            if let Some(r) = self.running.get_mut(&id) {
                let out = r.io.client.handle(now, dhcp4::Input::Timer);
                wrote |= self.apply(rt, &id, out, now);
            }
        }
        wrote
    }

    /// Read everything queued on the socket behind `token`.
    pub fn ready(&mut self, token: u64, rt: &mut Runtime, now: Instant) -> bool {
        let Some(id) =
            self.running.iter().find(|(_, r)| r.token == token).map(|(id, _)| id.clone())
        else {
            return false;
        };
        let mut buf = [0u8; FRAME_BUF];
        let mut wrote = false;
        loop {
            let Some(r) = self.running.get_mut(&id) else { return wrote };
            let (len, checksum_ready) = match r.io.socket.recv(&mut buf) {
                Ok(Some(got)) => got,
                Ok(None) => return wrote,
                Err(e) => {
                    log::warn!(target: "dhcp4", "{id}: {e}");
                    return wrote;
                }
            };
            let frame = buf.get(..len).unwrap_or_default();
            let payload = match frame::dhcp_payload(frame, checksum_ready) {
                Ok(p) => p,
                Err(e) => {
                    log::debug!(target: "dhcp4", "{id}: ignoring a {len}-byte frame: {e}");
                    continue;
                }
            };
            let out = r.io.client.handle(now, dhcp4::Input::Packet(payload));
            wrote |= self.apply(rt, &id, out, now);
        }
    }

    /// Stop every operator: with `release`, leases are given back and their specs removed;
    /// without, the kernel keeps the addresses so a restarting node keeps its traffic.
    pub fn shutdown(&mut self, rt: &mut Runtime, now: Instant, release: bool) {
        let ids: Vec<String> = self.running.keys().cloned().collect();
        for id in ids {
            if let Some(r) = self.running.get_mut(&id) {
                let out = r.io.client.handle(now, dhcp4::Input::Shutdown { release });
                self.apply(rt, &id, out, now);
            }
        }
    }

    /// Carry out an engine's outputs. Returns whether anything was written.
    fn apply(
        &mut self,
        rt: &mut Runtime,
        id: &str,
        outputs: Vec<dhcp4::Output>,
        now: Instant,
    ) -> bool {
        let Some(r) = self.running.get_mut(id) else { return false };
        let link = r.want.spec.link_name.clone();
        let mut wrote = false;
        for output in outputs {
            match output {
                dhcp4::Output::Send { packet, to } => {
                    // Only a client that holds its address sends from it: RENEWING to the
                    // server, REBINDING to everyone. The rest goes out from 0.0.0.0.
                    let from_lease = match to {
                        Destination::Unicast(server) => Some(server),
                        Destination::Broadcast if r.io.client.state() == Dhcp4State::Rebinding => {
                            Some(Ipv4Addr::BROADCAST)
                        }
                        Destination::Broadcast => None,
                    };
                    let sent = match from_lease {
                        Some(dst) => {
                            let lease_addr = r.io.client.lease().map(|l| l.address);
                            if r.io.sender.as_ref().map(|s| s.addr) != lease_addr {
                                r.io.sender = lease_addr.and_then(|a| {
                                    UdpSender::open(&link, a)
                                        .map_err(|e| log::warn!(target: "dhcp4", "{id}: {e}"))
                                        .ok()
                                });
                            }
                            match &r.io.sender {
                                Some(s) => s.send_to(dst, &packet),
                                None => r.io.socket.send_broadcast(&packet),
                            }
                        }
                        None => r.io.socket.send_broadcast(&packet),
                    };
                    // A lost send is a lost packet: the engine retransmits on its own schedule.
                    if let Err(e) = sent {
                        log::debug!(target: "dhcp4", "{id}: {e}");
                    }
                }
                dhcp4::Output::Bound(lease) => {
                    let renewal = r.status.address == Some(IpNet::V4(lease.network()));
                    if renewal {
                        log::info!(target: "dhcp4", "{id}: renewed {} for {} s", lease.network(), lease.lease_time);
                    } else {
                        log::info!(target: "dhcp4", "{id}: bound {} from {} for {} s", lease.network(), lease.server_id, lease.lease_time);
                    }
                    let specs =
                        dhcp4::lease_to_specs(&lease, &link, r.io.client.route_metric(), now);
                    wrote |= write_all(rt, id, specs, &mut r.written);
                    if let Some(dir) = &self.state_dir {
                        if let Err(e) = leases::save(dir, &link, &r.want.mac, &lease) {
                            log::warn!(target: "dhcp4", "{id}: saving the lease: {e}");
                        }
                    }
                    r.status.reason.clear();
                    set_lease(&mut r.status, Some(&lease));
                }
                dhcp4::Output::Expired => {
                    log::warn!(target: "dhcp4", "{id}: lease of {} ended; removing its address and routes", r.status.address.map(|a| a.to_string()).unwrap_or_default());
                    wrote |= forget_all(rt, id, std::mem::take(&mut r.written));
                    r.io.sender = None;
                    if let Some(dir) = &self.state_dir {
                        if let Err(e) = leases::forget(dir, &link) {
                            log::warn!(target: "dhcp4", "{id}: {e}");
                        }
                    }
                    set_lease(&mut r.status, None);
                }
                dhcp4::Output::Status(reason) => {
                    if r.status.reason != reason {
                        log::warn!(target: "dhcp4", "{id}: {reason}");
                        r.status.reason = reason.to_owned();
                    }
                }
            }
        }
        r.status.state = state_name(r.io.client.state()).to_owned();
        let status = r.status.clone();
        wrote |= rt.put_input(SOURCE, Namespace::Network, id, status).is_ok();
        wrote
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

fn set_lease(status: &mut OperatorStatus, lease: Option<&Lease>) {
    status.address = lease.map(|l| IpNet::V4(l.network()));
    status.server = lease.map(|l| IpAddr::V4(l.server_id));
    status.lease_seconds = lease.filter(|l| !l.is_infinite()).map(|l| l.lease_time);
}

fn state_name(state: Dhcp4State) -> &'static str {
    match state {
        Dhcp4State::Init => "init",
        Dhcp4State::Selecting => "selecting",
        Dhcp4State::Requesting => "requesting",
        Dhcp4State::Bound => "bound",
        Dhcp4State::Renewing => "renewing",
        Dhcp4State::Rebinding => "rebinding",
        Dhcp4State::InitReboot => "init-reboot",
        Dhcp4State::Rebooting => "rebooting",
        Dhcp4State::LinkDown => "link-down",
        Dhcp4State::Stopped => "stopped",
    }
}

/// Write `specs` as operator `id`'s output and remove what it wrote before but no longer
/// produces. Returns whether anything changed.
fn write_all(
    rt: &mut Runtime,
    id: &str,
    specs: LayerSpecs,
    written: &mut BTreeSet<(Kind, String)>,
) -> bool {
    fn put<S: SpecType>(
        rt: &mut Runtime,
        op: &str,
        layer: crate::resource::ConfigLayer,
        natural: &str,
        spec: S,
        now: &mut BTreeSet<(Kind, String)>,
    ) {
        let rid = layered_id(layer, &operator_output_id(op, natural));
        if let Err(e) = rt.put_input(SOURCE, Namespace::NetworkConfig, &rid, spec) {
            log::warn!(target: "operator", "{op}: {e}");
        }
        now.insert((S::KIND, rid));
    }
    let mut now = BTreeSet::new();
    let LayerSpecs {
        addresses,
        routes,
        links,
        resolvers,
        hostnames,
        time_servers,
        operators,
        rules,
    } = specs;
    for s in addresses {
        put(rt, id, s.layer, &s.id(), s, &mut now);
    }
    for s in routes {
        put(rt, id, s.layer, &s.id(), s, &mut now);
    }
    for s in links {
        put(rt, id, s.layer, &s.id(), s, &mut now);
    }
    for s in resolvers {
        put(rt, id, s.layer, RESOLVER_ID, s, &mut now);
    }
    for s in hostnames {
        put(rt, id, s.layer, HOSTNAME_ID, s, &mut now);
    }
    for s in time_servers {
        put(rt, id, s.layer, TIMESERVER_ID, s, &mut now);
    }
    for s in operators {
        put(rt, id, s.layer, &s.id(), s, &mut now);
    }
    for s in rules {
        put(rt, id, s.layer, &s.id(), s, &mut now);
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
