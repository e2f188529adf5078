// SPDX-License-Identifier: Apache-2.0
//! `to_specs`, `ignored_interfaces` and `mentioned_interfaces` tests.

use std::net::IpAddr;

use super::tests::FULL;
use super::*;
use crate::resource::{
    AddressFlags, BondMode, BondSlave, BridgeSlave, ClientIdentifier, ConfigLayer, Family,
    HardwareAddr, LayerSpecs, LinkSpec, LinkStatus, LinkType, LinkView, Operator, OperatorSpec,
    RouteProtocol, RouteType, RoutingTable, Scope, VlanProtocol,
};

pub(super) fn ether(mac: &str, driver: &str, bus: &str) -> LinkStatus {
    LinkStatus {
        link_type: LinkType::ETHER,
        hardware_addr: mac.parse().unwrap(),
        driver: driver.into(),
        bus_path: bus.into(),
        ..LinkStatus::default()
    }
}

/// The node's links: eth0..eth5 (virtio), enp1s0 (igb, MAC 00:1a:..), a bond and loopback.
pub(super) fn node_links() -> Vec<(&'static str, LinkStatus)> {
    let mut bond = ether("02:00:00:00:00:99", "", "");
    bond.kind = "bond".into();
    vec![
        ("eth0", ether("02:00:00:00:00:00", "virtio_net", "0000:00:03.0")),
        ("eth1", ether("02:00:00:00:00:01", "virtio_net", "0000:00:04.0")),
        ("eth2", ether("02:00:00:00:00:02", "virtio_net", "0000:00:05.0")),
        ("eth3", ether("02:00:00:00:00:03", "virtio_net", "0000:00:06.0")),
        ("eth4", ether("02:00:00:00:00:04", "virtio_net", "0000:00:07.0")),
        ("eth5", ether("02:00:00:00:00:05", "virtio_net", "0000:00:08.0")),
        ("enp1s0", ether("00:1a:2b:3c:4d:5e", "igb", "0000:01:00.0")),
        ("bond9", bond),
        ("lo", LinkStatus { link_type: LinkType::LOOPBACK, ..LinkStatus::default() }),
    ]
}

pub(super) fn specs_for(yaml: &str, links: &[(&'static str, LinkStatus)]) -> LayerSpecs {
    let cfg = parse(yaml).unwrap_or_else(|e| panic!("{e}"));
    to_specs(&cfg, &LinkView::new(links.iter().map(|(n, s)| (*n, s))))
}

pub(super) fn link<'a>(specs: &'a LayerSpecs, name: &str) -> &'a LinkSpec {
    specs
        .links
        .iter()
        .find(|l| l.name == name)
        .unwrap_or_else(|| panic!("no link {name}: {:?}", specs.links))
}

pub(super) fn operator<'a>(specs: &'a LayerSpecs, id: &str) -> &'a OperatorSpec {
    specs.operators.iter().find(|o| o.id() == id).unwrap_or_else(|| panic!("no operator {id}"))
}

pub(super) fn ids<T>(list: &[T], id: impl Fn(&T) -> String) -> Vec<String> {
    list.iter().map(id).collect()
}

pub(super) fn doc(network: &str) -> String {
    format!("version: v1alpha1\nmachine:\n  network:\n{network}")
}

#[test]
fn addresses_bare_ip_is_full_length() {
    let specs = specs_for(FULL, &node_links());
    let addrs: Vec<_> = specs.addresses.iter().map(|a| a.id()).collect();
    assert_eq!(addrs, ["eth0/10.0.0.2/24", "eth0/10.0.0.3/32", "eth0.100/192.168.100.2/24"]);
    let a = &specs.addresses[1];
    assert_eq!(
        (a.family, a.scope, a.flags, a.layer),
        (Family::Inet4, Scope::GLOBAL, AddressFlags::PERMANENT, ConfigLayer::Configuration)
    );
    let v6 = specs_for(
        &doc("    interfaces:\n      - interface: eth0\n        addresses: [\"2001:db8::5\"]\n"),
        &[],
    );
    assert_eq!(v6.addresses[0].id(), "eth0/2001:db8::5/128");
}

#[test]
fn routes() {
    let specs = specs_for(FULL, &node_links());
    let r = &specs.routes[0];
    assert_eq!(r.id(), "inet4/10.0.0.1//1024");
    assert_eq!(r.dst, None, "0.0.0.0/0 is the default route");
    assert_eq!(r.src, Some("10.0.0.2".parse().unwrap()));
    assert_eq!((r.mtu, r.out_link_name.as_str()), (1500, "eth0"));
    assert_eq!(
        (r.protocol, r.kind, r.table, r.layer),
        (RouteProtocol::STATIC, RouteType::UNICAST, RoutingTable::MAIN, ConfigLayer::Configuration)
    );

    let specs = specs_for(
        &doc(concat!(
            "    interfaces:\n      - interface: eth0\n        routes:\n",
            "          - gateway: 10.0.0.1\n",
            "          - {network: 10.9.0.0/16, gateway: 10.0.0.1, metric: 0, table: 100}\n",
            "          - {network: 224.0.0.0/4, table: local, metric: 5}\n",
            "          - {gateway: \"fe80::1\"}\n",
            "          - {network: \"2001:db8::/64\"}\n",
        )),
        &[],
    );
    assert_eq!(
        ids(&specs.routes, |r| r.id()),
        [
            "inet4/10.0.0.1//1024",
            "100/inet4/10.0.0.1/10.9.0.0/16/1024",
            "local/inet4//224.0.0.0/4/5",
            "eth0/inet6/fe80::1//1024",
            "eth0/inet6//2001:db8::/64/1024",
        ]
    );
    assert_eq!(specs.routes[1].priority, 1024, "metric 0 becomes 1024");
    assert_eq!(specs.routes[2].kind, RouteType::MULTICAST);
    assert_eq!(specs.routes[2].scope, Scope::LINK);
    assert_eq!(specs.routes[3].family, Family::Inet6);
}

#[test]
fn links_bond_and_members() {
    let specs = specs_for(FULL, &node_links());
    let eth0 = link(&specs, "eth0");
    assert_eq!((eth0.up, eth0.mtu, eth0.logical), (true, 1500, false));
    let bond = link(&specs, "bond0");
    assert!(bond.logical && bond.up);
    assert_eq!((bond.kind.as_str(), bond.link_type), ("bond", LinkType::ETHER));
    let master = bond.bond_master.as_ref().unwrap();
    assert_eq!(master.mode, BondMode::LACP);
    assert_eq!((master.mii_mon, master.up_delay, master.down_delay), (100, 200, 200));
    assert_eq!(master.arp_ip_targets, ["10.0.0.1".parse::<std::net::Ipv4Addr>().unwrap()]);
    assert_eq!(master.ad_actor_sys_prio, 65535);
    assert!(master.use_carrier);
    // interfaces first, then the selector's match (enp1s0 has MAC 00:1a:...).
    for (index, name) in ["eth1", "eth2", "enp1s0"].into_iter().enumerate() {
        let member = link(&specs, name);
        assert!(member.up && !member.logical);
        assert_eq!(
            member.bond_slave,
            Some(BondSlave { master_name: "bond0".into(), slave_index: index as u32 })
        );
    }
    // Explicit `useCarrier: false` survives fill_defaults.
    let specs = specs_for(
        &doc("    interfaces:\n      - interface: bond1\n        bond: {interfaces: [eth1], mode: active-backup, useCarrier: false}\n"),
        &[],
    );
    let master = link(&specs, "bond1").bond_master.clone().unwrap();
    assert!(!master.use_carrier);
    assert_eq!(master.missed_max, 2, "defaults filled");
}

#[test]
fn bridge_and_members() {
    let specs = specs_for(FULL, &node_links());
    let br = link(&specs, "br0");
    assert!(br.logical && br.up);
    assert_eq!(br.kind, "bridge");
    let master = br.bridge_master.as_ref().unwrap();
    assert!(master.stp.enabled && !master.vlan.filtering_enabled);
    for name in ["eth3", "eth4"] {
        assert_eq!(
            link(&specs, name).bridge_slave,
            Some(BridgeSlave { master_name: "br0".into() })
        );
    }
}

#[test]
fn vlans() {
    let specs = specs_for(FULL, &node_links());
    let vlan = link(&specs, "eth0.100");
    assert!(vlan.logical && vlan.up);
    assert_eq!(
        (vlan.kind.as_str(), vlan.link_type, vlan.parent_name.as_str(), vlan.mtu),
        ("vlan", LinkType::ETHER, "eth0", 1400)
    );
    let v = vlan.vlan.as_ref().unwrap();
    assert_eq!((v.vid, v.protocol), (100, VlanProtocol::DOT1Q));
    assert_eq!(operator(&specs, "vip/eth0.100/192.168.100.50").link_name, "eth0.100");

    // Named after the raw interface name, parented on the resolved one (alias `uplink`).
    let mut links = node_links();
    links[0].1.alias = "uplink".into();
    let specs = specs_for(
        &doc(concat!(
            "    interfaces:\n      - interface: uplink\n",
            "        vlans: [{vlanId: 7, dhcp: true, routes: [{gateway: 10.7.0.1}]}]\n",
        )),
        &links,
    );
    let vlan = link(&specs, "uplink.7");
    assert_eq!(vlan.parent_name, "eth0");
    assert!(specs.links.iter().any(|l| l.name == "eth0" && l.up));
    assert_eq!(specs.routes[0].out_link_name, "uplink.7");
    assert_eq!(operator(&specs, "dhcp4/uplink.7").operator, Operator::Dhcp4);
}

#[test]
fn dhcp_operators() {
    let specs = specs_for(
        &doc(concat!(
            "    interfaces:\n",
            "      - {interface: eth0, dhcp: true}\n",
            "      - {interface: eth1, dhcp: true, dhcpOptions: {routeMetric: 2048, ipv6: true, duidv6: \"00:01:02:03\"}}\n",
            "      - {interface: eth2, dhcp: true, dhcpOptions: {ipv4: false, ipv6: true}}\n",
            "      - {interface: eth3, dhcp: false, dhcpOptions: {ipv6: true}}\n",
        )),
        &[],
    );
    assert_eq!(
        ids(&specs.operators, OperatorSpec::id),
        ["dhcp4/eth0", "dhcp4/eth1", "dhcp6/eth1", "dhcp6/eth2"]
    );
    assert_eq!(
        specs.operators[0],
        OperatorSpec::dhcp4("eth0", 1024, ClientIdentifier::None, ConfigLayer::Configuration)
    );
    assert_eq!(specs.operators[1].dhcp4.as_ref().unwrap().route_metric, 2048);
    let v6 = specs.operators[2].dhcp6.as_ref().unwrap();
    assert_eq!(v6.route_metric, 2048);
    assert_eq!(v6.client_identifier, ClientIdentifier::Duid("00010203".into()));
    assert!(specs.operators[2].require_up);
    assert_eq!(
        specs.operators[3].dhcp6.as_ref().unwrap().client_identifier,
        ClientIdentifier::None
    );
}

#[test]
fn vip_operator() {
    let specs = specs_for(FULL, &node_links());
    let vip = operator(&specs, "vip/eth0/10.5.0.50");
    assert_eq!(vip.operator, Operator::Vip);
    assert!(vip.require_up);
    let v = vip.vip.as_ref().unwrap();
    assert_eq!(v.ip, "10.5.0.50".parse::<IpAddr>().unwrap());
    assert!(v.gratuitous_arp);
    assert_eq!(vip.layer, ConfigLayer::Configuration);
}

#[test]
fn ignored_devices_produce_nothing() {
    let yaml = doc(concat!(
        "    interfaces:\n",
        "      - {interface: eth0, ignore: true, addresses: [10.0.0.2/24], dhcp: true, mtu: 9000,\n",
        "         vlans: [{vlanId: 5}], vip: {ip: 10.0.0.50}}\n",
        "      - {interface: eth1, mtu: 9000}\n",
        "      - {deviceSelector: {driver: igb}, ignore: true}\n",
    ));
    let specs = specs_for(&yaml, &node_links());
    assert_eq!(ids(&specs.links, LinkSpec::id), ["eth1"]);
    assert!(specs.addresses.is_empty() && specs.operators.is_empty());
    let cfg = parse(&yaml).unwrap();
    let links = node_links();
    let view = LinkView::new(links.iter().map(|(n, s)| (*n, s)));
    assert_eq!(cfg.ignored_interfaces(&view), ["enp1s0", "eth0"]);
    assert_eq!(cfg.mentioned_interfaces(&view), ["enp1s0", "eth0", "eth1"]);
}

#[test]
fn device_selectors() {
    let links = node_links();
    let by = |selector: &str| {
        let yaml = doc(&format!(
            "    interfaces:\n      - deviceSelector: {selector}\n        mtu: 1234\n"
        ));
        ids(&specs_for(&yaml, &links).links, LinkSpec::id)
    };
    assert_eq!(by("{hardwareAddr: \"00:1A:2b:*\"}"), ["enp1s0"]);
    let eths = ["eth0", "eth1", "eth2", "eth3", "eth4", "eth5"];
    assert_eq!(by("{hardwareAddr: \"02:00:00:00:00:0?\"}"), eths, "every match, by name");
    assert_eq!(by("{driver: virtio_net}"), eths);
    assert_eq!(by("{driver: virtio_net, busPath: \"0000:00:05*\"}"), ["eth2"]);
    // Every link that is not physical, loopback included (Talos's selector does the same).
    assert_eq!(by("{physical: false}"), ["bond9", "lo"]);
    assert_eq!(by("{physical: true, driver: igb}"), ["enp1s0"]);
    assert!(by("{driver: e1000}").is_empty(), "no match yet: nothing");
    assert!(by("{permanentAddr: \"00:1a:*\"}").is_empty(), "no permanent MAC known");
    assert!(by("{pciID: \"8086:*\"}").is_empty(), "no PCI ID known");

    let mut links = node_links();
    links[3].1.pci_id = "8086:100E".into();
    let yaml = doc("    interfaces:\n      - deviceSelector: {pciID: \"8086:100e\"}\n");
    assert_eq!(ids(&specs_for(&yaml, &links).links, LinkSpec::id), [links[3].0]);

    let mut links = node_links();
    links[2].1.permanent_addr = Some(HardwareAddr(vec![0xaa, 0, 0, 0, 0, 2]));
    let yaml = doc("    interfaces:\n      - deviceSelector: {permanentAddr: \"aa:*\"}\n");
    assert_eq!(ids(&specs_for(&yaml, &links).links, LinkSpec::id), ["eth2"]);
}

#[test]
fn one_spec_per_id() {
    let yaml = doc(concat!(
        "    interfaces:\n",
        "      - {interface: eth1, mtu: 9000}\n",
        "      - {interface: bond0, bond: {interfaces: [eth1, eth2], mode: active-backup}}\n",
        "      - {interface: eth3, addresses: [10.0.0.2/24], routes: [{gateway: 10.0.0.1}]}\n",
        "      - {interface: eth3, addresses: [10.0.0.2/24], mtu: 1400, routes: [{gateway: 10.0.0.1, mtu: 1300}]}\n",
    ));
    let specs = specs_for(&yaml, &[]);
    assert_eq!(ids(&specs.links, LinkSpec::id), ["eth1", "bond0", "eth2", "eth3"]);
    let eth1 = link(&specs, "eth1");
    assert_eq!((eth1.mtu, eth1.bond_slave.is_some()), (9000, true), "membership added to it");
    assert_eq!(link(&specs, "eth3").mtu, 1400);
    assert_eq!(specs.addresses.len(), 1);
    assert_eq!(specs.routes.len(), 1);
    assert_eq!(specs.routes[0].mtu, 1300, "the later route wins");
    let cfg = parse(&yaml).unwrap();
    assert_eq!(cfg.mentioned_interfaces(&LinkView::default()), ["bond0", "eth1", "eth2", "eth3"]);
}

#[test]
fn hostname_resolvers_time() {
    let specs = specs_for(FULL, &node_links());
    let h = &specs.hostnames[0];
    assert_eq!((h.hostname.as_str(), h.domainname.as_str()), ("node-1", "example.org"));
    let r = &specs.resolvers[0];
    assert_eq!(r.dns_servers.len(), 2);
    assert_eq!(r.search_domains, ["example.org"]);
    assert!(r.search_domains_overridden);
    let t = &specs.time_servers[0];
    assert_eq!(t.time_servers, ["time.cloudflare.com"]);
    assert!(!t.use_nts);

    // Nameservers without searchDomains: not overridden.
    let specs = specs_for(&doc("    nameservers: [9.9.9.9]\n"), &[]);
    assert_eq!(specs.resolvers[0].dns_servers, ["9.9.9.9".parse::<IpAddr>().unwrap()]);
    assert!(!specs.resolvers[0].search_domains_overridden);
    assert!(specs.hostnames.is_empty() && specs.time_servers.is_empty());

    // An explicit empty searchDomains clears lower layers' domains.
    let specs = specs_for(&doc("    searchDomains: []\n"), &[]);
    assert!(specs.resolvers[0].search_domains_overridden);
    assert!(specs.resolvers[0].dns_servers.is_empty());

    let specs = specs_for(&doc("    hostname: solo\n"), &[]);
    assert!(specs.resolvers.is_empty());
    assert_eq!(specs.hostnames[0].domainname, "");
}

#[test]
fn everything_is_layer_configuration() {
    let specs = specs_for(FULL, &node_links());
    assert!(specs.links.iter().all(|l| l.layer == ConfigLayer::Configuration));
    assert!(specs.routes.iter().all(|r| r.layer == ConfigLayer::Configuration));
    assert!(specs.operators.iter().all(|o| o.layer == ConfigLayer::Configuration));
    // The FULL device selector (virtio, physical, bus 0000:00:08*) picks eth5 and runs DHCP.
    assert_eq!(operator(&specs, "dhcp4/eth5").link_name, "eth5");
    let cfg = parse(FULL).unwrap();
    let links = node_links();
    let view = LinkView::new(links.iter().map(|(n, s)| (*n, s)));
    assert_eq!(
        cfg.mentioned_interfaces(&view),
        ["bond0", "br0", "enp1s0", "eth0", "eth1", "eth2", "eth3", "eth4", "eth5"]
    );
    assert!(cfg.ignored_interfaces(&view).is_empty());
}
