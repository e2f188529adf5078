// SPDX-License-Identifier: Apache-2.0
//! WireGuard settings a [`LinkSpec`](super::LinkSpec) carries, and what the kernel reports back.

use std::fmt;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use super::nethelpers::is_default;
use crate::wgkey::Key;

/// A WireGuard device's configuration (docs/talos.md: Applying specs).
///
/// Private and preshared keys are [`Key`]s (base64 in YAML, `<redacted>` when shown); public
/// keys are base64 strings as in Talos, since they name peers and are shown. Peers are kept sorted by public key and allowed IPs by
/// (address, prefix length) ([`WireguardSpec::normalize`]), so equal configurations compare
/// equal. `Debug` leaves the private and preshared keys out.
#[derive(Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WireguardSpec {
    /// The device's private key (base64). Never shown: `keelson get` prints `<redacted>`.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "private_key")]
    pub private_key: Option<Key>,
    /// UDP listen port; 0 lets the kernel pick one and is not compared.
    #[serde(default, skip_serializing_if = "is_default")]
    pub listen_port: u16,
    /// Mark set on the device's own encrypted packets.
    #[serde(default, skip_serializing_if = "is_default")]
    pub firewall_mark: u32,
    /// Peers, sorted by public key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peers: Vec<WireguardPeer>,
}

fn private_key<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Key>, D::Error> {
    crate::wgkey::opt_or_redacted(d, "privateKey")
}

fn preshared_key<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Key>, D::Error> {
    crate::wgkey::opt_or_redacted(d, "presharedKey")
}

impl fmt::Debug for WireguardSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WireguardSpec")
            .field("private_key", &if self.private_key.is_none() { "" } else { "<redacted>" })
            .field("listen_port", &self.listen_port)
            .field("firewall_mark", &self.firewall_mark)
            .field("peers", &self.peers)
            .finish()
    }
}

impl WireguardSpec {
    /// Sort peers by public key and each peer's allowed IPs by (address, prefix length), and
    /// drop duplicate allowed IPs: the order the kernel's answer is compared in.
    pub fn normalize(&mut self) {
        for p in &mut self.peers {
            crate::sort::by_key(&mut p.allowed_ips, |n| (n.addr(), n.prefix_len()));
            p.allowed_ips.dedup();
        }
        crate::sort::by(&mut self.peers, |a, b| a.public_key.cmp(&b.public_key));
    }
}

/// One WireGuard peer of a [`WireguardSpec`].
#[derive(Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WireguardPeer {
    /// The peer's public key (base64).
    pub public_key: String,
    /// Preshared key (base64). Never shown, like the private key.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "preshared_key")]
    pub preshared_key: Option<Key>,
    /// Where to send to; `None` leaves the device's endpoint alone, so WireGuard's roaming is
    /// kept (docs/talos.md: KubeSpan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<std::net::SocketAddr>,
    /// Persistent keepalive in seconds; 0 is off.
    #[serde(default, skip_serializing_if = "is_default")]
    pub persistent_keepalive_interval: u16,
    /// Prefixes routed to and accepted from this peer.
    #[serde(rename = "allowedIPs", default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_ips: Vec<IpNet>,
    /// A counter the writer raises to ask for a handshake now: when it changes and the peer
    /// has no session, the peer is re-created, which sends an initiation at once instead of
    /// at WireGuard's next retransmission (up to 5 s later). 0 never asks.
    #[serde(default, skip_serializing_if = "is_default")]
    pub handshake_retry: u32,
}

impl fmt::Debug for WireguardPeer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WireguardPeer")
            .field("public_key", &self.public_key)
            .field("preshared_key", &self.preshared_key.as_ref().map(|_| "<redacted>"))
            .field("endpoint", &self.endpoint)
            .field("persistent_keepalive_interval", &self.persistent_keepalive_interval)
            .field("allowed_ips", &self.allowed_ips)
            .field("handshake_retry", &self.handshake_retry)
            .finish()
    }
}

/// A WireGuard device as the kernel reports it (no private or preshared keys).
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WireguardStatus {
    /// The device's public key (base64); empty without a private key.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub public_key: String,
    /// UDP listen port.
    pub listen_port: u16,
    /// Mark on encrypted packets.
    #[serde(skip_serializing_if = "is_default")]
    pub firewall_mark: u32,
    /// Peers, sorted by public key.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub peers: Vec<WireguardPeerStatus>,
}

/// One peer of a [`WireguardStatus`].
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WireguardPeerStatus {
    /// The peer's public key (base64).
    pub public_key: String,
    /// The endpoint WireGuard currently sends to (configured or roamed to).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<std::net::SocketAddr>,
    /// Last completed handshake, in Unix seconds; `None` before the first one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_handshake: Option<u64>,
    /// Bytes received from the peer.
    pub rx_bytes: u64,
    /// Bytes sent to the peer.
    pub tx_bytes: u64,
    /// Persistent keepalive in seconds; 0 is off.
    #[serde(skip_serializing_if = "is_default")]
    pub persistent_keepalive_interval: u16,
    /// Allowed IPs, sorted.
    #[serde(rename = "allowedIPs", skip_serializing_if = "Vec::is_empty")]
    pub allowed_ips: Vec<IpNet>,
}
