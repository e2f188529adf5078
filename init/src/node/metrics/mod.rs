// SPDX-License-Identifier: Apache-2.0
//! Prometheus metrics over plain HTTP, on the event loop: a non-blocking listener where
//! `machine.metrics.listen` (or `keelson run --metrics-listen`) says, at most
//! [`MAX_CONNECTIONS`] connections, each of which must send its request head (at most
//! [`http::MAX_HEAD`] bytes) within [`HEAD_TIMEOUT`], gets one response and is closed.
//!
//! The parts: [`render`] (what a scrape says, pure), [`http`] (the head and the response,
//! pure), [`proc`] (the process's memory and fds). Plain HTTP because that is what Prometheus
//! scrapes; metrics carry no secrets, and the listener is meant for a trusted network.

pub mod http;
pub mod proc;
pub mod render;

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant, SystemTime};

use evloop::EventSource;
use net::config::MachineConfig;
use net::controllers::MACHINE_CONFIG_ID;
use net::resource::Namespace;
use runtime::Runtime;

/// Most connections at once; a new one past this replaces the oldest still sending its head.
pub const MAX_CONNECTIONS: usize = 16;
/// How long a connection has to send its head, and then to take its response.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// After a failed bind, try again this much later.
const BIND_RETRY: Duration = Duration::from_secs(30);
/// Connections accepted per wakeup (the rest wait in the backlog for the next one).
const ACCEPT_BATCH: usize = 32;
/// Bytes read and thrown away per wakeup from a connection already answered.
const DRAIN_BATCH: usize = 64 * 1024;
/// The listener's key; connections count up from 1.
const KEY_LISTENER: u64 = 0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Reading the request head.
    Reading,
    /// Writing the response.
    Writing,
    /// Answered: the write side is shut; what the client still sends is read and dropped so
    /// the close is a FIN, not a reset that could destroy the response in flight.
    Draining,
}

struct Conn {
    stream: TcpStream,
    phase: Phase,
    head: Vec<u8>,
    out: Vec<u8>,
    sent: usize,
    /// epoll watches it for writability (the response did not fit the socket at once).
    write_armed: bool,
    deadline: Instant,
}

/// The listener and its connections (a loop source).
#[derive(Default)]
pub struct Metrics {
    /// `--metrics-listen`: used when the config has no `machine.metrics`.
    flag: Option<SocketAddr>,
    listener: Option<(SocketAddr, TcpListener)>,
    /// The address whose bind failed, and when to try again.
    failed: Option<(SocketAddr, Instant)>,
    conns: BTreeMap<u64, Conn>,
    next_key: u64,
    new_keys: Vec<u64>,
    /// Connections whose epoll interest must change: (key, wants write).
    interest: Vec<(u64, bool)>,
    /// Open API connections, as the loop last told.
    api_connections: Option<usize>,
    /// The last scrape's text and a sent response's buffer, kept for the next scrape: a
    /// fresh 50 KB allocation each time costs page faults on the loop (the allocator hands
    /// blocks this large back to the kernel when freed).
    body: String,
    spare: Vec<u8>,
}

impl Metrics {
    /// Off until [`Metrics::follow`] finds an address; `flag` is `--metrics-listen`.
    pub fn new(flag: Option<SocketAddr>) -> Self {
        Self { flag, next_key: KEY_LISTENER + 1, ..Self::default() }
    }

    /// Listen where the config (or the flag) says, moving or closing the listener when that
    /// changed; close connections past their deadline.
    pub fn follow(&mut self, rt: &Runtime, now: Instant) {
        let want = rt
            .store()
            .get_spec::<MachineConfig>(Namespace::Config, MACHINE_CONFIG_ID)
            .and_then(|c| c.machine.metrics)
            .map(|m| m.listen)
            .or(self.flag);
        let have = self.listener.as_ref().map(|(a, _)| *a);
        if want != have {
            if let Some((addr, _)) = self.listener.take() {
                log::info!(target: "metrics", "stopped listening on {addr}");
            }
            if let Some(addr) = want {
                let retry = match self.failed {
                    Some((a, at)) if a == addr => now >= at,
                    _ => true,
                };
                if retry {
                    self.bind(addr, now);
                }
            } else {
                self.failed = None;
            }
        }
        let expired: Vec<u64> =
            self.conns.iter().filter(|(_, c)| now >= c.deadline).map(|(k, _)| *k).collect();
        for k in expired {
            self.conns.remove(&k);
        }
    }

    fn bind(&mut self, addr: SocketAddr, now: Instant) {
        match TcpListener::bind(addr).and_then(|l| l.set_nonblocking(true).map(|()| l)) {
            Ok(l) => {
                log::info!(target: "metrics", "serving Prometheus metrics on http://{addr}/metrics");
                self.listener = Some((addr, l));
                self.failed = None;
                self.new_keys.push(KEY_LISTENER);
            }
            Err(e) => {
                // Once per address, then quietly again every BIND_RETRY.
                if self.failed.is_none_or(|(a, _)| a != addr) {
                    log::error!(target: "metrics", "cannot listen on {addr}: {e}; retrying every {}s", BIND_RETRY.as_secs());
                }
                self.failed = Some((addr, now + BIND_RETRY));
            }
        }
    }

    /// The open API connections, for the next scrape.
    pub fn note_api_connections(&mut self, n: Option<usize>) {
        self.api_connections = n;
    }

    /// Connections whose epoll interest must change: (key, wants write rather than read).
    pub fn take_interest(&mut self) -> Vec<(u64, bool)> {
        std::mem::take(&mut self.interest)
    }

    fn accept(&mut self, now: Instant) {
        for _ in 0..ACCEPT_BATCH {
            let Some((_, listener)) = &self.listener else { return };
            let stream = match listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    // ECONNABORTED, EMFILE and the like: the next wakeup tries again.
                    log::debug!(target: "metrics", "accept: {e}");
                    return;
                }
            };
            if stream.set_nonblocking(true).is_err() {
                continue;
            }
            if self.conns.len() >= MAX_CONNECTIONS {
                // A client that never finishes its head must not keep scrapes out: the oldest
                // such connection makes room. When every slot is answering, the new one waits
                // for nothing and is closed.
                let victim = self
                    .conns
                    .iter()
                    .filter(|(_, c)| c.phase == Phase::Reading)
                    .min_by_key(|(_, c)| c.deadline)
                    .map(|(k, _)| *k);
                match victim {
                    Some(k) => {
                        self.conns.remove(&k);
                    }
                    None => continue,
                }
            }
            let key = self.next_key;
            self.next_key += 1;
            let conn = Conn {
                stream,
                phase: Phase::Reading,
                head: Vec::new(),
                out: Vec::new(),
                sent: 0,
                write_armed: false,
                deadline: now + HEAD_TIMEOUT,
            };
            self.conns.insert(key, conn);
            self.new_keys.push(key);
        }
    }

    /// The response to a complete head (or a refusal).
    fn answer(&mut self, head: Result<http::Request, http::Refusal>, rt: &Runtime) -> Vec<u8> {
        let req = match head {
            Ok(r) => r,
            Err(refusal) => return http::refusal(refusal),
        };
        let text = "text/plain; charset=utf-8";
        match req.path.as_str() {
            "/metrics" => {
                let started = Instant::now();
                let (calls, unary, applies) = crate::api::rpc::stats::snapshot();
                let body = render::render_into(
                    std::mem::take(&mut self.body),
                    req.format,
                    &rt.controllers(),
                    rt.store(),
                    proc::read(),
                    &render::ApiFigures {
                        connections: self.api_connections,
                        calls,
                        unary,
                        applies,
                    },
                    SystemTime::now(),
                );
                let out = http::response_into(
                    std::mem::take(&mut self.spare),
                    200,
                    req.format.content_type(),
                    &body,
                    req.head_only,
                );
                log::debug!(target: "metrics", "scrape: {} bytes rendered in {} µs", body.len(), started.elapsed().as_micros());
                self.body = body;
                out
            }
            "/" => http::response(200, text, "keelson: metrics at /metrics\n", req.head_only),
            _ => http::response(404, text, "not found\n", req.head_only),
        }
    }

    fn serve(&mut self, key: u64, rt: &Runtime, now: Instant) {
        let Some(conn) = self.conns.get_mut(&key) else { return };
        let mut close = false;
        if conn.phase == Phase::Reading {
            let mut buf = [0u8; 4096];
            // Read no further than one byte past the limit: that is enough to refuse it.
            while conn.head.len() <= http::MAX_HEAD {
                match conn.stream.read(&mut buf) {
                    Ok(0) => {
                        close = true;
                        break;
                    }
                    Ok(n) => conn.head.extend_from_slice(buf.get(..n).unwrap_or_default()),
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(_) => {
                        close = true;
                        break;
                    }
                }
            }
            let parsed = http::parse(&conn.head).transpose();
            if let Some(head) = parsed {
                // A client that shut its side after a complete head is answered all the same.
                close = false;
                let out = self.answer(head, rt);
                let Some(conn) = self.conns.get_mut(&key) else { return };
                conn.out = out;
                conn.head = Vec::new();
                conn.phase = Phase::Writing;
                conn.deadline = now + HEAD_TIMEOUT;
            }
        }
        let Some(conn) = self.conns.get_mut(&key) else { return };
        match conn.phase {
            Phase::Reading => {}
            Phase::Writing => loop {
                let rest = conn.out.get(conn.sent..).unwrap_or_default();
                if rest.is_empty() {
                    let _ = conn.stream.shutdown(Shutdown::Write);
                    conn.phase = Phase::Draining;
                    let out = std::mem::take(&mut conn.out);
                    if out.capacity() > self.spare.capacity() {
                        self.spare = out;
                    }
                    if conn.write_armed {
                        conn.write_armed = false;
                        self.interest.push((key, false));
                    }
                    break;
                }
                match conn.stream.write(rest) {
                    Ok(n) => conn.sent += n,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        if !conn.write_armed {
                            log::debug!(target: "metrics", "connection {key}: the response waits for the socket ({} of {} bytes sent)", conn.sent, conn.out.len());
                            conn.write_armed = true;
                            self.interest.push((key, true));
                        }
                        break;
                    }
                    Err(_) => {
                        close = true;
                        break;
                    }
                }
            },
            Phase::Draining => {
                let mut buf = [0u8; 4096];
                let mut read = 0;
                while read < DRAIN_BATCH {
                    match conn.stream.read(&mut buf) {
                        Ok(0) => {
                            close = true;
                            break;
                        }
                        Ok(n) => read += n,
                        Err(e) if e.kind() == ErrorKind::Interrupted => {}
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(_) => {
                            close = true;
                            break;
                        }
                    }
                }
            }
        }
        if close {
            self.conns.remove(&key);
        }
    }
}

impl EventSource<Runtime> for Metrics {
    fn take_new_keys(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.new_keys)
    }

    fn fd(&self, key: u64) -> Option<BorrowedFd<'_>> {
        if key == KEY_LISTENER {
            return self.listener.as_ref().map(|(_, l)| l.as_fd());
        }
        self.conns.get(&key).map(|c| c.stream.as_fd())
    }

    fn ready(&mut self, key: u64, rt: &mut Runtime, now: Instant) {
        if key == KEY_LISTENER {
            self.accept(now);
        } else {
            self.serve(key, rt, now);
        }
    }

    fn poll_at(&self) -> Option<Instant> {
        evloop::earliest(
            self.conns.values().map(|c| Some(c.deadline)).chain([self.failed.map(|(_, at)| at)]),
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::io::{Read, Write};

    use net::resource::{Operator, OperatorStatus};
    use nix::sys::socket::{setsockopt, sockopt};

    use super::*;

    /// A runtime whose scrape is some 30 KiB: many operators with long link names.
    fn big_store() -> Runtime {
        let mut rt = Runtime::new();
        for i in 0..200 {
            let s = OperatorStatus {
                operator: Operator::Dhcp4,
                link_name: format!("link-with-a-long-name-{i:04}"),
                state: "bound".into(),
                lease_seconds: Some(3600),
                ..OperatorStatus::default()
            };
            rt.put_input("test", Namespace::Network, &format!("dhcp4/{i}"), s).unwrap();
        }
        rt
    }

    /// A TCP client whose receive buffer is set before it connects.
    fn small_client(addr: SocketAddr) -> std::net::TcpStream {
        use nix::sys::socket::{connect, socket, AddressFamily, SockFlag, SockType, SockaddrIn};
        let fd =
            socket(AddressFamily::Inet, SockType::Stream, SockFlag::SOCK_CLOEXEC, None).unwrap();
        setsockopt(&fd, sockopt::RcvBuf, &2048).unwrap();
        let SocketAddr::V4(v4) = addr else { unreachable!() };
        connect(std::os::fd::AsRawFd::as_raw_fd(&fd), &SockaddrIn::from(v4)).unwrap();
        std::net::TcpStream::from(fd)
    }

    #[test]
    fn a_response_larger_than_the_socket_waits_for_writability_and_arrives_whole() {
        let mut rt = big_store();
        let now = Instant::now();
        let mut m = Metrics::new(Some("127.0.0.1:0".parse().unwrap()));
        m.follow(&rt, now);
        assert_eq!(m.take_new_keys(), [KEY_LISTENER]);
        let addr = m.listener.as_ref().unwrap().1.local_addr().unwrap();

        // Small buffers at both ends (the client's before it connects, so the window it
        // offers is small too): the response cannot go out in one write.
        let mut client = small_client(addr);
        m.ready(KEY_LISTENER, &mut rt, now);
        let key = m.take_new_keys()[0];
        setsockopt(&m.conns[&key].stream, sockopt::SndBuf, &4096).unwrap();
        client.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        m.ready(key, &mut rt, now);
        assert_eq!(m.take_interest(), [(key, true)], "the rest waits for writability");
        assert_eq!(m.conns[&key].phase, Phase::Writing);

        client.set_nonblocking(true).unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 8192];
        let mut interest = Vec::new();
        for _ in 0..10_000 {
            match client.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => unreachable!("{e}"),
            }
            m.ready(key, &mut rt, now);
            interest.extend(m.take_interest());
        }
        // Back to reading once the response is out, and closed after the client's EOF.
        assert_eq!(interest, [(key, false)]);
        let text = String::from_utf8(got).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("Content-Length: {}", body.len())), "{head}");
        assert!(body.len() > 20_000, "{}", body.len());
        assert_eq!(body.matches("keelson_operator_lease_seconds{").count(), 200);
        drop(client);
        m.ready(key, &mut rt, now);
        assert!(m.conns.is_empty());
    }

    #[test]
    fn past_the_cap_the_oldest_unfinished_head_makes_room_and_deadlines_close_the_rest() {
        let mut rt = Runtime::new();
        let start = Instant::now();
        let mut m = Metrics::new(Some("127.0.0.1:0".parse().unwrap()));
        m.follow(&rt, start);
        let addr = m.listener.as_ref().unwrap().1.local_addr().unwrap();
        let mut clients = Vec::new();
        for i in 0..MAX_CONNECTIONS as u32 + 4 {
            clients.push(std::net::TcpStream::connect(addr).unwrap());
            m.ready(KEY_LISTENER, &mut rt, start + Duration::from_millis(u64::from(i)));
        }
        assert_eq!(m.conns.len(), MAX_CONNECTIONS);
        // The four oldest were closed: their clients read EOF.
        for c in &mut clients[..4] {
            c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            assert_eq!(c.read(&mut [0u8; 1]).unwrap(), 0);
        }
        assert_eq!(m.poll_at(), Some(start + Duration::from_millis(4) + HEAD_TIMEOUT));
        m.follow(&rt, start + HEAD_TIMEOUT + Duration::from_secs(1));
        assert!(m.conns.is_empty());
        assert_eq!(m.poll_at(), None);
    }

    #[test]
    fn the_listener_moves_with_the_desired_address_and_closes_without_one() {
        let rt = Runtime::new();
        let now = Instant::now();
        let mut m = Metrics::new(None);
        m.follow(&rt, now);
        assert!(m.listener.is_none() && m.take_new_keys().is_empty());
        m.flag = Some("127.0.0.1:0".parse().unwrap());
        m.follow(&rt, now);
        assert_eq!(m.take_new_keys(), [KEY_LISTENER]);
        m.flag = None;
        m.follow(&rt, now);
        assert!(m.listener.is_none());
        // An address the node does not have: logged, retried after BIND_RETRY.
        m.flag = Some("192.0.2.1:9100".parse().unwrap());
        m.follow(&rt, now);
        assert!(m.listener.is_none());
        assert_eq!(m.poll_at(), Some(now + BIND_RETRY));
    }
}
