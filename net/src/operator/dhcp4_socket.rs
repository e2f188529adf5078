// SPDX-License-Identifier: Apache-2.0
//! The DHCPv4 client's sockets (kernel adapter).
//!
//! Until it has an address the client speaks through an `AF_PACKET` socket bound to its link:
//! the kernel drops UDP to an address the host does not have, and a broadcast from 0.0.0.0
//! cannot be sent through a UDP socket without an address. A classic BPF filter lets only
//! UDP to port 68 through, so the socket costs nothing for other traffic. Once bound,
//! RENEWING (unicast) and REBINDING (broadcast) send from the leased address through a UDP
//! socket (RFC 2131 §4.1: only a client without an address sends from 0.0.0.0);
//! the replies still arrive on the packet socket, which sees every frame of the link.

use std::mem::size_of;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use nix::errno::Errno;
use nix::sys::socket::{
    bind, sendto, setsockopt, socket, sockopt, AddressFamily, MsgFlags, SockFlag, SockType,
    SockaddrIn,
};

use super::frame;
use crate::dhcp4::{CLIENT_PORT, SERVER_PORT};

/// A socket call that failed.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {errno}")]
pub struct SocketError {
    /// What was attempted.
    pub what: &'static str,
    /// The error.
    pub errno: Errno,
}

fn err(what: &'static str) -> impl Fn(Errno) -> SocketError {
    move |errno| SocketError { what, errno }
}

const ETH_P_IP: u16 = 0x0800;

/// `ldb [9]; jeq #17; ldh [6]; jset #0x1fff (fragment); ldxb 4*([0]&0xf); ldh [x+2];
/// jeq #68; ret all; ret 0` over the IP header (the packet socket is `SOCK_DGRAM`).
const DHCP_CLIENT_FILTER: [libc::sock_filter; 9] = [
    bpf(libc::BPF_LD | libc::BPF_B | libc::BPF_ABS, 0, 0, 9),
    bpf(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, 0, 6, 17),
    bpf(libc::BPF_LD | libc::BPF_H | libc::BPF_ABS, 0, 0, 6),
    bpf(libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K, 4, 0, 0x1fff),
    bpf(libc::BPF_LDX | libc::BPF_B | libc::BPF_MSH, 0, 0, 0),
    bpf(libc::BPF_LD | libc::BPF_H | libc::BPF_IND, 0, 0, 2),
    bpf(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, 0, 1, CLIENT_PORT as u32),
    bpf(libc::BPF_RET | libc::BPF_K, 0, 0, 0xffff),
    bpf(libc::BPF_RET | libc::BPF_K, 0, 0, 0),
];

/// Accept nothing: the unicast sender's replies are read from the packet socket.
const DROP_ALL_FILTER: [libc::sock_filter; 1] = [bpf(libc::BPF_RET | libc::BPF_K, 0, 0, 0)];

const fn bpf(code: u32, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code: code as u16, jt, jf, k }
}

fn attach_filter(fd: BorrowedFd<'_>, program: &[libc::sock_filter]) -> Result<(), SocketError> {
    let prog = libc::sock_fprog { len: program.len() as u16, filter: program.as_ptr().cast_mut() };
    // SAFETY: `prog` points at `program`, which outlives the call; the kernel copies it.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            (&raw const prog).cast(),
            size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(SocketError { what: "attach BPF filter", errno: Errno::last() });
    }
    Ok(())
}

fn set_int(fd: BorrowedFd<'_>, level: i32, name: i32, value: i32) -> Result<(), Errno> {
    // SAFETY: the option value is a live `c_int` for the whole call.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&raw const value).cast(),
            size_of::<i32>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(Errno::last());
    }
    Ok(())
}

fn link_addr(ifindex: u32, protocol: u16, dest: Option<[u8; 6]>) -> libc::sockaddr_ll {
    // SAFETY: sockaddr_ll is plain old data; all zeroes is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = protocol.to_be();
    sll.sll_ifindex = ifindex as i32;
    if let Some(mac) = dest {
        sll.sll_halen = 6;
        sll.sll_addr[..6].copy_from_slice(&mac);
    }
    sll
}

/// The pre-address socket: IP datagrams to and from the link, filtered to DHCP replies.
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
    ifindex: u32,
}

impl PacketSocket {
    /// Open a packet socket on link `ifindex`.
    pub fn open(ifindex: u32) -> Result<Self, SocketError> {
        // Protocol 0 receives nothing until bind, so no frame slips in before the filter.
        // SAFETY: socket(2) with constant arguments; the result is checked.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        if raw < 0 {
            return Err(SocketError { what: "packet socket", errno: Errno::last() });
        }
        // SAFETY: `raw` is a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        attach_filter(fd.as_fd(), &DHCP_CLIENT_FILTER)?;
        // Frames from a local veth peer carry no UDP checksum yet; auxdata says which.
        set_int(fd.as_fd(), libc::SOL_PACKET, libc::PACKET_AUXDATA, 1)
            .map_err(err("PACKET_AUXDATA"))?;
        let sll = link_addr(ifindex, ETH_P_IP, None);
        // SAFETY: `sll` is a valid sockaddr_ll of the size passed.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&raw const sll).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(SocketError { what: "bind packet socket", errno: Errno::last() });
        }
        Ok(Self { fd, ifindex })
    }

    /// Broadcast `payload` as `0.0.0.0:68 → 255.255.255.255:67` to the link's broadcast MAC.
    pub fn send_broadcast(&self, payload: &[u8]) -> Result<(), SocketError> {
        let datagram = frame::broadcast_frame(payload);
        let sll = link_addr(self.ifindex, ETH_P_IP, Some([0xff; 6]));
        // SAFETY: the buffer and address are live for the call and their lengths are exact.
        let rc = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                datagram.as_ptr().cast(),
                datagram.len(),
                0,
                (&raw const sll).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(SocketError { what: "send DHCP broadcast", errno: Errno::last() });
        }
        Ok(())
    }

    /// Receive one datagram into `buf`: `Some((len, udp_checksum_ready))`, or `None` when
    /// nothing is queued.
    pub fn recv(&self, buf: &mut [u8]) -> Result<Option<(usize, bool)>, SocketError> {
        let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
        // Room for one cmsg with a tpacket_auxdata, 8-byte aligned.
        let mut control = [0u64; 8];
        // SAFETY: msghdr is plain old data; all zeroes is a valid value.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &raw mut iov;
        // The field types differ between glibc and musl.
        msg.msg_iovlen = 1 as _;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = size_of::<[u64; 8]>() as _;
        // SAFETY: every pointer in `msg` refers to a live buffer of the stated length.
        let n = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &raw mut msg, libc::MSG_TRUNC) };
        if n < 0 {
            return match Errno::last() {
                Errno::EAGAIN | Errno::EINTR => Ok(None),
                e => Err(SocketError { what: "receive DHCP frame", errno: e }),
            };
        }
        let mut checksum_ready = true;
        // SAFETY: the CMSG macros walk the control buffer the kernel filled in, within
        // `msg_controllen`; the auxdata is read unaligned.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&raw const msg);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_PACKET
                    && (*cmsg).cmsg_type == libc::PACKET_AUXDATA
                {
                    let aux: libc::tpacket_auxdata =
                        std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                    checksum_ready = aux.tp_status & libc::TP_STATUS_CSUMNOTREADY == 0;
                }
                cmsg = libc::CMSG_NXTHDR(&raw const msg, cmsg);
            }
        }
        // With MSG_TRUNC the return is the real length; a frame longer than the buffer is
        // cut off, which the IPv4 length check then rejects.
        Ok(Some((usize::try_from(n).unwrap_or(0).min(buf.len()), checksum_ready)))
    }
}

impl AsFd for PacketSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// The bound client's unicast sender: `leased address:68 → server:67` on one link.
#[derive(Debug)]
pub struct UdpSender {
    fd: OwnedFd,
    /// The address it is bound to.
    pub addr: Ipv4Addr,
}

impl UdpSender {
    /// Bind to `addr:68` on `link`. `IP_FREEBIND` lets this succeed while the address is still
    /// being added to the kernel.
    pub fn open(link: &str, addr: Ipv4Addr) -> Result<Self, SocketError> {
        let fd = socket(
            AddressFamily::Inet,
            SockType::Datagram,
            SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
            None,
        )
        .map_err(err("UDP socket"))?;
        attach_filter(fd.as_fd(), &DROP_ALL_FILTER)?;
        setsockopt(&fd, sockopt::BindToDevice, &std::ffi::OsString::from(link))
            .map_err(err("SO_BINDTODEVICE"))?;
        setsockopt(&fd, sockopt::IpFreebind, &true).map_err(err("IP_FREEBIND"))?;
        setsockopt(&fd, sockopt::ReuseAddr, &true).map_err(err("SO_REUSEADDR"))?;
        setsockopt(&fd, sockopt::Broadcast, &true).map_err(err("SO_BROADCAST"))?;
        bind(fd.as_raw_fd(), &SockaddrIn::from(SocketAddrV4::new(addr, CLIENT_PORT)))
            .map_err(err("bind DHCP client port"))?;
        Ok(Self { fd, addr })
    }

    /// Send `payload` to `server:67` (`255.255.255.255` for a broadcast from the lease).
    pub fn send_to(&self, server: Ipv4Addr, payload: &[u8]) -> Result<(), SocketError> {
        let to = SockaddrIn::from(SocketAddrV4::new(server, SERVER_PORT));
        sendto(self.fd.as_raw_fd(), payload, &to, MsgFlags::empty())
            .map_err(err("send DHCP unicast"))?;
        Ok(())
    }
}
