// SPDX-License-Identifier: Apache-2.0
//! Fuzz targets of the boot services' parsers: `tftp` and `boothttp` (below).
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
