// SPDX-License-Identifier: Apache-2.0
//! keelson's discovery client: the wire protocol of the Talos discovery service
//! (`sidero.discovery.server.Cluster`) spoken with small sans-IO engines: its protobuf messages
//! ([`proto`]), the cluster-key crypto ([`crypto`]), the service's gRPC names and limits
//! ([`service`]) and the reference client's loop ([`client`]), plus a blocking driver that runs
//! it on its own thread ([`spawn`]). HTTP/2, gRPC framing and the protobuf wire primitives are
//! the `grpc` crate's.

pub mod client;
pub mod crypto;
#[cfg(test)]
mod fuzz;
mod interface;
pub mod proto;
pub mod service;
mod target;

pub use client::driver::{spawn, Handle};
pub use interface::{Command, Config, Discovered, Event, LocalData};
pub use proto::{Affiliate, ControlPlane, KubeSpan};
pub use target::{Target, TargetError};
