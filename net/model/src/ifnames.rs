// SPDX-License-Identifier: Apache-2.0
//! Predictable link names, as systemd-udevd's `net_id` builtin gives them to PCI Ethernet
//! devices under its default policy (`NamePolicy=kernel database onboard slot path`; the MAC
//! policy is not a default). Pure: the sysfs facts come from the caller.
//!
//! The three candidates (systemd.net-naming-scheme(7)), `en` for Ethernet:
//! - onboard `eno<index>`: the firmware's index for an onboard device, ACPI `_DSM`
//!   (`acpi_index`) before SMBIOS type 41 (`index`); none for SR-IOV virtual functions or an
//!   index beyond 16383;
//! - slot `en[P<domain>]s<slot>[f<function>]`: the PCI hotplug slot number (ACPI `_SUN`,
//!   `/sys/bus/pci/slots/N/address`) of the device, or of a bridge above it when the device
//!   has several functions;
//! - path `en[P<domain>]p<bus>s<slot>[f<function>]`: the PCI address.
//!
//! `f<function>` is added when the function is not 0 or the device has several functions;
//! a port name (`n<phys_port_name>`) or else a port number above 0 (`d<dev_port>`) follows. The
//! first candidate that exists and fits in 15 bytes is the name.

/// What sysfs says about a PCI network device.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PciFacts {
    /// PCI domain, bus, slot (device) and function.
    pub domain: u32,
    /// Bus number.
    pub bus: u32,
    /// Device (slot) number on the bus.
    pub slot: u32,
    /// Function number.
    pub function: u32,
    /// The device has several functions (header type bit 7 in its config space).
    pub multifunction: bool,
    /// The device is an SR-IOV virtual function (has a `physfn` link).
    pub virtual_function: bool,
    /// `acpi_index` of the PCI device.
    pub acpi_index: Option<u64>,
    /// `index` of the PCI device (SMBIOS type 41).
    pub smbios_index: Option<u64>,
    /// The hotplug slot found for the device: its number, and whether it belongs to a bridge
    /// above the device rather than to the device itself.
    pub hotplug_slot: Option<(u32, bool)>,
    /// `dev_port` of the network device.
    pub dev_port: u32,
    /// `phys_port_name` of the network device, when the driver gives one.
    pub phys_port_name: Option<String>,
}

/// The candidates for one device.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Candidates {
    /// `ID_NET_NAME_ONBOARD`.
    pub onboard: Option<String>,
    /// `ID_NET_NAME_SLOT`.
    pub slot: Option<String>,
    /// `ID_NET_NAME_PATH`.
    pub path: Option<String>,
}

/// The largest onboard index used (larger ones are firmware garbage, systemd v243+).
const ONBOARD_INDEX_MAX: u64 = 16383;
/// Longest link name the kernel takes.
const IFNAMSIZ_MAX: usize = 15;

fn port_suffix(f: &PciFacts) -> String {
    match &f.phys_port_name {
        Some(n) if !n.is_empty() => format!("n{n}"),
        _ if f.dev_port > 0 => format!("d{}", f.dev_port),
        _ => String::new(),
    }
}

/// Every candidate `net_id` computes for an Ethernet device with these facts.
pub fn candidates(f: &PciFacts) -> Candidates {
    let prefix = "en";
    let port = port_suffix(f);
    let onboard = if f.virtual_function {
        None
    } else {
        f.acpi_index
            .or(f.smbios_index)
            .filter(|i| (1..=ONBOARD_INDEX_MAX).contains(i))
            .map(|i| format!("{prefix}o{i}{port}"))
    };
    let domain = if f.domain > 0 { format!("P{}", f.domain) } else { String::new() };
    let func =
        if f.function > 0 || f.multifunction { format!("f{}", f.function) } else { String::new() };
    // A bridge's slot is shared by everything behind it: only a device whose function number
    // is part of its name can use it without a clash.
    let slot = f
        .hotplug_slot
        .filter(|(n, of_bridge)| *n > 0 && (!of_bridge || f.multifunction))
        .map(|(n, _)| format!("{prefix}{domain}s{n}{func}{port}"));
    let path = Some(format!("{prefix}{domain}p{}s{}{func}{port}", f.bus, f.slot));
    Candidates { onboard, slot, path }
}

/// The name the default policy picks: onboard, then slot, then path.
pub fn predictable_name(f: &PciFacts) -> Option<String> {
    let c = candidates(f);
    [c.onboard, c.slot, c.path].into_iter().flatten().find(|n| n.len() <= IFNAMSIZ_MAX)
}

/// A PCI address as sysfs names the device (`0000:00:03.0`): domain, bus, slot, function.
pub fn parse_pci_address(name: &str) -> Option<(u32, u32, u32, u32)> {
    let (domain, rest) = name.split_once(':')?;
    let (bus, rest) = rest.split_once(':')?;
    let (slot, func) = rest.split_once('.')?;
    let hex = |s: &str| {
        (!s.is_empty() && s.len() <= 8).then(|| u32::from_str_radix(s, 16).ok()).flatten()
    };
    Some((hex(domain)?, hex(bus)?, hex(slot)?, func.parse().ok().filter(|f| *f < 8)?))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn at(addr: &str) -> PciFacts {
        let (domain, bus, slot, function) = parse_pci_address(addr).unwrap();
        PciFacts { domain, bus, slot, function, ..PciFacts::default() }
    }

    // The examples of systemd.net-naming-scheme(7) and udev-builtin-net_id's header.

    #[test]
    fn onboard_from_firmware_index() {
        // "ID_NET_NAME_ONBOARD=eno1": an onboard Intel NIC with acpi_index 1.
        let f = PciFacts { acpi_index: Some(1), ..at("0000:00:19.0") };
        let c = candidates(&f);
        assert_eq!(c.onboard.as_deref(), Some("eno1"));
        assert_eq!(c.path.as_deref(), Some("enp0s25"));
        assert_eq!(predictable_name(&f).as_deref(), Some("eno1"));
        // SMBIOS's index when ACPI gives none; ACPI's first when both do.
        let f = PciFacts { smbios_index: Some(2), ..at("0000:00:19.0") };
        assert_eq!(predictable_name(&f).as_deref(), Some("eno2"));
        let f = PciFacts { acpi_index: Some(3), smbios_index: Some(2), ..at("0000:00:19.0") };
        assert_eq!(predictable_name(&f).as_deref(), Some("eno3"));
        // Zero, a garbage index and a virtual function get no onboard name.
        for f in [
            PciFacts { acpi_index: Some(0), ..at("0000:00:19.0") },
            PciFacts { acpi_index: Some(65535), ..at("0000:00:19.0") },
            PciFacts { acpi_index: Some(1), virtual_function: true, ..at("0000:00:19.0") },
        ] {
            assert_eq!(candidates(&f).onboard, None, "{f:?}");
            assert_eq!(predictable_name(&f).as_deref(), Some("enp0s25"));
        }
    }

    #[test]
    fn hotplug_slot() {
        // "ID_NET_NAME_SLOT=ens1f0" / "enp19s0f0": function 0 of a two-port card in slot 1.
        let f =
            PciFacts { multifunction: true, hotplug_slot: Some((1, false)), ..at("0000:13:00.0") };
        let c = candidates(&f);
        assert_eq!(c.slot.as_deref(), Some("ens1f0"));
        assert_eq!(c.path.as_deref(), Some("enp19s0f0"));
        assert_eq!(predictable_name(&f).as_deref(), Some("ens1f0"));
        // A single-function device in slot 3 (a virtio NIC on QEMU's i440FX machine).
        let f = PciFacts { hotplug_slot: Some((3, false)), ..at("0000:00:03.0") };
        assert_eq!(predictable_name(&f).as_deref(), Some("ens3"));
        // A bridge's slot only for a device with several functions.
        let f = PciFacts { hotplug_slot: Some((6, true)), ..at("0000:02:00.0") };
        assert_eq!(predictable_name(&f).as_deref(), Some("enp2s0"));
        let f =
            PciFacts { multifunction: true, hotplug_slot: Some((6, true)), ..at("0000:02:00.1") };
        assert_eq!(predictable_name(&f).as_deref(), Some("ens6f1"));
    }

    #[test]
    fn path_with_domain_function_and_port() {
        // "enp2s0" (a NIC at 02:00.0), "enp5s0f1" (the second function), "enP1p1s0"
        // (domain 1), "enp1s0d1" (the second port of a dual-port function).
        assert_eq!(predictable_name(&at("0000:02:00.0")).as_deref(), Some("enp2s0"));
        assert_eq!(predictable_name(&at("0000:05:00.1")).as_deref(), Some("enp5s0f1"));
        assert_eq!(predictable_name(&at("0001:01:00.0")).as_deref(), Some("enP1p1s0"));
        let f = PciFacts { dev_port: 1, ..at("0000:01:00.0") };
        assert_eq!(predictable_name(&f).as_deref(), Some("enp1s0d1"));
        let f = PciFacts { phys_port_name: Some("p0".into()), dev_port: 1, ..at("0000:01:00.0") };
        assert_eq!(predictable_name(&f).as_deref(), Some("enp1s0np0"));
        // The q35 machine's integrated NIC at 00:02.0; slot numbers are decimal in names.
        assert_eq!(predictable_name(&at("0000:00:02.0")).as_deref(), Some("enp0s2"));
        assert_eq!(predictable_name(&at("0000:00:1f.6")).as_deref(), Some("enp0s31f6"));
    }

    #[test]
    fn too_long_falls_through() {
        let f = PciFacts { phys_port_name: Some("pf0vf12345".into()), ..at("0000:81:00.0") };
        assert_eq!(candidates(&f).path.as_deref(), Some("enp129s0npf0vf12345"));
        assert_eq!(predictable_name(&f), None);
    }

    #[test]
    fn pci_addresses() {
        assert_eq!(parse_pci_address("0000:00:03.0"), Some((0, 0, 3, 0)));
        assert_eq!(parse_pci_address("0001:81:1f.7"), Some((1, 0x81, 0x1f, 7)));
        for bad in ["", "virtio0", "0000:00:03", "0000:00:03.8", "0000:zz:03.0", "0000:00:03.x"] {
            assert_eq!(parse_pci_address(bad), None, "{bad}");
        }
    }
}
