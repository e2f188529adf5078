// SPDX-License-Identifier: Apache-2.0
//! Fuzz targets for the discovery protocol stack, on the shared mutator of
//! `testkit::fuzzkit`: HTTP/2 frames in both roles, HPACK blocks, gRPC message framing and the
//! protobuf messages. Each is a `cargo test` with a short default run; `scripts/fuzz TARGET`
//! runs one long, in release mode.

mod grpc;
mod h2;
mod proto;

/// The crate directory, where `fuzz-corpus/<target>/` lives.
const CRATE_DIR: &str = env!("CARGO_MANIFEST_DIR");
