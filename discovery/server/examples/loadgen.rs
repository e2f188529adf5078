// SPDX-License-Identifier: Apache-2.0
//! Load for scripts/bench-discovery-server, over the discovery crate's own HTTP/2 engine:
//!
//!   loadgen updates ADDR SECONDS CONNECTIONS   updates per second, pipelined
//!   loadgen fill ADDR AFFILIATES               that many affiliates, 1,000 per cluster
//!   loadgen watch ADDR WATCHERS EVENTS         event latency seen by that many watchers
#![allow(clippy::disallowed_methods)] // Tests and examples drive keelson from outside: plain threads and sleeps are fine.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use discovery::proto::{
    AffiliateUpdateRequest, Duration as PbDuration, Message, WatchRequest, WatchResponse,
};
use grpc::h2::{field, Config, Connection, Event, Role};

struct Client {
    sock: TcpStream,
    h: Connection,
}

impl Client {
    fn connect(addr: &str) -> Client {
        let sock = TcpStream::connect(addr).expect("connect");
        sock.set_nodelay(true).ok();
        let mut c = Client { sock, h: Connection::new(Role::Client, Config::default()) };
        c.write();
        c
    }

    fn write(&mut self) {
        let out = self.h.take_output();
        if !out.is_empty() {
            self.sock.write_all(&out).expect("write");
        }
    }

    fn start(&mut self, method: &str, msg: &[u8]) -> u32 {
        let path = discovery::service::path(method);
        let stream = self
            .h
            .open_stream(
                &[
                    (":method", "POST"),
                    (":scheme", "http"),
                    (":path", path.as_str()),
                    (":authority", "bench"),
                    ("content-type", "application/grpc"),
                    ("te", "trailers"),
                ],
                false,
            )
            .expect("open stream");
        let framed = grpc::frame_message(msg);
        self.h.send_data(stream, &framed, true).expect("send");
        stream
    }

    fn events(&mut self) -> Vec<Event> {
        let mut buf = [0u8; 65536];
        let n = self.sock.read(&mut buf).expect("read");
        assert!(n > 0, "server closed the connection");
        self.h.recv(&buf[..n]).expect("h2");
        self.write();
        std::iter::from_fn(|| self.h.poll_event()).collect()
    }
}

fn update(cluster: &str, id: &str, data: Vec<u8>, endpoints: Vec<Vec<u8>>) -> Vec<u8> {
    AffiliateUpdateRequest {
        cluster_id: cluster.into(),
        affiliate_id: id.into(),
        affiliate_data: Some(data),
        affiliate_endpoints: endpoints,
        ttl: Some(PbDuration { seconds: 1800, nanos: 0 }),
    }
    .encode()
}

/// Run calls with `depth` in flight until `stop`; returns how many completed with status 0.
fn pipeline(addr: &str, depth: usize, stop: &AtomicBool, mut next: impl FnMut() -> Vec<u8>) -> u64 {
    let mut c = Client::connect(addr);
    let mut in_flight = 0;
    let mut ok = 0;
    loop {
        while in_flight < depth && !stop.load(Ordering::Relaxed) {
            let msg = next();
            c.start("AffiliateUpdate", &msg);
            in_flight += 1;
        }
        c.write();
        if in_flight == 0 {
            return ok;
        }
        for ev in c.events() {
            if let Event::Headers { fields, end_stream: true, .. } = ev {
                in_flight -= 1;
                match field(&fields, "grpc-status") {
                    Some(b"0") => ok += 1,
                    other => panic!("call failed: {:?}", other.map(String::from_utf8_lossy)),
                }
            }
        }
    }
}

fn blob(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn updates(addr: &str, secs: u64, conns: usize) {
    let stop = Arc::new(AtomicBool::new(false));
    let seq = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let threads: Vec<_> = (0..conns)
        .map(|t| {
            let (addr, stop, seq) = (addr.to_owned(), Arc::clone(&stop), Arc::clone(&seq));
            std::thread::spawn(move || {
                pipeline(&addr, 32, &stop, || {
                    let i = seq.fetch_add(1, Ordering::Relaxed);
                    // 100 clusters of 1,000 affiliates, each refreshed over and over.
                    let cluster = format!("bench-{t}-{}", (i / 1000) % 100);
                    update(&cluster, &format!("node-{}", i % 1000), blob(600, i), vec![blob(16, i)])
                })
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(secs));
    stop.store(true, Ordering::Relaxed);
    let total: u64 = threads.into_iter().map(|t| t.join().expect("thread")).sum();
    let secs = start.elapsed().as_secs_f64();
    println!("updates {total} in {secs:.1} s: {:.0}/s", total as f64 / secs);
}

fn fill(addr: &str, n: u64) {
    let stop = AtomicBool::new(false);
    let mut i = 0u64;
    let done = pipeline(addr, 32, &stop, || {
        if i + 1 >= n {
            stop.store(true, Ordering::Relaxed);
        }
        let msg = update(
            &format!("fill-{}", i / 1000),
            &format!("node-{}", i % 1000),
            // Talos-sized: about 600 bytes of data, an IPv4 and an IPv6 endpoint.
            blob(600, i),
            vec![blob(16, i), blob(32, i + 1)],
        );
        i += 1;
        msg
    });
    println!("filled {done} affiliates");
}

fn watch(addr: &str, watchers: usize, events: u64) {
    let per_conn = 50;
    let conns = watchers.div_ceil(per_conn);
    let sent: Arc<Mutex<Vec<Option<Instant>>>> = Arc::new(Mutex::new(vec![None; events as usize]));
    let latencies: Arc<Mutex<Vec<Duration>>> = Arc::new(Mutex::new(Vec::new()));
    let ready = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    for k in 0..conns {
        let n = per_conn.min(watchers - k * per_conn);
        let (addr, sent, lat, ready) =
            (addr.to_owned(), Arc::clone(&sent), Arc::clone(&latencies), Arc::clone(&ready));
        threads.push(std::thread::spawn(move || {
            let mut c = Client::connect(&addr);
            let msg = WatchRequest { cluster_id: "watched".into() }.encode();
            for _ in 0..n {
                c.start("Watch", &msg);
            }
            c.write();
            let mut snapshots = 0;
            let mut got = 0u64;
            let mut pending: std::collections::HashMap<u32, Vec<u8>> = Default::default();
            while got < events * n as u64 {
                for ev in c.events() {
                    let Event::Data { stream, data, .. } = ev else {
                        if let Event::Headers { fields, end_stream: true, .. } = ev {
                            panic!("watch ended: {:?}", field(&fields, "grpc-message"));
                        }
                        continue;
                    };
                    let buf = pending.entry(stream).or_default();
                    buf.extend_from_slice(&data);
                    while buf.len() >= 5 {
                        let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
                        if buf.len() < 5 + len {
                            break;
                        }
                        let m = WatchResponse::decode(&buf[5..5 + len]).expect("decode");
                        buf.drain(..5 + len);
                        let Some(a) = m.affiliates.first() else {
                            snapshots += 1;
                            if snapshots == n {
                                ready.fetch_add(n as u64, Ordering::SeqCst);
                            }
                            continue;
                        };
                        let seq = u64::from_be_bytes(a.data[..8].try_into().expect("seq"));
                        let at = Instant::now();
                        if let Some(t) = sent.lock().expect("lock")[seq as usize] {
                            lat.lock().expect("lock").push(at - t);
                        }
                        got += 1;
                    }
                }
            }
        }));
    }
    while ready.load(Ordering::SeqCst) < watchers as u64 {
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut c = Client::connect(addr);
    for seq in 0..events {
        let mut data = seq.to_be_bytes().to_vec();
        data.extend_from_slice(&blob(592, seq));
        sent.lock().expect("lock")[seq as usize] = Some(Instant::now());
        c.start("AffiliateUpdate", &update("watched", "writer", data, vec![]));
        c.write();
        // Wait for the call's status, then a pause: changes arrive as a cluster makes them.
        loop {
            if c.events().iter().any(|e| matches!(e, Event::Headers { end_stream: true, .. })) {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for t in threads {
        t.join().expect("watcher");
    }
    let mut lat = latencies.lock().expect("lock").clone();
    lat.sort();
    let pct = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)];
    println!(
        "watch: {watchers} watchers x {events} events = {} deliveries; latency p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        lat.len(),
        pct(0.50).as_secs_f64() * 1e3,
        pct(0.99).as_secs_f64() * 1e3,
        lat[lat.len() - 1].as_secs_f64() * 1e3
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or_default();
    let num = |i: usize, d: u64| arg(i).parse().unwrap_or(d);
    match arg(0) {
        "updates" => updates(arg(1), num(2, 10), num(3, 2) as usize),
        "fill" => fill(arg(1), num(2, 10_000)),
        "watch" => watch(arg(1), num(2, 1000) as usize, num(3, 200)),
        _ => eprintln!("usage: loadgen updates|fill|watch ADDR ..."),
    }
}
