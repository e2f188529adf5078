// SPDX-License-Identifier: Apache-2.0
//! HTTP/1 responses: the config fetch's `fetch::http::ResponseParser` and the kubelet health
//! probe's status line (`node::health::status_code`).
//!
//! Oracles: no panic; the same bytes in one read, in three, or a byte at a time give the same
//! outcome; a body never exceeds the input nor `MAX_BODY`; a reason phrase is at most 64
//! printable ASCII characters; a response written back out (with `Content-Length`) parses to
//! itself. The health probe takes a status only from `HTTP/1.x` and exactly three digits.

use testkit::fuzzkit::{run, Mutator, Target, Verdict};

use crate::fetch::http::{HttpError, Response, ResponseParser, MAX_BODY};
use crate::node::health::status_code;

fn parse(parts: &[&[u8]]) -> Result<Response, HttpError> {
    let mut p = ResponseParser::default();
    for part in parts {
        if p.feed(part)? {
            break;
        }
    }
    p.finish()
}

fn write(r: &Response) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {} {}\r\n", r.status, r.reason).into_bytes();
    if let Some(l) = &r.location {
        out.extend_from_slice(format!("Location: {l}\r\n").as_bytes());
    }
    out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", r.body.len()).as_bytes());
    out.extend_from_slice(&r.body);
    out
}

const DICT: &[&[u8]] = &[
    b"\r\n",
    b"\n",
    b"\r\n\r\n",
    b"HTTP/1.1 ",
    b"HTTP/1.0 ",
    b"100 Continue\r\n\r\n",
    b"Content-Length: ",
    b"Transfer-Encoding: chunked\r\n",
    b"Transfer-Encoding: identity, chunked\r\n",
    b"Content-Encoding: gzip\r\n",
    b"Location: ",
    b"0\r\n\r\n",
    b"ffffffff",
    b";ext=1",
    b": ",
    b" ",
    b"\t",
    b"+",
    b"-1",
    b"99999999999",
    b"5, 5",
    b"\x00",
    b"\xff",
];

fn seeds() -> Vec<Vec<u8>> {
    [
        &b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/yaml\r\n\r\nhello"[..],
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: 1\r\n\r\n",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 302 Found\nLocation: http://10.0.0.1/next\nContent-Length: 0\n\n",
        b"HTTP/1.0 200 OK\r\n\r\nbody to the end of the connection",
        b"HTTP/1.1 204 No Content\r\nContent-Length: 5, 5\r\n\r\n",
        b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found",
        b"HTTP/1.1 200 ok\r\n",
    ]
    .iter()
    .map(|s| s.to_vec())
    .collect()
}

#[test]
fn fuzz_target_http1() {
    let target = Target {
        name: "http1",
        crate_dir: super::CRATE_DIR,
        seeds: seeds(),
        mutator: Mutator { dict: DICT, lengths: None, max_len: 4096 },
        default_iters: 15_000,
    };
    run(target, |b| {
        let whole = parse(&[b]);
        let (a, c) = (b.len() / 3, 2 * b.len() / 3);
        if parse(&[&b[..a], &b[a..c], &b[c..]]) != whole {
            return Err(format!("three reads differ from one: {whole:?}"));
        }
        if b.len() <= 600 {
            let bytes: Vec<&[u8]> = b.chunks(1).collect();
            if parse(&bytes) != whole {
                return Err(format!("byte-at-a-time differs from one read: {whole:?}"));
            }
        }
        let health = status_code(b);
        if let Some(code) = health {
            let line = b.split(|c| *c == b'\n').next().unwrap_or_default();
            let text = String::from_utf8_lossy(line);
            let mut words = text.split_ascii_whitespace();
            let ok = words.next().is_some_and(|v| v.starts_with("HTTP/1."))
                && words.next().is_some_and(|c| {
                    c.len() == 3 && c.bytes().all(|d| d.is_ascii_digit()) && c.parse() == Ok(code)
                });
            if !ok {
                return Err(format!("health probe read status {code} from {text:?}"));
            }
        }
        let Ok(r) = whole else {
            return Ok(if health.is_some() { Verdict::Accepted } else { Verdict::Refused });
        };
        if r.body.len() > b.len() || r.body.len() > MAX_BODY {
            return Err(format!("a body of {} bytes from {} bytes", r.body.len(), b.len()));
        }
        if r.reason.len() > 64 || !r.reason.bytes().all(|c| (b' '..=b'~').contains(&c)) {
            return Err(format!("reason {:?}", r.reason));
        }
        if !(200..600).contains(&r.status) {
            return Err(format!("final status {}", r.status));
        }
        let again = parse(&[&write(&r)]);
        if again.as_ref() != Ok(&r) {
            return Err(format!("{r:?} written out parsed as {again:?}"));
        }
        Ok(Verdict::Accepted)
    });
}

/// Found by `fuzz_target_http1` (corpus file `health-signed-status.hex`): the health probe
/// read `+04` as status 4, as `str::parse` takes a sign.
#[test]
fn the_health_probe_takes_only_three_digits_as_a_status() {
    assert_eq!(status_code(b"HTTP/1.1 +04 No Content\r\n"), None);
    assert_eq!(status_code(b"HTTP/1.1 +20 OK\r\n"), None);
    assert_eq!(status_code(b"HTTP/1.1 204 No Content\r\n"), Some(204));
}
