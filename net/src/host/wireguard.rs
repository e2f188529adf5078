// SPDX-License-Identifier: Apache-2.0
//! WireGuard devices at the [`Host`](super::Host) boundary: what `WG_CMD_GET_DEVICE` reports
//! ([`WgDevice`]) and what `WG_CMD_SET_DEVICE` changes ([`WgUpdate`]), with keys decoded.
//!
//! These are the netlink adapter's own wire-level types, not a second form of the settings:
//! the desired settings are always a `WireguardSpec`; [`WgDevice`] is what the kernel reports
//! and [`WgUpdate`] the smallest diff to send (`WG_CMD_SET_DEVICE` takes changes, with flags
//! for removal and allowed-IP replacement, which a spec has no place for). They carry private
//! and preshared keys, so they are never resources; their `Debug` shows no key bytes
//! ([`Key`]'s `Debug` is `<redacted>`).

use std::net::SocketAddr;

use ipnet::IpNet;

use crate::wireguard_keys::Key;

/// WireGuard's REJECT_AFTER_TIME: how long a session's keys carry traffic. A peer whose last
/// handshake is older has no usable session.
pub const REJECT_AFTER_TIME: std::time::Duration = std::time::Duration::from_secs(180);

/// A WireGuard device as the kernel reports it (wire level; the status resource is
/// `WireguardStatus`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WgDevice {
    /// Private key, when one is set.
    pub private_key: Option<Key>,
    /// Public key, when a private key is set.
    pub public_key: Option<Key>,
    /// UDP listen port (the kernel picks one when 0 was asked for).
    pub listen_port: u16,
    /// Mark on the device's encrypted packets.
    pub fwmark: u32,
    /// Peers, in the kernel's order.
    pub peers: Vec<WgPeer>,
}

/// One peer of a [`WgDevice`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WgPeer {
    /// Public key.
    pub public_key: Key,
    /// Preshared key; `None` when the kernel reports none (all zeros).
    pub preshared_key: Option<Key>,
    /// Current endpoint (configured or roamed to).
    pub endpoint: Option<SocketAddr>,
    /// Persistent keepalive in seconds; 0 is off.
    pub keepalive: u16,
    /// Last handshake in Unix seconds; `None` before the first.
    pub last_handshake: Option<u64>,
    /// The sub-second part of the last handshake, in nanoseconds. A handshake that came within
    /// a second of an endpoint change must not read as older than the change.
    pub last_handshake_nanos: u32,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Allowed IPs, in the kernel's order.
    pub allowed_ips: Vec<IpNet>,
}

/// A change to a WireGuard device (`WG_CMD_SET_DEVICE`), the diff between a `WireguardSpec`
/// and a [`WgDevice`] (wire level): `None` fields are left alone.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WgUpdate {
    /// New private key.
    pub private_key: Option<Key>,
    /// New listen port.
    pub listen_port: Option<u16>,
    /// New fwmark.
    pub fwmark: Option<u32>,
    /// Peers to add, change or remove; peers not listed are left alone.
    pub peers: Vec<WgPeerUpdate>,
}

impl WgUpdate {
    /// Nothing to change.
    pub fn is_empty(&self) -> bool {
        self.private_key.is_none()
            && self.listen_port.is_none()
            && self.fwmark.is_none()
            && self.peers.is_empty()
    }
}

/// A peer change: add or update (creating the peer if needed), or remove.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WgPeerUpdate {
    /// The peer's public key.
    pub public_key: Key,
    /// Remove the peer (`WGPEER_F_REMOVE_ME`); the other fields are then ignored.
    pub remove: bool,
    /// New preshared key; [`Key::ZERO`] clears it.
    pub preshared_key: Option<Key>,
    /// New endpoint.
    pub endpoint: Option<SocketAddr>,
    /// New persistent keepalive (0 turns it off).
    pub keepalive: Option<u16>,
    /// The complete new allowed IPs list (`WGPEER_F_REPLACE_ALLOWEDIPS`).
    pub allowed_ips: Option<Vec<IpNet>>,
}
