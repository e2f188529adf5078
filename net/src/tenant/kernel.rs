// SPDX-License-Identifier: Apache-2.0
//! The kernel side of tenant networks: read this module's VRF and VXLAN devices and leaked
//! routes over rtnetlink ([`observe`]), and carry out a [`plan`](super::plan) ([`apply`]).

use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnet::IpNet;
use netlink_packet_core::{NLM_F_APPEND, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REPLACE};
use netlink_packet_route::link::{
    AfSpecInet, AfSpecUnspec, InetDevConf, InfoData, InfoKind, InfoVrf, InfoVxlan, LinkAttribute,
    LinkExtentMask, LinkFlags, LinkInfo, LinkMessage,
};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourFlags, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};

use super::{
    id_of, table, vrf_name, vxlan_name, Device, Fdb, Found, LeakRoute, Neigh, Observed, Step,
};
use crate::netlink::{KernelRoute, NlError, RouteSocket};
use crate::resource::nethelpers::{Family, RouteProtocol, RouteType, RoutingTable};

fn tenant_id(name: &str, prefix: &str) -> Option<u32> {
    name.strip_prefix(prefix).and_then(|_| id_of(name))
}

/// One of this module's devices as a link dump shows it.
fn decode(m: &LinkMessage, names: &BTreeMap<u32, String>) -> Option<Found> {
    let mut name = None;
    let mut kind = None;
    let mut data = None;
    let mut master = None;
    let mut routes_for_others = false;
    let mut mac = None;
    for a in &m.attributes {
        match a {
            LinkAttribute::IfName(n) => name = Some(n.clone()),
            LinkAttribute::Address(a) => mac = <[u8; 6]>::try_from(a.as_slice()).ok(),
            LinkAttribute::AfSpecUnspec(specs) => {
                for sp in specs {
                    if let AfSpecUnspec::Inet(inet) = sp {
                        for i in inet {
                            if let AfSpecInet::DevConf(c) = i {
                                routes_for_others = c.forwarding != 0;
                            }
                        }
                    }
                }
            }
            LinkAttribute::Controller(i) => master = Some(*i),
            LinkAttribute::LinkInfo(infos) => {
                for i in infos {
                    match i {
                        LinkInfo::Kind(k) => kind = Some(k),
                        LinkInfo::Data(d) => data = Some(d),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    let name = name?;
    let id = id_of(&name)?;
    let mut up = m.header.flags.contains(LinkFlags::Up);
    if tenant_id(&name, super::VXLAN_PREFIX).is_some() {
        up &= routes_for_others;
    }
    let master = master.and_then(|i| names.get(&i)).and_then(|n| tenant_id(n, super::VRF_PREFIX));
    let device = match (kind, data) {
        (Some(InfoKind::Vrf), Some(InfoData::Vrf(attrs)))
            if tenant_id(&name, super::VRF_PREFIX).is_some() =>
        {
            attrs.iter().find_map(|a| match a {
                InfoVrf::TableId(t) => Some(Device::Vrf { id, table: *t }),
                _ => None,
            })
        }
        (Some(InfoKind::Vxlan), Some(InfoData::Vxlan(attrs)))
            if tenant_id(&name, super::VXLAN_PREFIX).is_some() =>
        {
            let mut vni = None;
            let mut local = None;
            let mut port = 0;
            let mut learning = true;
            for a in attrs {
                match a {
                    InfoVxlan::Learning(l) => learning = *l,
                    InfoVxlan::Id(v) => vni = Some(*v),
                    InfoVxlan::Local(a) => local = Some(IpAddr::V4(*a)),
                    InfoVxlan::Local6(a) => local = Some(IpAddr::V6(*a)),
                    InfoVxlan::Port(p) => port = *p,
                    _ => {}
                }
            }
            // Under our name with another VNI, or learning what the overlay claims: not ours
            // to keep.
            (vni == Some(id) && !learning).then_some(Device::Vxlan { id, local, port, mac })
        }
        _ => None,
    };
    Some(Found { name, device, up, master })
}

/// This module's devices and leaked routes.
pub fn observe(sock: &mut RouteSocket) -> Result<Observed, NlError> {
    let mut req = LinkMessage::default();
    req.attributes.push(LinkAttribute::ExtMask(vec![LinkExtentMask::SkipStats]));
    let replies = sock.dump("dump_links", RouteNetlinkMessage::GetLink(req))?;
    let msgs: Vec<LinkMessage> = replies
        .into_iter()
        .filter_map(|m| match m {
            RouteNetlinkMessage::NewLink(l) => Some(l),
            _ => None,
        })
        .collect();
    let names: BTreeMap<u32, String> = msgs
        .iter()
        .filter_map(|m| {
            m.attributes.iter().find_map(|a| match a {
                LinkAttribute::IfName(n) => Some((m.header.index, n.clone())),
                _ => None,
            })
        })
        .collect();
    let mut o = Observed::default();
    for m in &msgs {
        if let Some(d) = decode(m, &names) {
            o.devices.push(d);
        }
    }
    // Leaked routes: in a tenant table, through a tenant VRF device.
    let vrfs: Vec<u32> = o
        .devices
        .iter()
        .filter_map(|f| match f.device {
            Some(Device::Vrf { id, table: t }) if t == table(id) => Some(id),
            _ => None,
        })
        .collect();
    for id in vrfs {
        let mut closed = 0;
        let mut local = std::collections::BTreeSet::new();
        for family in [Family::Inet4, Family::Inet6] {
            for r in sock.dump_routes_in(family, RoutingTable(table(id)))? {
                if r.kind == RouteType::UNREACHABLE && r.dst.is_none_or(|d| d.prefix_len() == 0) {
                    closed += 1;
                    continue;
                }
                let oif = r.oif.and_then(|i| names.get(&i));
                // The connected prefixes of the other devices in the VRF: this node's
                // workloads.
                if r.protocol == RouteProtocol::KERNEL
                    && r.kind == RouteType::UNICAST
                    && oif.is_some_and(|n| id_of(n).is_none())
                {
                    if let Some(dst) = r.dst.filter(|d| !link_local(d)) {
                        local.insert(dst);
                    }
                    continue;
                }
                // Only the routes this module writes (static unicast): the kernel's own on
                // these devices (IPv6 link-local, multicast, local) are not ours to remove.
                if r.protocol != RouteProtocol::STATIC || r.kind != RouteType::UNICAST {
                    continue;
                }
                let via = oif.and_then(|n| tenant_id(n, super::VRF_PREFIX)).or_else(|| {
                    // Through the network's own VXLAN device: to its other nodes.
                    oif.and_then(|n| tenant_id(n, super::VXLAN_PREFIX)).filter(|v| *v == id)
                });
                if let (Some(via), Some(dst)) = (via, r.dst) {
                    let gw = r.gateway.filter(|_| via == id);
                    o.routes.insert(LeakRoute { id, dst, via, gw });
                }
            }
        }
        if closed >= 2 {
            o.isolated.insert(id);
        }
        if !local.is_empty() {
            o.local.insert(id, local);
        }
    }
    // Forwarding entries with a remote (flooding ones too: all-zeros MAC), and permanent IPv6
    // neighbours, on this module's VXLAN devices.
    let vxlans: BTreeMap<u32, u32> = msgs
        .iter()
        .filter_map(|m| {
            let n = names.get(&m.header.index)?;
            Some((m.header.index, tenant_id(n, super::VXLAN_PREFIX)?))
        })
        .collect();
    if !vxlans.is_empty() {
        let mut req = NeighbourMessage::default();
        req.header.family = AddressFamily::Bridge;
        for m in sock.dump("dump_fdb", RouteNetlinkMessage::GetNeighbour(req))? {
            let RouteNetlinkMessage::NewNeighbour(n) = m else { continue };
            let Some(id) = vxlans.get(&n.header.ifindex) else { continue };
            let mut mac = None;
            let mut dst = None;
            for a in &n.attributes {
                match a {
                    NeighbourAttribute::LinkLayerAddress(l) => {
                        mac = <[u8; 6]>::try_from(l.as_slice()).ok()
                    }
                    NeighbourAttribute::Destination(NeighbourAddress::Inet(a)) => {
                        dst = Some(IpAddr::V4(*a))
                    }
                    NeighbourAttribute::Destination(NeighbourAddress::Inet6(a)) => {
                        dst = Some(IpAddr::V6(*a))
                    }
                    // In an AF_BRIDGE message the address's family is told by its length.
                    NeighbourAttribute::Destination(NeighbourAddress::Other(b)) => {
                        dst = <[u8; 4]>::try_from(b.as_slice())
                            .map(IpAddr::from)
                            .or_else(|_| <[u8; 16]>::try_from(b.as_slice()).map(IpAddr::from))
                            .ok();
                    }
                    _ => {}
                }
            }
            if let (Some(mac), Some(dst)) = (mac, dst) {
                o.fdb.insert(Fdb { id: *id, mac, dst });
            }
        }
        let mut req = NeighbourMessage::default();
        req.header.family = AddressFamily::Inet6;
        for m in sock.dump("dump_neigh", RouteNetlinkMessage::GetNeighbour(req))? {
            let RouteNetlinkMessage::NewNeighbour(n) = m else { continue };
            let Some(id) = vxlans.get(&n.header.ifindex) else { continue };
            if n.header.state != NeighbourState::Permanent {
                continue;
            }
            let mut mac = None;
            let mut addr = None;
            for a in &n.attributes {
                match a {
                    NeighbourAttribute::LinkLayerAddress(l) => {
                        mac = <[u8; 6]>::try_from(l.as_slice()).ok()
                    }
                    NeighbourAttribute::Destination(NeighbourAddress::Inet6(a)) => addr = Some(*a),
                    _ => {}
                }
            }
            if let (Some(mac), Some(addr)) = (mac, addr) {
                o.neighs.insert(Neigh { id: *id, addr, mac });
            }
        }
    }
    Ok(o)
}

fn link_local(p: &IpNet) -> bool {
    match p {
        IpNet::V6(p) => p.addr().segments()[0] & 0xffc0 == 0xfe80,
        IpNet::V4(p) => p.addr().octets()[..2] == [169, 254],
    }
}

fn mac_str(m: &[u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// `bridge fdb replace MAC dev tvx<id> dst VTEP self static` (or its delete).
fn fdb(sock: &mut RouteSocket, f: &Fdb, add: bool) -> Result<(), NlError> {
    let mut n = NeighbourMessage::default();
    n.header.family = AddressFamily::Bridge;
    n.header.ifindex = index_of(sock, &vxlan_name(f.id))?;
    n.header.state = NeighbourState::Permanent;
    n.header.flags = NeighbourFlags::Own;
    n.attributes.push(NeighbourAttribute::LinkLayerAddress(f.mac.to_vec()));
    n.attributes.push(NeighbourAttribute::Destination(match f.dst {
        IpAddr::V4(a) => NeighbourAddress::Inet(a),
        IpAddr::V6(a) => NeighbourAddress::Inet6(a),
    }));
    let target = format!("{} {} dst {}", vxlan_name(f.id), mac_str(&f.mac), f.dst);
    if add {
        // One MAC, one VTEP: a replace moves an entry whose node changed address. A flooding
        // entry is never added (only removed), but would need an append.
        let how = if f.mac == [0; 6] { NLM_F_APPEND } else { NLM_F_REPLACE };
        sock.request("fdb_add", &target, RouteNetlinkMessage::NewNeighbour(n), NLM_F_CREATE | how)
            .map(drop)
    } else {
        sock.request("fdb_delete", &target, RouteNetlinkMessage::DelNeighbour(n), 0).map(drop)
    }
}

/// `ip -6 neigh replace ADDR lladdr MAC dev tvx<id> nud permanent` (or its delete).
fn neigh(sock: &mut RouteSocket, e: &Neigh, add: bool) -> Result<(), NlError> {
    let mut n = NeighbourMessage::default();
    n.header.family = AddressFamily::Inet6;
    n.header.ifindex = index_of(sock, &vxlan_name(e.id))?;
    n.header.state = NeighbourState::Permanent;
    n.attributes.push(NeighbourAttribute::Destination(NeighbourAddress::Inet6(e.addr)));
    n.attributes.push(NeighbourAttribute::LinkLayerAddress(e.mac.to_vec()));
    let target = format!("{} {} lladdr {}", vxlan_name(e.id), e.addr, mac_str(&e.mac));
    if add {
        sock.request(
            "neigh_replace",
            &target,
            RouteNetlinkMessage::NewNeighbour(n),
            NLM_F_CREATE | NLM_F_REPLACE,
        )
        .map(drop)
    } else {
        sock.request("neigh_delete", &target, RouteNetlinkMessage::DelNeighbour(n), 0).map(drop)
    }
}

/// A VXLAN device forwards what arrives for this node's workloads. It answers no ARP for
/// others: the other nodes' neighbour entries for it are static.
fn route_for_others(sock: &mut RouteSocket, index: u32) -> Result<(), NlError> {
    let mut msg = LinkMessage::default();
    msg.header.index = index;
    let mut conf = InetDevConf::default();
    conf.forwarding = 1;
    msg.attributes.push(LinkAttribute::AfSpecUnspec(vec![AfSpecUnspec::Inet(vec![
        AfSpecInet::DevConfRequest(conf),
    ])]));
    sock.request("link_set_inet_conf", &index.to_string(), RouteNetlinkMessage::SetLink(msg), 0)
        .map(drop)
}

fn index_of(sock: &mut RouteSocket, name: &str) -> Result<u32, NlError> {
    match sock.get_link_by_name(name)? {
        Some(l) => Ok(l.index),
        None => Err(NlError::Kernel {
            op: "get_link",
            target: name.to_owned(),
            errno: nix::errno::Errno::ENODEV,
            message: None,
        }),
    }
}

fn create(sock: &mut RouteSocket, d: &Device) -> Result<(), NlError> {
    let mut msg = LinkMessage::default();
    msg.attributes.push(LinkAttribute::IfName(d.name()));
    let info = match d {
        Device::Vrf { table, .. } => vec![
            LinkInfo::Kind(InfoKind::Vrf),
            LinkInfo::Data(InfoData::Vrf(vec![InfoVrf::TableId(*table)])),
        ],
        Device::Vxlan { id, local, port, mac } => {
            msg.attributes.push(LinkAttribute::Controller(index_of(sock, &vrf_name(*id))?));
            if let Some(mac) = mac {
                msg.attributes.push(LinkAttribute::Address(mac.to_vec()));
            }
            // Nothing learnt: every entry is written from what the nodes reported, and a
            // packet from the overlay cannot move one.
            let mut attrs =
                vec![InfoVxlan::Id(*id), InfoVxlan::Port(*port), InfoVxlan::Learning(false)];
            match local {
                Some(IpAddr::V4(a)) => attrs.push(InfoVxlan::Local(*a)),
                Some(IpAddr::V6(a)) => attrs.push(InfoVxlan::Local6(*a)),
                None => {}
            }
            vec![LinkInfo::Kind(InfoKind::Vxlan), LinkInfo::Data(InfoData::Vxlan(attrs))]
        }
    };
    msg.attributes.push(LinkAttribute::LinkInfo(info));
    sock.request(
        "link_create",
        &d.name(),
        RouteNetlinkMessage::NewLink(msg),
        NLM_F_CREATE | NLM_F_EXCL,
    )
    .map(drop)
}

fn route(sock: &mut RouteSocket, r: &LeakRoute) -> Result<KernelRoute, NlError> {
    let family = match r.dst {
        ipnet::IpNet::V4(_) => Family::Inet4,
        ipnet::IpNet::V6(_) => Family::Inet6,
    };
    let mut k = KernelRoute::new(family, Some(r.dst));
    k.table = RoutingTable(table(r.id));
    let dev = if r.via == r.id { vxlan_name(r.id) } else { vrf_name(r.via) };
    k.oif = Some(index_of(sock, &dev)?);
    // An IPv6 link-local next hop, for IPv4 routes too (`RTA_VIA`, RFC 8950).
    k.gateway = r.gw;
    Ok(k)
}

/// `unreachable default` in a network's table, for IPv4 and IPv6 (replaced: idempotent).
fn isolate(sock: &mut RouteSocket, id: u32) -> Result<(), NlError> {
    for (family, dst) in [(Family::Inet4, "0.0.0.0/0"), (Family::Inet6, "::/0")] {
        let mut k = KernelRoute::new(family, dst.parse().ok());
        k.table = RoutingTable(table(id));
        k.kind = RouteType::UNREACHABLE;
        k.priority = super::ISOLATION_METRIC;
        sock.route_replace(&k)?;
    }
    Ok(())
}

/// Carry out `steps`; every step is tried. Returns the leaked routes that failed (with why)
/// and per network its first error, if any (a network whose devices, entries or routes to its
/// other nodes failed is not realised).
pub fn apply(
    sock: &mut RouteSocket,
    steps: &[Step],
) -> (BTreeMap<LeakRoute, String>, BTreeMap<u32, String>) {
    let mut routes = BTreeMap::new();
    let mut devices: BTreeMap<u32, String> = BTreeMap::new();
    for s in steps {
        let r = match s {
            Step::DeleteRoute(r) => route(sock, r).and_then(|k| sock.route_delete(&k)),
            Step::DeleteDevice(n) => index_of(sock, n).and_then(|i| sock.link_delete(i)),
            Step::CreateDevice(d) => create(sock, d),
            Step::SetMaster { device, vrf } => index_of(sock, device)
                .and_then(|i| Ok((i, index_of(sock, vrf)?)))
                .and_then(|(i, m)| sock.link_set_master(i, Some(m))),
            Step::SetUp(n) => index_of(sock, n).and_then(|i| {
                if super::id_of(n).is_some() && n.starts_with(super::VXLAN_PREFIX) {
                    route_for_others(sock, i)?;
                }
                sock.link_set_up(i, true)
            }),
            Step::AddRoute(r) => route(sock, r).and_then(|k| sock.route_replace(&k)),
            Step::AddFdb(f) => fdb(sock, f, true),
            Step::DeleteFdb(f) => fdb(sock, f, false),
            Step::AddNeigh(n) => neigh(sock, n, true),
            Step::DeleteNeigh(n) => neigh(sock, n, false),
            Step::Isolate(id) => isolate(sock, *id),
        };
        if let Err(e) = r {
            log::warn!("tenant networks: {s:?}: {e}");
            match s {
                // The route to the network's other nodes: the network itself is not in place.
                Step::AddRoute(r) if r.via == r.id => {
                    devices.entry(r.id).or_insert_with(|| format!("route {}: {e}", r.dst));
                }
                Step::AddRoute(r) => {
                    routes.insert(r.clone(), e.to_string());
                }
                Step::CreateDevice(d) => {
                    devices.entry(d.id()).or_insert_with(|| e.to_string());
                }
                Step::SetMaster { device: n, .. } | Step::SetUp(n) => {
                    if let Some(id) = id_of(n) {
                        devices.entry(id).or_insert_with(|| e.to_string());
                    }
                }
                Step::AddFdb(Fdb { id, .. }) | Step::AddNeigh(Neigh { id, .. }) => {
                    devices.entry(*id).or_insert_with(|| e.to_string());
                }
                // An open table is a network not in place: its traffic could leave the VRF.
                Step::Isolate(id) => {
                    devices.entry(*id).or_insert_with(|| e.to_string());
                }
                Step::DeleteRoute(_)
                | Step::DeleteDevice(_)
                | Step::DeleteFdb(_)
                | Step::DeleteNeigh(_) => {}
            }
        }
    }
    (routes, devices)
}

/// What became of one network on this node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// In place, with these peers; the others failed (with why).
    Realised {
        /// This node's workload prefixes in the network (to report).
        prefixes: Vec<IpNet>,
        /// Peers whose routes are all in place.
        peers: Vec<u32>,
        /// Peers that are not, and why.
        failed: Vec<(u32, String)>,
    },
    /// Its devices could not be made.
    Failed(String),
}

/// Bring the node to exactly `nets` (tenant devices of other networks are removed) and say
/// what became of each.
pub fn sync(
    sock: &mut RouteSocket,
    nets: &[super::TenantNetwork],
    underlay: &super::Underlay,
) -> Result<BTreeMap<u32, Outcome>, NlError> {
    let have = observe(sock)?;
    let want = super::desired_with(nets, underlay, &have.local);
    let mut reported = super::reported(nets, &have);
    let steps = super::plan(&want, &have);
    let (routes, devices) = apply(sock, &steps);
    let peers = super::peer_outcomes(nets, &want, &routes);
    Ok(nets
        .iter()
        .map(|n| {
            let out = match (devices.get(&n.id), peers.get(&n.id)) {
                (Some(e), _) => Outcome::Failed(e.clone()),
                (None, Some((ok, bad))) => Outcome::Realised {
                    prefixes: reported.remove(&n.id).unwrap_or_default(),
                    peers: ok.clone(),
                    failed: bad.clone(),
                },
                (None, None) => Outcome::Realised {
                    prefixes: reported.remove(&n.id).unwrap_or_default(),
                    peers: vec![],
                    failed: vec![],
                },
            };
            (n.id, out)
        })
        .collect())
}
