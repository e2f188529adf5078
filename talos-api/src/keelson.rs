// SPDX-License-Identifier: Apache-2.0
//! Package `keelson.v1` (`proto/keelson.proto`): `keelson.v1.NodeService`, keelson's own
//! calls beside Talos's API (a partial apply, confirming a config on trial, a reboot into a
//! staged config, the node's status document).

use crate::common::Metadata;
use crate::machine;

/// The service name in HTTP/2 paths.
pub const SERVICE: &str = "keelson.v1.NodeService";

/// The HTTP/2 paths of its methods.
pub mod path {
    pub const APPLY_CONFIGURATION: &str = "/keelson.v1.NodeService/ApplyConfiguration";
    pub const CONFIRM_CONFIGURATION: &str = "/keelson.v1.NodeService/ConfirmConfiguration";
    pub const STAGED_REBOOT: &str = "/keelson.v1.NodeService/StagedReboot";
    pub const MACHINE_STATUS: &str = "/keelson.v1.NodeService/MachineStatus";
}

/// `ApplyConfiguration`'s request: Talos's, and whether a partly invalid config applies.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApplyConfigurationRequest {
    #[prost(message, optional, tag = "1")]
    pub request: Option<machine::ApplyConfigurationRequest>,
    #[prost(bool, tag = "2")]
    pub allow_partial: bool,
}

/// `ConfirmConfiguration`'s per-node reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ConfirmConfiguration {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<Metadata>,
    #[prost(string, tag = "2")]
    pub kept: String,
}

/// `ConfirmConfiguration`'s reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ConfirmConfigurationResponse {
    #[prost(message, repeated, tag = "1")]
    pub messages: Vec<ConfirmConfiguration>,
}

/// `MachineStatus`'s per-node reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MachineStatus {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<Metadata>,
    #[prost(string, tag = "2")]
    pub status_json: String,
}

/// `MachineStatus`'s reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MachineStatusResponse {
    #[prost(message, repeated, tag = "1")]
    pub messages: Vec<MachineStatus>,
}
