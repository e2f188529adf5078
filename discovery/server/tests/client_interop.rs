// SPDX-License-Identifier: Apache-2.0
//! keelson's own discovery client (the `discovery` crate, as a node runs it) against the real
//! keelson-discovery-server: two nodes see each other's decrypted affiliates and endpoints
//! (including one reported on another's behalf), a deletion reaches the peer, and a client
//! sent to a redirecting server meets a peer on the other one.
#![allow(clippy::disallowed_methods)] // Tests and examples drive keelson from outside: plain threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command as Process, Stdio};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use discovery::{Command, Config, Event, Handle, Target};

#[path = "../../tests/support/peers.rs"]
mod peers;
use peers::{data, has, wait_members};

struct Server {
    child: Child,
    addr: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn server(args: &[&str]) -> Server {
    let mut cmd = Process::new(env!("CARGO_BIN_EXE_keelson-discovery-server"));
    if !args.contains(&"--addr") {
        cmd.args(["--addr", "127.0.0.1:0"]);
    }
    let mut child =
        cmd.args(args).stderr(Stdio::piped()).spawn().expect("start keelson-discovery-server");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().expect("server exited").unwrap();
        if let Some(rest) = line.split("serving on ").nth(1) {
            break rest.split(' ').next().unwrap().to_owned();
        }
    };
    std::thread::spawn(move || lines.map_while(Result::ok).for_each(|l| eprintln!("server: {l}")));
    Server { child, addr }
}

fn client(addr: &str, id: &str) -> (Handle, mpsc::Receiver<Event>) {
    let cfg = Config {
        target: Target::from_url(&format!("http://{addr}/")).unwrap(),
        cluster_id: "keelson-interop".into(),
        affiliate_id: id.into(),
        key: [0x42; 32],
        client_version: "v0.1.0".into(),
        ttl: Duration::from_secs(60),
        roots: Arc::new(rustls::RootCertStore::empty()),
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
fn two_keelson_clients_meet_and_part_through_the_server() {
    let srv = server(&[]);
    let (a, arx) = client(&srv.addr, "node-a");
    let (b, brx) = client(&srv.addr, "node-b");
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
    wait_members(&brx, |m| m.len() == 1 && has(m, "node-a", &["192.0.2.1:51820"]));
    assert!(a.send(Command::Delete));
    wait_members(&brx, |m| m.is_empty());
}

#[test]
fn a_keelson_client_follows_the_servers_redirect() {
    let target = server(&[]);
    let redirector = server(&["--redirect", &target.addr]);
    let (c, crx) = client(&redirector.addr, "node-c");
    let (d, drx) = client(&target.addr, "node-d");
    assert!(c.send(Command::Publish(data("node-c", "192.0.2.3:51820", &[]))));
    assert!(d.send(Command::Publish(data("node-d", "192.0.2.4:51820", &[]))));
    let seen = wait_members(&crx, |m| has(m, "node-d", &["192.0.2.4:51820"]));
    assert!(seen.contains(&Event::Connected { endpoint: target.addr.clone() }), "{seen:?}");
    wait_members(&drx, |m| has(m, "node-c", &["192.0.2.3:51820"]));
}

fn stats(addr: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(addr).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(3))).ok()?;
    write!(c, "GET /stats HTTP/1.1\r\nHost: x\r\n\r\n").ok()?;
    let mut out = String::new();
    c.read_to_string(&mut out).ok()?;
    Some(out)
}

#[test]
fn clients_come_back_to_a_server_restarted_from_its_snapshot() {
    let dir = std::env::temp_dir().join(format!("keelson-dsrv-restart-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let snap = dir.join("state.binpb");
    let snap = snap.to_str().unwrap();
    let mut srv = server(&["--snapshot", snap, "--gc-interval", "1s"]);
    let addr = srv.addr.clone();
    let (a, arx) = client(&addr, "node-a");
    let (b, _brx) = client(&addr, "node-b");
    assert!(a.send(Command::Publish(data("node-a", "192.0.2.1:51820", &[]))));
    assert!(b.send(Command::Publish(data("node-b", "192.0.2.2:51820", &[]))));
    wait_members(&arx, |m| has(m, "node-b", &["192.0.2.2:51820"]));
    let pid = nix::unistd::Pid::from_raw(srv.child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    assert!(srv.child.wait().unwrap().success());
    let _srv = server(&["--addr", &addr, "--snapshot", snap, "--gc-interval", "1s"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let s = stats(&addr);
        if s.as_deref().is_some_and(|s| s.contains("\"affiliates\":2,")) {
            break;
        }
        assert!(Instant::now() < deadline, "stats after the restart: {s:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    // The clients reconnect: a change node-b publishes reaches node-a through the new process.
    assert!(b.send(Command::Publish(data("node-b", "192.0.2.22:51820", &[]))));
    wait_members(&arx, |m| has(m, "node-b", &["192.0.2.22:51820"]));
    let s = stats(&addr);
    assert!(s.as_deref().is_some_and(|s| s.contains("\"affiliates\":2,")), "{s:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
