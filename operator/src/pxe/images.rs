// SPDX-License-Identifier: Apache-2.0
//! Boot images by version: `DIR/images/<version>/{vmlinuz,initramfs}` and a manifest
//! (`DIR/images/manifest.json`) with each file's size and SHA-256. A file is handed out only
//! while it still matches its digest: it is hashed when first opened and again whenever its
//! inode, size or modification time changed since.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The manifest is read whole; it lists names and digests only.
const MAX_MANIFEST: u64 = 4 << 20;

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("version {0:?}: 1 to 64 of A-Z a-z 0-9 . _ + -, not starting with '.'")]
    BadVersion(String),
    #[error("version {0} exists already")]
    Exists(String),
    #[error("no image version {0}")]
    Unknown(String),
    #[error("{0}: changed since it was added (SHA-256 {1}, recorded {2}); not served")]
    Mismatch(String, String, String),
    #[error("manifest {0}: {1}")]
    Manifest(PathBuf, String),
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
}

/// One of a version's two files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Kernel,
    Initramfs,
}

impl Part {
    pub fn file_name(self) -> &'static str {
        match self {
            Self::Kernel => "vmlinuz",
            Self::Initramfs => "initramfs",
        }
    }

    pub fn from_name(s: &str) -> Option<Self> {
        match s {
            "vmlinuz" => Some(Self::Kernel),
            "initramfs" => Some(Self::Initramfs),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    pub sha256: String,
    pub size: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub kernel: FileEntry,
    pub initramfs: FileEntry,
}

impl Entry {
    fn part(&self, p: Part) -> &FileEntry {
        match p {
            Part::Kernel => &self.kernel,
            Part::Initramfs => &self.initramfs,
        }
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Manifest {
    versions: BTreeMap<String, Entry>,
}

/// What was true of a file when it last hashed right.
type Stamp = (u64, u64, u64, i64, i64);

fn stamp(m: &std::fs::Metadata) -> Stamp {
    (m.dev(), m.ino(), m.size(), m.mtime(), m.mtime_nsec())
}

/// A version name: also a directory name and a URL path segment.
pub fn valid_version(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= 64
        && !v.starts_with('.')
        && v.bytes().all(|c| c.is_ascii_alphanumeric() || b"._+-".contains(&c))
}

#[derive(Debug)]
pub struct Images {
    dir: PathBuf,
    verified: Mutex<HashMap<PathBuf, Stamp>>,
}

fn io(what: &Path, e: std::io::Error) -> ImageError {
    ImageError::Io(base::names::escape(&what.display().to_string(), 256), e)
}

/// Hash from the current position to the end.
fn sha256(r: &mut impl Read) -> std::io::Result<(String, u64)> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 << 10];
    let mut n = 0u64;
    loop {
        let k = r.read(&mut buf)?;
        if k == 0 {
            return Ok((format!("{:x}", h.finalize()), n));
        }
        h.update(&buf[..k]);
        n += k as u64;
    }
}

impl Images {
    /// The images under `data_dir/images`.
    pub fn new(data_dir: &Path) -> Self {
        Self { dir: data_dir.join("images"), verified: Mutex::new(HashMap::new()) }
    }

    fn manifest_path(&self) -> PathBuf {
        self.dir.join("manifest.json")
    }

    fn read_manifest(&self) -> Result<Manifest, ImageError> {
        let p = self.manifest_path();
        let f = match File::open(&p) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Manifest::default()),
            Err(e) => return Err(io(&p, e)),
        };
        let mut text = Vec::new();
        f.take(MAX_MANIFEST + 1).read_to_end(&mut text).map_err(|e| io(&p, e))?;
        if text.len() as u64 > MAX_MANIFEST {
            return Err(ImageError::Manifest(p, "larger than 4 MiB".into()));
        }
        serde_json::from_slice(&text).map_err(|e| ImageError::Manifest(p, e.to_string()))
    }

    /// Every version and its files.
    pub fn list(&self) -> Result<BTreeMap<String, Entry>, ImageError> {
        Ok(self.read_manifest()?.versions)
    }

    /// Copy `kernel` and `initramfs` in as `version`, recording their digests.
    pub fn add(&self, version: &str, kernel: &Path, initramfs: &Path) -> Result<Entry, ImageError> {
        if !valid_version(version) {
            return Err(ImageError::BadVersion(base::names::escape(version, 80)));
        }
        let mut m = self.read_manifest()?;
        if m.versions.contains_key(version) {
            return Err(ImageError::Exists(version.into()));
        }
        let vdir = self.dir.join(version);
        std::fs::create_dir_all(&vdir).map_err(|e| io(&vdir, e))?;
        let copy = |from: &Path, part: Part| -> Result<FileEntry, ImageError> {
            let to = vdir.join(part.file_name());
            let tmp = vdir.join(format!(".{}.tmp", part.file_name()));
            let mut src = File::open(from).map_err(|e| io(from, e))?;
            let mut dst = File::create(&tmp).map_err(|e| io(&tmp, e))?;
            let mut h = Sha256::new();
            let mut buf = vec![0u8; 64 << 10];
            let mut size = 0u64;
            loop {
                let k = src.read(&mut buf).map_err(|e| io(from, e))?;
                if k == 0 {
                    break;
                }
                h.update(&buf[..k]);
                dst.write_all(&buf[..k]).map_err(|e| io(&tmp, e))?;
                size += k as u64;
            }
            dst.sync_all().map_err(|e| io(&tmp, e))?;
            std::fs::rename(&tmp, &to).map_err(|e| io(&to, e))?;
            Ok(FileEntry { sha256: format!("{:x}", h.finalize()), size })
        };
        let entry = Entry {
            kernel: copy(kernel, Part::Kernel)?,
            initramfs: copy(initramfs, Part::Initramfs)?,
        };
        m.versions.insert(version.into(), entry.clone());
        let p = self.manifest_path();
        let tmp = self.dir.join(".manifest.json.tmp");
        let text = serde_json::to_vec_pretty(&m)
            .map_err(|e| ImageError::Manifest(p.clone(), e.to_string()))?;
        std::fs::write(&tmp, text).map_err(|e| io(&tmp, e))?;
        std::fs::rename(&tmp, &p).map_err(|e| io(&p, e))?;
        Ok(entry)
    }

    /// Open a version's file for serving, with its size; refused unless it matches its
    /// recorded digest. The digest is of the opened file, so what is checked is what is sent
    /// (a file changed in place afterwards changes its stamp and is hashed again next time).
    pub fn open(&self, version: &str, part: Part) -> Result<(File, u64), ImageError> {
        if !valid_version(version) {
            return Err(ImageError::BadVersion(base::names::escape(version, 80)));
        }
        let m = self.read_manifest()?;
        let entry = m.versions.get(version).ok_or_else(|| ImageError::Unknown(version.into()))?;
        let want = entry.part(part);
        let p = self.dir.join(version).join(part.file_name());
        let mut f = File::open(&p).map_err(|e| io(&p, e))?;
        let meta = f.metadata().map_err(|e| io(&p, e))?;
        if !meta.is_file() {
            return Err(io(&p, std::io::Error::other("not a regular file")));
        }
        let now = stamp(&meta);
        let known = self.verified.lock().ok().and_then(|v| v.get(&p).copied());
        if known != Some(now) || meta.size() != want.size {
            let (got, _) = sha256(&mut f).map_err(|e| io(&p, e))?;
            f.seek(SeekFrom::Start(0)).map_err(|e| io(&p, e))?;
            if got != want.sha256 || meta.size() != want.size {
                if let Ok(mut v) = self.verified.lock() {
                    v.remove(&p);
                }
                let what = format!("{version}/{}", part.file_name());
                return Err(ImageError::Mismatch(what, got, want.sha256.clone()));
            }
            if let Ok(mut v) = self.verified.lock() {
                v.insert(p, now);
            }
        }
        Ok((f, meta.size()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("keelson-images-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn added_files_are_served_until_they_change() {
        let d = tmp("serve");
        std::fs::write(d.join("k"), b"kernel bytes").unwrap();
        std::fs::write(d.join("i"), b"initramfs bytes").unwrap();
        let images = Images::new(&d);
        let e = images.add("v1.2.3", &d.join("k"), &d.join("i")).unwrap();
        assert_eq!(e.kernel.size, 12);
        assert_eq!(
            e.kernel.sha256,
            format!("{:x}", Sha256::digest(b"kernel bytes")),
            "the digest is SHA-256 of the file"
        );
        assert!(matches!(
            images.add("v1.2.3", &d.join("k"), &d.join("i")),
            Err(ImageError::Exists(_))
        ));
        assert_eq!(images.list().unwrap().keys().collect::<Vec<_>>(), ["v1.2.3"]);
        let (mut f, n) = images.open("v1.2.3", Part::Initramfs).unwrap();
        let mut s = String::new();
        f.read_to_string(&mut s).unwrap();
        assert_eq!((s.as_str(), n), ("initramfs bytes", 15));
        // Same size, other bytes: refused.
        std::fs::write(d.join("images/v1.2.3/initramfs"), b"INITRAMFS BYTES").unwrap();
        assert!(matches!(images.open("v1.2.3", Part::Initramfs), Err(ImageError::Mismatch(..))));
        assert!(images.open("v1.2.3", Part::Kernel).is_ok());
        assert!(matches!(images.open("v9", Part::Kernel), Err(ImageError::Unknown(_))));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn version_names_are_plain() {
        for ok in ["v1.7.0", "1.0+abc", "a_b-c"] {
            assert!(valid_version(ok), "{ok}");
        }
        for bad in ["", "..", ".hidden", "a/b", "a b", "v1\n", &"x".repeat(65)] {
            assert!(!valid_version(bad), "{bad:?}");
        }
    }
}
