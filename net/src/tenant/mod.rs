// SPDX-License-Identifier: Apache-2.0
//! Tenant networks on a node (docs/tenant-networks.md), with the kernel's own devices: each
//! network is a VRF (`tvrf<id>`, its own routing table) with a VXLAN device (`tvx<id>`,
//! VNI = the network's ID) enslaved to it. A peering is route leaking between VRFs: for each
//! prefix peer B exposes to network A, A's table gets a route to that prefix whose device is
//! B's VRF, so the lookup continues in B's table (what metalnet does by copying routes between
//! dpservice VNI tables).
//!
//! Across nodes, each VXLAN device floods to the VTEP of every other node carrying its network
//! (an all-zeros forwarding entry per remote VTEP, `bridge fdb append 00:00:00:00:00:00 dst
//! VTEP`, and learning for the rest), the network's own prefixes are routed through it in its
//! table (a node's own workloads are more specific, on their own interfaces in the VRF), and
//! it answers ARP for the addresses its node routes elsewhere (proxy ARP), so a node resolves
//! a remote workload's address to the remote node's VXLAN device.
//!
//! [`desired`] and [`plan`] are pure: what the node should have, and the steps from what it
//! has. [`kernel`] observes and applies them over rtnetlink.

pub mod kernel;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

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

/// One network as the node layer describes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TenantNetwork {
    /// The network's ID (its VNI), 1 to 2^24 - 1.
    pub id: u32,
    /// Peers: their IDs and the prefixes of theirs this network may reach.
    pub peers: Vec<Peer>,
    /// The network's own prefixes (routed through its VXLAN device when other nodes carry it).
    pub prefixes: Vec<IpNet>,
    /// The VTEP addresses of the other nodes carrying this network.
    pub remotes: Vec<IpAddr>,
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
    },
}

impl Device {
    /// The network it belongs to.
    pub fn id(&self) -> u32 {
        match self {
            Self::Vrf { id, .. } | Self::Vxlan { id, .. } => *id,
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
/// `via == id` through the network's own VXLAN device (to the network's other nodes).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LeakRoute {
    /// The network whose table holds the route.
    pub id: u32,
    /// Destination.
    pub dst: IpNet,
    /// The peer whose VRF the route leads into (`id` itself: the network's VXLAN device).
    pub via: u32,
}

/// A forwarding entry on a network's VXLAN device: flood to a remote VTEP.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Flood {
    /// The network (its VXLAN device).
    pub id: u32,
    /// The other node's VTEP.
    pub dst: IpAddr,
}

/// What the node should have.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Desired {
    /// VRFs first, then VXLAN devices.
    pub devices: Vec<Device>,
    /// Leaked routes and routes to the network's other nodes, sorted.
    pub routes: BTreeSet<LeakRoute>,
    /// Flooding entries towards other nodes' VTEPs.
    pub floods: BTreeSet<Flood>,
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
    /// Administratively up (a VXLAN device: and forwarding, answering ARP for what its node
    /// routes elsewhere; both are set with it).
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
    /// Flooding entries found on this module's VXLAN devices.
    pub floods: BTreeSet<Flood>,
    /// Networks whose table ends in an `unreachable default` for IPv4 and for IPv6.
    pub isolated: BTreeSet<u32>,
}

/// The node's target: a VRF and a VXLAN device per network, and per peer its prefixes leaked
/// into the network's table. A peer that is not on this node (no VRF to lead into), a peer
/// that is the network itself, and an ID out of range are left out, with why.
pub fn desired(nets: &[TenantNetwork], underlay: &Underlay) -> Desired {
    let port = if underlay.port == 0 { VXLAN_PORT } else { underlay.port };
    let here: BTreeSet<u32> =
        nets.iter().map(|n| n.id).filter(|id| (1..=MAX_ID).contains(id)).collect();
    let mut d = Desired::default();
    for id in &here {
        d.devices.push(Device::Vrf { id: *id, table: table(*id) });
    }
    for id in &here {
        d.devices.push(Device::Vxlan { id: *id, local: underlay.local, port });
    }
    for n in nets.iter().filter(|n| here.contains(&n.id)) {
        // Other nodes are reached only where some are known: a lone node routes nothing away.
        for dst in &n.remotes {
            d.floods.insert(Flood { id: n.id, dst: *dst });
        }
        if !n.remotes.is_empty() {
            for dst in &n.prefixes {
                d.routes.insert(LeakRoute { id: n.id, dst: dst.trunc(), via: n.id });
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
                d.routes.insert(LeakRoute { id: n.id, dst: dst.trunc(), via: p.id });
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
    /// Remove a flooding entry.
    DeleteFlood(Flood),
    /// Add a flooding entry (appended: one device floods to many VTEPs).
    AddFlood(Flood),
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
            (Some(w), Some(d)) if *w == d => {
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
    for f in &have.floods {
        if !want.floods.contains(f) {
            steps.push(Step::DeleteFlood(f.clone()));
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
    // A re-created VXLAN device lost its entries with the old one.
    for f in &want.floods {
        if !have.floods.contains(f) || deleted.contains(&f.id) || !kept.contains(&vxlan_name(f.id))
        {
            steps.push(Step::AddFlood(f.clone()));
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
