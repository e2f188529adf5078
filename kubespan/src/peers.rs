// SPDX-License-Identifier: Apache-2.0
//! Peer specs from the configured peers (docs/talos.md: KubeSpan), pure.
//!
//! AllowedIPs are a set: a peer's addresses, aggregated. A prefix an earlier peer already
//! claimed is subtracted from a later one, prefix by prefix with a warning; the later peer
//! keeps everything else (Talos's older behaviour dropped whole peers).
//! The node itself may be listed (one config for every node): that entry is skipped.

use ipnet::{IpNet, Ipv6Net};

use net::config::KubeSpanPeer;
use net::resource::KubeSpanPeerSpec;

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
