// SPDX-License-Identifier: Apache-2.0
//! The API: Talos's gRPC machine API ([`rpc`]) and, until the CLI moves to it, a line-delimited
//! JSON protocol, on a local Unix socket and over TLS on TCP (port 50000), served from the
//! node's event loop, and the client commands that use it (`get`,
//! `logs`, `apply-config`, `explain`, `version`, `gen config`).

pub mod aliases;
pub mod client;
mod conn;
pub mod connect;
pub(crate) mod der;
pub mod diff;
pub mod gen;
mod hostinfo;
pub mod identity;
pub mod protocol;
pub mod remote;
pub mod rpc;
pub mod server;
mod slots;
mod socket;
pub mod tls;
mod transport;
pub mod trial;

/// The socket in init mode (and the client's default).
pub const DEFAULT_SOCKET: &str = "/run/keelson/api.sock";
