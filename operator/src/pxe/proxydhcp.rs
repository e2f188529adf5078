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
use dhcproto::Encodable;

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

/// iPXE's encapsulated options (175) are only looked at for these: `bus-id` (177) and the
/// rest are iPXE's business, not the proxy's.
const IPXE_ENCAP: u8 = 175;

/// What a PXE client's DHCP request says about it: the fields the proxy decides on, parsed
/// once (and logged by [`serve`]). Only requests a PXE client sends parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PxeRequest {
    pub mac: Mac,
    /// DISCOVER or REQUEST.
    pub kind: MessageType,
    /// Option 60, whole (`PXEClient:Arch:00000:UNDI:002001`).
    pub vendor_class: Vec<u8>,
    /// Option 93's first architecture (RFC 4578), `None` without the option (a BIOS ROM of
    /// before RFC 4578).
    pub arch: Option<u16>,
    /// Option 97, type 0 and the 16-byte UUID (RFC 4578 §2.3), echoed as sent; any other
    /// shape is left out (and not echoed: the fuzzer found an empty one would not be).
    pub uuid: Option<Vec<u8>>,
    /// Option 77 is `iPXE`: iPXE's own round.
    pub ipxe: bool,
    /// The sub-option codes of iPXE's option 175 (its feature list), in order.
    pub ipxe_features: Vec<u8>,
}

/// Why a request is not a PXE client's (the proxy stays silent for all of these).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotPxe {
    NotARequest,
    MessageType,
    NoPxeClientClass,
    Architecture,
}

/// The PXE fields of `req`.
pub fn parse(req: &v4::Message) -> Result<PxeRequest, NotPxe> {
    if req.opcode() != v4::Opcode::BootRequest || req.htype() != v4::HType::Eth || req.hlen() != 6 {
        return Err(NotPxe::NotARequest);
    }
    let mac = req
        .chaddr()
        .get(..6)
        .and_then(|m| <[u8; 6]>::try_from(m).ok())
        .map(Mac)
        .ok_or(NotPxe::NotARequest)?;
    let opts = req.opts();
    let kind = match opts.get(OptionCode::MessageType) {
        Some(DhcpOption::MessageType(k @ (MessageType::Discover | MessageType::Request))) => *k,
        _ => return Err(NotPxe::MessageType),
    };
    let vendor_class = match opts.get(OptionCode::ClassIdentifier) {
        Some(DhcpOption::ClassIdentifier(c)) if c.starts_with(b"PXEClient") => c.clone(),
        _ => return Err(NotPxe::NoPxeClientClass),
    };
    let arch = match opts.get(OptionCode::ClientSystemArchitecture) {
        Some(DhcpOption::ClientSystemArchitecture(a)) => Some(u16::from(*a)),
        None => None,
        Some(_) => return Err(NotPxe::Architecture),
    };
    let uuid = match opts.get(OptionCode::ClientMachineIdentifier) {
        Some(DhcpOption::ClientMachineIdentifier(id))
            if id.len() == 17 && id.first() == Some(&0) =>
        {
            Some(id.clone())
        }
        _ => None,
    };
    let ipxe =
        matches!(opts.get(OptionCode::UserClass), Some(DhcpOption::UserClass(u)) if is_ipxe(u));
    let ipxe_features = match opts.get(OptionCode::Unknown(IPXE_ENCAP)) {
        Some(DhcpOption::Unknown(u)) => sub_option_codes(u.data()),
        _ => Vec::new(),
    };
    Ok(PxeRequest { mac, kind, vendor_class, arch, uuid, ipxe, ipxe_features })
}

/// The codes of an encapsulated option's `code len data` run (RFC 2132 §8.4's layout), up to
/// the end option or the first sub-option that does not fit.
fn sub_option_codes(mut b: &[u8]) -> Vec<u8> {
    let mut codes = Vec::new();
    while let [code, rest @ ..] = b {
        match *code {
            0 => b = rest,
            255 => break,
            c => {
                let Some((&len, rest)) = rest.split_first() else { break };
                let Some(rest) = rest.get(usize::from(len)..) else { break };
                codes.push(c);
                b = rest;
            }
        }
    }
    codes
}

/// The boot file for a parsed request: the script URL for iPXE, else the first stage by
/// architecture. `None` for an architecture with no file, or a name too long for `fname`.
pub fn file_for(p: &PxeRequest, cfg: &Config) -> Option<String> {
    let file = if p.ipxe {
        format!("{}/boot/{}.ipxe", cfg.http_base, p.mac)
    } else {
        boot_file(p.arch.unwrap_or(0))?.to_owned()
    };
    // fname is 128 bytes with its NUL.
    (file.len() <= 127).then_some(file)
}

/// The answer to `req`, if it gets one; `known` says whether the table has the MAC.
pub fn answer(
    req: &v4::Message,
    known: impl Fn(&Mac) -> bool,
    cfg: &Config,
) -> Option<v4::Message> {
    let p = parse(req).ok()?;
    if !for_us(req, cfg) || !known(&p.mac) {
        return None;
    }
    reply(req, &p, cfg)
}

/// A REQUEST that names a server (option 54) is that server's: the client taking the DHCP
/// server's lease (captured from iPXE) is not asked for a boot file, and answering it would
/// only be noise next to the real ACK.
fn for_us(req: &v4::Message, cfg: &Config) -> bool {
    match req.opts().get(OptionCode::ServerIdentifier) {
        Some(DhcpOption::ServerIdentifier(s)) => *s == cfg.server,
        _ => true,
    }
}

/// The OFFER or ACK for a known machine's parsed request.
fn reply(req: &v4::Message, p: &PxeRequest, cfg: &Config) -> Option<v4::Message> {
    let file = file_for(p, cfg)?;
    let kind = if p.kind == MessageType::Discover { MessageType::Offer } else { MessageType::Ack };
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
    if let Some(id) = &p.uuid {
        o.insert(DhcpOption::ClientMachineIdentifier(id.clone()));
    }
    Some(r)
}

/// Decode a datagram: through PID 1's checked decoder (`net::dhcp4::wire`), which refuses
/// the option shapes dhcproto's decoder panics on (the `proxydhcp` fuzz target found one:
/// a rapid-commit option with a length) and catches any other panic.
pub fn decode(b: &[u8]) -> Option<v4::Message> {
    net::dhcp4::wire::decode(b).ok()
}

/// Decode a datagram and answer it (pure).
pub fn answer_bytes(b: &[u8], known: impl Fn(&Mac) -> bool, cfg: &Config) -> Option<Vec<u8>> {
    let req = decode(b)?;
    answer(&req, known, cfg)?.to_vec().ok()
}

/// What [`serve`] does with one datagram: the answer, and the line to log about it.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Not a PXE client's request (or not DHCP at all): silence, no log line.
    Ignored,
    /// A PXE client whose MAC the table does not know: silence, one log line.
    Unknown(Mac),
    /// A known machine whose request names nothing the proxy serves (an architecture
    /// without a file): silence, one log line.
    NoFile(Mac, Option<u16>),
    /// The answer and the file it names.
    Answer(Vec<u8>, Mac, String),
}

/// Decide on a datagram (pure).
pub fn handle(b: &[u8], known: impl Fn(&Mac) -> bool, cfg: &Config) -> Outcome {
    let Some(req) = decode(b) else { return Outcome::Ignored };
    let Ok(p) = parse(&req) else { return Outcome::Ignored };
    if !for_us(&req, cfg) {
        return Outcome::Ignored;
    }
    if !known(&p.mac) {
        return Outcome::Unknown(p.mac);
    }
    match reply(&req, &p, cfg).and_then(|r| r.to_vec().ok()) {
        Some(out) => Outcome::Answer(out, p.mac, file_for(&p, cfg).unwrap_or_default()),
        None => Outcome::NoFile(p.mac, p.arch),
    }
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
    let mut quiet = LogBudget::new();
    while !stop.load(Ordering::Relaxed) {
        let Ok((n, from)) = sock.recv_from(&mut buf) else { continue };
        let known = |m: &Mac| match table.machine(m) {
            Ok(found) => found.is_some(),
            Err(e) => {
                log::warn!("proxydhcp: {e}");
                false
            }
        };
        let (out, mac, file) = match handle(buf.get(..n).unwrap_or_default(), known, &cfg) {
            Outcome::Ignored => continue,
            Outcome::Unknown(mac) => {
                // Bounded: a flood of strangers costs at most a few lines a second.
                if quiet.allow() {
                    log::info!("proxydhcp: {mac} is not in the machine table; no answer");
                }
                continue;
            }
            Outcome::NoFile(mac, arch) => {
                if quiet.allow() {
                    log::info!("proxydhcp: {mac}: no boot file for architecture {arch:?}");
                }
                continue;
            }
            Outcome::Answer(out, mac, file) => (out, mac, file),
        };
        let to = if port == 67 {
            std::net::SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::BROADCAST, 68))
        } else {
            from
        };
        match sock.send_to(&out, to) {
            Ok(_) => log::info!("proxydhcp: answered {mac} ({from}, port {port}): {file}"),
            Err(e) => log::warn!("proxydhcp: sending to {to}: {e}"),
        }
    }
}

/// At most [`LogBudget::PER_SECOND`] log lines a second about refused clients.
struct LogBudget {
    second: std::time::Instant,
    lines: u32,
}

impl LogBudget {
    const PER_SECOND: u32 = 5;

    fn new() -> Self {
        LogBudget { second: std::time::Instant::now(), lines: 0 }
    }

    fn allow(&mut self) -> bool {
        if self.second.elapsed() >= Duration::from_secs(1) {
            self.second = std::time::Instant::now();
            self.lines = 0;
        }
        self.lines = self.lines.saturating_add(1);
        self.lines <= Self::PER_SECOND
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dhcproto::{Decodable, Decoder};

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

/// The proxy against DHCP traffic recorded once on the bridge of `scripts/test-pxe
/// --proxy-dhcp` and `--uefi` (`--capture`): what QEMU's iPXE ROM, OVMF's PXE client, the
/// `ipxe.efi` OVMF loaded, keelson's own DHCP client and busybox udhcpc (an unknown MAC with
/// option 60 `PXEClient`) really sent, and what the operator and dnsmasq answered.
#[cfg(test)]
pub(super) mod captures {
    use super::*;
    use dhcproto::{Decodable, Decoder};

    const VM: Mac = Mac([0x52, 0x54, 0, 0xa1, 0xb2, 0xc3]);
    const STRANGER: Mac = Mac([0x52, 0x54, 0, 0xde, 0xad, 0x01]);
    const OPERATOR: Ipv4Addr = Ipv4Addr::new(192, 168, 77, 1);
    const DNSMASQ: Ipv4Addr = Ipv4Addr::new(192, 168, 77, 2);

    /// One UDP datagram of a capture.
    pub struct Packet {
        pub src: Ipv4Addr,
        pub dport: u16,
        pub payload: Vec<u8>,
    }

    pub const IPXE_BIOS: &[u8] = include_bytes!("../../tests/data/pxe/ipxe-bios.pcap");
    pub const OVMF: &[u8] = include_bytes!("../../tests/data/pxe/ovmf.pcap");

    /// The UDP datagrams of a classic little-endian pcap of Ethernet frames (tcpdump -w).
    pub fn pcap(b: &[u8]) -> Vec<Packet> {
        assert_eq!(b[..4], [0xd4, 0xc3, 0xb2, 0xa1], "a little-endian pcap file");
        assert_eq!(u32::from_le_bytes(b[20..24].try_into().unwrap()), 1, "Ethernet frames");
        let mut out = Vec::new();
        let mut i = 24;
        while i + 16 <= b.len() {
            let incl = u32::from_le_bytes(b[i + 8..i + 12].try_into().unwrap()) as usize;
            let f = &b[i + 16..i + 16 + incl];
            i += 16 + incl;
            // IPv4, UDP.
            if f[12..14] != [8, 0] || f[23] != 17 {
                continue;
            }
            let udp = 14 + usize::from(f[14] & 15) * 4;
            let len = usize::from(u16::from_be_bytes([f[udp + 4], f[udp + 5]]));
            out.push(Packet {
                src: Ipv4Addr::new(f[26], f[27], f[28], f[29]),
                dport: u16::from_be_bytes([f[udp + 2], f[udp + 3]]),
                payload: f[udp + 8..udp + len].to_vec(),
            });
        }
        out
    }

    fn decode(b: &[u8]) -> v4::Message {
        v4::Message::decode(&mut Decoder::new(b)).unwrap()
    }

    fn mac_of(m: &v4::Message) -> Mac {
        Mac(m.chaddr()[..6].try_into().unwrap())
    }

    fn kind_of(m: &v4::Message) -> Option<MessageType> {
        match m.opts().get(OptionCode::MessageType) {
            Some(DhcpOption::MessageType(k)) => Some(*k),
            _ => None,
        }
    }

    /// The boot service's URL in a capture: the port was a free one of that run.
    fn cfg_from(replies: &[&v4::Message]) -> Config {
        let http_base = replies
            .iter()
            .find_map(|r| {
                let f = r.fname_str()?.ok()?.trim_end_matches('\0').to_owned();
                f.split_once("/boot/").map(|(base, _)| base.to_owned())
            })
            .unwrap_or_else(|| "http://192.168.77.1:8080".into());
        Config { server: OPERATOR, http_base }
    }

    /// Every request in `pkts` from the VM that the operator answered on the wire gets the
    /// same answer, byte for byte, from `handle` now; the others get none. Returns the
    /// requests answered.
    fn replay(pkts: &[Packet]) -> usize {
        let msgs: Vec<(Ipv4Addr, u16, v4::Message)> =
            pkts.iter().map(|p| (p.src, p.dport, decode(&p.payload))).collect();
        let sent: Vec<&v4::Message> =
            msgs.iter().filter(|(s, ..)| *s == OPERATOR).map(|(.., m)| m).collect();
        let cfg = cfg_from(&sent);
        let known = |m: &Mac| *m == VM;
        let mut answered = 0;
        for (i, p) in pkts.iter().enumerate() {
            if p.dport != 67 && p.dport != 4011 {
                continue;
            }
            // The operator's reply, if any, is the next packet from it with this xid.
            let xid = msgs[i].2.xid();
            let wire = pkts[i + 1..]
                .iter()
                .zip(&msgs[i + 1..])
                .find(|(q, (s, _, m))| *s == OPERATOR && m.xid() == xid && q.dport != 67)
                .map(|(q, _)| q.payload.clone());
            match (handle(&p.payload, known, &cfg), wire) {
                (Outcome::Answer(out, mac, _), Some(w)) => {
                    assert_eq!(mac, VM);
                    assert_eq!(out, w, "packet {i}: the answer sent then");
                    answered += 1;
                }
                (Outcome::Answer(..), None) => panic!("packet {i}: answered now, not then"),
                (o, Some(_)) => panic!("packet {i}: answered then, {o:?} now"),
                (_, None) => {}
            }
        }
        answered
    }

    #[test]
    fn qemu_ipxe_rom() {
        let pkts = pcap(IPXE_BIOS);
        let reqs: Vec<v4::Message> = pkts
            .iter()
            .filter(|p| p.dport == 67)
            .map(|p| decode(&p.payload))
            .filter(|m| mac_of(m) == VM)
            .collect();
        // The ROM's DISCOVER: iPXE already, on BIOS.
        let d = parse(&reqs[0]).unwrap();
        assert_eq!(d.mac, VM);
        assert_eq!(d.kind, MessageType::Discover);
        assert_eq!(d.vendor_class, b"PXEClient:Arch:00000:UNDI:002001");
        assert_eq!(d.arch, Some(0));
        // Option 97: type 0 and a UUID (QEMU's default, all zeros).
        assert_eq!(d.uuid.as_deref(), Some(&[0u8; 17][..]));
        assert!(d.ipxe, "user class iPXE");
        // Option 175: bus-id (177), version (235), then iPXE's one-byte feature flags; HTTP
        // (19) among them.
        assert_eq!(
            d.ipxe_features,
            [177, 235, 23, 34, 19, 17, 39, 25, 41, 16, 33, 21, 24, 18],
            "option 175's sub-options"
        );
        assert!(d.ipxe_features.contains(&19));
        let cfg = Config { server: OPERATOR, http_base: "http://192.168.77.1:8080".into() };
        assert_eq!(
            file_for(&d, &cfg).unwrap(),
            "http://192.168.77.1:8080/boot/52:54:00:a1:b2:c3.ipxe"
        );
        // Its REQUEST for dnsmasq's lease names dnsmasq (option 54): not the proxy's.
        let r = reqs.iter().find(|m| kind_of(m) == Some(MessageType::Request)).unwrap();
        assert_eq!(parse(r).unwrap().kind, MessageType::Request);
        assert_eq!(
            r.opts().get(OptionCode::ServerIdentifier),
            Some(&DhcpOption::ServerIdentifier(DNSMASQ))
        );
        assert_eq!(handle(&r.to_vec().unwrap(), |_| true, &cfg), Outcome::Ignored);
        // keelson's own DHCP client, later on the same MAC: not a PXE client.
        let own = reqs.iter().rev().find(|m| parse(m).is_err()).unwrap();
        assert_eq!(parse(own), Err(NotPxe::NoPxeClientClass));
        assert_eq!(handle(&own.to_vec().unwrap(), |_| true, &cfg), Outcome::Ignored);
        // Both DISCOVERs were answered then as they are now.
        assert_eq!(replay(&pkts), 2);
    }

    #[test]
    fn ovmf_pxe_then_its_ipxe() {
        let pkts = pcap(OVMF);
        let reqs: Vec<PxeRequest> = pkts
            .iter()
            .filter(|p| p.dport == 67 || p.dport == 4011)
            .filter_map(|p| parse(&decode(&p.payload)).ok())
            .filter(|r| r.mac == VM)
            .collect();
        let cfg = Config { server: OPERATOR, http_base: "http://192.168.77.1:8080".into() };
        // OVMF's own PXE client: x86-64 UEFI (option 93 = 7), UNDI 3.0, a UUID, not iPXE.
        let fw = &reqs[0];
        assert_eq!(fw.kind, MessageType::Discover);
        assert_eq!(fw.vendor_class, b"PXEClient:Arch:00007:UNDI:003000");
        assert_eq!(fw.arch, Some(7));
        assert_eq!(fw.uuid.as_ref().map(|u| (u.len(), u[0])), Some((17, 0)));
        assert!(!fw.ipxe && fw.ipxe_features.is_empty());
        assert_eq!(file_for(fw, &cfg).unwrap(), UEFI_X64_FILE);
        // Then the ipxe.efi it loaded: the same architecture, UNDI 3.1, iPXE with option 175.
        let ipxe = reqs.iter().find(|r| r.ipxe).unwrap();
        assert_eq!(ipxe.kind, MessageType::Discover);
        assert_eq!(ipxe.vendor_class, b"PXEClient:Arch:00007:UNDI:003010");
        assert_eq!(ipxe.arch, Some(7));
        assert_eq!(ipxe.ipxe_features.first(), Some(&177), "bus-id first");
        assert!(ipxe.ipxe_features.contains(&19), "HTTP");
        assert_eq!(
            file_for(ipxe, &cfg).unwrap(),
            "http://192.168.77.1:8080/boot/52:54:00:a1:b2:c3.ipxe"
        );
        // The firmware's and iPXE's DISCOVERs were answered then as they are now; their
        // REQUESTs for dnsmasq's lease were not.
        assert_eq!(replay(&pkts), 2);
    }

    #[test]
    fn an_unknown_mac_is_not_answered() {
        let pkts = pcap(IPXE_BIOS);
        let stranger: Vec<&Packet> = pkts
            .iter()
            .filter(|p| p.dport == 67 && mac_of(&decode(&p.payload)) == STRANGER)
            .collect();
        assert!(stranger.len() >= 2, "udhcpc's DISCOVERs and REQUEST");
        let cfg = Config { server: OPERATOR, http_base: "http://192.168.77.1:8080".into() };
        let d = parse(&decode(&stranger[0].payload)).unwrap();
        assert_eq!((d.arch, &d.uuid, d.ipxe), (None, &None, false), "busybox sends only 60");
        assert_eq!(handle(&stranger[0].payload, |m| *m == VM, &cfg), Outcome::Unknown(STRANGER));
        // Known, it would get the BIOS file (no option 93).
        match handle(&stranger[0].payload, |_| true, &cfg) {
            Outcome::Answer(_, _, f) => assert_eq!(f, BIOS_FILE),
            o => panic!("{o:?}"),
        }
        // Nothing from the operator on the wire for it.
        assert!(!pkts.iter().any(|p| p.src == OPERATOR && mac_of(&decode(&p.payload)) == STRANGER));
    }
}
