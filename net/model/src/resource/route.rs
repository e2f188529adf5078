// SPDX-License-Identifier: Apache-2.0
//! Routes: [`RouteSpec`], [`RouteStatus`] and their ID, [`route_id`] (docs/talos.md: Resources and
//! IDs).

use std::fmt;
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
    use fmt::Write;
    let mut id = String::with_capacity(40);
    if table != RoutingTable::MAIN {
        let _ = write!(id, "{table}/");
    }
    if family == Family::Inet6 && !out_link.is_empty() {
        id.push_str(out_link);
        id.push('/');
    }
    let _ = write!(id, "{family}/");
    if let Some(gw) = gateway.filter(|g| !g.is_unspecified()) {
        id_text::push_ip(&mut id, gw);
    }
    id.push('/');
    if let Some(dst) = dst.filter(|d| !(d.prefix_len() == 0 && d.addr().is_unspecified())) {
        id_text::push_net(&mut id, dst);
    }
    id.push('/');
    id_text::push_u32(&mut id, priority);
    id
}

/// A route as the kernel reports it (all tables are mirrored).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
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
