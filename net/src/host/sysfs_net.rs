// SPDX-License-Identifier: Apache-2.0
//! What sysfs says about a network device's hardware: its driver, bus path and PCI ID for
//! [`LinkStatus`](crate::resource::LinkStatus), and the facts its predictable name is computed
//! from ([`crate::ifnames`]). Every read is bounded; a missing attribute is just absent.

use std::fs;
use std::path::{Path, PathBuf};

use crate::ifnames::{parse_pci_address, PciFacts};

/// sysfs attributes are one short line.
const ATTR_LIMIT: u64 = 4096;
/// How far up the device tree a PCI ancestor is looked for (virtio: one level).
const PARENT_DEPTH: usize = 8;
/// Hotplug slots looked at.
const SLOTS_MAX: usize = 4096;
/// `name_assign_type`: the kernel enumerated the name (`eth%d`).
const NET_NAME_ENUM: &str = "1";

/// Hardware facts of one link.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The bound driver's name.
    pub driver: String,
    /// The PCI address, else the device's sysfs name.
    pub bus_path: String,
    /// `VVVV:DDDD`, upper-case hex, for PCI devices.
    pub pci_id: String,
}

fn attr(path: &Path) -> Option<String> {
    base::bounded::read_text(path, ATTR_LIMIT).ok().map(|s| s.trim().to_owned())
}

fn parse_int(text: &str) -> Option<u64> {
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// The PCI device at or above `dev` (a canonical sysfs path), if any.
fn pci_ancestor(dev: &Path) -> Option<PathBuf> {
    dev.ancestors().take(PARENT_DEPTH).find(|p| is_pci(p)).map(Path::to_path_buf)
}

fn is_pci(p: &Path) -> bool {
    p.file_name().and_then(|n| n.to_str()).and_then(parse_pci_address).is_some()
        && fs::read_link(p.join("subsystem")).is_ok_and(|s| s.ends_with("bus/pci"))
}

fn name_of(p: &Path) -> String {
    p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// Driver, bus path and PCI ID of link `name` under `sys` (normally `/sys`); empty fields
/// for a link without a device.
pub fn device_info(sys: &Path, name: &str) -> DeviceInfo {
    let link = sys.join("class/net").join(name).join("device");
    let Ok(dev) = fs::canonicalize(&link) else { return DeviceInfo::default() };
    let driver = fs::read_link(link.join("driver")).ok().map(|p| name_of(&p)).unwrap_or_default();
    let pci = pci_ancestor(&dev);
    let bus_path = name_of(pci.as_deref().unwrap_or(&dev));
    let pci_id = pci
        .and_then(|p| {
            let hex = |a: &str| attr(&p.join(a)).and_then(|v| parse_int(&v));
            Some(format!("{:04X}:{:04X}", hex("vendor")?, hex("device")?))
        })
        .unwrap_or_default();
    DeviceInfo { driver, bus_path, pci_id }
}

/// The facts `net_id` names link `name` from, when it is a physical Ethernet link on PCI
/// whose name the kernel enumerated (`eth0`); `None` for any other (a name someone chose, a
/// virtual link, a USB or platform device).
pub fn rename_facts(sys: &Path, name: &str) -> Option<PciFacts> {
    let net = sys.join("class/net").join(name);
    if attr(&net.join("name_assign_type")).as_deref() != Some(NET_NAME_ENUM) {
        return None;
    }
    pci_facts(sys, name)
}

/// [`rename_facts`] whoever named the link (for comparing with udev after it renamed it).
pub fn pci_facts(sys: &Path, name: &str) -> Option<PciFacts> {
    let net = sys.join("class/net").join(name);
    if attr(&net.join("type")).as_deref() != Some("1") {
        return None;
    }
    let dev = fs::canonicalize(net.join("device")).ok()?;
    let pci = pci_ancestor(&dev)?;
    let (domain, bus, slot, function) = parse_pci_address(&name_of(&pci))?;
    let index = |a: &str| attr(&pci.join(a)).and_then(|v| parse_int(&v));
    // Header type, byte 0x0e of the config space: bit 7 says "several functions".
    let multifunction = base::bounded::read_file(&pci.join("config"), 4096)
        .ok()
        .and_then(|c| c.get(0x0e).copied())
        .is_some_and(|h| h & 0x80 != 0);
    Some(PciFacts {
        domain,
        bus,
        slot,
        function,
        multifunction,
        virtual_function: pci.join("physfn").exists(),
        acpi_index: index("acpi_index"),
        smbios_index: index("index"),
        hotplug_slot: hotplug_slot(sys, &pci),
        dev_port: attr(&net.join("dev_port"))
            .and_then(|v| parse_int(&v))
            .map_or(0, |p| u32::try_from(p).unwrap_or(0)),
        phys_port_name: attr(&net.join("phys_port_name")).filter(|n| {
            !n.is_empty() && n.len() <= 15 && n.bytes().all(|b| b.is_ascii_alphanumeric())
        }),
    })
}

/// The hotplug slot of the PCI device at `pci`, or of the nearest PCI bridge above it: the
/// slot whose `address` (`dddd:bb:ss`) is the device's address without its function.
fn hotplug_slot(sys: &Path, pci: &Path) -> Option<(u32, bool)> {
    let slots: Vec<(u32, String)> = fs::read_dir(sys.join("bus/pci/slots"))
        .ok()?
        .flatten()
        .take(SLOTS_MAX)
        .filter_map(|e| {
            let n: u32 = e.file_name().to_str()?.parse().ok().filter(|n| *n > 0)?;
            Some((n, attr(&e.path().join("address"))?))
        })
        .collect();
    for (level, dev) in pci.ancestors().take(PARENT_DEPTH).enumerate() {
        if !is_pci(dev) {
            break;
        }
        let name = name_of(dev);
        let Some((addr, _)) = name.rsplit_once('.') else { break };
        if let Some((n, _)) = slots.iter().find(|(_, a)| a == addr) {
            return Some((*n, level > 0));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::symlink;

    /// A sysfs tree: a virtio NIC at 0000:00:03.0 in hotplug slot 3 (QEMU's i440FX), and an
    /// e1000 at 0000:01:00.0 behind a bridge at 0000:00:1c.0 that has slot 6.
    fn tree() -> PathBuf {
        let root = std::env::temp_dir().join(format!("keelson-sysfs-net-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let mk = |p: &str| {
            let d = root.join(p);
            fs::create_dir_all(&d).unwrap();
            d
        };
        mk("bus/pci");
        let pci = |p: &str, vendor: &str, device: &str, header: u8| {
            let d = mk(p);
            symlink(root.join("bus/pci"), d.join("subsystem")).unwrap();
            fs::write(d.join("vendor"), format!("{vendor}\n")).unwrap();
            fs::write(d.join("device"), format!("{device}\n")).unwrap();
            let mut config = vec![0u8; 64];
            config[0x0e] = header;
            fs::write(d.join("config"), config).unwrap();
            d
        };
        let virtio_pci = pci("devices/pci0000:00/0000:00:03.0", "0x1af4", "0x1000", 0);
        let virtio = mk("devices/pci0000:00/0000:00:03.0/virtio0");
        mk("bus/virtio/drivers/virtio_net");
        symlink(root.join("bus/virtio/drivers/virtio_net"), virtio.join("driver")).unwrap();
        pci("devices/pci0000:00/0000:00:1c.0", "0x8086", "0x2448", 1);
        let e1000 = pci("devices/pci0000:00/0000:00:1c.0/0000:01:00.0", "0x8086", "0x100e", 0);
        for (n, addr) in [("3", "0000:00:03"), ("6", "0000:00:1c"), ("0", "0000:00:05")] {
            let s = mk(&format!("bus/pci/slots/{n}"));
            fs::write(s.join("address"), format!("{addr}\n")).unwrap();
        }
        for (name, dev, assign) in
            [("eth0", &virtio, "1"), ("eth1", &e1000, "1"), ("x", &e1000, "3")]
        {
            let n = mk(&format!("class/net/{name}"));
            symlink(dev, n.join("device")).unwrap();
            fs::write(n.join("name_assign_type"), format!("{assign}\n")).unwrap();
            fs::write(n.join("type"), "1\n").unwrap();
            fs::write(n.join("dev_port"), "0\n").unwrap();
        }
        mk("class/net/lo");
        let _ = virtio_pci;
        root
    }

    #[test]
    fn device_info_and_names() {
        let root = tree();
        let info = device_info(&root, "eth0");
        assert_eq!(info.driver, "virtio_net");
        assert_eq!(info.bus_path, "0000:00:03.0");
        assert_eq!(info.pci_id, "1AF4:1000");
        assert_eq!(device_info(&root, "lo"), DeviceInfo::default());

        let f = rename_facts(&root, "eth0").unwrap();
        assert_eq!((f.bus, f.slot, f.function), (0, 3, 0));
        assert_eq!(f.hotplug_slot, Some((3, false)));
        assert_eq!(crate::ifnames::predictable_name(&f).as_deref(), Some("ens3"));

        // Behind a bridge with a slot: single function, so the path name.
        let f = rename_facts(&root, "eth1").unwrap();
        assert_eq!(f.hotplug_slot, Some((6, true)));
        assert_eq!(crate::ifnames::predictable_name(&f).as_deref(), Some("enp1s0"));
        assert_eq!(device_info(&root, "eth1").pci_id, "8086:100E");

        // A name someone chose is kept; a link without a device has no facts.
        assert_eq!(rename_facts(&root, "x"), None);
        assert_eq!(rename_facts(&root, "lo"), None);
        fs::remove_dir_all(&root).unwrap();
    }
}
