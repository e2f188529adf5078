// SPDX-License-Identifier: Apache-2.0
//! The kernel side of tenant networks: read this module's VRF and VXLAN devices and leaked
//! routes over rtnetlink ([`observe`]), and carry out a [`plan`](super::plan) ([`apply`]).

use std::collections::BTreeMap;
use std::net::IpAddr;

use netlink_packet_core::{NLM_F_APPEND, NLM_F_CREATE, NLM_F_EXCL};
use netlink_packet_route::link::{
    AfSpecInet, AfSpecUnspec, InetDevConf, InfoData, InfoKind, InfoVrf, InfoVxlan, LinkAttribute,
    LinkExtentMask, LinkFlags, LinkInfo, LinkMessage,
};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourFlags, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};

use super::{id_of, table, vrf_name, vxlan_name, Device, Flood, Found, LeakRoute, Observed, Step};
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
    for a in &m.attributes {
        match a {
            LinkAttribute::IfName(n) => name = Some(n.clone()),
            LinkAttribute::AfSpecUnspec(specs) => {
                for sp in specs {
                    if let AfSpecUnspec::Inet(inet) = sp {
                        for i in inet {
                            if let AfSpecInet::DevConf(c) = i {
                                routes_for_others = c.proxy_arp != 0 && c.forwarding != 0;
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
            for a in attrs {
                match a {
                    InfoVxlan::Id(v) => vni = Some(*v),
                    InfoVxlan::Local(a) => local = Some(IpAddr::V4(*a)),
                    InfoVxlan::Local6(a) => local = Some(IpAddr::V6(*a)),
                    InfoVxlan::Port(p) => port = *p,
                    _ => {}
                }
            }
            // Under our name with another VNI: not ours to keep.
            (vni == Some(id)).then_some(Device::Vxlan { id, local, port })
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
        for family in [Family::Inet4, Family::Inet6] {
            for r in sock.dump_routes_in(family, RoutingTable(table(id)))? {
                if r.kind == RouteType::UNREACHABLE && r.dst.is_none_or(|d| d.prefix_len() == 0) {
                    closed += 1;
                    continue;
                }
                // Only the routes this module writes (static unicast): the kernel's own on
                // these devices (IPv6 link-local, multicast, local) are not ours to remove.
                if r.protocol != RouteProtocol::STATIC || r.kind != RouteType::UNICAST {
                    continue;
                }
                let oif = r.oif.and_then(|i| names.get(&i));
                let via = oif.and_then(|n| tenant_id(n, super::VRF_PREFIX)).or_else(|| {
                    // Through the network's own VXLAN device: to its other nodes.
                    oif.and_then(|n| tenant_id(n, super::VXLAN_PREFIX)).filter(|v| *v == id)
                });
                if let (Some(via), Some(dst)) = (via, r.dst) {
                    o.routes.insert(LeakRoute { id, dst, via });
                }
            }
        }
        if closed >= 2 {
            o.isolated.insert(id);
        }
    }
    // Flooding entries: all-zeros MAC with a remote, on this module's VXLAN devices.
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
            let mut zero = false;
            let mut dst = None;
            for a in &n.attributes {
                match a {
                    NeighbourAttribute::LinkLayerAddress(l) => zero = l.iter().all(|b| *b == 0),
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
            if let (true, Some(dst)) = (zero, dst) {
                o.floods.insert(Flood { id: *id, dst });
            }
        }
    }
    Ok(o)
}

fn flood(sock: &mut RouteSocket, f: &Flood, add: bool) -> Result<(), NlError> {
    let mut n = NeighbourMessage::default();
    n.header.family = AddressFamily::Bridge;
    n.header.ifindex = index_of(sock, &vxlan_name(f.id))?;
    n.header.state = NeighbourState::Permanent;
    n.header.flags = NeighbourFlags::Own;
    n.attributes.push(NeighbourAttribute::LinkLayerAddress(vec![0; 6]));
    n.attributes.push(NeighbourAttribute::Destination(match f.dst {
        IpAddr::V4(a) => NeighbourAddress::Inet(a),
        IpAddr::V6(a) => NeighbourAddress::Inet6(a),
    }));
    let target = format!("{} dst {}", vxlan_name(f.id), f.dst);
    if add {
        sock.request(
            "fdb_append",
            &target,
            RouteNetlinkMessage::NewNeighbour(n),
            NLM_F_CREATE | NLM_F_APPEND,
        )
        .map(drop)
    } else {
        sock.request("fdb_delete", &target, RouteNetlinkMessage::DelNeighbour(n), 0).map(drop)
    }
}

/// A VXLAN device forwards, and answers ARP for the addresses its node routes through other
/// devices: a remote node resolves this node's workloads to it.
fn route_for_others(sock: &mut RouteSocket, index: u32) -> Result<(), NlError> {
    let mut msg = LinkMessage::default();
    msg.header.index = index;
    let mut conf = InetDevConf::default();
    conf.forwarding = 1;
    conf.proxy_arp = 1;
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
        Device::Vxlan { id, local, port } => {
            msg.attributes.push(LinkAttribute::Controller(index_of(sock, &vrf_name(*id))?));
            let mut attrs =
                vec![InfoVxlan::Id(*id), InfoVxlan::Port(*port), InfoVxlan::Learning(true)];
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
/// and per network its first error, if any (a network whose devices, flooding entries or route
/// to its other nodes failed is not realised).
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
            Step::AddFlood(f) => flood(sock, f, true),
            Step::DeleteFlood(f) => flood(sock, f, false),
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
                Step::AddFlood(f) => {
                    devices.entry(f.id).or_insert_with(|| e.to_string());
                }
                // An open table is a network not in place: its traffic could leave the VRF.
                Step::Isolate(id) => {
                    devices.entry(*id).or_insert_with(|| e.to_string());
                }
                Step::DeleteRoute(_) | Step::DeleteDevice(_) | Step::DeleteFlood(_) => {}
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
    let want = super::desired(nets, underlay);
    let have = observe(sock)?;
    let steps = super::plan(&want, &have);
    let (routes, devices) = apply(sock, &steps);
    let peers = super::peer_outcomes(nets, &want, &routes);
    Ok(nets
        .iter()
        .map(|n| {
            let out = match (devices.get(&n.id), peers.get(&n.id)) {
                (Some(e), _) => Outcome::Failed(e.clone()),
                (None, Some((ok, bad))) => {
                    Outcome::Realised { peers: ok.clone(), failed: bad.clone() }
                }
                (None, None) => Outcome::Realised { peers: vec![], failed: vec![] },
            };
            (n.id, out)
        })
        .collect())
}
