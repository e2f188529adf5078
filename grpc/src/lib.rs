// SPDX-License-Identifier: Apache-2.0
//! keelson's gRPC layer, without I/O: a sans-IO HTTP/2 connection for either end with HPACK,
//! flow control and the limits it keeps on what a peer may send ([`h2`]); gRPC message framing,
//! the request and response heads, trailers and status codes of one call ([`call`], re-exported
//! here); the protobuf wire primitives, varints, tags and length-delimited fields, that
//! hand-written messages are built on ([`protobuf`]); and the small helpers they share
//! ([`escape`] for peer text in log lines, [`vecmap`]). Service-specific names, limits and
//! messages belong to the crates that speak a service (the Talos discovery protocol lives in
//! `discovery`). It must stay pure std plus `thiserror` (`base` and `log` are the only other
//! crates it may take): never `net`, netlink or `discovery`, so the discovery server and PID 1's
//! API can link it without the network stack.

pub mod call;
#[cfg(test)]
mod fuzz;
pub mod h2;
pub mod protobuf;
pub mod vecmap;

pub use call::*;
