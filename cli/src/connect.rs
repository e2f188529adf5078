// SPDX-License-Identifier: Apache-2.0
//! Where a client command connects, and how: the options every verb shares (`--socket`,
//! `-n/--nodes`, `-e/--endpoints`, `--insecure`, `--fingerprint`, `--keelsonconfig`), the
//! client config file (`keelsonconfig`: contexts with endpoints, CA, client certificate and
//! key, as `talosconfig`), and the byte stream to one node: the local socket, or TLS.
//!
//! With no node, endpoint or client config named, the local socket is used. keelson has no
//! proxy between nodes: each node named with `-n` is connected to directly (endpoints are
//! where to connect when no node is named).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, SignatureScheme, StreamOwned};
use serde::{Deserialize, Serialize};

use crate::tls::{fingerprint, provider};
use crate::DEFAULT_PORT;

/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest client config file read.
const CONFIG_LIMIT: u64 = 1 << 20;

/// The client config file: contexts, and the one in use.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeelsonConfig {
    /// The context in use.
    pub context: String,
    /// By name.
    pub contexts: BTreeMap<String, Context>,
}

/// One cluster: where to connect, and with which credentials (each base64 of PEM).
#[derive(Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Context {
    /// Where to connect, HOST[:PORT].
    #[serde(default)]
    pub endpoints: Vec<String>,
    /// The nodes commands go to by default.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// The cluster's CA certificate.
    pub ca: String,
    /// The client certificate.
    pub crt: String,
    /// The client key.
    pub key: String,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key is never printed.
        f.debug_struct("Context")
            .field("endpoints", &self.endpoints)
            .field("nodes", &self.nodes)
            .finish_non_exhaustive()
    }
}

/// The options every verb shares.
#[derive(Debug, Default)]
pub struct Common {
    socket: Option<PathBuf>,
    nodes: Vec<String>,
    endpoints: Vec<String>,
    insecure: bool,
    fingerprint: Option<String>,
    config: Option<PathBuf>,
}

/// A common option.
#[derive(Debug, Clone, Copy)]
pub enum Opt {
    /// `--socket PATH`
    Socket,
    /// `-n/--nodes HOST[:PORT][,...]`
    Nodes,
    /// `-e/--endpoints HOST[:PORT][,...]`
    Endpoints,
    /// `-i/--insecure`
    Insecure,
    /// `--fingerprint SHA256`
    Fingerprint,
    /// `--keelsonconfig PATH`
    Config,
}

/// Which common option `arg` is, if one. (Taken apart from [`Common::set`] because the
/// argument borrows the parser.)
pub fn option(arg: &lexopt::Arg<'_>) -> Option<Opt> {
    use lexopt::Arg::{Long, Short};
    Some(match arg {
        Long("socket") => Opt::Socket,
        Short('n') | Long("nodes") => Opt::Nodes,
        Short('e') | Long("endpoints") => Opt::Endpoints,
        Short('i') | Long("insecure") => Opt::Insecure,
        Long("fingerprint") => Opt::Fingerprint,
        Long("keelsonconfig") => Opt::Config,
        _ => return None,
    })
}

/// One node to talk to.
#[derive(Debug)]
pub enum Target {
    /// The local socket.
    Local(PathBuf),
    /// A node over TLS.
    Remote {
        /// As named on the command line (the output prefix).
        name: String,
        /// Host and port.
        host: String,
        /// Port.
        port: u16,
        /// The TLS client configuration.
        tls: Arc<ClientConfig>,
        /// `--insecure`: no client certificate. Only a node in maintenance mode answers.
        insecure: bool,
    },
}

impl Target {
    /// The name output is prefixed with when there are several.
    pub fn name(&self) -> String {
        match self {
            Self::Local(p) => p.display().to_string(),
            Self::Remote { name, .. } => name.clone(),
        }
    }

    /// Connected without a client certificate (`--insecure`).
    pub fn is_insecure(&self) -> bool {
        matches!(self, Self::Remote { insecure: true, .. })
    }
}

/// A verb's arguments when they are the node options and plain words only (`service`,
/// `etcd`): the options, and the words in order.
pub fn options_and_words(raw: Vec<std::ffi::OsString>) -> Result<(Common, Vec<String>), String> {
    let mut p = lexopt::Parser::from_args(raw);
    let mut common = Common::default();
    let mut words = Vec::new();
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        if let Some(opt) = option(&arg) {
            common.set(opt, &mut p)?;
            continue;
        }
        match arg {
            lexopt::Arg::Value(v) => words.push(text(v)?),
            _ => return Err(arg.unexpected().to_string()),
        }
    }
    Ok((common, words))
}

/// A connected byte stream.
pub trait Stream: Read + Write {}
impl<T: Read + Write> Stream for T {}

fn text(v: std::ffi::OsString) -> Result<String, String> {
    v.into_string().map_err(|v| format!("not UTF-8: {v:?}"))
}

fn list(v: std::ffi::OsString) -> Result<Vec<String>, String> {
    Ok(text(v)?.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect())
}

impl Common {
    /// Set a common option from its value.
    pub fn set(&mut self, opt: Opt, p: &mut lexopt::Parser) -> Result<(), String> {
        let mut value = || p.value().map_err(|e| e.to_string());
        match opt {
            Opt::Socket => self.socket = Some(value()?.into()),
            Opt::Nodes => self.nodes.extend(list(value()?)?),
            Opt::Endpoints => self.endpoints.extend(list(value()?)?),
            Opt::Insecure => self.insecure = true,
            Opt::Fingerprint => self.fingerprint = Some(text(value()?)?),
            Opt::Config => self.config = Some(value()?.into()),
        }
        Ok(())
    }

    /// The client config named by `--keelsonconfig`, `KEELSONCONFIG`, or the default path if
    /// it exists.
    fn config_path(&self) -> Option<PathBuf> {
        if let Some(p) = &self.config {
            return Some(p.clone());
        }
        if let Some(p) = std::env::var_os("KEELSONCONFIG").filter(|p| !p.is_empty()) {
            return Some(p.into());
        }
        let default = PathBuf::from(std::env::var_os("HOME")?).join(".keelson/config");
        default.exists().then_some(default)
    }

    /// The nodes to talk to.
    pub fn targets(&self) -> Result<Vec<Target>, String> {
        let remote = !self.nodes.is_empty() || !self.endpoints.is_empty() || self.insecure;
        let config_path = if self.insecure { None } else { self.config_path() };
        if !remote && (self.socket.is_some() || config_path.is_none()) {
            let path = self.socket.clone().unwrap_or_else(|| crate::DEFAULT_SOCKET.into());
            return Ok(vec![Target::Local(path)]);
        }
        let (tls, context) = if self.insecure {
            (insecure_config(self.fingerprint.as_deref())?, None)
        } else {
            let path = config_path.ok_or(
                "no client config: use --keelsonconfig PATH (see `keelson gen config`), or --insecure for a node in maintenance mode",
            )?;
            let ctx = load_context(&path)?;
            (mutual_config(&ctx)?, Some(ctx))
        };
        let mut names =
            if self.nodes.is_empty() { self.endpoints.clone() } else { self.nodes.clone() };
        if names.is_empty() {
            if let Some(ctx) = &context {
                names =
                    if ctx.nodes.is_empty() { ctx.endpoints.clone() } else { ctx.nodes.clone() };
            }
        }
        if names.is_empty() {
            return Err("no node to talk to: -n HOST[:PORT][,...]".into());
        }
        names
            .into_iter()
            .map(|name| {
                let (host, port) = split_host_port(&name)?;
                Ok(Target::Remote { name, host, port, tls: tls.clone(), insecure: self.insecure })
            })
            .collect()
    }
}

/// `HOST`, `HOST:PORT`, `[V6]:PORT`, or a bare IPv6 address; the port defaults to 50000.
pub fn split_host_port(s: &str) -> Result<(String, u16), String> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok((a.ip().to_string(), a.port()));
    }
    if let Ok(ip) = s.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
        return Ok((ip.to_string(), DEFAULT_PORT));
    }
    match s.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() => {
            let port = p.parse().map_err(|_| format!("{s:?}: bad port"))?;
            Ok((h.to_owned(), port))
        }
        _ if !s.is_empty() && !s.contains(':') => Ok((s.to_owned(), DEFAULT_PORT)),
        _ => Err(format!("{s:?}: not HOST[:PORT]")),
    }
}

fn load_context(path: &std::path::Path) -> Result<Context, String> {
    let text = base::bounded::read_text(path, CONFIG_LIMIT)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let cfg: KeelsonConfig =
        serde_yaml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    cfg.contexts
        .get(&cfg.context)
        .cloned()
        .ok_or_else(|| format!("{}: no context {:?}", path.display(), cfg.context))
}

fn b64_pem(b64: &str, what: &str) -> Result<Vec<u8>, String> {
    use base64::Engine;
    let text = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .map_err(|_| format!("client config: {what} is not base64"))?;
    pem::parse(&text)
        .map(pem::Pem::into_contents)
        .map_err(|e| format!("client config: {what}: {e}"))
}

fn mutual_config(ctx: &Context) -> Result<Arc<ClientConfig>, String> {
    let ca = CertificateDer::from(b64_pem(&ctx.ca, "ca")?);
    let crt = CertificateDer::from(b64_pem(&ctx.crt, "crt")?);
    let key = PrivateKeyDer::try_from(b64_pem(&ctx.key, "key")?)
        .map_err(|e| format!("client config: key: {e}"))?;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca).map_err(|e| format!("client config: ca: {e}"))?;
    let config = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_client_auth_cert(vec![crt], key)
        .map_err(|e| format!("client config: {e}"))?;
    Ok(Arc::new(config))
}

/// `--insecure`'s client configuration (also what the server's tests connect with).
pub fn insecure_config(pin: Option<&str>) -> Result<Arc<ClientConfig>, String> {
    let pin = pin.map(|p| p.replace(':', "").to_ascii_lowercase());
    if pin.as_ref().is_some_and(|p| p.len() != 64 || !p.bytes().all(|b| b.is_ascii_hexdigit())) {
        return Err("--fingerprint wants the SHA-256 the node printed (64 hex digits)".into());
    }
    let verifier = Arc::new(Unverified { pin, provider: provider() });
    let config = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// `--insecure`: any server certificate, or only the one with the pinned fingerprint. The
/// handshake signature is still checked, so a pinned certificate cannot be replayed.
#[derive(Debug)]
struct Unverified {
    pin: Option<String>,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match &self.pin {
            Some(pin) if *pin != fingerprint(end_entity) => Err(rustls::Error::General(format!(
                "the node's certificate has fingerprint {}, not the one pinned",
                fingerprint(end_entity)
            ))),
            _ => Ok(ServerCertVerified::assertion()),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

/// Connect to one node for gRPC (over TLS offering ALPN `h2`, the way Talos's clients do).
/// `timeout`: how long a read may wait (`None` when streaming).
pub fn open(
    target: &Target,
    timeout: Option<Duration>,
    write_timeout: Duration,
) -> Result<Box<dyn Stream>, String> {
    match target {
        Target::Local(path) => {
            let s = UnixStream::connect(path).map_err(|e| {
                format!(
                    "cannot connect to the API socket {}: {e} (is the node running? --socket PATH)",
                    path.display()
                )
            })?;
            s.set_read_timeout(timeout).map_err(|e| e.to_string())?;
            s.set_write_timeout(Some(write_timeout)).map_err(|e| e.to_string())?;
            Ok(Box::new(s))
        }
        Target::Remote { name, host, port, tls, .. } => {
            let addrs: Vec<SocketAddr> = (host.as_str(), *port)
                .to_socket_addrs()
                .map_err(|e| format!("{name}: {e}"))?
                .collect();
            let mut last = format!("{name}: no address");
            for addr in addrs {
                match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
                    Ok(tcp) => {
                        tcp.set_read_timeout(timeout).map_err(|e| e.to_string())?;
                        tcp.set_write_timeout(Some(write_timeout)).map_err(|e| e.to_string())?;
                        let _ = tcp.set_nodelay(true);
                        let server_name = ServerName::try_from(host.clone())
                            .map_err(|e| format!("{name}: {e}"))?;
                        let mut config = ClientConfig::clone(tls);
                        config.alpn_protocols = vec![b"h2".to_vec()];
                        let config = Arc::new(config);
                        let mut conn = ClientConnection::new(config, server_name)
                            .map_err(|e| format!("{name}: {e}"))?;
                        let mut tcp = tcp;
                        // Finish the handshake now, so a refusal reads as one.
                        while conn.is_handshaking() {
                            conn.complete_io(&mut tcp).map_err(|e| format!("{name}: TLS: {e}"))?;
                        }
                        // A node that picks no protocol may still take HTTP/2 after the
                        // handshake (keelson's does); one that picks another protocol does
                        // not speak gRPC.
                        if conn.alpn_protocol().is_some_and(|p| p != b"h2") {
                            return Err(format!(
                                "{name}: the node chose another protocol than HTTP/2 at ALPN"
                            ));
                        }
                        return Ok(Box::new(StreamOwned::new(conn, tcp)));
                    }
                    Err(e) => last = format!("{name} ({addr}): {e}"),
                }
            }
            Err(last)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_and_port() {
        let ok = |s: &str| split_host_port(s).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(ok("10.0.0.2"), ("10.0.0.2".into(), 50000));
        assert_eq!(ok("10.0.0.2:6000"), ("10.0.0.2".into(), 6000));
        assert_eq!(ok("[fd00::1]:6000"), ("fd00::1".into(), 6000));
        assert_eq!(ok("fd00::1"), ("fd00::1".into(), 50000));
        assert_eq!(ok("[fd00::1]"), ("fd00::1".into(), 50000));
        assert_eq!(ok("node-1"), ("node-1".into(), 50000));
        assert_eq!(ok("node-1:7"), ("node-1".into(), 7));
        for bad in ["", ":5", "node:x", "node:70000"] {
            assert!(split_host_port(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_pin_must_be_a_sha256() {
        assert!(insecure_config(Some("zz")).is_err());
        assert!(insecure_config(Some("ab:".repeat(32).trim_end_matches(':'))).is_ok());
        assert!(insecure_config(None).is_ok());
    }

    #[test]
    fn a_client_config_never_shows_its_key() {
        let ctx = Context { key: "c2VjcmV0".into(), ..Context::default() };
        assert!(!format!("{ctx:?}").contains("c2VjcmV0"));
    }
}
