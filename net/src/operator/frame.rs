// SPDX-License-Identifier: Apache-2.0
//! IPv4/UDP framing for DHCPv4 before the client has an address (RFC 2131 §4.1): the packet
//! socket carries whole IP datagrams, so keelson writes and checks the IP and UDP headers
//! itself. Pure, so malformed frames are unit-tested without a socket.

use std::net::Ipv4Addr;

use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{IpAddress, IpProtocol, Ipv4Packet, Ipv4Repr, UdpPacket, UdpRepr};

use crate::dhcp4::{CLIENT_PORT, SERVER_PORT};

/// TTL of our broadcasts; they never leave the link, any value above 1 would do.
const TTL: u8 = 64;

/// Why a received frame is not a DHCP reply for us.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Not a well-formed IPv4 header, a bad header checksum, or a fragment.
    #[error("malformed IPv4 header")]
    Ipv4,
    /// Not UDP.
    #[error("not UDP (protocol {0})")]
    NotUdp(u8),
    /// A short UDP header or a bad UDP checksum.
    #[error("malformed UDP datagram or bad checksum")]
    Udp,
    /// UDP, but not to the DHCP client port.
    #[error("UDP to port {0}, not {CLIENT_PORT}")]
    WrongPort(u16),
}

/// `0.0.0.0:68 → 255.255.255.255:67` carrying `payload`.
pub fn broadcast_frame(payload: &[u8]) -> Vec<u8> {
    let src = Ipv4Addr::UNSPECIFIED;
    let dst = Ipv4Addr::BROADCAST;
    let udp = UdpRepr { src_port: CLIENT_PORT, dst_port: SERVER_PORT };
    let udp_len = udp.header_len() + payload.len();
    let ip = Ipv4Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: IpProtocol::Udp,
        payload_len: udp_len,
        hop_limit: TTL,
    };
    let mut frame = vec![0u8; ip.buffer_len() + udp_len];
    let caps = ChecksumCapabilities::default();
    let mut ip_packet = Ipv4Packet::new_unchecked(&mut frame[..]);
    ip.emit(&mut ip_packet, &caps);
    let mut udp_packet = UdpPacket::new_unchecked(ip_packet.payload_mut());
    udp.emit(
        &mut udp_packet,
        &IpAddress::Ipv4(src),
        &IpAddress::Ipv4(dst),
        payload.len(),
        |buf| buf.copy_from_slice(payload),
        &caps,
    );
    frame
}

/// The DHCP payload of a received IPv4 datagram, after checking it is UDP to port 68.
///
/// `udp_checksum_ready` is false when the kernel says the UDP checksum was never computed
/// (a frame from a local veth peer with checksum offload, `TP_STATUS_CSUMNOTREADY`); such a
/// checksum is garbage by design and is not checked.
pub fn dhcp_payload(frame: &[u8], udp_checksum_ready: bool) -> Result<&[u8], FrameError> {
    let caps = ChecksumCapabilities::default();
    let ip_packet = Ipv4Packet::new_checked(frame).map_err(|_| FrameError::Ipv4)?;
    let ip = Ipv4Repr::parse(&ip_packet, &caps).map_err(|_| FrameError::Ipv4)?;
    if ip.next_header != IpProtocol::Udp {
        return Err(FrameError::NotUdp(ip.next_header.into()));
    }
    let body = ip_packet.payload();
    let udp_packet = UdpPacket::new_checked(body).map_err(|_| FrameError::Udp)?;
    let mut udp_caps = ChecksumCapabilities::default();
    if !udp_checksum_ready {
        udp_caps.udp = smoltcp::phy::Checksum::None;
    }
    let src = IpAddress::Ipv4(ip.src_addr);
    let dst = IpAddress::Ipv4(ip.dst_addr);
    let udp = UdpRepr::parse(&udp_packet, &src, &dst, &udp_caps).map_err(|_| FrameError::Udp)?;
    if udp.dst_port != CLIENT_PORT {
        return Err(FrameError::WrongPort(udp.dst_port));
    }
    Ok(udp_packet.payload())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server's reply: `src → dst`, UDP 67 → `port`, with a correct checksum.
    fn reply(payload: &[u8], port: u16) -> Vec<u8> {
        let mut f = broadcast_frame(payload);
        // Turn our broadcast into a server's reply by rewriting ports and fixing checksums.
        let src = Ipv4Addr::new(10, 0, 0, 1);
        let dst = Ipv4Addr::new(10, 0, 0, 2);
        let mut ip = Ipv4Packet::new_unchecked(&mut f[..]);
        ip.set_src_addr(src);
        ip.set_dst_addr(dst);
        ip.fill_checksum();
        let mut udp = UdpPacket::new_unchecked(ip.payload_mut());
        udp.set_src_port(SERVER_PORT);
        udp.set_dst_port(port);
        udp.fill_checksum(&IpAddress::Ipv4(src), &IpAddress::Ipv4(dst));
        f
    }

    #[test]
    fn broadcast_frame_is_a_valid_datagram_to_port_67() {
        let f = broadcast_frame(b"hello");
        assert_eq!(f.len(), 20 + 8 + 5);
        let ip = Ipv4Packet::new_checked(&f[..]).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!((ip.src_addr(), ip.dst_addr()), (Ipv4Addr::UNSPECIFIED, Ipv4Addr::BROADCAST));
        let udp = UdpPacket::new_checked(ip.payload()).unwrap();
        assert_eq!((udp.src_port(), udp.dst_port()), (68, 67));
        assert!(udp.verify_checksum(
            &IpAddress::Ipv4(Ipv4Addr::UNSPECIFIED),
            &IpAddress::Ipv4(Ipv4Addr::BROADCAST)
        ));
        assert_eq!(udp.payload(), b"hello");
    }

    #[test]
    fn reply_payload_is_extracted() {
        assert_eq!(dhcp_payload(&reply(b"offer", 68), true), Ok(&b"offer"[..]));
    }

    #[test]
    fn wrong_port_protocol_and_truncation_are_rejected() {
        assert_eq!(dhcp_payload(&reply(b"x", 69), true), Err(FrameError::WrongPort(69)));
        let mut tcp = reply(b"x", 68);
        tcp[9] = 6;
        let mut ip = Ipv4Packet::new_unchecked(&mut tcp[..]);
        ip.fill_checksum();
        assert_eq!(dhcp_payload(&tcp, true), Err(FrameError::NotUdp(6)));
        let f = reply(b"offer", 68);
        assert_eq!(dhcp_payload(&f[..10], true), Err(FrameError::Ipv4));
        assert_eq!(dhcp_payload(&f[..f.len() - 2], true), Err(FrameError::Ipv4));
        assert_eq!(dhcp_payload(&[], true), Err(FrameError::Ipv4));
    }

    #[test]
    fn checksums_are_checked_unless_the_kernel_never_computed_them() {
        let mut f = reply(b"offer", 68);
        let last = f.len() - 1;
        f[last] ^= 0xff;
        assert_eq!(dhcp_payload(&f, true), Err(FrameError::Udp));
        assert_eq!(dhcp_payload(&f, false), Ok(&f[28..]));
        let mut bad_ip = reply(b"offer", 68);
        bad_ip[10] ^= 0xff;
        assert_eq!(dhcp_payload(&bad_ip, true), Err(FrameError::Ipv4));
    }
}
