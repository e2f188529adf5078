// SPDX-License-Identifier: Apache-2.0
//! Operators: the protocol clients that turn what they learn into operator-layer specs
//! (docs/talos.md: DHCPv4). The engines (`crate::dhcp4`) are sans-IO; this module owns their
//! sockets and drives them from the event loop (one epoll, nothing blocks).

pub mod announce;
pub mod dhcp4_socket;
pub mod dhcp6_socket;
pub mod engine;
pub mod frame;
pub mod leases;
pub mod manager;
pub mod plan;
pub mod vip;

pub use manager::Operators;
