// SPDX-License-Identifier: Apache-2.0
//! Fuzz targets for the gRPC layer, on the shared mutator of `testkit::fuzzkit`: HTTP/2 frames
//! in both roles, HPACK blocks and gRPC message framing. Each is a `cargo test` with a short
//! default run; `scripts/fuzz TARGET` runs one long, in release mode.

mod grpc;
mod h2;

/// The crate directory, where `fuzz-corpus/<target>/` lives.
const CRATE_DIR: &str = env!("CARGO_MANIFEST_DIR");
