// SPDX-License-Identifier: Apache-2.0
//! Package `common` (`proto/common.proto`): the per-node metadata every reply carries, and the
//! replies shared by several services.

/// Which node answered, and its error when the call was proxied to it and failed there.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Metadata {
    #[prost(string, tag = "1")]
    pub hostname: String,
    #[prost(string, tag = "2")]
    pub error: String,
    /// The failure as a gRPC status (set with `error` by a proxying node).
    #[prost(message, optional, tag = "3")]
    pub status: Option<RpcStatus>,
}

impl Metadata {
    /// The metadata of a reply from the node named `hostname`.
    pub fn of(hostname: &str) -> Option<Self> {
        Some(Self { hostname: hostname.to_owned(), ..Self::default() })
    }
}

/// `google.rpc.Status` (its `details` are not kept).
#[derive(Clone, PartialEq, prost::Message)]
pub struct RpcStatus {
    #[prost(int32, tag = "1")]
    pub code: i32,
    #[prost(string, tag = "2")]
    pub message: String,
}

/// A chunk of a byte stream (`Dmesg`, `Logs`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Data {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<Metadata>,
    #[prost(bytes = "vec", tag = "2")]
    pub bytes: Vec<u8>,
}

/// A reply with nothing but its metadata.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Empty {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<Metadata>,
}

/// `EmptyResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct EmptyResponse {
    #[prost(message, repeated, tag = "1")]
    pub messages: Vec<Empty>,
}

/// `ContainerDriver`, as `Logs` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum ContainerDriver {
    Containerd = 0,
    Cri = 1,
}
