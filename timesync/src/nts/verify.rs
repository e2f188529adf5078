// SPDX-License-Identifier: Apache-2.0
//! The NTS-KE server certificate check: the usual WebPKI chain and name check against the
//! trust roots, with one concession to a clock that is not yet known to be right.
//!
//! A node's clock before its first sync may be years off (a dead RTC battery reads 1970 or
//! the board's build year), so every certificate looks not yet valid, or expired; and NTS is
//! how the clock would get right. While the clock is unsynchronised, a certificate that fails
//! only on time is checked again at a time inside its own window: a not-yet-valid one at its
//! `notBefore`, an expired one at its `notAfter` when that is after [`FLOOR`] (a certificate
//! that had expired before this code was released is refused whatever the clock says). The
//! chain, the signatures, the name and the key usage are always checked. Once the clock is
//! synchronised the check is the plain one. docs/security.md argues the choice.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, Error, SignatureScheme};

/// The release date of this code (2026-11-01T00:00:00Z): a clock reading earlier is certainly
/// wrong, and a certificate that expired earlier is never accepted.
pub const FLOOR: Duration = Duration::from_secs(1_793_491_200);

/// Re-checks at most this many times (a chain whose certificates' windows do not overlap
/// would otherwise move the time back and forth).
const MAX_RETRIES: usize = 4;

/// The verifier.
#[derive(Debug)]
pub struct Verifier {
    inner: Arc<WebPkiServerVerifier>,
    /// The clock is not known to be right: time failures are re-checked.
    relaxed: bool,
    /// A time failure was forgiven (for one log line).
    forgiven: AtomicBool,
}

impl Verifier {
    /// A verifier over `inner` (the WebPKI verifier with the trust roots).
    pub fn new(inner: Arc<WebPkiServerVerifier>, relaxed: bool) -> Self {
        Self { inner, relaxed, forgiven: AtomicBool::new(false) }
    }

    /// Whether a certificate was accepted only because the clock is unsynchronised.
    pub fn forgave_time(&self) -> bool {
        self.forgiven.load(Ordering::Relaxed)
    }
}

/// The time to check again at, for a failure that is only about time.
fn retry_at(e: &Error, relaxed: bool) -> Option<UnixTime> {
    if !relaxed {
        return None;
    }
    match e {
        Error::InvalidCertificate(CertificateError::NotValidYetContext { not_before, .. }) => {
            Some(*not_before)
        }
        Error::InvalidCertificate(CertificateError::ExpiredContext { not_after, .. })
            if not_after.as_secs() >= FLOOR.as_secs() =>
        {
            Some(*not_after)
        }
        _ => None,
    }
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        let mut at = now;
        let mut result = self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            at,
        );
        for _ in 0..MAX_RETRIES {
            let Err(e) = &result else { break };
            let Some(next) = retry_at(e, self.relaxed) else { break };
            if next == at {
                break;
            }
            at = next;
            result = self.inner.verify_server_cert(
                end_entity,
                intermediates,
                server_name,
                ocsp_response,
                at,
            );
            if result.is_ok() {
                self.forgiven.store(true, Ordering::Relaxed);
            }
        }
        result
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn not_yet(secs: u64) -> Error {
        Error::InvalidCertificate(CertificateError::NotValidYetContext {
            time: UnixTime::since_unix_epoch(Duration::ZERO),
            not_before: UnixTime::since_unix_epoch(Duration::from_secs(secs)),
        })
    }

    fn expired(secs: u64) -> Error {
        Error::InvalidCertificate(CertificateError::ExpiredContext {
            time: UnixTime::since_unix_epoch(Duration::from_secs(u64::MAX / 2)),
            not_after: UnixTime::since_unix_epoch(Duration::from_secs(secs)),
        })
    }

    #[test]
    fn only_time_failures_are_forgiven_and_only_while_unsynchronised() {
        let floor = FLOOR.as_secs();
        assert_eq!(retry_at(&not_yet(5), true).map(|t| t.as_secs()), Some(5));
        assert_eq!(retry_at(&not_yet(5), false), None, "a synchronised clock is believed");
        assert_eq!(retry_at(&expired(floor + 1), true).map(|t| t.as_secs()), Some(floor + 1));
        assert_eq!(retry_at(&expired(floor - 1), true), None, "expired before the release");
        let unknown = Error::InvalidCertificate(CertificateError::UnknownIssuer);
        assert_eq!(retry_at(&unknown, true), None);
        let name = Error::InvalidCertificate(CertificateError::NotValidForName);
        assert_eq!(retry_at(&name, true), None);
    }
}
