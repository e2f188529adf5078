// SPDX-License-Identifier: Apache-2.0
//! The block I/O: the disks under `/sys/block`, what each starts with (GPT, MBR, nothing),
//! the state partition located by reading the GPT ourselves (no partition device node
//! needed), the install, and the state partition as a [`Medium`]. Runs on the state thread
//! only: PID 1's event loop never touches a disk.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::error::StateError;
use super::gpt::{self, Geometry, Guid, Partition};
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

    /// The state partition's byte offset, if the disk has one.
    pub fn state_offset(&self) -> Option<u64> {
        gpt::state_offset(&self.gpt()?, self.geometry)
    }

    /// Write a fresh GPT with the state partition, its slots empty; the partition's offset.
    /// With `wipe`, the first and last MiB are zeroed first (old tables and signatures).
    pub fn install(&self, wipe: bool, disk: Guid, part: Guid) -> Result<u64, StateError> {
        let g = self.geometry;
        let writes = gpt::layout(g, disk, part)?;
        if wipe {
            let mib = 1u64 << 20;
            let end = g.sectors * g.sector;
            self.file.write_all_at(&vec![0u8; mib as usize], 0)?;
            self.file.write_all_at(&vec![0u8; mib as usize], end.saturating_sub(mib))?;
        }
        let mut medium = self.medium(gpt::STATE_OFFSET)?;
        slots::clear(&mut medium)?;
        for (offset, bytes) in writes {
            self.file.write_all_at(&bytes, offset)?;
        }
        self.file.sync_all()?;
        Ok(gpt::STATE_OFFSET)
    }

    /// The state partition at `offset` as a medium (a second handle on the disk).
    pub fn medium(&self, offset: u64) -> std::io::Result<StatePartition> {
        Ok(StatePartition { file: self.file.try_clone()?, offset })
    }
}

/// The state partition: reads and writes relative to its start, bounded to its size.
#[derive(Debug)]
pub struct StatePartition {
    file: File,
    offset: u64,
}

impl StatePartition {
    fn check(&self, offset: u64, len: usize) -> std::io::Result<u64> {
        match offset.checked_add(len as u64) {
            Some(end) if end <= gpt::STATE_BYTES => Ok(self.offset + offset),
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
                Ok(d) => (d.table(), d.state_offset().is_some()),
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
        assert_eq!(d.state_offset(), None);
        let off = d.install(false, Guid::random([1; 16]), Guid::random([2; 16])).unwrap();
        assert_eq!(d.table(), "gpt");
        assert_eq!(d.state_offset(), Some(off));
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
        assert_eq!(d.state_offset(), Some(off));
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
        assert!(d.state_offset().is_some());
        let _ = std::fs::remove_file(path);
    }
}
