// SPDX-License-Identifier: Apache-2.0
//! What every link document shares (Talos's `CommonLinkConfig` in
//! `pkg/machinery/config/types/network/link.go`): up, MTU, addresses, routes and multicast,
//! and how they become specs on the link.

use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use super::Problems;
use crate::config::locate::YamlPath;
use crate::config::network::Route;
use crate::config::scalar::{self, Cidr, Ip, Table};
use crate::config::specs::{route_spec, Specs};
use crate::resource::{
    link_name_problem, AddressSpec, ConfigLayer, LinkSpec, LinkType, RouteType, RoutingTable,
    MAX_LINK_NAME_LEN, MAX_LINK_REF_LEN,
};

/// What every link document sets on its link, read from the document's own fields.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct CommonLink {
    /// `up`: absent means up.
    pub up: Option<bool>,
    /// `mtu`: 0 or absent leaves the kernel's.
    pub mtu: u32,
    /// `addresses`.
    pub addresses: Vec<LinkAddress>,
    /// `routes`.
    pub routes: Vec<LinkRoute>,
    /// `multicast`: absent leaves the kernel's flag.
    pub multicast: Option<bool>,
}

/// Declares a link document: its own fields, then the ones every link document has (`up`,
/// `mtu`, `addresses`, `routes`, `multicast`). The fields are written out rather than
/// flattened because serde cannot refuse unknown keys through `flatten`.
macro_rules! link_document {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $($(#[$fmeta:meta])* $vis:vis $field:ident: $ty:ty,)*
        }
    ) => {
        $(#[$meta])*
        pub struct $name {
            $($(#[$fmeta])* $vis $field: $ty,)*
            /// `up`: absent means up.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub up: Option<bool>,
            /// `mtu`: 0 or absent leaves the kernel's.
            #[serde(default, skip_serializing_if = "crate::config::documents::is_zero")]
            pub mtu: u32,
            /// `addresses`.
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            pub addresses: Vec<crate::config::documents::LinkAddress>,
            /// `routes`.
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            pub routes: Vec<crate::config::documents::LinkRoute>,
            /// `multicast`: absent leaves the kernel's flag.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub multicast: Option<bool>,
        }

        impl $name {
            /// The settings every link document has.
            pub fn common(&self) -> crate::config::documents::CommonLink {
                crate::config::documents::CommonLink {
                    up: self.up,
                    mtu: self.mtu,
                    addresses: self.addresses.clone(),
                    routes: self.routes.clone(),
                    multicast: self.multicast,
                }
            }

            /// Set the settings every link document has.
            #[allow(dead_code)]
            pub(crate) fn with_common(mut self, c: crate::config::documents::CommonLink) -> Self {
                self.up = c.up;
                self.mtu = c.mtu;
                self.addresses = c.addresses;
                self.routes = c.routes;
                self.multicast = c.multicast;
                self
            }
        }
    };
}
pub(crate) use link_document;

/// One entry of `addresses`.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LinkAddress {
    /// `address`: an address with its prefix length.
    #[serde(deserialize_with = "scalar::one::<Cidr, _>")]
    pub address: IpNet,
    /// `routePriority`: the metric of the prefix route the kernel adds for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route_priority: Option<u32>,
}

/// One entry of `routes`.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LinkRoute {
    /// `destination`: absent is the default route of the gateway's family.
    #[serde(
        default,
        deserialize_with = "scalar::opt::<Cidr, _>",
        skip_serializing_if = "Option::is_none"
    )]
    pub destination: Option<IpNet>,
    /// `gateway`: absent makes a link-scope route.
    #[serde(
        default,
        deserialize_with = "scalar::opt::<Ip, _>",
        skip_serializing_if = "Option::is_none"
    )]
    pub gateway: Option<IpAddr>,
    /// `source`: the preferred source address.
    #[serde(
        default,
        deserialize_with = "scalar::opt::<Ip, _>",
        skip_serializing_if = "Option::is_none"
    )]
    pub source: Option<IpAddr>,
    /// `metric`: 0 or absent is 1024.
    #[serde(default, skip_serializing_if = "super::is_zero")]
    pub metric: u32,
    /// `mtu`.
    #[serde(default, skip_serializing_if = "super::is_zero")]
    pub mtu: u32,
    /// `table`: absent is `main`.
    #[serde(
        default,
        deserialize_with = "scalar::opt::<Table, _>",
        skip_serializing_if = "Option::is_none"
    )]
    pub table: Option<RoutingTable>,
    /// `type`: `unicast` (the default), `blackhole`, `unreachable`, `prohibit`, ...
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<RouteType>,
}

impl LinkRoute {
    /// The same route in the v1alpha1 shape, which the spec builder takes.
    pub(crate) fn legacy(&self) -> Route {
        Route {
            network: self.destination,
            gateway: self.gateway,
            source: self.source,
            metric: self.metric,
            mtu: self.mtu,
            table: self.table,
        }
    }

    /// The v1alpha1 route as a document route.
    pub(crate) fn from_legacy(route: &Route) -> Self {
        Self {
            destination: route.network,
            gateway: route.gateway,
            source: route.source,
            metric: route.metric,
            mtu: route.mtu,
            table: route.table,
            kind: None,
        }
    }
}

/// Checks on `name`: a link keelson creates must fit the kernel's 15 bytes; a link that is
/// only referred to may be an alias or altname (up to 127 bytes).
pub(crate) fn check_name(name: &str, created: bool, p: &mut Problems) {
    let max = if created { MAX_LINK_NAME_LEN } else { MAX_LINK_REF_LEN };
    if name.is_empty() {
        p.error(YamlPath::keys("name"), "name must be specified");
    } else if let Some(problem) = link_name_problem(name, max) {
        p.error(YamlPath::keys("name"), problem);
    }
}

/// Checks on names of other links a document lists (`links`, `parent`).
pub(crate) fn check_refs(key: &'static str, names: &[String], p: &mut Problems) {
    for (i, name) in names.iter().enumerate() {
        if let Some(problem) = link_name_problem(name, MAX_LINK_REF_LEN) {
            p.error(YamlPath::keys(key).index(i), problem);
        }
    }
}

impl CommonLink {
    /// Talos's checks on addresses and routes, plus the kernel's MTU range.
    pub(crate) fn check(&self, p: &mut Problems) {
        if self.mtu != 0 && !(68..=65535).contains(&self.mtu) {
            p.error(YamlPath::keys("mtu"), "mtu must be between 68 and 65535");
        }
        for (i, a) in self.addresses.iter().enumerate() {
            if a.address.addr().is_unspecified() {
                p.error(
                    YamlPath::keys("addresses").index(i).key("address"),
                    "the address must not be unspecified",
                );
            }
        }
        for (i, r) in self.routes.iter().enumerate() {
            let at = |key: &'static str| YamlPath::keys("routes").index(i).key(key);
            if r.destination.is_some_and(|d| d.addr().is_unspecified() && d.prefix_len() != 0) {
                p.error(at("destination"), "the destination must be a valid prefix");
            }
            if r.gateway.is_some_and(|g| g.is_unspecified()) {
                p.error(at("gateway"), "the gateway must not be unspecified");
            }
            if r.source.is_some_and(|s| s.is_unspecified()) {
                p.error(at("source"), "the source must not be unspecified");
            }
            if let (Some(d), Some(g)) = (r.destination, r.gateway) {
                if d.addr().is_ipv4() != g.is_ipv4() {
                    p.error(at("gateway"), "the gateway and the destination differ in family");
                }
            }
            let kinds = [
                RouteType::UNICAST,
                RouteType::BLACKHOLE,
                RouteType::UNREACHABLE,
                RouteType::PROHIBIT,
            ];
            if r.kind.is_some_and(|k| !kinds.contains(&k)) {
                p.error(at("type"), "type is unicast, blackhole, unreachable or prohibit");
            }
        }
    }

    /// The link spec for `name` with these settings (the caller adds kind-specific ones).
    pub(crate) fn link(&self, name: &str) -> LinkSpec {
        let mut link = LinkSpec::up(name, ConfigLayer::Configuration);
        link.up = self.up.unwrap_or(true);
        link.mtu = self.mtu;
        link.multicast = self.multicast;
        link
    }

    /// The spec of a link keelson creates: these settings, logical, of `kind` and `link_type`.
    pub(crate) fn logical_link(&self, name: &str, kind: &str, link_type: LinkType) -> LinkSpec {
        let mut link = self.link(name);
        link.logical = true;
        link.kind = kind.to_owned();
        link.link_type = link_type;
        link
    }

    /// The addresses and routes on `name`.
    pub(crate) fn add_addresses_and_routes(&self, name: &str, out: &mut Specs) {
        for a in &self.addresses {
            let mut spec = AddressSpec::new(name, a.address, ConfigLayer::Configuration);
            if let Some(priority) = a.route_priority {
                spec.priority = priority;
            }
            out.address(spec);
        }
        for r in &self.routes {
            let mut spec = route_spec(name, &r.legacy());
            if let Some(kind) = r.kind.filter(|k| *k != RouteType::UNICAST) {
                // A route that drops what it matches has no next hop: a gateway given with
                // it (Talos's own example has one) is not sent to the kernel.
                spec.kind = kind;
                spec.gateway = None;
                spec.normalize();
                spec.scope = crate::resource::Scope::GLOBAL;
            }
            out.route(spec);
        }
    }

    /// The v1alpha1 device's own settings in this shape.
    pub(crate) fn from_legacy(mtu: u32, addresses: &[IpNet], routes: &[Route]) -> Self {
        Self {
            up: None,
            mtu,
            addresses: addresses
                .iter()
                .map(|a| LinkAddress { address: *a, route_priority: None })
                .collect(),
            routes: routes.iter().map(LinkRoute::from_legacy).collect(),
            multicast: None,
        }
    }
}

/// A link document naming a link the v1alpha1 `machine.network.interfaces` also configures
/// (as a device or one of its VLANs): one link, two sources of truth, refused as Talos
/// refuses a typed document that repeats a v1alpha1 setting.
pub(crate) fn legacy_link_conflict(
    name: &str,
    legacy: &super::Legacy<'_>,
) -> Option<(&'static str, String)> {
    let configured = legacy.cfg.machine.network.interfaces.iter().any(|d| {
        d.interface.as_deref() == Some(name)
            || d.vlans.iter().any(|v| {
                d.interface
                    .as_deref()
                    .is_some_and(|i| crate::resource::vlan_link_name(i, v.vlan_id) == name)
            })
    });
    configured.then(|| {
        (
            "machine.network.interfaces",
            format!("link {} is configured in both places", crate::names::escape(name, 32)),
        )
    })
}
