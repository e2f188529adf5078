// SPDX-License-Identifier: Apache-2.0
//! Legacy `machine.network` handled as Talos handles it: config text -> merged specs, and the
//! validation Talos does (`network/device_config.go`, `network/link_config.go`,
//! `v1alpha1_validation.go` in siderolabs/talos).

use std::net::SocketAddr;

use super::tests_specs::{doc, ether, ids, link, node_links, operator, specs_for};
use super::*;
use crate::resource::{
    BondSlave, BridgeSlave, LinkSpec, LinkStatus, LinkType, LinkView, OperatorSpec, WireguardPeer,
};

/// `parse` must fail; the error's path, and its line where `needle` is.
fn refused(yaml: &str, path: &str, needle: &str) -> ConfigError {
    let e = match parse(yaml) {
        Ok(_) => panic!("expected {path} to be refused:\n{yaml}"),
        Err(e) => e,
    };
    assert_eq!(e.path, path, "{e}");
    let line = yaml.lines().position(|l| l.contains(needle)).map(|i| i + 1);
    assert_eq!(e.line(), line, "{e}");
    e
}

#[test]
fn a_selector_configures_every_link_it_matches() {
    let yaml = doc(concat!(
        "    interfaces:\n",
        "      - deviceSelector: {driver: virtio_net}\n",
        "        mtu: 9000\n",
        "        dhcp: true\n",
        "        vlans: [{vlanId: 5, mtu: 1400}]\n",
    ));
    let specs = specs_for(&yaml, &node_links());
    let eths = ["eth0", "eth1", "eth2", "eth3", "eth4", "eth5"];
    for name in eths {
        let l = link(&specs, name);
        assert_eq!((l.up, l.mtu), (true, 9000), "{name}");
        assert_eq!(operator(&specs, &format!("dhcp4/{name}")).link_name, name);
        let vlan = link(&specs, &format!("{name}.5"));
        assert_eq!((vlan.parent_name.as_str(), vlan.mtu), (name, 1400));
    }
    assert!(specs.links.iter().all(|l| l.name != "enp1s0"), "igb does not match");
    assert_eq!(specs.operators.len(), eths.len());
    let cfg = parse(&yaml).unwrap();
    let links = node_links();
    let view = LinkView::new(links.iter().map(|(n, s)| (*n, s)));
    assert_eq!(cfg.mentioned_interfaces(&view), eths);
}

#[test]
fn entries_for_one_link_merge() {
    let yaml = doc(concat!(
        "    interfaces:\n",
        "      - {interface: eth3, mtu: 1400}\n",
        "      - {interface: eth3, addresses: [10.0.0.2/24], dhcp: true}\n",
        "      - {interface: eth1, mtu: 9000}\n",
        "      - {interface: bond0, bond: {interfaces: [eth1, eth2], mode: active-backup}}\n",
        "      - {interface: bond0, mtu: 1500}\n",
    ));
    let specs = specs_for(&yaml, &[]);
    assert_eq!(ids(&specs.links, LinkSpec::id), ["eth3", "eth1", "bond0", "eth2"]);
    assert_eq!(link(&specs, "eth3").mtu, 1400, "the first entry's MTU is kept");
    assert_eq!(ids(&specs.addresses, |a| a.id()), ["eth3/10.0.0.2/24"]);
    assert_eq!(ids(&specs.operators, OperatorSpec::id), ["dhcp4/eth3"]);
    let eth1 = link(&specs, "eth1");
    assert_eq!(eth1.mtu, 9000, "a bond port keeps its own MTU");
    assert_eq!(eth1.bond_slave, Some(BondSlave { master_name: "bond0".into(), slave_index: 0 }));
    let bond0 = link(&specs, "bond0");
    assert_eq!((bond0.kind.as_str(), bond0.mtu), ("bond", 1500), "bond kept, MTU added");
    assert!(bond0.bond_master.is_some());
}

/// eth0 and eth1 with MACs 02:aa:..; bond0 already exists with eth0's MAC (a bond takes its
/// first port's MAC), and sorts before both.
fn bond_links() -> Vec<(&'static str, LinkStatus)> {
    let mut bond = ether("02:aa:00:00:00:01", "", "");
    bond.kind = "bond".into();
    vec![
        ("bond0", bond),
        ("eth0", ether("02:aa:00:00:00:01", "virtio_net", "0000:00:03.0")),
        ("eth1", ether("02:aa:00:00:00:02", "virtio_net", "0000:00:04.0")),
        ("eth2", ether("02:bb:00:00:00:03", "virtio_net", "0000:00:05.0")),
    ]
}

const SELECTOR_BOND: &str = concat!(
    "    interfaces:\n",
    "      - interface: bond0\n",
    "        addresses: [10.0.0.2/24]\n",
    "        bond:\n",
    "          mode: active-backup\n",
    "          deviceSelectors: [{hardwareAddr: \"02:aa:*\"}]\n",
);

#[test]
fn bond_selectors_enslave_every_match_and_never_the_bond() {
    let specs = specs_for(&doc(SELECTOR_BOND), &bond_links());
    assert_eq!(ids(&specs.links, LinkSpec::id), ["bond0", "eth0", "eth1"]);
    let bond0 = link(&specs, "bond0");
    assert_eq!((bond0.kind.as_str(), bond0.bond_slave.as_ref()), ("bond", None));
    for (index, name) in ["eth0", "eth1"].into_iter().enumerate() {
        assert_eq!(
            link(&specs, name).bond_slave,
            Some(BondSlave { master_name: "bond0".into(), slave_index: index as u32 }),
        );
    }
    // Two selectors matching the same link: it joins once, at its first place.
    let yaml = doc(&SELECTOR_BOND.replace(
        "[{hardwareAddr: \"02:aa:*\"}]",
        "[{hardwareAddr: \"02:aa:*\"}, {driver: virtio_net}]",
    ));
    let specs = specs_for(&yaml, &bond_links());
    let slaves: Vec<_> = specs
        .links
        .iter()
        .filter_map(|l| l.bond_slave.as_ref().map(|s| (l.name.as_str(), s.slave_index)))
        .collect();
    assert_eq!(slaves, [("eth0", 0), ("eth1", 1), ("eth2", 2)]);
}

#[test]
fn a_bond_whose_selectors_match_nothing_yet_is_not_created() {
    let links: Vec<_> = bond_links().into_iter().filter(|(n, _)| *n == "eth2").collect();
    let specs = specs_for(&doc(SELECTOR_BOND), &links);
    assert!(specs.links.is_empty(), "{:?}", specs.links);
    assert!(specs.addresses.is_empty(), "nothing of the device until a port is there");
}

#[test]
fn a_bridge_runs_stp_unless_told_not_to() {
    let stp = |bridge: &str| {
        let yaml =
            doc(&format!("    interfaces:\n      - interface: br0\n        bridge: {bridge}\n"));
        link(&specs_for(&yaml, &[]), "br0").bridge_master.as_ref().unwrap().stp.enabled
    };
    assert!(stp("{interfaces: [eth1]}"), "no stp: on");
    assert!(stp("{interfaces: [eth1], stp: {}}"), "stp without enabled: on");
    assert!(!stp("{interfaces: [eth1], stp: {enabled: false}}"));
    assert!(stp("{interfaces: [eth1], stp: {enabled: true}}"));
}

#[test]
fn deprecated_cidr_is_an_address() {
    let yaml = doc(concat!(
        "    interfaces:\n",
        "      - interface: eth0\n",
        "        cidr: 10.0.0.5/24\n",
        "        vlans: [{vlanId: 7, cidr: 10.7.0.5/24}]\n",
        "      - {interface: eth1, cidr: 10.1.0.5}\n",
    ));
    let specs = specs_for(&yaml, &[]);
    assert_eq!(
        ids(&specs.addresses, |a| a.id()),
        ["eth0/10.0.0.5/24", "eth0.7/10.7.0.5/24", "eth1/10.1.0.5/32"]
    );
    let cfg = parse(&yaml).unwrap();
    assert!(
        cfg.warnings
            .iter()
            .any(|w| w.contains("interfaces[0].cidr (line 6): deprecated; use addresses (1 more")),
        "{:?}",
        cfg.warnings
    );
    assert!(cfg.warnings.iter().any(|w| w.contains("vlans[0].cidr (line 7)")));
}

#[test]
fn bridge_port_joins_the_bridge() {
    let yaml = doc(concat!(
        "    interfaces:\n",
        "      - {interface: br0, bridge: {interfaces: [eth1]}, addresses: [10.0.0.2/24]}\n",
        "      - {interface: eth5, bridgePort: {master: br0}, mtu: 9000}\n",
    ));
    let specs = specs_for(&yaml, &[]);
    let eth5 = link(&specs, "eth5");
    assert_eq!(eth5.bridge_slave, Some(BridgeSlave { master_name: "br0".into() }));
    assert_eq!((eth5.mtu, eth5.logical), (9000, false));
    assert!(link(&specs, "eth1").bridge_slave.is_some());
}

#[test]
fn dummy_device_is_a_dummy_link() {
    let yaml = doc(
        "    interfaces:\n      - {interface: dummy0, dummy: true, addresses: [169.254.9.1/32]}\n",
    );
    let specs = specs_for(&yaml, &[]);
    let d = link(&specs, "dummy0");
    assert_eq!(
        (d.logical, d.up, d.kind.as_str(), d.link_type),
        (true, true, "dummy", LinkType::ETHER)
    );
    assert_eq!(ids(&specs.addresses, |a| a.id()), ["dummy0/169.254.9.1/32"]);
}

const WG_PRIVATE: &str = "sPXZDmfUaPAyu0GDFi4oHh8hMJbR9Ee6lNYD7N3K2Hk=";
const WG_PEER_A: &str = "mhdgcLzt1OWBMLLIZvkYZfh5Nz/7ax7HhBSiNQOSAHU=";
const WG_PEER_B: &str = "Ml/tL4Ra6sCFJ7ZsvSakvX7plnqeyUOwGO4VDDfa9DA=";

fn wireguard_yaml() -> String {
    doc(&format!(
        concat!(
            "    interfaces:\n",
            "      - interface: wg0\n",
            "        addresses: [10.8.0.1/24]\n",
            "        mtu: 1420\n",
            "        wireguard:\n",
            "          privateKey: {private}\n",
            "          listenPort: 51821\n",
            "          firewallMark: 66\n",
            "          peers:\n",
            "            - publicKey: {b}\n",
            "              allowedIPs: [10.8.0.3/32]\n",
            "            - publicKey: {a}\n",
            "              endpoint: 192.0.2.1:51820\n",
            "              persistentKeepaliveInterval: 25s\n",
            "              allowedIPs: [10.8.0.2/32, 10.20.0.0/16]\n",
        ),
        private = WG_PRIVATE,
        a = WG_PEER_A,
        b = WG_PEER_B,
    ))
}

#[test]
fn wireguard_device_is_a_wireguard_link() {
    let specs = specs_for(&wireguard_yaml(), &[]);
    let wg = link(&specs, "wg0");
    assert_eq!(
        (wg.logical, wg.kind.as_str(), wg.link_type, wg.mtu),
        (true, "wireguard", LinkType::NONE, 1420)
    );
    let spec = wg.wireguard.as_ref().unwrap();
    assert_eq!(spec.private_key.unwrap().to_base64(), WG_PRIVATE);
    assert_eq!((spec.listen_port, spec.firewall_mark), (51821, 66));
    // Sorted by public key, as the kernel's answer is compared.
    assert_eq!(
        spec.peers,
        [
            WireguardPeer {
                public_key: WG_PEER_B.into(),
                allowed_ips: vec!["10.8.0.3/32".parse().unwrap()],
                ..WireguardPeer::default()
            },
            WireguardPeer {
                public_key: WG_PEER_A.into(),
                preshared_key: None,
                endpoint: Some("192.0.2.1:51820".parse::<SocketAddr>().unwrap()),
                persistent_keepalive_interval: 25,
                allowed_ips: vec!["10.8.0.2/32".parse().unwrap(), "10.20.0.0/16".parse().unwrap()],
                handshake_retry: 0,
            },
        ]
    );
    assert_eq!(ids(&specs.addresses, |a| a.id()), ["wg0/10.8.0.1/24"]);
    // The private key is never shown.
    let shown = serde_yaml::to_string(&parse(&wireguard_yaml()).unwrap()).unwrap();
    assert!(!shown.contains(WG_PRIVATE) && shown.contains("<redacted>"), "{shown}");
}

#[test]
fn wireguard_values_are_checked() {
    let yaml = wireguard_yaml();
    let e = refused(
        &yaml.replace("privateKey: sPXZ", "privateKey: xPXZ="),
        "machine.network.interfaces[0].wireguard.privateKey",
        "privateKey",
    );
    assert!(!e.to_string().contains("xPXZ"), "a private key is never echoed: {e}");
    refused(
        &yaml.replace("25s", "1500ms"),
        "machine.network.interfaces[0].wireguard.peers[1].persistentKeepaliveInterval",
        "persistentKeepaliveInterval",
    );
    refused(
        &yaml.replace("192.0.2.1:51820", "192.0.2.1"),
        "machine.network.interfaces[0].wireguard.peers[1].endpoint",
        "endpoint",
    );
    refused(
        &yaml.replace("[10.8.0.3/32]", "[10.8.0.3]"),
        "machine.network.interfaces[0].wireguard.peers[0].allowedIPs[0]",
        "10.8.0.3]",
    );
    refused(
        &yaml.replace("        mtu: 1420\n", "        dummy: true\n"),
        "machine.network.interfaces[0].dummy",
        "dummy: true",
    );
}

#[test]
fn a_link_has_one_master() {
    let yaml = doc(concat!(
        "    interfaces:\n",
        "      - interface: bond0\n",
        "        bond: {mode: active-backup, interfaces: [eth1, eth2]}\n",
        "      - interface: bond1\n",
        "        bond: {mode: active-backup, interfaces: [eth3, eth2]}\n",
    ));
    let e = refused(&yaml, "machine.network.interfaces[1].bond.interfaces[1]", "[eth3, eth2]");
    assert!(
        e.message.contains("\"bond0\" (machine.network.interfaces[0].bond.interfaces[1] (line 6))"),
        "names the first place: {e}"
    );
    let yaml = doc(concat!(
        "    interfaces:\n",
        "      - interface: bond0\n",
        "        bond: {mode: active-backup, interfaces: [eth1, eth2]}\n",
        "      - interface: br0\n",
        "        bridge: {interfaces: [eth2]}\n",
    ));
    refused(&yaml, "machine.network.interfaces[1].bridge.interfaces[0]", "[eth2]}");
    let yaml = doc(concat!(
        "    interfaces:\n",
        "      - {interface: br0, bridge: {interfaces: [eth1]}}\n",
        "      - {interface: br1, bridge: {interfaces: [eth1]}}\n",
    ));
    refused(&yaml, "machine.network.interfaces[1].bridge.interfaces[0]", "br1");
    let yaml = doc(concat!(
        "    interfaces:\n",
        "      - {interface: br0, bridge: {interfaces: [eth1]}}\n",
        "      - {interface: eth1, bridgePort: {master: br1}}\n",
    ));
    refused(&yaml, "machine.network.interfaces[1].bridgePort.master", "bridgePort");
    // The same bridge twice is one membership.
    let yaml = doc(concat!(
        "    interfaces:\n",
        "      - {interface: br0, bridge: {interfaces: [eth1]}}\n",
        "      - {interface: eth1, bridgePort: {master: br0}, mtu: 9000}\n",
    ));
    assert!(parse(&yaml).is_ok());
}

#[test]
fn a_port_has_no_addressing_of_its_own() {
    for (extra, key) in [
        ("addresses: [10.0.0.2/24]", "addresses"),
        ("cidr: 10.0.0.2/24", "cidr"),
        ("dhcp: true", "dhcp"),
        ("vip: {ip: 10.0.0.9}", "vip"),
    ] {
        let yaml = doc(&format!(
            concat!(
                "    interfaces:\n",
                "      - interface: bond0\n",
                "        bond: {{mode: active-backup, interfaces: [eth1]}}\n",
                "      - interface: eth1\n",
                "        {extra}\n",
            ),
            extra = extra
        ));
        let e = refused(&yaml, &format!("machine.network.interfaces[1].{key}"), extra);
        assert!(e.message.contains("bond0"), "{e}");
    }
    // Listed by the bridge and naming it as bridgePort: still a listed port.
    let yaml = doc(concat!(
        "    interfaces:\n",
        "      - {interface: br0, bridge: {interfaces: [eth1]}}\n",
        "      - {interface: eth1, bridgePort: {master: br0}, dhcp: true}\n",
    ));
    refused(&yaml, "machine.network.interfaces[1].dhcp", "dhcp: true");
    // Only listed ports: a bridgePort device (by name or selector) keeps its addressing.
    let yaml = doc(concat!(
        "    interfaces:\n",
        "      - {interface: eth1, bridgePort: {master: br0}, dhcp: true}\n",
        "      - {deviceSelector: {driver: igb}, bridgePort: {master: br0}, dhcp: true}\n",
    ));
    assert!(parse(&yaml).is_ok(), "{:?}", parse(&yaml).err());
    // An ignored device, and MTU, are fine.
    let yaml = doc(concat!(
        "    interfaces:\n",
        "      - {interface: br0, bridge: {interfaces: [eth1]}}\n",
        "      - {interface: eth1, mtu: 9000}\n",
        "      - {interface: eth1, ignore: true, dhcp: true}\n",
    ));
    assert!(parse(&yaml).is_ok());
}

#[test]
fn bond_options_need_their_option_or_mode() {
    let bond = |body: &str| {
        doc(&format!("    interfaces:\n      - interface: bond0\n        bond:\n{body}"))
    };
    let at = |key: &str| format!("machine.network.interfaces[0].bond.{key}");
    for (body, key) in [
        ("          updelay: 200\n", "updelay"),
        ("          downdelay: 200\n", "downdelay"),
        ("          miimon: 100\n          updelay: 150\n", "updelay"),
        ("          miimon: 100\n          downdelay: 250\n", "downdelay"),
        ("          mode: active-backup\n          lacpRate: slow\n", "lacpRate"),
        ("          mode: 802.3ad\n          adActorSystem: 00:11:22:33:44:55\n", "adActorSystem"),
        ("          mode: 802.3ad\n          arpValidate: none\n", "arpValidate"),
        ("          mode: balance-tlb\n          arpValidate: active\n", "arpValidate"),
        ("          mode: 802.3ad\n          primary: eth1\n", "primary"),
        ("          mode: balance-rr\n          primary: eth1\n", "primary"),
        ("          mode: balance-alb\n          arpInterval: 100\n", "arpInterval"),
        ("          mode: active-backup\n          packetsPerSlave: 2\n", "packetsPerSlave"),
        ("          mode: 802.3ad\n          tlbDynamicLb: 1\n", "tlbDynamicLb"),
        ("          mode: balance-xor\n          adActorSysPrio: 100\n", "adActorSysPrio"),
        ("          mode: active-backup\n          adUserPortKey: 3\n", "adUserPortKey"),
    ] {
        let yaml = bond(body);
        let needle = format!("{key}:");
        refused(&yaml, &at(key), &needle);
    }
    for body in [
        "          miimon: 100\n          updelay: 200\n          downdelay: 0\n",
        "          mode: 802.3ad\n          lacpRate: fast\n          adActorSysPrio: 100\n          adUserPortKey: 3\n",
        "          mode: active-backup\n          arpValidate: all\n          arpInterval: 100\n          primary: eth1\n",
        "          mode: balance-rr\n          packetsPerSlave: 3\n",
        "          mode: balance-alb\n          tlbDynamicLb: 1\n          primary: eth1\n",
    ] {
        let yaml = bond(body);
        assert!(parse(&yaml).is_ok(), "{yaml}: {:?}", parse(&yaml).err());
    }
}

#[test]
fn a_route_needs_a_network_or_a_gateway() {
    let yaml = doc(concat!(
        "    interfaces:\n",
        "      - interface: eth0\n",
        "        routes:\n",
        "          - {gateway: 10.0.0.1}\n",
        "          - {source: 10.0.0.2, metric: 10}\n",
    ));
    refused(&yaml, "machine.network.interfaces[0].routes[1]", "source: 10.0.0.2");
    let yaml = doc(concat!(
        "    interfaces:\n",
        "      - interface: eth0\n",
        "        vlans:\n",
        "          - vlanId: 4\n",
        "            routes: [{mtu: 1400}]\n",
    ));
    refused(&yaml, "machine.network.interfaces[0].vlans[0].routes[0]", "mtu: 1400");
}

#[test]
fn discovery_needs_the_cluster_identity() {
    let with = |cluster: &str| format!("version: v1alpha1\ncluster:\n{cluster}");
    let id = "  id: dGhpcyBpcyBhIDMyIGJ5dGUgY2x1c3RlciBpZGVudGlmaWVy\n";
    let secret = "  secret: c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI=\n";
    let on = "  discovery:\n    enabled: true\n";
    let e = refused(&with(on), "cluster.discovery.enabled", "enabled: true");
    assert!(e.message.contains("cluster.id"), "{e}");
    let e = refused(&with(&format!("{id}{on}")), "cluster.discovery.enabled", "enabled: true");
    assert!(e.message.contains("cluster.secret"), "{e}");
    assert!(parse(&with(&format!("{id}{secret}{on}"))).is_ok());
    // Off, or only the Kubernetes registry: no identity needed.
    assert!(parse(&with("  discovery: {enabled: false}\n")).is_ok());
    assert!(parse(&with(&format!("{on}    registries: {{service: {{disabled: true}}}}\n"))).is_ok());
    let yaml = with(&format!(
        "{id}{secret}{on}    registries: {{service: {{endpoint: \"https://d.example.org/v1\"}}}}\n"
    ));
    refused(&yaml, "cluster.discovery.registries.service.endpoint", "endpoint");
}

#[test]
fn cidr_and_addresses_together_are_refused() {
    let yaml = doc(concat!(
        "    interfaces:\n",
        "      - interface: eth0\n",
        "        addresses: [10.0.0.2/24]\n",
        "        cidr: 10.0.0.3/24\n",
    ));
    refused(&yaml, "machine.network.interfaces[0].cidr", "cidr:");
    let yaml = doc(concat!(
        "    interfaces:\n",
        "      - interface: eth0\n",
        "        vlans: [{vlanId: 3, addresses: [10.0.0.2/24], cidr: 10.0.0.3/24}]\n",
    ));
    refused(&yaml, "machine.network.interfaces[0].vlans[0].cidr", "cidr:");
}
