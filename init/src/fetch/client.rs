// SPDX-License-Identifier: Apache-2.0
//! One fetch attempt, blocking: resolve, connect, TLS when https, send the GET, feed the
//! answer to the [`super::http`] engine, follow redirects. It runs on its own thread, never on
//! the event loop; every step is bounded by the attempt's deadline (socket timeouts recomputed
//! before each read and write), the engine's size limits, and [`MAX_REDIRECTS`].

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, StreamOwned};

use super::http::{self, HttpError, Response, ResponseParser};
use super::retry::Failure;
use super::url::{Scheme, Url, UrlError};

/// Redirects followed before giving up.
pub const MAX_REDIRECTS: usize = 5;
/// The trust roots PID 1 reads, in order: keelson's own, then the system bundle. Both are
/// used when both exist.
pub const DEFAULT_ROOTS: [&str; 2] = ["/etc/keelson/ca.pem", "/etc/ssl/certs/ca-certificates.crt"];
/// A CA bundle larger than this is refused (Debian's is about 220 KiB).
const ROOTS_LIMIT: u64 = 4 << 20;
/// Each connect gets at most this long, so a second address still has time.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Why an attempt failed; each message is one console line's worth, with the URL's query left
/// out.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// No address for the host.
    #[error("resolve {host}: {reason}")]
    Resolve {
        /// The host.
        host: String,
        /// Why.
        reason: String,
    },
    /// Every address refused or timed out.
    #[error("connect {addr}: {source}")]
    Connect {
        /// The last address tried.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// Reading or writing the connection.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The attempt's deadline passed.
    #[error("no complete answer within {0} s")]
    Timeout(u64),
    /// The response broke HTTP's rules or a limit.
    #[error("{0}")]
    Http(#[from] HttpError),
    /// TLS refused (the certificate, or the handshake).
    #[error("TLS: {0}")]
    Tls(#[from] rustls::Error),
    /// No trust roots could be read for https.
    #[error("https: no trust roots ({0})")]
    NoRoots(String),
    /// A status other than 200.
    #[error("HTTP {status} {reason}")]
    Status {
        /// The code.
        status: u16,
        /// The reason phrase, printable ASCII.
        reason: String,
    },
    /// More than [`MAX_REDIRECTS`].
    #[error("more than {MAX_REDIRECTS} redirects")]
    Redirects,
    /// A redirect from https to http.
    #[error("redirect from https to http refused ({0})")]
    Downgrade(String),
    /// A redirect without a usable `Location`.
    #[error("redirect to an invalid location: {0}")]
    Location(UrlError),
}

impl FetchError {
    /// What the retry policy makes of it.
    pub fn failure(&self) -> Failure {
        match self {
            Self::Resolve { .. } | Self::Connect { .. } | Self::Io(_) | Self::Timeout(_) => {
                Failure::Transport
            }
            Self::Http(HttpError::BodyTooLarge(_) | HttpError::Coding(_)) => Failure::Final,
            Self::Http(_) => Failure::Transport,
            Self::Tls(rustls::Error::InvalidCertificate(_)) => Failure::Final,
            Self::Tls(_) => Failure::Transport,
            Self::Status { status, .. } => Failure::Status(*status),
            Self::NoRoots(_) | Self::Redirects | Self::Downgrade(_) | Self::Location(_) => {
                Failure::Final
            }
        }
    }
}

/// A successful fetch.
#[derive(Debug)]
pub struct Fetched {
    /// Where the config finally came from (after redirects).
    pub url: Url,
    /// The body.
    pub body: Vec<u8>,
}

/// The TLS client configuration: TLS 1.3, the roots from `paths` (those that exist).
pub fn tls_config(paths: &[PathBuf]) -> Result<Arc<ClientConfig>, FetchError> {
    let roots = base::tls_roots::load(paths, ROOTS_LIMIT);
    for p in &roots.problems {
        log::warn!(target: "config", "trust roots: {p}");
    }
    if roots.store.is_empty() {
        let tried: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        return Err(FetchError::NoRoots(format!("none in {}", tried.join(", "))));
    }
    let config = ClientConfig::builder_with_provider(crate::api::tls::provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_root_certificates(roots.store)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// Fetch `url`, following redirects, before `deadline`. `tls` is made on first need.
pub fn fetch(url: &Url, roots: &[PathBuf], deadline: Instant) -> Result<Fetched, FetchError> {
    fetch_limited(url, roots, deadline, http::MAX_BODY)
}

/// [`fetch`] with a body of at most `limit` bytes (an upgrade's kernel and initramfs).
pub fn fetch_limited(
    url: &Url,
    roots: &[PathBuf],
    deadline: Instant,
    limit: usize,
) -> Result<Fetched, FetchError> {
    let mut tls: Option<Arc<ClientConfig>> = None;
    let mut url = url.clone();
    for _ in 0..=MAX_REDIRECTS {
        let resp = get(&url, roots, &mut tls, deadline, limit)?;
        match resp.status {
            200 => return Ok(Fetched { url, body: resp.body }),
            301 | 302 | 303 | 307 | 308 => {
                let location = resp.location.unwrap_or_default();
                let next = url.join(&location).map_err(FetchError::Location)?;
                if url.scheme == Scheme::Https && next.scheme == Scheme::Http {
                    return Err(FetchError::Downgrade(next.redacted()));
                }
                log::info!(target: "config", "redirected to {}", next.redacted());
                url = next;
            }
            status => return Err(FetchError::Status { status, reason: resp.reason }),
        }
    }
    Err(FetchError::Redirects)
}

/// The time left before `deadline`, or the timeout error.
fn left(deadline: Instant, started: Instant) -> Result<Duration, FetchError> {
    let now = Instant::now();
    if now >= deadline {
        return Err(FetchError::Timeout(deadline.saturating_duration_since(started).as_secs()));
    }
    Ok(deadline - now)
}

/// One request and its response.
fn get(
    url: &Url,
    roots: &[PathBuf],
    tls: &mut Option<Arc<ClientConfig>>,
    deadline: Instant,
    limit: usize,
) -> Result<Response, FetchError> {
    let started = Instant::now();
    let stream = connect(url, deadline, started)?;
    let request = http::request(&url.host_header(), &url.target);
    match url.scheme {
        Scheme::Http => exchange(stream, &request, (deadline, started), limit),
        Scheme::Https => {
            let config = match tls {
                Some(c) => c.clone(),
                None => tls.insert(tls_config(roots)?).clone(),
            };
            let name = ServerName::try_from(url.host.clone())
                .map_err(|_| FetchError::Location(UrlError::Host))?;
            let conn = ClientConnection::new(config, name)?;
            let tcp = stream.try_clone()?;
            exchange_tls(StreamOwned::new(conn, stream), tcp, &request, (deadline, started), limit)
        }
    }
}

fn connect(url: &Url, deadline: Instant, started: Instant) -> Result<TcpStream, FetchError> {
    let addrs: Vec<SocketAddr> = (url.host.as_str(), url.port)
        .to_socket_addrs()
        .map_err(|e| FetchError::Resolve { host: url.host.clone(), reason: e.to_string() })?
        .take(8)
        .collect();
    let mut last = None;
    for addr in &addrs {
        let timeout = left(deadline, started)?.min(CONNECT_TIMEOUT);
        match TcpStream::connect_timeout(addr, timeout) {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Err(e) => last = Some(FetchError::Connect { addr: *addr, source: e }),
        }
    }
    Err(last.unwrap_or_else(|| FetchError::Resolve {
        host: url.host.clone(),
        reason: "no address".into(),
    }))
}

/// Keep the socket's timeouts at what is left of the attempt.
fn arm(tcp: &TcpStream, deadline: Instant, started: Instant) -> Result<(), FetchError> {
    let t = left(deadline, started)?;
    tcp.set_read_timeout(Some(t))?;
    tcp.set_write_timeout(Some(t))?;
    Ok(())
}

/// Map a socket timeout to the attempt's timeout error.
fn io(e: std::io::Error, deadline: Instant, started: Instant) -> FetchError {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            FetchError::Timeout(deadline.saturating_duration_since(started).as_secs())
        }
        _ => match e.downcast::<rustls::Error>() {
            Ok(tls) => FetchError::Tls(tls),
            Err(e) => FetchError::Io(e),
        },
    }
}

fn exchange(
    mut s: TcpStream,
    request: &[u8],
    (deadline, started): (Instant, Instant),
    limit: usize,
) -> Result<Response, FetchError> {
    arm(&s, deadline, started)?;
    s.write_all(request).map_err(|e| io(e, deadline, started))?;
    let tcp = s.try_clone()?;
    read_response(&mut s, &tcp, (deadline, started), limit)
}

fn exchange_tls(
    mut s: StreamOwned<ClientConnection, TcpStream>,
    tcp: TcpStream,
    request: &[u8],
    (deadline, started): (Instant, Instant),
    limit: usize,
) -> Result<Response, FetchError> {
    arm(&tcp, deadline, started)?;
    s.write_all(request).map_err(|e| io(e, deadline, started))?;
    s.flush().map_err(|e| io(e, deadline, started))?;
    read_response(&mut s, &tcp, (deadline, started), limit)
}

fn read_response(
    s: &mut dyn Read,
    tcp: &TcpStream,
    (deadline, started): (Instant, Instant),
    limit: usize,
) -> Result<Response, FetchError> {
    let mut parser = ResponseParser::with_limit(limit);
    let mut buf = vec![0u8; 64 << 10];
    loop {
        arm(tcp, deadline, started)?;
        let n = match s.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // A server that closes without TLS's close_notify: the HTTP framing decides.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => 0,
            Err(e) => return Err(io(e, deadline, started)),
        };
        if n == 0 {
            return Ok(parser.finish()?);
        }
        if parser.feed(&buf[..n])? {
            return Ok(parser.into_response()?);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_map_to_the_policy() {
        let status = |s| FetchError::Status { status: s, reason: String::new() };
        assert_eq!(status(503).failure(), Failure::Status(503));
        assert_eq!(FetchError::Timeout(180).failure(), Failure::Transport);
        assert_eq!(FetchError::Http(HttpError::Truncated).failure(), Failure::Transport);
        assert_eq!(FetchError::Http(HttpError::BodyTooLarge(1)).failure(), Failure::Final);
        let untrusted = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        assert_eq!(FetchError::Tls(untrusted).failure(), Failure::Final);
        assert_eq!(
            FetchError::Tls(rustls::Error::HandshakeNotComplete).failure(),
            Failure::Transport
        );
        assert_eq!(FetchError::Downgrade("http://x/".into()).failure(), Failure::Final);
        assert_eq!(FetchError::Redirects.failure(), Failure::Final);
    }

    #[test]
    fn no_roots_is_an_error() {
        let missing = [PathBuf::from("/nonexistent/keelson/ca.pem")];
        assert!(matches!(tls_config(&missing), Err(FetchError::NoRoots(_))));
    }
}
