// SPDX-License-Identifier: Apache-2.0
//! The network loop: one thread, non-blocking sockets and poll(2). Each connection is read,
//! fed to its HTTP/2 engine (or, when it does not start with the HTTP/2 preface, answered as
//! one HTTP/1.1 stats request), and its calls run against the registry. Watch streams are fed
//! from their subscription queues only while the client keeps up, so a slow reader never
//! holds more than its queue and one window of data.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use grpc::h2::{self, code as h2code, field, Role};
use nix::poll::{PollFd, PollFlags, PollTimeout};

use crate::config::Config;
use crate::metrics::Metrics;
use crate::ratelimit::{client_key, RateLimiter};
use crate::registry::{LostUpdate, Registry, Totals, WatchId};
use crate::rpc::{self, status, Outcome};
use crate::{snapshot, stats};

/// The largest gRPC request message taken. The largest valid request (an update with 64 new
/// endpoints and full data) is under 5 KB; this leaves room for clients that send more
/// endpoints than fit, which the registry then refuses.
pub const MAX_REQUEST: usize = 64 * 1024;
/// Streams one connection may have open at once.
pub const MAX_STREAMS: u32 = 64;
/// Bytes of response a connection may have waiting before the server stops reading from it.
/// The hard bound is the connection's budget (`--max-queued`); this is the point where the
/// server stops taking new requests from it until the client reads.
const OUT_HIGH: usize = 1 << 20;
/// Answers refused for the budget on one connection before it is closed (GOAWAY): a client
/// that keeps its windows shut and asks again is not worth the loop's time.
const MAX_REFUSED: u32 = 8;
/// A watch stream is given more events only while less than this is waiting on it.
const WATCH_HIGH: usize = 64 * 1024;
/// Time to complete the TLS handshake and the first request.
const HANDSHAKE: Duration = Duration::from_secs(10);
/// A connection with no watch open and nothing read for this long is closed.
const IDLE: Duration = Duration::from_secs(300);
/// Reads per connection per turn of the loop, so one busy client cannot starve the others.
const READS_PER_TURN: usize = 16;

static TERMINATE: AtomicBool = AtomicBool::new(false);

extern "C" fn on_terminate(_: libc::c_int) {
    TERMINATE.store(true, Ordering::SeqCst);
}

/// Why the server could not start or stop cleanly.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("listen on {addr}: {err}")]
    Listen { addr: std::net::SocketAddr, err: io::Error },
    #[error("TLS: {0}")]
    Tls(String),
    #[error("signals: {0}")]
    Signal(nix::Error),
    #[error("poll: {0}")]
    Poll(nix::Error),
    #[error("final snapshot to {path}: {err}")]
    FinalSnapshot { path: PathBuf, err: snapshot::SnapshotError },
}

enum Proto {
    /// Not yet known: HTTP/2 (preface) or HTTP/1.1.
    Sniff(Vec<u8>),
    Http1(Vec<u8>),
    H2(Box<h2::Connection>),
}

#[derive(Debug)]
struct Call {
    path: String,
    grpc: bool,
    ip: IpAddr,
    body: Vec<u8>,
    watch: Option<WatchId>,
}

struct Conn {
    sock: TcpStream,
    peer: IpAddr,
    tls: Option<Box<rustls::ServerConnection>>,
    proto: Proto,
    /// Bytes for the socket (or the TLS writer) not yet taken.
    out: Vec<u8>,
    calls: HashMap<u32, Call>,
    last_read: Instant,
    accepted: Instant,
    /// The HTTP/2 preface arrived (before that, the handshake deadline counts from accept).
    started: bool,
    /// Close once the output is flushed.
    closing: bool,
    dead: bool,
    /// Answers reset because they did not fit the budget.
    refused: u32,
}

/// State the calls share.
struct Shared {
    cfg: Config,
    reg: Registry,
    limiter: RateLimiter,
    /// Which connection and stream each watch feeds.
    watches: HashMap<WatchId, (u64, u32)>,
    stats: Option<(Instant, Totals)>,
    /// What `/metrics` reports.
    metrics: Metrics,
    /// The largest watch event the limits allow, framed.
    event_max: usize,
}

impl Shared {
    fn totals(&mut self, now: Instant) -> Totals {
        match self.stats {
            Some((at, t)) if now.saturating_duration_since(at) < Duration::from_secs(1) => t,
            _ => {
                let t = self.reg.totals();
                self.stats = Some((now, t));
                t
            }
        }
    }
}

/// What a connection holds for the client: `out` bytes on their way to the socket plus what
/// its HTTP/2 engine holds.
fn held(out: usize, h: &h2::Connection) -> usize {
    out + h.output_len() + h.queued_total()
}

/// Whether `len` more bytes of answer fit a connection that holds `held` under `budget`.
fn fits(held: usize, len: usize, budget: usize) -> bool {
    held.saturating_add(len) <= budget
}

/// The one request message of a unary or server-streaming call.
fn request_message(body: &[u8]) -> Result<Vec<u8>, (u32, String)> {
    let mut messages = Vec::new();
    let mut decoder = grpc::MessageDecoder::new(MAX_REQUEST);
    decoder.push(body, &mut messages).map_err(|s| (s.code, s.message))?;
    match (messages.pop(), messages.is_empty(), decoder.partial()) {
        (Some(m), true, 0) => Ok(m),
        _ => Err((status::INVALID_ARGUMENT, "expected exactly one request message".into())),
    }
}

/// Zero a live buffer's bytes and spare capacity (the allocator zeroes freed blocks, but a
/// connection's output buffer stays allocated and is reused).
fn wipe(buf: &mut Vec<u8>) {
    let cap = buf.capacity();
    buf.clear();
    buf.resize(cap, 0);
    std::hint::black_box(&mut *buf);
    buf.clear();
}

fn h2_config() -> h2::Config {
    h2::Config {
        stream_window: 1 << 20,
        conn_window: 4 << 20,
        max_header_list: 16 * 1024,
        max_concurrent_streams: MAX_STREAMS,
    }
}

const GRPC_HEAD: [(&str, &str); 2] = [(":status", "200"), ("content-type", "application/grpc")];

/// Send a status with no message (Trailers-Only).
fn send_status(h: &mut h2::Connection, stream: u32, code: u32, msg: &str) {
    let code = code.to_string();
    let msg = grpc::percent_encode(msg);
    let fields = [
        (":status", "200"),
        ("content-type", "application/grpc"),
        ("grpc-status", code.as_str()),
        ("grpc-message", msg.as_str()),
    ];
    let _ = h.send_headers(stream, &fields, true);
}

fn send_trailers(h: &mut h2::Connection, stream: u32, code: u32, msg: &str) {
    let code = code.to_string();
    let msg = grpc::percent_encode(msg);
    let _ = h.send_headers(
        stream,
        &[("grpc-status", code.as_str()), ("grpc-message", msg.as_str())],
        true,
    );
}

impl Conn {
    fn new(
        sock: TcpStream,
        peer: IpAddr,
        tls: Option<&Arc<rustls::ServerConfig>>,
    ) -> io::Result<Self> {
        let tls = match tls {
            Some(cfg) => Some(Box::new(
                rustls::ServerConnection::new(Arc::clone(cfg)).map_err(io::Error::other)?,
            )),
            None => None,
        };
        Ok(Conn {
            sock,
            peer,
            tls,
            proto: Proto::Sniff(Vec::new()),
            out: Vec::new(),
            calls: HashMap::new(),
            last_read: Instant::now(),
            accepted: Instant::now(),
            started: false,
            closing: false,
            dead: false,
            refused: 0,
        })
    }

    /// Every byte of response the connection holds: frames not yet written to the socket and
    /// DATA (with its trailers) queued behind the client's flow-control windows, on every
    /// stream, including unary answers whose call is already done.
    fn waiting(&self) -> usize {
        match &self.proto {
            Proto::H2(h) => held(self.out.len(), h),
            _ => self.out.len(),
        }
    }

    fn wants_write(&self) -> bool {
        !self.out.is_empty() || self.tls.as_ref().is_some_and(|t| t.wants_write())
    }

    fn wants_read(&self) -> bool {
        !self.closing && self.waiting() < OUT_HIGH
    }

    /// Read what is there; returns the plaintext.
    fn read(&mut self) -> Vec<u8> {
        let mut input = Vec::new();
        let mut buf = [0u8; 16 * 1024];
        for _ in 0..READS_PER_TURN {
            match &mut self.tls {
                None => match self.sock.read(&mut buf) {
                    Ok(0) => {
                        self.dead = true;
                        break;
                    }
                    Ok(n) => input.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => {
                        self.dead = true;
                        break;
                    }
                },
                Some(tls) => {
                    match tls.read_tls(&mut self.sock) {
                        Ok(0) => {
                            self.dead = true;
                            break;
                        }
                        Ok(_) => {}
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(_) => {
                            self.dead = true;
                            break;
                        }
                    }
                    if let Err(e) = tls.process_new_packets() {
                        log::debug!("{}: TLS: {e}", self.peer);
                        // The alert, if any, goes out before the close.
                        let _ = tls.write_tls(&mut self.sock);
                        self.dead = true;
                        break;
                    }
                    loop {
                        match tls.reader().read(&mut buf) {
                            Ok(0) => {
                                self.closing = true;
                                break;
                            }
                            Ok(n) => input.extend_from_slice(&buf[..n]),
                            Err(_) => break,
                        }
                    }
                }
            }
        }
        if !input.is_empty() {
            self.last_read = Instant::now();
        }
        input
    }

    /// Move pending bytes toward the socket.
    fn flush(&mut self) {
        if let Proto::H2(h) = &mut self.proto {
            if h.has_output() {
                self.out.extend_from_slice(&h.take_output());
            }
        }
        match &mut self.tls {
            None => {
                while !self.out.is_empty() {
                    match self.sock.write(&self.out) {
                        Ok(0) => {
                            self.dead = true;
                            return;
                        }
                        Ok(n) => {
                            self.out.drain(..n);
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(_) => {
                            self.dead = true;
                            return;
                        }
                    }
                }
            }
            Some(tls) => {
                if !self.out.is_empty() {
                    match tls.writer().write(&self.out) {
                        Ok(n) => {
                            self.out.drain(..n);
                        }
                        Err(_) => {
                            self.dead = true;
                            return;
                        }
                    }
                }
                while tls.wants_write() {
                    match tls.write_tls(&mut self.sock) {
                        Ok(0) => {
                            self.dead = true;
                            return;
                        }
                        Ok(_) => {}
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(_) => {
                            self.dead = true;
                            return;
                        }
                    }
                }
            }
        }
        if self.out.is_empty() {
            // Everything was written: no copy stays in the spare capacity. A large buffer
            // (a big List or snapshot) is given back rather than kept for the connection.
            wipe(&mut self.out);
            if self.out.capacity() > 64 * 1024 {
                self.out = Vec::new();
            }
        }
        if self.closing && !self.wants_write() {
            self.dead = true;
        }
    }
}

/// Handle plaintext that arrived on a connection.
fn input(id: u64, c: &mut Conn, data: &[u8], sh: &mut Shared, now: Instant) {
    if let Proto::Sniff(buf) = &mut c.proto {
        buf.extend_from_slice(data);
        let n = buf.len().min(h2::PREFACE.len());
        if buf[..n] != h2::PREFACE[..n] {
            c.proto = Proto::Http1(std::mem::take(buf));
            return http1(c, &[], sh, now);
        }
        if n < h2::PREFACE.len() {
            return;
        }
        let buf = std::mem::take(buf);
        let mut h = Box::new(h2::Connection::new(Role::Server, h2_config()));
        if h.recv(&buf).is_err() {
            c.closing = true;
        }
        c.proto = Proto::H2(h);
        c.started = true;
        return events(id, c, sh, now);
    }
    match &mut c.proto {
        Proto::Http1(_) => http1(c, data, sh, now),
        Proto::H2(h) => {
            if let Err(e) = h.recv(data) {
                log::debug!("{}: {e}", c.peer);
                c.closing = true;
            }
            events(id, c, sh, now);
        }
        Proto::Sniff(_) => {}
    }
}

fn http1(c: &mut Conn, data: &[u8], sh: &mut Shared, now: Instant) {
    let Proto::Http1(buf) = &mut c.proto else {
        return;
    };
    let room = stats::HEAD_LIMIT.saturating_sub(buf.len());
    buf.extend_from_slice(&data[..data.len().min(room)]);
    let totals = sh.totals(now);
    if let Some(resp) = stats::respond(buf, &totals, &sh.metrics) {
        c.out.extend_from_slice(&resp);
        c.closing = true;
    }
}

/// Act on what the HTTP/2 engine saw.
fn events(id: u64, c: &mut Conn, sh: &mut Shared, now: Instant) {
    let Proto::H2(h) = &mut c.proto else {
        return;
    };
    while let Some(ev) = h.poll_event() {
        match ev {
            h2::Event::Headers { stream, fields, end_stream } => {
                if let Some(call) = c.calls.get(&stream) {
                    // Trailers from the client end its side of the call.
                    if end_stream && call.watch.is_none() {
                        let out = c.out.len();
                        c.refused += finish(id, h, out, &mut c.calls, stream, sh, now);
                    }
                    continue;
                }
                let path = String::from_utf8_lossy(field(&fields, ":path").unwrap_or_default())
                    .into_owned();
                let grpc = field(&fields, "content-type")
                    .is_some_and(|v| v.starts_with(b"application/grpc"));
                if !grpc {
                    // Not gRPC: the landing text or the stats, as over HTTP/1.1.
                    let totals = sh.totals(now);
                    let format = base::metrics::Format::from_accept(field(&fields, "accept"));
                    let (code, ctype, body) = stats::answer(&path, format, &totals, &sh.metrics);
                    if !fits(held(c.out.len(), h), body.len(), sh.cfg.max_queued) {
                        h.reset(stream, h2code::ENHANCE_YOUR_CALM);
                        c.refused += 1;
                        sh.metrics.refused_answers += 1;
                        continue;
                    }
                    let code = code.to_string();
                    let _ = h.send_headers(
                        stream,
                        &[(":status", code.as_str()), ("content-type", ctype)],
                        false,
                    );
                    let _ = h.send_data(stream, body.as_bytes(), true);
                    continue;
                }
                let ip = rpc::client_ip(
                    c.peer,
                    field(&fields, "x-real-ip"),
                    field(&fields, "x-forwarded-for"),
                    sh.cfg.trust_proxy_headers,
                );
                if field(&fields, ":method") != Some(b"POST") {
                    sh.metrics.call(&path, status::UNIMPLEMENTED);
                    send_status(h, stream, status::UNIMPLEMENTED, "gRPC calls are POSTs");
                    continue;
                }
                if !rpc::known(&path) {
                    sh.metrics.call(&path, status::UNIMPLEMENTED);
                    send_status(
                        h,
                        stream,
                        status::UNIMPLEMENTED,
                        &format!("unknown method {path}"),
                    );
                    continue;
                }
                if !sh.limiter.allow(client_key(ip, sh.cfg.ipv6_prefix), now) {
                    sh.metrics.call(&path, status::RESOURCE_EXHAUSTED);
                    sh.metrics.rate_limited += 1;
                    send_status(h, stream, status::RESOURCE_EXHAUSTED, "rate limit exceeded");
                    continue;
                }
                c.calls.insert(stream, Call { path, grpc, ip, body: Vec::new(), watch: None });
                if end_stream {
                    let out = c.out.len();
                    c.refused += finish(id, h, out, &mut c.calls, stream, sh, now);
                }
            }
            h2::Event::Data { stream, data, end_stream } => {
                let Some(call) = c.calls.get_mut(&stream) else {
                    continue;
                };
                if call.watch.is_some() {
                    continue;
                }
                if call.body.len() + data.len() > MAX_REQUEST + 5 {
                    sh.metrics.call(&call.path, status::RESOURCE_EXHAUSTED);
                    c.calls.remove(&stream);
                    send_status(h, stream, status::RESOURCE_EXHAUSTED, "request message too large");
                    continue;
                }
                call.body.extend_from_slice(&data);
                if end_stream {
                    let out = c.out.len();
                    c.refused += finish(id, h, out, &mut c.calls, stream, sh, now);
                }
            }
            h2::Event::Reset { stream, .. } => {
                if let Some(call) = c.calls.remove(&stream) {
                    if let Some(w) = call.watch {
                        sh.reg.unwatch(w);
                        sh.watches.remove(&w);
                    }
                }
            }
            h2::Event::GoAway { .. } => c.closing = c.calls.is_empty(),
            h2::Event::PingAck(_) => {}
        }
    }
    if c.refused >= MAX_REFUSED && !c.closing {
        log::info!(
            "{}: closed: {} answers did not fit its {}-byte budget while it did not read",
            c.peer,
            c.refused,
            sh.cfg.max_queued
        );
        h.go_away(h2code::ENHANCE_YOUR_CALM);
        c.closing = true;
    }
    if h.is_closed() {
        c.closing = true;
    }
}

/// The client sent the whole request: run the call. `out` is what the connection holds
/// outside its HTTP/2 engine. An answer that would take the connection past its budget is not
/// queued: the stream is reset (ENHANCE_YOUR_CALM) and 1 is returned (else 0).
fn finish(
    id: u64,
    h: &mut h2::Connection,
    out: usize,
    calls: &mut HashMap<u32, Call>,
    stream: u32,
    sh: &mut Shared,
    now: Instant,
) -> u32 {
    let Some(call) = calls.get_mut(&stream) else {
        return 0;
    };
    debug_assert!(call.grpc);
    let request = match request_message(&call.body) {
        Ok(r) => r,
        Err((code, msg)) => {
            sh.metrics.call(&call.path, code);
            calls.remove(&stream);
            send_status(h, stream, code, &msg);
            return 0;
        }
    };
    let ctx = rpc::Context { client_ip: Some(call.ip), redirect: sh.cfg.redirect.as_deref(), now };
    let budget = sh.cfg.max_queued;
    let outcome = rpc::call(&call.path, &request, &mut sh.reg, &ctx);
    let code = match &outcome {
        Outcome::Status(code, _) => *code,
        Outcome::Unary(_) | Outcome::Watch(..) => status::OK,
    };
    sh.metrics.call(&call.path, code);
    match outcome {
        Outcome::Unary(msg) => {
            calls.remove(&stream);
            let framed = grpc::frame_message(&msg);
            // The head and trailers are small next to the message; the message is what a
            // client with a shut window makes the server hold.
            if !fits(held(out, h), framed.len(), budget) {
                h.reset(stream, h2code::ENHANCE_YOUR_CALM);
                sh.metrics.refused_answers += 1;
                return 1;
            }
            let _ = h.send_headers(stream, &GRPC_HEAD, false);
            let _ = h.send_data(stream, &framed, false);
            send_trailers(h, stream, status::OK, "");
        }
        Outcome::Watch(w, snapshot) => {
            let framed = grpc::frame_message(&snapshot);
            if !fits(held(out, h), framed.len(), budget) {
                sh.reg.unwatch(w);
                calls.remove(&stream);
                h.reset(stream, h2code::ENHANCE_YOUR_CALM);
                sh.metrics.refused_answers += 1;
                return 1;
            }
            call.watch = Some(w);
            call.body = Vec::new();
            sh.watches.insert(w, (id, stream));
            let _ = h.send_headers(stream, &GRPC_HEAD, false);
            let _ = h.send_data(stream, &framed, false);
        }
        Outcome::Status(code, msg) => {
            calls.remove(&stream);
            send_status(h, stream, code, &msg);
        }
    }
    0
}

/// Give a connection's watch streams what their queues hold, while they keep up.
fn pump(c: &mut Conn, sh: &mut Shared) {
    let Proto::H2(h) = &mut c.proto else {
        return;
    };
    let mut ended = Vec::new();
    // Events are taken only while one more of the largest size fits the budget; the rest wait
    // in the watcher's queue (which drops a watcher that falls too far behind).
    let room = sh.cfg.max_queued.saturating_sub(sh.event_max);
    for (&stream, call) in &c.calls {
        let Some(w) = call.watch else {
            continue;
        };
        while h.queued(stream) < WATCH_HIGH && held(c.out.len(), h) < room {
            match sh.reg.next_event(w) {
                Some(Ok(ev)) => {
                    if h.send_data(stream, &grpc::frame_message(&rpc::watch_message(&ev)), false)
                        .is_err()
                    {
                        sh.reg.unwatch(w);
                        ended.push((stream, w));
                        break;
                    }
                }
                Some(Err(LostUpdate)) => {
                    log::info!("{}: a watcher fell behind and was dropped", call.ip);
                    send_trailers(h, stream, status::ABORTED, &LostUpdate.to_string());
                    ended.push((stream, w));
                    break;
                }
                None => break,
            }
        }
    }
    for (stream, w) in ended {
        c.calls.remove(&stream);
        sh.watches.remove(&w);
    }
}

/// Load the TLS chain and key and make the server's config (TLS 1.2 and 1.3, ALPN h2).
pub fn tls_config(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> Result<Arc<rustls::ServerConfig>, ServerError> {
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let read = |p: &std::path::Path| {
        base::bounded::read_file(p, 1 << 20)
            .map_err(|e| ServerError::Tls(format!("{}: {e}", p.display())))
    };
    let chain: Vec<CertificateDer<'static>> = pem::parse_many(read(cert)?)
        .map_err(|e| ServerError::Tls(format!("{}: {e}", cert.display())))?
        .into_iter()
        .filter(|p| p.tag() == "CERTIFICATE")
        .map(|p| CertificateDer::from(p.into_contents()))
        .collect();
    if chain.is_empty() {
        return Err(ServerError::Tls(format!("{}: no certificate", cert.display())));
    }
    let key_pem = pem::parse_many(read(key)?)
        .map_err(|e| ServerError::Tls(format!("{}: {e}", key.display())))?
        .into_iter()
        .find(|p| p.tag().ends_with("PRIVATE KEY"))
        .ok_or_else(|| ServerError::Tls(format!("{}: no private key", key.display())))?;
    let key = PrivateKeyDer::try_from(key_pem.into_contents())
        .map_err(|e| ServerError::Tls(format!("{}: {e}", key.display())))?;
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| ServerError::Tls(e.to_string()))?
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .map_err(|e| ServerError::Tls(e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The server: listener, connections, registry.
pub struct Server {
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    conns: HashMap<u64, Conn>,
    next_conn: u64,
    /// Connections per client key (an IPv4 address, an IPv6 prefix).
    per_ip: HashMap<IpAddr, usize>,
    sh: Shared,
    writer: Option<std::thread::JoinHandle<()>>,
    accept_paused: Option<Instant>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addr", &self.sh.cfg.addr)
            .field("connections", &self.conns.len())
            .finish()
    }
}

impl Server {
    /// Bind, load TLS and the snapshot.
    pub fn new(cfg: Config) -> Result<Self, ServerError> {
        let tls = match (&cfg.cert, &cfg.key) {
            (Some(c), Some(k)) => Some(tls_config(c, k)?),
            _ => None,
        };
        let listener = TcpListener::bind(cfg.addr)
            .map_err(|err| ServerError::Listen { addr: cfg.addr, err })?;
        listener
            .set_nonblocking(true)
            .map_err(|err| ServerError::Listen { addr: cfg.addr, err })?;
        let mut reg = Registry::new(cfg.limits.clone());
        if let Some(path) = &cfg.snapshot {
            match snapshot::load(path, &cfg.limits) {
                Ok(Some(saved)) => {
                    let (loaded, skipped) = reg.import(saved.clusters, Instant::now());
                    log::info!(
                        "snapshot {}: {loaded} affiliates loaded, {} skipped{}",
                        path.display(),
                        skipped + saved.skipped,
                        if saved.truncated {
                            "; the rest not read (over the memory budget of the file size limit)"
                        } else {
                            ""
                        }
                    );
                }
                Ok(None) => log::info!("snapshot {}: none yet", path.display()),
                Err(e) => {
                    // Keep the unreadable file for inspection; clients re-register within
                    // half their TTL.
                    let mut bad = path.clone().into_os_string();
                    bad.push(".bad");
                    let _ = std::fs::rename(path, &bad);
                    log::error!("snapshot {}: {e}; starting empty", path.display());
                }
            }
        }
        let limiter = RateLimiter::new(cfg.rate, cfg.burst, 1 << 16);
        let event_max = cfg.limits.affiliate_wire_max();
        let answer_max = cfg.limits.cluster_wire_max();
        if answer_max > cfg.max_queued {
            log::warn!(
                "--max-queued {} is below the largest List or Watch answer these limits allow \
                 ({answer_max} bytes): such answers will be refused",
                cfg.max_queued
            );
        }
        Ok(Server {
            listener,
            tls,
            conns: HashMap::new(),
            next_conn: 0,
            per_ip: HashMap::new(),
            sh: Shared {
                cfg,
                reg,
                limiter,
                watches: HashMap::new(),
                stats: None,
                metrics: Metrics::default(),
                event_max,
            },
            writer: None,
            accept_paused: None,
        })
    }

    /// The bound address (the port chosen when the flag said 0).
    pub fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.listener.local_addr()
    }

    fn accept(&mut self) {
        loop {
            let (sock, addr) = match self.listener.accept() {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // Out of descriptors, for example: the listener stays readable, so it is
                    // left out of poll for a moment instead of spinning.
                    log::warn!("accept: {e}; pausing accepts for 100 ms");
                    self.accept_paused = Some(Instant::now() + Duration::from_millis(100));
                    return;
                }
            };
            let ip = addr.ip().to_canonical();
            let key = client_key(ip, self.sh.cfg.ipv6_prefix);
            let count = self.per_ip.get(&key).copied().unwrap_or(0);
            if self.conns.len() >= self.sh.cfg.max_connections
                || count >= self.sh.cfg.max_connections_per_ip
            {
                log::debug!("{ip}: connection refused (limit)");
                self.sh.metrics.rejected += 1;
                continue;
            }
            if sock.set_nonblocking(true).is_err() {
                continue;
            }
            let _ = sock.set_nodelay(true);
            match Conn::new(sock, ip, self.tls.as_ref()) {
                Ok(c) => {
                    *self.per_ip.entry(key).or_default() += 1;
                    self.conns.insert(self.next_conn, c);
                    self.next_conn += 1;
                    self.sh.metrics.accepted += 1;
                    self.sh.metrics.open = self.conns.len() as u64;
                }
                Err(e) => log::warn!("{ip}: {e}"),
            }
        }
    }

    fn drop_conn(&mut self, id: u64) {
        let Some(c) = self.conns.remove(&id) else {
            return;
        };
        self.sh.metrics.open = self.conns.len() as u64;
        for call in c.calls.values() {
            if let Some(w) = call.watch {
                self.sh.reg.unwatch(w);
                self.sh.watches.remove(&w);
            }
        }
        let key = client_key(c.peer, self.sh.cfg.ipv6_prefix);
        if let Some(n) = self.per_ip.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                self.per_ip.remove(&key);
            }
        }
    }

    fn save_in_background(&mut self, now: Instant) {
        let Some(path) = self.sh.cfg.snapshot.clone() else {
            return;
        };
        if self.writer.as_ref().is_some_and(|w| !w.is_finished()) {
            log::warn!("snapshot: the previous write is still running; skipped");
            return;
        }
        let bytes = snapshot::encode(&self.sh.reg, now);
        let counts = self.sh.metrics.snapshots.clone();
        // The discovery server is its own process, not PID 1: a plain thread writes snapshots.
        #[allow(clippy::disallowed_methods)]
        let writer = std::thread::spawn(move || match snapshot::write(&path, &bytes) {
            Ok(()) => {
                counts.written.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            Err(e) => {
                counts.failed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                log::error!("snapshot {}: {e}", path.display());
            }
        });
        self.writer = Some(writer);
    }

    /// Serve until SIGTERM or SIGINT, then end the watches, save the snapshot and return.
    pub fn run(mut self) -> Result<(), ServerError> {
        use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
        let action =
            SigAction::new(SigHandler::Handler(on_terminate), SaFlags::empty(), SigSet::empty());
        for sig in [Signal::SIGTERM, Signal::SIGINT] {
            // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
            unsafe { sigaction(sig, &action) }.map_err(ServerError::Signal)?;
        }
        // SAFETY: ignoring SIGPIPE only makes a write to a closed socket return EPIPE.
        unsafe {
            sigaction(
                Signal::SIGPIPE,
                &SigAction::new(SigHandler::SigIgn, SaFlags::empty(), SigSet::empty()),
            )
        }
        .map_err(ServerError::Signal)?;
        let start = Instant::now();
        let mut next_gc = start + self.sh.cfg.gc_interval;
        let mut next_snapshot = start + self.sh.cfg.snapshot_interval;
        let mut next_limiter_gc = start + Duration::from_secs(60);
        log::info!(
            "serving on {} ({})",
            self.local_addr().unwrap_or(self.sh.cfg.addr),
            if self.tls.is_some() { "TLS" } else { "h2c" }
        );
        while !TERMINATE.load(Ordering::SeqCst) {
            let now = Instant::now();
            let next = next_gc.min(next_snapshot).min(next_limiter_gc);
            let timeout = next.saturating_duration_since(now).min(Duration::from_secs(1));
            let ready = self.poll(timeout)?;
            let now = Instant::now();
            for (id, readable, writable) in ready {
                if id == u64::MAX {
                    self.accept();
                    continue;
                }
                let Some(c) = self.conns.get_mut(&id) else {
                    continue;
                };
                if readable {
                    let data = c.read();
                    if !data.is_empty() {
                        input(id, c, &data, &mut self.sh, now);
                    }
                }
                if readable || writable {
                    pump(c, &mut self.sh);
                    c.flush();
                }
            }
            if now >= next_gc {
                let removed = self.sh.reg.gc(now);
                if removed > 0 {
                    log::debug!("gc: {removed} affiliates expired");
                }
                next_gc = now + self.sh.cfg.gc_interval;
            }
            if now >= next_limiter_gc {
                self.sh.limiter.gc(now);
                next_limiter_gc = now + Duration::from_secs(60);
            }
            if now >= next_snapshot {
                self.save_in_background(now);
                next_snapshot = now + self.sh.cfg.snapshot_interval;
            }
            // Watches that were given events by other connections' calls or by the GC.
            for w in self.sh.reg.take_woken() {
                let Some(&(cid, _)) = self.sh.watches.get(&w) else {
                    continue;
                };
                if let Some(c) = self.conns.get_mut(&cid) {
                    pump(c, &mut self.sh);
                    c.flush();
                }
            }
            let expired: Vec<u64> = self
                .conns
                .iter()
                .filter(|(_, c)| {
                    // A client that trickles its handshake or request head byte by byte
                    // still has only HANDSHAKE from accept.
                    let late = if c.started {
                        now.saturating_duration_since(c.last_read) > IDLE
                    } else {
                        now.saturating_duration_since(c.accepted) > HANDSHAKE
                    };
                    c.dead || (late && c.calls.values().all(|k| k.watch.is_none()))
                })
                .map(|(id, _)| *id)
                .collect();
            for id in expired {
                self.drop_conn(id);
            }
        }
        self.shutdown()
    }

    /// Wait for sockets; returns (connection, readable, writable), the listener as u64::MAX.
    fn poll(&mut self, timeout: Duration) -> Result<Vec<(u64, bool, bool)>, ServerError> {
        let mut ids = Vec::with_capacity(self.conns.len() + 1);
        let mut fds = Vec::with_capacity(self.conns.len() + 1);
        if self.accept_paused.is_some_and(|t| Instant::now() < t) {
            ids.push(u64::MAX);
            fds.push(PollFd::new(self.listener.as_fd(), PollFlags::empty()));
        } else {
            self.accept_paused = None;
            ids.push(u64::MAX);
            fds.push(PollFd::new(self.listener.as_fd(), PollFlags::POLLIN));
        }
        for (id, c) in &self.conns {
            let mut flags = PollFlags::empty();
            if c.wants_read() {
                flags |= PollFlags::POLLIN;
            }
            if c.wants_write() {
                flags |= PollFlags::POLLOUT;
            }
            ids.push(*id);
            fds.push(PollFd::new(c.sock.as_fd(), flags));
        }
        let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
        match nix::poll::poll(&mut fds, PollTimeout::from(ms)) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => return Ok(Vec::new()),
            Err(e) => return Err(ServerError::Poll(e)),
        }
        let mut ready = Vec::new();
        for (id, fd) in ids.into_iter().zip(fds.iter()) {
            let r = fd.revents().unwrap_or(PollFlags::empty());
            if r.is_empty() {
                continue;
            }
            let readable =
                r.intersects(PollFlags::POLLIN | PollFlags::POLLHUP | PollFlags::POLLERR);
            ready.push((id, readable, r.contains(PollFlags::POLLOUT)));
        }
        Ok(ready)
    }

    fn shutdown(mut self) -> Result<(), ServerError> {
        log::info!("stopping: ending {} watches", self.sh.watches.len());
        let ids: Vec<u64> = self.conns.keys().copied().collect();
        for id in ids {
            if let Some(c) = self.conns.get_mut(&id) {
                if let Proto::H2(h) = &mut c.proto {
                    for (&stream, call) in &c.calls {
                        if call.watch.is_some() {
                            // Status OK: the client sees the end of the stream and reconnects.
                            send_trailers(h, stream, status::OK, "");
                        }
                    }
                    h.go_away(h2code::NO_ERROR);
                }
                c.flush();
            }
            self.drop_conn(id);
        }
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
        if let Some(path) = self.sh.cfg.snapshot.clone() {
            let bytes = snapshot::encode(&self.sh.reg, Instant::now());
            snapshot::write(&path, &bytes)
                .map_err(|err| ServerError::FinalSnapshot { path: path.clone(), err })?;
            log::info!("snapshot {}: saved", path.display());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_one_request_message() {
        let f = grpc::frame_message(b"abc");
        assert_eq!(request_message(&f), Ok(b"abc".to_vec()));
        assert_eq!(request_message(b"\0\0\0").unwrap_err().0, status::INVALID_ARGUMENT);
        assert_eq!(
            request_message(&[f.clone(), f].concat()).unwrap_err().0,
            status::INVALID_ARGUMENT
        );
        assert_eq!(request_message(b"\0\0\0\0\x05ab").unwrap_err().0, status::INVALID_ARGUMENT);
        // A compressed message: nothing was negotiated.
        assert_eq!(request_message(b"\x01\0\0\0\0").unwrap_err().0, status::INTERNAL);
        let big = grpc::frame_message(&vec![0; MAX_REQUEST + 1]);
        assert_eq!(request_message(&big).unwrap_err().0, status::RESOURCE_EXHAUSTED);
    }
}
