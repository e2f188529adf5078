// SPDX-License-Identifier: Apache-2.0
//! KubeSpan resources (namespace `kubespan`, docs/talos.md: KubeSpan). The `kubespan` crate
//! computes them; they live here because the store's kind table does.

use std::fmt;
use std::net::{Ipv6Addr, SocketAddr};
use std::time::SystemTime;

use ipnet::{IpNet, Ipv6Net};
use serde::{Serialize, Serializer};

use super::rfc3339::Rfc3339;
use crate::wgkey::Key;

/// ID of the node's identity.
pub const KUBESPAN_IDENTITY_ID: &str = "local";

/// The node's KubeSpan identity: its key pair and ULA address.
#[derive(Clone, PartialEq, Eq, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeSpanIdentity {
    /// The node's KubeSpan address, a /128 inside `subnet`.
    pub address: Ipv6Net,
    /// The cluster's KubeSpan /64.
    pub subnet: Ipv6Net,
    /// WireGuard private key; shown as `<redacted>`.
    pub private_key: Key,
    /// WireGuard public key (base64).
    pub public_key: String,
}

/// A peer to mesh with (ID: its public key).
#[derive(Clone, PartialEq, Eq, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeSpanPeerSpec {
    /// Its KubeSpan address, when known (a /128 of the cluster's KubeSpan /64 among its
    /// addresses).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<Ipv6Addr>,
    /// What WireGuard routes to it, overlaps with earlier peers already removed.
    pub allowed_ips: Vec<IpNet>,
    /// Where it can be reached, in the order to try.
    pub endpoints: Vec<SocketAddr>,
    /// A name for humans.
    pub label: String,
}

/// How a peer is doing (docs/talos.md: KubeSpan).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PeerState {
    /// Not known yet: just configured, or an endpoint was just changed.
    #[default]
    Unknown,
    /// A recent handshake.
    Up,
    /// No handshake for too long.
    Down,
}

impl fmt::Display for PeerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PeerState::Unknown => "unknown",
            PeerState::Up => "up",
            PeerState::Down => "down",
        })
    }
}

/// A peer as WireGuard and the rotation engine see it (ID: its public key).
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeSpanPeerStatus {
    /// A name for humans.
    pub label: String,
    /// The endpoint WireGuard uses now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<SocketAddr>,
    /// Up, down or unknown.
    pub state: PeerState,
    /// The last completed handshake.
    #[serde(serialize_with = "ser_opt_time", skip_serializing_if = "Option::is_none")]
    pub last_handshake_time: Option<SystemTime>,
    /// Bytes received from it.
    pub receive_bytes: u64,
    /// Bytes sent to it.
    pub transmit_bytes: u64,
    /// The endpoint the manager last pointed WireGuard at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_used_endpoint: Option<SocketAddr>,
    /// When it did.
    #[serde(serialize_with = "ser_opt_time", skip_serializing_if = "Option::is_none")]
    pub last_endpoint_change: Option<SystemTime>,
}

fn ser_opt_time<S: Serializer>(t: &Option<SystemTime>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => s.collect_str(&Rfc3339(*t)),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_key_is_never_shown() {
        let id = KubeSpanIdentity {
            address: "fd7f:175a:b97c:5602:2c1a:b6ff:fe53:8169/128".parse().unwrap(),
            subnet: "fd7f:175a:b97c:5602::/64".parse().unwrap(),
            private_key: Key([0x73; 32]),
            public_key: "cHVibGlj".into(),
        };
        let secret = id.private_key.to_base64();
        assert!(!format!("{id:?}").contains(&secret));
        let yaml = serde_yaml::to_string(&id).unwrap();
        assert!(!yaml.contains(&secret) && yaml.contains("privateKey: <redacted>"), "{yaml}");
        assert!(yaml.contains("publicKey: cHVibGlj"), "{yaml}");
    }
}
