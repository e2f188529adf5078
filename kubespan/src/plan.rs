// SPDX-License-Identifier: Apache-2.0
//! Everything KubeSpan asks of the node, computed from one snapshot (docs/talos.md: KubeSpan),
//! pure.
//!
//! The WireGuard peers, the nftables targets, the routes and the rules all come out of one
//! call over the same peer list, so they cannot disagree.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use ipnet::{IpNet, Ipv6Net};

use net::config::KubeSpanConfig;
use net::resource::{
    AddressSpec, ConfigLayer, Family, KubeSpanIdentity, KubeSpanPeerSpec, LinkSpec, LinkType,
    PeerState, RouteProtocol, RouteSpec, RoutingRuleSpec, RoutingTable, RuleAction, WireguardPeer,
    WireguardSpec,
};
use net::wireguard_keys::Key;

use crate::nft::NftPlan;
use crate::peers::subtract_all;

/// The WireGuard link's name.
pub const LINK_NAME: &str = "kubespan";
/// WireGuard's UDP port (also the port advertised for endpoints).
pub const LISTEN_PORT: u16 = 51820;
/// The mark WireGuard puts on its own encrypted packets.
pub const WIREGUARD_MARK: u32 = 0x20;
/// The mark nftables puts on traffic bound for KubeSpan.
pub const FORCE_MARK: u32 = 0x40;
/// The mark bits KubeSpan owns.
pub const MARK_MASK: u32 = 0x60;
/// The routing table of KubeSpan's default routes.
pub const ROUTING_TABLE: RoutingTable = RoutingTable(180);
/// The rules' priority.
pub const RULE_PRIORITY: u32 = 32500;
/// Persistent keepalive for every peer.
pub const KEEPALIVE: Duration = Duration::from_secs(25);

/// The inputs of one plan.
#[derive(Debug, Clone, Copy)]
pub struct Snapshot<'a> {
    /// `machine.network.kubespan`.
    pub config: &'a KubeSpanConfig,
    /// `cluster.secret`, the peers' preshared key when it is a valid WireGuard key.
    pub cluster_secret: Option<&'a str>,
    /// The node's identity.
    pub identity: &'a KubeSpanIdentity,
    /// Peer specs by public key.
    pub peers: &'a [(&'a str, &'a KubeSpanPeerSpec)],
    /// Each peer's state, the endpoint its WireGuard peer should carry and its handshake
    /// retry counter.
    pub peer_runtime: &'a BTreeMap<String, PeerRuntime>,
}

/// A peer's state, the endpoint to set this round (`None`: leave the kernel's) and how many
/// handshake initiations the rotation asked for ([`crate::rotation::Rotation::retries`]).
pub type PeerRuntime = (PeerState, Option<SocketAddr>, u32);

/// What the node should have.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The `kubespan` link (without its WireGuard part, which is `wireguard`).
    pub link: LinkSpec,
    /// The link's WireGuard settings; the manager puts them into `link`.
    pub wireguard: WireguardSpec,
    /// The node's KubeSpan address.
    pub address: AddressSpec,
    /// Default routes in table 180, IPv4 then IPv6.
    pub routes: [RouteSpec; 2],
    /// `fwmark 0x40/0x60 lookup 180`, IPv4 then IPv6.
    pub rules: [RoutingRuleSpec; 2],
    /// The nftables targets.
    pub firewall: NftPlan,
}

/// Is `s` a WireGuard key (32 bytes of standard base64)?
pub fn is_wg_key(s: &str) -> bool {
    s.len() == 44
        && s.ends_with('=')
        && !s.ends_with("==")
        && s.bytes().take(43).all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

/// Compute the plan.
pub fn plan(snap: &Snapshot<'_>) -> Plan {
    let cfg = snap.config;
    let layer = ConfigLayer::Operator;
    let link = LinkSpec {
        name: LINK_NAME.to_owned(),
        logical: true,
        up: true,
        mtu: cfg.mtu,
        kind: "wireguard".to_owned(),
        link_type: LinkType::NONE,
        layer,
        ..LinkSpec::default()
    };
    let preshared_key =
        snap.cluster_secret.filter(|s| is_wg_key(s)).and_then(|s| Key::from_base64(s).ok());
    let keepalive = u16::try_from(KEEPALIVE.as_secs()).unwrap_or(u16::MAX);
    let mut wireguard = WireguardSpec {
        private_key: Some(snap.identity.private_key),
        listen_port: LISTEN_PORT,
        firewall_mark: WIREGUARD_MARK,
        peers: snap
            .peers
            .iter()
            .map(|(key, spec)| WireguardPeer {
                public_key: (*key).to_owned(),
                preshared_key,
                endpoint: snap.peer_runtime.get(*key).and_then(|(_, e, _)| *e),
                persistent_keepalive_interval: keepalive,
                allowed_ips: spec.allowed_ips.clone(),
                handshake_retry: snap.peer_runtime.get(*key).map_or(0, |(_, _, r)| *r),
            })
            .collect(),
    };
    // Sorted as the link controllers compare it (peers by key, allowed IPs in order).
    wireguard.normalize();

    // The /64 makes the kernel route the whole KubeSpan ULA onto the link.
    let ula = Ipv6Net::new(snap.identity.address.addr(), 64).unwrap_or(snap.identity.subnet);
    let address = AddressSpec::new(LINK_NAME, IpNet::V6(ula), layer);

    let route = |family| {
        let mut r = RouteSpec::new(family, layer);
        r.out_link_name = LINK_NAME.to_owned();
        r.table = ROUTING_TABLE;
        r.priority = 1;
        r.protocol = RouteProtocol::STATIC;
        r.mtu = cfg.mtu;
        r.normalize();
        r
    };
    let rule = |family| RoutingRuleSpec {
        family,
        table: ROUTING_TABLE,
        priority: RULE_PRIORITY,
        action: RuleAction::UNICAST,
        fw_mark: FORCE_MARK,
        fw_mask: MARK_MASK,
        layer,
        ..RoutingRuleSpec::default()
    };

    Plan {
        link,
        wireguard,
        address,
        routes: [route(Family::Inet4), route(Family::Inet6)],
        rules: [rule(Family::Inet4), rule(Family::Inet6)],
        firewall: firewall_plan(snap),
    }
}

/// The targets: every peer's allowed IPs (with `allowDownPeerBypass`, only `up` peers'),
/// minus the KubeSpan ULA, which the link's own /64 route already carries.
fn firewall_plan(snap: &Snapshot<'_>) -> NftPlan {
    let bypass = snap.config.allow_down_peer_bypass;
    let all: Vec<IpNet> = snap
        .peers
        .iter()
        .filter(|(key, _)| {
            !bypass
                || snap.peer_runtime.get(*key).is_some_and(|(state, _, _)| *state == PeerState::Up)
        })
        .flat_map(|(_, spec)| spec.allowed_ips.iter().copied())
        .collect();
    let targets = subtract_all(&all, &[IpNet::V6(snap.identity.subnet)]);
    let mut plan = NftPlan {
        table: snap.config.nftables_table.clone(),
        mtu: snap.config.mtu,
        ..NftPlan::default()
    };
    for t in targets {
        match t {
            IpNet::V4(v4) => plan.targets_v4.push(v4),
            IpNet::V6(v6) => plan.targets_v6.push(v6),
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY_A: &str = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    const KEY_B: &str = "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBA=";
    const SECRET: &str = "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI=";

    fn identity() -> KubeSpanIdentity {
        KubeSpanIdentity {
            address: "fd7f:175a:b97c:5602:2c1a:b6ff:fe53:8169/128".parse().unwrap(),
            subnet: "fd7f:175a:b97c:5602::/64".parse().unwrap(),
            private_key: Key::from_base64("cHJpdmF0ZXByaXZhdGVwcml2YXRlcHJpdmF0ZTEyMzQ=").unwrap(),
            public_key: "local".into(),
        }
    }

    fn spec(label: &str, allowed: &[&str], endpoints: &[&str]) -> KubeSpanPeerSpec {
        KubeSpanPeerSpec {
            address: None,
            allowed_ips: allowed.iter().map(|s| s.parse().unwrap()).collect(),
            endpoints: endpoints.iter().map(|s| s.parse().unwrap()).collect(),
            label: label.into(),
        }
    }

    fn ep(s: &str) -> Option<SocketAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn talos_constants_and_ids() {
        let cfg = KubeSpanConfig { enabled: true, ..KubeSpanConfig::default() };
        let id = identity();
        let runtime = BTreeMap::new();
        let p = plan(&Snapshot {
            config: &cfg,
            cluster_secret: Some(SECRET),
            identity: &id,
            peers: &[],
            peer_runtime: &runtime,
        });
        assert_eq!((p.link.name.as_str(), p.link.kind.as_str()), ("kubespan", "wireguard"));
        assert!(p.link.logical && p.link.up);
        assert_eq!((p.link.mtu, p.link.link_type), (1420, LinkType::NONE));
        assert_eq!((p.wireguard.listen_port, p.wireguard.firewall_mark), (51820, 0x20));
        assert_eq!(p.address.id(), "kubespan/fd7f:175a:b97c:5602:2c1a:b6ff:fe53:8169/64");
        assert_eq!(p.routes[0].id(), "180/inet4///1");
        assert_eq!(p.routes[1].id(), "180/kubespan/inet6///1");
        assert!(p.routes.iter().all(|r| r.mtu == 1420 && r.out_link_name == "kubespan"));
        assert_eq!(p.rules[0].id(), "inet4/32500");
        assert_eq!(p.rules[1].id(), "inet6/32500");
        assert!(p.rules.iter().all(|r| r.fw_mark == 0x40 && r.fw_mask == 0x60 && r.table.0 == 180));
        let table = "talos_kubespan".to_owned();
        assert_eq!(p.firewall, NftPlan { table, mtu: 1420, ..NftPlan::default() });
        let renamed = KubeSpanConfig { nftables_table: "ks".into(), ..cfg.clone() };
        let p = plan(&Snapshot {
            config: &renamed,
            cluster_secret: Some(SECRET),
            identity: &id,
            peers: &[],
            peer_runtime: &runtime,
        });
        assert_eq!(p.firewall.table, "ks", "the configured table name reaches the firewall");
    }

    #[test]
    fn one_snapshot_feeds_peers_and_targets() {
        let a = spec(
            "a",
            &["10.0.0.2/32", "10.244.0.0/24", "fd7f:175a:b97c:5602::a/128", "fd00:a::/64"],
            &["192.0.2.2:51820"],
        );
        let b =
            spec("b", &["10.0.0.3/32", "10.0.0.2/32"], &["192.0.2.3:51820", "192.0.2.33:51820"]);
        let peers = [(KEY_B, &b), (KEY_A, &a)];
        let mut runtime = BTreeMap::new();
        runtime.insert(KEY_A.to_owned(), (PeerState::Up, ep("192.0.2.2:51820"), 0));
        runtime.insert(KEY_B.to_owned(), (PeerState::Down, None, 0));
        let id = identity();
        for bypass in [false, true] {
            let cfg = KubeSpanConfig {
                enabled: true,
                mtu: 1380,
                allow_down_peer_bypass: bypass,
                ..KubeSpanConfig::default()
            };
            let p = plan(&Snapshot {
                config: &cfg,
                cluster_secret: Some(SECRET),
                identity: &id,
                peers: &peers,
                peer_runtime: &runtime,
            });
            let keys: Vec<&str> = p.wireguard.peers.iter().map(|w| w.public_key.as_str()).collect();
            assert_eq!(keys, [KEY_A, KEY_B], "sorted by key");
            let wa = &p.wireguard.peers[0];
            assert_eq!(wa.preshared_key.map(|k| k.to_base64()).as_deref(), Some(SECRET));
            assert_eq!(
                Duration::from_secs(wa.persistent_keepalive_interval.into()),
                Duration::from_secs(25)
            );
            assert_eq!(wa.endpoint, ep("192.0.2.2:51820"));
            // The peer's allowed IPs, in the normalized order the LinkSpec carries.
            let mut want_ips = a.allowed_ips.clone();
            want_ips.sort_by_key(|n| (n.addr(), n.prefix_len()));
            assert_eq!(wa.allowed_ips, want_ips);
            assert_eq!(p.wireguard.peers[1].endpoint, None, "no endpoint: don't touch");
            let v4: Vec<String> = p.firewall.targets_v4.iter().map(ToString::to_string).collect();
            let v6: Vec<String> = p.firewall.targets_v6.iter().map(ToString::to_string).collect();
            assert_eq!(v6, ["fd00:a::/64"], "KubeSpan ULAs are not targets");
            if bypass {
                assert_eq!(v4, ["10.0.0.2/32", "10.244.0.0/24"], "only the up peer");
            } else {
                assert_eq!(v4, ["10.0.0.2/31", "10.244.0.0/24"], "union, aggregated");
            }
            assert_eq!(p.firewall.mtu, 1380);
            assert_eq!(p.link.mtu, 1380);
        }
    }

    #[test]
    fn wireguard_spec_carries_every_field_normalized() {
        // The spec goes into the LinkSpec as is, so it is already in the link controllers'
        // order: peers by public key, each peer's allowed IPs sorted.
        let cfg = KubeSpanConfig { enabled: true, ..KubeSpanConfig::default() };
        let id = identity();
        let b = spec("b", &["10.0.0.3/32", "10.0.0.2/32"], &[]);
        let a = spec("a", &["10.0.1.3/32", "10.0.1.2/32"], &[]);
        let runtime =
            BTreeMap::from([(KEY_A.to_owned(), (PeerState::Up, ep("192.0.2.1:51820"), 0))]);
        let p = plan(&Snapshot {
            config: &cfg,
            cluster_secret: Some(SECRET),
            identity: &id,
            peers: &[(KEY_B, &b), (KEY_A, &a)],
            peer_runtime: &runtime,
        });
        let wg = &p.wireguard;
        assert_eq!(
            (wg.private_key, wg.listen_port, wg.firewall_mark),
            (Some(id.private_key), 51820, 0x20)
        );
        let keys: Vec<&str> = wg.peers.iter().map(|p| p.public_key.as_str()).collect();
        assert_eq!(keys, [KEY_A, KEY_B]);
        let pa = &wg.peers[0];
        assert_eq!(pa.endpoint, ep("192.0.2.1:51820"));
        assert_eq!(
            (pa.persistent_keepalive_interval, pa.preshared_key.map(|k| k.to_base64())),
            (25, Some(SECRET.to_owned()))
        );
        assert_eq!(pa.allowed_ips[0].to_string(), "10.0.1.2/32", "normalized order");
        assert_eq!(wg.peers[1].endpoint, None, "don't touch");
        assert_eq!(p.link.wireguard, None, "the manager puts the spec into the link");
    }

    #[test]
    fn secret_that_is_not_a_key_is_not_used() {
        assert!(is_wg_key(SECRET));
        assert!(!is_wg_key("dGhpcyBpcyBhIDMyIGJ5dGUgY2x1c3RlciBpZGVudGlmaWVy"));
        let cfg = KubeSpanConfig::default();
        let id = identity();
        let a = spec("a", &[], &[]);
        let runtime = BTreeMap::new();
        let p = plan(&Snapshot {
            config: &cfg,
            cluster_secret: Some("c2hvcnQ="),
            identity: &id,
            peers: &[(KEY_A, &a)],
            peer_runtime: &runtime,
        });
        assert_eq!(p.wireguard.peers[0].preshared_key, None);
    }
}
