// SPDX-License-Identifier: Apache-2.0
//! The API: Talos's gRPC machine API, COSI and keelson's extension ([`rpc`]), on a local
//! Unix socket and over TLS on TCP (port 50000), served from the node's event loop; and
//! `gen config` (which needs the node's CA code). The client commands are the `cli` crate.

mod conn;
pub mod cosi;
pub(crate) mod der;
pub mod diff;
pub mod gen;
mod hostinfo;
pub mod identity;
pub mod remote;
pub mod rpc;
pub mod server;
mod slots;
mod socket;
pub mod tls;
pub(crate) mod transport;
pub mod trial;
mod trustd_client;

/// Type names and aliases: the client's, so both ends accept the same names.
pub use cli::aliases;
/// The socket in init mode (and the client's default).
pub use cli::DEFAULT_SOCKET;
