// SPDX-License-Identifier: Apache-2.0
//! The API over TLS: a rustls server connection on a non-blocking TCP socket, driven from
//! the event loop (records are read and written as the socket takes them; the handshake is
//! never waited for), and the two server configurations: maintenance mode (a self-signed
//! certificate, no client certificate) and mutual TLS (clients must present a certificate
//! signed by the cluster's CA; their role is their certificate's Organization).
//!
//! TLS 1.3 only, with rustls's `ring` provider (see docs/dependencies.md).

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rustls::pki_types::CertificateDer;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, ServerConnection};

use super::der;
use super::identity::Identity;
use super::transport::{Access, Transport};

/// Socket reads per call: a client streaming records that decrypt to nothing (handshake
/// messages, empty records) gives the loop back after this many.
const READS_PER_CALL: usize = 8;

/// The crypto every TLS configuration here uses: the client's, so both ends agree.
pub use cli::tls::provider;

/// Which kind of server configuration a connection was accepted under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// No config: anyone may connect and call what maintenance allows.
    Maintenance,
    /// Mutual TLS: the client's certificate says what it may do.
    Mutual,
    /// trustd's port: no client certificate; the call carries `machine.token`.
    Trustd,
}

/// What the node's TLS trust rests on, as a generation number shared by the listener and
/// every TLS connection: the listener moves it on whenever the trust changes (maintenance
/// begins or ends, `machine.ca` changes, the TCP API is turned off). A connection keeps the
/// generation of the server configuration it was accepted under; its rights are decided when
/// its handshake ends, and only if the generation is still the same then (a handshake begun
/// in maintenance and finished after a config arrived gets nothing), and they end when the
/// generation moves on (sessions verified by a CA that was rotated away).
#[derive(Debug, Clone, Default)]
pub struct Trust(Arc<AtomicU64>);

impl Trust {
    /// The generation in force.
    pub fn current(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }

    /// The trust changed: every connection made before has no rights from now on.
    pub fn advance(&self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }
}

/// Maintenance mode's server: any client, no client certificate.
pub fn maintenance_config(id: &Identity) -> Result<Arc<ServerConfig>, rustls::Error> {
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_no_client_auth()
        .with_single_cert(id.chain.clone(), id.private_key())?;
    config.alpn_protocols = alpn();
    Ok(Arc::new(config))
}

/// Configured mode's server: a client certificate signed by `ca` is required.
pub fn mutual_config(
    ca: &CertificateDer<'static>,
    id: &Identity,
) -> Result<Arc<ServerConfig>, rustls::Error> {
    let mut roots = RootCertStore::empty();
    roots.add(ca.clone())?;
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
        .build()
        .map_err(|e| rustls::Error::General(e.to_string()))?;
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_client_cert_verifier(verifier)
        .with_single_cert(id.chain.clone(), id.private_key())?;
    config.alpn_protocols = alpn();
    Ok(Arc::new(config))
}

/// ALPN: gRPC clients require `h2`. A client that offers no ALPN (the JSON client) is
/// served as before.
fn alpn() -> Vec<Vec<u8>> {
    vec![b"h2".to_vec()]
}

/// The access a verified client certificate gives: Talos's roles in its Organization.
pub fn role_access(cert: &[u8]) -> Access {
    let orgs = der::organizations(cert).unwrap_or_default();
    if orgs.iter().any(|o| o == "os:admin") {
        Access::Admin
    } else if orgs.iter().any(|o| o == "os:operator") {
        Access::Operator
    } else {
        Access::Reader
    }
}

/// One client over TLS.
pub struct TlsStream {
    tcp: TcpStream,
    conn: ServerConnection,
    mode: Mode,
    access: Access,
    /// The trust in force, and the generation this connection's configuration belongs to.
    trust: Trust,
    generation: u64,
    peer: Option<SocketAddr>,
    /// The client closed its side of TCP.
    eof: bool,
}

impl TlsStream {
    /// A connection just accepted, under `config`, which is `mode`'s in `trust`'s current
    /// generation.
    pub fn new(
        tcp: TcpStream,
        config: Arc<ServerConfig>,
        mode: Mode,
        trust: Trust,
    ) -> Result<Self, rustls::Error> {
        let peer = tcp.peer_addr().ok();
        let _ = tcp.set_nodelay(true);
        Ok(Self {
            tcp,
            conn: ServerConnection::new(config)?,
            mode,
            access: Access::Pending,
            generation: trust.current(),
            trust,
            peer,
            eof: false,
        })
    }

    /// The trust changed since this connection was accepted.
    fn stale(&self) -> bool {
        self.trust.current() != self.generation
    }

    /// Once the handshake is done, what the client may do: decided now, against the trust
    /// in force now, not the one the connection was accepted under.
    fn note_handshake(&mut self) {
        if self.access != Access::Pending || self.conn.is_handshaking() {
            return;
        }
        if self.stale() {
            self.access = Access::Revoked;
            log::info!(target: "api", "TLS client {}: handshake ended after the node's trust changed (maintenance ended or machine.ca changed); no access", self.peer_text());
            return;
        }
        self.access = match self.mode {
            Mode::Maintenance => Access::Maintenance,
            Mode::Trustd => Access::Trustd,
            Mode::Mutual => match self.conn.peer_certificates().and_then(|c| c.first()) {
                Some(cert) => role_access(cert),
                // The verifier requires one; without it nothing is allowed.
                None => Access::Pending,
            },
        };
        log::debug!(target: "api", "TLS client {} connected ({:?})", self.peer_text(), self.access);
    }

    fn peer_text(&self) -> String {
        self.peer.map(|p| p.to_string()).unwrap_or_else(|| "?".into())
    }
}

impl Transport for TlsStream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        for _ in 0..READS_PER_CALL {
            match self.conn.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                // TCP closed without close_notify: the client is done sending.
                Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            if self.eof {
                return Ok(0);
            }
            match self.conn.read_tls(&mut self.tcp) {
                Ok(0) => self.eof = true,
                Ok(_) => {}
                Err(e) => return Err(e),
            }
            if let Err(e) = self.conn.process_new_packets() {
                // The alert that says why, best effort; then the connection is dropped.
                let _ = self.flush_queued();
                log::debug!(target: "api", "TLS client {}: {e}", self.peer_text());
                return Err(std::io::Error::new(ErrorKind::InvalidData, e));
            }
            self.note_handshake();
        }
        Err(ErrorKind::WouldBlock.into())
    }

    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.flush_queued()?;
        if self.conn.is_handshaking() || self.conn.wants_write() {
            return Err(ErrorKind::WouldBlock.into());
        }
        let n = self.conn.writer().write(&buf[..buf.len().min(16 << 10)])?;
        self.flush_queued()?;
        if n == 0 {
            return Err(ErrorKind::WouldBlock.into());
        }
        Ok(n)
    }

    fn flush_queued(&mut self) -> std::io::Result<()> {
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut self.tcp) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn wants_write(&self) -> bool {
        self.conn.wants_write()
    }

    fn handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }

    fn access(&self) -> Access {
        if self.stale() {
            Access::Revoked
        } else {
            self.access
        }
    }

    fn fd(&self) -> BorrowedFd<'_> {
        self.tcp.as_fd()
    }

    fn refuse_raw(&mut self, _bytes: &[u8]) {
        // Plaintext would be garbage to a TLS client; closing is the answer.
    }

    fn close(&mut self) {
        self.conn.send_close_notify();
        let _ = self.flush_queued();
    }
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;
    use std::time::Duration;

    use rustls::ClientConnection;

    use super::super::identity::{self, Sans};
    use super::*;

    /// A maintenance server connection and an `--insecure` client over loopback.
    fn pair(trust: &Trust) -> (TlsStream, ClientConnection, TcpStream) {
        let id = identity::self_signed(&Sans::default()).unwrap_or_else(|e| unreachable!("{e}"));
        let config = maintenance_config(&id).unwrap_or_else(|e| unreachable!("{e}"));
        let l = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| unreachable!("{e}"));
        let addr = l.local_addr().unwrap_or_else(|e| unreachable!("{e}"));
        let ctcp = TcpStream::connect(addr).unwrap_or_else(|e| unreachable!("{e}"));
        let (stcp, _) = l.accept().unwrap_or_else(|e| unreachable!("{e}"));
        let _ = stcp.set_nonblocking(true);
        let _ = ctcp.set_nonblocking(true);
        let server = TlsStream::new(stcp, config, Mode::Maintenance, trust.clone())
            .unwrap_or_else(|e| unreachable!("{e}"));
        let cc = cli::connect::insecure_config(None).unwrap_or_else(|e| unreachable!("{e}"));
        let name = "keelson".try_into().unwrap_or_else(|_| unreachable!());
        let client = ClientConnection::new(cc, name).unwrap_or_else(|e| unreachable!("{e}"));
        (server, client, ctcp)
    }

    /// Drive both ends until the handshake is done on both.
    fn handshake(server: &mut TlsStream, client: &mut ClientConnection, ctcp: &mut TcpStream) {
        let mut buf = [0u8; 1024];
        for _ in 0..500 {
            while client.wants_write() && client.write_tls(ctcp).is_ok() {}
            let _ = server.read(&mut buf);
            let _ = server.flush_queued();
            if client.read_tls(ctcp).is_ok() {
                let _ = client.process_new_packets();
            }
            if !client.is_handshaking() && !server.handshaking() {
                return;
            }
            #[allow(clippy::disallowed_methods)] // A test waits for its peer.
            std::thread::sleep(Duration::from_millis(2));
        }
        unreachable!("the handshake did not end");
    }

    #[test]
    fn access_is_decided_at_the_end_of_the_handshake_against_the_trust_then() {
        // The trust stays: maintenance access.
        let trust = Trust::default();
        let (mut server, mut client, mut ctcp) = pair(&trust);
        handshake(&mut server, &mut client, &mut ctcp);
        assert_eq!(server.access(), Access::Maintenance);
        // It moves on afterwards: the session has no rights any more.
        trust.advance();
        assert_eq!(server.access(), Access::Revoked);

        // It moves on while the handshake is under way: no rights when it ends, even if the
        // trust were to look the same again to the stream.
        let trust = Trust::default();
        let (mut server, mut client, mut ctcp) = pair(&trust);
        trust.advance();
        handshake(&mut server, &mut client, &mut ctcp);
        assert_eq!(server.access, Access::Revoked);
        assert_eq!(server.access(), Access::Revoked);
    }
}
