// SPDX-License-Identifier: Apache-2.0
//! The blocking driver: runs an [`Engine`] on its own thread over TCP (h2c, prior knowledge)
//! or TLS (rustls, ALPN `h2`). Reads wait at most 250 ms and connecting happens on a
//! short-lived helper thread, so a Stop is honoured within about a second (a write stuck on a
//! full socket waits for its 10 s timeout at worst).

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, ToSocketAddrs, UdpSocket};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use base::names::escape;
use rustls::pki_types::ServerName;

use super::{Action, Engine, Settings};
use crate::interface::{Command, Config, Event};
use crate::target::Target;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The first attempt's timeout for the TCP connect itself; it doubles with each failure in a
/// row up to [`CONNECT_TIMEOUT`]. A SYN that left with a source address the server cannot
/// answer (chosen while the right one was still tentative) is retransmitted with that same
/// source for ever: a new socket, which chooses again, is the only cure, so the first tries
/// are short.
const FIRST_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
const READ_SLICE: Duration = Duration::from_millis(250);

/// The owner's side of a running client. Dropping it stops the client.
#[derive(Debug)]
pub struct Handle {
    tx: mpsc::Sender<Command>,
}

impl Handle {
    /// Queue a command; false once the client has stopped.
    pub fn send(&self, cmd: Command) -> bool {
        self.tx.send(cmd).is_ok()
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        let _ = self.tx.send(Command::Stop);
    }
}

/// Start a client on its own thread; `notify` is called from that thread.
pub fn spawn(cfg: Config, mut notify: Box<dyn FnMut(Event) + Send>) -> io::Result<Handle> {
    let settings = Settings {
        target: cfg.target.clone(),
        cluster_id: cfg.cluster_id.clone(),
        affiliate_id: cfg.affiliate_id.clone(),
        client_version: cfg.client_version.clone(),
        ttl: cfg.ttl,
    };
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
        ^ u64::from(std::process::id());
    let engine = Engine::new(settings, &cfg.key, Instant::now(), seed)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
    let (tx, rx) = mpsc::channel();
    let roots = cfg.roots.clone();
    // spawn_worker blocks every signal in the thread: a signal meant for PID 1 can only reach
    // its signalfd, never this thread, where its default action could end the process.
    evloop::spawn_worker("discovery", move || {
        Driver { engine, roots, transport: None, connecting: None, failures: 0 }
            .run(&rx, &mut *notify)
    })?;
    Ok(Handle { tx })
}

enum Transport {
    Plain(TcpStream),
    Tls(Box<rustls::ClientConnection>, TcpStream),
}

impl Transport {
    fn socket(&self) -> &TcpStream {
        match self {
            Transport::Plain(s) | Transport::Tls(_, s) => s,
        }
    }

    fn write_all(&mut self, b: &[u8]) -> io::Result<()> {
        match self {
            Transport::Plain(s) => s.write_all(b),
            Transport::Tls(c, s) => {
                c.writer().write_all(b)?;
                while c.wants_write() {
                    c.write_tls(s)?;
                }
                Ok(())
            }
        }
    }

    /// Ok(0) is the end of the stream; a timeout surfaces as WouldBlock or TimedOut.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(s) => s.read(buf),
            Transport::Tls(c, s) => loop {
                match c.reader().read(buf) {
                    Ok(n) => return Ok(n),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
                if c.read_tls(s)? == 0 {
                    return Ok(0);
                }
                c.process_new_packets()
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                while c.wants_write() {
                    c.write_tls(s)?;
                }
            },
        }
    }
}

struct Driver {
    /// Connection attempts that failed in a row.
    failures: u32,
    engine: Engine,
    roots: Arc<rustls::RootCertStore>,
    transport: Option<Transport>,
    connecting: Option<mpsc::Receiver<Result<Transport, String>>>,
}

impl Driver {
    fn run(mut self, rx: &mpsc::Receiver<Command>, notify: &mut dyn FnMut(Event)) {
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let now = Instant::now();
            loop {
                match rx.try_recv() {
                    Ok(cmd) => self.engine.command(now, cmd),
                    Err(mpsc::TryRecvError::Empty) => break,
                    Err(mpsc::TryRecvError::Disconnected) => {
                        self.engine.command(now, Command::Stop);
                        break;
                    }
                }
            }
            self.engine.tick(now);
            while let Some(a) = self.engine.poll_action() {
                match a {
                    Action::Connect(t) => self.connect(t),
                    Action::Disconnect => {
                        let out = self.engine.take_output();
                        if let Some(mut t) = self.transport.take() {
                            let _ = t.write_all(&out);
                            let _ = t.socket().shutdown(std::net::Shutdown::Both);
                        }
                    }
                    Action::Notify(e) => notify(e),
                }
            }
            if self.engine.is_stopped() {
                return;
            }
            let out = self.engine.take_output();
            if !out.is_empty() {
                if let Some(t) = self.transport.as_mut() {
                    if let Err(e) = t.write_all(&out) {
                        self.engine.closed(now, &format!("write: {e}"));
                        continue;
                    }
                }
            }
            let wait = self
                .engine
                .next_deadline()
                .map_or(READ_SLICE, |d| d.saturating_duration_since(now))
                .clamp(Duration::from_millis(1), READ_SLICE);
            if let Some(c) = &self.connecting {
                match c.recv_timeout(wait) {
                    Ok(Ok(t)) => {
                        self.connecting = None;
                        if self.engine.is_connecting() {
                            self.transport = Some(t);
                            self.failures = 0;
                            self.engine.connected(Instant::now());
                        }
                    }
                    Ok(Err(e)) => {
                        self.connecting = None;
                        self.failures = self.failures.saturating_add(1);
                        self.engine.connect_failed(Instant::now(), &e);
                    }
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        self.connecting = None;
                        self.engine.connect_failed(Instant::now(), "connecting thread failed");
                    }
                }
                continue;
            }
            let Some(t) = self.transport.as_mut() else {
                #[allow(clippy::disallowed_methods)] // The client's own thread, not the loop.
                std::thread::sleep(wait);
                continue;
            };
            let _ = t.socket().set_read_timeout(Some(wait));
            match t.read(&mut buf) {
                Ok(0) => self.engine.closed(Instant::now(), "closed by the server"),
                Ok(n) => self.engine.recv(Instant::now(), &buf[..n]),
                Err(e)
                    if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => self.engine.closed(Instant::now(), &escape(&e.to_string(), 512)),
            }
        }
    }

    /// Connect (and handshake) on a helper thread, so that this loop keeps serving commands.
    fn connect(&mut self, target: Target) {
        let tcp_timeout = connect_timeout(self.failures);
        self.transport = None;
        let (tx, rx) = mpsc::channel();
        self.connecting = Some(rx);
        let roots = self.roots.clone();
        let spawned = evloop::spawn_worker("discovery-connect", move || {
            let _ = tx.send(open(&target, roots, tcp_timeout));
        });
        if let Err(e) = spawned {
            self.connecting = None;
            self.engine.connect_failed(Instant::now(), &format!("connecting thread: {e}"));
        }
    }
}

/// The source address the kernel picks for `to` now. A UDP socket's connect sends nothing:
/// it only runs the route lookup and the source address selection a TCP connect would.
fn source_for(to: &SocketAddr) -> io::Result<IpAddr> {
    let any: IpAddr =
        if to.is_ipv6() { Ipv6Addr::UNSPECIFIED.into() } else { Ipv4Addr::UNSPECIFIED.into() };
    let sock = UdpSocket::bind((any, 0))?;
    sock.connect(to)?;
    Ok(sock.local_addr()?.ip())
}

/// Whether a connection from `src` to `dst` can work. While a node's only global IPv6
/// address is still tentative (duplicate address detection: a second or more after it was
/// added), Linux picks ::1 as the source for an off-node destination, and a TCP connect
/// then keeps that source for every SYN it retransmits: it hangs until its timeout, although
/// the address became usable a second later. Refusing at once lets the backoff try again
/// within a second or two.
fn usable_source(dst: IpAddr, src: IpAddr) -> bool {
    dst.is_loopback() || !(src.is_loopback() || src.is_unspecified())
}

/// The TCP connect timeout (per address) after `failures` failed attempts in a row: 2 s,
/// 4 s, 8 s, then 10 s.
fn connect_timeout(failures: u32) -> Duration {
    FIRST_CONNECT_TIMEOUT.saturating_mul(1 << failures.min(3)).min(CONNECT_TIMEOUT)
}

fn open(
    target: &Target,
    roots: Arc<rustls::RootCertStore>,
    tcp_timeout: Duration,
) -> Result<Transport, String> {
    let deadline = Instant::now() + CONNECT_TIMEOUT;
    let addrs: Vec<_> = (target.host.as_str(), target.port)
        .to_socket_addrs()
        .map_err(|e| format!("resolving {}: {}", target.host, escape(&e.to_string(), 512)))?
        .collect();
    let mut last = format!("{} resolves to no address", target.host);
    let mut sock = None;
    for a in addrs {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match source_for(&a) {
            Ok(src) if usable_source(a.ip(), src) => {}
            Ok(src) => {
                last = format!("no usable source address for {a} yet (the kernel picks {src}; an address still tentative?)");
                continue;
            }
            Err(e) => {
                last = format!("no route to {a}: {e}");
                continue;
            }
        }
        match TcpStream::connect_timeout(&a, left.min(tcp_timeout)) {
            Ok(s) => {
                sock = Some(s);
                break;
            }
            Err(e) => last = format!("connecting to {a}: {e}"),
        }
    }
    let sock = sock.ok_or(last)?;
    let _ = sock.set_nodelay(true);
    sock.set_write_timeout(Some(WRITE_TIMEOUT)).map_err(|e| e.to_string())?;
    if !target.tls {
        return Ok(Transport::Plain(sock));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let name =
        ServerName::try_from(target.host.clone()).map_err(|e| format!("TLS server name: {e}"))?;
    let mut conn =
        rustls::ClientConnection::new(Arc::new(config), name).map_err(|e| format!("TLS: {e}"))?;
    let mut sock = sock;
    while conn.is_handshaking() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err("TLS handshake timed out".into());
        }
        sock.set_read_timeout(Some(left)).map_err(|e| e.to_string())?;
        conn.complete_io(&mut sock)
            .map_err(|e| format!("TLS handshake: {}", escape(&e.to_string(), 512)))?;
    }
    if conn.alpn_protocol() != Some(b"h2") {
        return Err("TLS: the server did not agree to HTTP/2 (ALPN h2)".into());
    }
    Ok(Transport::Tls(Box::new(conn), sock))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_loopback_source_for_a_remote_destination_is_not_usable() {
        assert!(!usable_source(ip("fd00:6::1"), ip("::1")), "a tentative address's stand-in");
        assert!(!usable_source(ip("192.0.2.1"), ip("0.0.0.0")));
        assert!(usable_source(ip("fd00:6::1"), ip("fd00:6::11")));
        assert!(usable_source(ip("fd00:6::1"), ip("fe80::1")));
        assert!(usable_source(ip("::1"), ip("::1")), "loopback to loopback");
        assert!(usable_source(ip("127.0.0.1"), ip("127.0.0.1")));
    }

    #[test]
    fn connect_timeouts_start_short_and_grow_to_the_cap() {
        let secs: Vec<u64> = (0..6).map(|f| connect_timeout(f).as_secs()).collect();
        assert_eq!(secs, [2, 4, 8, 10, 10, 10]);
        assert_eq!(connect_timeout(u32::MAX), CONNECT_TIMEOUT);
    }

    #[test]
    fn the_kernel_source_choice_is_read_without_sending() {
        let src = source_for(&"127.0.0.1:9".parse().unwrap()).unwrap();
        assert!(src.is_loopback(), "{src}");
    }
}
