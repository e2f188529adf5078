// SPDX-License-Identifier: Apache-2.0
//! A read-only TFTP server for the first boot stage (the iPXE binaries): RFC 1350 with option
//! negotiation (RFC 2347) for `blksize` (RFC 2348), `tsize` and `timeout` (RFC 2349).
//!
//! Read requests only, octet mode only, one directory: a file name is relative to it, made of
//! plain components (`A-Z a-z 0-9 . _ + -`, never `.` or `..`), so no name leaves the
//! directory, and what it names must be a regular file. Symbolic links that are in the
//! directory are followed: they are the administrator's (Debian's `/usr/lib/ipxe/ipxe.efi` is
//! one, to `/boot/ipxe.efi`). Each
//! transfer has its own socket and thread, at most [`MAX_TRANSFERS`] at once; a block is sent
//! at most [`MAX_SENDS`] times, and a transfer ends after [`TRANSFER_TIME`] whatever happens.

use std::fs::File;
use std::io::Read;
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const DEFAULT_ROOT: &str = "/usr/lib/ipxe";
pub const PORT: u16 = 69;
/// RFC 2347: a request with options is at most 512 bytes.
pub const MAX_REQUEST: usize = 512;
pub const DEFAULT_BLKSIZE: usize = 512;
/// RFC 2348's bounds.
pub const MIN_BLKSIZE: usize = 8;
pub const MAX_BLKSIZE: usize = 65464;
pub const MAX_TRANSFERS: usize = 32;
/// Sends of one packet (the first and four retransmits).
pub const MAX_SENDS: u32 = 5;
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);
pub const TRANSFER_TIME: Duration = Duration::from_secs(600);
const MAX_NAME: usize = 255;

const RRQ: u16 = 1;
const WRQ: u16 = 2;
const DATA: u16 = 3;
const ACK: u16 = 4;
const ERROR: u16 = 5;
const OACK: u16 = 6;

/// TFTP error codes (RFC 1350, 2347).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    Undefined = 0,
    NotFound = 1,
    Access = 2,
    Illegal = 4,
}

/// A request refused: the code and message for the ERROR packet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refused {
    pub code: Code,
    pub message: &'static str,
}

const fn refused(code: Code, message: &'static str) -> Refused {
    Refused { code, message }
}

/// A read request and the options it asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRequest {
    /// Components of the path under the root, each checked.
    pub path: Vec<String>,
    pub blksize: Option<usize>,
    /// `tsize` was asked for (RFC 2349: its value in a read request is 0).
    pub tsize: bool,
    pub timeout: Option<u8>,
}

fn component_ok(c: &str) -> bool {
    !c.is_empty()
        && c != "."
        && c != ".."
        && c.bytes().all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b))
}

/// Parse a request packet (pure: the fuzz target's subject).
pub fn parse_request(p: &[u8]) -> Result<ReadRequest, Refused> {
    if p.len() > MAX_REQUEST {
        return Err(refused(Code::Illegal, "request over 512 bytes"));
    }
    let (Some(&a), Some(&b)) = (p.first(), p.get(1)) else {
        return Err(refused(Code::Illegal, "short packet"));
    };
    match u16::from_be_bytes([a, b]) {
        RRQ => {}
        WRQ => return Err(refused(Code::Access, "read-only server")),
        _ => return Err(refused(Code::Illegal, "not a request")),
    }
    // NUL-terminated strings; the packet must end with a NUL.
    let rest = &p[2..];
    if rest.last() != Some(&0) {
        return Err(refused(Code::Illegal, "request not NUL-terminated"));
    }
    let mut fields = rest[..rest.len() - 1].split(|c| *c == 0);
    let name = fields.next().unwrap_or_default();
    let mode = fields.next().ok_or(refused(Code::Illegal, "no mode"))?;
    if !mode.eq_ignore_ascii_case(b"octet") {
        return Err(refused(Code::Illegal, "octet mode only"));
    }
    let name = std::str::from_utf8(name).map_err(|_| refused(Code::Access, "bad file name"))?;
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(refused(Code::Access, "bad file name"));
    }
    let path: Vec<String> = name.trim_start_matches('/').split('/').map(String::from).collect();
    if !path.iter().all(|c| component_ok(c)) {
        return Err(refused(Code::Access, "bad file name"));
    }
    let mut r = ReadRequest { path, blksize: None, tsize: false, timeout: None };
    let mut seen = [false; 3];
    while let Some(opt) = fields.next() {
        let val = fields.next().ok_or(refused(Code::Illegal, "option without a value"))?;
        // Unknown options are left out of the OACK (RFC 2347); a malformed value of a known
        // one too, and the first of a repeated one counts.
        let num = || -> Option<u64> {
            let s = std::str::from_utf8(val).ok()?;
            if s.is_empty() || s.len() > 10 || !s.bytes().all(|c| c.is_ascii_digit()) {
                return None;
            }
            s.parse().ok()
        };
        if opt.eq_ignore_ascii_case(b"blksize") && !seen[0] {
            seen[0] = true;
            r.blksize =
                num().filter(|n| *n as usize >= MIN_BLKSIZE).map(|n| (n as usize).min(MAX_BLKSIZE));
        } else if opt.eq_ignore_ascii_case(b"tsize") && !seen[1] {
            seen[1] = true;
            r.tsize = num() == Some(0);
        } else if opt.eq_ignore_ascii_case(b"timeout") && !seen[2] {
            seen[2] = true;
            r.timeout = num().filter(|n| (1..=255).contains(n)).map(|n| n as u8);
        }
    }
    Ok(r)
}

/// The OACK for what was accepted, or `None` when no option was (then data starts at once).
pub fn oack(r: &ReadRequest, size: u64) -> Option<Vec<u8>> {
    let mut out = OACK.to_be_bytes().to_vec();
    let mut opt = |k: &str, v: String| {
        out.extend_from_slice(k.as_bytes());
        out.push(0);
        out.extend_from_slice(v.as_bytes());
        out.push(0);
    };
    if let Some(b) = r.blksize {
        opt("blksize", b.to_string());
    }
    if r.tsize {
        opt("tsize", size.to_string());
    }
    if let Some(t) = r.timeout {
        opt("timeout", t.to_string());
    }
    (out.len() > 2).then_some(out)
}

pub fn error_packet(e: &Refused) -> Vec<u8> {
    let mut out = ERROR.to_be_bytes().to_vec();
    out.extend_from_slice(&(e.code as u16).to_be_bytes());
    out.extend_from_slice(e.message.as_bytes());
    out.push(0);
    out
}

/// The file a request names, if it is a regular file (the name's components were checked
/// by [`parse_request`], so it is under `root`).
pub fn resolve(root: &Path, r: &ReadRequest) -> Result<(File, u64), Refused> {
    let not_found = refused(Code::NotFound, "file not found");
    if !r.path.iter().all(|c| component_ok(c)) {
        return Err(refused(Code::Access, "bad file name"));
    }
    let mut p = root.to_path_buf();
    p.extend(&r.path);
    let f = File::open(&p).map_err(|_| not_found.clone())?;
    let m = f.metadata().map_err(|_| not_found.clone())?;
    if !m.is_file() {
        return Err(not_found);
    }
    Ok((f, m.len()))
}

/// What a packet from the client is, while a transfer runs.
#[derive(Debug, PartialEq, Eq)]
enum Reply {
    Ack(u16),
    Error,
    Other,
}

fn reply(p: &[u8]) -> Reply {
    match p {
        [a0, a1, a, b] if u16::from_be_bytes([*a0, *a1]) == ACK => {
            Reply::Ack(u16::from_be_bytes([*a, *b]))
        }
        [a0, a1, ..] if u16::from_be_bytes([*a0, *a1]) == ERROR => Reply::Error,
        _ => Reply::Other,
    }
}

/// How an exchange ended.
#[derive(Debug, PartialEq, Eq)]
enum Sent {
    Acked,
    /// The client sent an ERROR (UEFI firmware ends a `tsize` query this way after the OACK).
    ClientError,
    /// No acknowledgement after [`MAX_SENDS`] sends, or the transfer's time ran out.
    NoAck,
}

/// Send `packet` until the client acknowledges `block` (sends bounded, time bounded).
fn exchange(s: &UdpSocket, packet: &[u8], block: u16, timeout: Duration, until: Instant) -> Sent {
    let mut buf = [0u8; 516];
    for _ in 0..MAX_SENDS {
        if Instant::now() >= until || s.send(packet).is_err() {
            return Sent::NoAck;
        }
        let wait_until = Instant::now() + timeout;
        loop {
            let left = wait_until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let _ = s.set_read_timeout(Some(left));
            match s.recv(&mut buf) {
                Ok(n) => match reply(&buf[..n]) {
                    Reply::Ack(b) if b == block => return Sent::Acked,
                    // A late duplicate ACK: ignored, never answered with a resend (the
                    // Sorcerer's Apprentice bug, RFC 1123 §4.2.3.1).
                    Reply::Ack(_) | Reply::Other => {}
                    Reply::Error => return Sent::ClientError,
                },
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
    }
    Sent::NoAck
}

fn read_block(f: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// One transfer, on its own socket.
fn transfer(s: UdpSocket, peer: SocketAddr, root: &Path, req: &[u8]) {
    let r = match parse_request(req).and_then(|r| resolve(root, &r).map(|f| (r, f))) {
        Ok(x) => x,
        Err(e) => {
            log::info!("tftp {peer}: refused: {e}");
            let _ = s.send(&error_packet(&e));
            return;
        }
    };
    let (r, (mut f, size)) = r;
    let name = r.path.join("/");
    let until = Instant::now() + TRANSFER_TIME;
    let timeout = r.timeout.map_or(DEFAULT_TIMEOUT, |t| Duration::from_secs(u64::from(t)));
    let blksize = r.blksize.unwrap_or(DEFAULT_BLKSIZE);
    if let Some(o) = oack(&r, size) {
        match exchange(&s, &o, 0, timeout, until) {
            Sent::Acked => {}
            Sent::ClientError => {
                log::info!("tftp {peer}: {name}: the client ended after the options (size {size})");
                return;
            }
            Sent::NoAck => {
                log::info!("tftp {peer}: {name}: no acknowledgement of the options");
                return;
            }
        }
    }
    let mut packet = vec![0u8; 4 + blksize];
    let mut block: u16 = 0;
    let mut sent = 0u64;
    loop {
        // Blocks wrap at 65535 (what most clients expect of large files).
        block = block.wrapping_add(1);
        let n = match read_block(&mut f, &mut packet[4..]) {
            Ok(n) => n,
            Err(_) => {
                let _ = s.send(&error_packet(&refused(Code::Undefined, "read error")));
                return;
            }
        };
        packet[..2].copy_from_slice(&DATA.to_be_bytes());
        packet[2..4].copy_from_slice(&block.to_be_bytes());
        let how = exchange(&s, &packet[..4 + n], block, timeout, until);
        if how != Sent::Acked {
            log::info!("tftp {peer}: {name}: abandoned after {sent} bytes ({how:?})");
            return;
        }
        sent += n as u64;
        if n < blksize {
            log::info!("tftp {peer}: {name}: {sent} bytes in blocks of {blksize}");
            return;
        }
    }
}

/// Serve read requests on `sock` until `stop` is set.
pub fn serve(sock: UdpSocket, root: PathBuf, stop: Arc<AtomicBool>) {
    let local_ip = sock.local_addr().map(|a| a.ip()).ok();
    let active = Arc::new(AtomicUsize::new(0));
    let root = Arc::new(root);
    let _ = sock.set_read_timeout(Some(Duration::from_millis(200)));
    let mut buf = [0u8; MAX_REQUEST + 1];
    while !stop.load(Ordering::Relaxed) {
        let (n, peer) = match sock.recv_from(&mut buf) {
            Ok(x) => x,
            Err(_) => continue,
        };
        let req = buf[..n].to_vec();
        let bind =
            SocketAddr::new(local_ip.unwrap_or_else(|| std::net::Ipv4Addr::UNSPECIFIED.into()), 0);
        let Ok(s) = UdpSocket::bind(bind) else { continue };
        if s.connect(peer).is_err() {
            continue;
        }
        if active.fetch_add(1, Ordering::AcqRel) >= MAX_TRANSFERS {
            active.fetch_sub(1, Ordering::AcqRel);
            let _ = s.send(&error_packet(&refused(Code::Undefined, "busy; try again")));
            continue;
        }
        let (active2, root2) = (active.clone(), root.clone());
        let spawned = evloop::spawn_worker("tftp-transfer", move || {
            transfer(s, peer, &root2, &req);
            active2.fetch_sub(1, Ordering::AcqRel);
        });
        if spawned.is_err() {
            active.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rrq(parts: &[&str]) -> Vec<u8> {
        let mut p = vec![0, 1];
        for s in parts {
            p.extend_from_slice(s.as_bytes());
            p.push(0);
        }
        p
    }

    #[test]
    fn a_request_with_options() {
        let r = parse_request(&rrq(&["/undionly.kpxe", "OCTET", "blksize", "1468", "tsize", "0"]))
            .unwrap();
        assert_eq!(r.path, ["undionly.kpxe"]);
        assert_eq!((r.blksize, r.tsize, r.timeout), (Some(1468), true, None));
        let o = oack(&r, 70000).unwrap();
        assert_eq!(o, b"\x00\x06blksize\x001468\x00tsize\x0070000\x00");
        let plain = parse_request(&rrq(&["ipxe.efi", "octet"])).unwrap();
        assert_eq!(oack(&plain, 1), None);
    }

    #[test]
    fn option_values_are_bounded_and_unknown_ones_ignored() {
        let r = parse_request(&rrq(&[
            "a",
            "octet",
            "blksize",
            "99999",
            "timeout",
            "0",
            "windowsize",
            "4",
            "blksize",
            "9",
        ]))
        .unwrap();
        assert_eq!((r.blksize, r.timeout), (Some(MAX_BLKSIZE), None));
        let r = parse_request(&rrq(&["a", "octet", "blksize", "7", "tsize", "5"])).unwrap();
        assert_eq!((r.blksize, r.tsize), (None, false));
    }

    #[test]
    fn hostile_requests_are_refused() {
        for (p, code) in [
            (rrq(&["../etc/passwd", "octet"]), Code::Access),
            (rrq(&["a/../../etc/passwd", "octet"]), Code::Access),
            (rrq(&["a//b", "octet"]), Code::Access),
            (rrq(&["./a", "octet"]), Code::Access),
            (rrq(&["a\\..\\b", "octet"]), Code::Access),
            (rrq(&["", "octet"]), Code::Access),
            (rrq(&["a", "netascii"]), Code::Illegal),
            (rrq(&["a"]), Code::Illegal),
            (rrq(&["a", "octet", "blksize"]), Code::Illegal),
            (b"\x00\x01a\x00octet".to_vec(), Code::Illegal),
            ([&[0u8, 2][..], b"a\x00octet\x00"].concat(), Code::Access),
            (vec![0, 3, 0, 1], Code::Illegal),
            (vec![0], Code::Illegal),
            (rrq(&[&"a".repeat(600), "octet"]), Code::Illegal),
        ] {
            assert_eq!(parse_request(&p).map_err(|e| e.code), Err(code), "{p:?}");
        }
    }

    #[test]
    fn resolve_opens_regular_files_only() {
        let d = std::env::temp_dir().join(format!("keelson-tftp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("root/sub")).unwrap();
        std::fs::write(d.join("secret"), b"s").unwrap();
        std::fs::write(d.join("root/sub/f"), b"ok").unwrap();
        std::os::unix::fs::symlink(d.join("secret"), d.join("root/link")).unwrap();
        let root = d.join("root");
        let get = |n: &str| resolve(&root, &parse_request(&rrq(&[n, "octet"])).unwrap());
        assert_eq!(get("sub/f").unwrap().1, 2);
        assert_eq!(get("link").unwrap().1, 1, "the administrator's links are followed");
        assert_eq!(get("sub").unwrap_err().code, Code::NotFound);
        assert_eq!(get("nope").unwrap_err().code, Code::NotFound);
        let _ = std::fs::remove_dir_all(&d);
    }
}
