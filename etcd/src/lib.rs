// SPDX-License-Identifier: Apache-2.0
//! keelson's etcd v3 client, over etcd's HTTP/JSON gateway (`/v3/...`).
//!
//! The core is without I/O, so PID 1 can drive it from its event loop or a worker:
//! [`wire`] (the messages), [`request`] (what to send), [`http`] (HTTP/1.1 framing),
//! [`decode`] (answers and streamed frames, bounded), [`lease`] (keep-alive timing) and
//! [`election`] (etcd's `concurrency` election as a state machine). [`client`] and
//! [`session`] are a small blocking driver for tools, tests and `keelson-operator`;
//! [`local`] runs a private single-member etcd on loopback.

pub mod client;
pub mod decode;
pub mod election;
pub mod http;
pub mod lease;
pub mod local;
pub mod request;
pub mod session;
pub mod stream;
pub mod wire;

#[cfg(test)]
mod fuzz;

pub use client::{Client, ClientError, Config, Endpoint, Watch};
pub use decode::DecodeError;
pub use election::{Election, Leader};
pub use session::Session;
