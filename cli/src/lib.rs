// SPDX-License-Identifier: Apache-2.0
//! keelson's client: the verbs that talk to a node (`get`, `logs`, `apply-config`, `version`,
//! `disks`, ...), how their answers are printed (tables, `-o yaml|json`), and how a node is
//! reached (the local socket, or TLS with a `keelsonconfig` context). The `keelson` binary
//! links it and dispatches its verbs here; this crate knows nothing of PID 1 or the server.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod aliases;
pub mod bootstrap;
pub mod client;
pub mod connect;
pub mod etcd;
pub mod kubeconfig;
pub mod lifecycle;
pub mod machine;
pub mod output;
pub mod resources;
pub mod rpc;
pub mod tls;

/// Resource kinds and specs under one path (the model keeps them in two modules).
pub mod resource {
    pub use model::kinds::*;
    pub use model::resource::*;
}

/// The local API socket of a node running as PID 1 (the client's default).
pub const DEFAULT_SOCKET: &str = "/run/keelson/api.sock";

/// The port Talos's API listens on, and keelson's.
pub const DEFAULT_PORT: u16 = 50000;
/// The port Talos's trustd listens on (control planes sign their workers' certificates).
pub const TRUSTD_PORT: u16 = 50001;
