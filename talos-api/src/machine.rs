// SPDX-License-Identifier: Apache-2.0
//! Package `machine` (`proto/machine.proto`): `machine.MachineService`.

use crate::common::Metadata;

/// The service name in HTTP/2 paths.
pub const SERVICE: &str = "machine.MachineService";

/// `Version`'s per-node reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Version {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<Metadata>,
    #[prost(message, optional, tag = "2")]
    pub version: Option<VersionInfo>,
    #[prost(message, optional, tag = "3")]
    pub platform: Option<PlatformInfo>,
    #[prost(message, optional, tag = "4")]
    pub features: Option<FeaturesInfo>,
}

/// `Version`'s reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct VersionResponse {
    #[prost(message, repeated, tag = "1")]
    pub messages: Vec<Version>,
}

/// What the node runs.
#[derive(Clone, PartialEq, prost::Message)]
pub struct VersionInfo {
    #[prost(string, tag = "1")]
    pub tag: String,
    #[prost(string, tag = "2")]
    pub sha: String,
    #[prost(string, tag = "3")]
    pub built: String,
    #[prost(string, tag = "4")]
    pub go_version: String,
    #[prost(string, tag = "5")]
    pub os: String,
    #[prost(string, tag = "6")]
    pub arch: String,
}

/// Where the node runs.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PlatformInfo {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub mode: String,
}

/// Switchable features.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FeaturesInfo {
    #[prost(bool, tag = "1")]
    pub rbac: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn a_version_reply_round_trips_with_its_field_numbers() {
        let reply = VersionResponse {
            messages: vec![Version {
                metadata: Some(Metadata { hostname: "n1".into(), error: String::new() }),
                version: Some(VersionInfo { tag: "v0.1.0".into(), ..Default::default() }),
                platform: None,
                features: Some(FeaturesInfo { rbac: true }),
            }],
        };
        let bytes = reply.encode_to_vec();
        // messages(1) { metadata(1) { hostname(1) "n1" } ... }
        assert_eq!(&bytes[..6], &[0x0a, bytes[1], 0x0a, 0x04, 0x0a, 0x02]);
        assert_eq!(VersionResponse::decode(bytes.as_slice()).ok(), Some(reply));
    }
}
