// SPDX-License-Identifier: Apache-2.0
//! DNS servers and search domains from Router Advertisements: the RDNSS (type 25) and DNSSL
//! (type 31) options of RFC 8106, as the kernel hands them to userspace. The kernel handles
//! the RA itself (addresses, routes) and forwards these options over rtnetlink, one
//! `RTM_NEWNDUSEROPT` message per RA on multicast group `RTNLGRP_ND_USEROPT`: a
//! `struct nduseroptmsg` header (family, options length, ifindex, ICMPv6 type and code), the
//! options as they were on the wire, then attributes (`NDUSEROPT_SRCADDR`, the router).
//!
//! Pure: bytes in, a [`RaDns`] out. Every length is checked against the buffer it lives in,
//! and what is kept is bounded ([`MAX_SERVERS`], [`MAX_DOMAINS`]), so a hostile RA costs a
//! log line, never memory.

use std::net::Ipv6Addr;

use thiserror::Error;

/// ICMPv6 Router Advertisement (RFC 4861 §4.2).
pub const ICMPV6_ROUTER_ADVERTISEMENT: u8 = 134;
/// Recursive DNS Server option (RFC 8106 §5.1).
pub const OPT_RDNSS: u8 = 25;
/// DNS Search List option (RFC 8106 §5.2).
pub const OPT_DNSSL: u8 = 31;
/// `sizeof(struct nduseroptmsg)`: family, pad, opts_len (u16), ifindex (i32), type, code,
/// pad (u16), pad (u32).
pub const NDUSEROPT_HEADER: usize = 16;
/// Servers kept from one RA (glibc's resolver reads three; a few spare for other links).
pub const MAX_SERVERS: usize = 8;
/// Search domains kept from one RA (glibc reads six).
pub const MAX_DOMAINS: usize = 6;
/// A domain name's longest text form (RFC 1035 §2.3.4: 255 octets on the wire).
const MAX_NAME: usize = 253;

/// Why an ND user option message was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RaDnsError {
    /// Shorter than `struct nduseroptmsg`.
    #[error("ND user option message of {0} bytes is shorter than its header")]
    ShortHeader(usize),
    /// The header's family is not AF_INET6.
    #[error("ND user option message for address family {0}, not IPv6")]
    Family(u8),
    /// The header's options length runs past the message.
    #[error("ND user options of {len} bytes run past the message ({left} bytes left)")]
    OptionsLength {
        /// The header's options length.
        len: usize,
        /// The bytes after the header.
        left: usize,
    },
    /// An option's length field is zero or runs past the options (RFC 4861 §4.6: such an
    /// RA is discarded whole).
    #[error("ND option {kind} at byte {at}: length {len} (units of 8 bytes) is invalid")]
    OptionLength {
        /// The option's type.
        kind: u8,
        /// Its offset in the options.
        at: usize,
        /// Its length field.
        len: u8,
    },
}

/// One DNS server or search domain, and how long the router vouches for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timed<T> {
    /// The server or domain.
    pub value: T,
    /// Seconds; 0 means withdraw it now, `u32::MAX` means for ever (RFC 8106 §5.1).
    pub lifetime: u32,
}

/// What one RA said about DNS.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RaDns {
    /// The interface it arrived on.
    pub ifindex: i32,
    /// RDNSS addresses, in the RA's order, each once.
    pub servers: Vec<Timed<Ipv6Addr>>,
    /// DNSSL domains (lower case, no trailing dot), in the RA's order, each once.
    pub domains: Vec<Timed<String>>,
    /// What was left out (a bad name, past a bound), for one log line.
    pub dropped: usize,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

fn u32_be(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

/// Parses one `RTM_NEWNDUSEROPT` payload (the bytes after the netlink header). `Ok(None)`:
/// a well-formed message that is not an RA (the kernel forwards other ND messages' user
/// options too) or carries no DNS option.
pub fn parse_message(msg: &[u8]) -> Result<Option<RaDns>, RaDnsError> {
    let header = msg.get(..NDUSEROPT_HEADER).ok_or(RaDnsError::ShortHeader(msg.len()))?;
    if header[0] != libc_af_inet6() {
        return Err(RaDnsError::Family(header[0]));
    }
    let len = usize::from(u16_at(header, 2).unwrap_or(0));
    let ifindex = i32::from_ne_bytes([header[4], header[5], header[6], header[7]]);
    let (icmp_type, icmp_code) = (header[8], header[9]);
    let left = msg.len() - NDUSEROPT_HEADER;
    let options = msg
        .get(NDUSEROPT_HEADER..NDUSEROPT_HEADER + len)
        .ok_or(RaDnsError::OptionsLength { len, left })?;
    if icmp_type != ICMPV6_ROUTER_ADVERTISEMENT || icmp_code != 0 {
        return Ok(None);
    }
    let mut out = parse_options(options)?;
    out.ifindex = ifindex;
    Ok((!out.servers.is_empty() || !out.domains.is_empty() || out.dropped > 0).then_some(out))
}

/// AF_INET6 on Linux (no libc dependency for one number).
const fn libc_af_inet6() -> u8 {
    10
}

/// Parses a run of ND options (RFC 4861 §4.6: type, length in units of 8 bytes, data),
/// keeping RDNSS and DNSSL and skipping the rest.
pub fn parse_options(opts: &[u8]) -> Result<RaDns, RaDnsError> {
    let mut out = RaDns::default();
    let mut at = 0;
    while at < opts.len() {
        let kind = opts[at];
        let units = opts.get(at + 1).copied().unwrap_or(0);
        let size = usize::from(units) * 8;
        let body = match opts.get(at..at + size) {
            Some(b) if units > 0 => b,
            _ => return Err(RaDnsError::OptionLength { kind, at, len: units }),
        };
        match kind {
            OPT_RDNSS => rdnss(body, &mut out),
            OPT_DNSSL => dnssl(body, &mut out),
            _ => {}
        }
        at += size;
    }
    Ok(out)
}

/// RDNSS: type, length, reserved (2), lifetime (4), then addresses of 16 bytes. Length 1
/// has no address: the option is invalid and ignored (RFC 8106 §5.1: minimum 3).
fn rdnss(body: &[u8], out: &mut RaDns) {
    let Some(lifetime) = u32_be(body, 4) else { return };
    if body.len() < 24 {
        out.dropped += 1;
        return;
    }
    for chunk in body[8..].chunks_exact(16) {
        let mut a = [0u8; 16];
        a.copy_from_slice(chunk);
        let addr = Ipv6Addr::from(a);
        // A server must be a unicast address a resolver can reach.
        let bad = addr.is_unspecified() || addr.is_multicast() || addr.is_loopback();
        if bad || out.servers.len() >= MAX_SERVERS {
            out.dropped += 1;
        } else if !out.servers.iter().any(|s| s.value == addr) {
            out.servers.push(Timed { value: addr, lifetime });
        }
    }
}

/// DNSSL: type, length, reserved (2), lifetime (4), then domain names in DNS wire form
/// (uncompressed labels, each name ending in a zero label), padded with zeros.
fn dnssl(body: &[u8], out: &mut RaDns) {
    let Some(lifetime) = u32_be(body, 4) else { return };
    let names = &body[8.min(body.len())..];
    let mut at = 0;
    while at < names.len() {
        if names[at] == 0 {
            // Padding (or an empty name): skip it.
            at += 1;
            continue;
        }
        match wire_name(names, at) {
            Some((name, next)) => {
                at = next;
                let ok = base::names::is_domain(&name);
                if !ok || out.domains.len() >= MAX_DOMAINS {
                    out.dropped += 1;
                } else if !out.domains.iter().any(|d| d.value == name) {
                    out.domains.push(Timed { value: name, lifetime });
                }
            }
            None => {
                // A label running past the option, or a compression pointer (not allowed
                // here): the rest of the list cannot be read.
                out.dropped += 1;
                return;
            }
        }
    }
}

/// One uncompressed name from `at`: its text (lower case, no trailing dot) and where the
/// next name starts; `None` if it runs past `b`, uses compression or is too long.
fn wire_name(b: &[u8], mut at: usize) -> Option<(String, usize)> {
    let mut name = String::new();
    loop {
        let len = usize::from(*b.get(at)?);
        at += 1;
        if len == 0 {
            return (!name.is_empty()).then_some((name, at));
        }
        if len > 63 {
            return None;
        }
        let label = b.get(at..at + len)?;
        at += len;
        if !name.is_empty() {
            name.push('.');
        }
        if name.len() + len > MAX_NAME {
            return None;
        }
        // Non-ASCII bytes become U+FFFD and the name is then refused by the domain check.
        name.push_str(&String::from_utf8_lossy(label).to_ascii_lowercase());
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An RDNSS option with `lifetime` and `servers`.
    pub fn rdnss_opt(lifetime: u32, servers: &[Ipv6Addr]) -> Vec<u8> {
        let mut o = vec![OPT_RDNSS, (1 + 2 * servers.len()) as u8, 0, 0];
        o.extend(lifetime.to_be_bytes());
        for s in servers {
            o.extend(s.octets());
        }
        o
    }

    /// A DNSSL option with `lifetime` and `domains`, zero-padded to 8 bytes.
    pub fn dnssl_opt(lifetime: u32, domains: &[&str]) -> Vec<u8> {
        let mut names = Vec::new();
        for d in domains {
            for label in d.split('.') {
                names.push(label.len() as u8);
                names.extend(label.as_bytes());
            }
            names.push(0);
        }
        while (8 + names.len()) % 8 != 0 {
            names.push(0);
        }
        let mut o = vec![OPT_DNSSL, ((8 + names.len()) / 8) as u8, 0, 0];
        o.extend(lifetime.to_be_bytes());
        o.extend(names);
        o
    }

    /// The `RTM_NEWNDUSEROPT` payload the kernel would send for an RA with `opts`.
    pub fn message(ifindex: i32, icmp_type: u8, opts: &[u8]) -> Vec<u8> {
        let mut m = vec![10, 0];
        m.extend((opts.len() as u16).to_ne_bytes());
        m.extend(ifindex.to_ne_bytes());
        m.extend([icmp_type, 0, 0, 0, 0, 0, 0, 0]);
        m.extend(opts);
        // NDUSEROPT_SRCADDR: the router's link-local address.
        m.extend([20, 0, 1, 0]);
        m.extend("fe80::1".parse::<Ipv6Addr>().unwrap().octets());
        m
    }

    fn ip(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    #[test]
    fn servers_and_domains_with_their_lifetimes() {
        let mut opts = rdnss_opt(600, &[ip("2001:db8::53"), ip("2001:db8::54")]);
        // An option keelson does not read (prefix information) is skipped.
        opts.extend([3, 4]);
        opts.extend([0u8; 30]);
        opts.extend(dnssl_opt(300, &["example.com", "Lab.Example.NET"]));
        let got = parse_message(&message(3, ICMPV6_ROUTER_ADVERTISEMENT, &opts)).unwrap().unwrap();
        assert_eq!(got.ifindex, 3);
        assert_eq!(
            got.servers,
            [
                Timed { value: ip("2001:db8::53"), lifetime: 600 },
                Timed { value: ip("2001:db8::54"), lifetime: 600 }
            ]
        );
        assert_eq!(
            got.domains,
            [
                Timed { value: "example.com".to_string(), lifetime: 300 },
                Timed { value: "lab.example.net".to_string(), lifetime: 300 }
            ]
        );
        assert_eq!(got.dropped, 0);
    }

    #[test]
    fn not_an_ra_or_nothing_about_dns() {
        let opts = rdnss_opt(600, &[ip("2001:db8::53")]);
        assert_eq!(parse_message(&message(3, 136, &opts)), Ok(None), "a neighbour advert");
        assert_eq!(parse_message(&message(3, ICMPV6_ROUTER_ADVERTISEMENT, &[])), Ok(None));
    }

    #[test]
    fn malformed_messages_are_refused_with_where() {
        assert_eq!(parse_message(&[10, 0, 0]), Err(RaDnsError::ShortHeader(3)));
        let mut m = message(3, ICMPV6_ROUTER_ADVERTISEMENT, &rdnss_opt(1, &[ip("2001:db8::1")]));
        m[0] = 2;
        assert_eq!(parse_message(&m), Err(RaDnsError::Family(2)));
        let mut m = message(3, ICMPV6_ROUTER_ADVERTISEMENT, &[]);
        m[2..4].copy_from_slice(&500u16.to_ne_bytes());
        assert!(matches!(parse_message(&m), Err(RaDnsError::OptionsLength { len: 500, .. })));
        // A zero length would loop for ever; one past the end reads past the options.
        assert_eq!(
            parse_options(&[OPT_RDNSS, 0, 0, 0, 0, 0, 0, 0]),
            Err(RaDnsError::OptionLength { kind: OPT_RDNSS, at: 0, len: 0 })
        );
        let mut o = rdnss_opt(1, &[ip("2001:db8::1")]);
        o[1] = 4;
        assert_eq!(
            parse_options(&o),
            Err(RaDnsError::OptionLength { kind: OPT_RDNSS, at: 0, len: 4 })
        );
    }

    #[test]
    fn bad_entries_are_dropped_and_counted() {
        let servers = [ip("::"), ip("ff02::1"), ip("::1"), ip("2001:db8::53"), ip("2001:db8::53")];
        let mut opts = rdnss_opt(60, &servers);
        opts.extend(dnssl_opt(60, &["ok.example", "bad\nname.example", "ok.example"]));
        // An RDNSS option without an address.
        opts.extend([OPT_RDNSS, 1, 0, 0, 0, 0, 0, 60]);
        let got = parse_options(&opts).unwrap();
        assert_eq!(got.servers.iter().map(|s| s.value).collect::<Vec<_>>(), [ip("2001:db8::53")]);
        assert_eq!(
            got.domains.iter().map(|d| d.value.as_str()).collect::<Vec<_>>(),
            ["ok.example"]
        );
        assert_eq!(got.dropped, 3 + 1 + 1);
    }

    #[test]
    fn bounded_however_long_the_ra() {
        let many: Vec<Ipv6Addr> =
            (1..=100u16).map(|i| Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, i)).collect();
        let doms: Vec<String> = (0..20).map(|i| format!("d{i}.example")).collect();
        let doms: Vec<&str> = doms.iter().map(String::as_str).collect();
        let mut opts = rdnss_opt(60, &many[..100]);
        opts.extend(dnssl_opt(60, &doms));
        let got = parse_options(&opts).unwrap();
        assert_eq!(got.servers.len(), MAX_SERVERS);
        assert_eq!(got.domains.len(), MAX_DOMAINS);
        assert_eq!(got.dropped, 100 - MAX_SERVERS + 20 - MAX_DOMAINS);
    }

    #[test]
    fn names_that_cannot_be_read_end_the_list() {
        // A compression pointer (0xc0) and a label running past the option.
        let mut o = dnssl_opt(60, &["a.example"]);
        let first = 8 + 11;
        o[first] = 0xc0;
        assert_eq!(parse_options(&o).unwrap().domains.len(), 1);
        let mut o = vec![OPT_DNSSL, 2, 0, 0, 0, 0, 0, 60, 9, b'a', b'b', 0, 0, 0, 0, 0];
        let got = parse_options(&o).unwrap();
        assert!(got.domains.is_empty());
        assert_eq!(got.dropped, 1);
        o[8] = 2;
        assert_eq!(parse_options(&o).unwrap().domains[0].value, "ab");
    }
}
