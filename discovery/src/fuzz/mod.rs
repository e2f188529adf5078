// SPDX-License-Identifier: Apache-2.0
//! Fuzz targets for the discovery protocol's messages, on the shared mutator of
//! `testkit::fuzzkit`: every protobuf message. (HTTP/2, HPACK and gRPC framing are fuzzed in
//! the `grpc` crate.) Each is a `cargo test` with a short default run; `scripts/fuzz TARGET`
//! runs one long, in release mode.

mod proto;

/// The crate directory, where `fuzz-corpus/<target>/` lives.
const CRATE_DIR: &str = env!("CARGO_MANIFEST_DIR");
