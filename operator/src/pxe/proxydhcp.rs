// SPDX-License-Identifier: Apache-2.0
//! proxyDHCP (PXE specification 2.1, §2.2.3; RFC 4578's options): answers PXE clients next to
//! the network's own DHCP server, giving no address (yiaddr 0), only where to boot from.
//!
//! - A DHCPDISCOVER or DHCPREQUEST whose vendor class (option 60) starts with `PXEClient`,
//!   from a MAC the machine table knows, gets an OFFER (for a DISCOVER) or an ACK (for a
//!   REQUEST, as on port 4011) from this host (siaddr and option 54), carrying option 60
//!   `PXEClient`, the client's option 97 echoed, option 43 telling the ROM to take the boot
//!   file from this packet (PXE_DISCOVERY_CONTROL = 8), and the boot file by architecture
//!   (option 93): 0 (BIOS) `undionly.kpxe`, 7 and 9 (x86-64 UEFI) `ipxe.efi`, 11 (arm64 UEFI)
//!   `snp.efi`.
//! - A request whose user class (option 77) is `iPXE` is iPXE's own second round: its boot
//!   file is the HTTP script URL of that MAC.
//! - Anything else (unknown MACs, other clients, other architectures) gets no answer at all,
//!   so the network's DHCP server and other boot servers are left alone.
//!
//! This module is pure: the socket side is [`serve`].

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use dhcproto::v4::{self, DhcpOption, MessageType, OptionCode};
use dhcproto::{Decodable, Decoder, Encodable};

use super::mac::Mac;
use super::machines::MachineTable;

pub const BIOS_FILE: &str = "undionly.kpxe";
pub const UEFI_X64_FILE: &str = "ipxe.efi";
pub const UEFI_ARM64_FILE: &str = "snp.efi";

/// What the answers point at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// This host, on the client's network: siaddr (the TFTP server) and the server ID.
    pub server: Ipv4Addr,
    /// The HTTP boot service's URL (no trailing slash).
    pub http_base: String,
}

/// The first-stage file for an option-93 architecture.
pub fn boot_file(arch: u16) -> Option<&'static str> {
    match arch {
        0 => Some(BIOS_FILE),
        7 | 9 => Some(UEFI_X64_FILE),
        11 => Some(UEFI_ARM64_FILE),
        _ => None,
    }
}

/// iPXE sends its user class as the bare string; RFC 3004's form is length-prefixed.
fn is_ipxe(user_class: &[u8]) -> bool {
    user_class == b"iPXE" || user_class.get(1..).is_some_and(|r| r.starts_with(b"iPXE"))
}

/// The answer to `req`, if it gets one; `known` says whether the table has the MAC.
pub fn answer(
    req: &v4::Message,
    known: impl Fn(&Mac) -> bool,
    cfg: &Config,
) -> Option<v4::Message> {
    if req.opcode() != v4::Opcode::BootRequest || req.htype() != v4::HType::Eth || req.hlen() != 6 {
        return None;
    }
    let mac = Mac(req.chaddr().get(..6)?.try_into().ok()?);
    let opts = req.opts();
    let kind = match opts.get(OptionCode::MessageType) {
        Some(DhcpOption::MessageType(MessageType::Discover)) => MessageType::Offer,
        Some(DhcpOption::MessageType(MessageType::Request)) => MessageType::Ack,
        _ => return None,
    };
    match opts.get(OptionCode::ClassIdentifier) {
        Some(DhcpOption::ClassIdentifier(c)) if c.starts_with(b"PXEClient") => {}
        _ => return None,
    }
    if !known(&mac) {
        return None;
    }
    let ipxe =
        matches!(opts.get(OptionCode::UserClass), Some(DhcpOption::UserClass(u)) if is_ipxe(u));
    let file = if ipxe {
        format!("{}/boot/{}.ipxe", cfg.http_base, mac)
    } else {
        let arch = match opts.get(OptionCode::ClientSystemArchitecture) {
            Some(DhcpOption::ClientSystemArchitecture(a)) => u16::from(*a),
            // No option 93: a BIOS ROM of before RFC 4578.
            None => 0,
            _ => return None,
        };
        boot_file(arch)?.to_owned()
    };
    // fname is 128 bytes with its NUL.
    if file.len() > 127 {
        return None;
    }
    let mut r = v4::Message::default();
    r.set_opcode(v4::Opcode::BootReply)
        .set_htype(v4::HType::Eth)
        .set_xid(req.xid())
        .set_flags(req.flags())
        .set_chaddr(req.chaddr())
        .set_giaddr(req.giaddr())
        .set_yiaddr(Ipv4Addr::UNSPECIFIED)
        .set_siaddr(cfg.server)
        .set_fname_str(&file);
    let o = r.opts_mut();
    o.insert(DhcpOption::MessageType(kind));
    o.insert(DhcpOption::ServerIdentifier(cfg.server));
    o.insert(DhcpOption::ClassIdentifier(b"PXEClient".to_vec()));
    // PXE_DISCOVERY_CONTROL (6) = 8: boot the file named in this packet, no discovery.
    o.insert(DhcpOption::VendorExtensions(vec![6, 1, 8, 255]));
    o.insert(DhcpOption::BootfileName(file.into_bytes()));
    if let Some(DhcpOption::ClientMachineIdentifier(id)) =
        opts.get(OptionCode::ClientMachineIdentifier)
    {
        o.insert(DhcpOption::ClientMachineIdentifier(id.clone()));
    }
    Some(r)
}

/// Decode a datagram and answer it (pure; hostile bytes are refused by dhcproto's decoder).
pub fn answer_bytes(b: &[u8], known: impl Fn(&Mac) -> bool, cfg: &Config) -> Option<Vec<u8>> {
    let req = v4::Message::decode(&mut Decoder::new(b)).ok()?;
    answer(&req, known, cfg)?.to_vec().ok()
}

#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error("--proxy-dhcp {0}: no IPv4 address on that interface")]
    NoAddress(String),
    #[error("--proxy-dhcp {0}: {1}: {2}")]
    Sys(String, &'static str, nix::Error),
}

/// The first IPv4 address of `iface`.
pub fn iface_addr(iface: &str) -> Result<Ipv4Addr, SocketError> {
    let addrs =
        nix::ifaddrs::getifaddrs().map_err(|e| SocketError::Sys(iface.into(), "getifaddrs", e))?;
    addrs
        .filter(|a| a.interface_name == iface)
        .find_map(|a| a.address.and_then(|s| s.as_sockaddr_in().map(|s| s.ip())))
        .ok_or_else(|| SocketError::NoAddress(iface.into()))
}

/// A UDP socket on `addr:port` that sees only `iface`'s traffic and may broadcast.
pub fn socket(iface: &str, addr: Ipv4Addr, port: u16) -> Result<UdpSocket, SocketError> {
    use nix::sys::socket::{
        bind, setsockopt, socket, sockopt, AddressFamily, SockFlag, SockType, SockaddrIn,
    };
    use std::os::fd::AsRawFd;
    let e = |what| move |err| SocketError::Sys(iface.into(), what, err);
    let fd = socket(AddressFamily::Inet, SockType::Datagram, SockFlag::SOCK_CLOEXEC, None)
        .map_err(e("socket"))?;
    setsockopt(&fd, sockopt::BindToDevice, &std::ffi::OsString::from(iface))
        .map_err(e("SO_BINDTODEVICE"))?;
    setsockopt(&fd, sockopt::ReuseAddr, &true).map_err(e("SO_REUSEADDR"))?;
    setsockopt(&fd, sockopt::Broadcast, &true).map_err(e("SO_BROADCAST"))?;
    bind(fd.as_raw_fd(), &SockaddrIn::from(SocketAddrV4::new(addr, port))).map_err(e("bind"))?;
    Ok(UdpSocket::from(fd))
}

/// Serve on `sock` (port 67 or 4011, bound to the interface) until `stop` is set. Answers to
/// port 67 go to the broadcast address (the client has no address yet); answers on 4011 go
/// back to the sender.
pub fn serve(sock: UdpSocket, table: Arc<dyn MachineTable>, cfg: Config, stop: Arc<AtomicBool>) {
    let _ = sock.set_read_timeout(Some(Duration::from_millis(200)));
    let port = sock.local_addr().map(|a| a.port()).unwrap_or(67);
    let mut buf = [0u8; 1500];
    while !stop.load(Ordering::Relaxed) {
        let Ok((n, from)) = sock.recv_from(&mut buf) else { continue };
        let known = |m: &Mac| match table.machine(m) {
            Ok(found) => found.is_some(),
            Err(e) => {
                log::warn!("proxydhcp: {e}");
                false
            }
        };
        let Some(out) = answer_bytes(&buf[..n], known, &cfg) else { continue };
        let to = if port == 67 {
            std::net::SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::BROADCAST, 68))
        } else {
            from
        };
        match sock.send_to(&out, to) {
            Ok(_) => log::info!("proxydhcp: answered {from} on port {port}"),
            Err(e) => log::warn!("proxydhcp: sending to {to}: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: [u8; 6] = [0x52, 0x54, 0, 0x12, 0x34, 0x56];

    fn cfg() -> Config {
        Config { server: Ipv4Addr::new(10, 0, 2, 2), http_base: "http://10.0.2.2:8080".into() }
    }

    /// A request shaped like QEMU's iPXE ROM sends (options 53, 60, 93, 94, 97; 77 on
    /// iPXE's own round), built and encoded, then decoded as the server would.
    fn request(
        kind: MessageType,
        arch: Option<u16>,
        user_class: Option<&[u8]>,
        mac: [u8; 6],
    ) -> Vec<u8> {
        let mut m = v4::Message::default();
        m.set_opcode(v4::Opcode::BootRequest)
            .set_htype(v4::HType::Eth)
            .set_xid(0x1234_5678)
            .set_chaddr(&mac);
        m.set_flags(v4::Flags::default().set_broadcast());
        let o = m.opts_mut();
        o.insert(DhcpOption::MessageType(kind));
        o.insert(DhcpOption::ClassIdentifier(b"PXEClient:Arch:00000:UNDI:002001".to_vec()));
        if let Some(a) = arch {
            o.insert(DhcpOption::ClientSystemArchitecture(a.into()));
        }
        o.insert(DhcpOption::ClientNetworkInterface(1, 2, 1));
        o.insert(DhcpOption::ClientMachineIdentifier(vec![0; 17]));
        if let Some(u) = user_class {
            o.insert(DhcpOption::UserClass(u.to_vec()));
        }
        m.to_vec().unwrap()
    }

    fn reply(b: &[u8]) -> Option<v4::Message> {
        let out = answer_bytes(b, |m| m.0 == MAC, &cfg())?;
        Some(v4::Message::decode(&mut Decoder::new(&out)).unwrap())
    }

    fn fname(m: &v4::Message) -> String {
        let o = match m.opts().get(OptionCode::BootfileName) {
            Some(DhcpOption::BootfileName(f)) => String::from_utf8(f.clone()).unwrap(),
            _ => panic!("no option 67"),
        };
        assert_eq!(
            m.fname_str().unwrap().unwrap().trim_end_matches('\0'),
            o,
            "fname and option 67 agree"
        );
        o
    }

    #[test]
    fn a_bios_rom_gets_undionly_and_no_address() {
        let r = reply(&request(MessageType::Discover, Some(0), None, MAC)).unwrap();
        assert_eq!(r.opcode(), v4::Opcode::BootReply);
        assert_eq!(r.xid(), 0x1234_5678);
        assert_eq!(r.chaddr(), MAC);
        assert!(r.flags().broadcast());
        assert_eq!((r.yiaddr(), r.siaddr()), (Ipv4Addr::UNSPECIFIED, Ipv4Addr::new(10, 0, 2, 2)));
        assert_eq!(
            r.opts().get(OptionCode::MessageType),
            Some(&DhcpOption::MessageType(MessageType::Offer))
        );
        assert_eq!(
            r.opts().get(OptionCode::ServerIdentifier),
            Some(&DhcpOption::ServerIdentifier(Ipv4Addr::new(10, 0, 2, 2)))
        );
        assert_eq!(
            r.opts().get(OptionCode::ClassIdentifier),
            Some(&DhcpOption::ClassIdentifier(b"PXEClient".to_vec()))
        );
        assert_eq!(
            r.opts().get(OptionCode::ClientMachineIdentifier),
            Some(&DhcpOption::ClientMachineIdentifier(vec![0; 17]))
        );
        assert!(
            r.opts().get(OptionCode::SubnetMask).is_none()
                && r.opts().get(OptionCode::Router).is_none()
        );
        assert_eq!(fname(&r), "undionly.kpxe");
        // No option 93 at all: a BIOS ROM too.
        assert_eq!(
            fname(&reply(&request(MessageType::Discover, None, None, MAC)).unwrap()),
            "undionly.kpxe"
        );
    }

    #[test]
    fn the_boot_file_follows_the_architecture() {
        for (arch, file) in [(7, "ipxe.efi"), (9, "ipxe.efi"), (11, "snp.efi")] {
            assert_eq!(
                fname(&reply(&request(MessageType::Discover, Some(arch), None, MAC)).unwrap()),
                file
            );
        }
        assert!(
            reply(&request(MessageType::Discover, Some(6), None, MAC)).is_none(),
            "EFI IA32: none"
        );
        // A REQUEST (port 4011 or the second round) gets an ACK.
        let r = reply(&request(MessageType::Request, Some(7), None, MAC)).unwrap();
        assert_eq!(
            r.opts().get(OptionCode::MessageType),
            Some(&DhcpOption::MessageType(MessageType::Ack))
        );
    }

    #[test]
    fn ipxe_gets_the_script_url() {
        let r = reply(&request(MessageType::Discover, Some(0), Some(b"iPXE"), MAC)).unwrap();
        assert_eq!(fname(&r), "http://10.0.2.2:8080/boot/52:54:00:12:34:56.ipxe");
        let r = reply(&request(MessageType::Request, Some(9), Some(b"\x04iPXE"), MAC)).unwrap();
        assert_eq!(fname(&r), "http://10.0.2.2:8080/boot/52:54:00:12:34:56.ipxe");
    }

    #[test]
    fn strangers_get_nothing() {
        let mut other = MAC;
        other[5] = 0x57;
        assert!(reply(&request(MessageType::Discover, Some(0), None, other)).is_none());
        // Not a PXE client.
        let mut m = v4::Message::decode(&mut Decoder::new(&request(
            MessageType::Discover,
            Some(0),
            None,
            MAC,
        )))
        .unwrap();
        m.opts_mut().insert(DhcpOption::ClassIdentifier(b"MSFT 5.0".to_vec()));
        assert!(answer(&m, |_| true, &cfg()).is_none());
        m.opts_mut().remove(OptionCode::ClassIdentifier);
        assert!(answer(&m, |_| true, &cfg()).is_none());
        // Other message types, replies, garbage.
        assert!(reply(&request(MessageType::Inform, Some(0), None, MAC)).is_none());
        assert!(reply(&request(MessageType::Release, Some(0), None, MAC)).is_none());
        let mut m = v4::Message::decode(&mut Decoder::new(&request(
            MessageType::Discover,
            Some(0),
            None,
            MAC,
        )))
        .unwrap();
        m.set_opcode(v4::Opcode::BootReply);
        assert!(answer(&m, |_| true, &cfg()).is_none());
        assert!(answer_bytes(b"\x01\x01\x06", |_| true, &cfg()).is_none());
        // A script URL that would not fit fname is not sent cut.
        let long =
            Config { server: cfg().server, http_base: format!("http://{}", "h".repeat(120)) };
        let b = request(MessageType::Discover, Some(0), Some(b"iPXE"), MAC);
        assert!(answer_bytes(&b, |_| true, &long).is_none());
    }
}
