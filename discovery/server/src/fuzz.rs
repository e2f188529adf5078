// SPDX-License-Identifier: Apache-2.0
//! Fuzz target for the stats page's HTTP/1.1 request head (`stats::parse_head`,
//! `stats::respond`), on the shared mutator of `testkit::fuzzkit`. The gRPC side (HTTP/2,
//! HPACK, gRPC framing, protobuf) is fuzzed in the `discovery` crate.
//!
//! Oracles: no panic; a head is answered once its blank line is in and never before, or once
//! `HEAD_LIMIT` bytes came without one; every longer read gives the same answer; a GET path
//! starts with `/` and comes from the request line; the response's `content-length` is its
//! body's length and the whole response stays small.
#![allow(clippy::unwrap_used)]

use testkit::fuzzkit::{run, Mutator, Target, Verdict};

use crate::registry::Totals;
use crate::stats::{parse_head, respond, Head, HEAD_LIMIT};

fn check_response(r: &[u8], head_only: bool) -> Result<(), String> {
    let text = String::from_utf8_lossy(r);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return Err(format!("response without a blank line: {text:?}"));
    };
    let status_ok = head.len() > 12
        && head.starts_with("HTTP/1.1 ")
        && head.as_bytes()[9..12].iter().all(u8::is_ascii_digit);
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .and_then(|n| n.parse::<usize>().ok());
    let body_ok = if head_only { body.is_empty() } else { length == Some(body.len()) };
    if !status_ok || length.is_none() || !body_ok || r.len() > 1024 {
        return Err(format!("response {text:?}"));
    }
    Ok(())
}

#[test]
fn fuzz_target_stats() {
    let seeds = [
        &b"GET /stats HTTP/1.1\r\nHost: x\r\n\r\n"[..],
        b"HEAD / HTTP/1.0\r\n\r\n",
        b"GET /stats?x=1 HTTP/1.1\r\nUser-Agent: curl\r\nAccept: */*\r\n\r\n",
        b"POST /x HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
        b"GET /partial HTTP/1.1\r\nHost",
    ]
    .iter()
    .map(|s| s.to_vec())
    .collect();
    let target = Target {
        name: "stats",
        crate_dir: env!("CARGO_MANIFEST_DIR"),
        seeds,
        mutator: Mutator {
            dict: &[
                b"\r\n",
                b"\r\n\r\n",
                b" ",
                b"GET ",
                b"HEAD ",
                b"/",
                b"HTTP/1.",
                b"\n",
                b"\xff",
            ],
            lengths: None,
            max_len: 2 * HEAD_LIMIT,
        },
        default_iters: 100_000,
    };
    let totals = Totals { clusters: 1, affiliates: 2, endpoints: 3, watchers: 4, bytes: 5 };
    run(target, |b| {
        let head = parse_head(b);
        let terminated = b.windows(4).position(|w| w == b"\r\n\r\n");
        match (&head, terminated) {
            (Head::Partial, None) if b.len() < HEAD_LIMIT => {}
            (Head::Partial, _) => {
                return Err("a complete or oversized head is still partial".into())
            }
            (_, None) if b.len() < HEAD_LIMIT => {
                return Err(format!("answered {head:?} before the blank line"));
            }
            (Head::Get { path, .. }, Some(end)) => {
                let line = &b[..end];
                if !path.starts_with('/') || !line.windows(path.len()).any(|w| w == path.as_bytes())
                {
                    return Err(format!("path {path:?}"));
                }
            }
            _ => {}
        }
        // More bytes after a complete head change nothing.
        if let Some(end) = terminated {
            let mut longer = b.to_vec();
            longer.extend_from_slice(b"GET /other HTTP/1.1\r\n\r\n");
            if parse_head(&longer) != head || parse_head(&b[..end + 4]) != head {
                return Err(format!("the answer {head:?} depends on bytes after the head"));
            }
        }
        match respond(b, &totals, &crate::metrics::Metrics::default()) {
            None if head == Head::Partial => Ok(Verdict::Refused),
            None => Err(format!("no response to {head:?}")),
            Some(r) => {
                check_response(&r, matches!(head, Head::Get { head_only: true, .. }))?;
                Ok(if matches!(head, Head::Get { .. }) {
                    Verdict::Accepted
                } else {
                    Verdict::Refused
                })
            }
        }
    });
}
