// SPDX-License-Identifier: Apache-2.0
//! DNS messages, only as much as an A/AAAA lookup needs (RFC 1035 §4, RFC 3596): a query, and
//! a reply read with every length and offset checked and name compression bounded.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Record type A.
pub const TYPE_A: u16 = 1;
/// Record type AAAA (RFC 3596).
pub const TYPE_AAAA: u16 = 28;
const TYPE_CNAME: u16 = 5;
const CLASS_IN: u16 = 1;
/// Most answer records read from one reply.
const MAX_ANSWERS: usize = 64;
/// Most compression pointers followed in one name (a loop would never end otherwise).
const MAX_POINTERS: usize = 16;
/// Most CNAMEs followed.
const MAX_ALIASES: usize = 8;

/// Why a reply is not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DnsError {
    /// Shorter than it claims, or a name that runs off the end.
    #[error("malformed reply")]
    Malformed,
    /// Not the reply to our query (ID, flags or question differ).
    #[error("not the reply to our query")]
    NotOurs,
    /// The server answered with an error code.
    #[error("server answered rcode {0}")]
    Rcode(u8),
    /// The name does not exist.
    #[error("no such name")]
    NxDomain,
    /// The reply did not fit in UDP (TCP is not used).
    #[error("reply truncated")]
    Truncated,
}

/// A query for `name` (already validated, no trailing dot) of type `qtype`, recursion wanted.
pub fn query(id: u16, name: &str, qtype: u16) -> Vec<u8> {
    let mut b = Vec::with_capacity(18 + name.len());
    b.extend_from_slice(&id.to_be_bytes());
    b.extend_from_slice(&[0x01, 0x00]); // RD
    b.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, 0]); // one question
    encode_name(name, &mut b);
    b.extend_from_slice(&qtype.to_be_bytes());
    b.extend_from_slice(&CLASS_IN.to_be_bytes());
    b
}

fn encode_name(name: &str, b: &mut Vec<u8>) {
    for label in name.split('.').filter(|l| !l.is_empty()) {
        let bytes = label.as_bytes();
        let len = bytes.len().min(63);
        b.push(len as u8);
        b.extend_from_slice(bytes.get(..len).unwrap_or_default());
    }
    b.push(0);
}

fn u16_at(b: &[u8], at: usize) -> Result<u16, DnsError> {
    let s = b.get(at..at + 2).ok_or(DnsError::Malformed)?;
    Ok(u16::from_be_bytes([s[0], s[1]]))
}

/// Read the (possibly compressed) name at `at`: the name in lower case and the offset after
/// it in the message.
fn read_name(b: &[u8], mut at: usize) -> Result<(String, usize), DnsError> {
    let mut name = String::new();
    let mut end = None;
    let mut jumps = 0;
    loop {
        let len = *b.get(at).ok_or(DnsError::Malformed)?;
        match len {
            0 => {
                return Ok((name, end.unwrap_or(at + 1)));
            }
            l if l & 0xc0 == 0xc0 => {
                let ptr = usize::from(u16_at(b, at)? & 0x3fff);
                end.get_or_insert(at + 2);
                jumps += 1;
                if jumps > MAX_POINTERS || ptr >= b.len() {
                    return Err(DnsError::Malformed);
                }
                at = ptr;
            }
            l if l & 0xc0 != 0 => return Err(DnsError::Malformed),
            l => {
                let label = b.get(at + 1..at + 1 + usize::from(l)).ok_or(DnsError::Malformed)?;
                if !name.is_empty() {
                    name.push('.');
                }
                name.extend(label.iter().map(|c| char::from(c.to_ascii_lowercase())));
                if name.len() > 255 {
                    return Err(DnsError::Malformed);
                }
                at += 1 + usize::from(l);
            }
        }
    }
}

/// The addresses a reply gives for `name` and `qtype` (following CNAMEs inside the reply),
/// and the smallest TTL among them.
pub fn parse_reply(
    b: &[u8],
    id: u16,
    name: &str,
    qtype: u16,
) -> Result<(Vec<IpAddr>, u32), DnsError> {
    if u16_at(b, 0)? != id {
        return Err(DnsError::NotOurs);
    }
    let flags = u16_at(b, 2)?;
    // QR set, opcode 0 (standard query).
    if flags & 0x8000 == 0 || flags & 0x7800 != 0 {
        return Err(DnsError::NotOurs);
    }
    if flags & 0x0200 != 0 {
        return Err(DnsError::Truncated);
    }
    match (flags & 0x000f) as u8 {
        0 => {}
        3 => return Err(DnsError::NxDomain),
        rcode => return Err(DnsError::Rcode(rcode)),
    }
    if u16_at(b, 4)? != 1 {
        return Err(DnsError::NotOurs);
    }
    let ancount = usize::from(u16_at(b, 6)?);
    let (qname, at) = read_name(b, 12)?;
    let want = name.trim_end_matches('.').to_ascii_lowercase();
    if qname != want || u16_at(b, at)? != qtype || u16_at(b, at + 2)? != CLASS_IN {
        return Err(DnsError::NotOurs);
    }
    let mut at = at + 4;
    let mut owners = vec![want];
    let mut addrs = Vec::new();
    let mut ttl = u32::MAX;
    for _ in 0..ancount.min(MAX_ANSWERS) {
        let (owner, next) = read_name(b, at)?;
        let rtype = u16_at(b, next)?;
        let class = u16_at(b, next + 2)?;
        let rttl = (u32::from(u16_at(b, next + 4)?) << 16) | u32::from(u16_at(b, next + 6)?);
        let rdlen = usize::from(u16_at(b, next + 8)?);
        let rdata_at = next + 10;
        let rdata = b.get(rdata_at..rdata_at + rdlen).ok_or(DnsError::Malformed)?;
        at = rdata_at + rdlen;
        if class != CLASS_IN || !owners.contains(&owner) {
            continue;
        }
        match (rtype, rdata.len()) {
            (TYPE_CNAME, _) if owners.len() <= MAX_ALIASES => {
                let (target, _) = read_name(b, rdata_at)?;
                owners.push(target);
            }
            (TYPE_A, 4) if qtype == TYPE_A => {
                addrs.push(IpAddr::V4(Ipv4Addr::new(rdata[0], rdata[1], rdata[2], rdata[3])));
                ttl = ttl.min(rttl);
            }
            (TYPE_AAAA, 16) if qtype == TYPE_AAAA => {
                let mut a = [0u8; 16];
                a.copy_from_slice(rdata);
                addrs.push(IpAddr::V6(Ipv6Addr::from(a)));
                ttl = ttl.min(rttl);
            }
            _ => {}
        }
    }
    Ok((addrs, if ttl == u32::MAX { 0 } else { ttl }))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A reply to `query` with `answers` as (owner name bytes, type, rdata), the owner given
    /// as raw wire bytes so tests can use compression pointers.
    pub(crate) fn reply(query: &[u8], rcode: u8, answers: &[(&[u8], u16, &[u8])]) -> Vec<u8> {
        let mut b = query.to_vec();
        b[2] = 0x81;
        b[3] = 0x80 | rcode;
        b[6..8].copy_from_slice(&(answers.len() as u16).to_be_bytes());
        for (owner, rtype, rdata) in answers {
            b.extend_from_slice(owner);
            b.extend_from_slice(&rtype.to_be_bytes());
            b.extend_from_slice(&[0, 1, 0, 0, 1, 0x2c]); // IN, TTL 300
            b.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
            b.extend_from_slice(rdata);
        }
        b
    }

    const PTR_QNAME: &[u8] = &[0xc0, 12];

    #[test]
    fn a_query_and_its_reply() {
        let q = query(0x1234, "time.example.org", TYPE_A);
        assert_eq!(&q[..4], &[0x12, 0x34, 1, 0]);
        assert_eq!(&q[12..18], b"\x04time\x07");
        let r = reply(
            &q,
            0,
            &[(PTR_QNAME, TYPE_A, &[192, 0, 2, 7]), (PTR_QNAME, TYPE_A, &[192, 0, 2, 8])],
        );
        let (addrs, ttl) = parse_reply(&r, 0x1234, "TIME.example.org", TYPE_A).unwrap();
        assert_eq!(addrs, ["192.0.2.7".parse::<IpAddr>().unwrap(), "192.0.2.8".parse().unwrap()]);
        assert_eq!(ttl, 300);
    }

    #[test]
    fn cnames_are_followed_and_strangers_ignored() {
        let q = query(1, "ntp.example", TYPE_AAAA);
        // ntp.example CNAME a.example (written out), a.example AAAA ..., b.example AAAA ...
        let target = b"\x01a\x07example\x00";
        let other = b"\x01b\x07example\x00";
        let v6 = [0x20, 1, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let r = reply(
            &q,
            0,
            &[(PTR_QNAME, 5, target), (target, TYPE_AAAA, &v6), (other, TYPE_AAAA, &v6)],
        );
        let (addrs, _) = parse_reply(&r, 1, "ntp.example", TYPE_AAAA).unwrap();
        assert_eq!(addrs, ["2001:db8::1".parse::<IpAddr>().unwrap()]);
        // An A record in an AAAA reply is not taken either.
        let r = reply(&q, 0, &[(PTR_QNAME, TYPE_A, &[1, 2, 3, 4])]);
        assert!(parse_reply(&r, 1, "ntp.example", TYPE_AAAA).unwrap().0.is_empty());
    }

    #[test]
    fn hostile_replies_are_refused() {
        let q = query(9, "x.example", TYPE_A);
        let ok = reply(&q, 0, &[(PTR_QNAME, TYPE_A, &[1, 2, 3, 4])]);
        assert_eq!(parse_reply(&ok, 8, "x.example", TYPE_A), Err(DnsError::NotOurs));
        assert_eq!(parse_reply(&ok, 9, "y.example", TYPE_A), Err(DnsError::NotOurs));
        assert_eq!(
            parse_reply(&q, 9, "x.example", TYPE_A),
            Err(DnsError::NotOurs),
            "a query is not a reply"
        );
        assert_eq!(
            parse_reply(&reply(&q, 3, &[]), 9, "x.example", TYPE_A),
            Err(DnsError::NxDomain)
        );
        assert_eq!(
            parse_reply(&reply(&q, 2, &[]), 9, "x.example", TYPE_A),
            Err(DnsError::Rcode(2))
        );
        let mut tc = ok.clone();
        tc[2] |= 0x02;
        assert_eq!(parse_reply(&tc, 9, "x.example", TYPE_A), Err(DnsError::Truncated));
        // Every truncation of a valid reply is refused or yields less, never a panic.
        for n in 0..ok.len() {
            let _ = parse_reply(&ok[..n], 9, "x.example", TYPE_A);
        }
        // A compression loop, an answer count beyond the data, a pointer past the end.
        let looped = reply(&q, 0, &[(&[0xc0, q.len() as u8], TYPE_A, &[1, 2, 3, 4])]);
        assert_eq!(parse_reply(&looped, 9, "x.example", TYPE_A), Err(DnsError::Malformed));
        let mut many = ok.clone();
        many[7] = 200;
        assert_eq!(parse_reply(&many, 9, "x.example", TYPE_A), Err(DnsError::Malformed));
        let past = reply(&q, 0, &[(&[0xc0, 0xff], TYPE_A, &[1, 2, 3, 4])]);
        assert_eq!(parse_reply(&past, 9, "x.example", TYPE_A), Err(DnsError::Malformed));
    }
}
