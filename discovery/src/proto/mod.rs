// SPDX-License-Identifier: Apache-2.0
//! Minimal protobuf (proto3) for the discovery messages.
//!
//! Encoding matches Go's `proto.Marshal` byte for byte: fields in ascending order, minimal
//! varints, default scalars omitted, present sub-messages always written. The endpoint blobs are
//! deterministic ciphertexts that the server de-duplicates by their bytes, so any difference
//! here would break de-duplication with Talos nodes.
//!
//! Decoding skips unknown fields (including proto2 groups, to a bounded depth) so that newer
//! peers can add fields, and rejects truncated or malformed input. The caller bounds the input
//! size (the gRPC layer caps each message).

pub mod api;
pub mod payload;
pub mod storage;

pub use api::*;
pub use grpc::protobuf::*;
pub use payload::{Affiliate, ControlPlane, KubeSpan};
