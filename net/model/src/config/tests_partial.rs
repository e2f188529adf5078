// SPDX-License-Identifier: Apache-2.0
//! One invalid entry costs its entry: for each class of entry, the bad one is dropped at the
//! narrowest unit (the field, else the list item), its neighbour is kept, and the one line
//! about it names the path and the line.

use std::net::IpAddr;

use super::*;

/// A good device ahead of whatever a test adds: it must survive every drop.
const HEAD: &str = "version: v1alpha1
machine:
  network:
    interfaces:
      - interface: eth9
        addresses: [10.42.0.9/24]
";

/// Check `yaml`; the one error must be at `path` on `line` and have dropped `dropped`.
fn dropped_one(yaml: &str, path: &str, line: usize, dropped: &str) -> MachineConfig {
    let report = check(yaml);
    assert!(report.kept, "nothing kept: {:?}", report.errors);
    assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
    let e = &report.errors[0];
    assert_eq!(e.path, path, "{}", e.dropped_line());
    assert_eq!(e.line(), Some(line), "{}", e.dropped_line());
    assert_eq!(e.dropped.as_deref(), Some(dropped), "{}", e.dropped_line());
    assert_eq!(report.config.dropped, [e.dropped_line()]);
    // The strict reading refuses the same file with the same first error.
    let strict = parse(yaml).err().map(|e| (e.path.clone(), e.line()));
    assert_eq!(strict, Some((path.to_owned(), Some(line))));
    report.config
}

/// The device `eth9` with its address, as [`HEAD`] has it.
fn eth9_kept(cfg: &MachineConfig) {
    let eth9 =
        cfg.machine.network.interfaces.iter().find(|d| d.interface.as_deref() == Some("eth9"));
    let eth9 = eth9.unwrap_or_else(|| panic!("eth9 dropped: {cfg:?}"));
    assert_eq!(eth9.addresses, ["10.42.0.9/24".parse::<ipnet::IpNet>().unwrap()]);
}

fn device(cfg: &MachineConfig, name: &str) -> Device {
    let found =
        cfg.machine.network.interfaces.iter().find(|d| d.interface.as_deref() == Some(name));
    found.cloned().unwrap_or_else(|| panic!("{name} dropped: {cfg:?}"))
}

#[test]
fn an_over_long_link_name_drops_its_device_only() {
    // A name the node would create (a dummy here) must fit IFNAMSIZ.
    let yaml = format!("{HEAD}      - interface: averyveryverylongname0\n        dummy: true\n        addresses: [10.0.0.1/24]\n");
    let cfg = dropped_one(
        &yaml,
        "machine.network.interfaces[1].interface",
        7,
        "machine.network.interfaces[1]",
    );
    eth9_kept(&cfg);
    assert_eq!(cfg.machine.network.interfaces.len(), 1);
}

#[test]
fn a_bridge_named_with_a_slash_drops_its_device_only() {
    let yaml =
        format!("{HEAD}      - interface: br/x\n        bridge:\n          interfaces: [eth1]\n");
    let cfg = dropped_one(
        &yaml,
        "machine.network.interfaces[1].interface",
        7,
        "machine.network.interfaces[1]",
    );
    eth9_kept(&cfg);
    assert_eq!(cfg.machine.network.interfaces.len(), 1);
}

#[test]
fn an_mtu_out_of_range_drops_the_mtu_only() {
    let yaml = format!(
        "{HEAD}      - interface: eth1\n        mtu: 65536\n        addresses: [10.0.1.1/24]\n"
    );
    let cfg = dropped_one(
        &yaml,
        "machine.network.interfaces[1].mtu",
        8,
        "machine.network.interfaces[1].mtu",
    );
    eth9_kept(&cfg);
    let eth1 = device(&cfg, "eth1");
    assert_eq!((eth1.mtu, eth1.addresses.len()), (0, 1));
}

#[test]
fn a_bad_address_drops_that_address_only() {
    let yaml = format!("{HEAD}      - interface: eth1\n        addresses: [10.0.1.1/24, 10.0.1.x/24, 10.0.2.1/24]\n");
    let cfg = dropped_one(
        &yaml,
        "machine.network.interfaces[1].addresses[1]",
        8,
        "machine.network.interfaces[1].addresses[1]",
    );
    eth9_kept(&cfg);
    let kept: Vec<String> =
        device(&cfg, "eth1").addresses.iter().map(ToString::to_string).collect();
    assert_eq!(kept, ["10.0.1.1/24", "10.0.2.1/24"]);
}

#[test]
fn a_route_with_a_gateway_of_the_wrong_family_drops_the_route_not_only_its_gateway() {
    let yaml = format!(
        "{HEAD}        routes:\n          - network: 10.50.0.0/16\n            gateway: fd00::1\n          - network: 10.60.0.0/16\n            gateway: 10.42.0.1\n"
    );
    let cfg = dropped_one(
        &yaml,
        "machine.network.interfaces[0].routes[0].gateway",
        9,
        "machine.network.interfaces[0].routes[0]",
    );
    eth9_kept(&cfg);
    let routes = &device(&cfg, "eth9").routes;
    assert_eq!(routes.len(), 1, "{routes:?}");
    assert_eq!(routes[0].gateway, Some("10.42.0.1".parse::<IpAddr>().unwrap()));
}

#[test]
fn an_unparsable_gateway_drops_its_route() {
    let yaml = format!(
        "{HEAD}        routes:\n          - network: 10.50.0.0/16\n            gateway: 10.42.0.x\n"
    );
    let cfg = dropped_one(
        &yaml,
        "machine.network.interfaces[0].routes[0].gateway",
        9,
        "machine.network.interfaces[0].routes[0]",
    );
    assert!(device(&cfg, "eth9").routes.is_empty());
    eth9_kept(&cfg);
}

#[test]
fn a_second_master_drops_that_membership_only() {
    let yaml = format!(
        "{HEAD}      - interface: bond0\n        bond:\n          mode: active-backup\n          interfaces: [eth1, eth2]\n      - interface: br0\n        bridge:\n          interfaces: [eth2, eth3]\n"
    );
    let cfg = dropped_one(
        &yaml,
        "machine.network.interfaces[2].bridge.interfaces[0]",
        13,
        "machine.network.interfaces[2].bridge.interfaces[0]",
    );
    eth9_kept(&cfg);
    assert_eq!(
        device(&cfg, "bond0").bond.map(|b| b.interfaces),
        Some(vec!["eth1".into(), "eth2".into()])
    );
    assert_eq!(device(&cfg, "br0").bridge.map(|b| b.interfaces), Some(vec!["eth3".into()]));
}

#[test]
fn a_bad_vlan_drops_that_vlan_only() {
    let yaml = format!(
        "{HEAD}        vlans:\n          - vlanId: 4095\n            addresses: [10.1.0.1/24]\n          - vlanId: 20\n            addresses: [10.2.0.1/24]\n"
    );
    let cfg = dropped_one(
        &yaml,
        "machine.network.interfaces[0].vlans[0].vlanId",
        8,
        "machine.network.interfaces[0].vlans[0]",
    );
    eth9_kept(&cfg);
    let vlans = device(&cfg, "eth9").vlans;
    assert_eq!(vlans.iter().map(|v| v.vlan_id).collect::<Vec<_>>(), [20]);
    // The line says what took the VLAN with it.
    let report = check(&yaml);
    assert!(report.errors[0].message.contains("without it"), "{}", report.errors[0]);
}

#[test]
fn a_bad_bond_option_drops_the_option_only() {
    let yaml = format!(
        "{HEAD}      - interface: bond0\n        addresses: [10.3.0.1/24]\n        bond:\n          mode: active-backup\n          lacpRate: fast\n          interfaces: [eth1]\n"
    );
    let cfg = dropped_one(
        &yaml,
        "machine.network.interfaces[1].bond.lacpRate",
        11,
        "machine.network.interfaces[1].bond.lacpRate",
    );
    eth9_kept(&cfg);
    let bond0 = device(&cfg, "bond0");
    assert_eq!(bond0.addresses.len(), 1);
    assert!(bond0.bond.is_some_and(|b| b.lacp_rate.is_none()));
}

#[test]
fn a_bad_nameserver_drops_that_nameserver_only() {
    let yaml = format!("{HEAD}    nameservers: [1.1.1.1, dns.example, 9.9.9.9]\n");
    let cfg =
        dropped_one(&yaml, "machine.network.nameservers[1]", 7, "machine.network.nameservers[1]");
    eth9_kept(&cfg);
    assert_eq!(cfg.machine.network.nameservers.len(), 2);
}

#[test]
fn a_bad_hostname_drops_the_hostname_only() {
    let yaml = format!("{HEAD}    hostname: -bad-\n");
    let cfg = dropped_one(&yaml, "machine.network.hostname", 7, "machine.network.hostname");
    eth9_kept(&cfg);
    assert_eq!(cfg.machine.network.hostname, None);
}

#[test]
fn a_bad_time_setting_drops_that_setting_only() {
    let yaml = format!("{HEAD}  time:\n    servers: [time.example]\n    bootTimeout: soon\n");
    let cfg = dropped_one(&yaml, "machine.time.bootTimeout", 9, "machine.time.bootTimeout");
    eth9_kept(&cfg);
    assert_eq!(cfg.machine.time.servers, ["time.example"]);
}

#[test]
fn bad_kubespan_entries_drop_the_entry_only() {
    let peer = "6EqTl0ZdKpNqKQ86Vp1QK5j6Cv2n4cVq0UWCEAhPzXw=";
    let yaml = format!(
        "{HEAD}    kubespan:\n      enabled: true\n      mtu: 1000\n      peers:\n        - publicKey: {peer}\n          endpoints: [\"10.9.0.2:51820\"]\n        - publicKey: {peer}\n"
    );
    let report = check(&yaml);
    assert!(report.kept);
    let lines: Vec<(String, Option<usize>, Option<String>)> =
        report.errors.iter().map(|e| (e.path.clone(), e.line(), e.dropped.clone())).collect();
    assert_eq!(
        lines,
        [
            (
                "machine.network.kubespan.mtu".into(),
                Some(9),
                Some("machine.network.kubespan.mtu".into())
            ),
            (
                "machine.network.kubespan.peers[1].publicKey".into(),
                Some(13),
                Some("machine.network.kubespan.peers[1]".into())
            ),
        ]
    );
    let ks = &report.config.machine.network.kubespan;
    assert!(ks.enabled);
    assert_eq!(ks.mtu, KUBESPAN_DEFAULT_MTU);
    assert_eq!(ks.peers.len(), 1);
    assert_eq!(ks.peers[0].endpoints.len(), 1);
    eth9_kept(&report.config);
}

#[test]
fn a_bad_kubelet_health_endpoint_drops_that_field_only() {
    let yaml = format!("{HEAD}  kubelet:\n    command: [/usr/bin/kubelet]\n    healthz: ftp://x\n");
    let cfg = dropped_one(&yaml, "machine.kubelet.healthz", 9, "machine.kubelet.healthz");
    eth9_kept(&cfg);
    assert_eq!(cfg.machine.kubelet.command, ["/usr/bin/kubelet"]);
}

#[test]
fn an_unknown_key_drops_that_key_only() {
    let yaml = format!("{HEAD}        mtux: 9000\n");
    let cfg = dropped_one(
        &yaml,
        "machine.network.interfaces[0].mtux",
        7,
        "machine.network.interfaces[0].mtux",
    );
    eth9_kept(&cfg);
}

#[test]
fn several_bad_entries_are_each_reported_at_their_own_line() {
    let yaml = format!(
        "{HEAD}      - interface: eth1\n        mtu: 65536\n      - interface: averyveryverylongname0\n        dummy: true\n      - interface: eth2\n        addresses: [10.0.2.1/24, nope]\n"
    );
    let report = check(&yaml);
    let lines: Vec<(String, Option<usize>)> =
        report.errors.iter().map(|e| (e.path.clone(), e.line())).collect();
    assert_eq!(
        lines,
        [
            ("machine.network.interfaces[1].mtu".into(), Some(8)),
            ("machine.network.interfaces[2].interface".into(), Some(9)),
            // After interfaces[2] went, eth2 is the third device of what is left: the line
            // still names it as written.
            ("machine.network.interfaces[3].addresses[1]".into(), Some(12)),
        ]
    );
    let names: Vec<_> = report
        .config
        .machine
        .network
        .interfaces
        .iter()
        .filter_map(|d| d.interface.clone())
        .collect();
    assert_eq!(names, ["eth9", "eth1", "eth2"]);
    assert_eq!(device(&report.config, "eth2").addresses.len(), 1);
}

#[test]
fn a_root_that_is_wrong_costs_the_document() {
    let report = check("version: v1alpha2\nmachine: {}\n");
    assert!(!report.kept);
    assert_eq!(report.errors[0].dropped.as_deref(), Some("the whole document"));
}

#[test]
fn typed_documents_drop_a_field_or_the_document_and_keep_the_others() {
    let yaml = "apiVersion: v1alpha1\nkind: LinkConfig\nname: eth0\nmtu: 65536\naddresses:\n  - address: 10.7.0.1/24\n---\napiVersion: v1alpha1\nkind: ResolverConfig\nnameservers:\n  - address: 9.9.9.9\n    protocol: DoH\n  - address: 1.1.1.1\n---\napiVersion: v1alpha1\nkind: HostnameConfig\n";
    let report = check(yaml);
    assert!(report.kept);
    let lines: Vec<(String, Option<usize>, Option<String>)> =
        report.errors.iter().map(|e| (e.path.clone(), e.line(), e.dropped.clone())).collect();
    assert_eq!(lines[0], ("mtu".into(), Some(4), Some("mtu".into())), "{:?}", report.errors);
    // The check names the key left out; the line is its nameserver's.
    assert_eq!(
        lines[1],
        ("nameservers[0].tlsServerName".into(), Some(11), Some("nameservers[0]".into()))
    );
    assert_eq!(lines[2].2.as_deref(), Some("the whole document"));
    assert_eq!(lines.len(), 3);
    assert!(report.errors[0].to_string().starts_with("document 1 (LinkConfig eth0): mtu (line 4"));
    let link = report.config.documents.iter().find(|d| d.doc.kind() == "LinkConfig");
    assert!(link.is_some(), "the link document is kept without its MTU");
    let ns: Vec<String> =
        report.config.machine.network.nameservers.iter().map(ToString::to_string).collect();
    assert_eq!(ns, ["1.1.1.1"]);
}

#[test]
fn garbage_names_the_line_and_column_of_the_parse_error() {
    for text in [
        "version: v1alpha1\nmachine: [\n",
        "\u{1}\u{2}garbage\u{0}",
        "{{{{\n",
        "key: \"unterminated\n",
    ] {
        let report = check(text);
        assert!(!report.kept);
        let e = &report.errors[0];
        assert!(e.position.is_some(), "{text:?}: {e}");
        assert!(!e.message.contains("empty"), "{text:?}: {e}");
    }
    let e = &check("a: b\n  c: d\n  : :\n\t- x").errors[0];
    assert!(e.position.is_some(), "{e}");
}

#[test]
fn an_empty_file_is_still_empty() {
    for text in ["", "\n", "# just a comment\n"] {
        let report = check(text);
        assert_eq!(report.errors[0].message, "the configuration is empty");
    }
}

#[test]
fn a_typed_document_that_needs_the_dropped_field_goes_with_it_and_says_why() {
    let yaml = "apiVersion: v1alpha1\nkind: HostnameConfig\nhostname: -bad-\n---\napiVersion: v1alpha1\nkind: TimeSyncConfig\nntp:\n  servers: [time.example]\n";
    let report = check(yaml);
    assert!(report.kept);
    assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
    let e = &report.errors[0];
    assert_eq!((e.path.as_str(), e.line()), ("hostname", Some(3)));
    assert_eq!(e.dropped.as_deref(), Some("the whole document"));
    assert!(e.message.contains("; without it, the document: either auto or hostname"), "{e}");
    assert_eq!(report.config.machine.time.servers, ["time.example"]);
    assert_eq!(report.config.machine.network.hostname, None);
}

#[test]
fn a_bad_time_server_in_a_document_drops_that_server_only() {
    let yaml =
        "apiVersion: v1alpha1\nkind: TimeSyncConfig\nntp:\n  servers: [/dev/ptp0, time.example]\n";
    let report = check(yaml);
    assert!(report.kept);
    assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
    let e = &report.errors[0];
    assert_eq!((e.path.as_str(), e.line()), ("ntp.servers[0]", Some(4)));
    assert_eq!(e.dropped.as_deref(), Some("ntp.servers[0]"));
    assert_eq!(report.config.machine.time.servers, ["time.example"]);
}

#[test]
fn a_bad_selector_field_drops_the_selector_never_widens_it() {
    // Without its MAC the selector would match every e1000 link; the whole selector goes,
    // and with it the device it was all of.
    let yaml = format!(
        "{HEAD}      - deviceSelector:\n          hardwareAddr: 'zz:*'\n          driver: e1000\n        addresses: [10.0.5.1/24]\n"
    );
    let cfg = dropped_one(
        &yaml,
        "machine.network.interfaces[1].deviceSelector.hardwareAddr",
        8,
        "machine.network.interfaces[1]",
    );
    eth9_kept(&cfg);
    assert_eq!(cfg.machine.network.interfaces.len(), 1);
}

#[test]
fn too_many_invalid_entries_cost_the_document_in_bounded_work() {
    // Every one of 1,100 devices invalid: 16 a round, the re-reads stop after 64 rounds and
    // the document is dropped whole, every line saying so.
    let mut yaml = String::from("version: v1alpha1\nmachine:\n  network:\n    interfaces:\n");
    for i in 0..1100 {
        yaml += &format!("      - interface: eth{i}\n        mtu: 65536\n");
    }
    let started = std::time::Instant::now();
    let report = check(&yaml);
    assert!(!report.kept);
    assert!(
        report.errors.len() > 1 && report.errors.len() <= 64 * 16 + 1,
        "{}",
        report.errors.len()
    );
    assert!(report.errors.iter().all(|e| e.dropped.as_deref() == Some("the whole document")));
    let last = report.errors.last().map(ToString::to_string).unwrap_or_default();
    assert!(last.contains("too many invalid entries"), "{last}");
    // A guard against runaway re-reads, not a speed check (debug builds are slow).
    assert!(started.elapsed() < std::time::Duration::from_secs(60), "{:?}", started.elapsed());
}

#[test]
fn a_config_of_documents_keelson_only_warns_about_is_kept() {
    let report = check("apiVersion: v1alpha1\nkind: VethConfig\nname: veth0\n");
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(report.kept, "{:?}", report.config.warnings);
}

#[test]
fn when_the_document_goes_every_line_says_so() {
    // An invalid MTU and a wrong version found together: the version costs the document, so
    // the MTU's line must not claim that only the MTU went.
    let report = check("version: v1alpha2\nmachine:\n  network:\n    interfaces:\n      - interface: eth0\n        mtu: 65536\n");
    assert!(!report.kept);
    assert!(
        report.errors.iter().all(|e| e.dropped.as_deref() == Some("the whole document")),
        "{:?}",
        report.errors
    );
}

#[test]
fn a_second_master_through_bridge_port_drops_that_bridge_port() {
    let yaml = format!(
        "{HEAD}      - interface: br0\n        bridge:\n          interfaces: [eth1]\n      - interface: eth1\n        bridgePort:\n          master: br1\n"
    );
    let cfg = dropped_one(
        &yaml,
        "machine.network.interfaces[2].bridgePort.master",
        12,
        "machine.network.interfaces[2].bridgePort",
    );
    eth9_kept(&cfg);
    assert!(device(&cfg, "eth1").bridge_port.is_none());
    assert_eq!(device(&cfg, "br0").bridge.map(|b| b.interfaces), Some(vec!["eth1".into()]));
}

#[test]
fn discovery_without_the_cluster_identity_drops_discovery_only() {
    let yaml = format!(
        "{HEAD}cluster:\n  discovery:\n    enabled: true\n  network:\n    podSubnets: [10.244.0.0/16]\n"
    );
    let report = check(&yaml);
    assert!(report.kept);
    assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
    let e = &report.errors[0];
    assert_eq!((e.path.as_str(), e.line()), ("cluster.discovery.enabled", Some(9)));
    eth9_kept(&report.config);
    let discovery = report.config.cluster.as_ref().and_then(|c| c.discovery.as_ref());
    assert!(discovery.is_none_or(|d| !d.enabled), "{discovery:?}");
}

#[test]
fn warnings_of_documents_ahead_of_the_v1alpha1_one_are_kept() {
    let yaml = "apiVersion: v1alpha1\nkind: VethConfig\nname: veth0\n---\nversion: v1alpha1\nmachine:\n  network:\n    hostname: node-1\n";
    let report = check(yaml);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(
        report.config.warnings.iter().any(|w| w.contains("document 1 (VethConfig)")),
        "{:?}",
        report.config.warnings
    );
}

#[test]
fn the_metrics_listener_is_off_unless_configured_and_a_bad_address_drops_that_field() {
    assert_eq!(check(HEAD).config.machine.metrics, None);
    let yaml = format!("{HEAD}  metrics:\n    listen: \"[::]:9100\"\n");
    let report = check(&yaml);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let listen = report.config.machine.metrics.map(|m| m.listen);
    assert_eq!(listen, Some("[::]:9100".parse().unwrap()));
    for bad in ["9100", "0.0.0.0:0", "host:9100", "[::]:70000"] {
        let yaml = format!("{HEAD}  metrics:\n    listen: \"{bad}\"\n");
        let cfg = dropped_one(&yaml, "machine.metrics.listen", 8, "machine.metrics");
        assert_eq!(cfg.machine.metrics, None, "{bad}");
        eth9_kept(&cfg);
    }
}

#[test]
fn tenant_networks_are_off_unless_configured_and_each_bad_field_is_one_error() {
    assert_eq!(check(HEAD).config.machine.tenant_networks, None);
    let yaml = format!(
        "{HEAD}  tenantNetworks:\n    etcdEndpoints: [\"https://10.0.0.1:2379\", \"http://op:2379\"]\n    etcdCa: /etc/op/ca.crt\n    etcdCert: /etc/op/node.crt\n    etcdKey: /etc/op/node.key\n    prefix: /op\n    node: w1\n    vtepLocal: 192.0.2.1\n    vxlanPort: 4790\n"
    );
    let report = check(&yaml);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let t = report.config.machine.tenant_networks.unwrap();
    assert_eq!(t.agent, crate::config::DEFAULT_TENANT_AGENT);
    assert_eq!(t.etcd_endpoints, ["https://10.0.0.1:2379", "http://op:2379"]);
    assert_eq!(t.etcd_key.as_deref(), Some("/etc/op/node.key"));
    assert_eq!((t.node.as_deref(), t.prefix.as_deref()), (Some("w1"), Some("/op")));
    assert_eq!(t.vtep_local, Some("192.0.2.1".parse().unwrap()));
    assert_eq!(t.vxlan_port.map(|p| p.get()), Some(4790));
    // Each bad field: one error at its own path and line; the key is dropped, eth9 stays.
    let base = "  tenantNetworks:\n    etcdEndpoints: [\"http://10.0.0.1:2379\"]\n";
    let many: Vec<String> = (0..17).map(|i| format!("\"http://10.0.0.{i}:2379\"")).collect();
    let many = format!("  tenantNetworks:\n    etcdEndpoints: [{}]\n", many.join(", "));
    for (body, path, line) in [
        (format!("{base}    agent: bin/keelson-operator\n"), "machine.tenantNetworks.agent", 9),
        (format!("{base}    agent: /usr/../bin/x\n"), "machine.tenantNetworks.agent", 9),
        (format!("{base}    etcdCa: \"/etc/a b\"\n"), "machine.tenantNetworks.etcdCa", 9),
        (format!("{base}    node: \"-bad name\"\n"), "machine.tenantNetworks.node", 9),
        (format!("{base}    vtepLocal: 192.0.2\n"), "machine.tenantNetworks.vtepLocal", 9),
        (format!("{base}    vxlanPort: 0\n"), "machine.tenantNetworks.vxlanPort", 9),
        (format!("{base}    vxlanPort: 70000\n"), "machine.tenantNetworks.vxlanPort", 9),
        (format!("{base}    prefix: op\n"), "machine.tenantNetworks.prefix", 9),
        (format!("{base}    etcdCert: /c.crt\n"), "machine.tenantNetworks.etcdCert", 9),
        (format!("{base}    etcdKey: /c.key\n"), "machine.tenantNetworks.etcdKey", 9),
        (format!("{base}    colour: red\n"), "machine.tenantNetworks.colour", 9),
        ("  tenantNetworks: {}\n".to_owned(), "machine.tenantNetworks", 7),
        (
            "  tenantNetworks:\n    etcdEndpoints: []\n".into(),
            "machine.tenantNetworks.etcdEndpoints",
            8,
        ),
        (many, "machine.tenantNetworks.etcdEndpoints", 8),
        (
            "  tenantNetworks:\n    etcdEndpoints: [\"grpc://op:2379\"]\n".into(),
            "machine.tenantNetworks.etcdEndpoints[0]",
            8,
        ),
        (
            "  tenantNetworks:\n    etcdEndpoints: [\"http://a:1,http://b:2\"]\n".into(),
            "machine.tenantNetworks.etcdEndpoints[0]",
            8,
        ),
    ] {
        let yaml = format!("{HEAD}{body}");
        let report = check(&yaml);
        assert_eq!(report.errors.len(), 1, "{body}: {:?}", report.errors);
        let e = &report.errors[0];
        assert_eq!((e.path.as_str(), e.line()), (path, Some(line)), "{body}: {}", e.dropped_line());
        assert_eq!(e.dropped.as_deref(), Some("machine.tenantNetworks"), "{body}");
        assert_eq!(report.config.machine.tenant_networks, None, "{body}");
        eth9_kept(&report.config);
    }
    // A password in a URL is not repeated in the error.
    let yaml =
        format!("{HEAD}  tenantNetworks:\n    etcdEndpoints: [\"https://root:hunter2@op:2379\"]\n");
    let e = check(&yaml).errors.remove(0);
    assert!(e.message.contains("credentials") && !e.to_string().contains("hunter2"), "{e}");
}
