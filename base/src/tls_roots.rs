// SPDX-License-Identifier: Apache-2.0
//! Trust roots for keelson's TLS clients (the config fetch, NTS key exchange): PEM bundles read
//! bounded and without blocking on anything but a regular file, certificates rustls cannot
//! parse skipped, as every TLS client does with system bundles.

use std::path::PathBuf;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::RootCertStore;

/// What reading the bundles gave.
#[derive(Debug)]
pub struct Roots {
    /// Every certificate that parsed.
    pub store: RootCertStore,
    /// Bundles that do not exist.
    pub missing: Vec<PathBuf>,
    /// One line per bundle that could not be read, or per bundle with certificates skipped.
    pub problems: Vec<String>,
}

/// Read the PEM bundles at `paths`, in order, each at most `limit` bytes.
pub fn load(paths: &[PathBuf], limit: u64) -> Roots {
    let mut roots =
        Roots { store: RootCertStore::empty(), missing: Vec::new(), problems: Vec::new() };
    for path in paths {
        let bytes = match crate::bounded::read_file(path, limit) {
            Ok(b) => b,
            Err(crate::bounded::ReadError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                roots.missing.push(path.clone());
                continue;
            }
            Err(e) => {
                roots.problems.push(format!("{}: {e}", path.display()));
                continue;
            }
        };
        let certs = CertificateDer::pem_slice_iter(bytes.as_ref()).flatten();
        let (_, bad) = roots.store.add_parsable_certificates(certs);
        if bad > 0 {
            roots.problems.push(format!("{}: {bad} certificates skipped", path.display()));
        }
    }
    roots
}
