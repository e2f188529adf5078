// SPDX-License-Identifier: Apache-2.0
//! keelson's discovery client: the wire protocol of the Talos discovery service
//! (`sidero.discovery.server.Cluster`) spoken with small sans-IO engines: protobuf
//! ([`proto`]), the cluster-key crypto ([`crypto`]), HTTP/2 ([`h2`]), gRPC ([`grpc`]) and the
//! reference client's loop ([`client`]), plus a blocking driver that runs it on its own thread
//! ([`spawn`]).

pub mod client;
pub mod crypto;
mod escape;
#[cfg(test)]
mod fuzz;
pub mod grpc;
pub mod h2;
mod interface;
pub mod proto;
mod target;
mod vecmap;

pub use client::driver::{spawn, Handle};
pub use escape::escape;
pub use interface::{Command, Config, Discovered, Event, LocalData};
pub use proto::{Affiliate, ControlPlane, KubeSpan};
pub use target::{Target, TargetError};
