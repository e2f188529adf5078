// SPDX-License-Identifier: Apache-2.0
//! Cluster membership, as Talos has it (pkg/machinery/resources/cluster): the node's
//! [`NodeIdentity`], [`Affiliate`]s (what one node says of itself: the local one, and the
//! others as learned from a discovery registry, merged per node) and [`Member`]s (one per
//! affiliate with a nodename). Same fields and YAML names as Talos's.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

/// The one NodeIdentity's ID.
pub const NODE_IDENTITY_ID: &str = "local";
/// Prefix of the raw affiliates the discovery service reported (`service/<nodeId>`).
pub const SERVICE_AFFILIATE_PREFIX: &str = "service/";
/// ID of the public address the discovery service saw (namespace `cluster`, a NodeAddress).
pub const DISCOVERED_PUBLIC_ID: &str = "service";

/// The node's identity in the cluster: Talos's NodeID (base62 of 32 random bytes).
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeIdentity {
    /// The NodeID.
    pub node_id: String,
}

/// What one node publishes about itself.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Affiliate {
    /// The node's NodeID (also the affiliate's ID in `cluster`).
    pub node_id: String,
    /// The node's routed addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<IpAddr>,
    /// The node's FQDN.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hostname: String,
    /// The Kubernetes node name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub nodename: String,
    /// `controlplane`, `worker`, `init` or `unknown`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub machine_type: String,
    /// `"<name> (<version>)"`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub operating_system: String,
    /// The node's KubeSpan side, when it runs KubeSpan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubespan: Option<AffiliateKubeSpan>,
    /// The API server's port, on control-plane nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<ControlPlane>,
}

/// An affiliate's KubeSpan: how to mesh with it.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AffiliateKubeSpan {
    /// WireGuard public key (base64).
    pub public_key: String,
    /// The node's KubeSpan address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<Ipv6Addr>,
    /// Further prefixes routed to the node (pod networks).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_addresses: Vec<IpNet>,
    /// Where the node's WireGuard listens, in the order to try.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<SocketAddr>,
    /// Networks the node asks its peers not to route to it over KubeSpan.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude_advertised_networks: Vec<IpNet>,
}

/// A control-plane node's API server.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlane {
    /// The API server's port.
    pub api_server_port: u16,
}

/// A cluster member (ID: its nodename).
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Member {
    /// The member's NodeID.
    pub node_id: String,
    /// Its addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<IpAddr>,
    /// Its FQDN.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hostname: String,
    /// Its machine type.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub machine_type: String,
    /// Its operating system.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub operating_system: String,
    /// Its API server, on control-plane nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<ControlPlane>,
}

impl Affiliate {
    /// Fold `other` (the same node, from another source) into `self` as Talos does: lists
    /// are unions in first-seen order, a non-empty scalar overrides.
    pub fn merge(&mut self, other: &Affiliate) {
        union(&mut self.addresses, &other.addresses);
        for (mine, theirs) in [
            (&mut self.hostname, &other.hostname),
            (&mut self.nodename, &other.nodename),
            (&mut self.machine_type, &other.machine_type),
            (&mut self.operating_system, &other.operating_system),
        ] {
            if !theirs.is_empty() {
                mine.clone_from(theirs);
            }
        }
        if other.control_plane.is_some() {
            self.control_plane = other.control_plane;
        }
        let Some(theirs) = &other.kubespan else { return };
        let mine = self.kubespan.get_or_insert_with(Default::default);
        if !theirs.public_key.is_empty() {
            mine.public_key.clone_from(&theirs.public_key);
        }
        if theirs.address.is_some() {
            mine.address = theirs.address;
        }
        union(&mut mine.additional_addresses, &theirs.additional_addresses);
        union(&mut mine.endpoints, &theirs.endpoints);
        union(&mut mine.exclude_advertised_networks, &theirs.exclude_advertised_networks);
    }

    /// The member this affiliate makes, if it has a nodename (the member's ID).
    pub fn member(&self) -> Option<(&str, Member)> {
        (!self.nodename.is_empty()).then(|| {
            (
                self.nodename.as_str(),
                Member {
                    node_id: self.node_id.clone(),
                    addresses: self.addresses.clone(),
                    hostname: self.hostname.clone(),
                    machine_type: self.machine_type.clone(),
                    operating_system: self.operating_system.clone(),
                    control_plane: self.control_plane,
                },
            )
        })
    }
}

fn union<T: PartialEq + Clone>(into: &mut Vec<T>, from: &[T]) {
    for x in from {
        if !into.contains(x) {
            into.push(x.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_unions_lists_and_overrides_set_scalars() {
        let mut a = Affiliate {
            node_id: "n".into(),
            addresses: vec!["10.0.0.1".parse().unwrap()],
            hostname: "a".into(),
            kubespan: Some(AffiliateKubeSpan {
                public_key: "K".into(),
                endpoints: vec!["10.0.0.1:51820".parse().unwrap()],
                ..Default::default()
            }),
            ..Default::default()
        };
        let b = Affiliate {
            node_id: "n".into(),
            addresses: vec!["10.0.0.2".parse().unwrap(), "10.0.0.1".parse().unwrap()],
            nodename: "node-a".into(),
            kubespan: Some(AffiliateKubeSpan {
                endpoints: vec![
                    "192.0.2.1:51820".parse().unwrap(),
                    "10.0.0.1:51820".parse().unwrap(),
                ],
                ..Default::default()
            }),
            ..Default::default()
        };
        a.merge(&b);
        assert_eq!(a.addresses.len(), 2);
        assert_eq!((a.hostname.as_str(), a.nodename.as_str()), ("a", "node-a"));
        let ks = a.kubespan.as_ref().unwrap();
        assert_eq!(ks.public_key, "K", "an empty key does not override");
        assert_eq!(ks.endpoints.len(), 2);
        let (id, m) = a.member().unwrap();
        assert_eq!((id, m.hostname.as_str()), ("node-a", "a"));
        assert!(Affiliate::default().member().is_none(), "no nodename, no member");
    }

    #[test]
    fn yaml_names_are_talos_names() {
        let a = Affiliate {
            node_id: "n".into(),
            machine_type: "worker".into(),
            operating_system: "keelson (v0.1.0)".into(),
            kubespan: Some(AffiliateKubeSpan { public_key: "K".into(), ..Default::default() }),
            control_plane: Some(ControlPlane { api_server_port: 6443 }),
            ..Default::default()
        };
        let y = serde_yaml::to_string(&a).unwrap();
        for k in [
            "nodeId: n",
            "machineType: worker",
            "operatingSystem:",
            "publicKey: K",
            "apiServerPort: 6443",
        ] {
            assert!(y.contains(k), "{k} in {y}");
        }
        let back: Affiliate = serde_yaml::from_str(&y).unwrap();
        assert_eq!(back, a);
    }
}
