// SPDX-License-Identifier: Apache-2.0
//! Announcing a VIP that just moved to this node, so neighbours update their caches now
//! rather than when their old entry times out:
//!
//! - IPv4: gratuitous ARP, both as a request and as a reply (RFC 5227 §3 recommends the
//!   request; some hosts and switches only learn from replies), sender = target = the VIP;
//! - IPv6: an unsolicited Neighbor Advertisement to all nodes with the Override flag
//!   (RFC 4861 §7.2.6), so caches replace the old holder's link-layer address.
//!
//! Each announcement is repeated [`REPEATS`] times, [`INTERVAL`] apart (at 0, 1 and 2 s),
//! because one frame can be lost (Talos sends one ARP request and no NA).
//!
//! Frames are built here without I/O ([`arp`], [`neighbor_advert`]); [`Announcer`] sends
//! them on a packet socket, where the kernel adds the Ethernet header.

use std::mem::size_of;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use nix::errno::Errno;
use smoltcp::wire::{Icmpv6Packet, IpProtocol, Ipv6Packet, Ipv6Repr};

/// How many times each announcement goes out.
pub const REPEATS: u32 = 3;
/// The pause between repeats.
pub const INTERVAL: Duration = Duration::from_secs(1);

const ETH_P_ARP: u16 = 0x0806;
const ETH_P_IPV6: u16 = 0x86dd;
const BROADCAST: [u8; 6] = [0xff; 6];
/// The Ethernet address of ff02::1 (RFC 2464 §7).
const ALL_NODES_MAC: [u8; 6] = [0x33, 0x33, 0, 0, 0, 1];
const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

/// A failed send.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {errno}")]
pub struct AnnounceError {
    what: &'static str,
    errno: Errno,
}

/// ARP over Ethernet for IPv4 (RFC 826): hardware type 1, protocol 0x0800, lengths 6 and 4.
const ARP_HEADER: [u8; 6] = [0, 1, 0x08, 0x00, 6, 4];
/// ICMPv6 Neighbor Advertisement (RFC 4861 §4.4).
const NA_TYPE: u8 = 136;
/// The Override flag in the NA's flags word.
const NA_OVERRIDE: u8 = 0x20;
/// The Target Link-Layer Address option, one 8-byte unit long.
const OPT_TARGET_LLADDR: u8 = 2;

/// A gratuitous ARP for `vip` from `mac` (28 bytes, the kernel adds the Ethernet header): a
/// request (target hardware address zero), or a reply (target hardware address broadcast,
/// as `arping -A` sends it). Sender and target protocol address are both the VIP.
pub fn arp(vip: Ipv4Addr, mac: [u8; 6], reply: bool) -> Vec<u8> {
    let mut f = Vec::with_capacity(28);
    f.extend_from_slice(&ARP_HEADER);
    f.extend_from_slice(&(if reply { 2u16 } else { 1u16 }).to_be_bytes());
    f.extend_from_slice(&mac);
    f.extend_from_slice(&vip.octets());
    f.extend_from_slice(&if reply { BROADCAST } else { [0; 6] });
    f.extend_from_slice(&vip.octets());
    f
}

/// An unsolicited Neighbor Advertisement of `vip` at `mac`, from `vip` to ff02::1, hop limit
/// 255, Override set, Solicited and Router clear, with the target link-layer address option.
pub fn neighbor_advert(vip: Ipv6Addr, mac: [u8; 6]) -> Vec<u8> {
    let mut icmp = Vec::with_capacity(32);
    icmp.extend_from_slice(&[NA_TYPE, 0, 0, 0, NA_OVERRIDE, 0, 0, 0]);
    icmp.extend_from_slice(&vip.octets());
    icmp.extend_from_slice(&[OPT_TARGET_LLADDR, 1]);
    icmp.extend_from_slice(&mac);
    let ip = Ipv6Repr {
        src_addr: vip,
        dst_addr: ALL_NODES,
        next_header: IpProtocol::Icmpv6,
        payload_len: icmp.len(),
        hop_limit: 255,
    };
    let mut buf = vec![0u8; ip.buffer_len() + icmp.len()];
    let mut packet = Ipv6Packet::new_unchecked(&mut buf[..]);
    ip.emit(&mut packet);
    packet.payload_mut().copy_from_slice(&icmp);
    Icmpv6Packet::new_unchecked(packet.payload_mut()).fill_checksum(&vip, &ALL_NODES);
    buf
}

/// When the repeats of one announcement are due; pure, driven by the caller's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    start: Duration,
    sent: u32,
    repeats: u32,
}

impl Schedule {
    /// An announcement starting at `now`.
    pub fn new(now: Duration) -> Self {
        Self::repeating(now, REPEATS)
    }

    /// An announcement starting at `now`, sent `repeats` times (Talos sends one).
    pub fn repeating(now: Duration, repeats: u32) -> Self {
        Self { start: now, sent: 0, repeats }
    }

    /// When the next repeat is due (`None` when all went out).
    pub fn deadline(&self) -> Option<Duration> {
        (self.sent < self.repeats).then(|| self.start + INTERVAL * self.sent)
    }

    /// Is a repeat due at `now`? Counts it as sent. A late caller sends one, not a burst.
    pub fn due(&mut self, now: Duration) -> bool {
        match self.deadline() {
            Some(t) if now >= t => {
                // Skip the repeats the caller overslept; the next one is a full interval on.
                let behind = u32::try_from(
                    (now.saturating_sub(self.start)).as_millis() / INTERVAL.as_millis().max(1),
                )
                .unwrap_or(self.repeats);
                self.sent =
                    behind.saturating_add(1).max(self.sent.saturating_add(1)).min(self.repeats);
                true
            }
            _ => false,
        }
    }
}

/// A packet socket on one link that sends announcements (it receives nothing).
#[derive(Debug)]
pub struct Announcer {
    fd: OwnedFd,
    ifindex: u32,
    mac: [u8; 6],
}

impl Announcer {
    /// A sender on link `ifindex` whose hardware address is `mac`.
    pub fn open(ifindex: u32, mac: [u8; 6]) -> Result<Self, AnnounceError> {
        // Protocol 0: the socket is never bound to a protocol, so nothing is queued to it.
        // SAFETY: socket(2) with constant arguments; the result is checked.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        if raw < 0 {
            return Err(AnnounceError { what: "packet socket", errno: Errno::last() });
        }
        // SAFETY: `raw` is a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        Ok(Self { fd, ifindex, mac })
    }

    /// One round for `vip`: two ARP frames for IPv4, one NA for IPv6.
    pub fn announce(&self, vip: IpAddr) -> Result<(), AnnounceError> {
        match vip {
            IpAddr::V4(v4) => {
                self.send(ETH_P_ARP, BROADCAST, &arp(v4, self.mac, false))?;
                self.send(ETH_P_ARP, BROADCAST, &arp(v4, self.mac, true))
            }
            IpAddr::V6(v6) => self.send(ETH_P_IPV6, ALL_NODES_MAC, &neighbor_advert(v6, self.mac)),
        }
    }

    fn send(&self, protocol: u16, dest: [u8; 6], payload: &[u8]) -> Result<(), AnnounceError> {
        // SAFETY: sockaddr_ll is plain old data; all zeroes is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = protocol.to_be();
        sll.sll_ifindex = i32::try_from(self.ifindex).unwrap_or(0);
        sll.sll_halen = 6;
        sll.sll_addr[..6].copy_from_slice(&dest);
        // SAFETY: the buffer and address are live for the call and their lengths are exact.
        let rc = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                payload.as_ptr().cast(),
                payload.len(),
                0,
                (&raw const sll).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(AnnounceError { what: "send announcement", errno: Errno::last() });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];

    #[test]
    fn gratuitous_arp_request_and_reply() {
        let vip = Ipv4Addr::new(10, 5, 0, 100);
        let req = arp(vip, MAC, false);
        assert_eq!(
            req,
            [&[0, 1, 8, 0, 6, 4, 0, 1][..], &MAC, &[10, 5, 0, 100], &[0; 6], &[10, 5, 0, 100],]
                .concat()
        );
        let rep = arp(vip, MAC, true);
        assert_eq!(rep[6..8], [0, 2]);
        assert_eq!(rep[18..24], BROADCAST);
        assert_eq!(
            (rep[14..18].to_vec(), rep[24..28].to_vec()),
            (vec![10, 5, 0, 100], vec![10, 5, 0, 100])
        );
    }

    #[test]
    fn unsolicited_na_has_override_and_a_valid_checksum() {
        let vip: Ipv6Addr = "2001:db8::100".parse().unwrap();
        let f = neighbor_advert(vip, MAC);
        let ip = Ipv6Packet::new_checked(&f[..]).unwrap();
        assert_eq!(ip.hop_limit(), 255);
        assert_eq!(ip.dst_addr(), ALL_NODES);
        assert_eq!(ip.next_header(), IpProtocol::Icmpv6);
        let icmp = Icmpv6Packet::new_checked(ip.payload()).unwrap();
        assert!(icmp.verify_checksum(&vip, &ALL_NODES));
        let body = ip.payload();
        assert_eq!(body.len(), 32);
        assert_eq!(body[0], 136);
        // Override only: not Router, not Solicited (it is unsolicited, to a multicast group).
        assert_eq!(body[4..8], [0x20, 0, 0, 0]);
        assert_eq!(body[8..24], vip.octets());
        assert_eq!(body[24..32], [&[2, 1][..], &MAC].concat()[..]);
    }

    #[test]
    fn three_repeats_a_second_apart_and_no_burst_when_late() {
        let t = Duration::from_millis;
        let mut s = Schedule::new(t(500));
        assert_eq!(s.deadline(), Some(t(500)));
        assert!(s.due(t(500)));
        assert!(!s.due(t(1400)));
        assert_eq!(s.deadline(), Some(t(1500)));
        assert!(s.due(t(1500)));
        assert!(s.due(t(2600)));
        assert_eq!(s.deadline(), None);
        assert!(!s.due(t(9000)));
        // Woken 10 s late: one frame, not three.
        let mut s = Schedule::new(t(0));
        assert!(s.due(t(10_000)));
        assert!(!s.due(t(10_000)));
        assert_eq!(s.deadline(), None);
    }
}
