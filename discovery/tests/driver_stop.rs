// SPDX-License-Identifier: Apache-2.0
//! The driver honours Stop promptly whatever it is waiting for: a server that accepts the TCP
//! connection and never answers Hello, and a target whose connection attempt hangs.
#![allow(clippy::disallowed_methods)] // Tests and examples drive keelson from outside: plain threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

use std::net::TcpListener;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use discovery::{Command, Config, Event, Target};

fn start(target: Target) -> (discovery::Handle, mpsc::Receiver<Event>) {
    let cfg = Config {
        target,
        cluster_id: "c".into(),
        affiliate_id: "me".into(),
        key: [1; 32],
        client_version: "v0.1.0".into(),
        ttl: Duration::from_secs(60),
        roots: Arc::new(rustls::RootCertStore::empty()),
    };
    let (tx, rx) = mpsc::channel();
    let h = discovery::spawn(cfg, Box::new(move |e| drop(tx.send(e)))).unwrap();
    (h, rx)
}

/// The notify closure is dropped when the driver thread returns: the channel disconnects.
fn stops_within(rx: &mpsc::Receiver<Event>, limit: Duration) {
    let t = Instant::now();
    loop {
        match rx.recv_timeout(limit.saturating_sub(t.elapsed())) {
            Ok(_) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
            Err(mpsc::RecvTimeoutError::Timeout) => panic!("driver still running after {limit:?}"),
        }
    }
}

#[test]
fn stop_while_hello_is_unanswered() {
    // Accepted by the kernel's backlog, never read.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let (h, rx) = start(Target { host: "127.0.0.1".into(), port, tls: false });
    std::thread::sleep(Duration::from_millis(1500));
    assert!(h.send(Command::Stop));
    stops_within(&rx, Duration::from_secs(2));
    assert!(!h.send(Command::Delete), "a stopped client refuses commands");
}

#[test]
fn drop_while_connecting() {
    // TEST-NET-1 is not routed: the connect attempt hangs (or fails at once without a route).
    let (h, rx) = start(Target { host: "192.0.2.1".into(), port: 9, tls: true });
    std::thread::sleep(Duration::from_millis(1500));
    drop(h);
    stops_within(&rx, Duration::from_secs(2));
}
