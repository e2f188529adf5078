// SPDX-License-Identifier: Apache-2.0
//! Cluster membership (docs/discovery.md): the local [`Affiliate`](net::resource::Affiliate)
//! built from the node's own resources ([`local`]), the affiliates registries reported merged
//! per node, and members ([`controller`]).

pub mod controller;
pub mod local;
