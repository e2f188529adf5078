// SPDX-License-Identifier: Apache-2.0
//! Package `storage` (`proto/storage.proto`): `storage.StorageService`.

use crate::common::Metadata;

/// The service name in HTTP/2 paths.
pub const SERVICE: &str = "storage.StorageService";

/// `Disk.DiskType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum DiskType {
    Unknown = 0,
    Ssd = 1,
    Hdd = 2,
    Nvme = 3,
    Sd = 4,
}

/// One block device.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Disk {
    /// Bytes.
    #[prost(uint64, tag = "1")]
    pub size: u64,
    #[prost(string, tag = "2")]
    pub model: String,
    /// `/dev/sda`.
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
    #[prost(enumeration = "DiskType", tag = "9")]
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

/// `Disks`'s per-node reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Disks {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<Metadata>,
    #[prost(message, repeated, tag = "2")]
    pub disks: Vec<Disk>,
}

/// `Disks`'s reply.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DisksResponse {
    #[prost(message, repeated, tag = "1")]
    pub messages: Vec<Disks>,
}
