// SPDX-License-Identifier: Apache-2.0
//! The local affiliate, pure: what this node publishes about itself, as Talos builds it
//! (internal/app/machined/pkg/controllers/cluster/local_affiliate.go, in behaviour).

use std::net::{IpAddr, SocketAddr};

use ipnet::IpNet;
use net::config::{CidrFilter, MachineConfig, MachineType};
use net::resource::{Affiliate, AffiliateKubeSpan, ControlPlane, KubeSpanIdentity};

/// The port KubeSpan's WireGuard listens on.
pub const KUBESPAN_PORT: u16 = 51820;
/// The API server port a control-plane node announces.
pub const API_SERVER_PORT: u16 = 6443;
/// What the affiliate says the node runs.
pub const OPERATING_SYSTEM: &str = concat!("keelson (v", env!("CARGO_PKG_VERSION"), ")");

/// Does the config ask for the discovery service?
pub fn service_enabled(cfg: &MachineConfig) -> bool {
    cfg.cluster
        .as_ref()
        .and_then(|c| c.discovery.as_ref())
        .is_some_and(|d| d.enabled && !d.registries.service.disabled)
}

/// What the local affiliate is made of.
#[derive(Debug)]
pub struct LocalInputs<'a> {
    /// The machine config.
    pub config: &'a MachineConfig,
    /// The NodeID.
    pub node_id: &'a str,
    /// Hostname and domain (the FQDN is `hostname.domain`).
    pub hostname: (&'a str, &'a str),
    /// NodeAddress `routed`.
    pub routed: &'a [IpNet],
    /// NodeAddress `current`.
    pub current: &'a [IpNet],
    /// The public address the discovery service saw, if any.
    pub public: &'a [IpNet],
    /// The KubeSpan identity, when KubeSpan is on.
    pub kubespan: Option<&'a KubeSpanIdentity>,
}

/// The local affiliate.
pub fn local_affiliate(i: &LocalInputs<'_>) -> Affiliate {
    let (host, domain) = i.hostname;
    let hostname = if domain.is_empty() { host.to_owned() } else { format!("{host}.{domain}") };
    let machine_type = match i.config.machine.machine_type {
        Some(MachineType::ControlPlane) => "controlplane",
        Some(MachineType::Worker) => "worker",
        None => "unknown",
    };
    let ks_cfg = &i.config.machine.network.kubespan;
    let kubespan =
        i.kubespan.filter(|_| ks_cfg.enabled).map(|id| {
            let own = id.address.addr();
            let candidates =
                i.current.iter().chain(i.public).map(IpNet::addr).filter(
                    |a| !matches!(a, IpAddr::V6(v6) if *v6 == own || id.subnet.contains(v6)),
                );
            let mut endpoints: Vec<SocketAddr> = Vec::new();
            for ip in filter_ips(candidates, &ks_cfg.filters.endpoints) {
                let ep = SocketAddr::new(ip, KUBESPAN_PORT);
                if !endpoints.contains(&ep) {
                    endpoints.push(ep);
                }
            }
            for ep in &ks_cfg.extra_announced_endpoints {
                if !endpoints.contains(ep) {
                    endpoints.push(*ep);
                }
            }
            AffiliateKubeSpan {
                public_key: id.public_key.clone(),
                address: Some(own),
                additional_addresses: Vec::new(),
                endpoints,
                exclude_advertised_networks: ks_cfg.filters.exclude_advertised_networks.clone(),
            }
        });
    Affiliate {
        node_id: i.node_id.to_owned(),
        addresses: i.routed.iter().map(IpNet::addr).collect(),
        nodename: host.to_owned(),
        hostname,
        machine_type: machine_type.to_owned(),
        operating_system: OPERATING_SYSTEM.to_owned(),
        kubespan,
        control_plane: (machine_type == "controlplane")
            .then_some(ControlPlane { api_server_port: API_SERVER_PORT }),
    }
}

/// Talos's endpoint filters: no filter keeps everything; otherwise the filters run in order
/// from an empty set, a network adding what it matches and `!network` taking it away again.
pub fn filter_ips(ips: impl Iterator<Item = IpAddr>, filters: &[CidrFilter]) -> Vec<IpAddr> {
    let ips: Vec<IpAddr> = ips.collect();
    if filters.is_empty() {
        return ips;
    }
    ips.into_iter()
        .filter(|ip| {
            filters.iter().fold(
                false,
                |keep, f| {
                    if f.network.contains(ip) {
                        !f.exclude
                    } else {
                        keep
                    }
                },
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filters(list: &[&str]) -> Vec<CidrFilter> {
        list.iter()
            .map(|s| match s.strip_prefix('!') {
                Some(n) => CidrFilter { exclude: true, network: n.parse().unwrap() },
                None => CidrFilter { exclude: false, network: s.parse().unwrap() },
            })
            .collect()
    }

    fn ips(list: &[&str]) -> Vec<IpAddr> {
        list.iter().map(|s| s.parse().unwrap()).collect()
    }

    #[test]
    fn endpoint_filters_run_in_order_from_nothing() {
        let all = ips(&["10.0.0.1", "192.168.1.5", "2001:db8::1"]);
        assert_eq!(filter_ips(all.clone().into_iter(), &[]), all);
        assert_eq!(
            filter_ips(all.clone().into_iter(), &filters(&["0.0.0.0/0", "!192.168.0.0/16"])),
            ips(&["10.0.0.1"])
        );
        assert!(
            filter_ips(all.clone().into_iter(), &filters(&["!10.0.0.0/8"])).is_empty(),
            "only exclusions leave nothing, as in Talos"
        );
        assert_eq!(filter_ips(all.into_iter(), &filters(&["::/0"])), ips(&["2001:db8::1"]));
    }

    #[test]
    fn local_affiliate_from_the_node_resources() {
        let cfg: MachineConfig = net::config::parse(
            "version: v1alpha1\nmachine:\n  type: controlplane\n  network:\n    kubespan:\n      enabled: true\n      filters:\n        endpoints: ['0.0.0.0/0', '!10.99.0.0/16']\ncluster:\n  id: Y2x1c3Rlcg==\n  secret: c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI=\n  discovery:\n    enabled: true\n",
        )
        .unwrap();
        assert!(service_enabled(&cfg));
        let id = KubeSpanIdentity {
            address: "fd7f:175a:b97c:5602::a/128".parse().unwrap(),
            subnet: "fd7f:175a:b97c:5602::/64".parse().unwrap(),
            private_key: net::wgkey::Key([1; 32]),
            public_key: "PUB".into(),
        };
        let routed: Vec<IpNet> = vec!["10.0.0.2/24".parse().unwrap()];
        let current: Vec<IpNet> = vec![
            "10.0.0.2/24".parse().unwrap(),
            "10.99.0.7/16".parse().unwrap(),
            "fd7f:175a:b97c:5602::a/128".parse().unwrap(),
        ];
        let public: Vec<IpNet> = vec!["203.0.113.9/32".parse().unwrap()];
        let a = local_affiliate(&LocalInputs {
            config: &cfg,
            node_id: "NODE",
            hostname: ("n1", "example.org"),
            routed: &routed,
            current: &current,
            public: &public,
            kubespan: Some(&id),
        });
        assert_eq!(a.hostname, "n1.example.org");
        assert_eq!(a.nodename, "n1");
        assert_eq!(a.machine_type, "controlplane");
        assert_eq!(a.control_plane, Some(ControlPlane { api_server_port: 6443 }));
        assert_eq!(a.addresses, ips(&["10.0.0.2"]));
        let ks = a.kubespan.unwrap();
        assert_eq!(ks.public_key, "PUB");
        assert_eq!(
            ks.endpoints,
            vec![
                "10.0.0.2:51820".parse::<SocketAddr>().unwrap(),
                "203.0.113.9:51820".parse().unwrap()
            ],
            "filtered, the KubeSpan address left out, the public address added"
        );
    }
}
