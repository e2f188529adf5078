// SPDX-License-Identifier: Apache-2.0
//! keelson's network stack: the config, merge, spec and status controllers of the network
//! pipeline, the DHCP engines and operators, `/etc` rendering, and the kernel adapters
//! (rtnetlink, generic netlink, packet sockets) behind the `Host` boundary.
//!
//! The model (resource kinds, parsers, merge functions) is its own pure crate, `model`, and
//! the resource runtime is the `runtime` crate; both are re-exported here under their old
//! paths. Time sync (NTP, NTS, its DNS stub) is the `timesync` crate, which does not depend on
//! this one. `controllers` never touch the kernel; kernel adapters live in `host::kernel`,
//! `netlink` and the operators' sockets.
#![warn(missing_docs)]

// Moved to `base`; the paths stay for the many callers in `init` and `kubespan`.
pub use base::{atomic_file, bounded, random};
pub use model::{cmdline, config, ifnames, kinds, merge, names, sort, wgkey};
// The resource runtime is its own crate; `net::runtime` stays for the controllers here and the
// callers in `init` and `kubespan`.
pub use runtime;

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
pub mod etcfiles;
pub mod host;
pub mod netlink;
pub mod nodeaddress;
pub mod operator;
pub mod ra_dns;
#[cfg(test)]
mod ra_dns_fuzz;
pub mod ra_resolvers;
pub mod tenant;
pub mod wireguard_keys;
