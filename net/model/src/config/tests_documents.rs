// SPDX-License-Identifier: Apache-2.0
//! The document stream and the kinds that are not links: Talos's own example documents
//! (`pkg/machinery/config/types/network/testdata`), each parsed and turned into specs, and
//! the checks between documents.

use std::net::IpAddr;
use std::time::Duration;

use super::*;
use crate::resource::{
    ConfigLayer, Family, LayerSpecs, LinkView, RouteType, RoutingTable, RuleAction, Scope,
};

fn ok(yaml: &str) -> MachineConfig {
    parse(yaml).unwrap_or_else(|e| panic!("{e}"))
}

fn errors(yaml: &str) -> Vec<String> {
    let report = check(yaml);
    assert!(!report.errors.is_empty(), "expected errors, got {:?}", report.config);
    report.errors.iter().map(ToString::to_string).collect()
}

fn specs(yaml: &str) -> LayerSpecs {
    to_specs(&ok(yaml), &LinkView::default())
}

const V1: &str = "version: v1alpha1\nmachine:\n  type: worker\n";

#[test]
fn a_stream_of_typed_documents_alone_is_a_configuration() {
    let cfg = ok("apiVersion: v1alpha1\nkind: HostnameConfig\nhostname: worker-33\n");
    assert_eq!(cfg.machine.network.hostname.as_deref(), Some("worker-33"));
    assert_eq!(cfg.machine.network.auto_hostname, AutoHostname::Off);
    let s = specs("apiVersion: v1alpha1\nkind: HostnameConfig\nhostname: node-1.example.org\n");
    assert_eq!(
        (s.hostnames[0].hostname.as_str(), s.hostnames[0].domainname.as_str()),
        ("node-1", "example.org")
    );
    let cfg = ok("apiVersion: v1alpha1\nkind: HostnameConfig\nauto: stable\n");
    assert_eq!(cfg.machine.network.auto_hostname, AutoHostname::Stable);
    assert!(specs("apiVersion: v1alpha1\nkind: HostnameConfig\nauto: stable\n")
        .hostnames
        .is_empty());
}

#[test]
fn hostname_document_rules() {
    let e = errors("apiVersion: v1alpha1\nkind: HostnameConfig\n");
    assert_eq!(e, ["document 1 (HostnameConfig): (document) (line 1, column 1): either auto or hostname must be set"]);
    let e = errors("apiVersion: v1alpha1\nkind: HostnameConfig\nauto: stable\nhostname: a\n");
    assert!(
        e[0].contains("hostname (line 4, column 1): auto and hostname cannot be set together"),
        "{e:?}"
    );
    let e = errors("apiVersion: v1alpha1\nkind: HostnameConfig\nauto: addr\n");
    assert!(e[0].contains("auto (line 3"), "{e:?}");
    // The same name in both places is refused, naming both.
    let e = errors(&format!(
        "{V1}  network:\n    hostname: a\n---\napiVersion: v1alpha1\nkind: HostnameConfig\nhostname: b\n"
    ));
    assert_eq!(
        e,
        ["document 2 (HostnameConfig): (document) (line 6, column 1): the static hostname is set in \
          both places: machine.network.hostname (line 5) in the v1alpha1 document, and this document"]
    );
}

#[test]
fn resolver_document() {
    let yaml = "apiVersion: v1alpha1\nkind: ResolverConfig\nnameservers:\n  - address: 1.1.1.1\n  - address: ff08::1\n  - address: 9.9.9.9\n    protocol: DoT\n    tlsServerName: dns.quad9.net\nsearchDomains:\n  domains: [example.com]\n  disableDefault: true\n";
    let cfg = ok(yaml);
    let s = to_specs(&cfg, &LinkView::default());
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    assert_eq!(s.resolvers[0].dns_servers, [ip("1.1.1.1"), ip("ff08::1")]);
    assert_eq!(s.resolvers[0].search_domains, ["example.com"]);
    assert!(s.resolvers[0].search_domains_overridden);
    assert!(cfg.machine.network.disable_search_domain);
    assert!(
        cfg.warnings.iter().any(|w| w.contains("nameservers[2].protocol (line 7)")),
        "{:?}",
        cfg.warnings
    );
    // An empty list clears lower layers' domains, as in v1alpha1.
    let s = specs("apiVersion: v1alpha1\nkind: ResolverConfig\nsearchDomains:\n  domains: []\n");
    assert!(s.resolvers[0].search_domains_overridden && s.resolvers[0].search_domains.is_empty());
    let e = errors("apiVersion: v1alpha1\nkind: ResolverConfig\nnameservers:\n  - address: 9.9.9.9\n    protocol: DoH\n");
    assert!(
        e[0].contains("nameservers[0].tlsServerName")
            && e[0].contains("DoT and DoH need tlsServerName"),
        "{e:?}"
    );
    let e = errors(&format!(
        "{V1}  network:\n    nameservers: [8.8.4.4]\n---\napiVersion: v1alpha1\nkind: ResolverConfig\nnameservers:\n  - address: 1.1.1.1\n"
    ));
    assert!(e[0].contains("machine.network.nameservers (line 5)"), "{e:?}");
}

#[test]
fn static_host_documents_follow_the_v1alpha1_entries() {
    let cfg = ok(&format!(
        "{V1}  network:\n    extraHostEntries:\n      - ip: 10.0.0.9\n        aliases: [old]\n---\napiVersion: v1alpha1\nkind: StaticHostConfig\nname: 10.5.0.2\nhostnames:\n  - my-server\n  - my-server.example.org\n"
    ));
    let hosts: Vec<_> = cfg
        .machine
        .network
        .extra_host_entries
        .iter()
        .map(|h| (h.ip.to_string(), h.aliases.join(" ")))
        .collect();
    assert_eq!(
        hosts,
        [
            ("10.0.0.9".into(), "old".into()),
            ("10.5.0.2".into(), "my-server my-server.example.org".into())
        ]
    );
    let e = errors("apiVersion: v1alpha1\nkind: StaticHostConfig\nname: 10.5.0.2\nhostnames: []\n");
    assert!(e[0].contains("at least one hostname"), "{e:?}");
    let e = errors("apiVersion: v1alpha1\nkind: StaticHostConfig\nname: host\nhostnames: [a]\n");
    assert!(e[0].contains("name (line 3"), "{e:?}");
}

#[test]
fn time_sync_document() {
    let cfg = ok("apiVersion: v1alpha1\nkind: TimeSyncConfig\nntp:\n    servers:\n        - time.cloudflare.com\n    useNTS: true\nbootTimeout: 2m\n");
    assert_eq!(cfg.machine.time.servers, ["time.cloudflare.com"]);
    assert_eq!(cfg.machine.time.boot_timeout, Some(Duration::from_secs(120)));
    let s = to_specs(&cfg, &LinkView::default());
    assert!(s.time_servers[0].use_nts);
    let cfg = ok("apiVersion: v1alpha1\nkind: TimeSyncConfig\nenabled: false\n");
    assert!(cfg.machine.time.disabled);
    let cfg = ok("apiVersion: v1alpha1\nkind: TimeSyncConfig\nptp:\n  devices: [/dev/ptp0]\n");
    assert!(cfg.warnings.iter().any(|w| w.contains("no PTP client")), "{:?}", cfg.warnings);
    let e = errors("apiVersion: v1alpha1\nkind: TimeSyncConfig\nntp:\n  servers: [/dev/ptp0]\n");
    assert!(e[0].contains("ntp.servers[0]") && e[0].contains("ptp.devices"), "{e:?}");
    let e = errors(&format!(
        "{V1}  time:\n    servers: [pool.ntp.org]\n---\napiVersion: v1alpha1\nkind: TimeSyncConfig\nntp:\n  servers: [a.example]\n"
    ));
    assert!(e[0].contains("machine.time.servers (line 5)"), "{e:?}");
}

#[test]
fn routing_rule_document_is_one_rule_per_family() {
    let s = specs("apiVersion: v1alpha1\nkind: RoutingRuleConfig\nname: \"1000\"\nsrc: 10.0.0.0/8\ntable: 100\naction: unicast\n");
    assert_eq!(s.rules.len(), 1);
    let r = &s.rules[0];
    assert_eq!(
        (r.family, r.priority, r.table, r.action, r.src, r.layer),
        (
            Family::Inet4,
            1000,
            RoutingTable(100),
            RuleAction::UNICAST,
            Some("10.0.0.0/8".parse().unwrap()),
            ConfigLayer::Configuration
        )
    );
    // Neither prefix: both families, IPv6 first.
    let s = specs("apiVersion: v1alpha1\nkind: RoutingRuleConfig\nname: \"2000\"\nfwMark: 256\naction: blackhole\n");
    let families: Vec<_> = s.rules.iter().map(|r| r.family).collect();
    assert_eq!(families, [Family::Inet6, Family::Inet4]);
    assert_eq!(s.rules[0].action, RuleAction::BLACKHOLE);
    for (yaml, want) in [
        ("name: \"32500\"\ntable: 10\n", "priority 32500 is reserved"),
        ("name: first\ntable: 10\n", "a number"),
        ("name: \"10\"\n", "a unicast rule needs a table"),
        ("name: \"10\"\ntable: 5\nfwMask: 255\n", "fwMask needs fwMark"),
        (
            "name: \"10\"\ntable: 5\nsrc: 10.0.0.0/8\ndst: 2001:db8::/32\n",
            "different address families",
        ),
    ] {
        let e = errors(&format!("apiVersion: v1alpha1\nkind: RoutingRuleConfig\n{yaml}"));
        assert!(e[0].contains(want), "{yaml}: {e:?}");
    }
}

#[test]
fn blackhole_route_document() {
    let s = specs("apiVersion: v1alpha1\nkind: BlackholeRouteConfig\nname: 10.0.0.0/12\nmetric: 100\n---\napiVersion: v1alpha1\nkind: BlackholeRouteConfig\nname: 2001:db8::/32\n");
    let r4 = &s.routes[0];
    assert_eq!(
        (r4.dst, r4.kind, r4.priority, r4.table, r4.scope, r4.out_link_name.as_str()),
        (
            Some("10.0.0.0/12".parse().unwrap()),
            RouteType::BLACKHOLE,
            100,
            RoutingTable::MAIN,
            Scope::GLOBAL,
            ""
        )
    );
    let r6 = &s.routes[1];
    assert_eq!((r6.family, r6.priority, r6.out_link_name.as_str()), (Family::Inet6, 1024, "lo"));
}

#[test]
fn kubespan_documents() {
    let cfg = ok("apiVersion: v1alpha1\nkind: KubeSpanConfig\nenabled: true\nadvertiseKubernetesNetworks: false\nallowDownPeerBypass: true\nharvestExtraEndpoints: false\nmtu: 1420\nfilters:\n    endpoints:\n        - 0.0.0.0/0\n        - ::/0\n    excludeAdvertisedNetworks:\n        - 192.168.1.0/24\n        - 2003::/16\n---\napiVersion: v1alpha1\nkind: KubeSpanEndpointsConfig\nextraAnnouncedEndpoints:\n    - 192.168.13.46:52000\n");
    let ks = &cfg.machine.network.kubespan;
    assert!(ks.enabled && ks.allow_down_peer_bypass);
    assert_eq!(ks.filters.exclude_advertised_networks.len(), 2);
    assert_eq!(ks.extra_announced_endpoints, ["192.168.13.46:52000".parse().unwrap()]);
    let e = errors("apiVersion: v1alpha1\nkind: KubeSpanConfig\nmtu: 1000\n");
    assert!(e[0].contains("mtu (line 3"), "{e:?}");
    // keelson's own KubeSpan keys stay in v1alpha1 beside the document; Talos's may not.
    ok(&format!(
        "{V1}  network:\n    kubespan:\n      endpointTimeout: 5s\n---\napiVersion: v1alpha1\nkind: KubeSpanConfig\nenabled: true\n"
    ));
    let e = errors(&format!(
        "{V1}  network:\n    kubespan:\n      enabled: true\n---\napiVersion: v1alpha1\nkind: KubeSpanConfig\nenabled: true\n"
    ));
    assert!(e[0].contains("machine.network.kubespan.enabled (line 6)"), "{e:?}");
}

#[test]
fn stream_level_rules() {
    // Duplicates by kind and name.
    let rule = "---\napiVersion: v1alpha1\nkind: RoutingRuleConfig\nname: \"10\"\ntable: 5\n";
    let e = errors(&rule.repeat(2));
    assert_eq!(
        e,
        ["document 2 (RoutingRuleConfig 10): (document) (line 6, column 1): RoutingRuleConfig/10 is \
          configured twice (also document 1 (RoutingRuleConfig 10), line 1)"]
    );
    // Unknown kind, wrong apiVersion, a document that is neither.
    let e = errors(&format!("{V1}---\napiVersion: v1alpha1\nkind: LinkConfigg\nname: eth0\n"));
    assert!(
        e[0].starts_with(
            "document 2 (LinkConfigg): kind (line 6, column 1): unknown kind \"LinkConfigg\""
        ),
        "{e:?}"
    );
    let e = errors("apiVersion: v1alpha2\nkind: HostnameConfig\nauto: off\n");
    assert!(e[0].contains("apiVersion (line 1, column 1): apiVersion must be v1alpha1"), "{e:?}");
    let e = errors(&format!("{V1}---\nfoo: bar\n"));
    assert!(e[0].starts_with("document 2 (?): (document) (line 4, column 1): neither"), "{e:?}");
    // An unknown field in a later document: its own line in the file.
    let e = errors(&format!(
        "{V1}---\napiVersion: v1alpha1\nkind: HostnameConfig\nauto: off\nbogus: 1\n"
    ));
    assert!(
        e[0].starts_with("document 2 (HostnameConfig): bogus (line 8, column 1): unknown key"),
        "{e:?}"
    );
    // A Talos kind keelson does not implement: a warning, the rest loads.
    let cfg =
        ok(&format!("{V1}---\napiVersion: v1alpha1\nkind: SideroLinkConfig\napiUrl: https://x\n"));
    assert_eq!(
        cfg.warnings,
        ["document 2 (SideroLinkConfig) (line 4): a Talos document keelson does not implement yet; ignored"]
    );
    // Every problem at once.
    let e = errors("apiVersion: v1alpha1\nkind: HostnameConfig\n---\napiVersion: v1alpha1\nkind: RoutingRuleConfig\nname: x\n");
    assert_eq!(e.len(), 3, "{e:?}");
    // The v1alpha1 document anywhere in the stream, its positions the file's.
    let e = errors("apiVersion: v1alpha1\nkind: HostnameConfig\nauto: off\n---\nversion: v1alpha1\nmachine:\n  network:\n    mtu: 3\n");
    assert!(e[0].starts_with("document 2 (v1alpha1): machine.network.mtu (line 8"), "{e:?}");
}

#[test]
fn documents_do_not_touch_the_defaults_unless_they_configure_links() {
    let cfg = ok("apiVersion: v1alpha1\nkind: HostnameConfig\nauto: off\n");
    assert!(cfg.runs_default_link_config());
}
