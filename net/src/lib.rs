// SPDX-License-Identifier: Apache-2.0
//! keelson's network stack: the single-threaded runtime, the config, merge, spec and status
//! controllers of the network pipeline, the DHCP engines and operators, `/etc` rendering, and
//! the kernel adapters (rtnetlink, generic netlink, packet sockets) behind the `Host` boundary.
//!
//! The model (resource kinds, parsers, merge functions) is its own pure crate, `model`,
//! re-exported here under its old paths. `runtime` and `controllers` never touch the kernel
//! either; kernel adapters live in `host::kernel`, `netlink` and the operators' sockets.
#![warn(missing_docs)]

// Moved to `base`; the paths stay for the many callers in `init` and `kubespan`.
pub use base::{atomic_file, bounded, random, tls_roots};
pub use model::{cmdline, config, ifnames, kinds, merge, names, sort, wgkey};

/// Resource kinds and the resource object under one path: `model::resource`'s specs and
/// statuses plus `model::kinds`'s [`Kind`](model::kinds::Kind), `AnySpec`, `SpecType`,
/// `Resource` and `Metadata` (the model keeps them apart so `resource` imports nothing above it).
pub mod resource {
    pub use model::kinds::*;
    pub use model::resource::*;
}
pub mod controllers;
pub mod dhcp4;
pub mod dhcp6;
#[cfg(test)]
mod dhcp_fuzz;
pub mod dns;
pub mod etcfiles;
#[cfg(test)]
mod fuzz;
pub mod host;
pub mod netlink;
pub mod nodeaddress;
pub mod ntp;
pub mod nts;
pub mod operator;
pub mod runtime;
pub mod timesync;
pub mod wireguard_keys;
