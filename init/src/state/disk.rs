// SPDX-License-Identifier: Apache-2.0
//! The block I/O: the disks under `/sys/block`, what each starts with (GPT, MBR, nothing),
//! the state partition located by reading the GPT ourselves (no partition device node
//! needed), the install, and the state partition as a [`Medium`]. Runs on the state thread
//! only: PID 1's event loop never touches a disk.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::error::StateError;
use super::gpt::{self, Extent, Geometry, GptError, Guid, Partition};
use super::select::DiskInfo;
use super::slots::{self, Medium};

/// Most disks looked at.
const MAX_DISKS: usize = 64;
const ATTR_LIMIT: u64 = 4096;

fn attr(path: &Path) -> String {
    net::bounded::read_text(path, ATTR_LIMIT).map(|t| t.trim().to_owned()).unwrap_or_default()
}

/// Whole disks worth looking at: not loop, RAM, optical, device-mapper or MD devices.
pub fn names(sys_block: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(sys_block)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| {
                    !["loop", "ram", "zram", "sr", "dm-", "md", "fd", "nbd"]
                        .iter()
                        .any(|p| n.starts_with(p))
                })
                .take(MAX_DISKS)
                .collect()
        })
        .unwrap_or_default();
    net::sort::ascending(&mut names);
    names
}

/// A disk opened for reading (and writing, at install).
#[derive(Debug)]
pub struct Disk {
    pub file: File,
    pub geometry: Geometry,
}

impl Disk {
    /// Open `/dev/NAME` with its geometry from sysfs.
    pub fn open(dev: &Path, sys_block: &Path, name: &str, write: bool) -> std::io::Result<Self> {
        let sys = sys_block.join(name);
        let sector: u64 = attr(&sys.join("queue/logical_block_size")).parse().unwrap_or(512);
        // `size` counts 512-byte units whatever the logical block size.
        let bytes = attr(&sys.join("size")).parse::<u64>().unwrap_or(0).saturating_mul(512);
        let file = OpenOptions::new()
            .read(true)
            .write(write)
            .custom_flags(libc::O_CLOEXEC)
            .open(dev.join(name))?;
        let sectors = bytes.checked_div(sector).unwrap_or(0);
        Ok(Self { file, geometry: Geometry { sector, sectors } })
    }

    fn read(&self, offset: u64, len: u64) -> std::io::Result<Vec<u8>> {
        let mut buf = vec![0u8; len as usize];
        self.file.read_exact_at(&mut buf, offset)?;
        Ok(buf)
    }

    /// The partitions of a GPT (primary, else backup), `None` without a valid one.
    pub fn gpt(&self) -> Option<Vec<Partition>> {
        let g = self.geometry;
        if g.sectors < 3 {
            return None;
        }
        for lba in [1, g.sectors - 1] {
            let Ok(sector) = self.read(lba * g.sector, g.sector) else { continue };
            let Ok(h) = gpt::parse_header(&sector, lba) else { continue };
            let Ok(entries) = self.read(h.entries_lba.saturating_mul(g.sector), h.entries_bytes())
            else {
                continue;
            };
            if let Ok(parts) = gpt::parse_entries(&h, &entries) {
                return Some(parts);
            }
        }
        None
    }

    /// `gpt`, `mbr`, or empty for a disk without a partition table.
    pub fn table(&self) -> String {
        if self.gpt().is_some() {
            return "gpt".into();
        }
        match self.read(0, 512) {
            Ok(lba0) if gpt::mbr_in_use(&lba0) => "mbr".into(),
            _ => String::new(),
        }
    }

    /// The state partition's extent: `None` if the disk has none, an error if its entry
    /// does not lie within the disk or is too small for the slots.
    pub fn state_extent(&self) -> Option<Result<Extent, GptError>> {
        let p = self.gpt()?.into_iter().find(Partition::is_state)?;
        Some(gpt::partition_extent(&p, self.geometry))
    }

    /// Write a fresh GPT with the state partition, its slots empty; the partition's extent.
    /// With `wipe`, the first and last MiB are zeroed first (old tables and signatures).
    pub fn install(&self, wipe: bool, disk: Guid, part: Guid) -> Result<Extent, StateError> {
        let g = self.geometry;
        let writes = gpt::layout(g, disk, part)?;
        let extent = Extent { offset: gpt::STATE_OFFSET, len: gpt::STATE_BYTES };
        if wipe {
            let mib = 1u64 << 20;
            let end = g.sectors * g.sector;
            self.file.write_all_at(&vec![0u8; mib as usize], 0)?;
            self.file.write_all_at(&vec![0u8; mib as usize], end.saturating_sub(mib))?;
        }
        let mut medium = self.medium(extent)?;
        slots::clear(&mut medium)?;
        for (offset, bytes) in writes {
            self.file.write_all_at(&bytes, offset)?;
        }
        self.file.sync_all()?;
        Ok(extent)
    }

    /// The state partition at `extent` as a medium (a second handle on the disk).
    pub fn medium(&self, extent: Extent) -> std::io::Result<StatePartition> {
        Ok(StatePartition { file: self.file.try_clone()?, extent })
    }
}

/// Open the state partition of `/dev/NAME` for reading and writing: refused (with the
/// reason) when the disk has none or its partition is too small for the slots.
pub fn open_state(dev: &Path, sys_block: &Path, name: &str) -> Result<StatePartition, StateError> {
    let d = Disk::open(dev, sys_block, name, true)?;
    let extent = d.state_extent().ok_or_else(|| std::io::Error::other("no state partition"))??;
    Ok(d.medium(extent)?)
}

/// The state partition: reads and writes relative to its start, bounded to its real extent
/// (never past its end, whatever the slots ask for).
#[derive(Debug)]
pub struct StatePartition {
    file: File,
    extent: Extent,
}

impl StatePartition {
    fn check(&self, offset: u64, len: usize) -> std::io::Result<u64> {
        match offset.checked_add(len as u64) {
            Some(end) if end <= self.extent.len => Ok(self.extent.offset + offset),
            _ => Err(std::io::Error::other("outside the state partition")),
        }
    }
}

impl Medium for StatePartition {
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        let at = self.check(offset, buf.len())?;
        self.file.read_exact_at(buf, at)
    }

    fn write_at(&mut self, offset: u64, buf: &[u8]) -> std::io::Result<()> {
        let at = self.check(offset, buf.len())?;
        self.file.write_all_at(buf, at)
    }

    fn sync(&mut self) -> std::io::Result<()> {
        // fdatasync on a block device writes back its page cache and flushes the disk's
        // volatile write cache.
        self.file.sync_data()
    }
}

/// Every disk with what `machine.install` needs to know of it.
pub fn inventory(dev: &Path, sys_block: &Path) -> Vec<DiskInfo> {
    names(sys_block)
        .into_iter()
        .map(|name| {
            let sys: PathBuf = sys_block.join(&name);
            let opened = Disk::open(dev, sys_block, &name, false);
            let (table, state) = match &opened {
                // A state partition too small to use still counts as found: the boot then
                // says why it is not used, instead of "no state partition".
                Ok(d) => (d.table(), d.state_extent().is_some()),
                Err(_) => (String::new(), false),
            };
            let target =
                std::fs::read_link(&sys).map(|p| p.display().to_string()).unwrap_or_default();
            let disk_type = if name.starts_with("nvme") {
                "nvme"
            } else if name.starts_with("mmcblk") || target.contains("/mmc") {
                "sd"
            } else if attr(&sys.join("queue/rotational")) == "1" {
                "hdd"
            } else {
                "ssd"
            };
            DiskInfo {
                size: attr(&sys.join("size")).parse::<u64>().unwrap_or(0).saturating_mul(512),
                model: net::names::escape(&attr(&sys.join("device/model")), 64),
                serial: net::names::escape(&attr(&sys.join("device/serial")), 64),
                wwid: net::names::escape(&attr(&sys.join("wwid")), 128),
                disk_type: disk_type.into(),
                read_only: attr(&sys.join("ro")) == "1",
                table,
                state,
                name,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A sparse image file standing in for a disk.
    fn image(name: &str) -> (PathBuf, Disk) {
        let path = std::env::temp_dir().join(format!("keelson-disk-{name}-{}", std::process::id()));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        file.set_len(64 << 20).unwrap();
        let geometry = Geometry { sector: 512, sectors: (64 << 20) / 512 };
        (path, Disk { file, geometry })
    }

    #[test]
    fn install_then_find_then_store_and_load() {
        let (path, d) = image("install");
        assert_eq!(d.table(), "");
        assert_eq!(d.state_extent(), None);
        let off = d.install(false, Guid::random([1; 16]), Guid::random([2; 16])).unwrap();
        assert_eq!(d.table(), "gpt");
        assert_eq!(d.state_extent(), Some(Ok(off)));
        let mut m = d.medium(off).unwrap();
        assert_eq!(slots::load(&mut m).unwrap(), None);
        let mut files = slots::Files::new();
        files.insert("config.yaml".into(), b"version: v1alpha1\n".to_vec());
        let at = slots::store(&mut m, None, &files).unwrap();
        let got = slots::load(&mut m).unwrap().unwrap();
        assert_eq!((got.slot, got.generation, got.files), (at.0, at.1, files));
        // The medium refuses to reach outside the partition.
        assert!(m.write_at(gpt::STATE_BYTES - 1, &[0, 0]).is_err());
        // A damaged primary header: the backup still finds the partition.
        d.file.write_all_at(&[0u8; 8], 512).unwrap();
        assert_eq!(d.state_extent(), Some(Ok(off)));
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn an_mbr_disk_is_partitioned_and_wipe_replaces_it() {
        let (path, d) = image("mbr");
        let mut lba0 = [0u8; 512];
        lba0[446 + 4] = 0x83;
        lba0[510] = 0x55;
        lba0[511] = 0xAA;
        d.file.write_all_at(&lba0, 0).unwrap();
        assert_eq!(d.table(), "mbr");
        d.install(true, Guid::random([3; 16]), Guid::random([4; 16])).unwrap();
        assert_eq!(d.table(), "gpt");
        assert!(matches!(d.state_extent(), Some(Ok(_))));
        let _ = std::fs::remove_file(path);
    }

    /// On a disk image: a state at generation 2^64 − 1, then one more write. The next boot
    /// (a fresh open and load) reads the newer one, generation 0.
    #[test]
    fn the_generation_after_the_last_is_read_back_as_newest() {
        let (path, d) = image("wrap");
        let extent = d.install(false, Guid::random([6; 16]), Guid::random([7; 16])).unwrap();
        let mut m = d.medium(extent).unwrap();
        let mut old = slots::Files::new();
        old.insert("config.yaml".into(), b"# old\n".to_vec());
        let top = slots::store(&mut m, Some((0, u64::MAX - 1)), &old).unwrap();
        let mut new = old.clone();
        new.insert("node-id".into(), b"kept".to_vec());
        slots::store(&mut m, Some(top), &new).unwrap();
        drop(m);
        let mut reopened = d.medium(d.state_extent().unwrap().unwrap()).unwrap();
        let got = slots::load(&mut reopened).unwrap().unwrap();
        assert_eq!((got.slot, got.generation), (0, 0));
        assert_eq!(got.files, new);
        let _ = std::fs::remove_file(path);
    }

    const SENTINEL: u8 = 0xA5;

    /// A GPT (written as another tool would) with a 4 KiB state partition at LBA 2048 and a
    /// sentinel partition right after it, filled with a pattern, up to 48 MiB.
    fn small_state_disk(name: &str) -> (PathBuf, Disk, std::ops::Range<u64>) {
        let (path, d) = image(name);
        let part = |type_guid, first_lba, last_lba, name: &str| Partition {
            type_guid,
            unique: Guid::random([first_lba as u8; 16]),
            first_lba,
            last_lba,
            name: name.into(),
        };
        let parts = [
            part(gpt::STATE_TYPE, 2048, 2055, gpt::STATE_LABEL),
            part(Guid::random([0x0f; 16]), 2056, (48 << 20) / 512 - 1, "sentinel"),
        ];
        for (at, bytes) in gpt::table(d.geometry, Guid::random([5; 16]), &parts) {
            d.file.write_all_at(&bytes, at).unwrap();
        }
        let sentinel = 2056 * 512..48 << 20;
        d.file
            .write_all_at(&vec![SENTINEL; (sentinel.end - sentinel.start) as usize], sentinel.start)
            .unwrap();
        (path, d, sentinel)
    }

    fn sentinel_intact(d: &Disk, r: &std::ops::Range<u64>) -> bool {
        let mut buf = vec![0u8; (r.end - r.start) as usize];
        d.file.read_exact_at(&mut buf, r.start).unwrap();
        buf.iter().all(|b| *b == SENTINEL)
    }

    /// The partition's extent comes from its GPT entry: one smaller than the slots need is
    /// refused with the reason, and is still found (so the boot can say why it is not used).
    #[test]
    fn a_state_partition_smaller_than_the_slots_is_refused() {
        let (path, d, sentinel) = small_state_disk("small");
        assert_eq!(d.table(), "gpt");
        let got = d.state_extent();
        assert!(matches!(got, Some(Err(GptError::PartitionTooSmall(4096, 2048, 2055)))), "{got:?}");
        // Opened as the boot opens it (by name under /dev and /sys/block), the same refusal,
        // and the disk still counts as holding a state partition.
        let root = std::env::temp_dir().join(format!("keelson-disk-root-{}", std::process::id()));
        let (dev, sys) = (root.join("dev"), root.join("sys/block"));
        std::fs::create_dir_all(sys.join("vdz/queue")).unwrap();
        std::fs::create_dir_all(&dev).unwrap();
        std::fs::copy(&path, dev.join("vdz")).unwrap();
        std::fs::write(sys.join("vdz/size"), format!("{}\n", (64u64 << 20) / 512)).unwrap();
        std::fs::write(sys.join("vdz/queue/logical_block_size"), "512\n").unwrap();
        let e = open_state(&dev, &sys, "vdz").unwrap_err().to_string();
        assert!(
            e.contains("the state partition is too small: 4096 bytes (LBA 2048..=2055)"),
            "{e}"
        );
        let inv = inventory(&dev, &sys);
        assert_eq!(
            (inv[0].name.as_str(), inv[0].table.as_str(), inv[0].state),
            ("vdz", "gpt", true)
        );
        let copy = Disk::open(&dev, &sys, "vdz", false).unwrap();
        assert!(sentinel_intact(&copy, &sentinel));
        let _ = std::fs::remove_dir_all(root);
        let _ = std::fs::remove_file(path);
    }

    /// Even handed a partition smaller than the slots, the medium never writes past its end:
    /// a store fails and the next partition keeps its bytes.
    #[test]
    fn the_medium_stops_at_the_partitions_end() {
        let (path, d, sentinel) = small_state_disk("bounded");
        let mut m = d.medium(Extent { offset: 2048 * 512, len: 4096 }).unwrap();
        let mut files = slots::Files::new();
        files.insert("config.yaml".into(), b"version: v1alpha1\n".to_vec());
        assert!(slots::store(&mut m, None, &files).is_err());
        assert!(slots::store(&mut m, Some((0, 1)), &files).is_err());
        assert!(m.write_at(4095, &[0, 0]).is_err());
        assert!(sentinel_intact(&d, &sentinel));
        let _ = std::fs::remove_file(path);
    }
}
