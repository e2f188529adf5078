// SPDX-License-Identifier: Apache-2.0
//! Fuzz targets for the parsers `net` writes by hand, on the shared mutator of
//! `testkit::fuzzkit` (DHCP has its own, older harness in `dhcp_fuzz`). Each is a `cargo test`
//! with a short default run; `scripts/fuzz TARGET` runs one long, in release mode.

mod dns;
mod ntp;
mod nts;

/// The crate directory, where `fuzz-corpus/<target>/` lives.
const CRATE_DIR: &str = env!("CARGO_MANIFEST_DIR");
