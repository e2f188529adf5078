// SPDX-License-Identifier: Apache-2.0
//! Tenant networks on a node (docs/tenant-networks.md), with the kernel's own devices: each
//! network is a VRF (`tvrf<id>`, its own routing table) with a VXLAN device (`tvx<id>`,
//! VNI = the network's ID) enslaved to it. A peering is route leaking between VRFs: for each
//! prefix peer B exposes to network A, A's table gets a route to that prefix whose device is
//! B's VRF, so the lookup continues in B's table (what metalnet does by copying routes between
//! dpservice VNI tables).
//!
//! Across nodes the design is routed, with nothing learnt and nothing flooded: each node's
//! VXLAN devices carry a MAC derived from its VTEP address ([`router_mac`]), so every other
//! node knows it without asking. For each other node carrying a network, a node writes on the
//! network's VXLAN device one static forwarding entry (that MAC → that VTEP) and one permanent
//! IPv6 neighbour entry (the link-local address of that MAC, [`gateway`] → that MAC), and
//! routes the workload prefixes that node reported via that link-local gateway, IPv4 ones
//! too (RFC 8950). ARP and neighbour discovery never cross the overlay, and IPv6 needs no
//! proxy NDP.
//!
//! [`desired`] and [`plan`] are pure: what the node should have, and the steps from what it
//! has. [`kernel`] observes and applies them over rtnetlink.

pub mod kernel;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv6Addr};

use ipnet::IpNet;

/// Device name prefixes: everything under them is this module's (and removed when unwanted).
pub const VRF_PREFIX: &str = "tvrf";
/// VXLAN device prefix.
pub const VXLAN_PREFIX: &str = "tvx";
/// A network's VRF table is `TABLE_BASE + id`: above the 24-bit ID space, clear of the tables
/// a machine configuration names by small numbers.
pub const TABLE_BASE: u32 = 0x1000_0000;
/// The largest network ID (24-bit VNI).
pub const MAX_ID: u32 = (1 << 24) - 1;
/// VXLAN's IANA port (RFC 7348).
pub const VXLAN_PORT: u16 = 4789;
/// The metric of each VRF table's `unreachable default`: the highest the kernel's VRF
/// documentation suggests (Documentation/networking/vrf.rst), so every real route wins.
pub const ISOLATION_METRIC: u32 = 4_278_198_272;

/// At most this many workload prefixes a node reports per network (and a node takes from
/// another's report): the rest are left out.
pub const MAX_REPORTED: usize = 64;

/// Another node carrying a network.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Remote {
    /// Its VTEP address.
    pub vtep: IpAddr,
    /// The workload prefixes it reported for this network (only those inside the network's
    /// own prefixes are routed to it).
    pub prefixes: Vec<IpNet>,
}

/// One network as the node layer describes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TenantNetwork {
    /// The network's ID (its VNI), 1 to 2^24 - 1.
    pub id: u32,
    /// Peers: their IDs and the prefixes of theirs this network may reach.
    pub peers: Vec<Peer>,
    /// The network's own prefixes: what its nodes may report and route to each other.
    pub prefixes: Vec<IpNet>,
    /// The other nodes carrying this network (in a stable order: the first to report a
    /// prefix gets it).
    pub remotes: Vec<Remote>,
}

/// One peer of a network.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Peer {
    /// The peer's ID.
    pub id: u32,
    /// The peer's prefixes this network reaches.
    pub prefixes: Vec<IpNet>,
}

/// Where VXLAN packets leave from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Underlay {
    /// The VTEP's source address (`None`: the kernel picks one per packet).
    pub local: Option<IpAddr>,
    /// UDP port (0: [`VXLAN_PORT`]).
    pub port: u16,
}

/// The VRF device of a network.
pub fn vrf_name(id: u32) -> String {
    format!("{VRF_PREFIX}{id}")
}

/// The VXLAN device of a network.
pub fn vxlan_name(id: u32) -> String {
    format!("{VXLAN_PREFIX}{id}")
}

/// The routing table of a network's VRF.
pub fn table(id: u32) -> u32 {
    // IDs are at most 2^24 - 1; saturating keeps a hostile one from overflowing.
    TABLE_BASE.saturating_add(id)
}

/// The MAC of every VXLAN device of the node whose VTEP is `vtep`: locally administered
/// unicast, the IPv4 address itself after `02:00`, or for IPv6 40 bits of an FNV-1a hash
/// after `06`. Each node computes every other node's from the VTEP it reported.
pub fn router_mac(vtep: IpAddr) -> [u8; 6] {
    match vtep {
        IpAddr::V4(a) => {
            let o = a.octets();
            [0x02, 0x00, o[0], o[1], o[2], o[3]]
        }
        IpAddr::V6(a) => {
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            for b in a.octets() {
                h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
            }
            let b = h.to_be_bytes();
            [0x06, b[3], b[4], b[5], b[6], b[7]]
        }
    }
}

/// The IPv6 link-local address of `mac` (modified EUI-64, RFC 4291 appendix A): the
/// address the kernel gives a VXLAN device with that MAC, and the next hop other nodes
/// route through, for IPv4 as for IPv6.
pub fn gateway(mac: [u8; 6]) -> Ipv6Addr {
    let w = |a: u8, b: u8| (u16::from(a) << 8) | u16::from(b);
    Ipv6Addr::new(
        0xfe80,
        0,
        0,
        0,
        w(mac[0] ^ 0x02, mac[1]),
        w(mac[2], 0xff),
        w(0xfe, mac[3]),
        w(mac[4], mac[5]),
    )
}

/// A network ID back from a device name of this module.
pub fn id_of(name: &str) -> Option<u32> {
    let digits = name.strip_prefix(VRF_PREFIX).or_else(|| name.strip_prefix(VXLAN_PREFIX))?;
    if digits.is_empty() || digits.starts_with('0') || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|id| (1..=MAX_ID).contains(id))
}

/// A device this module manages.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Device {
    /// A VRF with its table.
    Vrf {
        /// Network ID.
        id: u32,
        /// Routing table.
        table: u32,
    },
    /// A VXLAN device enslaved to its network's VRF.
    Vxlan {
        /// Network ID (the VNI).
        id: u32,
        /// Source address.
        local: Option<IpAddr>,
        /// UDP port.
        port: u16,
        /// Its MAC ([`router_mac`] of the VTEP; `None`: no VTEP, the kernel's).
        mac: Option<[u8; 6]>,
    },
}

impl Device {
    /// The network it belongs to.
    pub fn id(&self) -> u32 {
        match self {
            Self::Vrf { id, .. } | Self::Vxlan { id, .. } => *id,
        }
    }

    /// Whether a device found is the one wanted (a wanted VXLAN device without a MAC of its
    /// own takes any).
    pub fn satisfied_by(&self, found: &Device) -> bool {
        match (self, found) {
            (
                Self::Vxlan { id, local, port, mac: None },
                Self::Vxlan { id: i, local: l, port: p, .. },
            ) => (id, local, port) == (i, l, p),
            _ => self == found,
        }
    }

    /// The device's name.
    pub fn name(&self) -> String {
        match self {
            Self::Vrf { id, .. } => vrf_name(*id),
            Self::Vxlan { id, .. } => vxlan_name(*id),
        }
    }
}

/// A route in `id`'s VRF table: `dst` through `via`'s VRF device (a leaked route), or when
/// `via == id` through the network's own VXLAN device via `gw` (to another node).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LeakRoute {
    /// The network whose table holds the route.
    pub id: u32,
    /// Destination.
    pub dst: IpNet,
    /// The peer whose VRF the route leads into (`id` itself: the network's VXLAN device).
    pub via: u32,
    /// The next hop (another node's [`gateway`]) of a route through the VXLAN device.
    pub gw: Option<IpAddr>,
}

/// A static forwarding entry on a network's VXLAN device: another node's MAC at its VTEP.
/// An all-zeros MAC is a flooding entry (found only: this module no longer writes them).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Fdb {
    /// The network (its VXLAN device).
    pub id: u32,
    /// The other node's [`router_mac`].
    pub mac: [u8; 6],
    /// The other node's VTEP.
    pub dst: IpAddr,
}

/// A permanent neighbour entry on a network's VXLAN device: another node's [`gateway`] at
/// its MAC.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Neigh {
    /// The network (its VXLAN device).
    pub id: u32,
    /// The other node's link-local gateway.
    pub addr: Ipv6Addr,
    /// The other node's [`router_mac`].
    pub mac: [u8; 6],
}

/// What the node should have.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Desired {
    /// VRFs first, then VXLAN devices.
    pub devices: Vec<Device>,
    /// Leaked routes and routes to the network's other nodes, sorted.
    pub routes: BTreeSet<LeakRoute>,
    /// Forwarding entries: each other node's MAC at its VTEP.
    pub fdb: BTreeSet<Fdb>,
    /// Neighbour entries: each other node's gateway at its MAC.
    pub neighs: BTreeSet<Neigh>,
    /// Per network, the peers that cannot be realised here and why.
    pub unrealisable: BTreeMap<u32, Vec<(u32, String)>>,
}

/// A device under one of this module's names, as found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// Its name.
    pub name: String,
    /// What it is (`None`: another kind, or settings this module cannot read: replaced).
    pub device: Option<Device>,
    /// Administratively up (a VXLAN device: and forwarding, set with it).
    pub up: bool,
    /// The network ID of the tenant VRF it is enslaved to.
    pub master: Option<u32>,
}

/// What the node has: this module's devices and the leaked routes in their tables.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// Devices under this module's names.
    pub devices: Vec<Found>,
    /// Leaked routes and routes through the networks' VXLAN devices found.
    pub routes: BTreeSet<LeakRoute>,
    /// Forwarding entries with a remote VTEP found on this module's VXLAN devices.
    pub fdb: BTreeSet<Fdb>,
    /// Permanent IPv6 neighbour entries found on this module's VXLAN devices.
    pub neighs: BTreeSet<Neigh>,
    /// Networks whose table ends in an `unreachable default` for IPv4 and for IPv6.
    pub isolated: BTreeSet<u32>,
    /// Per network, the connected prefixes of the other devices in its VRF: this node's
    /// workloads (IPv6 link-local left out).
    pub local: BTreeMap<u32, BTreeSet<IpNet>>,
}

/// Whether `inner` lies wholly inside `outer` (address and length).
fn inside(outer: &IpNet, inner: &IpNet) -> bool {
    outer.contains(inner)
}

fn overlap(a: &IpNet, b: &IpNet) -> bool {
    a.contains(b) || b.contains(a)
}

/// Per network, what this node reports as its workload prefixes: the connected prefixes in
/// its VRF that lie wholly inside the network's own, at most [`MAX_REPORTED`].
pub fn reported(nets: &[TenantNetwork], have: &Observed) -> BTreeMap<u32, Vec<IpNet>> {
    nets.iter()
        .map(|n| {
            let local = have.local.get(&n.id).into_iter().flatten();
            let ours = local
                .filter(|l| n.prefixes.iter().any(|p| inside(p, l)))
                .take(MAX_REPORTED)
                .copied()
                .collect();
            (n.id, ours)
        })
        .collect()
}

/// The node's target without workloads of its own: [`desired_with`] and no local prefixes.
pub fn desired(nets: &[TenantNetwork], underlay: &Underlay) -> Desired {
    desired_with(nets, underlay, &BTreeMap::new())
}

/// The node's target: a VRF and a VXLAN device per network, and per peer its prefixes leaked
/// into the network's table. A peer that is not on this node (no VRF to lead into), a peer
/// that is the network itself, and an ID out of range are left out, with why. Per other node
/// carrying a network: its forwarding and neighbour entries, and a route via its gateway for
/// each prefix it reported that lies inside the network's own and overlaps neither this
/// node's `local` prefixes (its own workloads win) nor one an earlier node took.
pub fn desired_with(
    nets: &[TenantNetwork],
    underlay: &Underlay,
    local: &BTreeMap<u32, BTreeSet<IpNet>>,
) -> Desired {
    let port = if underlay.port == 0 { VXLAN_PORT } else { underlay.port };
    let here: BTreeSet<u32> =
        nets.iter().map(|n| n.id).filter(|id| (1..=MAX_ID).contains(id)).collect();
    let mut d = Desired::default();
    for id in &here {
        d.devices.push(Device::Vrf { id: *id, table: table(*id) });
    }
    for id in &here {
        let mac = underlay.local.map(router_mac);
        d.devices.push(Device::Vxlan { id: *id, local: underlay.local, port, mac });
    }
    for n in nets.iter().filter(|n| here.contains(&n.id)) {
        let mut taken: Vec<IpNet> =
            local.get(&n.id).into_iter().flatten().map(IpNet::trunc).collect();
        for r in n.remotes.iter().filter(|r| Some(r.vtep) != underlay.local) {
            let mac = router_mac(r.vtep);
            let gw = gateway(mac);
            d.fdb.insert(Fdb { id: n.id, mac, dst: r.vtep });
            d.neighs.insert(Neigh { id: n.id, addr: gw, mac });
            for dst in r.prefixes.iter().take(MAX_REPORTED).map(IpNet::trunc) {
                if !n.prefixes.iter().any(|p| inside(p, &dst))
                    || taken.iter().any(|t| overlap(t, &dst))
                {
                    continue;
                }
                taken.push(dst);
                d.routes.insert(LeakRoute { id: n.id, dst, via: n.id, gw: Some(IpAddr::V6(gw)) });
            }
        }
        for p in &n.peers {
            let why = if p.id == n.id {
                Some("a network cannot peer with itself")
            } else if !here.contains(&p.id) {
                Some("the peer network is not on this node")
            } else {
                None
            };
            if let Some(why) = why {
                d.unrealisable.entry(n.id).or_default().push((p.id, why.to_owned()));
                continue;
            }
            for dst in &p.prefixes {
                d.routes.insert(LeakRoute { id: n.id, dst: dst.trunc(), via: p.id, gw: None });
            }
        }
    }
    d
}

/// One change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Remove a leaked route.
    DeleteRoute(LeakRoute),
    /// Remove a device (unwanted, or with settings that differ: it is created again).
    DeleteDevice(String),
    /// Create a device (a VXLAN device already enslaved to its VRF).
    CreateDevice(Device),
    /// Enslave a VXLAN device to its network's VRF.
    SetMaster {
        /// The VXLAN device.
        device: String,
        /// The VRF.
        vrf: String,
    },
    /// Bring a device up.
    SetUp(String),
    /// Add (or replace) a leaked route.
    AddRoute(LeakRoute),
    /// Remove a forwarding entry.
    DeleteFdb(Fdb),
    /// Add a static forwarding entry (appended: one device reaches many VTEPs).
    AddFdb(Fdb),
    /// Remove a neighbour entry.
    DeleteNeigh(Neigh),
    /// Add (or replace) a permanent neighbour entry.
    AddNeigh(Neigh),
    /// End a network's table in `unreachable default` (IPv4 and IPv6): without it a lookup
    /// that misses in the VRF's table goes on to the node's main table, and a tenant's
    /// packets would leave through the node's own routes.
    Isolate(u32),
}

/// The steps from `have` to `want`, in an order the kernel accepts: stale routes, stale
/// devices, new VRFs before the VXLAN devices they hold, masters, links up, new routes.
pub fn plan(want: &Desired, have: &Observed) -> Vec<Step> {
    let mut steps = Vec::new();
    let wanted: BTreeMap<String, &Device> = want.devices.iter().map(|d| (d.name(), d)).collect();
    let mut kept: BTreeSet<String> = BTreeSet::new();
    let mut deleted: BTreeSet<u32> = BTreeSet::new();
    for f in &have.devices {
        match (wanted.get(&f.name), &f.device) {
            (Some(w), Some(d)) if w.satisfied_by(d) => {
                kept.insert(f.name.clone());
            }
            _ => {
                if let Some(id) = f.name.strip_prefix(VRF_PREFIX).and_then(|_| id_of(&f.name)) {
                    deleted.insert(id);
                }
            }
        }
    }
    // Routes first, while the devices they name still exist (a VRF's table outlives the
    // device, so its routes are removed explicitly).
    for r in &have.routes {
        if !want.routes.contains(r) {
            steps.push(Step::DeleteRoute(r.clone()));
        }
    }
    for f in &have.fdb {
        if !want.fdb.contains(f) {
            steps.push(Step::DeleteFdb(f.clone()));
        }
    }
    for n in &have.neighs {
        if !want.neighs.contains(n) {
            steps.push(Step::DeleteNeigh(n.clone()));
        }
    }
    for f in &have.devices {
        if !kept.contains(&f.name) {
            steps.push(Step::DeleteDevice(f.name.clone()));
        }
    }
    for d in &want.devices {
        if !kept.contains(&d.name()) {
            steps.push(Step::CreateDevice(d.clone()));
        }
    }
    for d in &want.devices {
        let name = d.name();
        let observed = have.devices.iter().find(|f| f.name == name);
        let (up, master) = match observed {
            Some(f) if kept.contains(&name) => (f.up, f.master),
            _ => (false, None),
        };
        if let Device::Vxlan { id, .. } = d {
            // A new VXLAN device is created enslaved already.
            if master != Some(*id) && kept.contains(&name) {
                steps.push(Step::SetMaster { device: name.clone(), vrf: vrf_name(*id) });
            }
        }
        if !up {
            steps.push(Step::SetUp(name));
        }
    }
    // Before any route leads into the VRF: a new table is closed before it is used.
    for d in &want.devices {
        if let Device::Vrf { id, .. } = d {
            if !have.isolated.contains(id) || !kept.contains(&d.name()) {
                steps.push(Step::Isolate(*id));
            }
        }
    }
    // A re-created VXLAN device lost its entries with the old one. Entries before the routes
    // that use them.
    for f in &want.fdb {
        if !have.fdb.contains(f) || !kept.contains(&vxlan_name(f.id)) {
            steps.push(Step::AddFdb(f.clone()));
        }
    }
    for n in &want.neighs {
        if !have.neighs.contains(n) || !kept.contains(&vxlan_name(n.id)) {
            steps.push(Step::AddNeigh(n.clone()));
        }
    }
    for r in &want.routes {
        // A route leading into a re-created VRF went with the old device (added again, as
        // a replace: its table may still hold it).
        let vxlan_new = r.via == r.id && !kept.contains(&vxlan_name(r.id));
        if !have.routes.contains(r)
            || deleted.contains(&r.id)
            || deleted.contains(&r.via)
            || vxlan_new
        {
            steps.push(Step::AddRoute(r.clone()));
        }
    }
    steps
}

/// A network's peers after applying: those realised, and those not with why.
pub type PeerOutcome = (Vec<u32>, Vec<(u32, String)>);

/// Per network, each peer's outcome after applying: realised when every route to it is in
/// place, else why not.
pub fn peer_outcomes(
    nets: &[TenantNetwork],
    want: &Desired,
    failed: &BTreeMap<LeakRoute, String>,
) -> BTreeMap<u32, PeerOutcome> {
    let mut out = BTreeMap::new();
    for n in nets {
        let mut ok = Vec::new();
        let mut bad: Vec<(u32, String)> = want.unrealisable.get(&n.id).cloned().unwrap_or_default();
        for p in &n.peers {
            if bad.iter().any(|(id, _)| *id == p.id) {
                continue;
            }
            let err = failed.iter().find(|(r, _)| r.id == n.id && r.via == p.id);
            match err {
                Some((r, e)) => bad.push((p.id, format!("route {}: {e}", r.dst))),
                None => ok.push(p.id),
            }
        }
        out.insert(n.id, (ok, bad));
    }
    out
}
