// SPDX-License-Identifier: Apache-2.0
//! keelson-discovery-server: an open server for the discovery protocol Talos nodes speak
//! (gRPC service `sidero.discovery.server.Cluster`). It stores opaque, client-encrypted blobs
//! with a TTL, merges endpoint sets by their bytes and streams changes to watchers.

pub mod config;
#[cfg(test)]
mod fuzz;
pub mod metrics;
pub mod ratelimit;
pub mod registry;
pub mod rpc;
pub mod server;
pub mod snapshot;
pub mod stats;
