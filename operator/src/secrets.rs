// SPDX-License-Identifier: Apache-2.0
//! A cluster's secrets, generated once and kept sealed in the store, and the machine
//! configurations rendered from them, as `talosctl gen secrets` and `gen config` make them:
//! the machine (OS) CA, the Kubernetes CA, the etcd CA, the cluster ID and secret, the
//! bootstrap token, the machine token and the secretbox encryption secret. The operator's own
//! `os:admin` client certificate comes from the machine CA.
//!
//! At rest the bundle is JSON sealed with ChaCha20-Poly1305 (RFC 8439) under the operator's
//! secrets key (`DIR/secrets.key`, 32 random bytes, mode 0600), a fresh 96-bit nonce per
//! write, the resource's namespace and ID as associated data (a sealed bundle moved to
//! another ID does not open).

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;

use base64::Engine;
use pki::identity::Ca;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};
use serde::{Deserialize, Serialize};

use crate::kinds::{render_config, Body, MachineSpec, PoolSpec, TCP, TW};
use crate::store::{Resource, Store, StoreError};

/// The store type of sealed bundles (ID: the cluster's name).
pub const CLUSTER_SECRETS: &str = "ClusterSecrets.keelson.dev";
/// The operator's client certificates live a year, as Talos's admin certificate; they are
/// issued again at each start.
const CLIENT_DAYS: i64 = 365;

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Why secrets could not be made, read or used.
#[derive(Debug, thiserror::Error)]
pub enum SecretsError {
    #[error("secrets key {path}: {why}")]
    Key { path: String, why: String },
    #[error("cluster secrets: {0}")]
    Pki(#[from] pki::identity::IdentityError),
    #[error("cluster secrets: no randomness from the system")]
    Random,
    #[error("{0}: cannot be opened with this operator's secrets key")]
    Open(String),
    #[error("cluster secrets {0}: {1}")]
    Garbage(String, String),
    #[error("client TLS: {0}")]
    Tls(String),
}

/// A CA's certificate and key, PEM.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PemPair {
    pub crt: String,
    pub key: String,
}

impl std::fmt::Debug for PemPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PemPair(REDACTED)")
    }
}

impl PemPair {
    fn of(ca: &Ca) -> Self {
        Self { crt: ca.cert_pem.clone(), key: ca.key_pem().to_owned() }
    }

    /// `crt`/`key` as a Talos configuration holds them (base64 of the PEM).
    fn yaml(&self, indent: &str) -> String {
        format!(
            "{indent}crt: {}\n{indent}key: {}\n",
            b64(self.crt.as_bytes()),
            b64(self.key.as_bytes())
        )
    }
}

/// One cluster's secrets.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSecrets {
    pub cluster_name: String,
    /// `machine.ca`: the Talos API's CA.
    pub machine_ca: PemPair,
    /// `cluster.ca`.
    pub kubernetes_ca: PemPair,
    /// `cluster.etcd.ca`.
    pub etcd_ca: PemPair,
    /// `cluster.id`, `cluster.secret`: 32 random bytes each, base64.
    pub cluster_id: String,
    pub cluster_secret: String,
    /// `cluster.token`: Kubernetes's bootstrap token form, `[a-z0-9]{6}.[a-z0-9]{16}`.
    pub bootstrap_token: String,
    /// `machine.token`: the same form.
    pub machine_token: String,
    /// `cluster.secretboxEncryptionSecret`: 32 random bytes, base64.
    pub secretbox_secret: String,
}

impl std::fmt::Debug for ClusterSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ClusterSecrets({}, REDACTED)", self.cluster_name)
    }
}

/// The machine's role in its cluster (`machine.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MachineType {
    ControlPlane,
    Worker,
}

impl MachineType {
    pub fn name(self) -> &'static str {
        match self {
            Self::ControlPlane => "controlplane",
            Self::Worker => "worker",
        }
    }
}

fn random<const N: usize>(rng: &SystemRandom) -> Result<[u8; N], SecretsError> {
    let mut b = [0u8; N];
    rng.fill(&mut b).map_err(|_| SecretsError::Random)?;
    Ok(b)
}

/// `[a-z0-9]{6}.[a-z0-9]{16}` (a Kubernetes bootstrap token), without modulo bias: bytes of
/// 252 and above are drawn again.
fn token(rng: &SystemRandom) -> Result<String, SecretsError> {
    const ALPHABET: &[u8; 36] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut out = String::with_capacity(23);
    while out.len() < 23 {
        for b in random::<32>(rng)? {
            if out.len() == 6 {
                out.push('.');
            }
            if out.len() < 23 && b < 252 {
                out.push(char::from(ALPHABET[usize::from(b % 36)]));
            }
        }
    }
    Ok(out)
}

impl ClusterSecrets {
    /// New secrets for the cluster `name`.
    pub fn generate(name: &str) -> Result<Self, SecretsError> {
        let rng = SystemRandom::new();
        Ok(Self {
            cluster_name: name.to_owned(),
            machine_ca: PemPair::of(&Ca::generate(name)?),
            kubernetes_ca: PemPair::of(&Ca::generate(&format!("{name}-kubernetes"))?),
            etcd_ca: PemPair::of(&Ca::generate(&format!("{name}-etcd"))?),
            cluster_id: b64(&random::<32>(&rng)?),
            cluster_secret: b64(&random::<32>(&rng)?),
            bootstrap_token: token(&rng)?,
            machine_token: token(&rng)?,
            secretbox_secret: b64(&random::<32>(&rng)?),
        })
    }

    /// The machine configuration of a `kind` machine of this cluster, whose Kubernetes API is
    /// `endpoint` (`https://…`): what `talosctl gen config` puts in `controlplane.yaml` or
    /// `worker.yaml`, the secrets a worker does not need left out (its CA keys, the etcd CA,
    /// the encryption secret).
    pub fn machine_config(&self, kind: MachineType, endpoint: &str) -> String {
        let cp = kind == MachineType::ControlPlane;
        let mut s = format!(
            "# Made by keelson-operator from the cluster's secrets.\n\
             version: v1alpha1\n\
             machine:\n  \
               type: {}\n  \
               token: {}\n  \
               ca:\n",
            kind.name(),
            self.machine_token
        );
        if cp {
            s.push_str(&self.machine_ca.yaml("    "));
        } else {
            s.push_str(&format!("    crt: {}\n", b64(self.machine_ca.crt.as_bytes())));
        }
        s.push_str(&format!(
            "  network: {{}}\n\
             cluster:\n  \
               id: {}\n  \
               secret: {}\n  \
               clusterName: {}\n  \
               controlPlane:\n    \
                 endpoint: {endpoint}\n  \
               token: {}\n  \
               ca:\n",
            self.cluster_id, self.cluster_secret, self.cluster_name, self.bootstrap_token
        ));
        if cp {
            s.push_str(&self.kubernetes_ca.yaml("    "));
            s.push_str(&format!("  secretboxEncryptionSecret: {}\n", self.secretbox_secret));
            s.push_str("  etcd:\n    ca:\n");
            s.push_str(&self.etcd_ca.yaml("      "));
        } else {
            s.push_str(&format!("    crt: {}\n", b64(self.kubernetes_ca.crt.as_bytes())));
        }
        s
    }

    /// A client configuration with a fresh `os:admin` certificate of the machine CA, trusting
    /// only that CA: what the operator calls this cluster's configured nodes with.
    pub fn admin_client(&self) -> Result<Arc<rustls::ClientConfig>, SecretsError> {
        let ca = Ca::from_pem(&self.machine_ca.crt, &self.machine_ca.key)?;
        let id = ca.issue_client("os:admin", CLIENT_DAYS)?;
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca.cert.clone()).map_err(|e| SecretsError::Tls(e.to_string()))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| SecretsError::Tls(e.to_string()))?
            .with_root_certificates(roots)
            .with_client_auth_cert(id.chain.clone(), id.private_key())
            .map_err(|e| SecretsError::Tls(e.to_string()))?;
        Ok(Arc::new(config))
    }
}

/// A bundle as stored: nonce and ciphertext (with its tag), base64.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sealed {
    pub nonce: String,
    pub sealed: String,
}

/// The operator's secrets key.
pub struct SecretsKey(LessSafeKey);

impl std::fmt::Debug for SecretsKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretsKey(REDACTED)")
    }
}

impl SecretsKey {
    pub fn from_bytes(bytes: &[u8; 32]) -> Result<Self, SecretsError> {
        let k = UnboundKey::new(&CHACHA20_POLY1305, bytes)
            .map_err(|_| SecretsError::Key { path: "-".into(), why: "not a key".into() })?;
        Ok(Self(LessSafeKey::new(k)))
    }

    /// The key in `path`, which must exist (readers such as `kubeconfig` never make one).
    pub fn load(path: &Path) -> Result<Self, SecretsError> {
        let err = |why: String| SecretsError::Key { path: path.display().to_string(), why };
        let b = std::fs::read(path).map_err(|e| err(e.to_string()))?;
        let b: [u8; 32] =
            b.try_into().map_err(|b: Vec<u8>| err(format!("{} bytes, expected 32", b.len())))?;
        Self::from_bytes(&b)
    }

    /// The key in `path`: exactly 32 bytes; made (mode 0600, never overwritten) when absent.
    /// Every replica of an operator sharing a store needs the same file.
    pub fn load_or_create(path: &Path) -> Result<Self, SecretsError> {
        let err = |why: String| SecretsError::Key { path: path.display().to_string(), why };
        match std::fs::read(path) {
            Ok(b) => {
                let b: [u8; 32] = b
                    .try_into()
                    .map_err(|b: Vec<u8>| err(format!("{} bytes, expected 32", b.len())))?;
                Self::from_bytes(&b)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let b = random::<32>(&SystemRandom::new())?;
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(path)
                    .map_err(|e| err(e.to_string()))?;
                f.write_all(&b).and_then(|()| f.sync_all()).map_err(|e| err(e.to_string()))?;
                log::info!("made a new secrets key in {}", path.display());
                Self::from_bytes(&b)
            }
            Err(e) => Err(err(e.to_string())),
        }
    }

    /// `bundle` sealed, bound to `aad` (the resource's namespace and ID).
    pub fn seal(&self, aad: &str, bundle: &ClusterSecrets) -> Result<Sealed, SecretsError> {
        let data = serde_json::to_vec(bundle)
            .map_err(|e| SecretsError::Garbage(bundle.cluster_name.clone(), e.to_string()))?;
        self.seal_bytes(aad, data)
    }

    /// Any secret (a kubeconfig) sealed, bound to `aad`, with a fresh nonce.
    pub fn seal_bytes(&self, aad: &str, mut data: Vec<u8>) -> Result<Sealed, SecretsError> {
        let nonce = random::<NONCE_LEN>(&SystemRandom::new())?;
        self.0
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad.as_bytes()),
                &mut data,
            )
            .map_err(|_| SecretsError::Random)?;
        Ok(Sealed { nonce: b64(&nonce), sealed: b64(&data) })
    }

    /// The bundle in `s`, if this key sealed it for `aad` and nobody changed it.
    pub fn open(&self, aad: &str, s: &Sealed) -> Result<ClusterSecrets, SecretsError> {
        let plain = self.open_bytes(aad, s)?;
        serde_json::from_slice(&plain)
            .map_err(|e| SecretsError::Garbage(aad.to_owned(), e.to_string()))
    }

    /// What [`Self::seal_bytes`] sealed for `aad`, if nobody changed it.
    pub fn open_bytes(&self, aad: &str, s: &Sealed) -> Result<Vec<u8>, SecretsError> {
        let d = |t: &str| base64::engine::general_purpose::STANDARD.decode(t.as_bytes());
        let garbage = |why: &str| SecretsError::Garbage(aad.to_owned(), why.to_owned());
        let nonce: [u8; NONCE_LEN] = d(&s.nonce)
            .ok()
            .and_then(|n| n.try_into().ok())
            .ok_or_else(|| garbage("the nonce is not 12 bytes of base64"))?;
        let mut data = d(&s.sealed).map_err(|_| garbage("not base64"))?;
        let plain = self
            .0
            .open_in_place(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad.as_bytes()),
                &mut data,
            )
            .map_err(|_| SecretsError::Open(aad.to_owned()))?;
        Ok(plain.to_vec())
    }
}

/// A cluster's secrets from the store: opened, or (`create`) generated, sealed and stored
/// the first time. `Ok(Err(why))`: none can be had (no key, a bundle this key cannot open,
/// none yet and not `create`).
pub fn cluster_secrets(
    store: &mut Store,
    namespace: &str,
    key: Option<&SecretsKey>,
    cluster: &str,
    create: bool,
) -> Result<Result<ClusterSecrets, String>, StoreError> {
    let Some(key) = key else {
        return Ok(Err("no config given, and no secrets key to generate one".into()));
    };
    let aad = aad(namespace, cluster);
    if let Some(r) = store.get::<Sealed>(namespace, CLUSTER_SECRETS, cluster)? {
        return Ok(key.open(&aad, &r.spec).map_err(|e| e.to_string()));
    }
    if !create {
        return Ok(Err(format!("cluster {cluster} has no secrets yet")));
    }
    let made = ClusterSecrets::generate(cluster).and_then(|s| Ok((key.seal(&aad, &s)?, s)));
    let (sealed, bundle) = match made {
        Ok(x) => x,
        Err(e) => return Ok(Err(e.to_string())),
    };
    store.create(&mut Resource::new(namespace, CLUSTER_SECRETS, cluster, sealed))?;
    log::info!("cluster {cluster}: generated its secrets (CAs, tokens), sealed in the store");
    Ok(Ok(bundle))
}

/// A machine's configuration, and the generated cluster it came from (`None`: its own
/// `config`).
#[derive(Debug)]
pub struct Rendered {
    pub config: Result<String, String>,
    pub cluster: Option<(String, ClusterSecrets)>,
}

/// The configuration a TalosMachine gets: its own `config`, or one rendered from its
/// cluster's secrets (the cluster: its control plane, its worker pool's control plane, or
/// for a machine of no pool the machine itself; a control plane's `endpoint`, else
/// `https://ENDPOINT:6443`); its patches and additional documents on top.
pub fn machine_config(
    store: &mut Store,
    namespace: &str,
    key: Option<&SecretsKey>,
    name: &str,
    s: &MachineSpec,
    create: bool,
) -> Result<Rendered, StoreError> {
    // The kubelet's version goes last: what status records as applied is what was asked for.
    let mut patches = s.config_patches.clone();
    if !s.kube_version.is_empty() {
        patches.push(crate::kinds::kubelet_patch(&s.kube_version));
    }
    let render = |base: &str| render_config(base, &patches, &s.additional_config);
    if !s.config.is_empty() {
        return Ok(Rendered { config: render(&s.config), cluster: None });
    }
    let fail = |e: String| Ok(Rendered { config: Err(e), cluster: None });
    let pool = |store: &mut Store, kind: &str, id: &str| {
        store.get::<Body<PoolSpec>>(namespace, kind, id).map(|p| p.map(|p| p.spec.spec))
    };
    let (cluster, kind) = match (&s.control_plane_ref, &s.worker_ref) {
        (Some(cp), _) => (cp.clone(), MachineType::ControlPlane),
        (None, Some(w)) => match pool(store, TW, w)?.and_then(|p| p.control_plane_ref) {
            Some(cp) => (cp, MachineType::Worker),
            None => return fail(format!("worker {w} has no control plane to take secrets from")),
        },
        (None, None) => (name.to_owned(), MachineType::ControlPlane),
    };
    let endpoint = match pool(store, TCP, &cluster)?.map(|p| p.endpoint) {
        Some(e) if !e.is_empty() => e,
        _ if s.endpoint.contains(':') => format!("https://[{}]:6443", s.endpoint),
        _ => format!("https://{}:6443", s.endpoint),
    };
    let bundle = match cluster_secrets(store, namespace, key, &cluster, create)? {
        Ok(b) => b,
        Err(e) => return fail(e),
    };
    Ok(Rendered {
        config: render(&bundle.machine_config(kind, &endpoint)),
        cluster: Some((cluster, bundle)),
    })
}

/// The associated data a bundle is sealed with.
pub fn aad(namespace: &str, cluster: &str) -> String {
    format!("{CLUSTER_SECRETS}/{namespace}/{cluster}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets() -> ClusterSecrets {
        ClusterSecrets::generate("c1").unwrap()
    }

    #[test]
    fn tokens_have_the_bootstrap_token_form() {
        let rng = SystemRandom::new();
        for _ in 0..50 {
            let t = token(&rng).unwrap();
            let (a, b) = t.split_once('.').unwrap();
            assert_eq!((a.len(), b.len()), (6, 16), "{t}");
            assert!(
                (a.to_owned() + b).bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()),
                "{t}"
            );
        }
        let s = secrets();
        assert_ne!(s.bootstrap_token, s.machine_token);
        assert_ne!(s.cluster_id, s.cluster_secret);
        assert_ne!(s.machine_ca, s.kubernetes_ca);
        assert_ne!(s.kubernetes_ca, s.etcd_ca);
    }

    #[test]
    fn sealed_bundles_open_only_with_their_key_and_id() {
        let s = secrets();
        let k = SecretsKey::from_bytes(&[7; 32]).unwrap();
        let sealed = k.seal(&aad("default", "c1"), &s).unwrap();
        // Nothing of the bundle is readable in what is stored.
        let stored = serde_json::to_string(&sealed).unwrap();
        for secret in [&s.bootstrap_token, &s.cluster_secret, &s.secretbox_secret] {
            assert!(!stored.contains(secret.as_str()));
        }
        assert!(!stored.contains("PRIVATE KEY"));
        assert_eq!(k.open(&aad("default", "c1"), &sealed).unwrap(), s);
        // Another ID, another key, a flipped byte: refused.
        assert!(matches!(k.open(&aad("default", "c2"), &sealed), Err(SecretsError::Open(_))));
        let other = SecretsKey::from_bytes(&[8; 32]).unwrap();
        assert!(matches!(other.open(&aad("default", "c1"), &sealed), Err(SecretsError::Open(_))));
        let mut bytes = base64::engine::general_purpose::STANDARD.decode(&sealed.sealed).unwrap();
        bytes[3] ^= 1;
        let flipped = Sealed { sealed: b64(&bytes), ..sealed.clone() };
        assert!(matches!(k.open(&aad("default", "c1"), &flipped), Err(SecretsError::Open(_))));
        let bad = Sealed { nonce: "AAAA".into(), ..sealed };
        assert!(matches!(k.open(&aad("default", "c1"), &bad), Err(SecretsError::Garbage(..))));
        assert_eq!(format!("{s:?}"), "ClusterSecrets(c1, REDACTED)");
    }

    #[test]
    fn the_key_file_is_made_once_and_kept() {
        let dir = std::env::temp_dir().join(format!("keelson-seckey-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("secrets.key");
        let a = SecretsKey::load_or_create(&path).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!((meta.len(), meta.permissions().mode() & 0o777), (32, 0o600));
        let b = SecretsKey::load_or_create(&path).unwrap();
        let s = secrets();
        let sealed = a.seal("x", &s).unwrap();
        assert_eq!(b.open("x", &sealed).unwrap(), s);
        std::fs::write(&path, [0u8; 31]).unwrap();
        let e = SecretsKey::load_or_create(&path).unwrap_err().to_string();
        assert!(e.ends_with("31 bytes, expected 32"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn configurations_carry_what_each_role_needs() {
        let s = secrets();
        let cp = s.machine_config(MachineType::ControlPlane, "https://10.0.0.1:6443");
        let w = s.machine_config(MachineType::Worker, "https://10.0.0.1:6443");
        let v: serde_yaml::Value = serde_yaml::from_str(&cp).unwrap();
        let b = |t: &str| b64(t.as_bytes());
        assert_eq!(v["machine"]["type"].as_str(), Some("controlplane"));
        assert_eq!(v["machine"]["ca"]["key"].as_str(), Some(b(&s.machine_ca.key).as_str()));
        assert_eq!(v["cluster"]["ca"]["crt"].as_str(), Some(b(&s.kubernetes_ca.crt).as_str()));
        assert_eq!(v["cluster"]["etcd"]["ca"]["key"].as_str(), Some(b(&s.etcd_ca.key).as_str()));
        assert_eq!(v["cluster"]["token"].as_str(), Some(s.bootstrap_token.as_str()));
        assert_eq!(v["cluster"]["clusterName"].as_str(), Some("c1"));
        assert_eq!(
            v["cluster"]["controlPlane"]["endpoint"].as_str(),
            Some("https://10.0.0.1:6443")
        );
        let v: serde_yaml::Value = serde_yaml::from_str(&w).unwrap();
        assert_eq!(v["machine"]["type"].as_str(), Some("worker"));
        assert_eq!(v["machine"]["ca"]["crt"].as_str(), Some(b(&s.machine_ca.crt).as_str()));
        // A worker holds no CA key, no etcd CA and no encryption secret.
        assert!(v["machine"]["ca"].get("key").is_none() && v["cluster"]["ca"].get("key").is_none());
        assert!(v["cluster"].get("etcd").is_none());
        assert!(!w.contains(&s.secretbox_secret));
        // keelson's parser takes both without a warning about their shape.
        for text in [&cp, &w] {
            let cfg = model::config::parse(text).unwrap();
            assert_eq!(cfg.machine.ca.clone().unwrap_or_default().crt, b(&s.machine_ca.crt));
        }
    }

    #[test]
    fn the_admin_client_is_trusted_by_the_clusters_ca() {
        let s = secrets();
        assert!(s.admin_client().is_ok());
        let broken =
            ClusterSecrets { machine_ca: PemPair { crt: "x".into(), key: "y".into() }, ..s };
        assert!(broken.admin_client().is_err());
    }
}
