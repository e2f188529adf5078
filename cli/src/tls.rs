// SPDX-License-Identifier: Apache-2.0
//! The TLS pieces the client and the node's API share: one crypto provider, and certificate
//! fingerprints as `--fingerprint` takes them.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use sha2::Digest;

/// The crypto provider every TLS configuration is built with (ring).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// SHA-256 of a DER certificate, lowercase hex (what `--fingerprint` takes).
pub fn fingerprint(der: &[u8]) -> String {
    sha2::Sha256::digest(der).iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_is_lowercase_sha256_hex() {
        assert_eq!(
            fingerprint(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
