// SPDX-License-Identifier: Apache-2.0
//! The real keelson-discovery-server binary, driven over loopback by a client keelson did not
//! write: Python grpcio with stubs compiled from discovery/proto (tests/grpc_client.py).
//! `scripts/setup` installs grpcio, grpcio-tools and cryptography.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

struct Server {
    child: Child,
    addr: String,
}

impl Server {
    fn start(args: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_keelson-discovery-server"))
            .args(["--addr", "127.0.0.1:0"])
            .args(args)
            .stderr(Stdio::piped())
            .spawn()
            .expect("start keelson-discovery-server");
        let stderr = child.stderr.take().expect("stderr");
        let mut lines = BufReader::new(stderr).lines();
        let addr = loop {
            let line =
                lines.next().expect("the server exited before it listened").expect("read stderr");
            eprintln!("server: {line}");
            if let Some(rest) = line.split("serving on ").nth(1) {
                break rest.split(' ').next().unwrap_or_default().to_owned();
            }
        };
        // Keep draining the log so the server never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                eprintln!("server: {line}");
            }
        });
        Server { child, addr }
    }

    fn pid(&self) -> String {
        self.child.id().to_string()
    }

    /// SIGTERM, and the exit status.
    fn stop(mut self) -> std::process::ExitStatus {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("kill");
        let status = self.child.wait().expect("wait");
        std::mem::forget(self);
        status
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

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

#[test]
fn the_rate_limit_refuses_the_61st_call() {
    let s = Server::start(&["--rate", "1", "--burst", "60"]);
    client("ratelimit", &s.addr, &[]);
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
