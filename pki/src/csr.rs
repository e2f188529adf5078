// SPDX-License-Identifier: Apache-2.0
//! Certificate signing requests (PKCS#10, RFC 2986), both ends of what Talos's trustd does:
//! a worker makes a key and a request naming its addresses and hostname, a control plane
//! checks the request's signature and signs a certificate for it with `machine.ca`.
//!
//! What is signed takes from the request only its public key and its DNS and IP subject
//! alternative names (at most [`MAX_SANS`]); everything else (subject, key usage, extended
//! key usage, validity) is the signer's choice, as the node's own server certificate. Pure,
//! bounded by the input: a request is at most [`MAX_CSR`] bytes and every length is checked.

use std::net::IpAddr;

use rcgen::{
    CertificateParams, DnType, ExtendedKeyUsagePurpose, KeyPair, KeyUsagePurpose, PublicKeyData,
    SanType, SignatureAlgorithm,
};

use crate::der::{expect, tlv, DerError};
use crate::identity::{Ca, Identity, IdentityError, Sans};

/// Largest request accepted, PEM or DER (a request naming [`MAX_SANS`] names is a few KiB).
pub const MAX_CSR: usize = 16 * 1024;
/// Most subject alternative names taken from a request.
pub const MAX_SANS: usize = 64;

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CsrError {
    /// More than [`MAX_CSR`] bytes.
    #[error("certificate request: {0} bytes, more than {MAX_CSR}")]
    TooLarge(usize),
    /// Not PEM or not DER of a request.
    #[error("certificate request: {0}")]
    Malformed(&'static str),
    /// A key or signature algorithm not taken (RSA, for one).
    #[error("certificate request: unsupported {0}")]
    Unsupported(&'static str),
    /// The signature does not verify with the request's own key.
    #[error("certificate request: bad signature")]
    BadSignature,
    /// Signing failed.
    #[error("certificate request: signing: {0}")]
    Sign(String),
}

impl From<DerError> for CsrError {
    fn from(_: DerError) -> Self {
        CsrError::Malformed("malformed DER")
    }
}

/// The key types a request may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyAlg {
    Ed25519,
    P256,
    P384,
}

impl KeyAlg {
    fn rcgen(self) -> &'static SignatureAlgorithm {
        match self {
            KeyAlg::Ed25519 => &rcgen::PKCS_ED25519,
            KeyAlg::P256 => &rcgen::PKCS_ECDSA_P256_SHA256,
            KeyAlg::P384 => &rcgen::PKCS_ECDSA_P384_SHA384,
        }
    }
}

/// A request whose signature verified: its key and the names it asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Csr {
    alg: KeyAlg,
    /// The subjectPublicKey's bits.
    key: Vec<u8>,
    /// The DNS names asked for.
    pub dns: Vec<String>,
    /// The addresses asked for.
    pub ips: Vec<IpAddr>,
}

impl PublicKeyData for Csr {
    fn der_bytes(&self) -> &[u8] {
        &self.key
    }

    fn algorithm(&self) -> &'static SignatureAlgorithm {
        self.alg.rcgen()
    }
}

const OID_ED25519: &[u8] = &[0x2b, 0x65, 0x70];
const OID_EC_PUBLIC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
const OID_P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
const OID_P384: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x22];
const OID_ECDSA_SHA256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02];
const OID_ECDSA_SHA384: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x03];
/// PKCS#9 extensionRequest, 1.2.840.113549.1.9.14.
const OID_EXTENSION_REQUEST: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x0e];
/// id-ce-subjectAltName, 2.5.29.17.
const OID_SAN: &[u8] = &[0x55, 0x1d, 0x11];

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;
const BIT_STRING: u8 = 0x03;

/// One TLV with its tag and length: (whole, rest).
fn whole(input: &[u8]) -> Result<(&[u8], &[u8]), CsrError> {
    let (_, _, rest) = tlv(input)?;
    let used = input.len() - rest.len();
    Ok((input.get(..used).ok_or(CsrError::Malformed("truncated"))?, rest))
}

/// Parse a request (PEM `CERTIFICATE REQUEST`, or DER) and check its signature.
pub fn parse(input: &[u8]) -> Result<Csr, CsrError> {
    if input.len() > MAX_CSR {
        return Err(CsrError::TooLarge(input.len()));
    }
    let der = if input.first() == Some(&SEQUENCE) {
        input.to_vec()
    } else {
        let p = pem::parse(input).map_err(|_| CsrError::Malformed("neither PEM nor DER"))?;
        if p.tag() != "CERTIFICATE REQUEST" && p.tag() != "NEW CERTIFICATE REQUEST" {
            return Err(CsrError::Malformed("PEM is not a CERTIFICATE REQUEST"));
        }
        p.into_contents()
    };
    let (outer, trailing) = expect(&der, SEQUENCE, "not a SEQUENCE")?;
    if !trailing.is_empty() {
        return Err(CsrError::Malformed("bytes after the request"));
    }
    let (info_whole, rest) = whole(outer)?;
    let (sig_alg, rest) = expect(rest, SEQUENCE, "no signatureAlgorithm")?;
    let (sig_bits, _) = expect(rest, BIT_STRING, "no signature")?;
    let signature = match sig_bits.split_first() {
        Some((0, s)) => s,
        _ => return Err(CsrError::Malformed("bad signature bits")),
    };
    let (sig_oid, _) = expect(sig_alg, OID, "bad signatureAlgorithm")?;

    let (info, _) = expect(info_whole, SEQUENCE, "no certificationRequestInfo")?;
    let (_version, rest) = expect(info, 0x02, "no version")?;
    let (_subject, rest) = expect(rest, SEQUENCE, "no subject")?;
    let (spki, rest) = expect(rest, SEQUENCE, "no subjectPKInfo")?;
    let (alg, key) = public_key(spki)?;
    let verify: &dyn ring::signature::VerificationAlgorithm = match (alg, sig_oid) {
        (KeyAlg::Ed25519, OID_ED25519) => &ring::signature::ED25519,
        (KeyAlg::P256, OID_ECDSA_SHA256) => &ring::signature::ECDSA_P256_SHA256_ASN1,
        (KeyAlg::P384, OID_ECDSA_SHA384) => &ring::signature::ECDSA_P384_SHA384_ASN1,
        _ => return Err(CsrError::Unsupported("signature algorithm for the key")),
    };
    ring::signature::UnparsedPublicKey::new(verify, &key)
        .verify(info_whole, signature)
        .map_err(|_| CsrError::BadSignature)?;

    let mut csr = Csr { alg, key, dns: Vec::new(), ips: Vec::new() };
    // attributes [0] IMPLICIT SET OF Attribute, possibly absent.
    if rest.first() == Some(&0xa0) {
        let (attrs, _) = expect(rest, 0xa0, "bad attributes")?;
        read_attributes(attrs, &mut csr)?;
    }
    Ok(csr)
}

/// The key's type and bits from a SubjectPublicKeyInfo's content.
fn public_key(spki: &[u8]) -> Result<(KeyAlg, Vec<u8>), CsrError> {
    let (alg_id, rest) = expect(spki, SEQUENCE, "bad key algorithm")?;
    let (bits, _) = expect(rest, BIT_STRING, "bad subjectPublicKey")?;
    let key = match bits.split_first() {
        Some((0, k)) => k.to_vec(),
        _ => return Err(CsrError::Malformed("bad subjectPublicKey bits")),
    };
    let (oid, params) = expect(alg_id, OID, "bad key algorithm")?;
    let alg = match oid {
        OID_ED25519 => KeyAlg::Ed25519,
        OID_EC_PUBLIC_KEY => match expect(params, OID, "bad curve")?.0 {
            OID_P256 => KeyAlg::P256,
            OID_P384 => KeyAlg::P384,
            _ => return Err(CsrError::Unsupported("curve")),
        },
        _ => return Err(CsrError::Unsupported("key algorithm (Ed25519, P-256, P-384 taken)")),
    };
    Ok((alg, key))
}

/// The names of an extensionRequest's subjectAltName; other attributes and extensions are
/// ignored (the signer decides them).
fn read_attributes(mut attrs: &[u8], csr: &mut Csr) -> Result<(), CsrError> {
    while !attrs.is_empty() {
        let (attr, next) = expect(attrs, SEQUENCE, "bad attribute")?;
        attrs = next;
        let (oid, values) = expect(attr, OID, "bad attribute type")?;
        if oid != OID_EXTENSION_REQUEST {
            continue;
        }
        let (mut values, _) = expect(values, SET, "bad attribute values")?;
        while !values.is_empty() {
            let (mut exts, next) = expect(values, SEQUENCE, "bad extensions")?;
            values = next;
            while !exts.is_empty() {
                let (ext, next) = expect(exts, SEQUENCE, "bad extension")?;
                exts = next;
                let (id, mut rest) = expect(ext, OID, "bad extension id")?;
                if rest.first() == Some(&0x01) {
                    rest = tlv(rest)?.2;
                }
                let (value, _) = expect(rest, 0x04, "bad extension value")?;
                if id == OID_SAN {
                    read_sans(value, csr)?;
                }
            }
        }
    }
    Ok(())
}

fn read_sans(value: &[u8], csr: &mut Csr) -> Result<(), CsrError> {
    let (mut names, _) = expect(value, SEQUENCE, "bad subjectAltName")?;
    while !names.is_empty() {
        let (tag, content, next) = tlv(names)?;
        names = next;
        if csr.dns.len() + csr.ips.len() >= MAX_SANS {
            break;
        }
        match tag {
            0x82 => {
                let name = std::str::from_utf8(content)
                    .map_err(|_| CsrError::Malformed("DNS name not text"))?;
                csr.dns.push(name.to_owned());
            }
            0x87 => {
                let ip = match content.len() {
                    4 => <[u8; 4]>::try_from(content).map(IpAddr::from).ok(),
                    16 => <[u8; 16]>::try_from(content).map(IpAddr::from).ok(),
                    _ => None,
                };
                csr.ips.push(ip.ok_or(CsrError::Malformed("bad IP address"))?);
            }
            // Other names (email, URI, ...) are not copied.
            _ => {}
        }
    }
    Ok(())
}

impl Ca {
    /// Sign a checked request: its key and its DNS and IP names; server and client
    /// authentication (what Talos's apid certificate is used for), valid from a day before
    /// (a node's clock may lag) for a year. Returns the certificate, PEM.
    pub fn sign_csr(&self, csr: &Csr) -> Result<String, IdentityError> {
        self.sign_csr_for(csr, std::time::Duration::from_secs(365 * 24 * 3600))
    }

    /// [`Ca::sign_csr`], valid until `lifetime` from now (a short one makes renewal
    /// testable).
    pub fn sign_csr_for(
        &self,
        csr: &Csr,
        lifetime: std::time::Duration,
    ) -> Result<String, IdentityError> {
        let mut params = CertificateParams::default();
        let cn = csr.dns.first().map(String::as_str).unwrap_or("keelson");
        params.distinguished_name.push(DnType::CommonName, cn);
        let mut sans: Vec<SanType> = csr
            .dns
            .iter()
            .filter_map(|h| rcgen::string::Ia5String::try_from(h.as_str()).ok())
            .map(SanType::DnsName)
            .collect();
        sans.extend(csr.ips.iter().map(|a| SanType::IpAddress(*a)));
        params.subject_alt_names = sans;
        params.extended_key_usages =
            vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.not_before = time::OffsetDateTime::now_utc() - time::Duration::days(1);
        let lifetime = time::Duration::try_from(lifetime).unwrap_or(time::Duration::days(365));
        params.not_after = time::OffsetDateTime::now_utc() + lifetime;
        let cert = params.signed_by(csr, &self.issuer())?;
        Ok(cert.pem())
    }
}

/// A new key and a request for these names: (key, request PEM).
pub fn request(sans: &Sans) -> Result<(KeyPair, String), IdentityError> {
    let key = KeyPair::generate_for(&rcgen::PKCS_ED25519)?;
    let mut params = CertificateParams::default();
    params
        .distinguished_name
        .push(DnType::CommonName, sans.hostname.as_deref().unwrap_or("keelson"));
    params.subject_alt_names = sans.to_rcgen();
    let csr = params.serialize_request(&key)?;
    Ok((key, csr.pem()?))
}

/// The identity of `key` with the certificate a signer returned (PEM): refused unless the
/// certificate certifies this very key.
pub fn identity(key: &KeyPair, crt_pem: &str) -> Result<Identity, IdentityError> {
    let p = pem::parse(crt_pem)
        .map_err(|e| IdentityError::Pem { what: "signed certificate", why: e.to_string() })?;
    let der = p.into_contents();
    if crate::der::subject_public_key(&der)? != key.public_key_raw() {
        return Err(IdentityError::Pem {
            what: "signed certificate",
            why: "it does not certify the key of the request".into(),
        });
    }
    let cert = rustls::pki_types::CertificateDer::from(der);
    Ok(Identity {
        cert_pem: crt_pem.to_owned(),
        chain: vec![cert],
        key_pem: crate::identity::key_pem(key),
        key: crate::identity::key_der(key),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sans() -> Sans {
        Sans {
            hostname: Some("worker-1".into()),
            addresses: vec![IpAddr::from([10, 5, 0, 3]), "fd00::3".parse().unwrap()],
        }
    }

    #[test]
    fn a_request_is_read_back_and_signed() {
        let (key, pem) = request(&sans()).unwrap();
        let csr = parse(pem.as_bytes()).unwrap();
        assert_eq!(csr.dns, ["worker-1"]);
        assert_eq!(csr.ips, sans().addresses);
        let ca = Ca::generate("demo").unwrap();
        let crt = ca.sign_csr(&csr).unwrap();
        let der = pem::parse(&crt).unwrap().into_contents();
        assert_eq!(crate::der::subject_public_key(&der).unwrap(), csr.key);
        assert!(identity(&key, &crt).is_ok());
        let (other, _) = request(&sans()).unwrap();
        assert!(identity(&other, &crt).is_err());
    }

    #[test]
    fn the_lifetime_asked_for_is_the_certificates_not_after() {
        let (_, pem) = request(&sans()).unwrap();
        let csr = parse(pem.as_bytes()).unwrap();
        let ca = Ca::generate("demo").unwrap();
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        for (lifetime, want) in [(std::time::Duration::from_secs(30), 30), (YEAR, 365 * 86400)] {
            let crt = ca.sign_csr_for(&csr, lifetime).unwrap();
            let der = pem::parse(&crt).unwrap().into_contents();
            let end = crate::der::not_after(&der).unwrap();
            assert!((end - now - want).abs() <= 2, "{end} - {now} != {want}");
        }
        let der = pem::parse(ca.sign_csr(&csr).unwrap()).unwrap().into_contents();
        assert!((crate::der::not_after(&der).unwrap() - now - 365 * 86400).abs() <= 2);
    }

    const YEAR: std::time::Duration = std::time::Duration::from_secs(365 * 86400);

    #[test]
    fn ecdsa_requests_are_taken() {
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut params = CertificateParams::default();
        params.subject_alt_names = vec![SanType::IpAddress(IpAddr::from([192, 0, 2, 1]))];
        let pem = params.serialize_request(&key).unwrap().pem().unwrap();
        let csr = parse(pem.as_bytes()).unwrap();
        assert_eq!(csr.ips, [IpAddr::from([192, 0, 2, 1])]);
    }

    #[test]
    fn only_dns_and_ip_names_are_copied() {
        let key = KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
        let mut params = CertificateParams::default();
        params.subject_alt_names = vec![
            SanType::URI("spiffe://x/y".try_into().unwrap()),
            SanType::Rfc822Name("a@b.example".try_into().unwrap()),
            SanType::DnsName("n1".try_into().unwrap()),
        ];
        let pem = params.serialize_request(&key).unwrap().pem().unwrap();
        let csr = parse(pem.as_bytes()).unwrap();
        assert_eq!(csr.dns, ["n1"]);
        assert!(csr.ips.is_empty());
        let crt = Ca::generate("demo").unwrap().sign_csr(&csr).unwrap();
        let der = pem::parse(&crt).unwrap().into_contents();
        assert!(!der.windows(12).any(|w| w == b"spiffe://x/y"));
    }

    #[test]
    fn a_tampered_request_is_refused() {
        let (_key, pem) = request(&sans()).unwrap();
        let mut der = pem::parse(&pem).unwrap().into_contents();
        // Flip a byte of the addresses asked for: the signature no longer matches.
        let at = der.windows(4).position(|w| w == [10, 5, 0, 3]).unwrap();
        der[at + 3] = 4;
        assert_eq!(parse(&der), Err(CsrError::BadSignature));
    }

    #[test]
    fn garbage_and_oversized_requests_are_refused() {
        assert!(matches!(parse(b"garbage"), Err(CsrError::Malformed(_))));
        assert_eq!(parse(&vec![0x30; MAX_CSR + 1]), Err(CsrError::TooLarge(MAX_CSR + 1)));
        let (_key, pem) = request(&sans()).unwrap();
        let der = pem::parse(&pem).unwrap().into_contents();
        for n in 0..der.len() {
            assert!(parse(&der[..n]).is_err(), "{n}");
        }
        // Any one byte changed: refused (length bytes, tags, the signature, the names), never
        // a panic; what the signature covers cannot change and still parse.
        for i in 0..der.len() {
            for x in [0x01u8, 0x80, 0xff] {
                let mut bad = der.clone();
                bad[i] ^= x;
                assert!(parse(&bad).is_err(), "byte {i} ^ {x:#x}");
            }
        }
    }
}
