// SPDX-License-Identifier: Apache-2.0
//! Talos's gRPC machine API, the subset keelson serves and calls: typed messages that match
//! the `.proto` files in `proto/` (written from the public definitions in siderolabs/talos
//! `api/` and cosi-project/runtime `api/v1alpha1/`), the HTTP/2 path of each method, and the
//! role each method needs ([`authz`]).
//!
//! Messages are plain structs with `prost` derives, so field numbers and wire types sit next
//! to each field; there is no build script and no `protoc`. This crate owns no I/O and must
//! not depend on the node (`init`, `net`) or on the HTTP/2 layer: the server and the client
//! both use it.

pub mod authz;
pub mod common;
pub mod cosi;
pub mod definitions;
pub mod google;
pub mod keelson;
pub mod machine;
pub mod security;
pub mod storage;
pub mod time;

pub use prost::Message;
