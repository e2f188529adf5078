// SPDX-License-Identifier: Apache-2.0
//! Peer specs from the configured peers (docs/talos.md: KubeSpan), pure.
//!
//! AllowedIPs are a set: a peer's addresses, aggregated. A prefix an earlier peer already
//! claimed is subtracted from a later one, prefix by prefix with a warning; the later peer
//! keeps everything else (Talos's older behaviour dropped whole peers).
//! The node itself may be listed (one config for every node): that entry is skipped.

use ipnet::{IpNet, Ipv6Net};

use net::config::KubeSpanPeer;
use net::resource::{Affiliate, KubeSpanPeerSpec};

/// `a` minus `b`, as the fewest prefixes.
pub fn subtract(a: IpNet, b: IpNet) -> Vec<IpNet> {
    if b.contains(&a) {
        return Vec::new();
    }
    if !a.contains(&b) {
        return vec![a];
    }
    // `b` is strictly inside `a`: split `a` in halves and keep what misses `b`.
    let Ok(halves) = a.subnets(a.prefix_len() + 1) else { return vec![a] };
    halves.flat_map(|h| subtract(h, b)).collect()
}

/// Every prefix of `set` minus every prefix of `minus`.
pub fn subtract_all(set: &[IpNet], minus: &[IpNet]) -> Vec<IpNet> {
    let mut out: Vec<IpNet> = set.to_vec();
    for m in minus {
        out = out.into_iter().flat_map(|p| subtract(p, *m)).collect();
    }
    IpNet::aggregate(&out)
}

/// Does any prefix of `a` overlap any of `b`?
fn overlaps(a: &IpNet, b: &IpNet) -> bool {
    a.contains(b) || b.contains(a)
}

/// The peer specs, by public key, in configuration order, and a warning per overlap.
pub fn peer_specs(
    peers: &[KubeSpanPeer],
    local_public_key: &str,
    kubespan_subnet: Ipv6Net,
) -> (Vec<(String, KubeSpanPeerSpec)>, Vec<String>) {
    let mut specs = Vec::new();
    let mut warnings = Vec::new();
    let mut claimed: Vec<IpNet> = Vec::new();
    for peer in peers.iter().filter(|p| p.public_key != local_public_key) {
        let own = IpNet::aggregate(&peer.addresses.iter().map(IpNet::trunc).collect::<Vec<_>>());
        let taken: Vec<IpNet> =
            claimed.iter().filter(|c| own.iter().any(|o| overlaps(o, c))).copied().collect();
        let allowed = subtract_all(&own, &taken);
        if !taken.is_empty() {
            let list: Vec<String> = taken.iter().map(ToString::to_string).collect();
            warnings.push(format!(
                "peer {} ({}): {} already routed to an earlier peer; left out of its allowed IPs",
                label_or_key(peer),
                peer.public_key,
                list.join(", ")
            ));
        }
        claimed.extend(allowed.iter().copied());
        let address = peer.addresses.iter().find_map(|a| match a {
            IpNet::V6(v6) if v6.prefix_len() == 128 && kubespan_subnet.contains(&v6.addr()) => {
                Some(v6.addr())
            }
            _ => None,
        });
        specs.push((
            peer.public_key.clone(),
            KubeSpanPeerSpec {
                address,
                allowed_ips: allowed,
                endpoints: peer.endpoints.clone(),
                label: peer.label.clone(),
            },
        ));
    }
    (specs, warnings)
}

/// The peers to mesh with: the configured ones first, then one per discovered affiliate
/// (other than the node itself) that runs KubeSpan, in affiliate ID order. A configured peer
/// wins over a discovered one with the same key, with a warning.
pub fn merged_peers<'a>(
    configured: &[KubeSpanPeer],
    affiliates: impl Iterator<Item = (&'a str, &'a Affiliate)>,
    local_node_id: &str,
) -> (Vec<KubeSpanPeer>, Vec<String>) {
    let mut peers = configured.to_vec();
    let mut warnings = Vec::new();
    for (id, a) in affiliates {
        let Some(ks) = a.kubespan.as_ref().filter(|k| !k.public_key.is_empty()) else {
            continue;
        };
        if id == local_node_id || a.node_id == local_node_id {
            continue;
        }
        if let Some(p) = configured.iter().find(|p| p.public_key == ks.public_key) {
            warnings.push(format!(
                "peer {} ({}): configured and discovered as {}; the configured one is used",
                label_or_key(p),
                p.public_key,
                if a.nodename.is_empty() { id } else { &a.nodename }
            ));
            continue;
        }
        peers.push(affiliate_peer(a, ks));
    }
    (peers, warnings)
}

/// An affiliate as a peer. Its allowed IPs are, as Talos makes them, its routed prefixes and
/// addresses minus the networks it asked to keep off KubeSpan, plus its KubeSpan address.
///
/// Its endpoint addresses stay in when it announces them: traffic to a node's address is what
/// KubeSpan encrypts, and WireGuard's own packets to the endpoint carry their mark and follow
/// the main table. IPv6 neighbour discovery to that address is kept on the link by the
/// firewall (`nft::compile`), not by leaving the address out.
fn affiliate_peer(a: &Affiliate, ks: &net::resource::AffiliateKubeSpan) -> KubeSpanPeer {
    let mut own: Vec<IpNet> = ks.additional_addresses.clone();
    own.extend(a.addresses.iter().map(|ip| IpNet::from(*ip)));
    let mut addresses = subtract_all(&own, &ks.exclude_advertised_networks);
    if let Some(addr) = ks.address {
        addresses.push(IpNet::from(std::net::IpAddr::V6(addr)));
    }
    KubeSpanPeer {
        public_key: ks.public_key.clone(),
        endpoints: ks.endpoints.clone(),
        addresses,
        label: a.nodename.clone(),
    }
}

fn label_or_key(peer: &KubeSpanPeer) -> &str {
    if peer.label.is_empty() {
        &peer.public_key
    } else {
        &peer.label
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|s| s.parse().unwrap()).collect()
    }

    fn peer(key: &str, label: &str, addrs: &[&str]) -> KubeSpanPeer {
        KubeSpanPeer {
            public_key: key.into(),
            endpoints: vec!["192.0.2.1:51820".parse().unwrap()],
            addresses: nets(addrs),
            label: label.into(),
        }
    }

    const SUBNET: &str = "fd7f:175a:b97c:5602::/64";

    #[test]
    fn discovered_affiliates_become_peers_and_configured_ones_win() {
        use net::resource::AffiliateKubeSpan;
        let aff = |node: &str, key: &str, addr: &str, ks_addr: &str| Affiliate {
            node_id: node.into(),
            addresses: vec![addr.parse().unwrap()],
            nodename: format!("name-{node}"),
            kubespan: Some(AffiliateKubeSpan {
                public_key: key.into(),
                address: Some(ks_addr.parse().unwrap()),
                additional_addresses: nets(&["10.244.0.0/24", "10.245.0.0/24"]),
                endpoints: vec!["192.0.2.9:51820".parse().unwrap()],
                exclude_advertised_networks: nets(&["10.245.0.0/16"]),
            }),
            ..Default::default()
        };
        let a = aff("A", "KA", "10.0.0.2", "fd7f:175a:b97c:5602::a");
        let dup = aff("B", "B", "10.0.0.3", "fd7f:175a:b97c:5602::b");
        let me = aff("ME", "KME", "10.0.0.1", "fd7f:175a:b97c:5602::1");
        let no_ks = Affiliate { node_id: "C".into(), ..Default::default() };
        let configured = [peer("B", "node-b", &["10.0.0.3/32"])];
        let list = [("A", &a), ("B", &dup), ("C", &no_ks), ("ME", &me)];
        let (peers, warnings) = merged_peers(&configured, list.into_iter(), "ME");
        let keys: Vec<&str> = peers.iter().map(|p| p.public_key.as_str()).collect();
        assert_eq!(keys, ["B", "KA"], "configured first; self and KubeSpan-less left out");
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("node-b") && warnings[0].contains("name-B"), "{warnings:?}");
        let (specs, _) = peer_specs(&peers, "KME", SUBNET.parse().unwrap());
        let ka = &specs[1].1;
        assert_eq!(ka.label, "name-A");
        assert_eq!(ka.address, Some("fd7f:175a:b97c:5602::a".parse().unwrap()));
        assert_eq!(
            ka.allowed_ips,
            nets(&["10.0.0.2/32", "10.244.0.0/24", "fd7f:175a:b97c:5602::a/128"]),
            "the excluded network subtracted"
        );
        assert_eq!(ka.endpoints, vec!["192.0.2.9:51820".parse().unwrap()]);
    }

    /// A node announcing its link address both as an address and as its endpoint: the address
    /// is routed through the tunnel like the rest of what it announces (only WireGuard's own
    /// packets and neighbour discovery stay on the link, by the firewall's rules).
    #[test]
    fn endpoint_addresses_stay_in_the_tunnel() {
        use net::resource::AffiliateKubeSpan;
        let a = Affiliate {
            node_id: "A".into(),
            addresses: vec!["fd00:6::12".parse().unwrap(), "2001:db8::12".parse().unwrap()],
            nodename: "ks-node2".into(),
            kubespan: Some(AffiliateKubeSpan {
                public_key: "KA".into(),
                address: Some("fd7f:175a:b97c:5602::2".parse().unwrap()),
                additional_addresses: nets(&["fd00:6::/64"]),
                endpoints: vec!["[fd00:6::12]:51820".parse().unwrap()],
                exclude_advertised_networks: Vec::new(),
            }),
            ..Default::default()
        };
        let (peers, _) = merged_peers(&[], [("A", &a)].into_iter(), "ME");
        let (specs, _) = peer_specs(&peers, "KME", SUBNET.parse().unwrap());
        let allowed = &specs[0].1.allowed_ips;
        for ip in ["fd00:6::12", "fd00:6::13", "2001:db8::12", "fd7f:175a:b97c:5602::2"] {
            let ip: std::net::IpAddr = ip.parse().unwrap();
            assert!(allowed.iter().any(|n| n.contains(&ip)), "{ip} in {allowed:?}");
        }
    }

    #[test]
    fn subtraction() {
        let cases: &[(&str, &str, &[&str])] = &[
            ("10.0.0.0/24", "10.0.0.0/24", &[]),
            ("10.0.0.0/24", "10.0.0.0/16", &[]),
            ("10.0.0.0/24", "10.1.0.0/24", &["10.0.0.0/24"]),
            ("10.0.0.0/24", "10.0.0.128/25", &["10.0.0.0/25"]),
            ("10.0.0.0/30", "10.0.0.1/32", &["10.0.0.0/32", "10.0.0.2/31"]),
            ("fd00::/126", "fd00::3/128", &["fd00::/127", "fd00::2/128"]),
            ("10.0.0.0/24", "fd00::/8", &["10.0.0.0/24"]),
        ];
        for (a, b, want) in cases {
            let got = subtract_all(&nets(&[a]), &nets(&[b]));
            assert_eq!(got, nets(want), "{a} - {b}");
        }
    }

    #[test]
    fn allowed_ips_overlap_is_subtracted_not_the_peer_dropped() {
        let peers = [
            peer("A", "node-a", &["10.0.0.2/32", "10.244.0.0/24", "fd7f:175a:b97c:5602::a/128"]),
            peer("SELF", "me", &["10.0.0.1/32"]),
            // Claims node-a's pod range inside its /16, and node-a's host IP.
            peer("B", "node-b", &["10.0.0.3/32", "10.0.0.2/32", "10.244.0.0/16"]),
            peer("C", "", &["10.244.0.0/24"]),
        ];
        let (specs, warnings) = peer_specs(&peers, "SELF", SUBNET.parse().unwrap());
        let keys: Vec<&str> = specs.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["A", "B", "C"], "self skipped, order kept, no peer dropped");
        let a = &specs[0].1;
        assert_eq!(a.address, Some("fd7f:175a:b97c:5602::a".parse().unwrap()));
        assert_eq!(
            a.allowed_ips,
            nets(&["10.0.0.2/32", "10.244.0.0/24", "fd7f:175a:b97c:5602::a/128"])
        );
        let b = &specs[1].1;
        assert_eq!(b.address, None);
        let mut want_b = nets(&["10.0.0.3/32"]);
        want_b.extend(subtract(nets(&["10.244.0.0/16"])[0], nets(&["10.244.0.0/24"])[0]));
        assert_eq!(b.allowed_ips, IpNet::aggregate(&want_b));
        assert!(!b
            .allowed_ips
            .iter()
            .any(|n| n.contains(&"10.244.0.7".parse::<std::net::IpAddr>().unwrap())));
        assert!(b
            .allowed_ips
            .iter()
            .any(|n| n.contains(&"10.244.9.7".parse::<std::net::IpAddr>().unwrap())));
        assert!(specs[2].1.allowed_ips.is_empty(), "C's only prefix was A's");
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(
            warnings[0].contains("node-b") && warnings[0].contains("10.0.0.2/32"),
            "{warnings:?}"
        );
        assert!(warnings[1].starts_with("peer C (C)"), "{warnings:?}");
    }
}
