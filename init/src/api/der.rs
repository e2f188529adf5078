// SPDX-License-Identifier: Apache-2.0
//! Reading a certificate's subject: the `pki` crate.

pub use pki::der::*;
