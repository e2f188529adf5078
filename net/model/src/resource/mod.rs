// SPDX-License-Identifier: Apache-2.0
//! Resource kinds as plain data: one file per kind (its spec, its status and its natural-ID
//! function together, docs/talos.md: Resources and IDs), the value types they share
//! ([`nethelpers`]), namespaces, and what one configuration layer holds ([`LayerSpecs`]).
//!
//! IDs are built only here. Their formats match Talos exactly, so a Talos user reads
//! `keelson get` output without surprise.
//!
//! The kind table (`crate::kind_table`) lists every kind once; `crate::kinds` derives the
//! [`Kind`](crate::kinds::Kind) enum, `AnySpec` and the resource object from it. This module
//! depends on neither (nor on `cmdline` or `config`), so those parsers can build specs from it.

mod address;
mod cluster;
mod etc_file;
mod hostname;
mod id_text;
pub mod kubespan;
mod layer;
mod link;
mod link_kinds;
pub mod links;
mod machine_status;
mod namespace;
pub mod nethelpers;
mod network_status;
mod node_address;
mod operator;
mod resolver;
mod rfc3339;
mod route;
mod rule;
mod service;
mod system_information;
mod tenant_network;
mod time_status;
mod timeserver;
mod vip_status;
mod wireguard;

#[cfg(test)]
mod tests;

pub use address::*;
pub use cluster::*;
pub use etc_file::*;
pub use hostname::*;
pub use kubespan::*;
pub use layer::*;
pub use link::*;
pub use link_kinds::*;
pub use links::{find_link, identity, LinkDigest, LinkIdentities, LinkView};
pub use machine_status::*;
pub use namespace::{Namespace, Phase};
pub use nethelpers::{
    AddressFlags, Family, HardwareAddr, LinkType, ParseNameError, RouteFlags, RouteProtocol,
    RouteType, RoutingTable, Scope,
};
pub use network_status::*;
pub use node_address::*;
pub use operator::*;
pub use resolver::*;
pub use rfc3339::Rfc3339;
pub use route::*;
pub use rule::*;
pub use service::*;
pub use system_information::*;
pub use tenant_network::*;
pub use time_status::*;
pub use timeserver::*;
pub use vip_status::*;
pub use wireguard::*;
