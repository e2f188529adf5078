// SPDX-License-Identifier: Apache-2.0
//! Which disk `machine.install` names, and whether keelson may write to it. Pure: decided
//! from the disks as found at boot (see `disk::inventory`).

use net::config::{DiskSelector, InstallConfig};
use serde::Serialize;

/// A whole disk as found at boot.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DiskInfo {
    /// The kernel name (`vda`).
    pub name: String,
    pub size: u64,
    pub model: String,
    pub serial: String,
    pub wwid: String,
    /// `ssd`, `hdd`, `nvme` or `sd`.
    pub disk_type: String,
    pub read_only: bool,
    /// What the disk starts with: `gpt`, `mbr`, or empty (no partition table).
    pub table: String,
    /// It holds keelson's state partition.
    pub state: bool,
}

/// Why an install cannot go ahead.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SelectError {
    #[error("machine.install: neither disk nor diskSelector is given")]
    Nothing,
    #[error("machine.install.disk {0}: no such disk (disks: {1})")]
    NoDisk(String, String),
    #[error("machine.install.diskSelector: no disk matches (disks: {0})")]
    NoMatch(String),
    #[error("machine.install.diskSelector.size {0:?}: not a size (`4GB`, `>= 10GB`, `<= 1TiB`)")]
    BadSize(String),
    #[error("machine.install.disk {0}: read-only")]
    ReadOnly(String),
    #[error("machine.install.disk /dev/{0} already has a partition table ({1}); keelson writes only to a disk without one, or with machine.install.wipe: true")]
    Partitioned(String, String),
}

/// The disk to install on, checked: it exists, is writable, and is blank or to be wiped.
pub fn target<'a>(
    install: &InstallConfig,
    disks: &'a [DiskInfo],
) -> Result<&'a DiskInfo, SelectError> {
    let names = || {
        let n: Vec<&str> = disks.iter().map(|d| d.name.as_str()).collect();
        if n.is_empty() {
            "none found".to_owned()
        } else {
            n.join(", ")
        }
    };
    let disk = match (&install.disk, &install.disk_selector) {
        (Some(path), _) => {
            let name = path.strip_prefix("/dev/").unwrap_or(path);
            disks
                .iter()
                .find(|d| d.name == name)
                .ok_or_else(|| SelectError::NoDisk(net::names::escape(path, 64), names()))?
        }
        (None, Some(sel)) => {
            let mut found = None;
            for d in disks {
                if matches(sel, d)? {
                    found = Some(d);
                    break;
                }
            }
            found.ok_or_else(|| SelectError::NoMatch(names()))?
        }
        (None, None) => return Err(SelectError::Nothing),
    };
    if disk.read_only {
        return Err(SelectError::ReadOnly(disk.name.clone()));
    }
    if !disk.table.is_empty() && !install.wipe {
        return Err(SelectError::Partitioned(disk.name.clone(), disk.table.clone()));
    }
    Ok(disk)
}

/// Does `d` match every field the selector gives?
pub fn matches(sel: &DiskSelector, d: &DiskInfo) -> Result<bool, SelectError> {
    let text = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| glob(w, have));
    let size_ok = match &sel.size {
        Some(s) => size_matches(s, d.size)?,
        None => true,
    };
    Ok(size_ok
        && text(&sel.name, &d.name)
        && text(&sel.model, &d.model)
        && text(&sel.serial, &d.serial)
        && text(&sel.wwid, &d.wwid)
        && text(&sel.disk_type, &d.disk_type))
}

/// `*` matches any run of characters; everything else itself.
fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

/// `>= 10GB` and the like against `size` bytes.
fn size_matches(expr: &str, size: u64) -> Result<bool, SelectError> {
    let bad = || SelectError::BadSize(net::names::escape(expr, 64));
    let e = expr.trim();
    let (op, rest) = ["<=", ">=", "==", "<", ">"]
        .iter()
        .find_map(|op| e.strip_prefix(op).map(|r| (*op, r)))
        .unwrap_or(("==", e));
    let want = parse_size(rest.trim()).ok_or_else(bad)?;
    Ok(match op {
        "<=" => size <= want,
        ">=" => size >= want,
        "<" => size < want,
        ">" => size > want,
        _ => size == want,
    })
}

/// `4GB` (10^9), `4GiB` (2^30), `512MB`, `1TB`, plain bytes.
fn parse_size(s: &str) -> Option<u64> {
    let split = s.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let num: f64 = num.parse().ok()?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" | "k" => 1_000,
        "mb" | "m" => 1_000_000,
        "gb" | "g" => 1_000_000_000,
        "tb" | "t" => 1_000_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        _ => return None,
    };
    (num.is_finite() && num >= 0.0).then_some((num * mult as f64) as u64)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn disk(name: &str, size: u64, table: &str) -> DiskInfo {
        DiskInfo {
            name: name.into(),
            size,
            model: "QEMU HARDDISK".into(),
            disk_type: "hdd".into(),
            table: table.into(),
            ..DiskInfo::default()
        }
    }

    #[test]
    fn by_path_by_name_and_refusals() {
        let disks = [disk("vda", 64 << 20, ""), disk("vdb", 1 << 30, "gpt")];
        let by = |d: &str, wipe| {
            let mut i = InstallConfig::default();
            i.disk = Some(d.into());
            i.wipe = wipe;
            i
        };
        assert_eq!(target(&by("/dev/vda", false), &disks).map(|d| &d.name[..]), Ok("vda"));
        assert_eq!(target(&by("vda", false), &disks).map(|d| &d.name[..]), Ok("vda"));
        assert_eq!(
            target(&by("/dev/vdb", false), &disks),
            Err(SelectError::Partitioned("vdb".into(), "gpt".into()))
        );
        assert!(target(&by("/dev/vdb", true), &disks).is_ok());
        assert!(matches!(target(&by("/dev/sdz", false), &disks), Err(SelectError::NoDisk(..))));
        assert_eq!(target(&InstallConfig::default(), &disks), Err(SelectError::Nothing));
        let msg = SelectError::Partitioned("vdb".into(), "gpt".into()).to_string();
        assert!(!msg.contains('\n'));
    }

    #[test]
    fn selectors() {
        let disks = [disk("vda", 64 << 20, ""), disk("vdb", 20_000_000_000, "")];
        let sel = |f: &dyn Fn(&mut DiskSelector)| {
            let mut s = DiskSelector::default();
            f(&mut s);
            let mut i = InstallConfig::default();
            i.disk_selector = Some(s);
            i
        };
        let big = sel(&|s| s.size = Some(">= 10GB".into()));
        assert_eq!(target(&big, &disks).map(|d| &d.name[..]), Ok("vdb"));
        let model = sel(&|s| s.model = Some("QEMU*".into()));
        assert_eq!(target(&model, &disks).map(|d| &d.name[..]), Ok("vda"));
        let exact = sel(&|s| s.size = Some("64MiB".into()));
        assert_eq!(target(&exact, &disks).map(|d| &d.name[..]), Ok("vda"));
        let none = sel(&|s| s.disk_type = Some("nvme".into()));
        assert!(matches!(target(&none, &disks), Err(SelectError::NoMatch(_))));
        let bad = sel(&|s| s.size = Some(">= lots".into()));
        assert!(matches!(target(&bad, &disks), Err(SelectError::BadSize(_))));
        assert!(glob("*HARD*", "QEMU HARDDISK") && !glob("SAMS*", "QEMU HARDDISK"));
    }
}
