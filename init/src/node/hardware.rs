// SPDX-License-Identifier: Apache-2.0
//! The machine's identity, read once at start: SMBIOS System Information from
//! `/sys/class/dmi/id` (the kernel's copy of the fields) and the wake-up type, which only the
//! raw table (`/sys/firmware/dmi/tables/DMI`) has. A machine without SMBIOS (or a sysfs
//! without DMI) gets an empty resource. Values are bounded and escaped.

use std::path::Path;

use net::resource::{smbios_wake_up_type, wake_up_type_name, SystemInformation};

/// One attribute is one short line; the raw table is a few KiB on real machines.
const ATTR_LIMIT: u64 = 4096;
const TABLE_LIMIT: u64 = 1 << 20;
/// Longest value kept, in characters.
const VALUE_MAX: usize = 128;

/// Read SystemInformation under `sys` (normally `/sys`).
pub fn read(sys: &Path) -> SystemInformation {
    let dmi = sys.join("class/dmi/id");
    let attr = |name: &str| {
        net::bounded::read_text(&dmi.join(name), ATTR_LIMIT)
            .map(|v| net::names::escape(v.trim_end_matches('\n').trim(), VALUE_MAX))
            .unwrap_or_default()
    };
    let wake = net::bounded::read_file(&sys.join("firmware/dmi/tables/DMI"), TABLE_LIMIT)
        .ok()
        .and_then(|t| smbios_wake_up_type(&t));
    SystemInformation {
        manufacturer: attr("sys_vendor"),
        product_name: attr("product_name"),
        version: attr("product_version"),
        serial_number: attr("product_serial"),
        uuid: attr("product_uuid").to_lowercase(),
        wake_up_type: wake.map(wake_up_type_name).unwrap_or_default().to_owned(),
        sku_number: attr("product_sku"),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn fields_from_a_sysfs_tree_escaped_and_bounded() {
        let root = std::env::temp_dir().join(format!("keelson-dmi-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let id = root.join("class/dmi/id");
        std::fs::create_dir_all(&id).unwrap();
        for (k, v) in [
            ("sys_vendor", "QEMU\n"),
            ("product_name", "Standard PC (i440FX + PIIX, 1996)\n"),
            ("product_serial", "abc\u{1b}[2J\n"),
            ("product_uuid", "4C4C4544-0000-1000-8000-ABCDEF012345\n"),
        ] {
            std::fs::write(id.join(k), v).unwrap();
        }
        std::fs::write(id.join("product_version"), "x".repeat(5000)).unwrap();
        let s = read(&root);
        assert_eq!(s.manufacturer, "QEMU");
        assert_eq!(s.product_name, "Standard PC (i440FX + PIIX, 1996)");
        assert_eq!(s.serial_number, "abc\\u{1b}[2J");
        assert_eq!(s.uuid, "4c4c4544-0000-1000-8000-abcdef012345");
        // Over the read limit: left out rather than cut.
        assert_eq!(s.version, "");
        assert_eq!(s.wake_up_type, "");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
