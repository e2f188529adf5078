// SPDX-License-Identifier: Apache-2.0
//! The one way keelson replaces a file: write a temporary beside it (same directory, so the
//! rename cannot cross filesystems), set its mode, optionally fsync it, rename it over the
//! target, and optionally fsync the directory so the rename itself survives a power cut.
//! Readers see the old file or the new one, never a torn one. Callers choose the mode and how
//! durable the write must be: a config or a key must survive a crash, a file rewritten at
//! every boot need not pay for two fsyncs.

use std::fs::{File, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// How durable a write is once [`write`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// No fsync: a crash may leave the old file (or, on some filesystems, an empty new one).
    Nothing,
    /// The new file's bytes are on disk before the rename.
    File,
    /// The file, then the directory after the rename: the new name survives a power cut.
    FileAndDir,
}

/// The temporary a write to `path` goes through: hidden, beside it. Directory scans skip
/// dot-names, so a temporary left by a crash is never read as a file of its own.
pub fn tmp_path(path: &Path) -> PathBuf {
    let mut name = std::ffi::OsString::from(".");
    name.push(path.file_name().unwrap_or_default());
    name.push(".keelson-tmp");
    path.with_file_name(name)
}

/// Replace `path` with `data`, mode `mode` exactly (not masked by the umask), as durable as
/// `sync` says. On error the temporary is removed and `path` is unchanged.
pub fn write(path: &Path, data: &[u8], mode: u32, sync: Durability) -> io::Result<()> {
    let tmp = tmp_path(path);
    let result = write_and_rename(&tmp, path, data, mode, sync);
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn write_and_rename(
    tmp: &Path,
    path: &Path,
    data: &[u8],
    mode: u32,
    sync: Durability,
) -> io::Result<()> {
    // O_NOFOLLOW: a symlink planted at the temporary's name is refused, not written through.
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(tmp)?;
    f.write_all(data)?;
    f.set_permissions(Permissions::from_mode(mode))?;
    if sync != Durability::Nothing {
        f.sync_all()?;
    }
    drop(f);
    std::fs::rename(tmp, path)?;
    if sync == Durability::FileAndDir {
        sync_parent(path)?;
    }
    Ok(())
}

/// fsync the directory holding `path`, so a rename into it survives a power cut.
pub fn sync_parent(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_with_the_mode_asked_and_leaves_no_temporary() {
        let dir = std::env::temp_dir().join(format!("keelson-atomic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("a.conf");
        std::fs::write(&file, "old").unwrap();
        for (mode, sync) in [
            (0o600, Durability::Nothing),
            (0o644, Durability::File),
            (0o640, Durability::FileAndDir),
        ] {
            write(&file, b"new", mode, sync).unwrap();
            assert_eq!(std::fs::read_to_string(&file).unwrap(), "new");
            let meta = std::fs::metadata(&file).unwrap();
            assert_eq!(meta.permissions().mode() & 0o7777, mode, "{sync:?}");
            assert!(!tmp_path(&file).exists());
        }
        assert_eq!(tmp_path(&file), dir.join(".a.conf.keelson-tmp"));
        // A symlink at the temporary's name is refused; the target keeps its bytes.
        let elsewhere = dir.join("elsewhere");
        std::os::unix::fs::symlink(&elsewhere, tmp_path(&file)).unwrap();
        assert!(write(&file, b"evil", 0o600, Durability::Nothing).is_err());
        assert!(!elsewhere.exists());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "new");
        // A write into a directory that is not there fails and leaves nothing behind.
        assert!(write(&dir.join("no/such"), b"x", 0o600, Durability::File).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
