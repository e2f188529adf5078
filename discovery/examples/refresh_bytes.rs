// SPDX-License-Identifier: Apache-2.0
//! Bytes one client sends per refresh (scripts/bench-discovery). A counting TCP relay sits
//! between the client and a server given as `HOST:PORT`; the client publishes a node like a
//! KubeSpan one (three addresses, a KubeSpan part, two endpoints), then changes its hostname
//! ROUNDS times. Each change is one refresh (Talos's periodic refresh sends the same bytes:
//! the data is re-encrypted to the same length). Prints the connect cost and each refresh.
#![allow(clippy::disallowed_methods)] // Tests and examples drive keelson from outside: plain threads and sleeps are fine.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use discovery::{Affiliate, Command, Config, Event, KubeSpan, LocalData, Target};

fn relay(server: String, sent: Arc<AtomicU64>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let upstream = TcpStream::connect(&server).unwrap();
            let (mut c_in, mut u_out) =
                (client.try_clone().unwrap(), upstream.try_clone().unwrap());
            let counter = sent.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 16384];
                while let Ok(n) = c_in.read(&mut buf) {
                    if n == 0 || u_out.write_all(&buf[..n]).is_err() {
                        break;
                    }
                    counter.fetch_add(n as u64, Ordering::SeqCst);
                }
            });
            let (mut u_in, mut c_out) = (upstream, client);
            std::thread::spawn(move || {
                let mut buf = [0u8; 16384];
                while let Ok(n) = u_in.read(&mut buf) {
                    if n == 0 || c_out.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    port
}

fn data(hostname: &str) -> LocalData {
    LocalData {
        affiliate: Affiliate {
            node_id: "bench-node-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".into(),
            addresses: vec![
                "10.0.0.11".parse().unwrap(),
                "192.168.100.11".parse().unwrap(),
                "2001:db8::11".parse().unwrap(),
            ],
            hostname: hostname.into(),
            nodename: "worker-1".into(),
            machine_type: "worker".into(),
            operating_system: "keelson (v0.1.0)".into(),
            kubespan: Some(KubeSpan {
                public_key: "mN2Y4Lwd9lrhXsRO6zOWFFAqdWGHcNGHmN3X87b5Fjc=".into(),
                address: Some("fd7f:175a:b97c:5602:5054:ff:fe00:1".parse().unwrap()),
                additional_addresses: Vec::new(),
                exclude_advertised_addresses: Vec::new(),
            }),
            control_plane: None,
        },
        endpoints: vec![
            "10.0.0.11:51820".parse().unwrap(),
            "[2001:db8::11]:51820".parse().unwrap(),
        ],
        others: Vec::new(),
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let server = args.next().expect("usage: refresh_bytes HOST:PORT [ROUNDS]");
    let rounds: usize = args.next().and_then(|r| r.parse().ok()).unwrap_or(5);
    let sent = Arc::new(AtomicU64::new(0));
    let port = relay(server, sent.clone());
    let (tx, rx) = mpsc::channel();
    let cfg = Config {
        target: Target { host: "127.0.0.1".into(), port, tls: false },
        cluster_id: "bench-cluster-bytes-per-refresh".into(),
        affiliate_id: "bench-node-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".into(),
        key: [7; 32],
        client_version: "v0.1.0".into(),
        ttl: Duration::from_secs(1800),
        roots: Arc::new(rustls::RootCertStore::empty()),
    };
    let handle = discovery::spawn(cfg, Box::new(move |e| drop(tx.send(e)))).unwrap();
    handle.send(Command::Publish(data("worker-1.example.org")));
    // Connected, Hello, Watch and the first refresh; then let it settle.
    while !matches!(rx.recv_timeout(Duration::from_secs(30)).unwrap(), Event::Members(_)) {}
    std::thread::sleep(Duration::from_secs(2));
    let mut last = sent.load(Ordering::SeqCst);
    println!("connect (preface, SETTINGS, Hello, Watch, first refresh): {last} bytes");
    let mut each = Vec::new();
    for i in 0..rounds {
        // The same length as the first hostname: the data is the same size each time.
        handle.send(Command::Publish(data(&format!("worker-{}.example.org", (i + 2) % 10))));
        std::thread::sleep(Duration::from_secs(2));
        let now = sent.load(Ordering::SeqCst);
        each.push(now - last);
        last = now;
    }
    each.sort_unstable();
    println!(
        "refresh (AffiliateUpdate with data and 2 endpoints): median {} bytes, min {}, max {}",
        each[each.len() / 2],
        each[0],
        each[each.len() - 1]
    );
    handle.send(Command::Stop);
}
