// SPDX-License-Identifier: Apache-2.0
//! A worker's side of Talos's trustd: a node whose `machine.ca` has no key asks a control
//! plane (`cluster.controlPlane.endpoint`'s host, port 50001) to sign its API certificate.
//! One worker thread per request: it makes the key and the request, calls
//! `securityapi.SecurityService/Certificate` with `machine.token` in the `token` metadata
//! over TLS that trusts `machine.ca` only, checks that the answer chains to `machine.ca` and
//! certifies its key, and hands the identity to the loop over a channel, ringing the loop's
//! bell so the loop takes it at once (no timer ticks while a node waits). Failures are
//! retried with a backoff; each different failure is logged once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::Arc;
use std::time::Duration;

use cli::connect::{self, Target};
use cli::rpc::Channel;
use pki::identity::{Identity, Sans};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use talos_api::security::{CertificateRequest, CertificateResponse, CERTIFICATE};

use cli::TRUSTD_PORT;

/// Each read and write of a call.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// First and longest wait between rounds of asking every control plane.
const BACKOFF_FIRST: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// What the loop needs to ask.
#[derive(Clone)]
pub struct Ask {
    /// `machine.ca.crt`, PEM.
    pub ca_pem: String,
    /// `machine.token`.
    pub token: String,
    /// Control-plane hosts (names or addresses).
    pub endpoints: Vec<String>,
    /// The names the certificate is to carry.
    pub sans: Sans,
}

impl std::fmt::Debug for Ask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token is never shown.
        f.debug_struct("Ask").field("endpoints", &self.endpoints).finish_non_exhaustive()
    }
}

/// A request under way.
#[derive(Debug)]
pub struct Fetch {
    rx: Receiver<(Identity, String)>,
    stop: Arc<AtomicBool>,
    /// Set by the thread once it has sent its answer (or ended without one).
    ended: Arc<AtomicBool>,
}

impl Drop for Fetch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// What polling a fetch says.
#[derive(Debug)]
pub enum Poll {
    /// Still asking.
    Waiting,
    /// The identity, and the control plane that signed it.
    Done(Identity, String),
    /// The thread is gone.
    Gone,
}

impl Fetch {
    /// Start asking; `bell` is rung when the thread ends (with an answer or without).
    pub fn start(ask: Ask, bell: Option<evloop::Ringer>) -> Result<Self, String> {
        let (tx, rx) = std::sync::mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let ended = Arc::new(AtomicBool::new(false));
        let (stopped, end) = (stop.clone(), ended.clone());
        evloop::spawn_worker("trustd-client", move || {
            if let Some(done) = run(&ask, &stopped) {
                let _ = tx.send(done);
            }
            drop(tx);
            end.store(true, Ordering::Release);
            if let Some(b) = bell {
                b.ring();
            }
        })
        .map_err(|e| e.to_string())?;
        Ok(Self { rx, stop, ended })
    }

    /// Whether the thread has ended: [`Fetch::poll`] then says how.
    pub fn ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }

    /// Has it ended?
    pub fn poll(&self) -> Poll {
        match self.rx.try_recv() {
            Ok((id, from)) => Poll::Done(id, from),
            Err(TryRecvError::Empty) => Poll::Waiting,
            Err(TryRecvError::Disconnected) => Poll::Gone,
        }
    }
}

/// Ask every control plane in turn until one signs, or `stop`.
fn run(ask: &Ask, stop: &AtomicBool) -> Option<(Identity, String)> {
    // What was said last, across requests (a new one starts whenever the names change).
    static SAID: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());
    let mut wait = BACKOFF_FIRST;
    while !stop.load(Ordering::Relaxed) {
        let mut errors = Vec::new();
        for host in &ask.endpoints {
            match once(ask, host) {
                Ok(id) => return Some((id, host.clone())),
                Err(e) => errors.push(format!("{host}:{TRUSTD_PORT}: {e}")),
            }
        }
        let text = errors.join("; ");
        if let Ok(mut said) = SAID.lock() {
            if *said != text {
                log::warn!(target: "trustd", "no API certificate yet: {text}; asking again");
                *said = text;
            }
        }
        let until = std::time::Instant::now() + wait;
        while std::time::Instant::now() < until && !stop.load(Ordering::Relaxed) {
            #[allow(clippy::disallowed_methods)] // a worker thread, not the loop
            std::thread::sleep(Duration::from_millis(100));
        }
        wait = (wait * 2).min(BACKOFF_MAX);
    }
    None
}

/// One call to one control plane.
fn once(ask: &Ask, host: &str) -> Result<Identity, String> {
    let ca = pki::identity::pem_block("machine.ca.crt", &ask.ca_pem).map_err(|e| e.to_string())?;
    let ca = CertificateDer::from(ca);
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone()).map_err(|e| format!("machine.ca.crt: {e}"))?;
    let roots = Arc::new(roots);
    let tls = rustls::ClientConfig::builder_with_provider(cli::tls::provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots.clone())
        .with_no_client_auth();
    let target = Target::Remote {
        name: host.to_owned(),
        host: host.to_owned(),
        port: TRUSTD_PORT,
        tls: Arc::new(tls),
        insecure: true,
    };
    let io = connect::open(&target, Some(CALL_TIMEOUT), CALL_TIMEOUT)?;
    let authority = if host.contains(':') {
        format!("[{host}]:{TRUSTD_PORT}")
    } else {
        format!("{host}:{TRUSTD_PORT}")
    };
    let mut ch = Channel::over(io, authority, true).with_metadata("token", &ask.token);
    let (key, csr) = pki::csr::request(&ask.sans).map_err(|e| e.to_string())?;
    let resp: CertificateResponse = ch
        .unary(CERTIFICATE, &CertificateRequest { csr: csr.into_bytes() })
        .map_err(|e| e.to_string())?;
    let crt = String::from_utf8(resp.crt).map_err(|_| "the certificate is not PEM".to_owned())?;
    let id = pki::csr::identity(&key, &crt).map_err(|e| e.to_string())?;
    verify(&roots, &id, &ask.sans)?;
    Ok(id)
}

/// The certificate chains to `machine.ca` for one of the names asked for.
fn verify(roots: &Arc<rustls::RootCertStore>, id: &Identity, sans: &Sans) -> Result<(), String> {
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
        roots.clone(),
        cli::tls::provider(),
    )
    .build()
    .map_err(|e| e.to_string())?;
    let leaf = id.chain.first().ok_or("no certificate")?;
    let name = match (sans.addresses.first(), &sans.hostname) {
        (Some(a), _) => ServerName::IpAddress((*a).into()),
        (None, Some(h)) => ServerName::try_from(h.clone()).map_err(|e| e.to_string())?,
        (None, None) => return Err("no name to check the certificate for".into()),
    };
    rustls::client::danger::ServerCertVerifier::verify_server_cert(
        verifier.as_ref(),
        leaf,
        &[],
        &name,
        &[],
        UnixTime::now(),
    )
    .map(|_| ())
    .map_err(|e| format!("the signed certificate does not verify against machine.ca: {e}"))
}
