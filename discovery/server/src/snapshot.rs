// SPDX-License-Identifier: Apache-2.0
//! The state on disk, so a restart does not make every node re-register before it is seen
//! again. The file is a protobuf `StateSnapshot` in the layout Sidero's server writes
//! (clusters → affiliates → endpoints, each with the TTL it has left), so a state file can
//! move between the two servers. Only ciphertext is in it: the server never has anything else.
//!
//! Writing is crash-safe: a temporary file is written and fsynced, renamed over the old one,
//! and the directory fsynced, so a power cut leaves either the old or the new file.

use std::io;
use std::path::Path;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use discovery::proto::storage::{
    AffiliateSnapshot, ClusterSnapshot, EndpointSnapshot, StateSnapshot,
};
use discovery::proto::{Duration as PbDuration, Message, ProtoError, Reader};

use crate::registry::{Limits, Registry, SavedAffiliate, SavedCluster};

/// The largest snapshot read back. 1024 affiliates of the largest size (about 4.5 KB each)
/// make a 4.6 MB cluster; this allows about a hundred such clusters, far more than real use.
pub const READ_LIMIT: u64 = 512 << 20;

/// Why a snapshot could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("{0}")]
    Read(#[from] base::bounded::ReadError),
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

/// Memory a loaded record costs beyond its bytes (map nodes, vectors, timers), charged so
/// that a file of tiny records cannot make the server hold far more than the file's size.
const CLUSTER_COST: usize = 256;
const AFFILIATE_COST: usize = 160;
const ENDPOINT_COST: usize = 64;

/// What a snapshot held within the limits, and how many records were left out.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Decoded {
    pub clusters: Vec<SavedCluster>,
    /// Clusters, affiliates and endpoints not loaded because a limit was reached or the record
    /// was larger than any the limits allow.
    pub skipped: usize,
    /// The byte budget ran out: the rest of the file was not read.
    pub truncated: bool,
}

/// Decode a snapshot into what [`Registry::import`] takes, one record at a time, never
/// holding more than the limits allow: at most `limits.clusters` clusters,
/// `limits.affiliates_per_cluster` affiliates in each, `limits.endpoints_per_affiliate`
/// endpoints in each, no record larger than those limits make it, and records charged
/// their bytes plus a fixed overhead up to `budget` bytes in all. A record past a limit is
/// skipped (counted), not decoded.
pub fn decode(bytes: &[u8], limits: &Limits, budget: usize) -> Result<Decoded, ProtoError> {
    let mut out = Decoded::default();
    let mut spent = 0usize;
    let affiliate_max = limits.affiliate_wire_max();
    let mut r = Reader::new(bytes);
    while let Some((f, v)) = r.next_field()? {
        if f != 1 {
            continue;
        }
        let raw = v.bytes(f)?;
        if out.clusters.len() >= limits.clusters {
            out.skipped += 1;
            continue;
        }
        // The ID first (a field may come anywhere), then the affiliates.
        let mut id = None;
        let mut cr = Reader::new(raw);
        while let Some((f, v)) = cr.next_field()? {
            if f == 1 {
                id = Some(v.bytes(f)?);
            }
        }
        let id = id.unwrap_or_default();
        if id.len() > limits.id_max {
            out.skipped += 1;
            continue;
        }
        let id = String::from_utf8(id.to_vec()).map_err(|_| ProtoError::Utf8(1))?;
        spent = spent.saturating_add(CLUSTER_COST + id.len());
        let mut cluster = SavedCluster { id, affiliates: Vec::new() };
        let mut cr = Reader::new(raw);
        while let Some((f, v)) = cr.next_field()? {
            if f != 2 {
                continue;
            }
            let raw = v.bytes(f)?;
            if cluster.affiliates.len() >= limits.affiliates_per_cluster
                || raw.len() > affiliate_max
            {
                out.skipped += 1;
                continue;
            }
            let a = AffiliateSnapshot::decode(raw)?;
            if a.endpoints.len() > limits.endpoints_per_affiliate {
                out.skipped += 1;
                continue;
            }
            let cost = AFFILIATE_COST
                + a.id.len()
                + a.data.len()
                + a.endpoints.iter().map(|e| ENDPOINT_COST + e.data.len()).sum::<usize>();
            spent = spent.saturating_add(cost);
            if spent > budget {
                out.truncated = true;
                break;
            }
            cluster.affiliates.push(SavedAffiliate {
                ttl: remaining(a.ttl, a.expiration),
                id: a.id,
                data: a.data,
                endpoints: a
                    .endpoints
                    .into_iter()
                    .map(|e| (e.data, remaining(e.ttl, e.expiration)))
                    .collect(),
            });
        }
        out.clusters.push(cluster);
        if spent > budget {
            out.truncated = true;
            break;
        }
    }
    Ok(out)
}

/// Read a snapshot file within `limits` (and [`READ_LIMIT`] bytes, both of the file and of
/// what it is charged in memory); `Ok(None)` when there is none yet.
pub fn load(path: &Path, limits: &Limits) -> Result<Option<Decoded>, SnapshotError> {
    match base::bounded::read_file(path, READ_LIMIT) {
        Ok(bytes) => Ok(Some(decode(&bytes, limits, READ_LIMIT as usize)?)),
        Err(base::bounded::ReadError::Io(e)) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Write `bytes` to `path` crash-safely (temporary file, fsync, rename, directory fsync).
pub fn write(path: &Path, bytes: &[u8]) -> Result<(), SnapshotError> {
    Ok(base::atomic_file::write(path, bytes, 0o600, base::atomic_file::Durability::FileAndDir)?)
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
        let limits = Limits::default();
        assert!(load(&path, &limits).unwrap().is_none());
        write(&path, &encode(&r, now)).unwrap();
        assert!(!base::atomic_file::tmp_path(&path).exists());
        let saved = load(&path, &limits).unwrap().unwrap();
        assert_eq!(saved.clusters, r.export(now));
        assert_eq!((saved.skipped, saved.truncated), (0, false));
        std::fs::write(&path, b"\x0a\xff").unwrap();
        assert!(matches!(load(&path, &limits), Err(SnapshotError::Decode(_))));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A cluster message of `n` affiliates, each `affiliate` (an encoded AffiliateSnapshot).
    fn cluster(id: &str, n: usize, affiliate: &[u8]) -> Vec<u8> {
        let mut c = Vec::new();
        discovery::proto::put_bytes(&mut c, 1, id.as_bytes());
        for _ in 0..n {
            discovery::proto::put_bytes(&mut c, 2, affiliate);
        }
        c
    }

    #[test]
    fn tiny_records_are_bounded_by_the_limits() {
        let limits = Limits {
            clusters: 3,
            affiliates_per_cluster: 10,
            endpoints_per_affiliate: 4,
            ..Limits::default()
        };
        // An affiliate with a one-byte ID and 1,000 empty endpoint records.
        let mut fat = Vec::new();
        discovery::proto::put_bytes(&mut fat, 1, b"a");
        for _ in 0..1000 {
            discovery::proto::put_bytes(&mut fat, 4, b"");
        }
        let mut file = Vec::new();
        discovery::proto::put_bytes(&mut file, 1, &cluster("many", 5000, b"\x0a\x01b"));
        discovery::proto::put_bytes(&mut file, 1, &cluster("fat", 1, &fat));
        for i in 0..5000 {
            discovery::proto::put_bytes(&mut file, 1, &cluster(&format!("c{i}"), 0, b""));
        }
        let d = decode(&file, &limits, 1 << 30).unwrap();
        assert_eq!(d.clusters.len(), 3);
        assert_eq!(d.clusters[0].affiliates.len(), 10);
        assert!(d.clusters[1].affiliates.is_empty(), "1,000 endpoints are past the limit");
        assert_eq!(d.skipped, 4990 + 1 + 4999);
        assert!(!d.truncated);

        // The byte budget: each affiliate costs its bytes and a fixed overhead.
        let d = decode(&file, &Limits::default(), 100 * AFFILIATE_COST).unwrap();
        assert!(d.truncated);
        assert_eq!(d.clusters.len(), 1);
        assert!(d.clusters[0].affiliates.len() < 100);
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
        let saved = decode(&state.encode(), &Limits::default(), 1 << 20).unwrap().clusters;
        let ttl = saved[0].affiliates[0].ttl;
        assert!(ttl > Duration::from_secs(590) && ttl <= Duration::from_secs(600));
    }
}
