// SPDX-License-Identifier: Apache-2.0
//! Certificates for keelson's clusters, pure (no I/O): [`identity`] makes and reads them (a
//! cluster CA, a node's server and peer certificates, clients with a role), [`der`] reads a
//! certificate's subject. PID 1 serves its API with them; keelson-operator generates a
//! cluster's CAs and its own admin client certificate with the same code.

pub mod csr;
pub mod der;
pub mod identity;
