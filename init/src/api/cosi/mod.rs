// SPDX-License-Identifier: Apache-2.0
//! COSI's `cosi.resource.State` service over keelson's store: what `talosctl get` calls.
//! Types and namespaces carry Talos's names ([`names`]); specs go out as YAML
//! ([`convert`]); the `meta` namespace holds the resource definitions clients resolve
//! aliases with ([`definitions`]); reads are [`handlers`], watches [`watch`]. Writes are
//! refused. Everything here is pure: the gRPC server decodes requests, calls these with the
//! store and the caller's access, and sends what they return.

pub mod convert;
pub mod definitions;
pub mod handlers;
pub mod names;
mod proto_spec;
pub mod watch;

use grpc::call::Status;

/// gRPC status codes the service answers with.
pub use grpc::call::code;

/// How much of a client's string an error repeats.
const SHOWN: usize = 64;

/// A client's string, escaped and cut, for an error message.
fn shown(s: &str) -> String {
    net::names::escape(s, SHOWN)
}

fn status(code: u32, message: impl Into<String>) -> Status {
    Status::new(code, message)
}
