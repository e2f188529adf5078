// SPDX-License-Identifier: Apache-2.0
//! Object names, checked the way Kubernetes checks them: shared by every kind (the Talos
//! machine kinds and the tenant network kinds) without either importing the other.

/// A DNS-1123 label-ish name, as Kubernetes wants object names.
pub fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && !s.starts_with(['-', '.'])
        && !s.ends_with(['-', '.'])
}
