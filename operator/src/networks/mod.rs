// SPDX-License-Identifier: Apache-2.0
//! Tenant networks (docs/tenant-networks.md): the user's `Network` ([`kinds`]), the
//! cluster-wide `NetworkID` claims that make each network's VNI unique ([`allocate`]), the
//! two-sided peering handshake and the node layer's `NodeNetwork` it fills ([`peering`]), and
//! the controller pass that runs both on the leader ([`controller`]), and what a node runs to
//! realise NodeNetworks and report back ([`node`]), with the kernel's devices as
//! `keelson-operator tenant-agent` ([`agent`]), which writes what it realised for PID 1
//! ([`status_file`]).

pub mod agent;
pub mod allocate;
pub mod controller;
pub mod ctl;
pub mod kinds;
pub mod node;
pub mod peering;
pub mod status_file;
