// SPDX-License-Identifier: Apache-2.0
//! Talos v1.14's document kinds and fields: every kind Talos registers loads (acted on, or
//! with one warning), the fields Talos added to kinds keelson implements are known, and
//! configurations in the shapes Talos 1.14 writes (`talosctl gen config`, its test patches
//! and example documents) load. The fixtures are written here after those shapes; the values
//! are made up.

use super::tests_specs::{ether, link, node_links, operator, specs_for};
use super::*;
use crate::resource::{ConfigLayer, LinkView};

/// Every kind Talos v1.14 registers (`pkg/machinery/config/types/*`, `registry.Register`).
const TALOS_1_14_KINDS: &[&str] = &[
    "BGPInstanceConfig",
    "BlackholeRouteConfig",
    "BondConfig",
    "BridgeConfig",
    "CRIBaseRuntimeSpecConfig",
    "CRICustomizationConfig",
    "ContainerConfig",
    "DHCPv4Config",
    "DHCPv6Config",
    "DiscoveryIdentityConfig",
    "DiscoveryServiceConfig",
    "DummyLinkConfig",
    "EnvironmentConfig",
    "EtcFileConfig",
    "EthernetConfig",
    "EventSinkConfig",
    "ExistingVolumeConfig",
    "ExtensionServiceConfig",
    "ExternalVolumeConfig",
    "FilesystemScrubConfig",
    "FilesystemTrimConfig",
    "HCloudVIPConfig",
    "HTTPProbeConfig",
    "HostnameConfig",
    "ImageCacheConfig",
    "ImageVerificationConfig",
    "KernelModuleConfig",
    "KmsgLogConfig",
    "KubeAPIServerCAConfig",
    "KubeAPIServerConfig",
    "KubeAdmissionControlConfig",
    "KubeAggregatorCAConfig",
    "KubeAuditPolicyConfig",
    "KubeAuthenticationConfig",
    "KubeAuthorizerConfig",
    "KubeClusterConfig",
    "KubeControllerManagerConfig",
    "KubeCoreDNSConfig",
    "KubeCredentialProviderConfig",
    "KubeEtcdEncryptionConfig",
    "KubeExternalManifestConfig",
    "KubeFlannelCNIConfig",
    "KubeInlineManifestConfig",
    "KubeNetworkConfig",
    "KubeNodeConfig",
    "KubePrismConfig",
    "KubeProxyConfig",
    "KubeSchedulerConfig",
    "KubeServiceAccountConfig",
    "KubeSpanConfig",
    "KubeSpanEndpointsConfig",
    "KubeStaticPodConfig",
    "KubeTalosAPIAccessConfig",
    "KubeletConfig",
    "LVMLogicalVolumeConfig",
    "LVMVolumeGroupConfig",
    "Layer2VIPConfig",
    "LinkAliasConfig",
    "LinkConfig",
    "NetworkDefaultActionConfig",
    "NetworkRuleConfig",
    "OOMConfig",
    "PCIDriverRebindConfig",
    "RAIDArrayConfig",
    "RawVolumeConfig",
    "RegistryAuthConfig",
    "RegistryMirrorConfig",
    "RegistryTLSConfig",
    "ResolverConfig",
    "RoutingRuleConfig",
    "SecurityProfileConfig",
    "SideroLinkConfig",
    "StaticHostConfig",
    "SwapVolumeConfig",
    "SysctlConfig",
    "SysfsConfig",
    "TCPProbeConfig",
    "TimeSyncConfig",
    "TrustedRootsConfig",
    "UdevRulesConfig",
    "UnattendedInstallConfig",
    "UserVolumeConfig",
    "VLANConfig",
    "VRFConfig",
    "VethConfig",
    "VolumeConfig",
    "WatchdogTimerConfig",
    "WireguardConfig",
    "ZswapConfig",
];

const V1: &str = "version: v1alpha1\nmachine:\n  type: worker\n";
const ID: &str = "MDEyMzQ1Njc4OTAxMjM0NTY3ODkwMTIzNDU2Nzg5MDE=";
const SECRET: &str = "vlf2HU1NEZL3Ezi9Tk+RZBLJUbjnsHnTzs3wK9JNk6Q=";

fn ok(yaml: &str) -> MachineConfig {
    parse(yaml).unwrap_or_else(|e| panic!("{e}"))
}

fn errors(yaml: &str) -> Vec<String> {
    let report = check(yaml);
    assert!(!report.errors.is_empty(), "expected errors, got {:?}", report.config.warnings);
    report.errors.iter().map(ToString::to_string).collect()
}

fn identity() -> String {
    format!("apiVersion: v1alpha1\nkind: DiscoveryIdentityConfig\nclusterID: {ID}\nclusterSecret: {SECRET}\n")
}

#[test]
fn every_talos_1_14_kind_is_implemented_or_accepted_with_one_warning() {
    let mut missing = Vec::new();
    for kind in TALOS_1_14_KINDS {
        let implemented = Document::KINDS.contains(kind);
        let accepted = documents::NOT_IMPLEMENTED.contains(kind);
        assert!(!(implemented && accepted), "{kind} is in both lists");
        if !implemented && !accepted {
            missing.push(*kind);
            continue;
        }
        if accepted {
            // A bare document of the kind, with a field keelson knows nothing about: one
            // warning naming the document, nothing else.
            let yaml = format!("apiVersion: v1alpha1\nkind: {kind}\nanything: [1, 2]\n");
            let report = check(&yaml);
            assert!(report.errors.is_empty(), "{kind}: {:?}", report.errors);
            assert_eq!(
                report.config.warnings,
                [format!(
                    "document 1 ({kind}) (line 1): a Talos document keelson does not implement yet; ignored"
                )]
            );
        }
    }
    assert!(missing.is_empty(), "Talos kinds keelson refuses: {missing:?}");
    // Still an error: a kind Talos does not have.
    let e = errors("apiVersion: v1alpha1\nkind: LinkConfigg\nname: eth0\n");
    assert!(e[0].contains("kind (line 2, column 1): unknown kind \"LinkConfigg\""), "{e:?}");
}

/// The shape `talosctl gen config` writes for Talos 1.14 (its stability test data): a
/// v1alpha1 document without `machine.network`, `cluster.discovery` or `cluster.id`, and the
/// rest as documents.
const GENERATED_1_14: &str = "version: v1alpha1
debug: false
persist: true
machine:
    type: controlplane
    token: abcdef.0123456789abcdef
    certSANs: []
    features:
        diskQuotaSupport: true
cluster:
    token: abcdef.0123456789abcdef
---
apiVersion: v1alpha1
kind: DiscoveryServiceConfig
name: default
endpoint: https://discovery.talos.dev/
---
apiVersion: v1alpha1
kind: DiscoveryIdentityConfig
clusterID: 0raF93qnkMvF-FZNuvyGozXNdLiT2FOWSlyBaW4PR-w=
clusterSecret: vlf2HU1NEZL3Ezi9Tk+RZBLJUbjnsHnTzs3wK9JNk6Q=
---
apiVersion: v1alpha1
kind: ResolverConfig
hostDNS:
    enabled: true
    forwardKubeDNSToHost: true
---
apiVersion: v1alpha1
kind: VolumeConfig
name: EPHEMERAL
mount:
    secure: true
---
apiVersion: v1alpha1
kind: FilesystemTrimConfig
interval: 168h0m0s
---
apiVersion: v1alpha1
kind: SecurityProfileConfig
workloadIsolation: true
---
apiVersion: v1alpha1
kind: HostnameConfig
auto: stable
---
apiVersion: v1alpha1
kind: KubeClusterConfig
clusterName: demo
endpoint: https://demo:6443
---
apiVersion: v1alpha1
kind: KubeNodeConfig
nodeIP: {}
---
apiVersion: v1alpha1
kind: KubeletConfig
image: ghcr.io/siderolabs/kubelet:v1.35.0
config: {}
---
apiVersion: v1alpha1
kind: KubePrismConfig
port: 7445
";

#[test]
fn a_talos_1_14_generated_configuration_loads_and_its_discovery_applies() {
    let report = check(GENERATED_1_14);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let cfg = &report.config;
    let cluster = cfg.cluster.as_ref().unwrap();
    let d = cluster.discovery.as_ref().unwrap();
    assert!(d.enabled && !d.registries.service.disabled && d.registries.kubernetes.disabled);
    assert_eq!(d.registries.service.endpoint.as_deref(), Some("https://discovery.talos.dev/"));
    // The pre-1.14 URL alphabet of the ID is taken as it is: it is never decoded.
    assert_eq!(cluster.id.as_deref(), Some("0raF93qnkMvF-FZNuvyGozXNdLiT2FOWSlyBaW4PR-w="));
    assert_eq!(cluster.secret.as_deref(), Some(SECRET));
    assert_eq!(cfg.machine.network.auto_hostname, AutoHostname::Stable);
    // One warning per kind keelson does not use, naming the document and its line.
    for (n, kind, line) in [
        (5, "VolumeConfig", 28),
        (6, "FilesystemTrimConfig", 34),
        (7, "SecurityProfileConfig", 38),
        (9, "KubeClusterConfig", 46),
        (11, "KubeletConfig", 55),
        (12, "KubePrismConfig", 60),
    ] {
        let w = format!("document {n} ({kind}) (line {line}): a Talos document keelson does not implement yet; ignored");
        assert_eq!(cfg.warnings.iter().filter(|x| **x == w).count(), 1, "{w}: {:?}", cfg.warnings);
    }
    // `KubeNodeConfig` with an empty `nodeIP` is read, and says nothing.
    assert!(cfg.warnings.iter().all(|w| !w.contains("KubeNodeConfig")), "{:?}", cfg.warnings);
    assert_eq!(cfg.machine.kubelet.node_ip, None);
    // The secret is in no warning, and not in what the configuration shows of itself.
    assert!(cfg.warnings.iter().all(|w| !w.contains(SECRET)), "{:?}", cfg.warnings);
    assert!(!serde_yaml::to_string(cfg).unwrap().contains(SECRET));
    assert!(!format!("{cfg:?}").contains(SECRET));
}

#[test]
fn discovery_service_config_folds_into_cluster_discovery() {
    let cfg = ok(&format!(
        "apiVersion: v1alpha1\nkind: DiscoveryServiceConfig\nname: primary\nendpoint: grpc://discovery.example:6443\n---\n{}",
        identity()
    ));
    let cluster = cfg.cluster.as_ref().unwrap();
    let d = cluster.discovery.as_ref().unwrap();
    assert!(d.enabled);
    assert_eq!(d.registries.service.endpoint.as_deref(), Some("grpc://discovery.example:6443"));
    assert!(cfg.documents.is_empty(), "folded, not kept: {:?}", cfg.documents);
    assert_eq!((cluster.id.as_deref(), cluster.secret.as_deref()), (Some(ID), Some(SECRET)));
    // Talos accepts a path on a document's endpoint (the client ignores it).
    ok(&format!(
        "apiVersion: v1alpha1\nkind: DiscoveryServiceConfig\nname: b\nendpoint: https://d.example/path\n---\n{}",
        identity()
    ));
    // The identity may be v1alpha1's.
    let cfg = ok(&format!(
        "{V1}cluster:\n  id: {ID}\n  secret: {SECRET}\n---\napiVersion: v1alpha1\nkind: DiscoveryServiceConfig\nname: b\nendpoint: http://d.example:3000\n"
    ));
    assert!(cfg.cluster.and_then(|c| c.discovery).is_some_and(|d| d.enabled));
    // Without one, the service document is refused (Talos refuses the configuration), and
    // the rest applies.
    let report = check(&format!(
        "{V1}  network:\n    hostname: n1\n---\napiVersion: v1alpha1\nkind: DiscoveryServiceConfig\nname: b\nendpoint: https://d.example/\n"
    ));
    let [e] = report.errors.as_slice() else { panic!("{:?}", report.errors) };
    assert!(
        e.to_string().starts_with("document 2 (DiscoveryServiceConfig b): (document) (line 6, column 1): the discovery service needs the cluster's identity"),
        "{e}"
    );
    assert!(report.config.cluster.is_none_or(|c| c.discovery.is_none()));
    assert_eq!(report.config.machine.network.hostname.as_deref(), Some("n1"));
    // v1alpha1's endpoint takes `grpc://` too, as the client does.
    let cfg = ok(&format!(
        "{V1}cluster:\n  id: {ID}\n  secret: {SECRET}\n  discovery:\n    enabled: true\n    registries:\n      service:\n        endpoint: grpc://d.example:6443\n"
    ));
    let d = cfg.cluster.and_then(|c| c.discovery).unwrap();
    assert_eq!(d.registries.service.endpoint.as_deref(), Some("grpc://d.example:6443"));
    // Without any: discovery stays off.
    assert!(ok(V1).cluster.is_none_or(|c| c.discovery.is_none()));
}

#[test]
fn discovery_service_config_rules() {
    let doc = |body: &str| format!("apiVersion: v1alpha1\nkind: DiscoveryServiceConfig\n{body}");
    let e = errors(&doc("name: a\n"));
    assert!(e[0].contains("missing field `endpoint`"), "{e:?}");
    let e = errors(&doc("name: a\nendpoint: ftp://d.example/\n"));
    assert!(e[0].contains("endpoint (line 4") && e[0].contains("grpc://"), "{e:?}");
    let e = errors(&doc("name: \"\"\nendpoint: https://d.example/\n"));
    assert!(e[0].contains("name (line 3") && e[0].contains("name is required"), "{e:?}");
    let e = errors(&doc("name: a\nendpoint: https://d.example/\nenabled: true\n"));
    assert!(e[0].contains("enabled (line 5, column 1): unknown key"), "{e:?}");
    // Talos: the v1alpha1 `cluster.discovery` and the document exclude each other, whatever
    // the block says.
    let e = errors(&format!(
        "{V1}cluster:\n  discovery:\n    enabled: false\n---\n{}",
        doc("name: a\nendpoint: https://d.example/\n")
    ));
    assert!(
        e[0].starts_with("document 2 (DiscoveryServiceConfig a)")
            && e[0].contains("cluster.discovery (line 5) in the v1alpha1 document"),
        "{e:?}"
    );
    // Two services: keelson runs one client, for the first, and says so for the second.
    let two = format!(
        "{}---\n{}---\n{}",
        doc("name: primary\nendpoint: https://one.example/\n"),
        doc("name: secondary\nendpoint: https://two.example/\n"),
        identity()
    );
    let cfg = ok(&two);
    let d = cfg.cluster.as_ref().and_then(|c| c.discovery.as_ref()).unwrap();
    assert_eq!(d.registries.service.endpoint.as_deref(), Some("https://one.example/"));
    assert_eq!(
        cfg.warnings,
        ["document 2 (DiscoveryServiceConfig secondary) (line 5): keelson runs one discovery \
          client, for document 1 (DiscoveryServiceConfig primary) (line 1); this service is not used"]
    );
    // One name, twice: refused as for every named kind.
    let e = errors(&format!(
        "{}---\n{}",
        doc("name: a\nendpoint: https://one.example/\n"),
        doc("name: a\nendpoint: https://two.example/\n")
    ));
    assert!(e[0].contains("DiscoveryServiceConfig/a is configured twice"), "{e:?}");
}

#[test]
fn discovery_identity_config_rules_never_quote_the_secret() {
    let doc = |body: &str| format!("apiVersion: v1alpha1\nkind: DiscoveryIdentityConfig\n{body}");
    let short = "c2hvcnQtc2VjcmV0";
    let e = errors(&doc(&format!("clusterID: {ID}\nclusterSecret: {short}\n")));
    assert!(
        e[0].contains("clusterSecret (line 4") && e[0].contains("not 32 bytes in base64"),
        "{e:?}"
    );
    assert!(e.iter().all(|e| !e.contains(short)), "{e:?}");
    let e = errors(&doc(&format!("clusterID: \"\"\nclusterSecret: {SECRET}\n")));
    assert!(e[0].contains("clusterID (line 3") && e[0].contains("required"), "{e:?}");
    let e = errors(&doc(&format!("clusterSecret: {SECRET}\n")));
    assert!(e[0].contains("missing field `clusterID`"), "{e:?}");
    assert!(e.iter().all(|e| !e.contains(SECRET)), "{e:?}");
    // Talos: the identity is given once, here or in cluster.id/cluster.secret.
    let e = errors(&format!("{V1}cluster:\n  id: {ID}\n---\n{}", identity()));
    assert!(
        e[0].starts_with("document 2 (DiscoveryIdentityConfig)")
            && e[0].contains("cluster.id (line 5) in the v1alpha1 document"),
        "{e:?}"
    );
    // The document itself never shows the secret either.
    let Document::DiscoveryIdentity(d) =
        Document::parse("DiscoveryIdentityConfig", &identity()).unwrap().unwrap()
    else {
        panic!("not an identity document");
    };
    assert!(!format!("{d:?}").contains(SECRET));
    assert!(serde_yaml::to_string(&d).unwrap().contains("clusterSecret: <redacted>"));
}

#[test]
fn dhcpv4_ignore_routes_reaches_the_operator() {
    // Talos's DHCPv4Config example, `ignoreRoutes` included.
    let yaml = "apiVersion: v1alpha1\nkind: DHCPv4Config\nname: enp0s3\nrouteMetric: 512\n\
                ignoreHostname: true\nignoreRoutes: true\nclientIdentifier: duid\n\
                duidRaw: 00:01:00:01:23:45:67:89:ab:cd:ef:01:23:45\n";
    let specs = specs_for(yaml, &[]);
    let v4 = operator(&specs, "dhcp4/enp0s3").dhcp4.clone().unwrap();
    assert!(v4.skip_routes && v4.skip_hostname_request, "{v4:?}");
    assert_eq!(v4.route_metric, 512);
    let specs = specs_for("apiVersion: v1alpha1\nkind: DHCPv4Config\nname: eth0\n", &[]);
    assert!(!operator(&specs, "dhcp4/eth0").dhcp4.as_ref().unwrap().skip_routes);
    // Talos's DHCPv6Config has no such field: refused at its line, the rest applies.
    let report =
        check("apiVersion: v1alpha1\nkind: DHCPv6Config\nname: eth0\nignoreRoutes: true\n");
    assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
    let e = report.errors[0].to_string();
    assert!(e.contains("ignoreRoutes (line 4, column 1)") && e.contains("DHCPv6Config"), "{e}");
    assert!(report.kept);
    // A misspelt field is still an unknown key, at its line.
    let e = errors("apiVersion: v1alpha1\nkind: DHCPv4Config\nname: eth0\nignoreRoute: true\n");
    assert!(e[0].contains("ignoreRoute (line 4, column 1): unknown key \"ignoreRoute\""), "{e:?}");
}

#[test]
fn bond_primary_is_the_bonds_primary_member() {
    let doc = |extra: &str| {
        format!("apiVersion: v1alpha1\nkind: BondConfig\nname: bond0\nlinks: [eth0, eth1]\n{extra}")
    };
    let specs = specs_for(
        &doc("bondMode: active-backup\nprimary: eth1\nprimaryReselect: better\n"),
        &node_links(),
    );
    let m = link(&specs, "bond0").bond_master.clone().unwrap();
    assert_eq!(m.primary, "eth1");
    assert_eq!(m.primary_reselect.to_string(), "better");
    // Named by an alias, like its members: the real name reaches the kernel.
    let mut links = node_links();
    links.push(("enp9s0", ether("00:1a:2b:3c:4d:5e", "ixgbe", "0000:09:00.0")));
    let aliased = "apiVersion: v1alpha1\nkind: LinkAliasConfig\nname: fast\nselector:\n  match: link.driver == \"ixgbe\"\n---\n\
                   apiVersion: v1alpha1\nkind: BondConfig\nname: bond0\nlinks: [eth0, fast]\nbondMode: active-backup\nprimary: fast\n";
    let specs = specs_for(aliased, &links);
    assert_eq!(link(&specs, "bond0").bond_master.as_ref().unwrap().primary, "enp9s0");
    // Talos's rules.
    let e = errors(&doc("bondMode: active-backup\nprimary: eth2\n"));
    assert!(e[0].contains("primary (line 6") && e[0].contains("not in the list"), "{e:?}");
    let e = errors(&doc("bondMode: active-backup\nprimary: \"\"\n"));
    assert!(e[0].contains("can't be empty"), "{e:?}");
    let e = errors(&doc("bondMode: balance-rr\nprimary: eth0\n"));
    assert!(e[0].contains("not supported in balance-rr bond mode"), "{e:?}");
    let cfg = ok(&doc("bondMode: balance-alb\nprimaryReselect: always\n"));
    assert!(
        cfg.warnings.iter().any(|w| w.contains("primaryReselect (line 6)")
            && w.contains("no effect unless primary is specified")),
        "{:?}",
        cfg.warnings
    );
}

#[test]
fn vrf_hardware_addr_is_the_vrf_links_mac() {
    let yaml =
        "apiVersion: v1alpha1\nkind: VRFConfig\nname: vrf-blue\nhardwareAddr: 2e:3c:4d:5e:6f:70\n\
                links: [eno1]\ntable: 123\n";
    let specs = specs_for(yaml, &[]);
    let vrf = link(&specs, "vrf-blue");
    assert_eq!(vrf.hardware_addr, Some("2e:3c:4d:5e:6f:70".parse().unwrap()));
}

#[test]
fn ethernet_wake_on_lan_is_known_and_warned_about_at_its_path() {
    // Talos's EthernetConfig example.
    let yaml = "apiVersion: v1alpha1\nkind: EthernetConfig\nname: enp0s1\nfeatures:\n    tx-checksum-ipv4: true\n\
                rings:\n    rx: 16\nchannels:\n    combined: 1\nwakeOnLan:\n    - unicast\n    - multicast\n";
    let cfg = ok(yaml);
    let at = |path: &str| {
        cfg.warnings
            .iter()
            .filter(|w| w.starts_with(&format!("document 1 (EthernetConfig enp0s1): {path} (line")))
            .count()
    };
    assert_eq!(
        [at("features"), at("rings"), at("channels"), at("wakeOnLan")],
        [1, 1, 1, 1],
        "{:?}",
        cfg.warnings
    );
    assert!(cfg.warnings.iter().all(|w| w.contains("does not apply ethtool settings")));
    let e = errors(
        "apiVersion: v1alpha1\nkind: EthernetConfig\nname: enp0s1\nwakeOnLan: [magic, sonar]\n",
    );
    assert!(e[0].contains("wakeOnLan[1] (line 4") && e[0].contains("magicsecure"), "{e:?}");
    // The spelling Talos does not have.
    let e =
        errors("apiVersion: v1alpha1\nkind: EthernetConfig\nname: enp0s1\nwakeOnLAN: [magic]\n");
    assert!(e[0].contains("unknown key \"wakeOnLAN\""), "{e:?}");
}

#[test]
fn deprecated_v1alpha1_keys_talos_still_has_are_accepted_with_a_warning() {
    let yaml = format!(
        "{V1}  disks:\n    - device: /dev/sdb\n      partitions:\n        - mountpoint: /var/data\n\
         cluster:\n  allowSchedulingOnMasters: true\n"
    );
    let cfg = ok(&yaml);
    assert_eq!(
        cfg.warnings,
        [
            "machine.disks (line 4): a Talos key keelson does not use; ignored",
            "cluster.allowSchedulingOnMasters (line 9): a Talos key keelson does not use; ignored",
        ]
    );
}

#[test]
fn migrate_keeps_the_bond_primary_and_the_documents_it_does_not_rebuild() {
    let yaml = format!(
        "{V1}  network:\n    interfaces:\n      - interface: bond0\n        bond:\n          interfaces: [eth0, eth1]\n\
         \x20         mode: active-backup\n          primary: eth1\n---\n{}---\n\
         apiVersion: v1alpha1\nkind: DiscoveryServiceConfig\nname: default\nendpoint: https://discovery.talos.dev/\n---\n\
         apiVersion: v1alpha1\nkind: VolumeConfig\nname: EPHEMERAL\n",
        identity()
    );
    let out = migrate(&yaml).unwrap();
    let again = ok(&out);
    let bond = again.documents.iter().find_map(|d| match &d.doc {
        Document::Bond(b) => Some(b.clone()),
        _ => None,
    });
    assert_eq!(bond.and_then(|b| b.primary).as_deref(), Some("eth1"), "{out}");
    // Same specs before and after.
    let node = node_links();
    let links = LinkView::new(node.iter().map(|(n, s)| (*n, s)));
    let before = to_specs(&ok(&yaml), &links);
    let after = to_specs(&again, &links);
    assert_eq!(link(&before, "bond0").bond_master, link(&after, "bond0").bond_master);
    assert!(before.links.iter().all(|l| l.layer == ConfigLayer::Configuration));
    // The discovery documents and the kind keelson ignores are still there.
    assert_eq!(again.cluster, ok(&yaml).cluster, "{out}");
    assert!(out.contains("kind: VolumeConfig"), "{out}");
}

#[test]
fn empty_documents_in_a_stream_are_skipped_as_talos_skips_them() {
    // Talos's own patches end in `---`; `talosctl` skips null documents.
    let yaml = format!("{V1}---\napiVersion: v1alpha1\nkind: HostnameConfig\nhostname: n1\n---\n");
    let report = check(&yaml);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.config.machine.network.hostname.as_deref(), Some("n1"));
    // Leading, trailing and `~` documents alike; the others keep their numbers in the file.
    let yaml = "---\n---\n# nothing\n---\n~\n---\napiVersion: v1alpha1\nkind: HostnameConfig\nhostname: n1\nbogus: 1\n---\n";
    let e = errors(yaml);
    assert_eq!(
        e,
        ["document 4 (HostnameConfig): bogus (line 10, column 1): unknown key \"bogus\", expected one of `apiVersion`, `kind`, `auto`, `hostname`"]
    );
    // A lone empty document is still not a configuration.
    let e = errors("---\n");
    assert!(e[0].contains("the document is a scalar"), "{e:?}");
    // Nor is a null with a value.
    let e = errors(&format!("{V1}---\nnull-ish\n"));
    assert!(e[0].contains("the document is a scalar"), "{e:?}");
}

#[test]
fn kube_node_config_valid_subnets_pick_the_node_ip_and_the_rest_is_warned_about() {
    // Talos's example document.
    let yaml = "apiVersion: v1alpha1\nkind: KubeNodeConfig\nregisterWithFQDN: true\nnodeIP:\n    validSubnets:\n\
                \x20       - 10.0.0.0/8\n        - '!10.0.0.3/32'\n        - fdc7::/16\n\
                labels:\n    examplelabel: examplevalue\nannotations:\n    customer.io/rack: r13a25\n\
                taints:\n    exampletaint: examplevalue:NoSchedule\n";
    let cfg = ok(yaml);
    let subnets: Vec<String> = cfg
        .machine
        .kubelet
        .node_ip
        .as_ref()
        .unwrap()
        .valid_subnets
        .iter()
        .map(|f| format!("{}{}", if f.exclude { "!" } else { "" }, f.network))
        .collect();
    assert_eq!(subnets, ["10.0.0.0/8", "!10.0.0.3/32", "fdc7::/16"]);
    let at: Vec<&str> =
        cfg.warnings.iter().map(|w| w.split(" (line").next().unwrap_or_default()).collect();
    assert_eq!(
        at,
        [
            "document 1 (KubeNodeConfig): registerWithFQDN",
            "document 1 (KubeNodeConfig): labels",
            "document 1 (KubeNodeConfig): annotations",
            "document 1 (KubeNodeConfig): taints",
        ]
    );
    // No value is quoted.
    assert!(cfg.warnings.iter().all(|w| !w.contains("r13a25")), "{:?}", cfg.warnings);
    let e = errors(
        "apiVersion: v1alpha1\nkind: KubeNodeConfig\nnodeIP:\n  validSubnets: [10.0.0.0/33]\n",
    );
    assert!(e[0].contains("nodeIP.validSubnets[0] (line 4"), "{e:?}");
    // Talos: set in one place only.
    let e = errors(&format!(
        "{V1}  nodeLabels:\n    a: b\n---\napiVersion: v1alpha1\nkind: KubeNodeConfig\nnodeIP: {{}}\n"
    ));
    assert!(e[0].contains("machine.nodeLabels (line 4) in the v1alpha1 document"), "{e:?}");
}

#[test]
fn v1alpha1_kubespan_beside_the_discovery_documents_is_not_warned_about_as_alone() {
    let kubespan = format!(
        "{V1}  network:\n    kubespan:\n      enabled: true\n      harvestExtraEndpoints: true\n"
    );
    // Alone, the v1alpha1 document has neither the service nor the identity: both said.
    let alone = ok(&kubespan);
    assert_eq!(alone.warnings.len(), 2, "{:?}", alone.warnings);
    // With Talos 1.14's documents, neither is missing.
    let cfg = ok(&format!(
        "{kubespan}---\napiVersion: v1alpha1\nkind: DiscoveryServiceConfig\nname: default\n\
         endpoint: https://discovery.talos.dev/\n---\n{}",
        identity()
    ));
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    assert!(cfg.machine.network.kubespan.enabled);
    assert_eq!(cfg.cluster.and_then(|c| c.id).as_deref(), Some(ID));
}

#[test]
fn kubelet_extra_args_take_talos_1_14_list_values_one_flag_each() {
    let cfg = ok(&format!(
        "{V1}  kubelet:\n    command: [/usr/bin/kubelet]\n    extraArgs:\n      v: 2\n      rotate-server-certificates: true\n\
         \x20     feature-gates: [A=true, B=false]\n      node-labels: zone=a\n"
    ));
    let args = &cfg.machine.kubelet.extra_args;
    let flags: Vec<String> = args.iter().flat_map(|(k, v)| v.flags(k)).collect();
    assert_eq!(
        flags,
        [
            "--feature-gates=A=true",
            "--feature-gates=B=false",
            "--node-labels=zone=a",
            "--rotate-server-certificates=true",
            "--v=2",
        ]
    );
    // Written back in the same shape.
    let yaml = serde_yaml::to_string(&cfg.machine.kubelet).unwrap();
    assert!(yaml.contains("feature-gates:\n  - A=true\n  - B=false\n"), "{yaml}");
    // Anything else is still refused at its path.
    let e = errors(&format!("{V1}  kubelet:\n    extraArgs:\n      v: {{a: 1}}\n"));
    assert!(
        e[0].contains("machine.kubelet.extraArgs.v (line 6")
            && e[0].contains("a string or a list of strings"),
        "{e:?}"
    );
    let e = errors(&format!("{V1}  kubelet:\n    extraArgs:\n      v: [[1]]\n"));
    assert!(e[0].contains("machine.kubelet.extraArgs.v"), "{e:?}");
}
