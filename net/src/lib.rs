// SPDX-License-Identifier: Apache-2.0
//! keelson's network library: the resource model and its single-threaded runtime, the kernel
//! command line and machine configuration parsers, and the config, merge, spec and status
//! controllers of the network pipeline.
//!
//! The pure half (`resource`, `runtime`, `cmdline`, `config`, `merge`, `controllers`) never
//! touches the kernel; kernel adapters live in their own modules.
#![warn(missing_docs)]

pub mod bounded;
pub mod cmdline;
pub mod config;
pub mod controllers;
pub mod dhcp4;
pub mod dhcp6;
#[cfg(test)]
mod dhcp_fuzz;
pub mod etcfiles;
mod hex;
pub mod host;
pub mod merge;
pub mod names;
pub mod netlink;
pub mod nodeaddress;
pub mod operator;
pub mod resource;
pub mod runtime;
pub mod wireguard_keys;
