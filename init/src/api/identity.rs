// SPDX-License-Identifier: Apache-2.0
//! Certificates: the `pki` crate (shared with keelson-operator).

pub use pki::identity::*;
