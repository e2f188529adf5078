// SPDX-License-Identifier: Apache-2.0
//! Routes: [`RouteSpec`], [`RouteStatus`] and their ID, [`route_id`] (docs/talos.md: Resources and
//! IDs).

use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use super::id_text;
use super::layer::{ConfigLayer, LayeredSpec};
use super::nethelpers::{
    is_default, Family, RouteFlags, RouteProtocol, RouteType, RoutingTable, Scope,
};

/// A route to install.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RouteSpec {
    /// Address family.
    pub family: Family,
    /// Destination; `None` is the default route.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<IpNet>,
    /// Preferred source (`RTA_PREFSRC`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<IpAddr>,
    /// Next hop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<IpAddr>,
    /// Output link name (or alias).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub out_link_name: String,
    /// Routing table.
    pub table: RoutingTable,
    /// Metric.
    pub priority: u32,
    /// Scope.
    pub scope: Scope,
    /// Route type.
    #[serde(rename = "type")]
    pub kind: RouteType,
    /// Flags.
    #[serde(default, skip_serializing_if = "is_default")]
    pub flags: RouteFlags,
    /// Protocol (who installed it).
    pub protocol: RouteProtocol,
    /// `RTAX_MTU`; 0 means unset.
    #[serde(default, skip_serializing_if = "is_default")]
    pub mtu: u32,
    /// The layer this spec came from.
    pub layer: ConfigLayer,
}

/// The metric every config source uses when none is given (docs/talos.md: Resources and IDs).
pub const DEFAULT_ROUTE_METRIC: u32 = 1024;

impl RouteSpec {
    /// A unicast route in the main table; call [`RouteSpec::normalize`] after filling it in.
    pub fn new(family: Family, layer: ConfigLayer) -> Self {
        Self {
            family,
            dst: None,
            src: None,
            gateway: None,
            out_link_name: String::new(),
            table: RoutingTable::MAIN,
            priority: DEFAULT_ROUTE_METRIC,
            scope: Scope::GLOBAL,
            kind: RouteType::UNICAST,
            flags: RouteFlags::default(),
            protocol: RouteProtocol::STATIC,
            mtu: 0,
            layer,
        }
    }

    /// Bring the route into canonical form: `0/0` and unspecified addresses become `None`,
    /// and the scope is derived as the kernel would report it.
    ///
    /// Talos derives `link` scope for gateway-less IPv6 routes, which the kernel reports as
    /// `global`; the resulting never-equal diff looped. IPv6 routes are
    /// therefore always `global` here.
    pub fn normalize(&mut self) {
        if self.dst.is_some_and(|d| d.prefix_len() == 0 && d.addr().is_unspecified()) {
            self.dst = None;
        }
        if self.gateway.is_some_and(|g| g.is_unspecified()) {
            self.gateway = None;
        }
        if self.src.is_some_and(|s| s.is_unspecified()) {
            self.src = None;
        }
        if let Some(ip) = self.dst.map(|d| d.addr()).or(self.gateway) {
            self.family = Family::of(&ip);
        }
        self.scope = if self.family == Family::Inet6 {
            Scope::GLOBAL
        } else if self.dst.is_some_and(|d| d.addr().is_loopback()) {
            Scope::HOST
        } else if self.gateway.is_none() && self.dst.is_some() {
            Scope::LINK
        } else {
            Scope::GLOBAL
        };
    }

    /// The natural ID.
    pub fn id(&self) -> String {
        route_id(
            self.table,
            self.family,
            self.dst.as_ref(),
            self.gateway.as_ref(),
            self.priority,
            &self.out_link_name,
        )
    }
}

/// `[<table>/][<outlink>/ for inet6]<family>/<gw>/<dst>/<priority>` (docs/talos.md: Resources and
/// IDs): the table prefix only outside `main`, the out-link only for IPv6, zero gw/dst render
/// empty.
pub fn route_id(
    table: RoutingTable,
    family: Family,
    dst: Option<&IpNet>,
    gateway: Option<&IpAddr>,
    priority: u32,
    out_link: &str,
) -> String {
    let mut id = id_text::IdText::with_capacity(40 + out_link.len());
    if table != RoutingTable::MAIN {
        match table.name() {
            Some(name) => id.push_str(name),
            None => id.push_u32(table.0),
        }
        id.push_ascii(b'/');
    }
    if family == Family::Inet6 && !out_link.is_empty() {
        id.push_str(out_link);
        id.push_ascii(b'/');
    }
    id.push_str(family.as_str());
    id.push_ascii(b'/');
    if let Some(gw) = gateway.filter(|g| !g.is_unspecified()) {
        id.push_ip(gw);
    }
    id.push_ascii(b'/');
    if let Some(dst) = dst.filter(|d| !(d.prefix_len() == 0 && d.addr().is_unspecified())) {
        id.push_net(dst);
    }
    id.push_ascii(b'/');
    id.push_u32(priority);
    id.finish()
}

/// A route as the kernel reports it (all tables are mirrored). Ordered field by field, so
/// that an operation on it can be a map key without being formatted.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteStatus {
    /// Address family.
    pub family: Family,
    /// Destination; `None` is the default route.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<IpNet>,
    /// `RTA_PREFSRC`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<IpAddr>,
    /// `RTA_GATEWAY` (or `RTA_VIA`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<IpAddr>,
    /// Output interface index.
    #[serde(default, skip_serializing_if = "is_default")]
    pub out_link_index: u32,
    /// Output interface name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub out_link_name: String,
    /// Table.
    pub table: RoutingTable,
    /// Metric.
    pub priority: u32,
    /// Scope.
    pub scope: Scope,
    /// Type.
    #[serde(rename = "type")]
    pub kind: RouteType,
    /// Flags.
    #[serde(default, skip_serializing_if = "is_default")]
    pub flags: RouteFlags,
    /// Protocol.
    pub protocol: RouteProtocol,
    /// `RTAX_MTU`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub mtu: u32,
}

impl RouteStatus {
    /// The natural ID.
    pub fn id(&self) -> String {
        route_id(
            self.table,
            self.family,
            self.dst.as_ref(),
            self.gateway.as_ref(),
            self.priority,
            &self.out_link_name,
        )
    }
}

impl LayeredSpec for RouteSpec {
    fn natural_id(&self) -> String {
        self.id()
    }
    fn layer(&self) -> ConfigLayer {
        self.layer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text `write!` produced before IDs were built as bytes.
    fn with_fmt(
        table: RoutingTable,
        family: Family,
        dst: Option<&IpNet>,
        gateway: Option<&IpAddr>,
        priority: u32,
        out_link: &str,
    ) -> String {
        let mut id = String::new();
        if table != RoutingTable::MAIN {
            id += &format!("{table}/");
        }
        if family == Family::Inet6 && !out_link.is_empty() {
            id += &format!("{out_link}/");
        }
        id += &format!("{family}/");
        if let Some(gw) = gateway.filter(|g| !g.is_unspecified()) {
            id += &gw.to_string();
        }
        id.push('/');
        if let Some(dst) = dst.filter(|d| !(d.prefix_len() == 0 && d.addr().is_unspecified())) {
            id += &dst.to_string();
        }
        format!("{id}/{priority}")
    }

    #[test]
    fn route_id_text_is_unchanged() {
        let tables = [RoutingTable::MAIN, RoutingTable::LOCAL, RoutingTable(180), RoutingTable(0)];
        let cases: [(Family, Option<&str>, Option<&str>, &str); 7] = [
            (Family::Inet4, Some("10.100.0.7/32"), Some("10.0.0.1"), "eth0"),
            (Family::Inet4, None, Some("192.168.1.254"), "eth0"),
            (Family::Inet4, Some("0.0.0.0/0"), Some("0.0.0.0"), ""),
            (Family::Inet4, Some("172.16.0.0/12"), None, "eth1"),
            (Family::Inet6, Some("2001:db8:1::/64"), Some("fe80::1"), "eth0"),
            (Family::Inet6, None, Some("2001:db8::1"), ""),
            (Family::Inet6, Some("::/0"), None, "br-lan"),
        ];
        for table in tables {
            for (family, dst, gw, link) in cases {
                let dst: Option<IpNet> = dst.map(|d| d.parse().unwrap());
                let gw: Option<IpAddr> = gw.map(|g| g.parse().unwrap());
                for priority in [0, 1, 1024, u32::MAX] {
                    let args = (table, family, dst.as_ref(), gw.as_ref(), priority, link);
                    assert_eq!(
                        route_id(args.0, args.1, args.2, args.3, args.4, args.5),
                        with_fmt(args.0, args.1, args.2, args.3, args.4, args.5),
                    );
                }
            }
        }
        let v4 = route_id(
            RoutingTable(180),
            Family::Inet4,
            Some(&"10.1.0.0/16".parse().unwrap()),
            Some(&"10.0.0.1".parse().unwrap()),
            1024,
            "eth0",
        );
        assert_eq!(v4, "180/inet4/10.0.0.1/10.1.0.0/16/1024");
        let v6 = route_id(RoutingTable::LOCAL, Family::Inet6, None, None, 0, "eth0");
        assert_eq!(v6, "local/eth0/inet6///0");
    }
}
