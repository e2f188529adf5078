// SPDX-License-Identifier: Apache-2.0
//! The real keelson-discovery-server binary, driven over loopback by a client keelson did not
//! write: Python grpcio with stubs compiled from discovery/proto (tests/grpc_client.py).
//! `scripts/setup` installs grpcio, grpcio-tools and cryptography.
#![allow(clippy::disallowed_methods)] // Tests and examples drive keelson from outside: plain threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::Server;

fn client(scenario: &str, addr: &str, args: &[&str]) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/grpc_client.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(scenario)
        .arg(addr)
        .args(args)
        .output()
        .expect("run python3 (scripts/setup installs it with grpcio)");
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "grpcio scenario {scenario} failed (scripts/setup installs grpcio):\n{text}"
    );
    assert!(text.contains(&format!("ok {scenario}")), "{text}");
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("keelson-dsrv-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

#[test]
fn hello_reports_the_peer_address_and_ignores_proxy_headers_by_default() {
    let s = Server::start(&[]);
    client("hello", &s.addr, &[]);
}

#[test]
fn hello_trusts_proxy_headers_when_told_and_redirects() {
    let s = Server::start(&["--trust-proxy-headers", "--redirect", "new.example.com:443"]);
    client("hello_proxy", &s.addr, &["new.example.com:443"]);
}

#[test]
fn updates_merge_endpoints_in_order_and_list_shows_them() {
    let s = Server::start(&[]);
    client("merge", &s.addr, &[]);
}

#[test]
fn watch_sends_the_snapshot_then_one_message_per_change() {
    let s = Server::start(&[]);
    client("watch", &s.addr, &[]);
}

#[test]
fn validation_errors_carry_the_protocol_codes() {
    // 1,100 calls: the per-address rate limit is raised out of the way.
    let s = Server::start(&["--rate", "100000", "--burst", "100000"]);
    client("validation", &s.addr, &[]);
}

// One token per 100 s: however slow the machine, no token comes back during the test.
#[test]
fn the_rate_limit_refuses_the_61st_call() {
    let s = Server::start(&["--rate", "0.01", "--burst", "60"]);
    client("ratelimit", &s.addr, &[]);
}

#[test]
fn metrics_count_calls_by_method_and_code_for_prometheus_parsers_and_promtool() {
    let s = Server::start(&["--rate", "0.01", "--burst", "5"]);
    client("metrics", &s.addr, &[]);
}

#[test]
fn behind_a_trusted_proxy_each_forwarded_address_has_its_own_bucket() {
    let s = Server::start(&["--rate", "0.01", "--burst", "60", "--trust-proxy-headers"]);
    client("ratelimit", &s.addr, &["proxied"]);
}

fn pb_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// A length-delimited protobuf field.
fn pb_field(out: &mut Vec<u8>, field: u32, payload: &[u8]) {
    pb_varint(out, u64::from(field << 3 | 2));
    pb_varint(out, payload.len() as u64);
    out.extend_from_slice(payload);
}

#[test]
fn a_snapshot_of_tiny_records_loads_within_the_limits() {
    // Two million empty endpoint records in one affiliate, and half a million affiliates of
    // a 1-byte ID in another cluster: 6.5 MB of file that, decoded whole, is hundreds of MB.
    let mut fat = Vec::new();
    pb_field(&mut fat, 1, b"a");
    for _ in 0..2_000_000 {
        pb_field(&mut fat, 4, b"");
    }
    let mut c1 = Vec::new();
    pb_field(&mut c1, 1, b"fat");
    pb_field(&mut c1, 2, &fat);
    let mut c2 = Vec::new();
    pb_field(&mut c2, 1, b"many");
    for _ in 0..500_000 {
        pb_field(&mut c2, 2, b"\x0a\x01b");
    }
    let mut file = Vec::new();
    pb_field(&mut file, 1, &c1);
    pb_field(&mut file, 1, &c2);
    let dir = scratch("tiny");
    let path = dir.join("state.binpb");
    std::fs::write(&path, &file).unwrap();
    let s = Server::start(&["--snapshot", path.to_str().unwrap()]);
    let status = std::fs::read_to_string(format!("/proc/{}/status", s.pid())).unwrap();
    let kib: usize = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    eprintln!("peak RSS after loading {} bytes of tiny records: {kib} KiB", file.len());
    assert!(kib < 40 * 1024, "peak RSS {kib} KiB loading a {}-byte snapshot", file.len());
    // It serves, and holds what the limits allow: one affiliate of "many" (the same ID
    // repeated), none of "fat" (too many endpoints).
    client("snapshot_tiny", &s.addr, &[]);
    drop(s);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn ipv6_clients_share_a_bucket_per_64() {
    let s = Server::start(&["--rate", "0.01", "--burst", "60", "--trust-proxy-headers"]);
    client("ratelimit_v6", &s.addr, &[]);
}

#[test]
fn affiliates_expire_after_their_ttl() {
    let s = Server::start(&["--gc-interval", "200ms"]);
    client("expiry", &s.addr, &[]);
}

#[test]
fn a_restart_with_a_snapshot_keeps_the_blobs_and_the_file_holds_no_plaintext() {
    let dir = scratch("snap");
    let path = dir.join("state.binpb");
    let blobs = dir.join("blobs");
    let (p, b) = (path.to_str().unwrap(), blobs.to_str().unwrap());
    let s = Server::start(&["--snapshot", p]);
    client("snapshot_write", &s.addr, &[b]);
    assert!(s.stop().success(), "SIGTERM: the server did not exit cleanly");
    let file = std::fs::read(&path).expect("the snapshot was written at SIGTERM");
    let sent = std::fs::read(&blobs).expect("blobs");
    let data = &sent[2..2 + usize::from(u16::from_be_bytes([sent[0], sent[1]]))];
    assert!(file.windows(data.len()).any(|w| w == data), "the snapshot lacks the ciphertext");
    assert!(
        !file.windows(b"keelson-plaintext-marker".len()).any(|w| w == b"keelson-plaintext-marker"),
        "plaintext in the snapshot"
    );
    let s = Server::start(&["--snapshot", p]);
    client("snapshot_read", &s.addr, &[b]);
    drop(s);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_servers_memory_holds_only_ciphertext() {
    let s = Server::start(&[]);
    let pid = s.pid();
    client("memory", &s.addr, &[&pid]);
}

#[test]
fn stats_and_landing_page_over_http1_on_the_grpc_port() {
    let s = Server::start(&[]);
    client("merge", &s.addr, &[]);
    let get = |path: &str| {
        let mut c = TcpStream::connect(&s.addr).expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(c, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).expect("read");
        out
    };
    let stats = get("/stats");
    assert!(stats.starts_with("HTTP/1.1 200"), "{stats}");
    // The merge scenario deleted its affiliate; its cluster lingers until the next GC.
    assert!(stats.contains("\"affiliates\":0,\"endpoints\":0,\"watchers\":0"), "{stats}");
    assert!(get("/").contains("discovery"));
    assert!(get("/nope").starts_with("HTTP/1.1 404"));
}

#[test]
fn tls_with_alpn_h2() {
    let dir = scratch("tls");
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let ok = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"])
        .args(["-nodes", "-days", "1", "-subj", "/CN=localhost"])
        .args(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(Stdio::null())
        .status()
        .expect("openssl (scripts/setup installs it)");
    assert!(ok.success(), "openssl req failed");
    let s = Server::start(&["--cert", cert.to_str().unwrap(), "--key", key.to_str().unwrap()]);
    client("tls", &s.addr, &[cert.to_str().unwrap()]);
    drop(s);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A raw HTTP/2 client (the discovery crate's engine) that can stop reading on purpose.
struct RawWatch {
    sock: TcpStream,
    h: grpc::h2::Connection,
    stream: u32,
}

impl RawWatch {
    fn open(addr: &str, cluster: &str) -> RawWatch {
        use discovery::proto::{Message, WatchRequest};
        use grpc::h2::{Config, Connection, Role};
        let sock = TcpStream::connect(addr).expect("connect");
        sock.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        // A small window: the server can send little before the client must read.
        let mut h = Connection::new(
            Role::Client,
            Config { stream_window: 1024, conn_window: 65_535, ..Config::default() },
        );
        let stream = h
            .open_stream(
                &[
                    (":method", "POST"),
                    (":scheme", "http"),
                    (":path", "/sidero.discovery.server.Cluster/Watch"),
                    (":authority", "localhost"),
                    ("content-type", "application/grpc"),
                    ("te", "trailers"),
                ],
                false,
            )
            .expect("open stream");
        let msg = WatchRequest { cluster_id: cluster.into() }.encode();
        let framed = grpc::frame_message(&msg);
        h.send_data(stream, &framed, true).expect("send");
        let mut w = RawWatch { sock, h, stream };
        w.write();
        w
    }

    fn write(&mut self) {
        let out = self.h.take_output();
        self.sock.write_all(&out).expect("write");
    }

    /// Read until `done` says so; returns every event seen.
    fn read_until(
        &mut self,
        mut done: impl FnMut(&grpc::h2::Event) -> bool,
    ) -> Vec<grpc::h2::Event> {
        let mut seen = Vec::new();
        let mut buf = [0u8; 16384];
        loop {
            let n = self.sock.read(&mut buf).expect("read from the server");
            assert!(n > 0, "the server closed the connection");
            self.h.recv(&buf[..n]).expect("h2");
            self.write();
            while let Some(ev) = self.h.poll_event() {
                let stop = done(&ev);
                seen.push(ev);
                if stop {
                    return seen;
                }
            }
        }
    }
}

#[test]
fn a_watcher_that_stops_reading_is_dropped_with_aborted_and_others_go_on() {
    use grpc::h2::{field, Event};
    let s = Server::start(&["--rate", "100000", "--burst", "100000"]);
    let mut slow = RawWatch::open(&s.addr, "slow");
    let stream = slow.stream;
    slow.read_until(|e| matches!(e, Event::Data { stream: s, .. } if *s == stream));
    // The slow client reads nothing more while 300 updates of 2 KB go through.
    client("flood", &s.addr, &["slow", "300"]);
    let events = slow.read_until(
        |e| matches!(e, Event::Headers { stream: s, end_stream: true, .. } if *s == stream),
    );
    let Some(Event::Headers { fields, .. }) = events.last() else {
        panic!("no trailers");
    };
    assert_eq!(field(fields, "grpc-status"), Some(&b"10"[..]), "{fields:?}");
    let msg = String::from_utf8_lossy(field(fields, "grpc-message").unwrap_or_default());
    assert!(msg.contains("lost update"), "{msg}");
    let data: usize = events
        .iter()
        .filter_map(|e| match e {
            Event::Data { data, .. } => Some(data.len()),
            _ => None,
        })
        .sum();
    // It got what its queue and one window held, not all 600 KB.
    assert!(data < 300 * 2000 / 2, "{data} bytes reached the slow watcher");
}

#[test]
fn periodic_snapshots_survive_a_kill() {
    let dir = scratch("periodic");
    let path = dir.join("state.binpb");
    let blobs = dir.join("blobs");
    let (p, b) = (path.to_str().unwrap(), blobs.to_str().unwrap());
    let mut s = Server::start(&["--snapshot", p, "--snapshot-interval", "100ms"]);
    client("snapshot_write", &s.addr, &[b]);
    // Wait for a periodic write that holds both affiliates, then kill without warning.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::fs::read(&path)
        .map_or(true, |f| f.windows(6).filter(|w| w == b"node-a" || w == b"node-b").count() < 2)
    {
        assert!(std::time::Instant::now() < deadline, "no periodic snapshot");
        std::thread::sleep(Duration::from_millis(50));
    }
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    drop(s);
    let s = Server::start(&["--snapshot", p]);
    client("snapshot_read", &s.addr, &[b]);
    drop(s);
    std::fs::remove_dir_all(&dir).unwrap();
}
