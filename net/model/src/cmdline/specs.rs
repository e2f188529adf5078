// SPDX-License-Identifier: Apache-2.0
//! From a parsed command line to the layer-`cmdline` specs (docs/talos.md: Kernel command line:
//! what `ip=`, `bond=` and `vlan=` each produce).
//!
//! Invariant: at most one spec per natural ID. Several `ip=` for one link share one LinkSpec
//! (the first MTU/MAC given wins; the parser already rejected contradictions), and a `bond=`
//! or `vlan=` link named like an `ip=` link turns that LinkSpec into a bond or VLAN.

use ipnet::IpNet;

use super::network::{CmdlineNetwork, LinkConfig};
use crate::resource::{
    AddressSpec, ClientIdentifier, ConfigLayer, Dhcp6OperatorSpec, Family, HostnameSpec,
    LayerSpecs, LinkSpec, LinkType, LinkView, Operator, OperatorSpec, ResolverSpec, RouteProtocol,
    RouteSpec, TimeServerSpec, DEFAULT_ROUTE_METRIC,
};

const LAYER: ConfigLayer = ConfigLayer::Cmdline;

/// The layer-`cmdline` specs for `net`, with link names resolved through `links`.
///
/// An `ip=` without a device goes to `links.first_non_loopback()`, and is skipped while the
/// node has no such link (the controller calls this again when links appear).
pub fn to_specs(net: &CmdlineNetwork, links: &LinkView<'_>) -> LayerSpecs {
    let mut out = LayerSpecs::default();
    for (idx, config) in net.link_configs.iter().enumerate() {
        let name = if config.link_name.is_empty() {
            match links.first_non_loopback() {
                Some(name) => name.to_owned(),
                None => continue,
            }
        } else {
            links.resolve(&config.link_name)
        };
        // The position in `link_configs`, not among emitted entries: metrics stay stable
        // while a device-less entry waits for its link.
        let metric = DEFAULT_ROUTE_METRIC.saturating_add(u32::try_from(idx).unwrap_or(u32::MAX));
        link_config_specs(&mut out, &name, config, metric);
    }

    for spec in &net.link_specs {
        let mut spec = spec.clone();
        // Bond masters and VLANs are links we create, under the names given; slaves and
        // parents are existing links that may be referred to by alias.
        if spec.bond_slave.is_some() {
            spec.name = links.resolve(&spec.name);
        }
        if !spec.parent_name.is_empty() {
            spec.parent_name = links.resolve(&spec.parent_name);
        }
        match out.links.iter_mut().find(|l| l.name == spec.name) {
            Some(existing) => absorb(existing, spec),
            None => out.links.push(spec),
        }
    }

    if !net.dns_servers.is_empty() {
        out.resolvers.push(ResolverSpec {
            dns_servers: net.dns_servers.clone(),
            layer: LAYER,
            ..ResolverSpec::default()
        });
    }
    if !net.ntp_servers.is_empty() {
        out.time_servers.push(TimeServerSpec {
            time_servers: net.ntp_servers.iter().map(ToString::to_string).collect(),
            // NTS needs a name to verify; these are IP literals.
            use_nts: false,
            layer: LAYER,
        });
    }
    // The parser validated it already; a failure here would only drop the hostname.
    if let Some(hostname) =
        net.hostname.as_deref().and_then(|h| HostnameSpec::parse_fqdn(h, LAYER).ok())
    {
        out.hostnames.push(hostname);
    }
    out
}

/// The link, address, routes and operators of one `ip=` entry on link `name`.
fn link_config_specs(out: &mut LayerSpecs, name: &str, config: &LinkConfig, metric: u32) {
    if !out.links.iter().any(|l| l.name == name) {
        out.links.push(LinkSpec::up(name, LAYER));
    }
    if let Some(link) = out.links.iter_mut().find(|l| l.name == name) {
        if link.mtu == 0 {
            link.mtu = config.mtu.unwrap_or(0);
        }
        if link.hardware_addr.is_none() {
            link.hardware_addr.clone_from(&config.hardware_addr);
        }
    }

    if let Some(address) = config.address {
        push_unique(&mut out.addresses, AddressSpec::new(name, address, LAYER), AddressSpec::id);
    }

    if let Some(gw) = config.gateway {
        let family = Family::of(&gw);
        // Talos adds this whenever the address does not contain the gateway, including when
        // there is no address: the kernel refuses a gateway it cannot reach on-link.
        if gw.is_ipv4() && !config.address.is_some_and(|a| a.contains(&gw)) {
            let mut on_link = RouteSpec::new(family, LAYER);
            on_link.dst = Some(IpNet::from(gw));
            on_link.src = config.address.map(|a| a.addr());
            on_link.out_link_name = name.to_owned();
            on_link.priority = metric;
            on_link.protocol = RouteProtocol::BOOT;
            on_link.normalize();
            push_unique(&mut out.routes, on_link, RouteSpec::id);
        }
        let mut default = RouteSpec::new(family, LAYER);
        default.gateway = Some(gw);
        default.out_link_name = name.to_owned();
        default.priority = metric;
        default.protocol = RouteProtocol::BOOT;
        default.normalize();
        push_unique(&mut out.routes, default, RouteSpec::id);
    }

    if config.dhcp4 {
        push_unique(
            &mut out.operators,
            OperatorSpec::dhcp4(name, DEFAULT_ROUTE_METRIC, ClientIdentifier::None, LAYER),
            OperatorSpec::id,
        );
    }
    if config.dhcp6 {
        let dhcp6 = OperatorSpec {
            operator: Operator::Dhcp6,
            link_name: name.to_owned(),
            require_up: true,
            dhcp6: Some(Dhcp6OperatorSpec {
                route_metric: DEFAULT_ROUTE_METRIC,
                skip_hostname_request: false,
                client_identifier: ClientIdentifier::None,
            }),
            layer: LAYER,
            ..OperatorSpec::default()
        };
        push_unique(&mut out.operators, dhcp6, OperatorSpec::id);
    }
}

fn push_unique<T>(list: &mut Vec<T>, item: T, id: impl Fn(&T) -> String) {
    let new_id = id(&item);
    if !list.iter().any(|x| id(x) == new_id) {
        list.push(item);
    }
}

/// Fold a `bond=`/`vlan=` spec into the LinkSpec an `ip=` already made for that name: what
/// `into` has set stays, what it lacks comes from `from`.
fn absorb(into: &mut LinkSpec, from: LinkSpec) {
    // Destructured so that a new LinkSpec field cannot be forgotten here.
    let LinkSpec {
        name: _,
        logical,
        up,
        mtu,
        kind,
        link_type,
        parent_name,
        hardware_addr,
        multicast,
        bond_slave,
        bridge_slave,
        vrf_slave,
        vlan,
        bond_master,
        bridge_master,
        vrf_master,
        veth,
        wireguard,
        layer: _,
    } = from;
    into.logical |= logical;
    into.up |= up;
    if into.mtu == 0 {
        into.mtu = mtu;
    }
    if into.kind.is_empty() {
        into.kind = kind;
    }
    if into.link_type == LinkType::default() {
        into.link_type = link_type;
    }
    if into.parent_name.is_empty() {
        into.parent_name = parent_name;
    }
    into.hardware_addr = into.hardware_addr.take().or(hardware_addr);
    into.multicast = into.multicast.or(multicast);
    into.bond_slave = into.bond_slave.take().or(bond_slave);
    into.bridge_slave = into.bridge_slave.take().or(bridge_slave);
    into.vrf_slave = into.vrf_slave.take().or(vrf_slave);
    into.vrf_master = into.vrf_master.take().or(vrf_master);
    into.vlan = into.vlan.take().or(vlan);
    into.bond_master = into.bond_master.take().or(bond_master);
    into.bridge_master = into.bridge_master.take().or(bridge_master);
    into.veth = into.veth.take().or(veth);
    into.wireguard = into.wireguard.take().or(wireguard);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmdline::parse;
    use crate::resource::{LinkStatus, RoutingTable, Scope};

    fn ether() -> LinkStatus {
        LinkStatus { link_type: LinkType::ETHER, ..LinkStatus::default() }
    }

    fn loopback() -> LinkStatus {
        LinkStatus { link_type: LinkType::LOOPBACK, ..LinkStatus::default() }
    }

    fn specs(cmdline: &str, links: &LinkView<'_>) -> LayerSpecs {
        let net = parse(cmdline);
        assert!(net.errors.is_empty(), "{:#?}", net.errors);
        to_specs(&net, links)
    }

    fn ids<T>(list: &[T], id: impl Fn(&T) -> String) -> Vec<String> {
        list.iter().map(id).collect()
    }

    #[test]
    fn issue_example() {
        let out = specs(
            "ip=172.20.0.2::172.20.0.1:255.255.255.0::eth1::::: talos.hostname=node-1.example.org",
            &LinkView::default(),
        );
        assert_eq!(ids(&out.addresses, AddressSpec::id), ["eth1/172.20.0.2/24"]);
        let a = &out.addresses[0];
        assert_eq!((a.scope, a.layer), (Scope::GLOBAL, ConfigLayer::Cmdline));
        // The gateway is inside 172.20.0.0/24: no on-link route.
        assert_eq!(ids(&out.routes, RouteSpec::id), ["inet4/172.20.0.1//1024"]);
        let r = &out.routes[0];
        assert_eq!(
            (r.protocol, r.kind, r.table, r.scope, r.out_link_name.as_str()),
            (
                RouteProtocol::BOOT,
                crate::resource::RouteType::UNICAST,
                RoutingTable::MAIN,
                Scope::GLOBAL,
                "eth1"
            )
        );
        assert_eq!(out.links, [LinkSpec::up("eth1", ConfigLayer::Cmdline)]);
        let h = &out.hostnames[0];
        assert_eq!(
            (h.hostname.as_str(), h.domainname.as_str(), h.layer),
            ("node-1", "example.org", ConfigLayer::Cmdline)
        );
        assert!(out.operators.is_empty() && out.resolvers.is_empty());
    }

    #[test]
    fn on_link_route_when_gateway_is_outside_the_prefix() {
        let out = specs("ip=10.0.0.5::192.168.1.1:24::eth0", &LinkView::default());
        assert_eq!(
            ids(&out.routes, RouteSpec::id),
            ["inet4//192.168.1.1/32/1024", "inet4/192.168.1.1//1024"]
        );
        let on_link = &out.routes[0];
        assert_eq!(on_link.src, Some("10.0.0.5".parse().unwrap()));
        assert_eq!((on_link.scope, on_link.protocol), (Scope::LINK, RouteProtocol::BOOT));
        // IPv6 never gets one.
        let out = specs("ip=[2001:db8::5]::[2001:db9::1]:64::eth0", &LinkView::default());
        assert_eq!(ids(&out.routes, RouteSpec::id), ["eth0/inet6/2001:db9::1//1024"]);
    }

    #[test]
    fn metrics_follow_entry_position() {
        let out = specs(
            "ip=10.0.0.5::10.0.0.1:24::eth0 ip=10.1.0.5::10.1.0.1:24::eth1",
            &LinkView::default(),
        );
        assert_eq!(
            ids(&out.routes, RouteSpec::id),
            ["inet4/10.0.0.1//1024", "inet4/10.1.0.1//1025"]
        );
    }

    #[test]
    fn operators_resolvers_and_time_servers() {
        let out = specs(
            "ip=eth0:dhcp,dhcp6 ip=10.0.0.5:::24::eth1:off:1.1.1.1:9.9.9.9:10.0.0.123",
            &LinkView::default(),
        );
        assert_eq!(ids(&out.operators, OperatorSpec::id), ["dhcp4/eth0", "dhcp6/eth0"]);
        assert_eq!(
            out.operators[0],
            OperatorSpec::dhcp4("eth0", 1024, ClientIdentifier::None, ConfigLayer::Cmdline)
        );
        let v6 = &out.operators[1];
        assert!(v6.require_up && v6.dhcp4.is_none());
        assert_eq!(v6.dhcp6.as_ref().map(|d| d.route_metric), Some(1024));
        assert_eq!(
            out.resolvers[0].dns_servers,
            ["1.1.1.1".parse::<std::net::IpAddr>().unwrap(), "9.9.9.9".parse().unwrap()]
        );
        let t = &out.time_servers[0];
        assert_eq!((t.time_servers.as_slice(), t.use_nts), (&["10.0.0.123".to_owned()][..], false));
    }

    #[test]
    fn aliases_are_resolved() {
        let lo = loopback();
        let eth1 = LinkStatus { alias: "uplink".into(), ..ether() };
        let eth31 = LinkStatus { alt_names: vec!["enxa".into()], ..ether() };
        let view = LinkView::new([("lo", &lo), ("eth1", &eth1), ("eth31", &eth31)]);
        let out = specs(
            "ip=10.0.0.5::10.0.0.1:24::uplink:dhcp vlan=vlan4094:enxa bond=bond0:uplink,eth2",
            &view,
        );
        assert_eq!(ids(&out.addresses, AddressSpec::id), ["eth1/10.0.0.5/24"]);
        assert_eq!(out.routes[0].out_link_name, "eth1");
        assert_eq!(ids(&out.operators, OperatorSpec::id), ["dhcp4/eth1"]);
        // docs/talos.md: Kernel command line: raw name for the VLAN's name, resolved name for its
        // parent.
        let vlan = out.links.iter().find(|l| l.kind == "vlan").unwrap();
        assert_eq!((vlan.name.as_str(), vlan.parent_name.as_str()), ("enxa.4094", "eth31"));
        // The ip= link and the bond slave are one spec.
        let eth1_specs: Vec<_> = out.links.iter().filter(|l| l.name == "eth1").collect();
        assert_eq!(eth1_specs.len(), 1);
        assert_eq!(eth1_specs[0].master_name(), Some("bond0"));
    }

    #[test]
    fn empty_device_means_first_non_loopback() {
        let (lo, eth0, eth1) = (loopback(), ether(), ether());
        let view = LinkView::new([("eth1", &eth1), ("lo", &lo), ("eth0", &eth0)]);
        let out = specs("ip=10.0.0.5::10.0.0.1:24", &view);
        assert_eq!(ids(&out.addresses, AddressSpec::id), ["eth0/10.0.0.5/24"]);
        assert_eq!(out.links[0].name, "eth0");

        // No such link yet: the entry waits, and later entries keep their metrics.
        let only_lo = LinkView::new([("lo", &lo)]);
        let out = specs("ip=10.0.0.5::10.0.0.1:24 ip=10.1.0.5::10.1.0.1:24::eth7", &only_lo);
        assert_eq!(ids(&out.addresses, AddressSpec::id), ["eth7/10.1.0.5/24"]);
        assert_eq!(ids(&out.routes, RouteSpec::id), ["inet4/10.1.0.1//1025"]);
    }

    #[test]
    fn one_link_spec_per_name() {
        let out = specs(
            "ip=10.0.0.5::10.0.0.1:24::eth0:off:9000 ip=[2001:db8::5]::[2001:db8::1]:64::eth0 \
             ip=10.2.0.5:::24::eth0.100:off:1400 vlan=eth0.100:eth0",
            &LinkView::default(),
        );
        assert_eq!(ids(&out.links, LinkSpec::id), ["eth0", "eth0.100"]);
        assert_eq!(out.links[0].mtu, 9000);
        assert_eq!(out.addresses.len(), 3);
        assert_eq!(
            ids(&out.routes, RouteSpec::id),
            ["inet4/10.0.0.1//1024", "eth0/inet6/2001:db8::1//1025"]
        );
        // The ip= spec became the VLAN, keeping its MTU.
        let vlan = &out.links[1];
        assert_eq!(
            (vlan.kind.as_str(), vlan.logical, vlan.mtu, vlan.parent_name.as_str()),
            ("vlan", true, 1400, "eth0")
        );
        assert_eq!(vlan.vlan.as_ref().map(|v| v.vid), Some(100));
        assert_eq!(vlan.link_type, LinkType::ETHER);
    }

    #[test]
    fn bond_specs() {
        let out = specs(
            "ip=10.0.0.5::10.0.0.1:24::bond0 bond=bond0:eth0,eth1:mode=active-backup:1500",
            &LinkView::default(),
        );
        assert_eq!(ids(&out.links, LinkSpec::id), ["bond0", "eth0", "eth1"]);
        let master = &out.links[0];
        assert_eq!(
            (master.kind.as_str(), master.logical, master.up, master.mtu, master.link_type),
            ("bond", true, true, 1500, LinkType::ETHER)
        );
        let bond = master.bond_master.as_ref().unwrap();
        assert_eq!(bond.mode, crate::resource::BondMode::ACTIVE_BACKUP);
        assert!(bond.use_carrier);
        let slave = out.links[1].bond_slave.as_ref().unwrap();
        assert_eq!((slave.master_name.as_str(), slave.slave_index), ("bond0", 0));
        assert_eq!(ids(&out.addresses, AddressSpec::id), ["bond0/10.0.0.5/24"]);
    }
}
