// SPDX-License-Identifier: Apache-2.0
//! `storage.StorageService`: the node's disks, as the JSON `disks` request lists them.

use std::path::Path;

use grpc::{code, Status};
use serde_json::Value;
use talos_api::common::Metadata;
use talos_api::google::Empty;
use talos_api::storage::{Disk, DiskType, Disks, DisksResponse};

use super::dispatch::{decode, Call, Method, Reply, SMALL_REQUEST};

/// The methods served.
pub const METHODS: &[Method] =
    &[Method { path: "/storage.StorageService/Disks", max_request: SMALL_REQUEST, handler: disks }];

fn disks(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    let _: Empty = decode(req)?;
    let v = super::super::hostinfo::disks(Path::new("/sys/block"));
    if v["ok"] != true {
        let why = v["error"].as_str().unwrap_or("cannot list the disks").to_owned();
        return Err(Status::new(code::INTERNAL, why));
    }
    let disks = v["disks"].as_array().into_iter().flatten().map(disk).collect();
    Reply::unary(&DisksResponse {
        messages: vec![Disks { metadata: Metadata::of(&call.hostname()), disks }],
    })
}

/// One disk of the JSON listing as Talos's `Disk`.
pub(super) fn disk(d: &Value) -> Disk {
    let s = |k: &str| d[k].as_str().unwrap_or_default().to_owned();
    let name = s("name");
    Disk {
        size: d["size"].as_u64().unwrap_or(0),
        model: s("model"),
        device_name: format!("/dev/{name}"),
        serial: s("serial"),
        wwid: s("wwid"),
        r#type: disk_type(&s("transport"), d["rotational"] == true, &name) as i32,
        readonly: d["readOnly"] == true,
        subsystem: s("transport"),
        name,
        ..Disk::default()
    }
}

/// Talos's disk type from how the disk is attached and whether it spins.
fn disk_type(transport: &str, rotational: bool, name: &str) -> DiskType {
    match transport {
        "nvme" => DiskType::Nvme,
        "mmc" if name.starts_with("mmcblk") => DiskType::Sd,
        _ if rotational => DiskType::Hdd,
        "unknown" => DiskType::Unknown,
        _ => DiskType::Ssd,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_json_disk_as_talos_shows_it() {
        let d = disk(&serde_json::json!({
            "name": "vda", "size": 1048576, "model": null, "serial": "S1", "wwid": null,
            "rotational": true, "transport": "virtio", "readOnly": true
        }));
        assert_eq!(d.device_name, "/dev/vda");
        assert_eq!((d.size, d.readonly, d.serial.as_str()), (1 << 20, true, "S1"));
        assert_eq!(d.r#type, DiskType::Hdd as i32);
        assert_eq!(disk_type("nvme", false, "nvme0n1"), DiskType::Nvme);
        assert_eq!(disk_type("virtio", false, "vda"), DiskType::Ssd);
        assert_eq!(disk_type("mmc", false, "mmcblk0"), DiskType::Sd);
    }
}
