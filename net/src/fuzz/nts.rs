// SPDX-License-Identifier: Apache-2.0
//! NTS: the key-exchange records a server sends over TLS (`nts::ke::parse_response`) and the
//! extension fields of an NTS-protected reply (`nts::fields::iter`, `Session::verify`,
//! `is_nak`).
//!
//! Oracles: no panic; a parsed response is within the documented limits (at most
//! `MAX_COOKIES` cookies of 1..=`MAX_COOKIE_LEN` bytes, a server name of at most 253 bytes of
//! host characters, a non-zero port) and survives a round trip through an encoder; a prefix of
//! an accepted response is never accepted with different contents; fields lie inside the
//! packet, in order, each a word multiple; `verify` never adds more cookies than the jar holds.

use testkit::fuzzkit::{run, LenField, Mutator, Target, Verdict};

use crate::ntp::wire::HEADER_LEN;
use crate::nts::fields;
use crate::nts::ke::{parse_response, request, Response, MAX_COOKIES, MAX_COOKIE_LEN};
use crate::nts::session::{is_nak, serve_for_tests, Keys, Session};

fn record(out: &mut Vec<u8>, word: u16, body: &[u8]) {
    out.extend_from_slice(&word.to_be_bytes());
    out.extend_from_slice(&(body.len() as u16).to_be_bytes());
    out.extend_from_slice(body);
}

/// A server's answer carrying `r` (the encoder the parser has no need of).
fn encode(r: &Response) -> Vec<u8> {
    let mut out = Vec::new();
    record(&mut out, 0x8001, &[0, 0]);
    record(&mut out, 0x0004, &[0, 15]);
    for c in &r.cookies {
        record(&mut out, 5, c);
    }
    if let Some(s) = &r.server {
        record(&mut out, 0x8006, s.as_bytes());
    }
    if let Some(p) = r.port {
        record(&mut out, 0x8007, &p.to_be_bytes());
    }
    record(&mut out, 0x8000, &[]);
    out
}

/// The length word of every record, walked from the start.
fn record_lengths(b: &[u8]) -> Vec<LenField> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(len) = b.get(at + 2..at + 4) {
        out.push(LenField::be(at + 2, 2));
        at += 4 + usize::from(u16::from_be_bytes([len[0], len[1]]));
    }
    out
}

const KE_DICT: &[&[u8]] = &[
    b"\x80\x00\x00\x00",
    b"\x80\x01\x00\x02\x00\x00",
    b"\x00\x04\x00\x02\x00\x0f",
    b"\x00\x05",
    b"\x80\x06",
    b"\x80\x07\x00\x02",
    b"\x80\x02\x00\x02",
    b"\x00\x03",
    b"\xff\xff",
];

fn ke_seeds() -> Vec<Vec<u8>> {
    let full = Response {
        cookies: (0..8).map(|i| vec![0xc0 + i; 100]).collect(),
        server: Some("ntp.example.com".into()),
        port: Some(4123),
    };
    let one = Response { cookies: vec![vec![1; 1]], server: None, port: None };
    let mut refused = Vec::new();
    record(&mut refused, 0x8002, &[0, 1]);
    record(&mut refused, 0x8000, &[]);
    let mut unknown = encode(&one);
    unknown.splice(0..0, [0x40, 0x00, 0, 3, 1, 2, 3]);
    vec![encode(&full), encode(&one), refused, unknown, request()]
}

#[test]
fn fuzz_target_ntske() {
    let target = Target {
        name: "ntske",
        crate_dir: super::CRATE_DIR,
        seeds: ke_seeds(),
        mutator: Mutator { dict: KE_DICT, lengths: Some(record_lengths), max_len: 16 << 10 },
        default_iters: 200_000,
    };
    run(target, |b| {
        let Ok(Some(r)) = parse_response(b) else { return Ok(Verdict::Refused) };
        if r.cookies.is_empty()
            || r.cookies.len() > MAX_COOKIES
            || r.cookies.iter().any(|c| c.is_empty() || c.len() > MAX_COOKIE_LEN)
        {
            return Err(format!("cookies out of bounds: {r:?}"));
        }
        if let Some(s) = &r.server {
            let host = s.bytes().all(|c| c.is_ascii_alphanumeric() || b".-:".contains(&c));
            if s.is_empty() || s.len() > 253 || !host {
                return Err(format!("server name {s:?}"));
            }
        }
        if r.port == Some(0) {
            return Err("port 0".into());
        }
        match parse_response(&encode(&r)) {
            Ok(Some(again)) if again == r => {}
            other => return Err(format!("round trip: {r:?} became {other:?}")),
        }
        // The caller parses what has arrived so far; an earlier read must not have ended it
        // with something else.
        for cut in [b.len() / 2, b.len().saturating_sub(1)] {
            if let Ok(Some(early)) = parse_response(&b[..cut]) {
                if early != r {
                    return Err(format!("prefix of {cut} bytes parsed as {early:?}"));
                }
            }
        }
        Ok(Verdict::Accepted)
    });
}

#[test]
fn fuzz_target_ntsfields() {
    let keys = Keys { c2s: [1; 32], s2c: [2; 32] };
    let cookies: Vec<Vec<u8>> = (0..2).map(|i| vec![i; 40]).collect();
    let mut session = Session::new(keys.clone(), cookies, [9; 32]);
    let header = [0x23u8; HEADER_LEN];
    let (req, sent) = session.request(&header).unwrap();
    let mut reply_header = header;
    reply_header[0] = 0x24;
    let seeds = vec![
        serve_for_tests(&keys, &req, reply_header, 1),
        serve_for_tests(&keys, &req, reply_header, 7),
        serve_for_tests(&keys, &req, reply_header, 0),
        req.clone(),
    ];
    let target = Target {
        name: "ntsfields",
        crate_dir: super::CRATE_DIR,
        seeds,
        mutator: Mutator {
            dict: super::ntp::DICT,
            lengths: Some(super::ntp::field_lengths),
            max_len: 4096,
        },
        default_iters: 20_000,
    };
    run(target, |b| {
        let mut end = HEADER_LEN;
        for f in fields::iter(b, HEADER_LEN) {
            let len = 4 + f.value.len();
            if f.at != end || len % 4 != 0 || f.at + len > b.len() {
                return Err(format!("field at {} of {len} bytes after {end}", f.at));
            }
            end = f.at + len;
        }
        let _ = is_nak(b, &sent);
        let mut s = session.clone();
        let before = s.cookies();
        match s.verify(b, &sent) {
            Ok(added) => {
                if s.cookies() != before + added || s.cookies() > MAX_COOKIES {
                    return Err(format!("{before} cookies + {added} made {}", s.cookies()));
                }
                Ok(Verdict::Accepted)
            }
            Err(_) if s.cookies() == before => Ok(Verdict::Refused),
            Err(e) => Err(format!("a refused reply ({e}) changed the jar")),
        }
    });
}
