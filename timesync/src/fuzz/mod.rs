// SPDX-License-Identifier: Apache-2.0
//! Fuzz targets for the parsers time sync writes by hand (DNS replies, NTP packets, NTS records
//! and fields), on the shared mutator of `testkit::fuzzkit`. Each is a `cargo test` with a
//! short default run; `scripts/fuzz TARGET` runs one long, in release mode.

mod dns;
mod ntp;
mod nts;

/// The crate directory, where `fuzz-corpus/<target>/` lives.
const CRATE_DIR: &str = env!("CARGO_MANIFEST_DIR");
