// SPDX-License-Identifier: Apache-2.0
//! What `Disks` and `Dmesg` answer: block devices from sysfs (`/sys/block`, see the kernel's
//! Documentation/ABI/stable/sysfs-block), read bounded (sysfs attributes are small in-memory
//! files), and a `/dev/kmsg` record (Documentation/ABI/testing/dev-kmsg) as a line.

use std::path::Path;

use serde_json::{json, Value};

/// Longest sysfs attribute read.
const ATTR_LIMIT: u64 = 4096;
/// Most block devices listed.
const MAX_DISKS: usize = 1024;

fn attr(path: &Path) -> Option<String> {
    let text = net::bounded::read_text(path, ATTR_LIMIT).ok()?;
    let t = text.trim();
    (!t.is_empty()).then(|| t.to_owned())
}

/// The block devices under `sys_block` (`/sys/block`), loop and RAM disks left out.
pub fn disks(sys_block: &Path) -> Value {
    let mut names: Vec<String> = match std::fs::read_dir(sys_block) {
        Ok(d) => d
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| !n.starts_with("loop") && !n.starts_with("ram"))
            .take(MAX_DISKS)
            .collect(),
        Err(e) => return json!({"ok": false, "error": format!("{}: {e}", sys_block.display())}),
    };
    net::sort::ascending(&mut names);
    let list: Vec<Value> = names
        .iter()
        .map(|name| {
            let dir = sys_block.join(name);
            let sectors: u64 = attr(&dir.join("size")).and_then(|s| s.parse().ok()).unwrap_or(0);
            let wwid = attr(&dir.join("wwid")).or_else(|| attr(&dir.join("device/wwid")));
            let serial = attr(&dir.join("device/serial")).or_else(|| attr(&dir.join("serial")));
            let target =
                std::fs::read_link(&dir).map(|p| p.display().to_string()).unwrap_or_default();
            json!({
                "name": name,
                // The size file counts 512-byte sectors whatever the device's block size.
                "size": sectors.saturating_mul(512),
                "model": attr(&dir.join("device/model")),
                "serial": serial,
                "wwid": wwid,
                "rotational": attr(&dir.join("queue/rotational")).as_deref() == Some("1"),
                "transport": transport(&target),
                "readOnly": attr(&dir.join("ro")).as_deref() == Some("1"),
            })
        })
        .collect();
    json!({"ok": true, "disks": list})
}

/// How a device is attached, from its sysfs path.
fn transport(sys_path: &str) -> &'static str {
    let has = |s: &str| sys_path.contains(s);
    if has("/nvme") {
        "nvme"
    } else if has("/usb") {
        "usb"
    } else if has("/virtio") {
        "virtio"
    } else if has("/mmc") {
        "mmc"
    } else if has("/ata") {
        "sata"
    } else if has("/host") || has("/scsi") {
        "scsi"
    } else if has("/virtual/") {
        "virtual"
    } else {
        "unknown"
    }
}

/// `PRI,SEQ,USEC,FLAGS;MESSAGE\n KEY=VALUE...` as `[ seconds] MESSAGE`, with what the node's
/// own log redacts redacted (the kernel's `Command line:` record quotes `talos.config=` URLs
/// with their tokens and inline configs; `dmesg` is open to `os:reader`).
pub(super) fn record(raw: &str) -> String {
    let (head, rest) = raw.split_once(';').unwrap_or(("", raw));
    let message = rest.lines().next().unwrap_or_default();
    let usec: u64 = head.split(',').nth(2).and_then(|t| t.parse().ok()).unwrap_or(0);
    let message = crate::fetch::url::redact_cmdline(message);
    format!("[{:>5}.{:06}] {message}", usec / 1_000_000, usec % 1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records() {
        assert_eq!(
            record("6,339,5140900,-;NET: Registered protocol family 10\n SUBSYSTEM=net"),
            "[    5.140900] NET: Registered protocol family 10"
        );
        assert_eq!(record("garbage"), "[    0.000000] garbage");
        assert_eq!(
            record("5,0,0,-;Command line: console=ttyS0 talos.config=https://c/x?token=s3cret talos.config.inline=dmVyc2lvbg=="),
            "[    0.000000] Command line: console=ttyS0 talos.config=https://c/x?… talos.config.inline=<12 bytes>"
        );
    }

    #[test]
    fn transports() {
        assert_eq!(transport("../devices/pci0000:00/0000:00:04.0/virtio1/block/vda"), "virtio");
        assert_eq!(
            transport(
                "../devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block/sda"
            ),
            "sata"
        );
        assert_eq!(transport("../devices/pci0000:00/0000:00:06.0/nvme/nvme0/nvme0n1"), "nvme");
        assert_eq!(transport("../devices/virtual/block/dm-0"), "virtual");
    }

    #[test]
    fn disks_from_a_fake_sysfs_tree() {
        let dir = std::env::temp_dir().join(format!("keelson-disks-{}", std::process::id()));
        let vda = dir.join("vda");
        std::fs::create_dir_all(vda.join("device")).unwrap_or_default();
        std::fs::create_dir_all(vda.join("queue")).unwrap_or_default();
        std::fs::create_dir_all(dir.join("loop0")).unwrap_or_default();
        for (f, v) in [
            ("size", "2048\n"),
            ("ro", "1\n"),
            ("queue/rotational", "1\n"),
            ("device/serial", "S1\n"),
        ] {
            std::fs::write(vda.join(f), v).unwrap_or_default();
        }
        let v = disks(&dir);
        let _ = std::fs::remove_dir_all(&dir);
        let list = v["disks"].as_array().cloned().unwrap_or_default();
        assert_eq!(list.len(), 1, "{v}");
        assert_eq!(list[0]["name"], "vda");
        assert_eq!(list[0]["size"], 1 << 20);
        assert_eq!(list[0]["serial"], "S1");
        assert_eq!(list[0]["readOnly"], true);
        assert_eq!(list[0]["rotational"], true);
        assert_eq!(list[0]["model"], Value::Null);
    }
}
