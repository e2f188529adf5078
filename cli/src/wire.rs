// SPDX-License-Identifier: Apache-2.0
//! Talos machine API messages the client sends and reads that the `talos-api` crate does not
//! carry yet. Field numbers and names are those of Talos's public `.proto` files
//! (siderolabs/talos `api/common/common.proto`, `api/machine/machine.proto`,
//! `api/storage/storage.proto`); each moves to `talos-api` once the server uses it too.

use talos_api::common::Metadata;

/// `google.protobuf.Timestamp`.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct Timestamp {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

/// `common.Data`: a chunk of a byte stream (dmesg, logs).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Data {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<Metadata>,
    #[prost(bytes = "vec", tag = "2")]
    pub bytes: Vec<u8>,
}

/// `machine.DmesgRequest`.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct DmesgRequest {
    #[prost(bool, tag = "1")]
    pub follow: bool,
    #[prost(bool, tag = "2")]
    pub tail: bool,
}

/// `machine.LogsRequest` (`driver`: 0 containerd, 1 cri; machined's log is `system`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct LogsRequest {
    #[prost(string, tag = "1")]
    pub namespace: String,
    #[prost(string, tag = "2")]
    pub id: String,
    #[prost(int32, tag = "3")]
    pub driver: i32,
    #[prost(bool, tag = "4")]
    pub follow: bool,
    #[prost(int32, tag = "5")]
    pub tail_lines: i32,
}

/// `machine.ServiceEvent`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ServiceEvent {
    #[prost(string, tag = "1")]
    pub msg: String,
    #[prost(string, tag = "2")]
    pub state: String,
    #[prost(message, optional, tag = "3")]
    pub ts: Option<Timestamp>,
}

/// `machine.ServiceEvents`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ServiceEvents {
    #[prost(message, repeated, tag = "1")]
    pub events: Vec<ServiceEvent>,
}

/// `machine.ServiceHealth`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ServiceHealth {
    #[prost(bool, tag = "1")]
    pub unknown: bool,
    #[prost(bool, tag = "2")]
    pub healthy: bool,
    #[prost(string, tag = "3")]
    pub last_message: String,
    #[prost(message, optional, tag = "4")]
    pub last_change: Option<Timestamp>,
}

/// `machine.ServiceInfo`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ServiceInfo {
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(string, tag = "2")]
    pub state: String,
    #[prost(message, optional, tag = "3")]
    pub events: Option<ServiceEvents>,
    #[prost(message, optional, tag = "4")]
    pub health: Option<ServiceHealth>,
}

/// `machine.ServiceList`: one node's services.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ServiceList {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<Metadata>,
    #[prost(message, repeated, tag = "2")]
    pub services: Vec<ServiceInfo>,
}

/// `machine.ServiceListResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ServiceListResponse {
    #[prost(message, repeated, tag = "1")]
    pub messages: Vec<ServiceList>,
}

/// `machine.ServiceRestartRequest` (and `ServiceStartRequest`, `ServiceStopRequest`: the
/// same one field).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ServiceRestartRequest {
    #[prost(string, tag = "1")]
    pub id: String,
}

/// `machine.ServiceRestart` (and `ServiceStart`, `ServiceStop`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ServiceRestart {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<Metadata>,
    #[prost(string, tag = "2")]
    pub resp: String,
}

/// `machine.ServiceRestartResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ServiceRestartResponse {
    #[prost(message, repeated, tag = "1")]
    pub messages: Vec<ServiceRestart>,
}

/// `machine.RebootRequest` (`mode`: 0 default, 1 powercycle).
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct RebootRequest {
    #[prost(int32, tag = "1")]
    pub mode: i32,
}

/// `machine.ShutdownRequest`.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct ShutdownRequest {
    #[prost(bool, tag = "1")]
    pub force: bool,
}

/// `machine.Reboot` and `machine.Shutdown`: which node accepted, and the actor ID.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PowerAck {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<Metadata>,
    #[prost(string, tag = "2")]
    pub actor_id: String,
}

/// `machine.RebootResponse` and `machine.ShutdownResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PowerResponse {
    #[prost(message, repeated, tag = "1")]
    pub messages: Vec<PowerAck>,
}

/// `storage.Disk`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Disk {
    #[prost(uint64, tag = "1")]
    pub size: u64,
    #[prost(string, tag = "2")]
    pub model: String,
    #[prost(string, tag = "3")]
    pub device_name: String,
    #[prost(string, tag = "4")]
    pub name: String,
    #[prost(string, tag = "5")]
    pub serial: String,
    #[prost(string, tag = "6")]
    pub modalias: String,
    #[prost(string, tag = "7")]
    pub uuid: String,
    #[prost(string, tag = "8")]
    pub wwid: String,
    /// 0 unknown, 1 SSD, 2 HDD, 3 NVMe, 4 SD, 5 CD.
    #[prost(int32, tag = "9")]
    pub r#type: i32,
    #[prost(string, tag = "10")]
    pub bus_path: String,
    #[prost(bool, tag = "11")]
    pub system_disk: bool,
    #[prost(string, tag = "12")]
    pub subsystem: String,
    #[prost(bool, tag = "13")]
    pub readonly: bool,
}

/// `storage.Disks`: one node's disks.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Disks {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<Metadata>,
    #[prost(message, repeated, tag = "2")]
    pub disks: Vec<Disk>,
}

/// `storage.DisksResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DisksResponse {
    #[prost(message, repeated, tag = "1")]
    pub messages: Vec<Disks>,
}

/// `machine.ApplyConfigurationRequest` (`mode`: 0 reboot, 1 auto, 2 no-reboot, 3 staged,
/// 4 try).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApplyConfigurationRequest {
    #[prost(bytes = "vec", tag = "1")]
    pub data: Vec<u8>,
    #[prost(int32, tag = "4")]
    pub mode: i32,
    #[prost(bool, tag = "5")]
    pub dry_run: bool,
    #[prost(message, optional, tag = "6")]
    pub try_mode_timeout: Option<Duration>,
}

/// `google.protobuf.Duration`.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct Duration {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

/// `machine.ApplyConfiguration`: one node's outcome.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApplyConfiguration {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<Metadata>,
    #[prost(string, repeated, tag = "2")]
    pub warnings: Vec<String>,
    #[prost(int32, tag = "3")]
    pub mode: i32,
    #[prost(string, tag = "4")]
    pub mode_details: String,
}

/// `machine.ApplyConfigurationResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApplyConfigurationResponse {
    #[prost(message, repeated, tag = "1")]
    pub messages: Vec<ApplyConfiguration>,
}
