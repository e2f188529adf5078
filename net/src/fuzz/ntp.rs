// SPDX-License-Identifier: Apache-2.0
//! NTP replies: the header codec and the client engine with one plain and one NTS server.
//!
//! Oracle: no panic; `encode(parse(b))` is the first 48 bytes of `b` and parses back to the
//! same header; a reply whose origin timestamp is not the request's cookie changes nothing
//! (no output, same report); any reply makes at most a handful of outputs.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use testkit::fuzzkit::{run, LenField, Mutator, Target, Verdict};

use crate::ntp::wire::{Header, NtpTime, HEADER_LEN, MODE_SERVER};
use crate::ntp::{ClientConfig, Input, NtpClient, Output};
use crate::nts::fields::{self, AUTHENTICATOR, COOKIE, UNIQUE_ID};
use crate::nts::session::{serve_for_tests, Keys, Session};

fn keys() -> Keys {
    Keys { c2s: [1; 32], s2c: [2; 32] }
}

/// The extension fields' length words, walked from the header on.
pub(super) fn field_lengths(b: &[u8]) -> Vec<LenField> {
    let mut out = Vec::new();
    for f in fields::iter(b, HEADER_LEN) {
        out.push(LenField::be(f.at + 2, 2));
        if f.kind == AUTHENTICATOR {
            // The nonce and ciphertext lengths inside the authenticator.
            out.push(LenField::be(f.at + 4, 2));
            out.push(LenField::be(f.at + 6, 2));
        }
    }
    out
}

pub(super) const DICT: &[&[u8]] = &[
    b"\x01\x04",
    b"\x02\x04",
    b"\x03\x04",
    b"\x04\x04",
    b"\x00\x04",
    b"\x00\x10",
    b"NTSN",
    b"RATE",
    b"DENY",
    b"RSTR",
    b"\x24",
    b"\x1c",
];

fn server_reply(request: &[u8], wall: NtpTime) -> [u8; HEADER_LEN] {
    let req = Header::parse(request).unwrap();
    Header {
        version: 4,
        mode: MODE_SERVER,
        stratum: 2,
        poll: 6,
        precision: -20,
        root_delay: 0x20,
        root_dispersion: 0x20,
        ref_id: *b"TEST",
        reference: wall.add_ns(-10_000_000_000),
        origin: req.transmit,
        receive: wall.add_ns(-1_000_000),
        transmit: wall.add_ns(-1_000_000),
        ..Header::default()
    }
    .encode()
}

#[test]
fn fuzz_target_ntp() {
    let plain: SocketAddr = "192.0.2.1:123".parse().unwrap();
    let nts: SocketAddr = "192.0.2.2:123".parse().unwrap();
    let now = Instant::now();
    let wall = NtpTime::from_unix(Duration::from_secs(1_800_000_000));
    let mut c = NtpClient::new(ClientConfig { servers: vec![], adjust_clock: true }, now, 7);
    c.set_servers(&[plain, nts], &[nts], now);
    let cookies = (0..8).map(|i| vec![i as u8; 40]).collect();
    assert!(c.set_session(nts, Session::new(keys(), cookies, [9; 32]), now));
    let out = c.handle(now, wall, Input::Timer);
    let mut requests = Vec::new();
    for o in &out {
        if let Output::Send { to, packet } = o {
            requests.push((*to, packet.clone()));
        }
    }
    assert_eq!(requests.len(), 2, "one request per server: {out:?}");
    let later = now + Duration::from_millis(2);
    let mut seeds = Vec::new();
    for (to, req) in &requests {
        let header = server_reply(req, wall);
        if *to == nts {
            seeds.push(serve_for_tests(&keys(), req, header, 3));
        } else {
            seeds.push(header.to_vec());
        }
    }
    // A kiss-o'-death and an NTS NAK carrying the request's unique identifier.
    let mut kiss = seeds[0].clone();
    kiss[1] = 0;
    kiss[12..16].copy_from_slice(b"DENY");
    seeds.push(kiss);
    let nts_req = requests.iter().find(|(to, _)| *to == nts).map(|(_, r)| r.clone()).unwrap();
    let uid = fields::iter(&nts_req, HEADER_LEN).find(|f| f.kind == UNIQUE_ID).unwrap();
    let mut nak = server_reply(&nts_req, wall).to_vec();
    nak[1] = 0;
    nak[12..16].copy_from_slice(b"NTSN");
    fields::push(&mut nak, UNIQUE_ID, uid.value);
    seeds.push(nak);
    let mut odd = seeds[0].clone();
    fields::push(&mut odd, COOKIE, &[7; 13]);
    seeds.push(odd);

    let cookie_of = |to: SocketAddr| {
        let req = &requests.iter().find(|(t, _)| *t == to).unwrap().1;
        Header::parse(req).unwrap().transmit
    };
    let target = Target {
        name: "ntp",
        crate_dir: super::CRATE_DIR,
        seeds,
        mutator: Mutator { dict: DICT, lengths: Some(field_lengths), max_len: 2048 },
        default_iters: 20_000,
    };
    let before = format!("{c:?}");
    run(target, |b| {
        let parsed = Header::parse(b);
        if let Some(h) = parsed {
            let again = h.encode();
            if again[..] != b[..HEADER_LEN] || Header::parse(&again) != Some(h) {
                return Err(format!("header does not round-trip: {h:?}"));
            }
        } else if b.len() >= HEADER_LEN {
            return Err("a full-length header was refused".into());
        }
        let mut accepted = false;
        for from in [plain, nts] {
            let mut e = c.clone();
            let out = e.handle(later, wall.add_ns(2_000_000), Input::Packet { from, bytes: b });
            if out.len() > 4 {
                return Err(format!("{} outputs from one reply: {out:?}", out.len()));
            }
            let ours = parsed.is_some_and(|h| h.origin == cookie_of(from));
            // The engine's whole state, as its Debug form shows it (cookies counted only).
            let changed = !out.is_empty() || format!("{e:?}") != before;
            if !ours && changed {
                return Err(format!("a reply without our origin changed the engine: {out:?}"));
            }
            accepted |= changed;
        }
        Ok(if accepted { Verdict::Accepted } else { Verdict::Refused })
    });
}
