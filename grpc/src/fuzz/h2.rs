// SPDX-License-Identifier: Apache-2.0
//! HTTP/2 (`h2::Connection::recv`) as a server reading a client and as a client reading a
//! server, and HPACK blocks (`h2::hpack::Decoder`) on their own.
//!
//! Oracles: no panic; an error closes the connection; the bytes delivered as DATA never exceed
//! the bytes read; every header list fits the advertised SETTINGS_MAX_HEADER_LIST_SIZE; the
//! output stays within a constant plus twice the input (acknowledgements only); the same bytes
//! fed in two reads give the same events and outcome as in one. HPACK: the dynamic table
//! never exceeds its limit, a decoded list never exceeds the bound given, and the fields
//! re-encoded decode to the same fields.

use testkit::fuzzkit::{run, LenField, Mutator, Target, Verdict};

use crate::h2::hpack::{encode, Decoder};
use crate::h2::{Config, Connection, Event, Role, PREFACE};

const CFG: Config = Config {
    stream_window: 65_535,
    conn_window: 1 << 20,
    max_header_list: 16 << 10,
    max_concurrent_streams: 8,
};

/// Each frame's 24-bit length, walked from the first frame (after the preface, if any).
fn frame_lengths(b: &[u8]) -> Vec<LenField> {
    let mut at = if b.starts_with(PREFACE) { PREFACE.len() } else { 0 };
    let mut out = Vec::new();
    while let Some(h) = b.get(at..at + 9) {
        out.push(LenField::be(at, 3));
        // A padded frame's pad length is the first payload byte.
        if h[4] & 0x8 != 0 && matches!(h[3], 0 | 1 | 5) {
            out.push(LenField::be(at + 9, 1));
        }
        at += 9 + ((usize::from(h[0]) << 16) | (usize::from(h[1]) << 8) | usize::from(h[2]));
    }
    out.retain(|f| f.at + f.width <= b.len());
    out
}

const DICT: &[&[u8]] = &[
    // Frame types with flags, and stream IDs.
    b"\x00\x01",
    b"\x00\x08",
    b"\x01\x04",
    b"\x01\x05",
    b"\x01\x2d",
    b"\x02\x00",
    b"\x03\x00",
    b"\x04\x00",
    b"\x04\x01",
    b"\x06\x00",
    b"\x07\x00",
    b"\x08\x00",
    b"\x09\x04",
    b"\x09\x00",
    b"\x00\x00\x00\x01",
    b"\x00\x00\x00\x03",
    b"\x7f\xff\xff\xff",
    b"\x00\x00\x00\x00",
    // A whole empty SETTINGS frame and a PING.
    b"\x00\x00\x00\x04\x00\x00\x00\x00\x00",
    b"\x00\x00\x08\x06\x00\x00\x00\x00\x00",
    // HPACK: indexed, literal with incremental indexing, table size update, Huffman string.
    b"\x82",
    b"\xbe",
    b"\x40",
    b"\x3f\xe1\x1f",
    b"\x20",
    b"\x8c",
    b"\xff\xff\xff\xff\x0f",
];

fn client() -> Connection {
    let mut c = Connection::new(Role::Client, CFG);
    let _ = c.open_stream(&[(":method", "POST"), (":path", "/x")], false);
    c.take_output();
    c
}

/// What a connection made of `parts` fed one after the other.
fn feed(mut c: Connection, parts: &[&[u8]]) -> (Result<(), u32>, Vec<Event>, usize, bool) {
    let mut result = Ok(());
    let mut out = 0;
    for p in parts {
        if let Err(e) = c.recv(p) {
            result = Err(e.code);
            break;
        }
        out += c.take_output().len();
    }
    out += c.take_output().len();
    let events = std::iter::from_fn(|| c.poll_event()).collect();
    (result, events, out, c.is_closed())
}

fn check(b: &[u8], make: fn() -> Connection) -> Result<Verdict, String> {
    let (result, events, out, closed) = feed(make(), &[b]);
    if result.is_err() && !closed {
        return Err(format!("error {result:?} left the connection open"));
    }
    let mut data = 0;
    for e in &events {
        match e {
            Event::Data { data: d, .. } => data += d.len(),
            Event::Headers { fields, .. } => {
                let list: usize = fields.iter().map(|(n, v)| n.len() + v.len() + 32).sum();
                if list > CFG.max_header_list {
                    return Err(format!("a header list of {list} bytes"));
                }
            }
            _ => {}
        }
    }
    if data > b.len() {
        return Err(format!("{data} bytes of DATA from {} bytes", b.len()));
    }
    if out > 1024 + 2 * b.len() {
        return Err(format!("{out} bytes of output for {} bytes of input", b.len()));
    }
    // Reads split anywhere give the same result.
    for cut in [b.len() / 3, b.len().saturating_sub(7)] {
        let split = feed(make(), &[&b[..cut], &b[cut..]]);
        if (split.0, &split.1) != (result, &events) {
            return Err(format!(
                "split at {cut}: {:?} {:?}\nwhole: {result:?} {events:?}",
                split.0, split.1
            ));
        }
    }
    Ok(if result.is_ok() && !events.is_empty() { Verdict::Accepted } else { Verdict::Refused })
}

fn client_streams() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    // A gRPC-shaped call.
    let mut c = Connection::new(Role::Client, CFG);
    let id = c
        .open_stream(
            &[(":method", "POST"), (":path", "/sidero.discovery.server.Cluster/Hello")],
            false,
        )
        .unwrap();
    c.send_data(id, b"\x00\x00\x00\x00\x03abc", true).unwrap();
    seeds.push(c.take_output());
    // Several streams, a ping, a reset, a go-away, and a header block split into CONTINUATION.
    let mut c = Connection::new(Role::Client, CFG);
    let a = c.open_stream(&[(":method", "GET"), (":path", "/a")], true).unwrap();
    let b = c.open_stream(&[(":method", "POST"), ("big", "v".repeat(17_000).as_str())], false);
    c.ping([1, 2, 3, 4, 5, 6, 7, 8]);
    if let Ok(b) = b {
        c.send_data(b, &[7; 300], false).unwrap();
        c.reset(b, 8);
    }
    c.send_data(a, b"", false).ok();
    c.go_away(0);
    seeds.push(c.take_output());
    // Hand-made frames: padded DATA, PRIORITY, WINDOW_UPDATE, SETTINGS with every id.
    let mut c = Connection::new(Role::Client, CFG);
    c.open_stream(&[(":method", "POST"), (":path", "/p")], false).unwrap();
    let mut s = c.take_output();
    s.extend_from_slice(b"\x00\x00\x08\x00\x09\x00\x00\x00\x01\x03abcd\x00\x00\x00");
    s.extend_from_slice(b"\x00\x00\x05\x02\x00\x00\x00\x00\x03\x00\x00\x00\x01\x10");
    s.extend_from_slice(b"\x00\x00\x04\x08\x00\x00\x00\x00\x01\x00\x00\x10\x00");
    s.extend_from_slice(
        b"\x00\x00\x0c\x04\x00\x00\x00\x00\x00\x00\x01\x00\x00\x10\x00\x00\x05\x00\x00\x40\x00",
    );
    s.extend_from_slice(b"\x00\x00\x00\x04\x01\x00\x00\x00\x00");
    seeds.push(s);
    seeds
}

fn server_streams() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for (trailers_only, chunks) in [(false, 1), (false, 3), (true, 0)] {
        let mut c = client();
        // The client's own preface, for the server to answer.
        let mut c2 = Connection::new(Role::Client, CFG);
        c2.open_stream(&[(":method", "POST"), (":path", "/x")], false).unwrap();
        let mut s = Connection::new(Role::Server, CFG);
        s.recv(&c2.take_output()).unwrap();
        if trailers_only {
            s.send_headers(1, &[(":status", "200"), ("grpc-status", "5")], true).unwrap();
        } else {
            s.send_headers(1, &[(":status", "200"), ("content-type", "application/grpc")], false)
                .unwrap();
            for i in 0..chunks {
                s.send_data(1, &[i; 40], false).unwrap();
            }
            s.send_headers(1, &[("grpc-status", "0"), ("grpc-message", "ok%20done")], true)
                .unwrap();
        }
        s.ping([9; 8]);
        let bytes = s.take_output();
        c.recv(&bytes).unwrap();
        seeds.push(bytes);
    }
    seeds
}

#[test]
fn fuzz_target_h2server() {
    let target = Target {
        name: "h2server",
        crate_dir: super::CRATE_DIR,
        seeds: client_streams(),
        mutator: Mutator { dict: DICT, lengths: Some(frame_lengths), max_len: 64 << 10 },
        default_iters: 20_000,
    };
    run(target, |b| check(b, || Connection::new(Role::Server, CFG)));
}

#[test]
fn fuzz_target_h2client() {
    let target = Target {
        name: "h2client",
        crate_dir: super::CRATE_DIR,
        seeds: server_streams(),
        mutator: Mutator { dict: DICT, lengths: Some(frame_lengths), max_len: 64 << 10 },
        default_iters: 20_000,
    };
    run(target, |b| check(b, client));
}

/// Header blocks from RFC 7541 appendix C (C.3 plain, C.4 Huffman) and a table size update.
fn hpack_seeds() -> Vec<Vec<u8>> {
    let unhex = testkit::fuzzkit::unhex;
    vec![
        unhex("828684410f7777772e6578616d706c652e636f6d"),
        unhex("828684be58086e6f2d6361636865"),
        unhex("828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565"),
        unhex("828684418cf1e3c2e5f23a6ba0ab90f4ff"),
        unhex("828684be5886a8eb10649cbf"),
        unhex("828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf"),
        unhex("3fe11f82"),
        encode(&[(":status", "200"), ("grpc-status", "0"), ("x", "")]),
    ]
}

#[test]
fn fuzz_target_hpack() {
    const LIMIT: usize = 4096;
    const MAX_LIST: usize = 8192;
    let target = Target {
        name: "hpack",
        crate_dir: super::CRATE_DIR,
        seeds: hpack_seeds(),
        mutator: Mutator { dict: &DICT[20..], lengths: None, max_len: 16 << 10 },
        default_iters: 150_000,
    };
    run(target, |b| {
        // Twice through one decoder: the second pass sees the table the first one built.
        let mut d = Decoder::new(LIMIT);
        let mut accepted = false;
        for _ in 0..2 {
            let Ok(fields) = d.decode(b, MAX_LIST) else { break };
            if d.table_size() > LIMIT {
                return Err(format!("dynamic table of {} bytes", d.table_size()));
            }
            let list: usize = fields.iter().map(|(n, v)| n.len() + v.len() + 32).sum();
            if list > MAX_LIST {
                return Err(format!("a list of {list} bytes"));
            }
            let again = Decoder::new(LIMIT).decode(&encode(&fields), usize::MAX);
            if again.as_ref() != Ok(&fields) {
                return Err(format!("re-encoded {fields:?} decoded as {again:?}"));
            }
            accepted = true;
        }
        Ok(if accepted { Verdict::Accepted } else { Verdict::Refused })
    });
}
