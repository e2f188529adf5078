// SPDX-License-Identifier: Apache-2.0
//! The link documents: Talos's own example documents
//! (`pkg/machinery/config/types/network/testdata`), each parsed and turned into the specs
//! Talos's documentation says it means; the rules between them and the v1alpha1 document;
//! and `migrate` of v1alpha1 devices planning to the same specs.

use std::net::IpAddr;

use super::tests_specs::{ether, link, node_links, operator, specs_for};
use super::*;
use crate::resource::{
    AdSelect, BondMode, BondSlave, BondXmitHashPolicy, BridgeSlave, ClientIdentifier, ConfigLayer,
    FailOverMac, Family, HardwareAddr, LacpRate, LayerSpecs, LinkStatus, LinkType, LinkView,
    RouteType, RoutingTable, Scope, VlanProtocol, VrfMasterSpec, VrfSlave,
};

fn errors(yaml: &str) -> Vec<String> {
    let report = check(yaml);
    assert!(!report.errors.is_empty(), "expected errors, got {:?}", report.config.documents);
    report.errors.iter().map(ToString::to_string).collect()
}

fn addresses(specs: &LayerSpecs, link: &str) -> Vec<(String, u32)> {
    specs
        .addresses
        .iter()
        .filter(|a| a.link_name == link)
        .map(|a| (a.address.to_string(), a.priority))
        .collect()
}

#[test]
fn link_config_example() {
    let yaml = "apiVersion: v1alpha1\nkind: LinkConfig\nname: enp0s1\nup: true\nmtu: 9000\n\
                addresses:\n    - address: 192.168.1.100/24\n    - address: 2001:db8::1/64\n      routePriority: 100\n\
                routes:\n    - destination: 10.3.5.0/24\n      gateway: 10.3.5.1\n    - gateway: fe80::1\n      type: blackhole\n\
                multicast: true\n";
    let specs = specs_for(yaml, &[]);
    let l = link(&specs, "enp0s1");
    assert_eq!((l.up, l.mtu, l.multicast, l.logical), (true, 9000, Some(true), false));
    assert_eq!(l.layer, ConfigLayer::Configuration);
    assert_eq!(
        addresses(&specs, "enp0s1"),
        [("192.168.1.100/24".to_owned(), 0), ("2001:db8::1/64".to_owned(), 100)]
    );
    let via = &specs.routes[0];
    assert_eq!(via.dst, Some("10.3.5.0/24".parse().unwrap()));
    assert_eq!(via.gateway, Some("10.3.5.1".parse::<IpAddr>().unwrap()));
    assert_eq!((via.out_link_name.as_str(), via.priority), ("enp0s1", 1024));
    assert_eq!((via.table, via.scope), (RoutingTable::MAIN, Scope::GLOBAL));
    // A blackhole default route of the gateway's family; the gateway is not its next hop.
    let hole = &specs.routes[1];
    assert_eq!(
        (hole.family, hole.kind, hole.gateway, hole.dst),
        (Family::Inet6, RouteType::BLACKHOLE, None, None)
    );
    // Link documents take links over: no default DHCP or link-up anywhere else.
    assert!(!parse(yaml).unwrap().runs_default_link_config());
}

#[test]
fn a_link_absent_up_is_up_and_down_is_kept() {
    let specs = specs_for("apiVersion: v1alpha1\nkind: LinkConfig\nname: eth0\n", &[]);
    assert!(link(&specs, "eth0").up);
    let specs = specs_for("apiVersion: v1alpha1\nkind: LinkConfig\nname: eth0\nup: false\n", &[]);
    assert!(!link(&specs, "eth0").up);
}

#[test]
fn bond_config_example() {
    let yaml = "apiVersion: v1alpha1\nkind: BondConfig\nname: agg.0\nlinks:\n    - eth0\n    - eth1\n\
                bondMode: 802.3ad\nmiimon: 100\nupdelay: 200\ndowndelay: 200\nxmitHashPolicy: layer3+4\n\
                lacpRate: slow\nfailOverMac: follow\nadActorSysPrio: 65535\nresendIGMP: 1\npacketsPerSlave: 1\n\
                up: true\naddresses:\n    - address: 1.2.3.4/24\n";
    let specs = specs_for(yaml, &node_links());
    let bond = link(&specs, "agg.0");
    assert!(bond.logical && bond.up);
    assert_eq!((bond.kind.as_str(), bond.link_type), ("bond", LinkType::ETHER));
    let m = bond.bond_master.as_ref().unwrap();
    assert_eq!(m.mode, BondMode::LACP);
    assert_eq!((m.mii_mon, m.up_delay, m.down_delay), (100, 200, 200));
    assert_eq!(m.xmit_hash_policy, BondXmitHashPolicy::LAYER34);
    assert_eq!((m.lacp_rate, m.fail_over_mac), (LacpRate::SLOW, FailOverMac::FOLLOW));
    assert_eq!((m.ad_actor_sys_prio, m.resend_igmp, m.packets_per_slave), (65535, 1, 1));
    assert_eq!(m.ad_select, AdSelect::default());
    assert!(m.use_carrier);
    for (index, name) in ["eth0", "eth1"].into_iter().enumerate() {
        let member = link(&specs, name);
        assert!(member.up && !member.logical);
        let slave = BondSlave { master_name: "agg.0".into(), slave_index: index as u32 };
        assert_eq!(member.bond_slave, Some(slave));
    }
    assert_eq!(addresses(&specs, "agg.0"), [("1.2.3.4/24".to_owned(), 0)]);
    // 802.3ad without the monitor settings loads, with Talos's warnings.
    let cfg = parse(
        "apiVersion: v1alpha1\nkind: BondConfig\nname: bond0\nlinks: [eth0]\nbondMode: 802.3ad\n",
    )
    .unwrap();
    assert_eq!(cfg.warnings.len(), 3, "{:?}", cfg.warnings);
    assert!(cfg.warnings[0].contains("miimon was not specified for 802.3ad bond"));
}

#[test]
fn bond_rules() {
    let e = errors("apiVersion: v1alpha1\nkind: BondConfig\nname: bond0\nlinks: []\n");
    assert!(e.iter().any(|e| e.contains("links") && e.contains("at least one link")), "{e:?}");
    assert!(e.iter().any(|e| e.contains("bond mode must be specified")), "{e:?}");
    let e = errors(
        "apiVersion: v1alpha1\nkind: BondConfig\nname: bond0\nlinks: [eth0]\nbondMode: 802.3xx\n",
    );
    assert!(e[0].contains("bondMode") && e[0].contains("invalid bond mode"), "{e:?}");
    let e = errors(
        "apiVersion: v1alpha1\nkind: BondConfig\nname: bond0\nlinks: [eth0, bond0]\nbondMode: active-backup\n",
    );
    assert!(e[0].contains("own member"), "{e:?}");
    let e = errors("apiVersion: v1alpha1\nkind: BondConfig\nname: bond-with-a-long-name\nlinks: [eth0]\nbondMode: active-backup\n");
    assert!(e[0].contains("name (line 3"), "{e:?}");
}

#[test]
fn a_member_keeps_its_own_link_document() {
    // The member's MTU from its LinkConfig and its membership from the bond, in either order.
    for order in [false, true] {
        let link_doc = "apiVersion: v1alpha1\nkind: LinkConfig\nname: eth1\nmtu: 9000\n";
        let bond_doc = "apiVersion: v1alpha1\nkind: BondConfig\nname: bond0\nlinks: [eth1]\nbondMode: active-backup\n";
        let yaml = if order {
            format!("{link_doc}---\n{bond_doc}")
        } else {
            format!("{bond_doc}---\n{link_doc}")
        };
        let specs = specs_for(&yaml, &[]);
        let eth1 = link(&specs, "eth1");
        assert_eq!(eth1.mtu, 9000, "order {order}");
        assert_eq!(eth1.bond_slave.as_ref().map(|s| s.master_name.as_str()), Some("bond0"));
    }
}

#[test]
fn bridge_config_example() {
    let yaml = "apiVersion: v1alpha1\nkind: BridgeConfig\nname: bridge.1\nlinks:\n    - eno1\n    - eno5\n\
                stp:\n    enabled: true\nvlan:\n    filtering: false\nup: true\naddresses:\n    - address: 1.2.3.5/32\n";
    let specs = specs_for(yaml, &[]);
    let br = link(&specs, "bridge.1");
    assert_eq!((br.kind.as_str(), br.logical), ("bridge", true));
    let m = br.bridge_master.as_ref().unwrap();
    assert!(m.stp.enabled && !m.vlan.filtering_enabled);
    for port in ["eno1", "eno5"] {
        assert_eq!(
            link(&specs, port).bridge_slave,
            Some(BridgeSlave { master_name: "bridge.1".into() })
        );
    }
    // The typed form has no STP default of its own: absent is off.
    let specs =
        specs_for("apiVersion: v1alpha1\nkind: BridgeConfig\nname: br0\nlinks: [eno1]\n", &[]);
    assert!(!link(&specs, "br0").bridge_master.as_ref().unwrap().stp.enabled);
}

#[test]
fn vlan_config_example() {
    let yaml =
        "apiVersion: v1alpha1\nkind: VLANConfig\nname: enp0s3.2\nvlanID: 2\nvlanMode: 802.1q\n\
                parent: enp0s3\nup: true\naddresses:\n    - address: 192.168.1.100/32\n";
    let specs = specs_for(yaml, &[]);
    let v = link(&specs, "enp0s3.2");
    assert_eq!((v.kind.as_str(), v.parent_name.as_str(), v.logical), ("vlan", "enp0s3", true));
    let vlan = v.vlan.as_ref().unwrap();
    assert_eq!((vlan.vid, vlan.protocol), (2, VlanProtocol::DOT1Q));
    // The parent is not configured by a VLAN document.
    assert!(specs.links.iter().all(|l| l.name != "enp0s3"));
    let specs = specs_for(
        "apiVersion: v1alpha1\nkind: VLANConfig\nname: qinq\nvlanID: 7\nvlanMode: 802.1ad\nparent: eth0\n",
        &[],
    );
    assert_eq!(link(&specs, "qinq").vlan.as_ref().unwrap().protocol, VlanProtocol::DOT1AD);
    let e = errors("apiVersion: v1alpha1\nkind: VLANConfig\nname: v\nvlanID: 4095\nparent: eth0\n");
    assert!(e[0].contains("vlanID (line 4") && e[0].contains("between 1 and 4094"), "{e:?}");
    let e = errors("apiVersion: v1alpha1\nkind: VLANConfig\nname: v\nvlanID: 5\nparent: \"\"\n");
    assert!(e[0].contains("parent must be specified"), "{e:?}");
}

#[test]
fn dummy_link_config_example() {
    let yaml = "apiVersion: v1alpha1\nkind: DummyLinkConfig\nname: dummy1\nhardwareAddr: 2e:3c:4d:5e:6f:70\n\
                up: true\naddresses:\n    - address: 192.168.1.100/32\n";
    let specs = specs_for(yaml, &[]);
    let d = link(&specs, "dummy1");
    assert_eq!((d.kind.as_str(), d.logical, d.link_type), ("dummy", true, LinkType::ETHER));
    assert_eq!(d.hardware_addr, Some("2e:3c:4d:5e:6f:70".parse::<HardwareAddr>().unwrap()));
    assert_eq!(addresses(&specs, "dummy1"), [("192.168.1.100/32".to_owned(), 0)]);
}

#[test]
fn vrf_config_example() {
    let yaml =
        "apiVersion: v1alpha1\nkind: VRFConfig\nname: vrf-blue\nlinks:\n    - eno1\n    - eno5\n\
                table: \"123\"\nup: true\naddresses:\n    - address: 1.2.3.5/32\n";
    let specs = specs_for(yaml, &[]);
    let vrf = link(&specs, "vrf-blue");
    assert_eq!((vrf.kind.as_str(), vrf.logical), ("vrf", true));
    assert_eq!(vrf.vrf_master, Some(VrfMasterSpec { table: RoutingTable(123) }));
    for member in ["eno1", "eno5"] {
        let spec = link(&specs, member);
        assert_eq!(spec.vrf_slave, Some(VrfSlave { master_name: "vrf-blue".into() }));
        assert_eq!(spec.master_name(), Some("vrf-blue"));
    }
    let e = errors("apiVersion: v1alpha1\nkind: VRFConfig\nname: v\ntable: main\n");
    assert!(e[0].contains("table (line 4") && e[0].contains("of its own"), "{e:?}");
}

#[test]
fn wireguard_config_example() {
    let yaml = "apiVersion: v1alpha1\nkind: WireguardConfig\nname: wg.int\n\
                privateKey: GA1E1VB+g41Dl0+UH2TMW9C5953y+moVg6JIIqkJbmw=\nlistenPort: 5042\nfirewallMark: 176\n\
                peers:\n    - publicKey: 735jkJdcVDninU5PzLJ/S+bfN6Q3QOk6svWrVLMJQAk=\n      allowedIPs:\n        - 192.168.1.0/24\n\
                \x20   - publicKey: uvdlJNva1X8/OCOZM+0gGT4Yu9x20odd3AWbbQUF7nM=\n      presharedKey: 6j4UMxwszrHVZZUjY8/SFsZMjgaHkxV7yp9Tz05btho=\n      endpoint: 10.3.4.3:2222\n\
                up: true\naddresses:\n    - address: 192.168.1.100/32\n";
    let specs = specs_for(yaml, &[]);
    let wg = link(&specs, "wg.int");
    assert_eq!((wg.kind.as_str(), wg.link_type, wg.logical), ("wireguard", LinkType::NONE, true));
    let dev = wg.wireguard.as_ref().unwrap();
    assert_eq!(
        dev.private_key.as_ref().map(|k| k.to_base64()).as_deref(),
        Some("GA1E1VB+g41Dl0+UH2TMW9C5953y+moVg6JIIqkJbmw=")
    );
    assert_eq!((dev.listen_port, dev.firewall_mark), (5042, 176));
    let keys: Vec<&str> = dev.peers.iter().map(|p| p.public_key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "735jkJdcVDninU5PzLJ/S+bfN6Q3QOk6svWrVLMJQAk=",
            "uvdlJNva1X8/OCOZM+0gGT4Yu9x20odd3AWbbQUF7nM="
        ]
    );
    assert_eq!(dev.peers[0].allowed_ips, ["192.168.1.0/24".parse().unwrap()]);
    assert_eq!(dev.peers[1].endpoint, Some("10.3.4.3:2222".parse().unwrap()));
    assert!(dev.peers[1].preshared_key.is_some());
    // Keys never show in an error.
    let e = errors("apiVersion: v1alpha1\nkind: WireguardConfig\nname: wg0\nprivateKey: c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0\n");
    assert!(!e[0].contains("c2VjcmV0"), "{e:?}");
    let e = errors("apiVersion: v1alpha1\nkind: WireguardConfig\nname: wg0\n");
    assert!(e[0].contains("privateKey must be specified"), "{e:?}");
}

#[test]
fn link_alias_config_example() {
    let mut links = node_links();
    let mut nic = ether("02:aa:00:00:00:01", "e1000e", "0000:00:1f.6");
    nic.permanent_addr = Some("00:1a:2b:3c:4d:5e".parse().unwrap());
    links.push(("enp0s31f6", nic));
    let yaml = "apiVersion: v1alpha1\nkind: LinkAliasConfig\nname: net0\nselector:\n    \
                match: mac(link.permanent_addr) == \"00:1a:2b:3c:4d:5e\"\n\
                ---\napiVersion: v1alpha1\nkind: LinkConfig\nname: net0\nmtu: 9000\n\
                ---\napiVersion: v1alpha1\nkind: Layer2VIPConfig\nname: 1.2.3.4\nlink: net0\n";
    let specs = specs_for(yaml, &links);
    assert_eq!(link(&specs, "enp0s31f6").mtu, 9000);
    let vip = operator(&specs, "vip/enp0s31f6/1.2.3.4");
    assert_eq!(vip.vip.as_ref().unwrap().ip, "1.2.3.4".parse::<IpAddr>().unwrap());
    let cfg = parse(yaml).unwrap();
    assert!(
        cfg.warnings.iter().any(|w| w.contains("only a control-plane node with a healthy etcd")),
        "{:?}",
        cfg.warnings
    );
    // A selector that matches several links gives no alias: the name stays unresolved.
    let yaml = "apiVersion: v1alpha1\nkind: LinkAliasConfig\nname: net0\nselector:\n    \
                match: link.driver == \"virtio_net\"\n---\napiVersion: v1alpha1\nkind: LinkConfig\nname: net0\nmtu: 9000\n";
    let specs = specs_for(yaml, &links);
    assert_eq!(link(&specs, "net0").mtu, 9000);
    assert!(specs.links.iter().all(|l| l.name == "net0"));
    let e = errors("apiVersion: v1alpha1\nkind: LinkAliasConfig\nname: net0\nselector:\n  match: link.speed > 10\n");
    assert!(
        e[0].contains("selector.match (line 5") && e[0].contains("unknown link field"),
        "{e:?}"
    );
}

#[test]
fn dhcp_config_examples() {
    let yaml = "apiVersion: v1alpha1\nkind: DHCPv4Config\nname: enp0s3\nrouteMetric: 512\nignoreHostname: true\n\
                clientIdentifier: duid\nduidRaw: 00:01:00:01:23:45:67:89:ab:cd:ef:01:23:45\n\
                ---\napiVersion: v1alpha1\nkind: DHCPv6Config\nname: enp0s3\nclientIdentifier: mac\n";
    let specs = specs_for(yaml, &[]);
    let v4 = operator(&specs, "dhcp4/enp0s3").dhcp4.clone().unwrap();
    assert_eq!((v4.route_metric, v4.skip_hostname_request), (512, true));
    assert_eq!(v4.client_identifier, ClientIdentifier::Duid("0001000123456789abcdef012345".into()));
    let v6 = operator(&specs, "dhcp6/enp0s3").dhcp6.clone().unwrap();
    assert_eq!((v6.route_metric, v6.client_identifier), (1024, ClientIdentifier::Mac));
    // Talos's default identifier for the documents is the MAC.
    let specs = specs_for("apiVersion: v1alpha1\nkind: DHCPv4Config\nname: eth0\n", &[]);
    assert_eq!(
        operator(&specs, "dhcp4/eth0").dhcp4.as_ref().unwrap().client_identifier,
        ClientIdentifier::Mac
    );
    let e = errors("apiVersion: v1alpha1\nkind: DHCPv4Config\nname: eth0\nduidRaw: 00:01:02\n");
    assert!(e[0].contains("duidRaw can only be set if clientIdentifier is 'duid'"), "{e:?}");
    let e =
        errors("apiVersion: v1alpha1\nkind: DHCPv6Config\nname: eth0\nclientIdentifier: duid\n");
    assert!(e[0].contains("duidRaw must be set"), "{e:?}");
}

#[test]
fn ethernet_config_is_accepted_with_a_warning() {
    let yaml = "apiVersion: v1alpha1\nkind: EthernetConfig\nname: enp0s1\nfeatures:\n    tx-checksum-ipv4: true\nrings:\n    rx: 16\n";
    let cfg = parse(yaml).unwrap();
    assert!(
        cfg.warnings.iter().any(|w| w.contains("does not apply ethtool settings")),
        "{:?}",
        cfg.warnings
    );
    assert!(specs_for(yaml, &[]).links.is_empty());
    let e = errors(
        "apiVersion: v1alpha1\nkind: EthernetConfig\nname: enp0s1\nrings:\n    rx-huge: 16\n",
    );
    assert!(e[0].contains("rx-huge"), "{e:?}");
}

#[test]
fn one_link_one_kind_and_one_source() {
    let e = errors(
        "apiVersion: v1alpha1\nkind: LinkConfig\nname: eth0\n---\napiVersion: v1alpha1\nkind: BondConfig\nname: eth0\nlinks: [eth1]\nbondMode: active-backup\n",
    );
    assert!(
        e[0].contains("document 2 (BondConfig eth0)")
            && e[0].contains("conflicts with document 1 (LinkConfig eth0)"),
        "{e:?}"
    );
    let e = errors(
        "apiVersion: v1alpha1\nkind: DHCPv4Config\nname: eth0\n---\napiVersion: v1alpha1\nkind: DHCPv4Config\nname: eth0\n",
    );
    assert!(e[0].contains("configured twice"), "{e:?}");
    // The same link in the v1alpha1 document and in a link document: both places named.
    let e = errors(
        "version: v1alpha1\nmachine:\n  type: worker\n  network:\n    interfaces:\n      - interface: eth0\n        mtu: 1400\n\
         ---\napiVersion: v1alpha1\nkind: LinkConfig\nname: eth0\nmtu: 9000\n",
    );
    assert!(
        e[0].contains(
            "link eth0 is configured in both places: machine.network.interfaces (line 5)"
        ),
        "{e:?}"
    );
    // A v1alpha1 VLAN and a VLAN document of the same name.
    let e = errors(
        "version: v1alpha1\nmachine:\n  type: worker\n  network:\n    interfaces:\n      - interface: eth0\n        vlans: [{vlanId: 5}]\n\
         ---\napiVersion: v1alpha1\nkind: VLANConfig\nname: eth0.5\nvlanID: 5\nparent: eth0\n",
    );
    assert!(e[0].contains("link eth0.5 is configured in both places"), "{e:?}");
    // Different links in each place load together.
    let cfg = parse(
        "version: v1alpha1\nmachine:\n  type: worker\n  network:\n    interfaces:\n      - interface: eth0\n        mtu: 1400\n\
         ---\napiVersion: v1alpha1\nkind: LinkConfig\nname: eth1\nmtu: 9000\n",
    )
    .unwrap();
    assert_eq!(cfg.documents.len(), 1);
}

/// The v1alpha1 devices of these configurations plan to the same specs before and after
/// `migrate`.
const LEGACY: &[&str] = &[
    "    interfaces:\n      - interface: eth0\n        mtu: 1400\n        addresses: [10.0.0.2/24, 'fd00::2/64']\n        routes:\n          - network: 10.9.0.0/16\n            gateway: 10.0.0.1\n            metric: 300\n          - gateway: 10.0.0.1\n            table: 100\n        dhcp: true\n        dhcpOptions: {routeMetric: 50, ipv6: true, duidv6: '00:01:00:01:aa:bb'}\n",
    "    interfaces:\n      - interface: bond0\n        bond:\n          interfaces: [eth1, eth2]\n          deviceSelectors: [{hardwareAddr: '00:1a:*'}]\n          mode: 802.3ad\n          miimon: 100\n          lacpRate: fast\n          arpIPTarget: [10.0.0.1]\n          useCarrier: false\n        vlans:\n          - vlanId: 42\n            addresses: [10.42.0.2/24]\n            dhcp: true\n            vip: {ip: 10.42.0.100}\n",
    "    interfaces:\n      - interface: br0\n        bridge: {interfaces: [eth3, eth4], vlan: {vlanFiltering: true}}\n        addresses: [10.5.0.1/24]\n      - interface: br1\n        bridge: {interfaces: [eth5], stp: {enabled: false}}\n",
    "    interfaces:\n      - interface: br5\n        bridge: {interfaces: [eth3]}\n      - interface: eth4\n        bridgePort: {master: br5}\n        mtu: 9000\n      - interface: dummy0\n        dummy: true\n        cidr: 10.8.0.1/32\n      - interface: wg1\n        wireguard:\n          privateKey: GA1E1VB+g41Dl0+UH2TMW9C5953y+moVg6JIIqkJbmw=\n          listenPort: 5042\n          peers:\n            - publicKey: 735jkJdcVDninU5PzLJ/S+bfN6Q3QOk6svWrVLMJQAk=\n              endpoint: 10.3.4.3:2222\n              persistentKeepaliveInterval: 25s\n              allowedIPs: [192.168.1.0/24]\n        addresses: [192.168.1.100/32]\n",
    "    interfaces:\n      - deviceSelector: {driver: igb}\n        addresses: [10.7.0.2/24]\n        routes: [{network: 0.0.0.0/0, gateway: 10.7.0.1}]\n      - interface: eth0\n        ignore: true\n",
];

#[test]
fn migrate_then_plan_is_plan() {
    let links = node_links();
    let view = LinkView::new(links.iter().map(|(n, s): &(&str, LinkStatus)| (*n, s)));
    let configs = LEGACY
        .iter()
        .map(|n| format!("version: v1alpha1\nmachine:\n  type: worker\n  network:\n{n}"))
        .chain([super::tests::FULL.to_owned()]);
    for yaml in configs {
        let before = to_specs(&parse(&yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}")), &view);
        let migrated = migrate(&yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"));
        let cfg = parse(&migrated).unwrap_or_else(|e| panic!("{e}\n{migrated}"));
        assert!(cfg.machine.network.interfaces.is_empty(), "{migrated}");
        let after = to_specs(&cfg, &view);
        let sorted = |s: &LayerSpecs| {
            let mut s = s.clone();
            s.links.sort_by(|a, b| a.name.cmp(&b.name));
            s.addresses.sort_by_key(|a| a.id());
            s.routes.sort_by_key(|r| r.id());
            s.operators.sort_by_key(|o| o.id());
            s
        };
        assert_eq!(sorted(&before), sorted(&after), "{migrated}");
        assert!(!before.links.is_empty());
    }
}

#[test]
fn migrate_writes_a_selector_as_an_alias() {
    let yaml = format!("version: v1alpha1\nmachine:\n  type: worker\n  network:\n{}", LEGACY[4]);
    let out = migrate(&yaml).unwrap();
    assert!(
        out.contains(
            "kind: LinkAliasConfig\nname: selected-1\nselector:\n  match: link.driver == \"igb\""
        ),
        "{out}"
    );
    assert!(out.contains("kind: LinkConfig\nname: selected-1"), "{out}");
    // `ignore: true` has no document.
    assert!(!out.contains("name: eth0"), "{out}");
}

/// The layer derived from the links' identities is the layer derived from their full
/// statuses: the fields `LinkIdentities` drops are read by no document, selector or alias.
#[test]
fn identities_derive_what_statuses_derive() {
    let mut links = node_links();
    for (i, (_, s)) in links.iter_mut().enumerate() {
        s.index = u32::try_from(i).unwrap() + 1;
        s.flags = "UP,BROADCAST,RUNNING,MULTICAST,LOWER_UP".into();
        s.operational_state = "up".into();
        s.link_state = true;
        s.master_index = 42;
        s.slave_kind = "bond".into();
        s.alias = format!("alias-{i}");
        s.alt_names = vec![format!("alt{i}")];
        s.mtu = 1500;
    }
    let full = LinkView::new(links.iter().map(|(n, s): &(&str, LinkStatus)| (*n, s)));
    let ids = crate::resource::LinkIdentities::new(links.iter().map(|(n, s)| (*n, s)));
    let aliases = [
        "link.alias == \"alias-3\"",
        "link.alt_names.contains(\"alt4\")",
        "link.mtu == 1500 && link.driver == \"igb\"",
        "glob(\"0000:00:05*\", link.bus_path) && link.physical",
        "mac(link.hardware_addr) == \"02:00:00:00:00:03\" && link.type == 1",
        "link.kind == \"bond\"",
    ]
    .map(|m| {
        format!(
            "apiVersion: v1alpha1\nkind: LinkAliasConfig\nname: net0\nselector:\n  match: '{m}'\n\
             ---\napiVersion: v1alpha1\nkind: LinkConfig\nname: net0\nmtu: 9000\n\
             ---\napiVersion: v1alpha1\nkind: LinkConfig\nname: alt2\nmtu: 1400\n"
        )
    });
    let configs = LEGACY
        .iter()
        .map(|n| format!("version: v1alpha1\nmachine:\n  type: worker\n  network:\n{n}"))
        .chain([super::tests::FULL.to_owned()])
        .chain(aliases);
    for yaml in configs {
        let cfg = parse(&yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"));
        let specs = to_specs(&cfg, &full);
        assert_eq!(specs, to_specs(&cfg, &ids.view()), "{yaml}");
        assert!(!specs.links.is_empty(), "{yaml}");
        // Every alias picked its one link.
        assert!(specs.links.iter().all(|l| l.name != "net0"), "{yaml}");
    }
}
