// SPDX-License-Identifier: Apache-2.0
//! Fuzz targets for the parsers keelson writes by hand that read the network or the disk, on
//! the shared mutator of `testkit::fuzzkit`: HTTP/1 responses (config fetch and kubelet
//! health), certificate subjects (DER), the GPT and the state slots, kernel uevents, the
//! module tables and compressed modules. Each is a `cargo test` with a short default run; `scripts/fuzz TARGET`
//! runs one long, in release mode.
#![allow(clippy::unwrap_used, clippy::panic)]

mod api;
mod der;
mod http;
mod kofile;
mod modules;
mod state;
mod uevent;

/// The crate directory, where `fuzz-corpus/<target>/` lives.
const CRATE_DIR: &str = env!("CARGO_MANIFEST_DIR");
