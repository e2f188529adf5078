// SPDX-License-Identifier: Apache-2.0
//! Package `time` (`proto/time.proto`): `time.TimeService`.

use crate::common::Metadata;
use crate::google::Timestamp;

/// The service name in HTTP/2 paths.
pub const SERVICE: &str = "time.TimeService";

/// `TimeCheck`'s request: the server to ask.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TimeRequest {
    #[prost(string, tag = "1")]
    pub server: String,
}

/// `Time`'s per-node reply: the node's clock and the time server's.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Time {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<Metadata>,
    #[prost(string, tag = "2")]
    pub server: String,
    #[prost(message, optional, tag = "3")]
    pub localtime: Option<Timestamp>,
    #[prost(message, optional, tag = "4")]
    pub remotetime: Option<Timestamp>,
}

/// `Time`'s reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TimeResponse {
    #[prost(message, repeated, tag = "1")]
    pub messages: Vec<Time>,
}
