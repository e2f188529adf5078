// SPDX-License-Identifier: Apache-2.0
//! `keelson kubeconfig [PATH] [NODE OPTIONS]`: the admin kubeconfig of a control-plane node
//! (gRPC `Kubeconfig`), written to PATH (default `./kubeconfig`) with mode 0600. The node
//! sends it as Talos does: a `.tar.gz` holding one file, `kubeconfig`, in `common.Data`
//! chunks; this reads Talos's compressed archives as well as keelson's.
//! (talosctl merges it into `~/.kube/config`; this writes the file only.)

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::PathBuf;
use std::process::ExitCode;

use talos_api::common::Data;
use talos_api::google::Empty;

use crate::connect::{self, Common};
use crate::rpc::Channel;

/// The most archive bytes taken from a node (a kubeconfig is a few KiB).
const MAX_ARCHIVE: usize = 1 << 20;
/// The most bytes the archive may inflate to.
const MAX_INFLATED: usize = 4 << 20;

/// Why an archive could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ArchiveError {
    /// Not gzip, or a gzip this does not read.
    #[error("not a gzip archive: {0}")]
    Gzip(&'static str),
    /// The deflate stream is broken or too large.
    #[error("the archive does not inflate: {0}")]
    Inflate(String),
    /// No `kubeconfig` file in the tar.
    #[error("no kubeconfig file in the archive")]
    Missing,
    /// A tar header that does not read.
    #[error("a broken tar header")]
    Tar,
}

/// `keelson kubeconfig`.
pub fn main(raw: Vec<OsString>) -> ExitCode {
    crate::client::finish("kubeconfig", run(raw))
}

fn run(raw: Vec<OsString>) -> Result<(), String> {
    let mut p = lexopt::Parser::from_args(raw);
    let mut common = Common::default();
    let mut path = None;
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        if let Some(opt) = connect::option(&arg) {
            common.set(opt, &mut p)?;
            continue;
        }
        match arg {
            lexopt::Arg::Value(v) if path.is_none() => path = Some(PathBuf::from(v)),
            _ => return Err(arg.unexpected().to_string()),
        }
    }
    let path = path.unwrap_or_else(|| PathBuf::from("kubeconfig"));
    let targets = common.targets()?;
    let [target] = targets.as_slice() else {
        return Err("one node at a time (-n NODE)".into());
    };
    let mut archive = Vec::new();
    Channel::connect(target, false)
        .and_then(|mut c| {
            c.call("/machine.MachineService/Kubeconfig", &Empty {}, MAX_ARCHIVE, &mut |d: Data| {
                if archive.len() + d.bytes.len() > MAX_ARCHIVE {
                    return Err(format!("the archive exceeds {MAX_ARCHIVE} bytes"));
                }
                archive.extend_from_slice(&d.bytes);
                Ok(())
            })
        })
        .map_err(|e| format!("{}: {e}", target.name()))?;
    let text = extract(&archive).map_err(|e| e.to_string())?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    // An existing file keeps its mode on open: it holds a key now.
    f.set_permissions(std::fs::Permissions::from_mode(0o600))
        .and_then(|()| f.write_all(&text))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    println!("kubeconfig written to {}", path.display());
    Ok(())
}

/// The `kubeconfig` file of a `.tar.gz`.
pub fn extract(archive: &[u8]) -> Result<Vec<u8>, ArchiveError> {
    let tar = gunzip(archive)?;
    let mut at = 0;
    while let Some(h) = tar.get(at..at + 512) {
        if h.iter().all(|b| *b == 0) {
            break;
        }
        let name_end = h.iter().take(100).position(|b| *b == 0).unwrap_or(100);
        let name = h.get(..name_end).ok_or(ArchiveError::Tar)?;
        let size = octal(h.get(124..136).ok_or(ArchiveError::Tar)?)?;
        let kind = h.get(156).copied().unwrap_or(0);
        let body = at + 512;
        if (name == b"kubeconfig" || name == b"./kubeconfig") && matches!(kind, 0 | b'0') {
            return tar.get(body..body + size).map(<[u8]>::to_vec).ok_or(ArchiveError::Tar);
        }
        at = body + size.div_ceil(512) * 512;
    }
    Err(ArchiveError::Missing)
}

fn octal(field: &[u8]) -> Result<usize, ArchiveError> {
    let digits: String =
        field.iter().map(|b| *b as char).filter(|c| !c.is_whitespace() && *c != '\0').collect();
    usize::from_str_radix(&digits, 8).map_err(|_| ArchiveError::Tar)
}

/// RFC 1952: the header (with its optional fields), the deflate stream, bounded.
fn gunzip(gz: &[u8]) -> Result<Vec<u8>, ArchiveError> {
    let h = gz.get(..10).ok_or(ArchiveError::Gzip("too short"))?;
    if h[..3] != [0x1f, 0x8b, 8] {
        return Err(ArchiveError::Gzip("bad magic"));
    }
    let flags = h[3];
    let mut at = 10;
    if flags & 4 != 0 {
        let x = gz.get(at..at + 2).ok_or(ArchiveError::Gzip("truncated"))?;
        at += 2 + usize::from(u16::from_le_bytes([x[0], x[1]]));
    }
    for flag in [8u8, 16] {
        if flags & flag != 0 {
            let rest = gz.get(at..).ok_or(ArchiveError::Gzip("truncated"))?;
            at += rest.iter().position(|b| *b == 0).ok_or(ArchiveError::Gzip("truncated"))? + 1;
        }
    }
    if flags & 2 != 0 {
        at += 2;
    }
    let stream = gz.get(at..).ok_or(ArchiveError::Gzip("truncated"))?;
    miniz_oxide::inflate::decompress_to_vec_with_limit(stream, MAX_INFLATED)
        .map_err(|e| ArchiveError::Inflate(format!("{:?}", e.status)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `printf 'hello\n' > kubeconfig; tar cf - kubeconfig | gzip -6` (GNU tar): a compressed
    /// archive as Talos sends, not ours.
    const TALOS_LIKE: &str = "H4sIAAAAAAAAA+3OMQrCQBAF0K09xR5hA4n3SSRqMLgQk/u72igWikUQ4b3mD/OnmNPS9bt83g+HsJpUbOv6nsVr3tqnueyrqmlSiGm9lx6Wy9xOMYYp5/nd3af+Tx37ccybX38BAAAAAAAAAADAt64MwVY1ACgAAA==";

    #[test]
    fn a_compressed_tar_gz_is_read() {
        use base64::Engine;
        let gz = base64::engine::general_purpose::STANDARD.decode(TALOS_LIKE).unwrap_or_default();
        assert_eq!(extract(&gz), Ok(b"hello\n".to_vec()));
    }

    #[test]
    fn broken_archives_are_refused() {
        assert_eq!(extract(b"nope"), Err(ArchiveError::Gzip("too short")));
        assert_eq!(extract(b"\x1f\x8b\x07\0\0\0\0\0\0\0"), Err(ArchiveError::Gzip("bad magic")));
        assert!(matches!(
            extract(b"\x1f\x8b\x08\0\0\0\0\0\0\xff\x00\x01"),
            Err(ArchiveError::Inflate(_))
        ));
    }
}
