// SPDX-License-Identifier: Apache-2.0
//! Package `machine` (`proto/machine.proto`): `machine.MachineService`.

use crate::common::Metadata;
use crate::google::{Duration, Timestamp};

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
    /// keelson's addition, far from Talos's numbers (its clients skip unknown fields).
    #[prost(message, optional, tag = "1000")]
    pub keelson_boot: Option<KeelsonBoot>,
}

/// How a node was booted, when a network boot said so: `BOOTIF=` and `keelson.image=`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct KeelsonBoot {
    /// The NIC the firmware booted from, `aa:bb:cc:dd:ee:ff`.
    #[prost(string, tag = "1")]
    pub mac: String,
    /// The image name the boot server served.
    #[prost(string, tag = "2")]
    pub image: String,
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

/// `ApplyConfigurationRequest.Mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum ApplyMode {
    Reboot = 0,
    Auto = 1,
    NoReboot = 2,
    Staged = 3,
    Try = 4,
}

impl ApplyMode {
    /// The name `talosctl apply-config --mode` takes (`no-reboot`).
    pub fn cli_name(self) -> &'static str {
        match self {
            Self::Reboot => "reboot",
            Self::Auto => "auto",
            Self::NoReboot => "no-reboot",
            Self::Staged => "staged",
            Self::Try => "try",
        }
    }
}

/// `ApplyConfiguration`'s request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApplyConfigurationRequest {
    #[prost(bytes = "vec", tag = "1")]
    pub data: Vec<u8>,
    #[prost(enumeration = "ApplyMode", tag = "4")]
    pub mode: i32,
    #[prost(bool, tag = "5")]
    pub dry_run: bool,
    #[prost(message, optional, tag = "6")]
    pub try_mode_timeout: Option<Duration>,
}

/// `ApplyConfiguration`'s per-node reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApplyConfiguration {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<Metadata>,
    #[prost(string, repeated, tag = "2")]
    pub warnings: Vec<String>,
    #[prost(enumeration = "ApplyMode", tag = "3")]
    pub mode: i32,
    #[prost(string, tag = "4")]
    pub mode_details: String,
}

/// `ApplyConfiguration`'s reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ApplyConfigurationResponse {
    #[prost(message, repeated, tag = "1")]
    pub messages: Vec<ApplyConfiguration>,
}

/// `RebootRequest.Mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum RebootMode {
    Default = 0,
    Powercycle = 1,
}

/// `Reboot`'s request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RebootRequest {
    #[prost(enumeration = "RebootMode", tag = "1")]
    pub mode: i32,
}

/// `Reboot`'s per-node reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Reboot {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<Metadata>,
    #[prost(string, tag = "2")]
    pub actor_id: String,
}

/// `Reboot`'s reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RebootResponse {
    #[prost(message, repeated, tag = "1")]
    pub messages: Vec<Reboot>,
}

/// `Shutdown`'s request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ShutdownRequest {
    #[prost(bool, tag = "1")]
    pub force: bool,
}

/// `Shutdown`'s per-node reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Shutdown {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<Metadata>,
    #[prost(string, tag = "2")]
    pub actor_id: String,
}

/// `Shutdown`'s reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ShutdownResponse {
    #[prost(message, repeated, tag = "1")]
    pub messages: Vec<Shutdown>,
}

/// `ResetRequest.WipeMode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum ResetWipeMode {
    All = 0,
    SystemDisk = 1,
    UserDisks = 2,
}

/// One system partition a reset names, by label.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ResetPartitionSpec {
    #[prost(string, tag = "1")]
    pub label: String,
    #[prost(bool, tag = "2")]
    pub wipe: bool,
}

/// `Reset`'s request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ResetRequest {
    #[prost(bool, tag = "1")]
    pub graceful: bool,
    #[prost(bool, tag = "2")]
    pub reboot: bool,
    #[prost(message, repeated, tag = "3")]
    pub system_partitions_to_wipe: Vec<ResetPartitionSpec>,
    #[prost(string, repeated, tag = "4")]
    pub user_disks_to_wipe: Vec<String>,
    #[prost(enumeration = "ResetWipeMode", tag = "5")]
    pub mode: i32,
}

/// `Reset`'s per-node reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Reset {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<Metadata>,
    #[prost(string, tag = "2")]
    pub actor_id: String,
}

/// `Reset`'s reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ResetResponse {
    #[prost(message, repeated, tag = "1")]
    pub messages: Vec<Reset>,
}

/// `UpgradeRequest.RebootMode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum UpgradeRebootMode {
    Default = 0,
    Powercycle = 1,
}

/// `Upgrade`'s request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct UpgradeRequest {
    #[prost(string, tag = "1")]
    pub image: String,
    #[prost(bool, tag = "2")]
    pub preserve: bool,
    #[prost(bool, tag = "3")]
    pub stage: bool,
    #[prost(bool, tag = "4")]
    pub force: bool,
    #[prost(enumeration = "UpgradeRebootMode", tag = "5")]
    pub reboot_mode: i32,
}

/// `Upgrade`'s per-node reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Upgrade {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<Metadata>,
    #[prost(string, tag = "2")]
    pub ack: String,
    #[prost(string, tag = "3")]
    pub actor_id: String,
}

/// `Upgrade`'s reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct UpgradeResponse {
    #[prost(message, repeated, tag = "1")]
    pub messages: Vec<Upgrade>,
}

/// `Bootstrap`'s request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct BootstrapRequest {
    #[prost(bool, tag = "1")]
    pub recover_etcd: bool,
    #[prost(bool, tag = "2")]
    pub recover_skip_hash_check: bool,
}

/// `Bootstrap`'s per-node reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Bootstrap {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<Metadata>,
}

/// `Bootstrap`'s reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct BootstrapResponse {
    #[prost(message, repeated, tag = "1")]
    pub messages: Vec<Bootstrap>,
}

/// One service as `ServiceList` and `ServiceInfo` show it.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ServiceInfo {
    #[prost(string, tag = "1")]
    pub id: String,
    /// `Running`, `Finished`, `Failed`, `Waiting`, `Preparing`, ...
    #[prost(string, tag = "2")]
    pub state: String,
    #[prost(message, optional, tag = "3")]
    pub events: Option<ServiceEvents>,
    #[prost(message, optional, tag = "4")]
    pub health: Option<ServiceHealth>,
}

/// A service's recent state changes.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ServiceEvents {
    #[prost(message, repeated, tag = "1")]
    pub events: Vec<ServiceEvent>,
}

/// One state change of a service.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ServiceEvent {
    #[prost(string, tag = "1")]
    pub msg: String,
    #[prost(string, tag = "2")]
    pub state: String,
    #[prost(message, optional, tag = "3")]
    pub ts: Option<Timestamp>,
}

/// A service's health.
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

/// `ServiceList`'s per-node reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ServiceList {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<Metadata>,
    #[prost(message, repeated, tag = "2")]
    pub services: Vec<ServiceInfo>,
}

/// `ServiceList`'s reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ServiceListResponse {
    #[prost(message, repeated, tag = "1")]
    pub messages: Vec<ServiceList>,
}

/// `ServiceRestart`'s request (Talos has no `ServiceInfo` call: `talosctl service ID` filters
/// `ServiceList`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ServiceRestartRequest {
    #[prost(string, tag = "1")]
    pub id: String,
}

/// `ServiceRestart`'s per-node reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ServiceRestart {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<Metadata>,
    #[prost(string, tag = "2")]
    pub resp: String,
}

/// `ServiceRestart`'s reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ServiceRestartResponse {
    #[prost(message, repeated, tag = "1")]
    pub messages: Vec<ServiceRestart>,
}

/// `ServiceStart`'s request (the fields of `ServiceRestartRequest`).
pub type ServiceStartRequest = ServiceRestartRequest;
/// `ServiceStart`'s per-node reply.
pub type ServiceStart = ServiceRestart;
/// `ServiceStart`'s reply.
pub type ServiceStartResponse = ServiceRestartResponse;
/// `ServiceStop`'s request.
pub type ServiceStopRequest = ServiceRestartRequest;
/// `ServiceStop`'s per-node reply.
pub type ServiceStop = ServiceRestart;
/// `ServiceStop`'s reply.
pub type ServiceStopResponse = ServiceRestartResponse;

/// `Dmesg`'s request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DmesgRequest {
    #[prost(bool, tag = "1")]
    pub follow: bool,
    /// Only what comes from now on (with `follow`).
    #[prost(bool, tag = "2")]
    pub tail: bool,
}

/// `Logs`'s request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LogsRequest {
    #[prost(string, tag = "1")]
    pub namespace: String,
    #[prost(string, tag = "2")]
    pub id: String,
    #[prost(enumeration = "crate::common::ContainerDriver", tag = "3")]
    pub driver: i32,
    #[prost(bool, tag = "4")]
    pub follow: bool,
    /// Lines from the end to start with; negative: all.
    #[prost(int32, tag = "5")]
    pub tail_lines: i32,
}

/// `Events`'s request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct EventsRequest {
    #[prost(int32, tag = "1")]
    pub tail_events: i32,
    #[prost(string, tag = "2")]
    pub tail_id: String,
    #[prost(int32, tag = "3")]
    pub tail_seconds: i32,
    #[prost(string, tag = "4")]
    pub with_actor_id: String,
}

/// One event of the `Events` stream: a typed message in `data`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Event {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<Metadata>,
    #[prost(message, optional, tag = "2")]
    pub data: Option<crate::google::Any>,
    #[prost(string, tag = "3")]
    pub id: String,
    #[prost(string, tag = "4")]
    pub actor_id: String,
}

/// `MachineStatusEvent.MachineStage`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum MachineStage {
    Unknown = 0,
    Booting = 1,
    Installing = 2,
    Maintenance = 3,
    Running = 4,
    Rebooting = 5,
    ShuttingDown = 6,
    Resetting = 7,
    Upgrading = 8,
}

/// The machine's stage changed (`machine.MachineStatusEvent`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct MachineStatusEvent {
    #[prost(enumeration = "MachineStage", tag = "1")]
    pub stage: i32,
    #[prost(message, optional, tag = "2")]
    pub status: Option<MachineStatus>,
}

/// `MachineStatusEvent.MachineStatus`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MachineStatus {
    #[prost(bool, tag = "1")]
    pub ready: bool,
    #[prost(message, repeated, tag = "2")]
    pub unmet_conditions: Vec<UnmetCondition>,
}

/// `MachineStatusEvent.MachineStatus.UnmetCondition`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct UnmetCondition {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub reason: String,
}

/// `ServiceStateEvent.Action`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum ServiceAction {
    Initialized = 0,
    Preparing = 1,
    Waiting = 2,
    Running = 3,
    Stopping = 4,
    Finished = 5,
    Failed = 6,
    Skipped = 7,
}

impl ServiceAction {
    /// The state's name as `ServiceInfo.state` spells it.
    pub fn state_name(self) -> &'static str {
        match self {
            Self::Initialized => "Initialized",
            Self::Preparing => "Preparing",
            Self::Waiting => "Waiting",
            Self::Running => "Running",
            Self::Stopping => "Stopping",
            Self::Finished => "Finished",
            Self::Failed => "Failed",
            Self::Skipped => "Skipped",
        }
    }
}

/// A service changed state (`machine.ServiceStateEvent`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ServiceStateEvent {
    #[prost(string, tag = "1")]
    pub service: String,
    #[prost(enumeration = "ServiceAction", tag = "2")]
    pub action: i32,
    #[prost(string, tag = "3")]
    pub message: String,
    #[prost(message, optional, tag = "4")]
    pub health: Option<ServiceHealth>,
}

/// The node's hostname or addresses changed (`machine.AddressEvent`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct AddressEvent {
    #[prost(string, tag = "1")]
    pub hostname: String,
    #[prost(string, repeated, tag = "2")]
    pub addresses: Vec<String>,
}

/// `Hostname`'s per-node reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Hostname {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<Metadata>,
    #[prost(string, tag = "2")]
    pub hostname: String,
}

/// `Hostname`'s reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HostnameResponse {
    #[prost(message, repeated, tag = "1")]
    pub messages: Vec<Hostname>,
}

/// `LoadAvg`'s per-node reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LoadAvg {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<Metadata>,
    #[prost(double, tag = "2")]
    pub load1: f64,
    #[prost(double, tag = "3")]
    pub load5: f64,
    #[prost(double, tag = "4")]
    pub load15: f64,
}

/// `LoadAvg`'s reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LoadAvgResponse {
    #[prost(message, repeated, tag = "1")]
    pub messages: Vec<LoadAvg>,
}

/// `Memory`'s per-node reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Memory {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<Metadata>,
    #[prost(message, optional, tag = "2")]
    pub meminfo: Option<MemInfo>,
}

/// `Memory`'s reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MemoryResponse {
    #[prost(message, repeated, tag = "1")]
    pub messages: Vec<Memory>,
}

/// `/proc/meminfo` in kilobytes, the fields keelson fills (Talos's `MemInfo` has 48; the rest
/// stay zero, as for a kernel that does not report them).
#[derive(Clone, PartialEq, prost::Message)]
pub struct MemInfo {
    #[prost(uint64, tag = "1")]
    pub memtotal: u64,
    #[prost(uint64, tag = "2")]
    pub memfree: u64,
    #[prost(uint64, tag = "3")]
    pub memavailable: u64,
    #[prost(uint64, tag = "4")]
    pub buffers: u64,
    #[prost(uint64, tag = "5")]
    pub cached: u64,
    #[prost(uint64, tag = "6")]
    pub swapcached: u64,
    #[prost(uint64, tag = "7")]
    pub active: u64,
    #[prost(uint64, tag = "8")]
    pub inactive: u64,
    #[prost(uint64, tag = "15")]
    pub swaptotal: u64,
    #[prost(uint64, tag = "16")]
    pub swapfree: u64,
    #[prost(uint64, tag = "17")]
    pub dirty: u64,
    #[prost(uint64, tag = "18")]
    pub writeback: u64,
    #[prost(uint64, tag = "21")]
    pub shmem: u64,
    #[prost(uint64, tag = "22")]
    pub slab: u64,
}

/// `EtcdMemberList`'s request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct EtcdMemberListRequest {
    /// Ask the local member rather than the cluster.
    #[prost(bool, tag = "1")]
    pub query_local: bool,
}

/// One etcd member.
#[derive(Clone, PartialEq, prost::Message)]
pub struct EtcdMember {
    #[prost(uint64, tag = "2")]
    pub id: u64,
    #[prost(string, tag = "3")]
    pub hostname: String,
    #[prost(string, repeated, tag = "4")]
    pub peer_urls: Vec<String>,
    #[prost(string, repeated, tag = "5")]
    pub client_urls: Vec<String>,
    #[prost(bool, tag = "6")]
    pub is_learner: bool,
}

/// `EtcdMemberList`'s per-node reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct EtcdMembers {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<Metadata>,
    /// The members' names (older clients read these).
    #[prost(string, repeated, tag = "2")]
    pub legacy_members: Vec<String>,
    #[prost(message, repeated, tag = "3")]
    pub members: Vec<EtcdMember>,
}

/// `EtcdMemberList`'s reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct EtcdMemberListResponse {
    #[prost(message, repeated, tag = "1")]
    pub messages: Vec<EtcdMembers>,
}

/// `EtcdRemoveMember`'s request: the member by its name (the older call).
#[derive(Clone, PartialEq, prost::Message)]
pub struct EtcdRemoveMemberRequest {
    #[prost(string, tag = "1")]
    pub member: String,
}

/// `EtcdRemoveMemberByID`'s request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct EtcdRemoveMemberByIdRequest {
    #[prost(uint64, tag = "1")]
    pub member_id: u64,
}

/// The per-node reply of the etcd calls that answer only with the node's name
/// (`EtcdRemoveMember`, `EtcdRemoveMemberByID`, `EtcdLeaveCluster`: one shape on the wire).
#[derive(Clone, PartialEq, prost::Message)]
pub struct EtcdDone {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<Metadata>,
}

/// The reply of `EtcdRemoveMember`, `EtcdRemoveMemberByID` and `EtcdLeaveCluster`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct EtcdDoneResponse {
    #[prost(message, repeated, tag = "1")]
    pub messages: Vec<EtcdDone>,
}

/// `EtcdForfeitLeadership`'s per-node reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct EtcdForfeitLeadership {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<Metadata>,
    /// The member that leads now (empty: this node was not the leader).
    #[prost(string, tag = "2")]
    pub member: String,
}

/// `EtcdForfeitLeadership`'s reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct EtcdForfeitLeadershipResponse {
    #[prost(message, repeated, tag = "1")]
    pub messages: Vec<EtcdForfeitLeadership>,
}

/// The local member's status (etcd's maintenance status).
#[derive(Clone, PartialEq, prost::Message)]
pub struct EtcdMemberStatus {
    #[prost(string, tag = "1")]
    pub protocol_version: String,
    #[prost(int64, tag = "2")]
    pub db_size: i64,
    #[prost(int64, tag = "3")]
    pub db_size_in_use: i64,
    #[prost(uint64, tag = "4")]
    pub leader: u64,
    #[prost(uint64, tag = "5")]
    pub raft_index: u64,
    #[prost(uint64, tag = "6")]
    pub raft_term: u64,
    #[prost(uint64, tag = "7")]
    pub raft_applied_index: u64,
    #[prost(string, repeated, tag = "8")]
    pub errors: Vec<String>,
    #[prost(bool, tag = "9")]
    pub is_learner: bool,
    #[prost(uint64, tag = "10")]
    pub member_id: u64,
}

/// `EtcdStatus`'s per-node reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct EtcdStatus {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<Metadata>,
    #[prost(message, optional, tag = "2")]
    pub member_status: Option<EtcdMemberStatus>,
}

/// `EtcdStatus`'s reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct EtcdStatusResponse {
    #[prost(message, repeated, tag = "1")]
    pub messages: Vec<EtcdStatus>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn a_version_reply_round_trips_with_its_field_numbers() {
        let reply = VersionResponse {
            messages: vec![Version {
                metadata: Some(Metadata { hostname: "n1".into(), ..Metadata::default() }),
                version: Some(VersionInfo { tag: "v0.1.0".into(), ..Default::default() }),
                platform: None,
                features: Some(FeaturesInfo { rbac: true }),
                keelson_boot: None,
            }],
        };
        let bytes = reply.encode_to_vec();
        // messages(1) { metadata(1) { hostname(1) "n1" } ... }
        assert_eq!(&bytes[..6], &[0x0a, bytes[1], 0x0a, 0x04, 0x0a, 0x02]);
        assert_eq!(VersionResponse::decode(bytes.as_slice()).ok(), Some(reply));
    }
}
