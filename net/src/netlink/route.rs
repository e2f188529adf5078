// SPDX-License-Identifier: Apache-2.0
//! [`KernelRoute`]: routes in every table, their dump, add, replace and delete.

use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;
use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL, NLM_F_REPLACE};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags as NlRouteFlags, RouteMessage, RouteMetric,
    RouteProtocol as NlRouteProtocol, RouteScope, RouteType as NlRouteType, RouteVia,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};

use super::error::NlError;
use super::pipeline::BatchRequest;
use super::socket::RouteSocket;
use crate::resource::nethelpers::{
    Family, RouteFlags, RouteProtocol, RouteType, RoutingTable, Scope,
};

/// A route as the kernel reports it, and as [`RouteSocket::route_add`] takes it.
///
/// Multipath routes (`RTA_MULTIPATH`) are not decoded: they come back with no gateway and no
/// `oif`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelRoute {
    /// Address family.
    pub family: Family,
    /// Destination; `None` is the default route (prefix length 0).
    pub dst: Option<IpNet>,
    /// Preferred source address (`RTA_PREFSRC`).
    pub src: Option<IpAddr>,
    /// Next hop: `RTA_GATEWAY`, or `RTA_VIA` when its family differs from the route's
    /// (an IPv4 route via an IPv6 gateway, RFC 8950).
    pub gateway: Option<IpAddr>,
    /// Output interface index (`RTA_OIF`).
    pub oif: Option<u32>,
    /// Table: `RTA_TABLE` when present (tables above 255 exist only there), else the header.
    pub table: RoutingTable,
    /// Metric (`RTA_PRIORITY`). IPv6 stores 0 as 1024 (`IP6_RT_PRIO_USER`).
    pub priority: u32,
    /// Scope (IPv6 routes always report `global`).
    pub scope: Scope,
    /// Route type.
    pub kind: RouteType,
    /// Who installed it.
    pub protocol: RouteProtocol,
    /// `rtm_flags`. On add only `onlink` is sent: the kernel rejects `dead`/`linkdown` (EINVAL)
    /// and owns the others.
    pub flags: RouteFlags,
    /// Path MTU (`RTAX_MTU` in `RTA_METRICS`); 0 when unset.
    pub mtu: u32,
}

impl KernelRoute {
    /// A unicast route in the main table with global scope and protocol `static`.
    pub fn new(family: Family, dst: Option<IpNet>) -> Self {
        Self {
            family,
            dst,
            src: None,
            gateway: None,
            oif: None,
            table: RoutingTable::MAIN,
            priority: 0,
            scope: Scope::GLOBAL,
            kind: RouteType::UNICAST,
            protocol: RouteProtocol::STATIC,
            flags: RouteFlags::default(),
            mtu: 0,
        }
    }

    /// True when the gateway is declared on-link (`RTNH_F_ONLINK`): the kernel does not check
    /// that it is reachable through a connected route.
    pub fn onlink(&self) -> bool {
        self.flags.contains(RouteFlags::ONLINK)
    }

    fn target(&self) -> String {
        self.to_string()
    }
}

/// A route as errors name it (`10.1.0.0/16 via 10.0.0.1 dev #2 table main metric 1024`).
impl fmt::Display for KernelRoute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self;
        match &r.dst {
            Some(d) => write!(f, "{d}")?,
            None => f.write_str("default")?,
        }
        if let Some(gw) = &r.gateway {
            write!(f, " via {gw}")?;
        }
        if let Some(oif) = r.oif {
            write!(f, " dev #{oif}")?;
        }
        write!(f, " table {} metric {}", r.table, r.priority)
    }
}

pub(super) fn af(family: Family) -> AddressFamily {
    AddressFamily::from(family.af())
}

#[cfg(test)]
fn route_ip(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(v4) => Some(IpAddr::V4(*v4)),
        RouteAddress::Inet6(v6) => Some(IpAddr::V6(*v6)),
        _ => None,
    }
}

/// Encodes `r`; `with_metrics` is false for deletes, where the kernel has no use for them.
pub(super) fn encode(r: &KernelRoute, with_metrics: bool) -> RouteMessage {
    let mut msg = RouteMessage::default();
    let h = &mut msg.header;
    h.address_family = af(r.family);
    h.destination_prefix_length = r.dst.map_or(0, |d| d.prefix_len());
    // rtm_table is 8 bits: larger tables go only in RTA_TABLE with RT_TABLE_UNSPEC here.
    h.table = u8::try_from(r.table.0).unwrap_or(0);
    h.protocol = NlRouteProtocol::from(r.protocol.0);
    h.scope = RouteScope::from(r.scope.0);
    h.kind = NlRouteType::from(r.kind.0);
    h.flags = NlRouteFlags::from_bits_retain(r.flags.0 & RouteFlags::ONLINK.0);
    let attrs = &mut msg.attributes;
    if let Some(d) = r.dst {
        attrs.push(RouteAttribute::Destination(RouteAddress::from(d.addr())));
    }
    attrs.push(RouteAttribute::Table(r.table.0));
    if r.priority != 0 {
        attrs.push(RouteAttribute::Priority(r.priority));
    }
    if let Some(src) = r.src {
        attrs.push(RouteAttribute::PrefSource(RouteAddress::from(src)));
    }
    if let Some(gw) = r.gateway {
        if Family::of(&gw) == r.family {
            attrs.push(RouteAttribute::Gateway(RouteAddress::from(gw)));
        } else {
            attrs.push(RouteAttribute::Via(RouteVia::from(gw)));
        }
    }
    if let Some(oif) = r.oif {
        attrs.push(RouteAttribute::Oif(oif));
    }
    if with_metrics && r.mtu != 0 {
        attrs.push(RouteAttribute::Metrics(vec![RouteMetric::Mtu(r.mtu)]));
    }
    msg
}

/// The crate's decoding of a route, which the dumps no longer use (they read replies in
/// place): the reference the reader's tests and fuzz target compare against.
#[cfg(test)]
pub(crate) fn decode(msg: RouteMessage) -> Option<KernelRoute> {
    let h = &msg.header;
    let family = match u8::from(h.address_family) {
        2 => Family::Inet4,
        10 => Family::Inet6,
        _ => return None,
    };
    let dst_len = h.destination_prefix_length;
    let mut r = KernelRoute {
        family,
        dst: None,
        src: None,
        gateway: None,
        oif: None,
        table: RoutingTable(u32::from(h.table)),
        priority: 0,
        scope: Scope(u8::from(h.scope)),
        kind: RouteType(u8::from(h.kind)),
        protocol: RouteProtocol(u8::from(h.protocol)),
        flags: RouteFlags(h.flags.bits()),
        mtu: 0,
    };
    for attr in msg.attributes {
        match attr {
            RouteAttribute::Destination(a) => {
                r.dst = route_ip(&a).and_then(|ip| IpNet::new(ip, dst_len).ok());
            }
            RouteAttribute::PrefSource(a) => r.src = route_ip(&a),
            RouteAttribute::Gateway(a) => r.gateway = route_ip(&a),
            RouteAttribute::Via(RouteVia::Inet(v4)) => r.gateway = Some(IpAddr::V4(v4)),
            RouteAttribute::Via(RouteVia::Inet6(v6)) => r.gateway = Some(IpAddr::V6(v6)),
            RouteAttribute::Oif(o) => r.oif = Some(o),
            RouteAttribute::Table(t) => r.table = RoutingTable(t),
            RouteAttribute::Priority(p) => r.priority = p,
            RouteAttribute::Metrics(ms) => {
                for m in ms {
                    if let RouteMetric::Mtu(mtu) = m {
                        r.mtu = mtu;
                    }
                }
            }
            _ => {}
        }
    }
    Some(r)
}

impl RouteSocket {
    /// Adds a route (`NLM_F_CREATE | NLM_F_EXCL`). An unreachable gateway fails with
    /// [`Invalid`](super::NlErrorKind::Invalid) (ENETUNREACH) and the kernel's reason.
    pub fn route_add(&mut self, r: &KernelRoute) -> Result<(), NlError> {
        let msg = RouteNetlinkMessage::NewRoute(encode(r, true));
        self.request("route_add", &r.target(), msg, NLM_F_CREATE | NLM_F_EXCL).map(drop)
    }

    /// Adds or replaces the route with the same table, destination, metric (and TOS)
    /// (`NLM_F_CREATE | NLM_F_REPLACE`).
    pub fn route_replace(&mut self, r: &KernelRoute) -> Result<(), NlError> {
        let msg = RouteNetlinkMessage::NewRoute(encode(r, true));
        self.request("route_replace", &r.target(), msg, NLM_F_CREATE | NLM_F_REPLACE).map(drop)
    }

    /// Adds (`true`) and deletes (`false`) routes, many per datagram: one result per change,
    /// as [`Self::route_add`] and [`Self::route_delete`] would give.
    pub fn route_batch(&mut self, changes: &[(bool, KernelRoute)]) -> Vec<Result<(), NlError>> {
        let requests: Vec<BatchRequest<'_, RouteNetlinkMessage>> = changes
            .iter()
            .map(|(add, r)| match add {
                true => BatchRequest {
                    op: "route_add",
                    target: r,
                    msg: RouteNetlinkMessage::NewRoute(encode(r, true)),
                    flags: NLM_F_CREATE | NLM_F_EXCL,
                },
                false => BatchRequest {
                    op: "route_delete",
                    target: r,
                    msg: RouteNetlinkMessage::DelRoute(encode(r, false)),
                    flags: 0,
                },
            })
            .collect();
        self.batch(&requests)
    }

    /// Deletes a route. The kernel matches on the fields given (table, destination, metric,
    /// gateway, oif, protocol, scope, type), so pass the route as dumped.
    /// [`NotFound`](super::NlErrorKind::NotFound) (ESRCH) if nothing matches.
    pub fn route_delete(&mut self, r: &KernelRoute) -> Result<(), NlError> {
        let msg = RouteNetlinkMessage::DelRoute(encode(r, false));
        self.request("route_delete", &r.target(), msg, 0).map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode() {
        let mut r = KernelRoute::new(Family::Inet4, Some("10.1.0.0/16".parse().unwrap()));
        r.gateway = Some("192.168.1.1".parse().unwrap());
        r.oif = Some(4);
        r.table = RoutingTable(1000);
        r.priority = 1024;
        r.mtu = 1400;
        r.flags = RouteFlags::ONLINK | RouteFlags::LINKDOWN;
        let msg = encode(&r, true);
        assert_eq!(msg.header.table, 0);
        let back = decode(msg).unwrap();
        let mut want = r.clone();
        want.flags = RouteFlags::ONLINK;
        assert_eq!(back, want);
        assert!(back.onlink());

        // An IPv4 route via an IPv6 next hop goes out as RTA_VIA.
        let mut v = KernelRoute::new(Family::Inet4, None);
        v.gateway = Some("fe80::1".parse().unwrap());
        let msg = encode(&v, false);
        assert!(msg.attributes.iter().any(|a| matches!(a, RouteAttribute::Via(_))));
        assert_eq!(decode(msg).unwrap().gateway, v.gateway);
    }
}
