// SPDX-License-Identifier: Apache-2.0
//! The local API: a line-delimited JSON protocol on a Unix socket served from the node's event
//! loop, and the client commands that use it (`get`, `logs`, `apply-config`, `explain`).

pub mod aliases;
pub mod client;
mod conn;
pub mod diff;
pub mod protocol;
pub mod server;
mod socket;

/// The socket in init mode (and the client's default).
pub const DEFAULT_SOCKET: &str = "/run/keelson/api.sock";
