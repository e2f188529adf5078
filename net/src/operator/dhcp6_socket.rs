// SPDX-License-Identifier: Apache-2.0
//! The DHCPv6 client's socket (kernel adapter): UDP on the link-local address, port 546,
//! to `ff02::1:2` port 547 (RFC 8415 §7.1, §13.1). Unlike DHCPv4 an ordinary UDP socket
//! serves from the start, because the client always has its link-local address first.

use std::net::{Ipv6Addr, SocketAddrV6};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use nix::errno::Errno;
use nix::sys::socket::{
    bind, recvfrom, sendto, setsockopt, socket, sockopt, AddressFamily, MsgFlags, SockFlag,
    SockType, SockaddrIn6,
};

use super::dhcp4_socket::SocketError;

/// The client port (RFC 8415 §7.2).
pub const CLIENT_PORT: u16 = 546;
/// The server and relay port.
pub const SERVER_PORT: u16 = 547;
/// All_DHCP_Relay_Agents_and_Servers (RFC 8415 §7.1).
pub const ALL_SERVERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 1, 2);

fn err(what: &'static str) -> impl Fn(Errno) -> SocketError {
    move |errno| SocketError { what, errno }
}

/// A DHCPv6 client socket on one link.
#[derive(Debug)]
pub struct Dhcp6Socket {
    fd: OwnedFd,
    ifindex: u32,
}

impl Dhcp6Socket {
    /// Bind `[::]:546` on `link` (index `ifindex`).
    pub fn open(link: &str, ifindex: u32) -> Result<Self, SocketError> {
        let fd = socket(
            AddressFamily::Inet6,
            SockType::Datagram,
            SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
            None,
        )
        .map_err(err("UDPv6 socket"))?;
        setsockopt(&fd, sockopt::Ipv6V6Only, &true).map_err(err("IPV6_V6ONLY"))?;
        setsockopt(&fd, sockopt::BindToDevice, &std::ffi::OsString::from(link))
            .map_err(err("SO_BINDTODEVICE"))?;
        // One socket per link on the same port: each is tied to its device above.
        setsockopt(&fd, sockopt::ReuseAddr, &true).map_err(err("SO_REUSEADDR"))?;
        let any = SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, CLIENT_PORT, 0, 0);
        bind(fd.as_raw_fd(), &SockaddrIn6::from(any)).map_err(err("bind DHCPv6 client port"))?;
        Ok(Self { fd, ifindex })
    }

    /// Send `payload` to all DHCP servers on the link.
    pub fn send(&self, payload: &[u8]) -> Result<(), SocketError> {
        let to = SockaddrIn6::from(SocketAddrV6::new(ALL_SERVERS, SERVER_PORT, 0, self.ifindex));
        sendto(self.fd.as_raw_fd(), payload, &to, MsgFlags::empty())
            .map_err(err("send DHCPv6 message"))?;
        Ok(())
    }

    /// Receive one datagram into `buf`; `None` when nothing is queued.
    pub fn recv(&self, buf: &mut [u8]) -> Result<Option<usize>, SocketError> {
        match recvfrom::<SockaddrIn6>(self.fd.as_raw_fd(), buf) {
            Ok((n, _)) => Ok(Some(n)),
            Err(Errno::EAGAIN | Errno::EINTR) => Ok(None),
            Err(e) => Err(SocketError { what: "receive DHCPv6 message", errno: e }),
        }
    }
}

impl AsFd for Dhcp6Socket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
