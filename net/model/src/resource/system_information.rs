// SPDX-License-Identifier: Apache-2.0
//! The machine's identity from SMBIOS: [`SystemInformation`] (namespace `hardware`, ID
//! [`SYSTEM_INFORMATION_ID`]), as Talos has it (pkg/machinery/resources/hardware/
//! system_information.go: the same fields and YAML names).

use serde::{Deserialize, Serialize};

/// The one SystemInformation's ID.
pub const SYSTEM_INFORMATION_ID: &str = "systeminformation";

/// SMBIOS type 1, the System Information structure. Every value is as the firmware gave it,
/// control characters escaped; an empty field is one the firmware left out.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct SystemInformation {
    /// System manufacturer.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub manufacturer: String,
    /// Product name.
    #[serde(rename = "productName", default, skip_serializing_if = "String::is_empty")]
    pub product_name: String,
    /// Product version.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// Serial number.
    #[serde(rename = "serialnumber", default, skip_serializing_if = "String::is_empty")]
    pub serial_number: String,
    /// The system UUID, lowercase.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uuid: String,
    /// What woke the system (`Power Switch`, `LAN Remote`, ...).
    #[serde(rename = "wakeUpType", default, skip_serializing_if = "String::is_empty")]
    pub wake_up_type: String,
    /// SKU number.
    #[serde(rename = "skuNumber", default, skip_serializing_if = "String::is_empty")]
    pub sku_number: String,
}

/// The SMBIOS wake-up type byte's name (DMTF DSP0134, System Information, offset 18h).
pub fn wake_up_type_name(byte: u8) -> &'static str {
    match byte {
        0 => "Reserved",
        1 => "Other",
        2 => "Unknown",
        3 => "APM Timer",
        4 => "Modem Ring",
        5 => "LAN Remote",
        6 => "Power Switch",
        7 => "PCI PME#",
        8 => "AC Power Restored",
        _ => "Unknown",
    }
}

/// The wake-up type byte of the first System Information structure (type 1) in a raw SMBIOS
/// table (`/sys/firmware/dmi/tables/DMI`). Each structure is a formatted area (type, length,
/// handle, fields) then its strings, ended by two NULs; `None` if the table ends first or
/// the structure is too short to have the field (SMBIOS before 2.1).
pub fn smbios_wake_up_type(table: &[u8]) -> Option<u8> {
    let mut at = 0usize;
    loop {
        let kind = *table.get(at)?;
        let len = usize::from(*table.get(at + 1)?);
        if len < 4 {
            return None;
        }
        if kind == 1 {
            return if len > 0x18 { table.get(at + 0x18).copied() } else { None };
        }
        if kind == 127 {
            return None;
        }
        // Skip the strings: the first double NUL at or after the formatted area's end.
        let strings = table.get(at + len..)?;
        let end = strings.windows(2).position(|w| w == [0, 0])?;
        at += len + end + 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wake_up_type_from_a_qemu_like_table() {
        // Type 0 (BIOS) with two strings, then type 1 with wake-up type 6 at offset 18h.
        let mut t = vec![0u8, 0x18, 0, 0];
        t.extend([0u8; 0x14]);
        t.extend(b"SeaBIOS\0rel-1.16\0\0");
        let mut one = vec![1u8, 0x1b, 1, 0, 1, 2, 0, 0];
        one.extend([0x11u8; 16]);
        one.extend([6u8, 0, 0]);
        assert_eq!(one.len(), 0x1b);
        t.extend(one);
        t.extend(b"QEMU\0Standard PC\0\0");
        assert_eq!(smbios_wake_up_type(&t), Some(6));
        assert_eq!(wake_up_type_name(6), "Power Switch");
        // Cut short, and a structure with no strings (just the double NUL).
        assert_eq!(smbios_wake_up_type(t.get(..30).unwrap()), None);
        let mut bare = vec![2u8, 4, 0, 0, 0, 0];
        bare.extend([1u8, 0x19, 0, 0]);
        bare.extend([0u8; 0x14]);
        bare.push(5);
        assert_eq!(smbios_wake_up_type(&bare), Some(5));
        assert_eq!(smbios_wake_up_type(&[1, 0x10, 0, 0]), None);
        assert_eq!(smbios_wake_up_type(&[]), None);
    }
}
