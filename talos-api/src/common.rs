// SPDX-License-Identifier: Apache-2.0
//! Package `common` (`proto/common.proto`): the per-node metadata every reply carries.

/// Which node answered, and its error when the call was proxied to it and failed there.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Metadata {
    #[prost(string, tag = "1")]
    pub hostname: String,
    #[prost(string, tag = "2")]
    pub error: String,
}
