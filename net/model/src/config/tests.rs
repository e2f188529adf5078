// SPDX-License-Identifier: Apache-2.0
//! Parser tests: a full config, every kind of error with its path and line, warnings.

use std::net::IpAddr;
use std::time::Duration;

use super::*;
use crate::resource::{BondMode, BondXmitHashPolicy, LacpRate, RoutingTable};

/// A config using every supported key (and some ignored Talos keys).
pub(super) const FULL: &str = r#"version: v1alpha1
debug: false
persist: true
machine:
  type: controlplane
  token: abc.def
  install:
    disk: /dev/sda
    image: ghcr.io/siderolabs/installer:v1.9.0
  certSANs: [10.0.0.2]
  network:
    hostname: node-1.example.org
    interfaces:
      - interface: eth0
        addresses: [10.0.0.2/24, 10.0.0.3]
        routes:
          - network: 0.0.0.0/0
            gateway: 10.0.0.1
            source: 10.0.0.2
            metric: 1024
            mtu: 1500
            table: main
        mtu: 1500
        dhcp: false
        dhcpOptions: {routeMetric: 1024, ipv4: true, ipv6: false}
        ignore: false
        vlans:
          - vlanId: 100
            addresses: [192.168.100.2/24]
            routes: []
            dhcp: false
            dhcpOptions: {}
            mtu: 1400
            vip: {ip: 192.168.100.50}
        vip: {ip: 10.5.0.50}
      - interface: bond0
        bond:
          interfaces: [eth1, eth2]
          deviceSelectors: [{hardwareAddr: "00:1a:*"}]
          mode: 802.3ad
          xmitHashPolicy: layer3+4
          lacpRate: fast
          miimon: 100
          updelay: 200
          downdelay: 200
          arpIPTarget: [10.0.0.1]
          primaryReselect: always
          failOverMac: none
          adSelect: stable
          arpInterval: 0
          arpAllTargets: any
          resendIgmp: 1
          minLinks: 0
          lpInterval: 1
          packetsPerSlave: 1
          numPeerNotif: 1
          tlbDynamicLb: 0
          allSlavesActive: 0
          useCarrier: true
          adActorSysPrio: 65535
          adUserPortKey: 0
          peerNotifyDelay: 0
      - interface: br0
        bridge: {interfaces: [eth3, eth4], stp: {enabled: true}, vlan: {vlanFiltering: false}}
      - deviceSelector: {driver: virtio_net, physical: true, busPath: "0000:00:08*"}
        dhcp: true
    nameservers: [1.1.1.1, "2606:4700:4700::1111"]
    searchDomains: [example.org]
    disableSearchDomain: false
    extraHostEntries: [{ip: 10.0.0.9, aliases: [registry.local]}]
    kubespan:
      enabled: true
      allowDownPeerBypass: false
      advertiseKubernetesNetworks: false
      harvestExtraEndpoints: false
      filters: {endpoints: ["0.0.0.0/0", "!10.0.0.0/8"], excludeAdvertisedNetworks: []}
  time: {disabled: false, servers: [time.cloudflare.com], bootTimeout: 2m}
  kubelet:
    image: ghcr.io/siderolabs/kubelet:v1.31.0
    command: [/usr/bin/kubelet, --config=/etc/kubernetes/kubelet.yaml]
    extraArgs: {v: "2", rotate-server-certificates: true}
    nodeIP: {validSubnets: [10.0.0.0/8, "!10.0.0.3/32"]}
cluster:
  id: dGhpcyBpcyBhIDMyIGJ5dGUgY2x1c3RlciBpZGVudGlmaWVy
  secret: c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI=
  clusterName: demo
  controlPlane: {endpoint: "https://10.0.0.2:6443"}
  discovery:
    enabled: true
    registries:
      kubernetes: {disabled: true}
      service: {disabled: false, endpoint: "https://discovery.talos.dev/"}
"#;

/// 1-based line of the first occurrence of `needle`.
fn line_of(yaml: &str, needle: &str) -> usize {
    yaml.lines()
        .position(|l| l.contains(needle))
        .map(|i| i + 1)
        .unwrap_or_else(|| panic!("{needle:?} not in test YAML"))
}

fn err(yaml: &str) -> ConfigError {
    match parse(yaml) {
        Ok(cfg) => panic!("expected an error, parsed {cfg:?}"),
        Err(e) => e,
    }
}

/// Parse `FULL` with one line replaced, expecting an error.
fn err_with(find: &str, replace: &str) -> (ConfigError, String) {
    assert!(FULL.contains(find), "{find:?} not in FULL");
    let yaml = FULL.replacen(find, replace, 1);
    (err(&yaml), yaml)
}

#[test]
fn full_example_parses() {
    let cfg = parse(FULL).unwrap();
    assert_eq!(cfg.version, "v1alpha1");
    assert_eq!(cfg.machine.machine_type, Some(MachineType::ControlPlane));
    let net = &cfg.machine.network;
    assert_eq!(net.hostname.as_deref(), Some("node-1.example.org"));
    assert_eq!(net.interfaces.len(), 4);
    let eth0 = &net.interfaces[0];
    assert_eq!(eth0.addresses, ["10.0.0.2/24".parse().unwrap(), "10.0.0.3/32".parse().unwrap()]);
    assert_eq!(eth0.routes[0].table, Some(RoutingTable::MAIN));
    assert_eq!(eth0.vlans[0].vlan_id, 100);
    assert_eq!(eth0.vip.as_ref().map(|v| v.ip.to_string()).as_deref(), Some("10.5.0.50"));
    let bond = net.interfaces[1].bond.as_ref().unwrap();
    assert_eq!(bond.mode, BondMode::LACP);
    assert_eq!(bond.xmit_hash_policy, BondXmitHashPolicy::LAYER34);
    assert_eq!(bond.lacp_rate, Some(LacpRate::FAST));
    assert_eq!(bond.device_selectors[0].hardware_addr.as_deref(), Some("00:1a:*"));
    let bridge = net.interfaces[2].bridge.as_ref().unwrap();
    assert_eq!(bridge.stp, Some(BridgeStp { enabled: true }));
    let sel = net.interfaces[3].device_selector.as_ref().unwrap();
    assert_eq!((sel.driver.as_deref(), sel.physical), (Some("virtio_net"), Some(true)));
    assert_eq!(net.nameservers[1], "2606:4700:4700::1111".parse::<IpAddr>().unwrap());
    assert_eq!(net.search_domains, Some(vec!["example.org".to_owned()]));
    assert_eq!(net.extra_host_entries[0].aliases, ["registry.local"]);
    assert!(net.kubespan.enabled);
    assert_eq!(net.kubespan.mtu, KUBESPAN_DEFAULT_MTU, "default mtu");
    assert_eq!(net.kubespan.filters.endpoints[1].to_string(), "!10.0.0.0/8");
    assert!(net.kubespan.filters.endpoints[1].exclude);
    let time = &cfg.machine.time;
    assert_eq!(time.boot_timeout, Some(Duration::from_secs(120)));
    let kubelet = &cfg.machine.kubelet;
    assert_eq!(kubelet.command[0], "/usr/bin/kubelet");
    assert_eq!(kubelet.extra_args["v"], "2");
    assert_eq!(kubelet.extra_args["rotate-server-certificates"], "true");
    let subnets = &kubelet.node_ip.as_ref().unwrap().valid_subnets;
    assert_eq!(subnets.len(), 2);
    let cluster = cfg.cluster.as_ref().unwrap();
    let discovery = cluster.discovery.as_ref().unwrap();
    assert!(discovery.enabled && discovery.registries.kubernetes.disabled);
    assert_eq!(
        discovery.registries.service.endpoint.as_deref(),
        Some("https://discovery.talos.dev/")
    );
}

#[test]
fn full_example_serializes() {
    let cfg = parse(FULL).unwrap();
    let yaml = serde_yaml::to_string(&cfg).unwrap();
    assert!(yaml.contains("bootTimeout: 2m0s"), "{yaml}");
    assert!(yaml.contains("mode: 802.3ad"), "{yaml}");
    assert!(yaml.contains("'!10.0.0.0/8'"), "{yaml}");
    assert!(!yaml.contains("clusterName: demo"), "ignored keys are not printed: {yaml}");
    let secret = cfg.cluster.as_ref().and_then(|c| c.secret.as_deref()).unwrap();
    assert!(!yaml.contains(secret) && yaml.contains("secret: <redacted>"), "{yaml}");
}

#[test]
fn minimal_and_defaults() {
    let cfg = parse("version: v1alpha1\n").unwrap();
    assert_eq!(cfg.machine.network.kubespan.mtu, 1420);
    assert!(cfg.cluster.is_none());
    assert!(cfg.warnings.is_empty());
    assert_eq!(cfg.machine.network.search_domains, None);
}

#[test]
fn known_talos_keys_warn() {
    let cfg = parse(FULL).unwrap();
    let expect = [
        ("persist", "persist: true"),
        ("machine.install.image", "image: ghcr.io/siderolabs/installer"),
        ("machine.certSANs", "certSANs:"),
        ("cluster.clusterName", "clusterName: demo"),
    ];
    let want: Vec<String> = expect
        .iter()
        .map(|(path, needle)| {
            format!(
                "{path} (line {}): a Talos key keelson does not use; ignored",
                line_of(FULL, needle)
            )
        })
        .collect();
    // The endpoint filters act: this config enables the discovery service.
    assert_eq!(cfg.warnings, want);
    // machine.token is read (trustd), and never shown.
    assert_eq!(cfg.machine.token.as_deref(), Some("abc.def"));
    assert!(!serde_json::to_string(&cfg.machine).unwrap().contains("abc.def"));
    // cluster.controlPlane.endpoint is read (joining control planes look there for etcd).
    let cp = cfg.cluster.as_ref().and_then(|c| c.control_plane.as_ref()).unwrap();
    assert!(cp.endpoint_host().is_some_and(|h| !h.is_empty()), "{cp:?}");
    assert_eq!(
        cfg.warnings[1],
        "machine.install.image (line 9): a Talos key keelson does not use; ignored"
    );
    // machine.kubelet.image is read: the kubelet gets it as KUBELET_IMAGE.
    assert_eq!(cfg.machine.kubelet.image.as_deref(), Some("ghcr.io/siderolabs/kubelet:v1.31.0"));
}

#[test]
fn a_kubelet_image_with_spaces_or_control_characters_is_refused() {
    for bad in ["\"a b\"", "\"x\\ty\"", "\"\""] {
        let text = format!("version: v1alpha1\nmachine:\n  kubelet:\n    image: {bad}\n");
        let e = parse(&text).unwrap_err().to_string();
        assert!(
            e.contains("machine.kubelet.image") && e.contains("an image reference"),
            "{bad}: {e}"
        );
    }
}

#[test]
fn every_listed_talos_key_is_accepted() {
    // Build a document holding one listed key at a time; each must parse with one warning.
    let empty = MachineConfig::default();
    for (path, _) in known::talos_keys(&empty) {
        let parts: Vec<&str> = path.split('.').collect();
        let mut yaml = String::from("version: v1alpha1\n");
        for (depth, part) in parts.iter().enumerate() {
            let indent = "  ".repeat(depth);
            if depth + 1 == parts.len() {
                yaml.push_str(&format!("{indent}{part}: {{anything: [1, 2]}}\n"));
            } else {
                yaml.push_str(&format!("{indent}{part}:\n"));
            }
        }
        let cfg = parse(&yaml).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(cfg.warnings.len(), 1, "{path}: {:?}", cfg.warnings);
        assert!(cfg.warnings[0].starts_with(&format!("{path} (line {})", parts.len() + 1)));
    }
}

#[test]
fn unknown_keys_at_several_depths() {
    let e = err("version: v1alpha1\nbogus: 1\n");
    assert_eq!((e.path.as_str(), e.line()), ("bogus", Some(2)));
    assert!(e.message.starts_with("unknown key \"bogus\""), "{e}");

    let (e, y) = err_with("  time: {", "  tme: 1\n  time: {");
    assert_eq!((e.path.as_str(), e.line()), ("machine.tme", Some(line_of(&y, "tme:"))));

    let (e, y) = err_with("\n        mtu: 1500\n", "\n        mtu: 1500\n        wireguard: {}\n");
    assert_eq!(e.path, "machine.network.interfaces[0].wireguard");
    assert_eq!(e.line(), Some(line_of(&y, "wireguard")));

    let (e, y) =
        err_with("            mtu: 1500\n", "            mtu: 1500\n            metrc: 5\n");
    assert_eq!(e.path, "machine.network.interfaces[0].routes[0].metrc");
    assert_eq!(e.line(), Some(line_of(&y, "metrc")));

    let (e, y) = err_with("stp: {enabled: true}", "stp: {enabled: true, forward: 1}");
    assert_eq!(e.path, "machine.network.interfaces[2].bridge.stp.forward");
    assert_eq!(e.line(), Some(line_of(&y, "forward")));

    let (e, _) =
        err_with("      kubernetes: {disabled: true}", "      kubernetes: {disabled: true, x: 1}");
    assert_eq!(e.path, "cluster.discovery.registries.kubernetes.x");
}

#[test]
fn wrong_type() {
    let (e, y) = err_with("\n        mtu: 1500\n", "\n        mtu: big\n");
    assert_eq!(e.path, "machine.network.interfaces[0].mtu");
    assert_eq!(e.line(), Some(line_of(&y, "mtu: big")));
    assert!(e.message.contains("invalid type"), "{e}");

    let (e, _) = err_with("    interfaces:\n", "    interfaces: {}\n    x:\n");
    assert_eq!(e.path, "machine.network.interfaces");

    let (e, _) = err_with("dhcp: true", "dhcp: maybe");
    assert_eq!(e.path, "machine.network.interfaces[3].dhcp");
}

#[test]
fn bad_ip_reports_path_line_and_column() {
    let (e, y) = err_with("gateway: 10.0.0.1", "gateway: 10.0.0.x");
    assert_eq!(e.path, "machine.network.interfaces[0].routes[0].gateway");
    let line = line_of(&y, "10.0.0.x");
    let column = y.lines().nth(line - 1).unwrap().find("10.0.0.x").unwrap() + 1;
    assert_eq!(e.position, Some(Position { line, column }));
    assert_eq!(e.message, "invalid IP address \"10.0.0.x\"");
    assert_eq!(
        e.to_string(),
        format!(
            "machine.network.interfaces[0].routes[0].gateway (line {line}, column {column}): \
             invalid IP address \"10.0.0.x\""
        )
    );

    let (e, _) = err_with("nameservers: [1.1.1.1,", "nameservers: [1.1.1.1, 8.8.8,");
    assert_eq!(e.path, "machine.network.nameservers[1]");
}

#[test]
fn bad_cidr() {
    let (e, y) = err_with("[10.0.0.2/24, 10.0.0.3]", "[10.0.0.2/24, 10.0.0.3/33]");
    assert_eq!(e.path, "machine.network.interfaces[0].addresses[1]");
    assert_eq!(e.line(), Some(line_of(&y, "10.0.0.3/33")));
    assert_eq!(e.message, "invalid CIDR \"10.0.0.3/33\"");

    // VLAN addresses must carry a prefix length (Talos would log and skip them).
    let (e, y) = err_with("[192.168.100.2/24]", "[192.168.100.2]");
    assert_eq!(e.path, "machine.network.interfaces[0].vlans[0].addresses[0]");
    assert_eq!(e.line(), Some(line_of(&y, "[192.168.100.2]")));
    assert!(e.message.contains("not in CIDR notation"), "{e}");

    let (e, _) = err_with("network: 0.0.0.0/0", "network: 0.0.0.0");
    assert_eq!(e.path, "machine.network.interfaces[0].routes[0].network");

    let (e, _) = err_with("\"!10.0.0.3/32\"", "\"!10.0.0.3\"");
    assert_eq!(e.path, "machine.kubelet.nodeIP.validSubnets[1]");
}

#[test]
fn bad_mac() {
    let (e, y) = err_with("hardwareAddr: \"00:1a:*\"", "hardwareAddr: \"0g:1a:*\"");
    assert_eq!(e.path, "machine.network.interfaces[1].bond.deviceSelectors[0].hardwareAddr");
    assert_eq!(e.line(), Some(line_of(&y, "0g:1a")));
    assert_eq!(e.message, "invalid MAC address pattern \"0g:1a:*\"");
}

#[test]
fn bad_bond_mode() {
    let (e, y) = err_with("mode: 802.3ad", "mode: 802.3xx");
    assert_eq!(e.path, "machine.network.interfaces[1].bond.mode");
    assert_eq!(e.line(), Some(line_of(&y, "802.3xx")));
    assert_eq!(e.message, "invalid bond mode \"802.3xx\"");
    // The kernel number is not a name.
    let (e, _) = err_with("mode: 802.3ad", "mode: 4");
    assert_eq!(e.path, "machine.network.interfaces[1].bond.mode");
    let (e, _) = err_with("lacpRate: fast", "lacpRate: quick");
    assert_eq!(e.path, "machine.network.interfaces[1].bond.lacpRate");
}

#[test]
fn vlan_id_range() {
    for bad in ["0", "4095", "4096"] {
        let (e, y) = err_with("vlanId: 100", &format!("vlanId: {bad}"));
        assert_eq!(e.path, "machine.network.interfaces[0].vlans[0].vlanId", "{bad}");
        assert_eq!(e.line(), Some(line_of(&y, "vlanId")));
        assert!(e.message.contains("1 to 4094"), "{e}");
    }
    assert!(parse(&FULL.replacen("vlanId: 100", "vlanId: 4094", 1)).is_ok());
}

#[test]
fn kubespan_mtu_minimum() {
    let (e, y) = err_with(
        "      enabled: true\n      allow",
        "      enabled: true\n      mtu: 1000\n      allow",
    );
    assert_eq!(e.path, "machine.network.kubespan.mtu");
    assert_eq!(e.line(), Some(line_of(&y, "mtu: 1000")));
    assert_eq!(e.message, "kubespan MTU 1000 is below the minimum 1280");
    let ok = FULL.replacen(
        "      enabled: true\n      allow",
        "      enabled: true\n      mtu: 1280\n      allow",
        1,
    );
    assert_eq!(parse(&ok).unwrap().machine.network.kubespan.mtu, 1280);
}

#[test]
fn bad_duration() {
    let (e, y) = err_with("bootTimeout: 2m", "bootTimeout: 2 minutes");
    assert_eq!(e.path, "machine.time.bootTimeout");
    assert_eq!(e.line(), Some(line_of(&y, "bootTimeout")));
    assert!(e.message.starts_with("invalid duration \"2 minutes\""), "{e}");
    let ok = FULL.replacen("bootTimeout: 2m", "bootTimeout: 1h30m", 1);
    assert_eq!(parse(&ok).unwrap().machine.time.boot_timeout, Some(Duration::from_secs(5400)));
}

#[test]
fn other_value_errors() {
    let (e, _) = err_with("table: main", "table: unspec");
    assert_eq!(e.path, "machine.network.interfaces[0].routes[0].table");
    let ok = FULL.replacen("table: main", "table: 100", 1);
    assert_eq!(
        parse(&ok).unwrap().machine.network.interfaces[0].routes[0].table,
        Some(RoutingTable(100))
    );
    let (e, _) = err_with("hostname: node-1.example.org", &format!("hostname: {}", "a".repeat(64)));
    assert_eq!(e.path, "machine.network.hostname");
    let (e, _) = err_with("type: controlplane", "type: master");
    assert_eq!(e.path, "machine.type");
    let (e, _) = err_with("endpoint: \"https://discovery", "endpoint: \"ftp://discovery");
    assert_eq!(e.path, "cluster.discovery.registries.service.endpoint");
    let (e, _) = err_with("ipv6: false}", "ipv6: false, duidv6: \"0x1\"}");
    assert_eq!(e.path, "machine.network.interfaces[0].dhcpOptions.duidv6");
    let (e, _) = err_with("secret: c2Vj", "secret: c2V$j");
    assert_eq!(e.path, "cluster.secret");
}

#[test]
fn semantic_errors_have_paths_and_lines() {
    let (e, y) = err_with(
        "      - deviceSelector: {driver",
        "      - interface: eth9\n        deviceSelector: {driver",
    );
    assert_eq!(e.path, "machine.network.interfaces[3].deviceSelector");
    assert_eq!(e.line(), Some(line_of(&y, "deviceSelector: {driver")));
    assert!(e.message.contains("not both"), "{e}");

    let (e, y) = err_with("      - interface: br0\n", "      - mtu: 9000\n");
    assert_eq!(e.path, "machine.network.interfaces[2]");
    assert_eq!(e.line(), Some(line_of(&y, "- mtu: 9000")));

    let (e, y) = err_with(
        "      - interface: br0\n",
        "      - interface: br0\n        bond: {interfaces: [eth5]}\n",
    );
    assert_eq!(e.path, "machine.network.interfaces[2].bridge");
    assert_eq!(e.line(), Some(line_of(&y, "bridge: {")));

    let (e, y) =
        err_with("deviceSelectors: [{hardwareAddr: \"00:1a:*\"}]", "deviceSelectors: [{}]");
    assert_eq!(e.path, "machine.network.interfaces[1].bond.deviceSelectors[0]");
    assert_eq!(e.line(), Some(line_of(&y, "deviceSelectors")));

    let e = err("version: v1alpha2\n");
    assert_eq!((e.path.as_str(), e.line()), ("version", Some(1)));
}

#[test]
fn document_level_errors() {
    let e = err("machine: {}\n");
    assert_eq!(e.path, "");
    assert!(e.message.contains("missing field `version`"), "{e}");
    assert!(e.to_string().starts_with("(document)"), "{e}");
    let e = err("version: v1alpha1\nmachine: [\n");
    assert!(e.line().is_some(), "{e}");
    let e = err("version: v1alpha1\n---\nversion: v1alpha1\n");
    assert!(e.message.contains("a second v1alpha1 machine configuration"), "{e}");
}

const KS_PEERS: &str = r#"
version: v1alpha1
machine:
  network:
    kubespan:
      enabled: true
      endpointTimeout: 4s
      nftablesTable: keelson_kubespan
      privateKey: eOJ1ZBWsDwPEE+t6Gdda8PgI3+Q7uOxVNu8nLmF5SH4=
      harvestExtraEndpoints: true
      advertiseKubernetesNetworks: true
      peers:
        - publicKey: 6EqTl0ZdKpNqKQ86Vp1QK5j6Cv2n4cVq0UWCEAhPzXw=
          label: node-2
          endpoints: ["10.9.0.2:51820", "[fd00::2]:51820"]
          addresses: [10.9.0.2, 10.244.1.0/24]
cluster:
  id: 8XuV9TZHW08DOk3bVxQjH9ih_TBKjnh-j44tsCLSBzo=
"#;

#[test]
fn kubespan_peers_and_keelson_keys() {
    // The cluster ID is docs/talos.md: KubeSpan's, URL-safe base64 as Talos generates it.
    let yaml = KS_PEERS.to_owned();
    let cfg = parse(&yaml).unwrap();
    let ks = &cfg.machine.network.kubespan;
    assert_eq!(ks.endpoint_timeout, Duration::from_secs(4));
    assert_eq!(ks.nftables_table, "keelson_kubespan");
    assert_eq!(ks.peers.len(), 1);
    let p = &ks.peers[0];
    assert_eq!(p.label, "node-2");
    assert_eq!(p.endpoints[1].to_string(), "[fd00::2]:51820");
    assert_eq!(p.addresses[0].to_string(), "10.9.0.2/32");
    assert!(format!("{ks:?}").contains("<redacted>"));
    assert!(!format!("{ks:?}").contains("eOJ1ZBWs"), "the private key never shows");
    let printed = serde_yaml::to_string(&cfg).unwrap();
    assert!(!printed.contains("eOJ1ZBWs"), "{printed}");
    assert_eq!(cfg.warnings.len(), 2, "{:?}", cfg.warnings);
    assert!(
        cfg.warnings[1].starts_with("machine.network.kubespan.advertiseKubernetesNetworks (line")
    );
    assert!(cfg.warnings[0].starts_with(&format!(
        "machine.network.kubespan.harvestExtraEndpoints (line {})",
        line_of(&yaml, "harvestExtraEndpoints")
    )));
    let defaults = parse("version: v1alpha1\n").unwrap();
    assert_eq!(
        defaults.machine.network.kubespan.endpoint_timeout,
        KUBESPAN_DEFAULT_ENDPOINT_TIMEOUT
    );
    assert_eq!(defaults.machine.network.kubespan.nftables_table, "talos_kubespan");
}

#[test]
fn kubespan_bad_values_name_their_path() {
    let cases = [
        (
            "endpointTimeout: 4s",
            "endpointTimeout: 16s",
            "machine.network.kubespan.endpointTimeout",
            "outside 1s..15s",
        ),
        (
            "endpointTimeout: 4s",
            "endpointTimeout: 500ms",
            "machine.network.kubespan.endpointTimeout",
            "outside 1s..15s",
        ),
        (
            "nftablesTable: keelson_kubespan",
            "nftablesTable: \"bad name\"",
            "machine.network.kubespan.nftablesTable",
            "invalid nftables table name",
        ),
        (
            "privateKey: eOJ1",
            "privateKey: short",
            "machine.network.kubespan.privateKey",
            "invalid WireGuard private key",
        ),
        (
            "publicKey: 6EqT",
            "publicKey: xx6EqT",
            "machine.network.kubespan.peers[0].publicKey",
            "invalid WireGuard public key",
        ),
        (
            "\"10.9.0.2:51820\"",
            "\"10.9.0.2\"",
            "machine.network.kubespan.peers[0].endpoints[0]",
            "invalid endpoint",
        ),
        (
            "\"10.9.0.2:51820\"",
            "\"10.9.0.2:0\"",
            "machine.network.kubespan.peers[0].endpoints[0]",
            "port 0",
        ),
        (
            "10.244.1.0/24]",
            "10.244.1.0/33]",
            "machine.network.kubespan.peers[0].addresses[1]",
            "invalid CIDR",
        ),
        (
            "label: node-2",
            "lable: node-2",
            "machine.network.kubespan.peers[0].lable",
            "unknown key",
        ),
    ];
    for (find, replace, path, msg) in cases {
        let yaml = KS_PEERS.replacen(find, replace, 1);
        let e = err(&yaml);
        assert_eq!(e.path, path, "{replace}: {e}");
        assert!(e.message.contains(msg), "{replace}: {e}");
        assert!(!e.message.contains("short"), "a private key is never echoed: {e}");
    }
}

#[test]
fn kubespan_duplicate_peer() {
    let dup = "      peers:\n        - publicKey: 6EqTl0ZdKpNqKQ86Vp1QK5j6Cv2n4cVq0UWCEAhPzXw=\n        - publicKey: 6EqTl0ZdKpNqKQ86Vp1QK5j6Cv2n4cVq0UWCEAhPzXw=\n";
    let yaml = format!("version: v1alpha1\nmachine:\n  network:\n    kubespan:\n{dup}");
    let e = err(&yaml);
    assert_eq!(e.path, "machine.network.kubespan.peers[1].publicKey");
    assert_eq!(e.line(), Some(7));
}

#[test]
fn kubespan_without_cluster_id_warns() {
    let cfg =
        parse("version: v1alpha1\nmachine:\n  network:\n    kubespan: {enabled: true}\n").unwrap();
    assert_eq!(cfg.warnings.len(), 1);
    assert!(cfg.warnings[0].contains("needs cluster.id"), "{:?}", cfg.warnings);
}

#[test]
fn names_that_would_reach_etc_are_refused_with_their_path() {
    let long_label = "a".repeat(64);
    let domain65 = format!("{}.{}", "d".repeat(40), "e".repeat(24));
    let cases: [(&str, String, &str, &str); 9] = [
        (
            "hostname: node-1.example.org",
            r#"hostname: "node\n6.6.6.6 registry.local""#.into(),
            "machine.network.hostname",
            "invalid hostname: label 1 contains '\\n'",
        ),
        (
            "hostname: node-1.example.org",
            r#"hostname: "node\e]0;x\a""#.into(),
            "machine.network.hostname",
            "invalid hostname: label 1 contains '\\u{1b}'",
        ),
        (
            "hostname: node-1.example.org",
            format!("hostname: node.{long_label}"),
            "machine.network.hostname",
            "invalid hostname: label 2 is 64 bytes long, more than 63",
        ),
        (
            "hostname: node-1.example.org",
            format!("hostname: node.{domain65}"),
            "machine.network.hostname",
            "invalid hostname: domain part is 65 bytes long, more than 64 (the kernel's limit)",
        ),
        (
            "hostname: node-1.example.org",
            "hostname: my_node".into(),
            "machine.network.hostname",
            "invalid hostname: label 1 contains '_'",
        ),
        (
            "searchDomains: [example.org]",
            r#"searchDomains: [example.org, "ok.example\nnameserver 6.6.6.6"]"#.into(),
            "machine.network.searchDomains[1]",
            "invalid domain name: label 2 contains '\\n'",
        ),
        (
            "searchDomains: [example.org]",
            format!("searchDomains: [{long_label}.example]"),
            "machine.network.searchDomains[0]",
            "invalid domain name: label 1 is 64 bytes long, more than 63",
        ),
        (
            "aliases: [registry.local]",
            r#"aliases: [registry.local, "x\n6.6.6.6 registry.local"]"#.into(),
            "machine.network.extraHostEntries[0].aliases[1]",
            "invalid domain name: label 1 contains '\\n'",
        ),
        (
            "aliases: [registry.local]",
            r#"aliases: ["reg\u0085istry"]"#.into(),
            "machine.network.extraHostEntries[0].aliases[0]",
            "invalid domain name: label 1 contains '\\u{85}'",
        ),
    ];
    for (find, replace, path, message) in cases {
        let (e, _) = err_with(find, &replace);
        assert_eq!((e.path.as_str(), e.message.as_str()), (path, message), "{replace}");
        assert!(!e.to_string().contains('\n'), "one line: {e}");
    }
    // A trailing dot is the root: accepted and stripped.
    let ok = FULL.replacen("searchDomains: [example.org]", "searchDomains: [example.org.]", 1);
    assert_eq!(
        parse(&ok).unwrap().machine.network.search_domains,
        Some(vec!["example.org".to_owned()])
    );
}

#[test]
fn link_mtu_must_be_one_the_kernel_takes() {
    let device_mtu = "        mtu: 1500\n        dhcp: false";
    let (e, y) = err_with(device_mtu, "        mtu: 65536\n        dhcp: false");
    assert_eq!(e.path, "machine.network.interfaces[0].mtu");
    assert_eq!(e.line(), Some(line_of(&y, "mtu: 65536")));
    assert_eq!(e.message, "65536 is outside 68..65535");
    let (e, _) = err_with(device_mtu, "        mtu: 67\n        dhcp: false");
    assert_eq!(e.message, "67 is outside 68..65535");
    let (e, _) = err_with("            mtu: 1400", "            mtu: 70000");
    assert_eq!(e.path, "machine.network.interfaces[0].vlans[0].mtu");
    assert!(parse(&FULL.replacen(device_mtu, "        mtu: 65535\n        dhcp: false", 1)).is_ok());

    // Below 1280 only where IPv6 is wanted: a static IPv6 address or DHCPv6.
    let small = FULL.replacen(device_mtu, "        mtu: 1200\n        dhcp: false", 1);
    assert!(parse(&small).is_ok());
    let with_v6 = small.replacen("[10.0.0.2/24, 10.0.0.3]", "[10.0.0.2/24, fd00::2/64]", 1);
    let e = err(&with_v6);
    assert_eq!(e.path, "machine.network.interfaces[0].mtu");
    assert!(e.message.contains("below 1280, the IPv6 minimum"), "{e}");
    let dhcp6 = small.replacen(
        "dhcp: false\n        dhcpOptions: {routeMetric: 1024, ipv4: true, ipv6: false}",
        "dhcp: true\n        dhcpOptions: {routeMetric: 1024, ipv4: true, ipv6: true}",
        1,
    );
    assert_ne!(dhcp6, small);
    assert_eq!(err(&dhcp6).path, "machine.network.interfaces[0].mtu");
}

#[test]
fn route_gateway_and_source_in_the_route_family() {
    let (e, y) =
        err_with("gateway: 10.0.0.1\n            source", "gateway: fd00::1\n            source");
    assert_eq!(e.path, "machine.network.interfaces[0].routes[0].gateway");
    assert_eq!(e.line(), Some(line_of(&y, "fd00::1")));
    assert_eq!(e.message, "an IPv4 route cannot go via the IPv6 gateway fd00::1");
    let (e, _) = err_with("source: 10.0.0.2", "source: fd00::2");
    assert_eq!(e.path, "machine.network.interfaces[0].routes[0].source");
}

#[test]
fn link_names_the_kernel_takes() {
    let (e, y) = err_with("interface: bond0", "interface: bond0123456789ab");
    assert_eq!(e.path, "machine.network.interfaces[1].interface");
    assert_eq!(e.line(), Some(line_of(&y, "bond0123456789ab")));
    assert!(e.message.contains("longer than 15 bytes"), "{e}");
    let (e, _) = err_with("interface: eth0", "interface: eth/0");
    assert_eq!(e.path, "machine.network.interfaces[0].interface");
    assert!(e.message.contains("'/'"), "{e}");
    let (e, _) = err_with("interfaces: [eth1, eth2]", "interfaces: [eth1, \"a b\"]");
    assert_eq!(e.path, "machine.network.interfaces[1].bond.interfaces[1]");
    // A name we only look up may be an altname, longer than 15 bytes.
    assert!(parse(&FULL.replacen("interface: eth0", "interface: enp0s20f0u1u2c2x", 1)).is_ok());
}

#[test]
fn hostname_with_a_domain_setdomainname_refuses() {
    let long = format!("hostname: node-1.{}.org", "d".repeat(61));
    let (e, y) = err_with("hostname: node-1.example.org", &long);
    assert_eq!(e.path, "machine.network.hostname");
    assert_eq!(e.line(), Some(line_of(&y, "hostname: node-1.ddd")));
    assert!(e.message.contains("domain part is 65 bytes"), "{e}");
    let ok = format!("hostname: node-1.{}.org", "d".repeat(60));
    assert!(parse(&FULL.replacen("hostname: node-1.example.org", &ok, 1)).is_ok());
}

#[test]
fn install_disk_selector_and_wipe_are_read() {
    let cfg = parse(FULL).unwrap();
    let install = cfg.machine.install.unwrap();
    assert_eq!(install.disk.as_deref(), Some("/dev/sda"));
    assert!(!install.wipe);
    let cfg = parse(
        "version: v1alpha1\nmachine:\n  install:\n    wipe: true\n    diskSelector:\n      size: '>= 10GB'\n      model: QEMU*\n      type: ssd\n",
    )
    .unwrap();
    let install = cfg.machine.install.unwrap();
    assert!(install.wipe && install.disk.is_none());
    let sel = install.disk_selector.unwrap();
    assert_eq!((sel.size.as_deref(), sel.model.as_deref()), (Some(">= 10GB"), Some("QEMU*")));
    assert_eq!(sel.disk_type.as_deref(), Some("ssd"));
    assert!(parse("version: v1alpha1\nmachine:\n  install:\n    disks: /dev/sda\n").is_err());
}

#[test]
fn cluster_etcd_keys_as_talos_reads_them() {
    // "LS0t" is base64 of "---": the parser checks the base64 and keeps it as written.
    let yaml = "version: v1alpha1\nmachine:\n  type: controlplane\ncluster:\n  etcd:\n    \
                ca: {crt: LS0t, key: LS0t}\n    image: gcr.io/etcd-development/etcd:v3.5.16\n    \
                extraArgs: {election-timeout: \"5000\"}\n    advertisedSubnets: [10.0.0.0/8, \
                \"!10.9.0.0/16\"]\n    listenSubnets: [10.0.0.0/8]\n";
    let cfg = parse(yaml).unwrap();
    let etcd = cfg.cluster.as_ref().unwrap().etcd.as_ref().unwrap();
    assert_eq!(etcd.ca.as_ref().unwrap().crt, "LS0t");
    assert_eq!(etcd.ca.as_ref().unwrap().key.as_deref(), Some("LS0t"));
    assert_eq!(etcd.extra_args["election-timeout"], "5000");
    assert_eq!(etcd.advertised_subnets.len(), 2);
    assert!(etcd.advertised_subnets[1].exclude);
    assert_eq!(etcd.listen_subnets.len(), 1);
    assert_eq!(
        cfg.warnings,
        ["cluster.etcd.image (line 7): a Talos key keelson does not use; ignored"]
    );
    let e = err("version: v1alpha1\ncluster:\n  etcd:\n    advertisedSubnets: [10.0.0.0/33]\n");
    assert_eq!(e.path, "cluster.etcd.advertisedSubnets[0]");
}

#[test]
fn the_control_plane_endpoint_host_is_read_from_the_url() {
    let host = |url: &str| {
        ControlPlaneConfig { endpoint: Some(url.to_owned()), ..Default::default() }.endpoint_host()
    };
    assert_eq!(host("https://10.5.0.100:6443").as_deref(), Some("10.5.0.100"));
    assert_eq!(host("https://[fd00::100]:6443/").as_deref(), Some("fd00::100"));
    assert_eq!(host("https://cp.example.org").as_deref(), Some("cp.example.org"));
    assert_eq!(host("cp.example.org:6443").as_deref(), Some("cp.example.org"));
    assert_eq!(host("https://u@h:1/x").as_deref(), Some("h"));
    assert_eq!(host("https://:6443"), None);
    assert_eq!(host("https://[fd00::1"), None);
}
