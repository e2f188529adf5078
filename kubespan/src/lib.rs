// SPDX-License-Identifier: Apache-2.0
//! KubeSpan: a WireGuard full mesh between nodes (docs/talos.md: KubeSpan).
//!
//! The manager writes resources and `net` applies them; the nftables table and the WireGuard
//! peer set are programmed from the same snapshot so they never disagree.
//!
//! Pure: [`identity`] (the ULA address), [`peers`] (AllowedIPs), [`rotation`] (endpoint
//! rotation), [`plan`] (everything the node should have). Boundaries: [`firewall`] and [`wg`],
//! with the real adapters in [`kernel`]; [`controller`] runs it all in the runtime.
#![warn(missing_docs)]

pub mod cluster;
pub mod controller;
pub mod firewall;
pub mod identity;
pub mod kernel;
// The nf_tables encoder's wire enums are documented per type, not per field.
#[allow(missing_docs)]
pub mod nft;
pub mod peers;
pub mod plan;
pub mod rotation;
pub mod wg;
