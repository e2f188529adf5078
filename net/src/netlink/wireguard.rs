// SPDX-License-Identifier: Apache-2.0
//! WireGuard over generic netlink: [`WireguardSocket`] resolves the `wireguard` family and
//! speaks `WG_CMD_GET_DEVICE` (a multi-part dump) and `WG_CMD_SET_DEVICE` (split into as many
//! messages as the peers need) with the attribute types of `netlink-packet-wireguard`.
//!
//! Why this and not `wireguard-control`: see `WIREGUARD-DEPENDENCY.md` beside this file.

use std::net::IpAddr;

use ipnet::IpNet;
use netlink_packet_core::Emitable;
use netlink_packet_generic::ctrl::nlas::GenlCtrlAttrs;
use netlink_packet_generic::ctrl::{GenlCtrl, GenlCtrlCmd};
use netlink_packet_generic::GenlMessage;
use netlink_packet_wireguard::{
    WireguardAddressFamily, WireguardAllowedIp, WireguardAllowedIpAttr, WireguardAttribute,
    WireguardCmd, WireguardMessage, WireguardPeer, WireguardPeerAttribute, WireguardPeerFlags,
};
use netlink_sys::protocols::NETLINK_GENERIC;

use super::error::NlError;
use super::socket::NlSocket;
use crate::host::{WgDevice, WgPeer, WgPeerUpdate, WgUpdate};
use crate::wireguard_keys::Key;

/// Largest `WG_CMD_SET_DEVICE` payload we send in one message. The kernel refuses a message
/// longer than the socket's send buffer (`net.core.wmem_default`, about 208 KiB), and
/// wg(8) keeps to a page; 16 KiB holds about 100 peers with a few prefixes each, so a
/// thousand-peer mesh is a handful of messages.
pub const SET_DEVICE_BUDGET: usize = 16 * 1024;

/// A generic netlink socket for the `wireguard` family, in the namespace of the thread that
/// opened it.
///
/// The family id is resolved on first use, not when the socket opens: the module may only be
/// loaded with the first WireGuard link, while the socket must be opened early, on the
/// thread that is in the right namespace.
#[derive(Debug)]
pub struct WireguardSocket {
    sock: NlSocket,
    family: Option<u16>,
}

impl WireguardSocket {
    /// Opens a `NETLINK_GENERIC` socket in the calling thread's network namespace.
    pub fn new() -> Result<Self, NlError> {
        Ok(Self { sock: NlSocket::new(NETLINK_GENERIC, false)?, family: None })
    }

    /// The family id (`CTRL_CMD_GETFAMILY "wireguard"`), resolved once. Fails with
    /// [`NotFound`](super::NlErrorKind::NotFound) while the kernel has no WireGuard.
    fn family(&mut self) -> Result<u16, NlError> {
        if let Some(id) = self.family {
            return Ok(id);
        }
        let ask = GenlMessage::from_payload(GenlCtrl {
            cmd: GenlCtrlCmd::GetFamily,
            nlas: vec![GenlCtrlAttrs::FamilyName("wireguard".into())],
        });
        let replies = self.sock.request("genl_get_family", "wireguard", ask, 0)?;
        let id = replies
            .iter()
            .flat_map(|m| m.payload.nlas.iter())
            .find_map(|a| match a {
                GenlCtrlAttrs::FamilyId(id) => Some(*id),
                _ => None,
            })
            .ok_or_else(|| NlError::decode("genl_get_family", "wireguard", "no family id"))?;
        self.family = Some(id);
        Ok(id)
    }

    fn message(
        &mut self,
        cmd: WireguardCmd,
        attributes: Vec<WireguardAttribute>,
    ) -> Result<Msg, NlError> {
        let mut m = GenlMessage::from_payload(WireguardMessage { cmd, attributes });
        m.set_resolved_family_id(self.family()?);
        Ok(m)
    }

    /// The device `name`: keys, port, fwmark and every peer (`WG_CMD_GET_DEVICE`).
    pub fn get_device(&mut self, name: &str) -> Result<WgDevice, NlError> {
        let ask = self
            .message(WireguardCmd::GetDevice, vec![WireguardAttribute::IfName(name.to_owned())])?;
        let parts = self.sock.dump("wg_get_device", name, ask)?;
        Ok(decode_device(parts.iter().map(|m| m.payload.attributes.as_slice())))
    }

    /// Applies `update` to the device `name` (`WG_CMD_SET_DEVICE`, several messages when the
    /// peers do not fit in one). Each message is acknowledged before the next is sent.
    pub fn set_device(&mut self, name: &str, update: &WgUpdate) -> Result<(), NlError> {
        for attributes in pack_set_device(name, update, SET_DEVICE_BUDGET) {
            let msg = self.message(WireguardCmd::SetDevice, attributes)?;
            self.sock.request("wg_set_device", name, msg, 0)?;
        }
        Ok(())
    }
}

type Msg = GenlMessage<WireguardMessage>;

/// Folds the parts of a `WG_CMD_GET_DEVICE` dump into a device. The kernel continues a peer
/// whose allowed IPs did not fit in the next part, repeating its public key; such a
/// continuation extends the previous peer.
fn decode_device<'a>(parts: impl Iterator<Item = &'a [WireguardAttribute]>) -> WgDevice {
    let mut dev = WgDevice::default();
    for attrs in parts {
        for a in attrs {
            match a {
                WireguardAttribute::PrivateKey(k) => {
                    dev.private_key = Some(Key(*k)).filter(|k| !k.is_zero());
                }
                WireguardAttribute::PublicKey(k) => {
                    dev.public_key = Some(Key(*k)).filter(|k| !k.is_zero());
                }
                WireguardAttribute::ListenPort(p) => dev.listen_port = *p,
                WireguardAttribute::Fwmark(m) => dev.fwmark = *m,
                WireguardAttribute::Peers(peers) => {
                    for p in peers {
                        let peer = decode_peer(p);
                        match dev.peers.last_mut() {
                            Some(last) if last.public_key == peer.public_key => {
                                last.allowed_ips.extend(peer.allowed_ips);
                            }
                            _ => dev.peers.push(peer),
                        }
                    }
                }
                _ => {}
            }
        }
    }
    dev
}

fn decode_peer(p: &WireguardPeer) -> WgPeer {
    let mut peer = WgPeer::default();
    for a in p.iter() {
        match a {
            WireguardPeerAttribute::PublicKey(k) => peer.public_key = Key(*k),
            WireguardPeerAttribute::PresharedKey(k) => {
                peer.preshared_key = Some(Key(*k)).filter(|k| !k.is_zero());
            }
            WireguardPeerAttribute::Endpoint(e) => peer.endpoint = Some(*e),
            WireguardPeerAttribute::PersistentKeepalive(k) => peer.keepalive = *k,
            WireguardPeerAttribute::LastHandshake(t) => {
                // The kernel reports 0 before the first handshake.
                peer.last_handshake = u64::try_from(t.seconds).ok().filter(|s| *s != 0);
                peer.last_handshake_nanos =
                    u32::try_from(t.nano_seconds).ok().filter(|n| *n < 1_000_000_000).unwrap_or(0);
            }
            WireguardPeerAttribute::RxBytes(n) => peer.rx_bytes = *n,
            WireguardPeerAttribute::TxBytes(n) => peer.tx_bytes = *n,
            WireguardPeerAttribute::AllowedIps(ips) => {
                peer.allowed_ips.extend(ips.iter().filter_map(decode_allowed_ip));
            }
            _ => {}
        }
    }
    peer
}

fn decode_allowed_ip(ip: &WireguardAllowedIp) -> Option<IpNet> {
    let mut addr = None;
    let mut cidr = None;
    for a in ip.iter() {
        match a {
            WireguardAllowedIpAttr::IpAddr(x) => addr = Some(*x),
            WireguardAllowedIpAttr::Cidr(c) => cidr = Some(*c),
            _ => {}
        }
    }
    IpNet::new(addr?, cidr?).ok()
}

fn encode_allowed_ip(net: &IpNet) -> WireguardAllowedIp {
    let family = match net.addr() {
        IpAddr::V4(_) => WireguardAddressFamily::Ipv4,
        IpAddr::V6(_) => WireguardAddressFamily::Ipv6,
    };
    WireguardAllowedIp(vec![
        WireguardAllowedIpAttr::Family(family),
        WireguardAllowedIpAttr::IpAddr(net.addr()),
        WireguardAllowedIpAttr::Cidr(net.prefix_len()),
    ])
}

/// A peer's attributes, except its allowed IPs.
fn peer_head(u: &WgPeerUpdate) -> Vec<WireguardPeerAttribute> {
    let mut attrs = vec![WireguardPeerAttribute::PublicKey(u.public_key.0)];
    if u.remove {
        attrs.push(WireguardPeerAttribute::Flags(WireguardPeerFlags::RemoveMe));
        return attrs;
    }
    if u.allowed_ips.is_some() {
        attrs.push(WireguardPeerAttribute::Flags(WireguardPeerFlags::ReplaceAllowedIps));
    }
    if let Some(k) = u.preshared_key {
        attrs.push(WireguardPeerAttribute::PresharedKey(k.0));
    }
    if let Some(e) = u.endpoint {
        attrs.push(WireguardPeerAttribute::Endpoint(e));
    }
    if let Some(k) = u.keepalive {
        attrs.push(WireguardPeerAttribute::PersistentKeepalive(k));
    }
    attrs
}

/// Splits a device update into `WG_CMD_SET_DEVICE` attribute lists of at most `budget`
/// bytes each (when a single allowed IP fits at all). Device settings go in the first; a
/// peer whose allowed IPs do not fit continues in the next message under its public key
/// alone, without the replace flag, so the kernel appends to what the first part replaced
/// (what wg(8) does too).
pub fn pack_set_device(name: &str, u: &WgUpdate, budget: usize) -> Vec<Vec<WireguardAttribute>> {
    let ifname = WireguardAttribute::IfName(name.to_owned());
    let mut device = vec![ifname.clone()];
    if let Some(k) = u.private_key {
        device.push(WireguardAttribute::PrivateKey(k.0));
    }
    if let Some(p) = u.listen_port {
        device.push(WireguardAttribute::ListenPort(p));
    }
    if let Some(m) = u.fwmark {
        device.push(WireguardAttribute::Fwmark(m));
    }
    let head_len = device.as_slice().buffer_len();
    let mut packer =
        Packer { budget, out: Vec::new(), head: device, head_len, peers: Vec::new(), used: 0 };
    for peer in &u.peers {
        let ips: Vec<WireguardAllowedIp> =
            peer.allowed_ips.iter().flatten().map(encode_allowed_ip).collect();
        let mut attrs = peer_head(peer);
        let mut rest = ips.as_slice();
        loop {
            let n = match packer.largest_fit(&attrs, rest) {
                Some(n) if n == rest.len() || n > 0 => n,
                // Not even a part fits next to what this message holds: start a new one.
                _ if !packer.peers.is_empty() => {
                    packer.flush(&ifname);
                    continue;
                }
                // Over budget in an empty message: send the smallest part there is.
                _ => usize::from(!rest.is_empty()),
            };
            let (now, later) = rest.split_at(n);
            packer.push(with_ips(&attrs, now));
            rest = later;
            if rest.is_empty() {
                break;
            }
            // The rest continues under the public key alone, in the next message.
            packer.flush(&ifname);
            attrs = vec![WireguardPeerAttribute::PublicKey(peer.public_key.0)];
        }
    }
    packer.flush(&ifname);
    packer.out
}

fn with_ips(attrs: &[WireguardPeerAttribute], ips: &[WireguardAllowedIp]) -> WireguardPeer {
    let mut v = attrs.to_vec();
    if !ips.is_empty() {
        v.push(WireguardPeerAttribute::AllowedIps(ips.to_vec()));
    }
    WireguardPeer(v)
}

/// Accumulates peers into messages of at most `budget` bytes.
struct Packer {
    budget: usize,
    out: Vec<Vec<WireguardAttribute>>,
    /// The next message's device attributes (the interface name only, after the first).
    head: Vec<WireguardAttribute>,
    head_len: usize,
    peers: Vec<WireguardPeer>,
    /// Encoded size of `peers`.
    used: usize,
}

/// Header of the `WGDEVICE_A_PEERS` nest.
const NLA_HEADER: usize = 4;

impl Packer {
    fn fits(&self, peer: &WireguardPeer) -> bool {
        self.head_len + NLA_HEADER + self.used + peer.buffer_len() <= self.budget
    }

    /// The most allowed IPs of `ips` that fit with `attrs` in the current message, or `None`
    /// when not even the attributes alone fit.
    fn largest_fit(
        &self,
        attrs: &[WireguardPeerAttribute],
        ips: &[WireguardAllowedIp],
    ) -> Option<usize> {
        if !self.fits(&with_ips(attrs, &[])) {
            return None;
        }
        // Binary search: fits(lo) holds, fits(hi + 1) does not.
        let (mut lo, mut hi) = (0, ips.len());
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if self.fits(&with_ips(attrs, ips.get(..mid).unwrap_or_default())) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        Some(lo)
    }

    fn push(&mut self, peer: WireguardPeer) {
        self.used += peer.buffer_len();
        self.peers.push(peer);
    }

    /// Ends the current message (a device-only first message is kept: it may carry keys).
    fn flush(&mut self, ifname: &WireguardAttribute) {
        let first = self.out.is_empty();
        if self.peers.is_empty() && !first {
            return;
        }
        let mut attrs = std::mem::replace(&mut self.head, vec![ifname.clone()]);
        self.head_len = self.head.as_slice().buffer_len();
        if !self.peers.is_empty() {
            attrs.push(WireguardAttribute::Peers(std::mem::take(&mut self.peers)));
            self.used = 0;
        }
        self.out.push(attrs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u16) -> Key {
        let mut k = [0u8; 32];
        k[..2].copy_from_slice(&n.to_be_bytes());
        k[31] = 1;
        Key(k)
    }

    fn net(i: u32) -> IpNet {
        IpNet::new(IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + i)), 32).unwrap()
    }

    /// Replays packed messages the way the kernel applies them and returns the resulting
    /// peers (key → allowed IPs), checking that continuations never replace.
    fn replay(msgs: &[Vec<WireguardAttribute>]) -> Vec<(Key, bool, Vec<IpNet>)> {
        let mut peers: Vec<(Key, bool, Vec<IpNet>)> = Vec::new();
        for m in msgs {
            for a in m {
                let WireguardAttribute::Peers(ps) = a else { continue };
                for p in ps {
                    let d = decode_peer(p);
                    let replace = p.iter().any(|a| {
                        matches!(a, WireguardPeerAttribute::Flags(f) if f.contains(WireguardPeerFlags::ReplaceAllowedIps))
                    });
                    let remove = p.iter().any(|a| {
                        matches!(a, WireguardPeerAttribute::Flags(f) if f.contains(WireguardPeerFlags::RemoveMe))
                    });
                    match peers.iter_mut().find(|(k, _, _)| *k == d.public_key) {
                        Some(e) => {
                            assert!(!replace, "a continuation must not replace");
                            e.2.extend(d.allowed_ips);
                        }
                        None => peers.push((d.public_key, remove, d.allowed_ips)),
                    }
                }
            }
        }
        peers
    }

    #[test]
    fn a_handshake_keeps_its_nanoseconds_and_zero_means_none() {
        let at = |seconds, nano_seconds| {
            decode_peer(&WireguardPeer(vec![WireguardPeerAttribute::LastHandshake(
                netlink_packet_wireguard::WireguardTimeSpec { seconds, nano_seconds },
            )]))
        };
        let p = at(1_700_000_000, 250_000_000);
        assert_eq!((p.last_handshake, p.last_handshake_nanos), (Some(1_700_000_000), 250_000_000));
        assert_eq!(at(0, 0).last_handshake, None);
        assert_eq!(at(5, 2_000_000_000).last_handshake_nanos, 0, "out of range");
    }

    #[test]
    fn small_update_is_one_message_with_device_settings() {
        let u = WgUpdate {
            private_key: Some(key(1)),
            listen_port: Some(51820),
            fwmark: Some(0x20),
            peers: vec![WgPeerUpdate {
                public_key: key(2),
                endpoint: Some("192.0.2.1:51820".parse().unwrap()),
                keepalive: Some(25),
                allowed_ips: Some(vec![net(1), net(2)]),
                ..Default::default()
            }],
        };
        let msgs = pack_set_device("kubespan", &u, SET_DEVICE_BUDGET);
        assert_eq!(msgs.len(), 1);
        let m = &msgs[0];
        assert_eq!(m[0], WireguardAttribute::IfName("kubespan".into()));
        assert!(m.contains(&WireguardAttribute::PrivateKey(key(1).0)));
        assert!(m.contains(&WireguardAttribute::ListenPort(51820)));
        assert!(m.contains(&WireguardAttribute::Fwmark(0x20)));
        let WireguardAttribute::Peers(p) = &m[4] else { panic!("{m:?}") };
        let d = decode_peer(&p[0]);
        assert_eq!(d.keepalive, 25);
        assert_eq!(d.endpoint, Some("192.0.2.1:51820".parse().unwrap()));
        assert_eq!(d.allowed_ips, [net(1), net(2)]);
        assert!(
            p[0].contains(&WireguardPeerAttribute::Flags(WireguardPeerFlags::ReplaceAllowedIps))
        );
    }

    #[test]
    fn device_only_update_and_removal() {
        let u = WgUpdate { fwmark: Some(7), ..Default::default() };
        let msgs = pack_set_device("wg0", &u, SET_DEVICE_BUDGET);
        assert_eq!(
            msgs,
            [vec![WireguardAttribute::IfName("wg0".into()), WireguardAttribute::Fwmark(7)]]
        );
        let u = WgUpdate {
            peers: vec![WgPeerUpdate { public_key: key(3), remove: true, ..Default::default() }],
            ..Default::default()
        };
        let peers = replay(&pack_set_device("wg0", &u, SET_DEVICE_BUDGET));
        assert_eq!(peers, [(key(3), true, vec![])]);
    }

    #[test]
    fn thousands_of_peers_split_within_budget() {
        let u = WgUpdate {
            private_key: Some(key(0)),
            peers: (1..=2000u16)
                .map(|i| WgPeerUpdate {
                    public_key: key(i),
                    keepalive: Some(25),
                    allowed_ips: Some(vec![net(u32::from(i)), net(100_000 + u32::from(i))]),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let msgs = pack_set_device("kubespan", &u, SET_DEVICE_BUDGET);
        assert!(msgs.len() > 5, "{}", msgs.len());
        for m in &msgs {
            assert!(m.as_slice().buffer_len() <= SET_DEVICE_BUDGET);
            assert_eq!(m[0], WireguardAttribute::IfName("kubespan".into()));
        }
        assert_eq!(
            msgs.iter()
                .filter(|m| m.iter().any(|a| matches!(a, WireguardAttribute::PrivateKey(_))))
                .count(),
            1
        );
        let peers = replay(&msgs);
        assert_eq!(peers.len(), 2000);
        for (i, (k, _, ips)) in peers.iter().enumerate() {
            let n = u16::try_from(i + 1).unwrap();
            assert_eq!(*k, key(n));
            assert_eq!(*ips, [net(u32::from(n)), net(100_000 + u32::from(n))]);
        }
    }

    #[test]
    fn one_peer_with_many_prefixes_continues_without_replace() {
        let ips: Vec<IpNet> = (0..5000).map(net).collect();
        let u = WgUpdate {
            peers: vec![
                WgPeerUpdate {
                    public_key: key(1),
                    allowed_ips: Some(vec![net(9)]),
                    ..Default::default()
                },
                WgPeerUpdate {
                    public_key: key(2),
                    allowed_ips: Some(ips.clone()),
                    ..Default::default()
                },
                WgPeerUpdate {
                    public_key: key(3),
                    allowed_ips: Some(vec![]),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let msgs = pack_set_device("wg0", &u, 4096);
        assert!(msgs.len() > 10);
        for m in &msgs {
            assert!(m.as_slice().buffer_len() <= 4096);
        }
        let peers = replay(&msgs);
        assert_eq!(peers.len(), 3);
        assert_eq!(peers[0].2, [net(9)]);
        assert_eq!(peers[1].2, ips);
        assert!(peers[2].2.is_empty());
    }

    #[test]
    fn dump_parts_fold_into_one_device() {
        let peer = |k: u16, ips: &[IpNet], rx: Option<u64>| {
            let mut v = vec![WireguardPeerAttribute::PublicKey(key(k).0)];
            if let Some(rx) = rx {
                v.push(WireguardPeerAttribute::RxBytes(rx));
                v.push(WireguardPeerAttribute::PresharedKey([0; 32]));
            }
            v.push(WireguardPeerAttribute::AllowedIps(ips.iter().map(encode_allowed_ip).collect()));
            WireguardPeer(v)
        };
        let part1 = vec![
            WireguardAttribute::IfIndex(3),
            WireguardAttribute::PrivateKey(key(7).0),
            WireguardAttribute::ListenPort(51820),
            WireguardAttribute::Peers(vec![
                peer(1, &[net(1)], Some(10)),
                peer(2, &[net(2)], Some(20)),
            ]),
        ];
        let part2 = vec![
            WireguardAttribute::IfIndex(3),
            WireguardAttribute::Peers(vec![peer(2, &[net(3)], None), peer(3, &[], Some(0))]),
        ];
        let dev = decode_device([part1.as_slice(), part2.as_slice()].into_iter());
        assert_eq!(dev.private_key, Some(key(7)));
        assert_eq!(dev.listen_port, 51820);
        assert_eq!(dev.peers.len(), 3);
        assert_eq!(dev.peers[1].allowed_ips, [net(2), net(3)]);
        assert_eq!(dev.peers[1].rx_bytes, 20);
        assert_eq!(dev.peers[0].preshared_key, None);
    }
}
