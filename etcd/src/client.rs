// SPDX-License-Identifier: Apache-2.0
//! The blocking driver, for tools, tests and `keelson-operator` (never PID 1's event loop):
//! HTTP/1.1 over TCP or TLS (rustls, with a client certificate when etcd asks for one) to the
//! first endpoint that answers. Unary calls share one kept-alive connection per [`Client`]
//! (a clone gets its own); every watch has a connection of its own. Each read waits at most
//! the configured timeout, and every answer is bounded (see [`crate::decode`]).

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, StreamOwned};
use serde::de::DeserializeOwned;

use crate::decode::{self, DecodeError, FrameSplitter, MAX_BODY};
use crate::http::{HttpError, ResponseDecoder};
use crate::request::{self, Call};
use crate::stream::{StreamError, StreamReader};
use crate::wire::*;

/// PEM files (certificates, keys) are small; anything larger is not one.
const MAX_PEM: u64 = 1 << 20;

/// What went wrong talking to etcd.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("invalid endpoint {0:?} (expected http://host:port or https://host:port)")]
    Endpoint(String),
    #[error("TLS configuration: {0}")]
    TlsConfig(String),
    #[error("no endpoint answered: {0}")]
    Unreachable(String),
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("HTTP: {0}")]
    Http(#[from] HttpError),
    #[error("{0}")]
    Decode(#[from] DecodeError),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// A watch's start revision was compacted away: re-read, then watch from the new revision.
    #[error("revision compacted (oldest kept: {0})")]
    Compacted(i64),
    #[error("watch canceled by the server: {0}")]
    WatchCanceled(String),
    #[error("the stream ended")]
    StreamEnded,
}

impl From<StreamError> for ClientError {
    fn from(e: StreamError) -> Self {
        match e {
            StreamError::Http(h) => Self::Http(h),
            StreamError::Decode(d) => Self::Decode(d),
            StreamError::Ended => Self::StreamEnded,
        }
    }
}

impl ClientError {
    /// The server's gRPC code, when etcd answered with an error.
    pub fn server_code(&self) -> Option<i64> {
        match self {
            Self::Decode(d) => d.code(),
            _ => None,
        }
    }
}

/// One endpoint, from `http://host:port` or `https://host:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub tls: bool,
    pub host: String,
    pub port: u16,
}

impl Endpoint {
    pub fn parse(url: &str) -> Result<Self, ClientError> {
        let bad = || ClientError::Endpoint(base::names::escape(url, 128));
        let (tls, rest) = if let Some(r) = url.strip_prefix("https://") {
            (true, r)
        } else if let Some(r) = url.strip_prefix("http://") {
            (false, r)
        } else {
            return Err(bad());
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let (host, port) = rest.rsplit_once(':').ok_or_else(bad)?;
        let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
        let port: u16 = port.parse().map_err(|_| bad())?;
        if host.is_empty() || port == 0 || host.contains(['/', '@', '?', '#', ' ']) {
            return Err(bad());
        }
        Ok(Self { tls, host: host.to_owned(), port })
    }

    /// The `Host` header.
    fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}://{}", if self.tls { "https" } else { "http" }, self.authority())
    }
}

/// A TLS client configuration trusting the PEM CA bundle at `ca`, presenting `cert` and `key`
/// when given (etcd's `--client-cert-auth`).
pub fn tls_config(
    ca: &Path,
    cert_key: Option<(&Path, &Path)>,
) -> Result<Arc<ClientConfig>, ClientError> {
    let roots = base::tls_roots::load(&[ca.to_path_buf()], MAX_PEM);
    if let Some(p) = roots.problems.first() {
        return Err(ClientError::TlsConfig(p.clone()));
    }
    if roots.store.is_empty() {
        return Err(ClientError::TlsConfig(format!("{}: no CA certificate", ca.display())));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ClientError::TlsConfig(e.to_string()))?
        .with_root_certificates(roots.store);
    let config = match cert_key {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let read = |p: &Path| {
                base::bounded::read_file(p, MAX_PEM)
                    .map_err(|e| ClientError::TlsConfig(format!("{}: {e}", p.display())))
            };
            let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&read(cert)?)
                .collect::<Result<_, _>>()
                .map_err(|e| ClientError::TlsConfig(format!("{}: {e}", cert.display())))?;
            if chain.is_empty() {
                return Err(ClientError::TlsConfig(format!("{}: no certificate", cert.display())));
            }
            let key_der = PrivateKeyDer::from_pem_slice(&read(key)?)
                .map_err(|e| ClientError::TlsConfig(format!("{}: {e}", key.display())))?;
            builder
                .with_client_auth_cert(chain, key_der)
                .map_err(|e| ClientError::TlsConfig(e.to_string()))?
        }
    };
    Ok(Arc::new(config))
}

/// How to reach the cluster.
#[derive(Debug, Clone)]
pub struct Config {
    pub endpoints: Vec<Endpoint>,
    /// Needed for `https` endpoints.
    pub tls: Option<Arc<ClientConfig>>,
    /// Connecting, and each read of a unary answer.
    pub timeout: Duration,
}

impl Config {
    /// Endpoints from URLs, plain or TLS, a 5 s timeout.
    pub fn new(urls: &[&str], tls: Option<Arc<ClientConfig>>) -> Result<Self, ClientError> {
        let endpoints = urls.iter().map(|u| Endpoint::parse(u)).collect::<Result<Vec<_>, _>>()?;
        if endpoints.is_empty() {
            return Err(ClientError::Endpoint(String::new()));
        }
        Ok(Self { endpoints, tls, timeout: Duration::from_secs(5) })
    }
}

enum Conn {
    Plain(TcpStream),
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Plain(_) => "Conn::Plain",
            Self::Tls(_) => "Conn::Tls",
        })
    }
}

impl Conn {
    fn tcp(&self) -> &TcpStream {
        match self {
            Self::Plain(s) => s,
            Self::Tls(s) => s.get_ref(),
        }
    }

    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.tcp().set_read_timeout(t)
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Self::Plain(s) => s.read(buf),
            Self::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Self::Plain(s) => s.write(buf),
            Self::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Self::Plain(s) => s.flush(),
            Self::Tls(s) => s.flush(),
        }
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
}

/// A blocking etcd client.
#[derive(Debug)]
pub struct Client {
    config: Arc<Config>,
    /// The endpoint that answered last (tried first).
    current: usize,
    idle: Option<Conn>,
}

impl Clone for Client {
    /// A client on the same cluster with a connection of its own.
    fn clone(&self) -> Self {
        Self { config: self.config.clone(), current: self.current, idle: None }
    }
}

impl Client {
    pub fn new(config: Config) -> Self {
        Self { config: Arc::new(config), current: 0, idle: None }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    fn connect_one(&self, ep: &Endpoint) -> Result<Conn, ClientError> {
        let addrs: Vec<_> = (ep.host.as_str(), ep.port).to_socket_addrs()?.collect();
        let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, self.config.timeout) {
                Ok(tcp) => {
                    tcp.set_nodelay(true)?;
                    tcp.set_write_timeout(Some(self.config.timeout))?;
                    // The TLS handshake runs inside the first write and reads the server's
                    // answer: a hung (stopped) server must not hold it for ever.
                    tcp.set_read_timeout(Some(self.config.timeout))?;
                    if !ep.tls {
                        return Ok(Conn::Plain(tcp));
                    }
                    let tls = self.config.tls.clone().ok_or_else(|| {
                        ClientError::TlsConfig(format!("{ep} needs a CA (--etcd-cacert)"))
                    })?;
                    let name = ServerName::try_from(ep.host.clone())
                        .map_err(|e| ClientError::TlsConfig(format!("{ep}: {e}")))?;
                    let conn = ClientConnection::new(tls, name)
                        .map_err(|e| ClientError::TlsConfig(e.to_string()))?;
                    return Ok(Conn::Tls(Box::new(StreamOwned::new(conn, tcp))));
                }
                Err(e) => last = e,
            }
        }
        Err(ClientError::Io(last))
    }

    /// A new connection to the first endpoint that accepts one, starting with the last good.
    fn connect(&mut self) -> Result<Conn, ClientError> {
        let n = self.config.endpoints.len();
        let mut why = Vec::new();
        for i in 0..n {
            let at = (self.current + i) % n;
            let Some(ep) = self.config.endpoints.get(at) else { continue };
            match self.connect_one(ep) {
                Ok(c) => {
                    self.current = at;
                    return Ok(c);
                }
                // A configuration mistake is the same on every endpoint.
                Err(e @ ClientError::TlsConfig(_)) => return Err(e),
                Err(e) => why.push(format!("{ep}: {e}")),
            }
        }
        Err(ClientError::Unreachable(why.join("; ")))
    }

    fn authority(&self) -> String {
        self.config.endpoints.get(self.current).map(Endpoint::authority).unwrap_or_default()
    }

    /// Send `req` and read one whole response (status, body ≤ `limit`). On an error, whether
    /// any byte of an answer had come.
    fn exchange_on(
        &self,
        conn: &mut Conn,
        req: &[u8],
        limit: usize,
    ) -> Result<(u16, Vec<u8>, bool), (ClientError, bool)> {
        let mut received = false;
        let fail = |e: ClientError, received: bool| (e, received);
        conn.write_all(req).and_then(|()| conn.flush()).map_err(|e| fail(e.into(), false))?;
        conn.set_read_timeout(Some(self.config.timeout)).map_err(|e| fail(e.into(), false))?;
        let mut d = ResponseDecoder::new(limit);
        let mut body = Vec::new();
        let mut buf = [0u8; 16 << 10];
        let deadline = Instant::now() + self.config.timeout;
        let timeout = ClientError::Timeout(self.config.timeout);
        loop {
            let n = match conn.read(&mut buf) {
                Ok(n) => n,
                Err(e) if is_timeout(&e) => return Err(fail(timeout, received)),
                Err(e) => return Err(fail(e.into(), received)),
            };
            if n == 0 {
                d.finish().map_err(|e| fail(e.into(), received))?;
                break;
            }
            received = true;
            if d.feed(buf.get(..n).unwrap_or(&[]), &mut body).map_err(|e| fail(e.into(), true))? {
                break;
            }
            if Instant::now() > deadline {
                return Err(fail(timeout, true));
            }
        }
        Ok((d.status().unwrap_or(0), body, d.reusable()))
    }

    /// One request, on the idle connection when there is one. A kept-alive connection the
    /// server closed meanwhile ends (or resets) before any byte of an answer; that one case is
    /// retried on a fresh connection. Once an answer started, or on a fresh connection, an
    /// error is returned: the request may have been applied, and only the caller knows
    /// whether it may be sent again.
    fn exchange(
        &mut self,
        req_of: impl Fn(&str) -> Vec<u8>,
    ) -> Result<(u16, Vec<u8>), ClientError> {
        if let Some(mut conn) = self.idle.take() {
            let req = req_of(&self.authority());
            match self.exchange_on(&mut conn, &req, MAX_BODY) {
                Ok((status, body, reusable)) => {
                    self.keep(conn, reusable);
                    return Ok((status, body));
                }
                Err((ClientError::Http(HttpError::Truncated), false)) => {}
                Err((ClientError::Io(e), false))
                    if matches!(
                        e.kind(),
                        io::ErrorKind::BrokenPipe
                            | io::ErrorKind::ConnectionReset
                            | io::ErrorKind::ConnectionAborted
                    ) => {}
                Err((e, _)) => return Err(e),
            }
        }
        let mut conn = self.connect()?;
        let req = req_of(&self.authority());
        let (status, body, reusable) =
            self.exchange_on(&mut conn, &req, MAX_BODY).map_err(|(e, _)| e)?;
        self.keep(conn, reusable);
        Ok((status, body))
    }

    fn keep(&mut self, conn: Conn, reusable: bool) {
        if reusable {
            self.idle = Some(conn);
        }
    }

    /// A unary call.
    pub fn call<T: DeserializeOwned>(
        &mut self,
        what: &'static str,
        c: &Call,
    ) -> Result<T, ClientError> {
        let (status, body) = self.exchange(|host| c.to_http(host))?;
        Ok(decode::unary(what, status, &body)?)
    }

    pub fn range(&mut self, r: &RangeRequest) -> Result<RangeResponse, ClientError> {
        self.call("range", &request::range(r))
    }

    /// One key, if it exists.
    pub fn get(&mut self, key: &[u8]) -> Result<Option<KeyValue>, ClientError> {
        Ok(self.range(&request::range_key(key))?.kvs.into_iter().next())
    }

    pub fn put(
        &mut self,
        key: &[u8],
        value: &[u8],
        lease: i64,
    ) -> Result<PutResponse, ClientError> {
        let r = PutRequest { key: key.to_vec(), value: value.to_vec(), lease, prev_kv: false };
        self.call("put", &request::put(&r))
    }

    pub fn delete(&mut self, r: &DeleteRangeRequest) -> Result<DeleteRangeResponse, ClientError> {
        self.call("deleterange", &request::delete_range(r))
    }

    pub fn txn(&mut self, t: &TxnRequest) -> Result<TxnResponse, ClientError> {
        self.call("txn", &request::txn(t))
    }

    pub fn compact(&mut self, revision: i64) -> Result<HeaderOnly, ClientError> {
        self.call("compaction", &request::compact(revision))
    }

    /// A new lease of `ttl_secs` (etcd may raise it to its minimum; the answer says).
    pub fn lease_grant(&mut self, ttl_secs: i64) -> Result<LeaseGrantResponse, ClientError> {
        self.call("lease grant", &request::lease_grant(ttl_secs, 0))
    }

    /// One renewal; the TTL answered, 0 when the lease is gone.
    pub fn lease_keep_alive(&mut self, id: i64) -> Result<i64, ClientError> {
        let c = request::lease_keep_alive(id);
        let (status, body) = self.exchange(|host| c.to_http(host))?;
        if !(200..300).contains(&status) {
            let e = decode::unary::<HeaderOnly>("keepalive", status, &body).err();
            return Err(e.map_or(ClientError::StreamEnded, ClientError::Decode));
        }
        let mut s = FrameSplitter::default();
        s.push(&body);
        let frame = s.next_frame()?.ok_or(ClientError::StreamEnded)?;
        let r: LeaseKeepAliveResponse = decode::frame("keepalive", &frame)?;
        Ok(r.ttl)
    }

    pub fn lease_revoke(&mut self, id: i64) -> Result<LeaseRevokeResponse, ClientError> {
        self.call("lease revoke", &request::lease_revoke(id))
    }

    pub fn lease_time_to_live(&mut self, id: i64) -> Result<LeaseTimeToLiveResponse, ClientError> {
        self.call("lease timetolive", &request::lease_time_to_live(id, true))
    }

    pub fn status(&mut self) -> Result<StatusResponse, ClientError> {
        self.call("status", &request::status())
    }

    /// Hand raft leadership to member `target`; the endpoint must be the leader.
    pub fn move_leader(&mut self, target: i64) -> Result<MoveLeaderResponse, ClientError> {
        self.call("move leader", &request::move_leader(target))
    }

    pub fn member_list(&mut self) -> Result<MemberListResponse, ClientError> {
        self.call("member list", &request::member_list())
    }

    /// Add a member by its peer URLs; `learner`: as a non-voting learner (etcd 3.4 on).
    pub fn member_add(
        &mut self,
        peer_urls: &[String],
        learner: bool,
    ) -> Result<MemberAddResponse, ClientError> {
        self.call("member add", &request::member_add(peer_urls, learner))
    }

    pub fn member_remove(&mut self, id: i64) -> Result<MemberListResponse, ClientError> {
        self.call("member remove", &request::member_remove(id))
    }

    /// Make a learner a voting member; etcd refuses while it is not in sync with the leader.
    pub fn member_promote(&mut self, id: i64) -> Result<MemberListResponse, ClientError> {
        self.call("member promote", &request::member_promote(id))
    }

    /// `GET /health`: true when etcd says it is healthy.
    pub fn health(&mut self) -> Result<bool, ClientError> {
        let (status, body) = self.exchange(|host| crate::http::get(host, "/health"))?;
        let h: Health = decode::unary("health", status, &body)?;
        Ok(h.health == "true")
    }

    /// Open a watch on a connection of its own. Returns once etcd confirmed it; a compacted
    /// start revision comes next, from [`Watch::next`], as [`ClientError::Compacted`] (etcd
    /// confirms such a watch, then cancels it).
    pub fn watch(&mut self, w: &WatchCreateRequest) -> Result<Watch, ClientError> {
        let mut conn = self.connect()?;
        conn.write_all(&request::watch(w).to_http(&self.authority()))?;
        conn.flush()?;
        let mut watch = Watch { conn, reader: StreamReader::new("watch") };
        let first =
            watch.next(self.config.timeout)?.ok_or(ClientError::Timeout(self.config.timeout))?;
        if !first.created {
            return Err(ClientError::Decode(DecodeError::Json {
                what: "watch",
                detail: "first frame is not the creation".into(),
            }));
        }
        Ok(watch)
    }
}

/// A running watch. Dropping it closes its connection, which cancels it on the server.
#[derive(Debug)]
pub struct Watch {
    conn: Conn,
    reader: StreamReader<WatchResponse>,
}

impl Watch {
    /// The next frame, waiting at most `wait` (`Ok(None)`: nothing came). A cancellation is an
    /// error: [`ClientError::Compacted`] when the start revision is gone.
    pub fn next(&mut self, wait: Duration) -> Result<Option<WatchResponse>, ClientError> {
        let deadline = Instant::now() + wait;
        let mut buf = [0u8; 16 << 10];
        loop {
            if let Some(r) = self.reader.next_frame()? {
                if r.canceled {
                    if r.compact_revision > 0 {
                        return Err(ClientError::Compacted(r.compact_revision));
                    }
                    let why = base::names::escape(&r.cancel_reason, 256);
                    return Err(ClientError::WatchCanceled(why));
                }
                return Ok(Some(r));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            self.conn.set_read_timeout(Some((deadline - now).max(Duration::from_millis(1))))?;
            match self.conn.read(&mut buf) {
                Ok(0) => self.reader.eof()?,
                Ok(n) => self.reader.feed(buf.get(..n).unwrap_or(&[]))?,
                Err(e) if is_timeout(&e) => return Ok(None),
                Err(e) => return Err(e.into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::disallowed_methods)] // A plain thread plays the server.
    use std::io::{BufRead, BufReader};
    use std::net::TcpListener;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A server answering request n (counted over all connections) with `answer(n)`; it
    /// closes the connection after each answer unless `keep`, and always after a short one.
    fn server(keep: bool, answer: fn(usize) -> Vec<u8>) -> (String, Arc<AtomicUsize>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        let seen = Arc::new(AtomicUsize::new(0));
        let count = seen.clone();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let mut s = s.unwrap();
                let mut r = BufReader::new(s.try_clone().unwrap());
                let mut len = 0;
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap();
                    }
                    if line == "\r\n" {
                        let mut body = vec![0; len];
                        r.read_exact(&mut body).unwrap();
                        let n = count.fetch_add(1, Ordering::SeqCst);
                        let a = answer(n);
                        let _ = s.write_all(&a);
                        if !keep || a.len() < ok().len() {
                            break;
                        }
                        len = 0;
                    }
                }
            }
        });
        (url, seen)
    }

    fn ok() -> Vec<u8> {
        b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\n{\"header\":{}}".to_vec()
    }

    #[test]
    fn a_kept_connection_closed_by_the_server_is_retried_once_on_a_fresh_one() {
        let (url, seen) = server(false, |_| ok());
        let mut c = Client::new(Config::new(&[&url], None).unwrap());
        c.put(b"k", b"v", 0).unwrap();
        // The server closed the kept connection: the second call finds it dead before any
        // answer byte, and goes again on a new connection.
        c.put(b"k", b"v", 0).unwrap();
        assert_eq!(seen.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_request_whose_answer_broke_off_is_not_sent_again() {
        let (url, seen) = server(true, |n| {
            if n == 0 {
                ok()
            } else {
                b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\n{\"hea".to_vec()
            }
        });
        let mut c = Client::new(Config::new(&[&url], None).unwrap());
        c.put(b"k", b"v", 0).unwrap();
        // Same connection; the answer starts, then the server goes: the put may have been
        // applied, so it is an error for the caller, not a silent second put.
        assert!(c.idle.is_some());
        let e = c.put(b"k", b"v", 0).unwrap_err();
        assert!(matches!(e, ClientError::Http(HttpError::Truncated)), "{e}");
        assert_eq!(seen.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn endpoints_parse_and_refuse() {
        let e = Endpoint::parse("https://[fd00::1]:2379/").unwrap();
        assert_eq!((e.tls, e.host.as_str(), e.port), (true, "fd00::1", 2379));
        assert_eq!(e.to_string(), "https://[fd00::1]:2379");
        for bad in [
            "127.0.0.1:2379",
            "http://:2379",
            "http://a:0",
            "http://a:b",
            "http://u@a:1",
            "unix:///x",
        ] {
            assert!(Endpoint::parse(bad).is_err(), "{bad}");
        }
    }
}
