// SPDX-License-Identifier: Apache-2.0
//! DNS replies (`dns::wire::parse_reply`) and the stub resolver that feeds them.
//!
//! Oracle: no panic; at most one address per answer record and never more than the reply has
//! room for; no TTL without an address; a reply whose ID or question is not ours is never
//! accepted; the stub, fed the mutant from its own server, keeps at most `MAX_ADDRS`
//! addresses per name and never answers a packet from elsewhere.

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use testkit::fuzzkit::{run, LenField, Mutator, Target, Verdict};

use crate::dns::wire::{parse_reply, query, tests::reply, DnsError, TYPE_A, TYPE_AAAA};
use crate::dns::{Event, Stub, MAX_ADDRS};

const ID: u16 = 0x4b65;
const NAME: &str = "registry.example.com";

/// The counts in the header and the RDLENGTH of each answer, found by walking the reply.
fn lengths(b: &[u8]) -> Vec<LenField> {
    let mut out =
        vec![LenField::be(4, 2), LenField::be(6, 2), LenField::be(8, 2), LenField::be(10, 2)];
    // Skip a name: labels up to a zero or a pointer.
    let skip = |mut at: usize| -> Option<usize> {
        loop {
            let l = *b.get(at)?;
            if l == 0 {
                return Some(at + 1);
            }
            if l & 0xc0 != 0 {
                return Some(at + 2);
            }
            at += 1 + usize::from(l);
        }
    };
    let Some(mut at) = skip(12).map(|a| a + 4) else { return out };
    while at < b.len() {
        let Some(next) = skip(at) else { break };
        out.push(LenField::be(next + 8, 2));
        let Some(len) = b.get(next + 8..next + 10) else { break };
        at = next + 10 + usize::from(u16::from_be_bytes([len[0], len[1]]));
    }
    out.retain(|f| f.at + f.width <= b.len());
    out
}

fn seeds(q_a: &[u8], q_aaaa: &[u8]) -> Vec<Vec<u8>> {
    let ptr: &[u8] = &[0xc0, 12];
    let alias: &[u8] = b"\x05alias\x07example\x03com\x00";
    vec![
        reply(q_a, 0, &[(ptr, TYPE_A, &[10, 0, 0, 7]), (ptr, TYPE_A, &[10, 0, 0, 8])]),
        reply(
            q_aaaa,
            0,
            &[(ptr, TYPE_AAAA, &[0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1])],
        ),
        // A CNAME to a name, then its address under that name.
        reply(q_a, 0, &[(ptr, 5, alias), (alias, TYPE_A, &[192, 0, 2, 1])]),
        reply(q_a, 3, &[]),
        reply(q_a, 0, &[(ptr, 16, b"\x05hello")]),
    ]
}

const DICT: &[&[u8]] = &[
    b"\xc0\x0c",
    b"\xc0",
    b"\x00\x01\x00\x01",
    b"\x00\x1c\x00\x01",
    b"\x00\x05",
    b"\x3f",
    b"\x00",
];

#[test]
fn fuzz_target_dns() {
    let server: SocketAddr = "192.0.2.53:53".parse().unwrap();
    let stranger: SocketAddr = "192.0.2.66:53".parse().unwrap();
    let now = Instant::now();
    let mut stub = Stub::new(3);
    stub.set_servers(vec![server.ip()], now);
    stub.want(&BTreeSet::from([NAME.to_string()]), now);
    let (sent, _) = stub.on_timer(now);
    assert!(!sent.is_empty(), "the stub sends its queries");
    // The stub's own queries make seeds too, so mutants carry its IDs.
    let mut corpus = seeds(&query(ID, NAME, TYPE_A), &query(ID, NAME, TYPE_AAAA));
    for (_, q) in &sent {
        corpus.push(reply(q, 0, &[(&[0xc0, 12], TYPE_A, &[10, 1, 2, 3])]));
        corpus.push(reply(q, 0, &[(&[0xc0, 12], TYPE_AAAA, &[0xfd; 16])]));
    }
    let target = Target {
        name: "dns",
        crate_dir: super::CRATE_DIR,
        seeds: corpus,
        mutator: Mutator { dict: DICT, lengths: Some(lengths), max_len: 4096 },
        default_iters: 100_000,
    };
    run(target, |b| {
        let mut accepted = false;
        for qtype in [TYPE_A, TYPE_AAAA] {
            match parse_reply(b, ID, NAME, qtype) {
                Ok((addrs, ttl)) => {
                    accepted = true;
                    // An address takes at least 15 bytes (pointer, fixed part, 4-byte rdata).
                    if addrs.len() > 64 || addrs.len() * 15 > b.len() {
                        return Err(format!("{} addresses from {} bytes", addrs.len(), b.len()));
                    }
                    if addrs.is_empty() && ttl != 0 {
                        return Err(format!("TTL {ttl} without an address"));
                    }
                    let v4 = addrs.iter().all(IpAddr::is_ipv4);
                    if !addrs.is_empty() && v4 != (qtype == TYPE_A) {
                        return Err(format!("{addrs:?} for query type {qtype}"));
                    }
                    if b.get(..2) != Some(&ID.to_be_bytes()[..]) {
                        return Err("a reply with another ID was accepted".into());
                    }
                }
                Err(DnsError::Malformed | DnsError::NotOurs | DnsError::Truncated) => {}
                Err(DnsError::Rcode(_) | DnsError::NxDomain) => {}
            }
        }
        let mut s = stub.clone();
        if s.on_packet(stranger, b, now).is_some() {
            return Err("a packet from a stranger changed the stub".into());
        }
        if let Some(Event::Resolved(..) | Event::Failed(..)) = s.on_packet(server, b, now) {
            if s.addresses(NAME).len() > MAX_ADDRS {
                return Err(format!("{} addresses kept", s.addresses(NAME).len()));
            }
        }
        Ok(if accepted { Verdict::Accepted } else { Verdict::Refused })
    });
}
