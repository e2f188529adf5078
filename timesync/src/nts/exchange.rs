// SPDX-License-Identifier: Apache-2.0
//! The NTS-KE exchange itself (RFC 8915 §4): TCP and TLS 1.3 to port 4460 with ALPN
//! `ntske/1`, the request, the response, the exported keys. It blocks (connect, handshake,
//! reading the trust roots), so each exchange runs on a thread of its own ([`Exchanges`]), which
//! hands the result back over a channel and rings a socket the event loop polls: PID 1 never
//! waits for it.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, RootCertStore};
use thiserror::Error;

use super::ke::{self, KeError, Response, ALPN, EXPORTER_LABEL};
use super::session::Keys;
use super::verify::Verifier;

/// Connecting to one address gives up after this long.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The whole exchange (handshake, request, response) gives up after this long.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(10);
/// The most response bytes read: eight cookies of the longest kind and some records.
const MAX_RESPONSE: usize = 16 * 1024;
/// The largest trust root file read.
const MAX_ROOTS_FILE: u64 = 8 << 20;
/// Exchanges running at once; more wait for the next tick.
pub const MAX_RUNNING: usize = 8;

/// Where the trust roots come from.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Trust {
    /// PEM bundles, read in order; a missing one is skipped.
    pub files: Vec<PathBuf>,
}

/// The image's CA bundle (Debian's and Alpine's path for the PEM bundle).
pub const SYSTEM_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

impl Default for Trust {
    fn default() -> Self {
        Self { files: vec![PathBuf::from(SYSTEM_BUNDLE)] }
    }
}

/// One exchange to run.
#[derive(Clone, Debug)]
pub struct Request {
    /// The name the certificate must carry (a DNS name, or an IP literal for an IP SAN).
    pub name: String,
    /// The addresses to try, in order.
    pub addrs: Vec<SocketAddr>,
    /// The trust roots.
    pub trust: Trust,
    /// The clock is not known to be right ([`super::verify`]).
    pub relaxed_time: bool,
}

/// A successful exchange.
pub struct Outcome {
    /// The address that answered.
    pub addr: SocketAddr,
    /// The exported keys.
    pub keys: Keys,
    /// Cookies and the negotiated NTP server.
    pub response: Response,
    /// 32 random bytes for the session's identifiers.
    pub secret: [u8; 32],
    /// The certificate was accepted only because the clock is unsynchronised.
    pub forgave_time: bool,
}

impl std::fmt::Debug for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The keys and the secret are never printed.
        f.debug_struct("Outcome")
            .field("addr", &self.addr)
            .field("response", &self.response)
            .field("forgave_time", &self.forgave_time)
            .finish_non_exhaustive()
    }
}

/// Why an exchange failed.
#[derive(Debug, Error)]
pub enum ExchangeError {
    /// No trust root could be read.
    #[error("no trust roots ({0})")]
    NoRoots(String),
    /// The name cannot be checked against a certificate.
    #[error("not a valid server name")]
    Name,
    /// No address to connect to.
    #[error("no address")]
    NoAddress,
    /// TCP connect failed (to every address; the last error).
    #[error("connect {0}: {1}")]
    Connect(SocketAddr, io::Error),
    /// The TLS handshake or record layer failed (a bad certificate shows here).
    #[error("TLS: {0}")]
    Tls(rustls::Error),
    /// Reading or writing failed.
    #[error("{0}")]
    Io(io::Error),
    /// The server did not select `ntske/1`.
    #[error("server did not agree to ALPN ntske/1")]
    Alpn,
    /// The response.
    #[error("{0}")]
    Ke(#[from] KeError),
    /// The response is longer than any real one.
    #[error("response longer than {MAX_RESPONSE} bytes")]
    TooLong,
    /// Took longer than the exchange may.
    #[error("timed out")]
    Timeout,
    /// The exchange's thread could not be started.
    #[error("cannot start a thread: {0}")]
    Thread(String),
}

fn io_error(e: io::Error) -> ExchangeError {
    // rustls reports its own errors (a certificate it refused) as InvalidData wrapping them.
    match e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
        Some(tls) => ExchangeError::Tls(tls.clone()),
        None if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
            ExchangeError::Timeout
        }
        None => ExchangeError::Io(e),
    }
}

/// Read the trust roots; bundles that are missing or unreadable are skipped.
fn roots(trust: &Trust) -> Result<RootCertStore, ExchangeError> {
    let roots = base::tls_roots::load(&trust.files, MAX_ROOTS_FILE);
    if roots.store.is_empty() {
        let missing = roots.missing.iter().map(|p| format!("{}: not found", p.display()));
        let problems: Vec<String> = missing.chain(roots.problems).collect();
        return Err(ExchangeError::NoRoots(if problems.is_empty() {
            "no certificates in the bundles".to_owned()
        } else {
            problems.join("; ")
        }));
    }
    Ok(roots.store)
}

/// Run one exchange, blocking for at most about [`EXCHANGE_TIMEOUT`] plus the connects.
pub fn run(req: &Request) -> Result<Outcome, ExchangeError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let name = ServerName::try_from(req.name.clone()).map_err(|_| ExchangeError::Name)?;
    let roots = roots(&req.trust)?;
    let inner = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| ExchangeError::NoRoots(e.to_string()))?;
    let verifier = Arc::new(Verifier::new(inner, req.relaxed_time));
    let mut config = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(ExchangeError::Tls)?
        .dangerous()
        .with_custom_certificate_verifier(verifier.clone())
        .with_no_client_auth();
    config.alpn_protocols = vec![ALPN.to_vec()];
    let mut conn = ClientConnection::new(Arc::new(config), name).map_err(ExchangeError::Tls)?;

    let mut last = None;
    let mut tcp = None;
    for addr in &req.addrs {
        match TcpStream::connect_timeout(addr, CONNECT_TIMEOUT) {
            Ok(s) => {
                tcp = Some((s, *addr));
                break;
            }
            Err(e) => last = Some(ExchangeError::Connect(*addr, e)),
        }
    }
    let Some((mut sock, addr)) = tcp else {
        return Err(last.unwrap_or(ExchangeError::NoAddress));
    };
    let deadline = Instant::now() + EXCHANGE_TIMEOUT;
    let timeout = |s: &TcpStream| -> Result<(), ExchangeError> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ExchangeError::Timeout);
        }
        s.set_read_timeout(Some(left)).map_err(ExchangeError::Io)?;
        s.set_write_timeout(Some(left)).map_err(ExchangeError::Io)
    };
    timeout(&sock)?;
    let _ = sock.set_nodelay(true);
    {
        let mut tls = rustls::Stream::new(&mut conn, &mut sock);
        tls.write_all(&ke::request()).map_err(io_error)?;
        tls.flush().map_err(io_error)?;
    }
    if conn.alpn_protocol() != Some(ALPN) {
        return Err(ExchangeError::Alpn);
    }
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let response = loop {
        if let Some(r) = ke::parse_response(&buf)? {
            break r;
        }
        timeout(&sock)?;
        let n = match rustls::Stream::new(&mut conn, &mut sock).read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => 0,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_error(e)),
        };
        if n == 0 {
            return Err(KeError::Truncated.into());
        }
        if buf.len() + n > MAX_RESPONSE {
            return Err(ExchangeError::TooLong);
        }
        buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
    };
    let mut keys = Keys { c2s: [0; 32], s2c: [0; 32] };
    conn.export_keying_material(&mut keys.c2s, EXPORTER_LABEL, Some(&ke::exporter_context(false)))
        .map_err(ExchangeError::Tls)?;
    conn.export_keying_material(&mut keys.s2c, EXPORTER_LABEL, Some(&ke::exporter_context(true)))
        .map_err(ExchangeError::Tls)?;
    conn.send_close_notify();
    let _ = conn.write_tls(&mut sock);
    let mut secret = [0u8; 32];
    provider
        .secure_random
        .fill(&mut secret)
        .map_err(|_| ExchangeError::Io(io::Error::other("no randomness")))?;
    Ok(Outcome { addr, keys, response, secret, forgave_time: verifier.forgave_time() })
}

/// What a finished exchange reports: its ID and result.
pub type Finished = (u64, Result<Outcome, ExchangeError>);

/// Exchanges on threads of their own, each reporting back through a channel and a wake-up datagram.
#[derive(Debug)]
pub struct Exchanges {
    tx: Sender<Finished>,
    rx: Receiver<Finished>,
    bell: evloop::Bell,
    running: usize,
}

impl Exchanges {
    /// The channel and the wake-up socket pair.
    pub fn new() -> io::Result<Self> {
        let bell = evloop::Bell::new()?;
        let (tx, rx) = channel();
        Ok(Self { tx, rx, bell, running: 0 })
    }

    /// The socket that becomes readable when an exchange finishes.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.bell.as_fd()
    }

    /// Exchanges running.
    pub fn running(&self) -> usize {
        self.running
    }

    /// Start `req` on a new thread; its result comes back from [`Exchanges::finished`].
    pub fn start(&mut self, id: u64, req: Request) -> Result<(), ExchangeError> {
        let (tx, ring) = (self.tx.clone(), self.bell.ringer());
        let spawned = evloop::spawn_worker("nts-ke", move || {
            let result = std::panic::catch_unwind(|| run(&req))
                .unwrap_or_else(|_| Err(ExchangeError::Thread("the exchange panicked".into())));
            let _ = tx.send((id, result));
            ring.ring();
        });
        spawned.map_err(|e| ExchangeError::Thread(e.to_string()))?;
        self.running += 1;
        Ok(())
    }

    /// Results of exchanges that finished; never blocks.
    pub fn finished(&mut self) -> Vec<Finished> {
        self.bell.drain();
        let done: Vec<Finished> = self.rx.try_iter().collect();
        self.running = self.running.saturating_sub(done.len());
        done
    }
}
