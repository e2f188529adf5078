// SPDX-License-Identifier: Apache-2.0
//! The state on disk, so a restart does not make every node re-register before it is seen
//! again. The file is a protobuf `StateSnapshot` in the layout Sidero's server writes
//! (clusters → affiliates → endpoints, each with the TTL it has left), so a state file can
//! move between the two servers. Only ciphertext is in it: the server never has anything else.
//!
//! Writing is crash-safe: a temporary file is written and fsynced, renamed over the old one,
//! and the directory fsynced, so a power cut leaves either the old or the new file.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use discovery::proto::storage::{
    AffiliateSnapshot, ClusterSnapshot, EndpointSnapshot, StateSnapshot,
};
use discovery::proto::{Duration as PbDuration, Message, ProtoError};

use crate::registry::{Registry, SavedAffiliate, SavedCluster};

/// The largest snapshot read back. 1024 affiliates of the largest size (about 4.5 KB each)
/// make a 4.6 MB cluster; this allows about a hundred such clusters, far more than real use.
pub const READ_LIMIT: u64 = 512 << 20;

/// Why a snapshot could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("{0}")]
    Read(#[from] net::bounded::ReadError),
    #[error("not a state snapshot: {0}")]
    Decode(#[from] ProtoError),
}

/// Encode what is alive now.
pub fn encode(registry: &Registry, now: Instant) -> Vec<u8> {
    let state = StateSnapshot {
        clusters: registry
            .export(now)
            .into_iter()
            .map(|c| ClusterSnapshot {
                id: c.id,
                affiliates: c
                    .affiliates
                    .into_iter()
                    .map(|a| AffiliateSnapshot {
                        id: a.id,
                        expiration: None,
                        data: a.data,
                        ttl: Some(PbDuration::from_std(a.ttl)),
                        endpoints: a
                            .endpoints
                            .into_iter()
                            .map(|(data, ttl)| EndpointSnapshot {
                                expiration: None,
                                data,
                                ttl: Some(PbDuration::from_std(ttl)),
                            })
                            .collect(),
                    })
                    .collect(),
            })
            .collect(),
    };
    state.encode()
}

/// Time left: the stored TTL, or for files from older servers that stored the absolute
/// expiry, that time minus the wall clock now.
fn remaining(ttl: Option<PbDuration>, expiration: Option<PbDuration>) -> std::time::Duration {
    if let Some(ttl) = ttl {
        return ttl.to_std();
    }
    let Some(at) = expiration else {
        return std::time::Duration::ZERO;
    };
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    at.to_std().saturating_sub(now)
}

/// Decode a snapshot into what [`Registry::import`] takes.
pub fn decode(bytes: &[u8]) -> Result<Vec<SavedCluster>, ProtoError> {
    let state = StateSnapshot::decode(bytes)?;
    Ok(state
        .clusters
        .into_iter()
        .map(|c| SavedCluster {
            id: c.id,
            affiliates: c
                .affiliates
                .into_iter()
                .map(|a| SavedAffiliate {
                    ttl: remaining(a.ttl, a.expiration),
                    id: a.id,
                    data: a.data,
                    endpoints: a
                        .endpoints
                        .into_iter()
                        .map(|e| (e.data, remaining(e.ttl, e.expiration)))
                        .collect(),
                })
                .collect(),
        })
        .collect())
}

/// Read a snapshot file; `Ok(None)` when there is none yet.
pub fn load(path: &Path) -> Result<Option<Vec<SavedCluster>>, SnapshotError> {
    match net::bounded::read_file(path, READ_LIMIT) {
        Ok(bytes) => Ok(Some(decode(&bytes)?)),
        Err(net::bounded::ReadError::Io(e)) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Write `bytes` to `path` crash-safely (temporary file, fsync, rename, directory fsync).
pub fn write(path: &Path, bytes: &[u8]) -> Result<(), SnapshotError> {
    let tmp = tmp_path(path);
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    Ok(result?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Update;
    use std::time::Duration;

    #[test]
    fn a_snapshot_round_trips_through_a_file() {
        let mut r = Registry::default();
        let now = Instant::now();
        let eps = vec![b"e1".to_vec(), b"e2".to_vec()];
        r.update(
            &Update {
                cluster: "c",
                affiliate: "a",
                data: b"blob",
                endpoints: &eps,
                ttl: Duration::from_secs(600),
            },
            now,
        )
        .unwrap();
        let dir = std::env::temp_dir().join(format!("keelson-snap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("state.binpb");
        assert!(load(&path).unwrap().is_none());
        write(&path, &encode(&r, now)).unwrap();
        assert!(!tmp_path(&path).exists());
        let saved = load(&path).unwrap().unwrap();
        assert_eq!(saved, r.export(now));
        std::fs::write(&path, b"\x0a\xff").unwrap();
        assert!(matches!(load(&path), Err(SnapshotError::Decode(_))));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn legacy_absolute_expirations_are_read_as_time_left() {
        let in_ten_minutes =
            SystemTime::now().duration_since(UNIX_EPOCH).unwrap() + Duration::from_secs(600);
        let state = StateSnapshot {
            clusters: vec![ClusterSnapshot {
                id: "c".into(),
                affiliates: vec![AffiliateSnapshot {
                    id: "a".into(),
                    expiration: Some(PbDuration::from_std(in_ten_minutes)),
                    data: b"d".to_vec(),
                    ttl: None,
                    endpoints: vec![],
                }],
            }],
        };
        let saved = decode(&state.encode()).unwrap();
        let ttl = saved[0].affiliates[0].ttl;
        assert!(ttl > Duration::from_secs(590) && ttl <= Duration::from_secs(600));
    }
}
