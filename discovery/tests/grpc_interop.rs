// SPDX-License-Identifier: Apache-2.0
//! The client against a gRPC server that is not ours: Python grpcio (its C core's HTTP/2 and
//! HPACK, Huffman included) serving the discovery service from `discovery_server.py` on
//! loopback. Two clients must see each other's decrypted affiliates and endpoints, including
//! endpoints reported on another's behalf; a client sent to a redirecting server must follow
//! the redirect and meet a peer on the other server.
#![allow(clippy::disallowed_methods)] // Tests and examples drive keelson from outside: plain threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command as Process, Stdio};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use rustls::pki_types::{pem::PemObject, CertificateDer};

use discovery::{Command, Config, Event, Handle, Target};

#[path = "support/peers.rs"]
mod peers;
use peers::{data, has, wait_members};

struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// grpcio is installed by scripts/setup; without it the test skips, or fails in CI.
fn grpcio_available() -> bool {
    let ok =
        Process::new("python3").args(["-c", "import grpc"]).status().is_ok_and(|s| s.success());
    if !ok {
        if std::env::var("KEELSON_REQUIRE_ROOT").as_deref() == Ok("1") {
            panic!("python3 grpcio is missing (scripts/setup installs it)");
        }
        eprintln!("SKIP: python3 grpcio is missing (scripts/setup installs it)");
    }
    ok
}

fn server(redirect: Option<u16>) -> Server {
    server_with(redirect, None)
}

fn server_with(redirect: Option<u16>, tls: Option<(&Path, &Path)>) -> Server {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/discovery_server.py");
    let mut cmd = Process::new("python3");
    cmd.arg(script).stdin(Stdio::piped()).stdout(Stdio::piped());
    if let Some(p) = redirect {
        cmd.args(["--redirect", &format!("127.0.0.1:{p}")]);
    }
    if let Some((cert, key)) = tls {
        cmd.arg("--tls").arg(cert).arg(key);
    }
    let mut child = cmd.spawn().expect("python3");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let port =
        line.trim().strip_prefix("PORT ").expect("server announced its port").parse().unwrap();
    Server { child, port }
}

fn client(port: u16, id: &str) -> (Handle, mpsc::Receiver<Event>) {
    client_with(&format!("http://127.0.0.1:{port}/"), id, rustls::RootCertStore::empty())
}

fn client_with(
    url: &str,
    id: &str,
    roots: rustls::RootCertStore,
) -> (Handle, mpsc::Receiver<Event>) {
    let cfg = Config {
        target: Target::from_url(url).unwrap(),
        cluster_id: "interop-cluster".into(),
        affiliate_id: id.into(),
        key: [0x5a; 32],
        client_version: "v0.1.0".into(),
        ttl: Duration::from_secs(60),
        roots: Arc::new(roots),
    };
    let (tx, rx) = mpsc::channel();
    let h = discovery::spawn(
        cfg,
        Box::new(move |e| {
            let _ = tx.send(e);
        }),
    )
    .unwrap();
    (h, rx)
}

#[test]
fn two_clients_meet_through_grpcio() {
    if !grpcio_available() {
        return;
    }
    let srv = server(None);
    let (a, arx) = client(srv.port, "node-a");
    let (b, brx) = client(srv.port, "node-b");
    // node-a also reports an endpoint it saw for node-b.
    assert!(a.send(Command::Publish(data(
        "node-a",
        "192.0.2.1:51820",
        &[("node-b", "198.51.100.2:40000")]
    ))));
    assert!(b.send(Command::Publish(data("node-b", "[2001:db8::2]:51820", &[]))));
    let seen = wait_members(&arx, |m| {
        m.len() == 1 && has(m, "node-b", &["[2001:db8::2]:51820", "198.51.100.2:40000"])
    });
    assert!(seen.contains(&Event::PublicIp("127.0.0.1".parse().unwrap())), "{seen:?}");
    assert!(
        seen.contains(&Event::Connected { endpoint: format!("127.0.0.1:{}", srv.port) }),
        "{seen:?}"
    );
    wait_members(&brx, |m| m.len() == 1 && has(m, "node-a", &["192.0.2.1:51820"]));

    // Delete: node-a disappears from node-b's view.
    assert!(a.send(Command::Delete));
    wait_members(&brx, |m| m.is_empty());
    drop(a);
    drop(b);
}

#[test]
fn redirect_is_followed() {
    if !grpcio_available() {
        return;
    }
    let target = server(None);
    let redirector = server(Some(target.port));
    let (c, crx) = client(redirector.port, "node-c");
    let (d, drx) = client(target.port, "node-d");
    assert!(c.send(Command::Publish(data("node-c", "192.0.2.3:51820", &[]))));
    assert!(d.send(Command::Publish(data("node-d", "192.0.2.4:51820", &[]))));
    let seen = wait_members(&crx, |m| has(m, "node-d", &["192.0.2.4:51820"]));
    let redirected = format!("redirected to 127.0.0.1:{}", target.port);
    assert!(
        seen.iter().any(|e| matches!(e, Event::Error(m) if m.contains(&redirected))),
        "{seen:?}"
    );
    assert!(
        seen.contains(&Event::Connected { endpoint: format!("127.0.0.1:{}", target.port) }),
        "{seen:?}"
    );
    wait_members(&drx, |m| has(m, "node-c", &["192.0.2.3:51820"]));
}

fn roots(pem: &Path) -> rustls::RootCertStore {
    let mut r = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(pem).unwrap() {
        r.add(c.unwrap()).unwrap();
    }
    r
}

/// TLS 1.3 with ALPN h2 against grpcio's TLS stack; a server certificate from another CA is
/// refused and reported, and the client never connects.
#[test]
fn tls_with_the_right_and_the_wrong_ca() {
    if !grpcio_available() {
        return;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("discovery-ca-{}", std::process::id()));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/test-ca");
    assert!(Process::new(script).arg(&dir).arg("127.0.0.1").status().unwrap().success());
    let srv = server_with(None, Some((&dir.join("server.pem"), &dir.join("server.key"))));
    let url = format!("https://127.0.0.1:{}/", srv.port);
    let (e, erx) = client_with(&url, "node-e", roots(&dir.join("ca.pem")));
    let (f, frx) = client_with(&url, "node-f", roots(&dir.join("ca.pem")));
    assert!(e.send(Command::Publish(data("node-e", "192.0.2.5:51820", &[]))));
    assert!(f.send(Command::Publish(data("node-f", "192.0.2.6:51820", &[]))));
    let seen = wait_members(&erx, |m| has(m, "node-f", &["192.0.2.6:51820"]));
    assert!(
        seen.contains(&Event::Connected { endpoint: format!("127.0.0.1:{}", srv.port) }),
        "{seen:?}"
    );
    wait_members(&frx, |m| has(m, "node-e", &["192.0.2.5:51820"]));

    let (_g, grx) = client_with(&url, "node-g", roots(&dir.join("other-ca.pem")));
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut errors = Vec::new();
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match grx.recv_timeout(left) {
            Ok(Event::Error(m)) => errors.push(m),
            Ok(Event::Connected { .. }) | Ok(Event::Members(_)) => {
                panic!("connected with the wrong CA")
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    assert!(
        errors.iter().any(|m| m.contains("TLS handshake") && m.contains("certificate")),
        "{errors:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
