// SPDX-License-Identifier: Apache-2.0
//! Fuzz target `etcd`: what an etcd (or anything claiming to be one) answers, from the HTTP/1.1
//! bytes up: [`ResponseDecoder`], [`FrameSplitter`], the frame and unary decoders for watch,
//! keep-alive, range and txn answers, and the election machine fed the decoded answer.
//!
//! Oracles: no panic; one read, three, or a byte at a time give the same status, body and
//! outcome (and the same frames from [`StreamReader`]); the body is never longer than the input; frames are whole JSON objects, at most
//! `MAX_FRAME`, and frames plus what is pending never exceed the body; decoded keys and values
//! hold no more bytes than their frame; a non-2xx status is always an error whose text holds no
//! control character; the election never reports leading unless the answer held its own key
//! at its own create revision.

use testkit::fuzzkit::{run, Mutator, Target, Verdict};

use crate::decode::{frame, unary, FrameSplitter, MAX_FRAME};
use crate::election::{Election, Step};
use crate::http::{HttpError, ResponseDecoder};
use crate::stream::{StreamError, StreamReader};
use crate::wire::*;

const LIMIT: usize = 64 << 10;

fn decode(parts: &[&[u8]]) -> (Option<u16>, Vec<u8>, Result<bool, HttpError>) {
    let mut d = ResponseDecoder::new(LIMIT);
    let mut body = Vec::new();
    let mut done = Ok(false);
    for p in parts {
        done = d.feed(p, &mut body);
        if done.is_err() {
            break;
        }
    }
    (d.status(), body, done)
}

fn chunked(frames: &[&str]) -> Vec<u8> {
    let mut out =
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            .to_vec();
    for f in frames {
        out.extend_from_slice(format!("{:x}\r\n{f}\n\r\n", f.len() + 1).as_bytes());
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

fn unary_response(status: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The stream reader over `parts`: the watch frames it gave and how it ended.
fn stream(parts: &[&[u8]]) -> (Vec<WatchResponse>, Result<(), StreamError>) {
    let mut r = StreamReader::<WatchResponse>::new("watch");
    let mut out = Vec::new();
    let mut end = Ok(());
    for p in parts {
        end = r.feed(p);
        while let Ok(Some(f)) = r.next_frame() {
            out.push(f);
        }
        if end.is_err() {
            break;
        }
    }
    (out, end)
}

fn payload_bytes(kv: &KeyValue) -> usize {
    kv.key.len() + kv.value.len()
}

fn seeds() -> Vec<Vec<u8>> {
    vec![
        chunked(&[
            r#"{"result":{"header":{"cluster_id":"1","member_id":"2","revision":"7","raft_term":"2"},"created":true}}"#,
            r#"{"result":{"header":{"revision":"8"},"events":[{"kv":{"key":"L3cveA==","create_revision":"8","mod_revision":"8","version":"1","value":"MQ=="}},{"type":"DELETE","kv":{"key":"L3cveQ==","mod_revision":"8"}}]}}"#,
            r#"{"result":{"header":{},"canceled":true,"compact_revision":"9"}}"#,
            r#"{"error":{"grpc_code":14,"http_code":503,"message":"transport is closing","http_status":"Service Unavailable"}}"#,
        ]),
        chunked(&[
            r#"{"result":{"header":{"revision":"3"},"ID":"2324035544147999527","TTL":"60"}}"#,
        ]),
        unary_response(
            "200 OK",
            r#"{"header":{"revision":"30"},"succeeded":true,"responses":[{"response_range":{"header":{"revision":"30"},"kvs":[]}},{"response_range":{"header":{"revision":"30"},"kvs":[{"key":"ZS8x","create_revision":"28","mod_revision":"28","version":"1","value":"YQ==","lease":"1"}],"count":"1"}}]}"#,
        ),
        unary_response(
            "200 OK",
            r#"{"header":{"revision":"4"},"responses":[{"response_range":{"header":{"revision":"4"},"kvs":[{"key":"ZS8x","create_revision":"4","mod_revision":"4","version":"1","value":"bm9kZS1h"}],"count":"1"}},{"response_put":{"header":{"revision":"4"}}},{"response_delete_range":{"deleted":"1"}}]}"#,
        ),
        unary_response(
            "404 Not Found",
            r#"{"error":"etcdserver: requested lease not found","message":"etcdserver: requested lease not found","code":5}"#,
        ),
        unary_response(
            "400 Bad Request",
            r#"{"code":11,"message":"etcdserver: mvcc: required revision has been compacted"}"#,
        ),
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 200 OK\r\n\r\n{\"header\":{}}".to_vec(),
    ]
}

fn check_frame(f: &[u8]) -> Result<(), String> {
    if f.len() > MAX_FRAME || f.first() != Some(&b'{') || f.last() != Some(&b'}') {
        return Err(format!("a frame of {} bytes that is not one object", f.len()));
    }
    if let Ok(w) = frame::<WatchResponse>("watch", f) {
        let held: usize = w
            .events
            .iter()
            .map(|e| payload_bytes(&e.kv) + e.prev_kv.as_ref().map_or(0, payload_bytes))
            .sum();
        if held > f.len() {
            return Err(format!("{held} event bytes from a frame of {}", f.len()));
        }
    }
    let _ = frame::<LeaseKeepAliveResponse>("keepalive", f);
    Ok(())
}

fn check_unary(status: u16, body: &[u8]) -> Result<(), String> {
    let r = unary::<TxnResponse>("txn", status, body);
    if !(200..300).contains(&status) {
        match &r {
            Err(crate::DecodeError::Server { message, .. }) => {
                if message.chars().any(char::is_control) {
                    return Err(format!("a control character in {message:?}"));
                }
            }
            other => return Err(format!("status {status} decoded as {other:?}")),
        }
    }
    if let Ok(t) = r {
        // The election checking its place: it may lead only if its own key is in the answer.
        let mut e = Election::new(b"e", 1, b"a");
        e.campaign();
        let created = TxnResponse {
            header: ResponseHeader { revision: 28, ..Default::default() },
            succeeded: true,
            responses: vec![],
        };
        e.answered(&created);
        let own = t.range(1).and_then(|r| r.kvs.first()).is_some_and(|kv| kv.create_revision == 28);
        if e.answered(&t) == Step::Elected && !own {
            return Err("elected without its own key".into());
        }
    }
    let _ = unary::<RangeResponse>("range", status, body);
    Ok(())
}

#[test]
fn fuzz_target_etcd() {
    let target = Target {
        name: "etcd",
        crate_dir: env!("CARGO_MANIFEST_DIR"),
        seeds: seeds(),
        mutator: Mutator {
            dict: &[
                b"\r\n",
                b"0\r\n\r\n",
                b"Transfer-Encoding: chunked\r\n",
                b"Content-Length: ",
                b"{\"result\":",
                b"{\"error\":",
                b"\"",
                b"\\\"",
                b"}",
                b"{",
                b"[",
                b"]",
                b"\"9223372036854775808\"",
                b"\"-1\"",
                b"\"AA==\"",
                b"\"DELETE\"",
                b"true",
            ],
            lengths: None,
            max_len: 16 << 10,
        },
        default_iters: 8_000,
    };
    run(target, |b| {
        let whole = decode(&[b]);
        let (a, rest) = b.split_at(b.len() / 3);
        let (m, z) = rest.split_at(rest.len() / 2);
        if decode(&[a, m, z]) != whole {
            return Err("three reads decode differently from one".into());
        }
        let bytes: Vec<&[u8]> = b.chunks(1).collect();
        if decode(&bytes) != whole {
            return Err("a byte at a time decodes differently from one read".into());
        }
        let streamed = stream(&[b]);
        if stream(&bytes) != streamed {
            return Err("the stream reader gives other frames a byte at a time".into());
        }
        let (status, body, done) = whole;
        if body.len() > b.len() {
            return Err(format!("a body of {} bytes from {} bytes", body.len(), b.len()));
        }
        let Some(status) = status else { return Ok(Verdict::Refused) };
        let mut s = FrameSplitter::new(4096);
        s.push(&body);
        let mut framed = 0;
        while let Ok(Some(f)) = s.next_frame() {
            framed += f.len();
            check_frame(&f)?;
        }
        if framed + s.pending() > body.len() {
            return Err(format!("{framed} framed + {} pending from {}", s.pending(), body.len()));
        }
        check_unary(status, &body)?;
        Ok(if done == Ok(true) { Verdict::Accepted } else { Verdict::Refused })
    });
}
