// SPDX-License-Identifier: Apache-2.0
//! The lease a DHCPv4 exchange yields, and its translation into operator-layer specs
//! (docs/talos.md: DHCPv4).

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use ipnet::{IpNet, Ipv4Net};
use serde::{Deserialize, Serialize};

use crate::names;
use crate::resource::{
    AddressSpec, ConfigLayer, Family, HostnameSpec, LayerSpecs, LinkSpec, ResolverSpec,
    RouteProtocol, RouteSpec, RoutingTable, Scope, TimeServerSpec,
};

/// The smallest MTU a host must accept (RFC 2132 §5.1, option 26: "minimum legal value ...
/// is 68"); a smaller option 26 is ignored.
const MIN_MTU: u16 = 68;

/// A bound DHCPv4 lease: everything the ACK said that keelson uses.
///
/// It is serializable so that the operator can persist it under the state directory and hand
/// it back as [`super::ClientConfig::previous_lease`] for INIT-REBOOT (RFC 2131 §3.2).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lease {
    /// `yiaddr`.
    pub address: Ipv4Addr,
    /// From option 1 (subnet mask).
    pub prefix_len: u8,
    /// Option 54: where RENEWING sends its unicast REQUEST.
    pub server_id: Ipv4Addr,
    /// Option 3, in the server's order of preference.
    #[serde(default)]
    pub routers: Vec<Ipv4Addr>,
    /// Option 121 (RFC 3442): `(destination, gateway)`; overrides option 3 when present.
    #[serde(default)]
    pub classless_routes: Vec<(Ipv4Net, Ipv4Addr)>,
    /// Option 6.
    #[serde(default)]
    pub dns: Vec<Ipv4Addr>,
    /// Option 15.
    #[serde(default)]
    pub domain: Option<String>,
    /// Option 119 (RFC 3397), without trailing dots.
    #[serde(default)]
    pub search: Vec<String>,
    /// Option 42.
    #[serde(default)]
    pub ntp: Vec<Ipv4Addr>,
    /// Option 12, only kept when the client asked for it.
    #[serde(default)]
    pub hostname: Option<String>,
    /// Option 26.
    #[serde(default)]
    pub mtu: Option<u16>,
    /// Option 28.
    #[serde(default)]
    pub broadcast: Option<Ipv4Addr>,
    /// Option 51, seconds; `u32::MAX` is infinite (RFC 2132 §9.2).
    pub lease_time: u32,
    /// T1 in seconds (option 58 or 0.5 × lease).
    pub t1: u32,
    /// T2 in seconds (option 59 or 0.875 × lease).
    pub t2: u32,
    /// When the REQUEST that produced this lease was first sent: the lease runs from there
    /// (RFC 2131 §4.4.1). Monotonic time does not survive a reboot, so it is not persisted.
    #[serde(skip)]
    pub acquired_at: Option<Instant>,
}

impl Lease {
    /// Whether the lease never ends (RFC 2132 §9.2: `0xffffffff` is infinity).
    pub fn is_infinite(&self) -> bool {
        self.lease_time == u32::MAX
    }

    fn at(&self, secs: u32) -> Option<Instant> {
        if self.is_infinite() {
            return None;
        }
        self.acquired_at?.checked_add(Duration::from_secs(u64::from(secs)))
    }

    /// When RENEWING starts; `None` for an infinite lease or one without `acquired_at`.
    pub fn t1_at(&self) -> Option<Instant> {
        self.at(self.t1)
    }

    /// When REBINDING starts.
    pub fn t2_at(&self) -> Option<Instant> {
        self.at(self.t2)
    }

    /// When the lease ends and the address must go (RFC 2131 §4.4.5).
    pub fn expires_at(&self) -> Option<Instant> {
        self.at(self.lease_time)
    }

    /// Seconds left at `now`; `None` for an infinite lease. A lease without `acquired_at`
    /// counts as just acquired.
    pub fn remaining(&self, now: Instant) -> Option<u32> {
        if self.is_infinite() {
            return None;
        }
        match self.expires_at() {
            Some(end) => Some(
                u32::try_from(end.saturating_duration_since(now).as_secs()).unwrap_or(u32::MAX),
            ),
            None => Some(self.lease_time),
        }
    }

    /// The leased prefix (`address/prefix_len`).
    pub fn network(&self) -> Ipv4Net {
        Ipv4Net::new(self.address, self.prefix_len.min(32))
            .unwrap_or_else(|_| Ipv4Net::from(self.address))
    }
}

/// Translate a lease into specs at the operator layer (docs/talos.md: DHCPv4), as a pure function.
///
/// * The address carries `priority = route_metric` (`IFA_RT_PRIORITY`, so the kernel prefix
///   route gets the same metric) and lifetimes equal to the remaining lease, so the kernel
///   drops it by itself if keelson ever fails to.
/// * Option 121 overrides option 3 (RFC 3442 §2: "the client MUST ignore the Router
///   option"). Without 121, only the first router becomes the default route: RFC 2132 §3.5
///   lists routers in order of preference, and the kernel rejects a second default route
///   with the same metric anyway.
/// * A gateway outside the leased prefix gets one on-link `/32` route first, or the kernel
///   refuses the route via it.
/// * The MTU (option 26) is a [`LinkSpec`] at [`ConfigLayer::Default`] so that any
///   configured MTU wins (docs/talos.md: DHCPv4).
pub fn lease_to_specs(lease: &Lease, link: &str, route_metric: u32, now: Instant) -> LayerSpecs {
    let layer = ConfigLayer::Operator;
    let mut specs = LayerSpecs::default();
    let network = lease.network();

    let mut address = AddressSpec::new(link, IpNet::V4(network), layer);
    address.priority = route_metric;
    address.valid_lifetime = lease.remaining(now);
    address.preferred_lifetime = address.valid_lifetime;
    specs.addresses.push(address);

    let routes: Vec<(Ipv4Net, Ipv4Addr)> = if lease.classless_routes.is_empty() {
        lease.routers.iter().take(1).map(|gw| (Ipv4Net::default(), *gw)).collect()
    } else {
        lease.classless_routes.clone()
    };
    let src = IpAddr::V4(lease.address);
    let mut on_link: Vec<Ipv4Addr> = Vec::new();
    for (dst, gw) in routes {
        if !gw.is_unspecified() && !network.contains(&gw) && !on_link.contains(&gw) {
            on_link.push(gw);
            let mut route = RouteSpec::new(Family::Inet4, layer);
            route.dst = Some(IpNet::V4(Ipv4Net::from(gw)));
            route.src = Some(src);
            route.out_link_name = link.to_owned();
            route.table = RoutingTable::MAIN;
            route.priority = route_metric;
            route.protocol = RouteProtocol::BOOT;
            route.normalize();
            route.scope = Scope::LINK;
            specs.routes.push(route);
        }
        let mut route = RouteSpec::new(Family::Inet4, layer);
        route.dst = Some(IpNet::V4(dst.trunc()));
        route.gateway = Some(IpAddr::V4(gw));
        route.src = Some(src);
        route.out_link_name = link.to_owned();
        route.table = RoutingTable::MAIN;
        route.priority = route_metric;
        route.protocol = RouteProtocol::BOOT;
        route.normalize();
        specs.routes.push(route);
    }

    // Names from the server go to /etc and the kernel: only valid ones (RFC 1123), each
    // refusal logged once with the value escaped; the rest of the lease applies.
    let domain = lease.domain.as_deref().and_then(|d| valid_domain(d, link, "option 15"));
    let mut search: Vec<String> =
        lease.search.iter().filter_map(|d| valid_domain(d, link, "option 119")).collect();
    if let Some(domain) = &domain {
        if !search.contains(domain) {
            search.push(domain.clone());
        }
    }
    if !lease.dns.is_empty() || !search.is_empty() {
        specs.resolvers.push(ResolverSpec {
            dns_servers: lease.dns.iter().map(|ip| IpAddr::V4(*ip)).collect(),
            search_domains: search,
            search_domains_overridden: false,
            layer,
        });
    }

    if !lease.ntp.is_empty() {
        specs.time_servers.push(TimeServerSpec {
            time_servers: lease.ntp.iter().map(ToString::to_string).collect(),
            use_nts: false,
            layer,
        });
    }

    if let Some(name) = &lease.hostname {
        let name = name.trim_matches('\0');
        match HostnameSpec::parse_fqdn(name, layer) {
            Ok(mut spec) => {
                // Option 15 is the domain only if the kernel takes it as one.
                if let Some(domain) = domain.as_ref().filter(|d| d.len() <= names::MAX_UTS) {
                    spec.domainname.clone_from(domain);
                }
                specs.hostnames.push(spec);
            }
            Err(err) => log::warn!(
                "dhcp4 on {link}: ignoring hostname (option 12) \"{}\": {err}",
                names::escape(name, 80)
            ),
        }
    }

    if let Some(mtu) = lease.mtu.filter(|m| *m >= MIN_MTU) {
        let mut spec = LinkSpec::up(link, ConfigLayer::Default);
        spec.mtu = u32::from(mtu);
        specs.links.push(spec);
    }

    specs
}

/// `value` without its trailing dot if it is a valid domain; otherwise `None`, logged.
fn valid_domain(value: &str, link: &str, what: &str) -> Option<String> {
    let value = value.trim_matches('\0');
    match names::check_domain(value) {
        Ok(d) => Some(d.to_owned()),
        Err(err) => {
            log::warn!(
                "dhcp4 on {link}: ignoring domain ({what}) \"{}\": {err}",
                names::escape(value, 80)
            );
            None
        }
    }
}
