// SPDX-License-Identifier: Apache-2.0
//! Certificates: the cluster's CA (`machine.ca`, or a new one for `gen config`), the
//! node's server certificate issued from it with its addresses and hostname as SANs, the
//! client certificates with a role in their Organization (as Talos does), and maintenance
//! mode's self-signed certificate. Keys are Ed25519 (what Talos uses for its OS CA); a CA
//! with an ECDSA P-256 key is accepted too.
//!
//! A node's clock may be wrong before time sync, so validity is wide: from a day before
//! issue for the server's, and from 1970 for the CA's.

use std::net::IpAddr;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, DnValue,
    ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::der;

/// Why a certificate could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// rcgen refused (a bad key, a bad name).
    #[error("certificate: {0}")]
    Rcgen(#[from] rcgen::Error),
    /// Not PEM, or not the PEM expected.
    #[error("{what}: {why}")]
    Pem {
        /// Which PEM.
        what: &'static str,
        /// Why.
        why: String,
    },
    /// The CA certificate could not be read.
    #[error("CA certificate: {0}")]
    Der(#[from] der::DerError),
}

/// A certificate with its key, in DER (for rustls) and PEM (for files).
pub struct Identity {
    /// The certificate chain, leaf first.
    pub chain: Vec<CertificateDer<'static>>,
    /// The private key, PKCS#8.
    pub key: PrivatePkcs8KeyDer<'static>,
    /// The leaf in PEM.
    pub cert_pem: String,
    /// The key in PEM.
    pub key_pem: String,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key is never shown.
        f.debug_struct("Identity").field("fingerprint", &self.fingerprint()).finish()
    }
}

impl Identity {
    /// The key as rustls takes it.
    pub fn private_key(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(self.key.clone_key())
    }

    /// The leaf's SHA-256 fingerprint.
    pub fn fingerprint(&self) -> String {
        self.chain.first().map(|c| fingerprint(c)).unwrap_or_default()
    }
}

/// SHA-256 of a DER certificate, lowercase hex (what `--fingerprint` takes): the client's
/// function, so what the node prints is what the client compares.
pub use cli::tls::fingerprint;

fn new_key() -> Result<KeyPair, IdentityError> {
    Ok(KeyPair::generate_for(&rcgen::PKCS_ED25519)?)
}

/// The PKCS#8 v2 prefix ring writes for an Ed25519 key (RFC 8410: version 1, the algorithm,
/// the 32-byte private key, then the public key in `[1]`).
const ED25519_V2_PREFIX: [u8; 16] = [
    0x30, 0x51, 0x02, 0x01, 0x01, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];
/// The same key as PKCS#8 v1 (RFC 5958 version 0, no public key): the bytes that precede the
/// 32-byte private key.
const ED25519_V1_PREFIX: [u8; 16] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];

/// A key as PKCS#8 v1, what Go (Talos) and OpenSSL 3.0 read: ring writes Ed25519 keys as v2,
/// which OpenSSL 3.0 refuses. Other keys are kept as they are.
fn portable_der(key: &KeyPair) -> Vec<u8> {
    let der = key.serialize_der();
    match der.strip_prefix(&ED25519_V2_PREFIX[..]) {
        Some(rest) if rest.len() >= 32 => {
            let mut v1 = ED25519_V1_PREFIX.to_vec();
            v1.extend_from_slice(rest.get(..32).unwrap_or_default());
            v1
        }
        _ => der,
    }
}

pub(crate) fn key_der(key: &KeyPair) -> PrivatePkcs8KeyDer<'static> {
    PrivatePkcs8KeyDer::from(portable_der(key))
}

pub(crate) fn key_pem(key: &KeyPair) -> String {
    pem("PRIVATE KEY", &portable_der(key))
}

fn days_from_now(days: i64) -> time::OffsetDateTime {
    time::OffsetDateTime::now_utc() + time::Duration::days(days)
}

/// One PEM block's contents, any label (Talos writes `ED25519 PRIVATE KEY` for PKCS#8).
pub fn pem_block(what: &'static str, text: &str) -> Result<Vec<u8>, IdentityError> {
    pem::parse(text)
        .map(|p| p.into_contents())
        .map_err(|e| IdentityError::Pem { what, why: e.to_string() })
}

/// The DER of a length.
fn der_len(n: usize) -> Vec<u8> {
    match n {
        0..0x80 => vec![n as u8],
        0x80..0x100 => vec![0x81, n as u8],
        _ => vec![0x82, (n >> 8) as u8, n as u8],
    }
}

/// A SEC1 `EC PRIVATE KEY` (what Go's x509 writes for Talos's etcd and Kubernetes CAs) as
/// PKCS#8, which is what ring reads: the same key inside a PrivateKeyInfo naming its curve
/// (RFC 5915, RFC 5958). The curve comes from the key's own parameters; P-256 and P-384 are
/// the curves ring signs with.
fn sec1_to_pkcs8(sec1: &[u8]) -> Option<Vec<u8>> {
    const P256: &[u8] = &[0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
    const P384: &[u8] = &[0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x22];
    const EC_PUBLIC_KEY: &[u8] = &[0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
    if sec1.len() > 0xff00 {
        return None;
    }
    let curve = [P256, P384].into_iter().find(|oid| sec1.windows(oid.len()).any(|w| w == *oid))?;
    let mut alg = vec![0x30];
    alg.extend(der_len(EC_PUBLIC_KEY.len() + curve.len()));
    alg.extend_from_slice(EC_PUBLIC_KEY);
    alg.extend_from_slice(curve);
    let mut body = vec![0x02, 0x01, 0x00];
    body.extend(alg);
    body.push(0x04);
    body.extend(der_len(sec1.len()));
    body.extend_from_slice(sec1);
    let mut out = vec![0x30];
    out.extend(der_len(body.len()));
    out.extend(body);
    Some(out)
}

fn pem(label: &str, der: &[u8]) -> String {
    pem::encode(&pem::Pem::new(label, der.to_vec()))
}

/// The cluster's CA: trust root for clients and the node, issuer of their certificates.
pub struct Ca {
    /// The CA certificate.
    pub cert: CertificateDer<'static>,
    /// The CA certificate, PEM.
    pub cert_pem: String,
    /// The CA key, PEM.
    key_pem: String,
    key: KeyPair,
    subject: DistinguishedName,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ca").field("fingerprint", &fingerprint(&self.cert)).finish()
    }
}

impl Ca {
    /// A new CA for a cluster (`gen config`).
    pub fn generate(cluster: &str) -> Result<Self, IdentityError> {
        let key = new_key()?;
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::OrganizationName, "keelson");
        params.distinguished_name.push(DnType::CommonName, cluster);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        params.not_before = rcgen::date_time_ymd(1970, 1, 1);
        params.not_after = days_from_now(10 * 365);
        let cert = params.self_signed(&key)?;
        Ok(Self {
            cert_pem: cert.pem(),
            cert: cert.der().clone(),
            key_pem: key_pem(&key),
            subject: params.distinguished_name,
            key,
        })
    }

    /// The CA of a machine config (`machine.ca.crt` and `.key`, PEM).
    pub fn from_pem(cert_pem: &str, key_text: &str) -> Result<Self, IdentityError> {
        let cert = CertificateDer::from(pem_block("machine.ca.crt", cert_pem)?);
        let mut key_bytes = pem_block("machine.ca.key", key_text)?;
        if pem::parse(key_text).is_ok_and(|p| p.tag() == "EC PRIVATE KEY") {
            key_bytes = sec1_to_pkcs8(&key_bytes).ok_or_else(|| IdentityError::Pem {
                what: "machine.ca.key",
                why: "an EC key on a curve other than P-256 or P-384".into(),
            })?;
        }
        let key = KeyPair::try_from(key_bytes.as_slice()).map_err(|e| IdentityError::Pem {
            what: "machine.ca.key",
            why: format!("not a PKCS#8 Ed25519 or ECDSA key ({e})"),
        })?;
        let subject = distinguished_name(&der::subject(&cert)?);
        // A key that is not the certificate's would sign server certificates no client
        // can verify: the node would lock everyone out.
        if der::subject_public_key(&cert)? != key.public_key_raw() {
            return Err(IdentityError::Pem {
                what: "machine.ca.key",
                why: "not the key of machine.ca.crt".into(),
            });
        }
        Ok(Self { cert_pem: pem("CERTIFICATE", &cert), cert, key_pem: key_pem(&key), key, subject })
    }

    /// The CA key, PEM (for `gen config`'s machine config only).
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    pub(crate) fn issuer(&self) -> Issuer<'_, &KeyPair> {
        let mut params = CertificateParams::default();
        params.distinguished_name = self.subject.clone();
        Issuer::new(params, &self.key)
    }

    /// The node's server certificate for these names and addresses.
    pub fn issue_server(&self, sans: &Sans) -> Result<Identity, IdentityError> {
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, sans.hostname.as_deref().unwrap_or("keelson"));
        params.subject_alt_names = sans.to_rcgen();
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.not_before = days_from_now(-1);
        params.not_after = days_from_now(365);
        self.issue(params)
    }

    /// A certificate for both ends of mutual TLS (etcd's peer and client ports: a member is
    /// a server to some and a client to others) for these names and addresses.
    pub fn issue_peer(&self, sans: &Sans) -> Result<Identity, IdentityError> {
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, sans.hostname.as_deref().unwrap_or("keelson"));
        params.subject_alt_names = sans.to_rcgen();
        params.extended_key_usages =
            vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.not_before = days_from_now(-1);
        params.not_after = days_from_now(365);
        self.issue(params)
    }

    /// A client certificate with `role` (`os:admin`, `os:reader`, ...) as its Organization.
    pub fn issue_client(&self, role: &str, days: i64) -> Result<Identity, IdentityError> {
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::OrganizationName, role);
        params.distinguished_name.push(DnType::CommonName, role.trim_start_matches("os:"));
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.not_before = days_from_now(-1);
        params.not_after = days_from_now(days);
        self.issue(params)
    }

    /// A Kubernetes client certificate: `organization` (the groups) and `common_name` (the
    /// user), an ECDSA P-256 key (what Kubernetes' own tools issue).
    pub fn issue_kube_client(
        &self,
        organization: &str,
        common_name: &str,
        days: i64,
    ) -> Result<Identity, IdentityError> {
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::OrganizationName, organization);
        params.distinguished_name.push(DnType::CommonName, common_name);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.key_usages =
            vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.not_before = days_from_now(-1);
        params.not_after = days_from_now(days);
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
        self.issue_with(params, key)
    }

    fn issue(&self, params: CertificateParams) -> Result<Identity, IdentityError> {
        self.issue_with(params, new_key()?)
    }

    fn issue_with(
        &self,
        params: CertificateParams,
        key: KeyPair,
    ) -> Result<Identity, IdentityError> {
        let cert = params.signed_by(&key, &self.issuer())?;
        Ok(Identity {
            chain: vec![cert.der().clone()],
            cert_pem: cert.pem(),
            key_pem: key_pem(&key),
            key: key_der(&key),
        })
    }
}

/// What the server certificate names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sans {
    /// The node's hostname, if it has one.
    pub hostname: Option<String>,
    /// Its addresses (loopback included: a forwarded port reaches the node as 127.0.0.1).
    pub addresses: Vec<IpAddr>,
}

impl Sans {
    pub(crate) fn to_rcgen(&self) -> Vec<SanType> {
        let mut out: Vec<SanType> = self
            .hostname
            .iter()
            .filter_map(|h| rcgen::string::Ia5String::try_from(h.as_str()).ok())
            .map(SanType::DnsName)
            .collect();
        out.extend(self.addresses.iter().map(|a| SanType::IpAddress(*a)));
        out
    }
}

/// Maintenance mode's certificate: self-signed, checked by nobody (clients use `--insecure`,
/// or pin its fingerprint).
pub fn self_signed(sans: &Sans) -> Result<Identity, IdentityError> {
    let key = new_key()?;
    let mut params = CertificateParams::default();
    params.distinguished_name.push(DnType::CommonName, "keelson maintenance");
    params.subject_alt_names = sans.to_rcgen();
    params.not_before = days_from_now(-1);
    params.not_after = days_from_now(365);
    let cert = params.self_signed(&key)?;
    Ok(Identity {
        chain: vec![cert.der().clone()],
        cert_pem: cert.pem(),
        key_pem: key_pem(&key),
        key: key_der(&key),
    })
}

/// The CA's subject as rcgen writes it back, attribute by attribute with the same string
/// types, so that the issuer of what we sign matches the CA's subject byte for byte.
fn distinguished_name(attrs: &[der::Attribute]) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    for a in attrs {
        let text = String::from_utf8_lossy(&a.value).into_owned();
        let value = match a.tag {
            0x13 => rcgen::string::PrintableString::try_from(text.as_str())
                .map(DnValue::PrintableString)
                .unwrap_or(DnValue::Utf8String(text)),
            0x16 => rcgen::string::Ia5String::try_from(text.as_str())
                .map(DnValue::Ia5String)
                .unwrap_or(DnValue::Utf8String(text)),
            _ => DnValue::Utf8String(text),
        };
        dn.push(DnType::from_oid(&oid_arcs(&a.oid)), value);
    }
    dn
}

/// An OID's arcs from its DER content.
fn oid_arcs(der: &[u8]) -> Vec<u64> {
    let mut arcs = Vec::new();
    let mut acc: u64 = 0;
    for (i, b) in der.iter().enumerate() {
        acc = acc.saturating_mul(128) | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            if i == 0 || arcs.is_empty() {
                arcs.push(acc.min(80) / 40);
                arcs.push(acc - acc.min(80) / 40 * 40);
            } else {
                arcs.push(acc);
            }
            acc = 0;
        }
    }
    arcs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oids() {
        assert_eq!(oid_arcs(der::OID_ORGANIZATION), [2, 5, 4, 10]);
        assert_eq!(oid_arcs(&[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d]), [1, 2, 840, 113549]);
    }

    #[test]
    fn a_ca_read_back_issues_what_it_would_have_issued() {
        let ca = Ca::generate("demo").unwrap_or_else(|e| unreachable!("{e}"));
        let again =
            Ca::from_pem(&ca.cert_pem, ca.key_pem()).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(again.cert, ca.cert);
        let sans =
            Sans { hostname: Some("node-1".into()), addresses: vec![IpAddr::from([10, 0, 0, 2])] };
        let server = again.issue_server(&sans).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(der::subject(&ca.cert).ok(), der::subject(&again.cert).ok());
        assert_eq!(server.fingerprint().len(), 64);
    }

    #[test]
    fn keys_are_written_as_pkcs8_v1_and_read_back() {
        let key = new_key().unwrap_or_else(|e| unreachable!("{e}"));
        let v1 = portable_der(&key);
        assert_eq!(v1.len(), 48);
        assert!(v1.starts_with(&ED25519_V1_PREFIX));
        let back = KeyPair::try_from(v1.as_slice()).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(back.public_key_raw(), key.public_key_raw());
    }

    #[test]
    fn bad_pem_is_refused_with_its_field() {
        let e = Ca::from_pem("nope", "nope").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("machine.ca.crt"), "{e}");
        let ca = Ca::generate("demo").unwrap_or_else(|e| unreachable!("{e}"));
        let e = Ca::from_pem(
            &ca.cert_pem,
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(e.contains("machine.ca.key"), "{e}");
    }

    #[test]
    fn a_key_that_is_not_the_certificates_is_refused() {
        let ca = Ca::generate("demo").unwrap_or_else(|e| unreachable!("{e}"));
        let other = Ca::generate("other").unwrap_or_else(|e| unreachable!("{e}"));
        let e = Ca::from_pem(&ca.cert_pem, other.key_pem())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("not the key of machine.ca.crt"), "{e}");
    }
}
