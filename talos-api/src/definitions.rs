// SPDX-License-Identifier: Apache-2.0
//! Talos's resource specs as protobuf (`proto/network.proto`, `proto/runtime.proto`, the
//! subset of siderolabs/talos `api/resource/definitions/*`): what a COSI resource carries in
//! `proto_spec`, which talosctl decodes. Enum fields are plain integers here (the kernel's
//! numbers, which Talos's enums use); on the wire they are the same varints.

/// `common.NetIP`: an address, 4 or 16 bytes.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NetIp {
    #[prost(bytes = "vec", tag = "1")]
    pub ip: Vec<u8>,
}

/// `common.NetIPPrefix`: an address and a prefix length.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NetIpPrefix {
    #[prost(bytes = "vec", tag = "1")]
    pub ip: Vec<u8>,
    #[prost(int32, tag = "2")]
    pub prefix_length: i32,
}

/// `talos.resource.definitions.network.AddressStatusSpec`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AddressStatusSpec {
    #[prost(message, optional, tag = "1")]
    pub address: Option<NetIpPrefix>,
    #[prost(message, optional, tag = "2")]
    pub local: Option<NetIp>,
    #[prost(message, optional, tag = "3")]
    pub broadcast: Option<NetIp>,
    #[prost(message, optional, tag = "4")]
    pub anycast: Option<NetIp>,
    #[prost(message, optional, tag = "5")]
    pub multicast: Option<NetIp>,
    #[prost(uint32, tag = "6")]
    pub link_index: u32,
    #[prost(string, tag = "7")]
    pub link_name: String,
    /// `nethelpers.Family`.
    #[prost(int32, tag = "8")]
    pub family: i32,
    /// `nethelpers.Scope`.
    #[prost(int32, tag = "9")]
    pub scope: i32,
    #[prost(uint32, tag = "10")]
    pub flags: u32,
}

/// `talos.resource.definitions.network.LinkStatusSpec` (the fields keelson knows).
#[derive(Clone, PartialEq, prost::Message)]
pub struct LinkStatusSpec {
    #[prost(uint32, tag = "1")]
    pub index: u32,
    /// `nethelpers.LinkType`.
    #[prost(int32, tag = "2")]
    pub r#type: i32,
    #[prost(uint32, tag = "3")]
    pub link_index: u32,
    #[prost(uint32, tag = "4")]
    pub flags: u32,
    #[prost(bytes = "vec", tag = "5")]
    pub hardware_addr: Vec<u8>,
    #[prost(bytes = "vec", tag = "6")]
    pub broadcast_addr: Vec<u8>,
    #[prost(uint32, tag = "7")]
    pub mtu: u32,
    #[prost(uint32, tag = "9")]
    pub master_index: u32,
    /// `nethelpers.OperationalState`.
    #[prost(int32, tag = "10")]
    pub operational_state: i32,
    #[prost(string, tag = "11")]
    pub kind: String,
    #[prost(string, tag = "12")]
    pub slave_kind: String,
    #[prost(string, tag = "13")]
    pub bus_path: String,
    #[prost(string, tag = "15")]
    pub driver: String,
    #[prost(bool, tag = "22")]
    pub link_state: bool,
    #[prost(bytes = "vec", tag = "30")]
    pub permanent_addr: Vec<u8>,
}

/// `talos.resource.definitions.network.RouteStatusSpec`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RouteStatusSpec {
    #[prost(int32, tag = "1")]
    pub family: i32,
    #[prost(message, optional, tag = "2")]
    pub destination: Option<NetIpPrefix>,
    #[prost(message, optional, tag = "3")]
    pub source: Option<NetIp>,
    #[prost(message, optional, tag = "4")]
    pub gateway: Option<NetIp>,
    #[prost(uint32, tag = "5")]
    pub out_link_index: u32,
    #[prost(string, tag = "6")]
    pub out_link_name: String,
    /// `nethelpers.RoutingTable`.
    #[prost(int32, tag = "7")]
    pub table: i32,
    #[prost(uint32, tag = "8")]
    pub priority: u32,
    #[prost(int32, tag = "9")]
    pub scope: i32,
    /// `nethelpers.RouteType`.
    #[prost(int32, tag = "10")]
    pub r#type: i32,
    #[prost(uint32, tag = "11")]
    pub flags: u32,
    /// `nethelpers.RouteProtocol`.
    #[prost(int32, tag = "12")]
    pub protocol: i32,
    #[prost(uint32, tag = "13")]
    pub mtu: u32,
}

/// `talos.resource.definitions.network.HostnameStatusSpec`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HostnameStatusSpec {
    #[prost(string, tag = "1")]
    pub hostname: String,
    #[prost(string, tag = "2")]
    pub domainname: String,
}

/// `talos.resource.definitions.network.NodeAddressSpec`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NodeAddressSpec {
    #[prost(message, repeated, tag = "1")]
    pub addresses: Vec<NetIpPrefix>,
}

/// `talos.resource.definitions.runtime.MachineStatusSpec`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MachineStatusSpec {
    /// `runtime.MachineStage`.
    #[prost(int32, tag = "1")]
    pub stage: i32,
    #[prost(message, optional, tag = "2")]
    pub status: Option<MachineStatusStatus>,
}

/// `talos.resource.definitions.runtime.MachineStatusStatus`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MachineStatusStatus {
    #[prost(bool, tag = "1")]
    pub ready: bool,
    #[prost(message, repeated, tag = "2")]
    pub unmet_conditions: Vec<UnmetCondition>,
}

/// `talos.resource.definitions.runtime.UnmetCondition`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct UnmetCondition {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub reason: String,
}
