// SPDX-License-Identifier: Apache-2.0
//! gRPC message framing (`grpc::MessageDecoder`, `grpc::ResponseReader`) and
//! `grpc-message` percent-decoding.
//!
//! Oracles: no panic; every message is within the size limit; the messages re-framed plus the
//! unfinished tail are exactly the bytes read (nothing lost, nothing invented); the same bytes
//! in two reads give the same messages; a response reader ends with exactly one status, after
//! which nothing more comes; percent-decoding never grows its input.

use testkit::fuzzkit::{run, LenField, Mutator, Target, Verdict};

use crate::call::{frame_message, percent_decode, MessageDecoder, Response, ResponseReader};

const MAX: usize = 1024;

fn prefix_lengths(b: &[u8]) -> Vec<LenField> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(n) = b.get(at + 1..at + 5) {
        out.push(LenField::be(at + 1, 4));
        at += 5 + u32::from_be_bytes([n[0], n[1], n[2], n[3]]) as usize;
    }
    out
}

fn decode(parts: &[&[u8]]) -> (Vec<Vec<u8>>, Result<usize, u32>) {
    let mut d = MessageDecoder::new(MAX);
    let mut msgs = Vec::new();
    for p in parts {
        if let Err(s) = d.push(p, &mut msgs) {
            return (msgs, Err(s.code));
        }
    }
    (msgs, Ok(d.partial()))
}

#[test]
fn fuzz_target_grpc() {
    let mut seeds = vec![
        [frame_message(b"hello"), frame_message(b""), frame_message(&[7; 300])].concat(),
        frame_message(&[1; MAX]),
        b"\x00\x00\x00\x00\x10partial".to_vec(),
        b"\x01\x00\x00\x00\x01x".to_vec(),
    ];
    seeds.push(b"grpc%20message%zz%4".to_vec());
    let target = Target {
        name: "grpc",
        crate_dir: super::CRATE_DIR,
        seeds,
        mutator: Mutator {
            dict: &[b"%", b"%2", b"%ff", b"\x00\x00\x00\x00\x00"],
            lengths: Some(prefix_lengths),
            max_len: 8192,
        },
        default_iters: 40_000,
    };
    run(target, |b| {
        let (msgs, result) = decode(&[b]);
        if let Some(m) = msgs.iter().find(|m| m.len() > MAX) {
            return Err(format!("a message of {} bytes", m.len()));
        }
        if let Ok(partial) = result {
            let framed: Vec<u8> = msgs.iter().flat_map(|m| frame_message(m)).collect();
            if framed.len() + partial != b.len() || b[..framed.len()] != framed[..] {
                return Err(format!(
                    "{} messages and {partial} bytes left do not add up",
                    msgs.len()
                ));
            }
        }
        let cut = b.len() / 2;
        if decode(&[&b[..cut], &b[cut..]]) != (msgs.clone(), result) {
            return Err(format!("split at {cut} decodes differently"));
        }
        let mut r = ResponseReader::new(MAX);
        let mut out = Vec::new();
        let head = [
            (b":status".to_vec(), b"200".to_vec()),
            (b"content-type".to_vec(), b"application/grpc".to_vec()),
        ];
        r.on_headers(&head, false, &mut out);
        r.on_data(b, false, &mut out);
        r.on_headers(
            &[(b"grpc-status".to_vec(), b.to_vec()), (b"grpc-message".to_vec(), b.to_vec())],
            true,
            &mut out,
        );
        r.on_data(b, true, &mut out);
        let statuses = out.iter().filter(|o| matches!(o, Response::Status(_))).count();
        if statuses != 1 || !matches!(out.last(), Some(Response::Status(_))) || !r.is_done() {
            return Err(format!("the call ended with {statuses} statuses: {out:?}"));
        }
        let text = percent_decode(b);
        // Lossy UTF-8 turns one bad byte into three (U+FFFD).
        if text.len() > 3 * b.len() {
            return Err(format!("{} bytes decoded to {}", b.len(), text.len()));
        }
        Ok(if result.is_ok() && !msgs.is_empty() { Verdict::Accepted } else { Verdict::Refused })
    });
}
