// SPDX-License-Identifier: Apache-2.0
//! Fuzz targets of the boot services' parsers: `tftp`, `boothttp` and `proxydhcp` (below).
//!
//! `tftp`: [`parse_request`] (a read request from anyone on the network) and the OACK and
//! ERROR packets made from its answer. Oracles: no panic; nothing over 512 bytes is accepted; an accepted path is non-empty
//! components of `A-Z a-z 0-9 . _ + -`, none `.` or `..`, so joined to the root it cannot leave
//! it; a negotiated block size is within RFC 2348's 8..=65464 and a timeout within 1..=255; the
//! OACK holds exactly the accepted options, each NUL-terminated; an ERROR packet is opcode 5,
//! a code, and one NUL-terminated printable message.

use testkit::fuzzkit::{run, Mutator, Target, Verdict};

use super::http::{self, Route};
use super::images::valid_version;
use super::mac::Mac;
use super::proxydhcp::{self, captures, Outcome};
use super::tftp::{error_packet, oack, parse_request, MAX_BLKSIZE, MIN_BLKSIZE};

fn rrq(parts: &[&str]) -> Vec<u8> {
    let mut p = vec![0, 1];
    for s in parts {
        p.extend_from_slice(s.as_bytes());
        p.push(0);
    }
    p
}

fn check(b: &[u8]) -> Result<Verdict, String> {
    let r = match parse_request(b) {
        Err(e) => {
            let p = error_packet(&e);
            let msg = p.get(4..p.len() - 1).ok_or("short ERROR packet")?;
            if p[..2] != [0, 5]
                || p.last() != Some(&0)
                || !msg.iter().all(|c| (b' '..=b'~').contains(c))
            {
                return Err(format!("bad ERROR packet {p:?}"));
            }
            return Ok(Verdict::Refused);
        }
        Ok(r) => r,
    };
    if b.len() > 512 {
        return Err("a request over 512 bytes was accepted".into());
    }
    for c in &r.path {
        let plain = c.bytes().all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b));
        if c.is_empty() || c == "." || c == ".." || !plain {
            return Err(format!("path component {c:?} accepted"));
        }
    }
    if r.blksize.is_some_and(|n| !(MIN_BLKSIZE..=MAX_BLKSIZE).contains(&n)) {
        return Err(format!("blksize {:?}", r.blksize));
    }
    if r.timeout == Some(0) {
        return Err("timeout 0".into());
    }
    let size = 123_456u64;
    match oack(&r, size) {
        None if r.blksize.is_some() || r.tsize || r.timeout.is_some() => {
            return Err("options accepted but no OACK".into())
        }
        None => {}
        Some(o) => {
            if o[..2] != [0, 6] || o.last() != Some(&0) {
                return Err(format!("bad OACK {o:?}"));
            }
            let fields: Vec<&[u8]> = o[2..o.len() - 1].split(|c| *c == 0).collect();
            let mut want: Vec<String> = Vec::new();
            if let Some(n) = r.blksize {
                want.extend(["blksize".into(), n.to_string()]);
            }
            if r.tsize {
                want.extend(["tsize".into(), size.to_string()]);
            }
            if let Some(t) = r.timeout {
                want.extend(["timeout".into(), t.to_string()]);
            }
            let got: Vec<String> =
                fields.iter().map(|f| String::from_utf8_lossy(f).into_owned()).collect();
            if got != want {
                return Err(format!("OACK {got:?}, accepted {want:?}"));
            }
        }
    }
    Ok(Verdict::Accepted)
}

#[test]
fn fuzz_target_tftp() {
    let seeds = vec![
        rrq(&["undionly.kpxe", "octet"]),
        rrq(&["/ipxe.efi", "octet", "blksize", "1468", "tsize", "0"]),
        rrq(&["qemu/pxe-virtio.rom", "OCTET", "timeout", "3", "windowsize", "8"]),
        rrq(&["a", "octet", "blksize", "65464", "blksize", "8", "tsize", "1"]),
        rrq(&["../etc/passwd", "netascii"]),
        b"\x00\x02x\x00octet\x00".to_vec(),
    ];
    let target = Target {
        name: "tftp",
        crate_dir: env!("CARGO_MANIFEST_DIR"),
        seeds,
        mutator: Mutator {
            dict: &[
                b"\x00",
                b"\x00\x01",
                b"octet\x00",
                b"blksize\x00",
                b"tsize\x00",
                b"timeout\x00",
                b"..",
                b"/",
                b"./",
                b"65465\x00",
                b"7\x00",
                b"4294967296\x00",
            ],
            lengths: None,
            max_len: 600,
        },
        default_iters: 200_000,
    };
    run(target, check);
}

/// `boothttp`: [`http::parse`] and [`http::range`] on a request head from anyone. Oracles: no
/// panic; a refusal is a 4xx; an accepted image route names a valid version (so
/// `images/<version>/<file>` stays in its directory) and one of the two files; a MAC prints
/// and parses back to itself; a range is inside the file for every size tried, first <= last.
fn check_http(b: &[u8]) -> Result<Verdict, String> {
    let r = match http::parse(b) {
        Err(http::Refusal(code, _)) if (400..500).contains(&code) => return Ok(Verdict::Refused),
        Err(r) => return Err(format!("refusal {r:?} is not a 4xx")),
        Ok(r) => r,
    };
    match &r.route {
        Route::Image(v, _) if !valid_version(v) || v.contains('/') => {
            return Err(format!("version {v:?} accepted"))
        }
        Route::Script(m) | Route::Config(m) if Mac::parse(&m.to_string()).ok() != Some(*m) => {
            return Err(format!("MAC {m} does not round-trip"))
        }
        _ => {}
    }
    for size in [0u64, 1, 100, 1 << 40] {
        if let Ok(Some((a, z))) = http::range(r.range.as_deref(), size) {
            if a > z || z >= size {
                return Err(format!("range {a}-{z} of {size} bytes"));
            }
        }
    }
    Ok(Verdict::Accepted)
}

#[test]
fn fuzz_target_boothttp() {
    let seeds = [
        "GET /ipxe?mac=52:54:00:12:34:56 HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET /boot/52-54-00-12-34-56.ipxe HTTP/1.0\r\n\r\n",
        "HEAD /images/v1.7.0/initramfs HTTP/1.1\r\nRange: bytes=10-99\r\n\r\n",
        "GET /images/v1/vmlinuz HTTP/1.1\r\nrange: bytes=-5\r\n\r\n",
        "GET /config/52%3a54%3a00%3a12%3a34%3a56 HTTP/1.1\r\n\r\n",
    ];
    let target = Target {
        name: "boothttp",
        crate_dir: env!("CARGO_MANIFEST_DIR"),
        seeds: seeds.iter().map(|s| s.as_bytes().to_vec()).collect(),
        mutator: Mutator {
            dict: &[
                b"\r\n",
                b"/",
                b"..",
                b"%2e",
                b"%3A",
                b"?mac=",
                b"&",
                b"Range: bytes=",
                b"-",
                b",",
                b"18446744073709551615",
                b"/images/",
                b"/vmlinuz",
            ],
            lengths: None,
            max_len: 2048,
        },
        default_iters: 100_000,
    };
    run(target, check_http);
}

/// `proxydhcp`: [`proxydhcp::handle`] (a datagram from anyone on the provisioning LAN) and
/// [`proxydhcp::parse`]. Oracles: no panic; an answer goes only to a known MAC's DHCPDISCOVER
/// or DHCPREQUEST with option 60 `PXEClient`, and is a BOOTREPLY with the request's xid and
/// chaddr, `yiaddr` 0, OFFER for a DISCOVER and ACK for a REQUEST, the client's option 97
/// echoed, and a file that is one of the three first stages or that MAC's script URL, the
/// same in `file` and option 67; an unknown MAC is reported as unknown and gets nothing;
/// option 175's sub-option codes are never 0 or 255 and at most one per two bytes.
fn check_proxydhcp(b: &[u8]) -> Result<Verdict, String> {
    use dhcproto::v4::{self, DhcpOption, MessageType, OptionCode};
    let cfg = proxydhcp::Config {
        server: std::net::Ipv4Addr::new(192, 168, 77, 1),
        http_base: "http://192.168.77.1:8080".into(),
    };
    // Known: MACs whose last byte is odd (the captured VM's, 0xc3, is).
    let known = |m: &Mac| m.0[5] & 1 == 1;
    let req = proxydhcp::decode(b);
    if let Some(p) = req.as_ref().and_then(|r| proxydhcp::parse(r).ok()) {
        if p.ipxe_features.iter().any(|c| *c == 0 || *c == 255) || p.ipxe_features.len() > 128 {
            return Err(format!("option 175 codes {:?}", p.ipxe_features));
        }
    }
    match proxydhcp::handle(b, known, &cfg) {
        Outcome::Ignored => Ok(Verdict::Refused),
        Outcome::Unknown(m) | Outcome::NoFile(m, _) if req.is_none() => {
            Err(format!("{m}: an outcome for bytes that do not decode"))
        }
        Outcome::Unknown(m) if known(&m) => Err(format!("known {m} reported unknown")),
        Outcome::NoFile(m, _) if !known(&m) => Err(format!("unknown {m} looked up")),
        Outcome::Unknown(_) | Outcome::NoFile(..) => Ok(Verdict::Refused),
        Outcome::Answer(out, mac, file) => {
            let req = req.ok_or("an answer to bytes that do not decode")?;
            let p =
                proxydhcp::parse(&req).map_err(|e| format!("answered a non-PXE request: {e:?}"))?;
            if !known(&mac) || p.mac != mac {
                return Err(format!("answered {mac}"));
            }
            let r = proxydhcp::decode(&out).ok_or("the answer does not decode")?;
            let want_kind = match p.kind {
                MessageType::Discover => MessageType::Offer,
                MessageType::Request => MessageType::Ack,
                k => return Err(format!("answered a {k:?}")),
            };
            if r.opcode() != v4::Opcode::BootReply
                || r.xid() != req.xid()
                || r.chaddr() != req.chaddr()
                || !r.yiaddr().is_unspecified()
                || r.opts().get(OptionCode::MessageType)
                    != Some(&DhcpOption::MessageType(want_kind))
            {
                return Err(format!("answer {r:?} to {req:?}"));
            }
            let echoed = match r.opts().get(OptionCode::ClientMachineIdentifier) {
                Some(DhcpOption::ClientMachineIdentifier(id)) => Some(id.clone()),
                _ => None,
            };
            if echoed != p.uuid {
                return Err(format!("option 97 {echoed:?}, sent {:?}", p.uuid));
            }
            let script = format!("{}/boot/{}.ipxe", cfg.http_base, mac);
            let files =
                [proxydhcp::BIOS_FILE, proxydhcp::UEFI_X64_FILE, proxydhcp::UEFI_ARM64_FILE];
            if !(files.contains(&file.as_str()) || file == script) {
                return Err(format!("file {file:?}"));
            }
            let o67 = match r.opts().get(OptionCode::BootfileName) {
                Some(DhcpOption::BootfileName(f)) => f.clone(),
                _ => Vec::new(),
            };
            let fname = r.fname().unwrap_or_default();
            let fname = fname.split(|c| *c == 0).next().unwrap_or_default();
            if o67 != file.as_bytes() || fname != file.as_bytes() {
                return Err(format!("file {file:?}, option 67 {o67:?}, fname {fname:?}"));
            }
            Ok(Verdict::Accepted)
        }
    }
}

#[test]
fn fuzz_target_proxydhcp() {
    // Every request the captures hold (iPXE, OVMF, ipxe.efi, keelson, udhcpc).
    let seeds: Vec<Vec<u8>> = [captures::IPXE_BIOS, captures::OVMF]
        .iter()
        .flat_map(|c| captures::pcap(c))
        .filter(|p| p.dport == 67 || p.dport == 4011)
        .map(|p| p.payload)
        .collect();
    assert!(seeds.len() >= 8, "the captures' requests");
    let target = Target {
        name: "proxydhcp",
        crate_dir: env!("CARGO_MANIFEST_DIR"),
        seeds,
        mutator: Mutator {
            dict: &[
                b"\x63\x82\x53\x63",
                b"\x35\x01\x01",
                b"\x35\x01\x03",
                b"\x3c\x09PXEClient",
                b"\x5d\x02\x00\x07",
                b"\x5d\x02\x00\x0b",
                b"\x5d\x01\x00",
                b"\x4d\x04iPXE",
                b"\x61\x11\x00",
                b"\xaf\x03\x13\x01\x01",
                b"\x36\x04\xc0\xa8\x4d\x01",
                b"\xff",
            ],
            lengths: None,
            max_len: 1500,
        },
        default_iters: 50_000,
    };
    run(target, check_proxydhcp);
}
