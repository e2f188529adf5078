// SPDX-License-Identifier: Apache-2.0
//! Network IDs: claimed by creating `NetworkID/<id>` in etcd, in the same transaction that
//! records the ID in the Network's status (`Version(NetworkID) == 0 ∧ Version(Network) == v`).
//! Either both are written or neither, so an ID is never claimed for a Network that does not
//! record it: there is nothing to leak and no orphan collector is needed (IronCore creates
//! the NetworkID before the Network exists and needs one).
//!
//! Without a requested ID the allocator probes random IDs of the range (one create each), then
//! lists the claimed IDs once and walks the free ones from a random start, wrapping; a bounded
//! number of creates in all, then [`AllocError::Contended`]. A full range is
//! [`AllocError::Exhausted`]. Release deletes the NetworkID only while its `claimRef` still
//! names the Network by UID, guarded by the version it was read at.

use std::collections::BTreeSet;
use std::hash::{BuildHasher, Hasher};

use crate::store::{Resource, Store, StoreError};

use super::kinds::{
    encode_id, parse_id, uid, Body, ClaimRef, Network, NetworkId, NetworkIdSpec, CLUSTER, MAX_ID,
    NETWORK_IDS,
};

/// IronCore's defaults (`--min-vni`, `--max-vni`), both inclusive.
pub const DEFAULT_MIN: u32 = 200;
pub const DEFAULT_MAX: u32 = MAX_ID;
/// Random probes before the allocator lists what is taken.
pub const PROBES: usize = 16;
/// Creates in all (probes and scan) before it gives up.
pub const MAX_ATTEMPTS: usize = 64;
/// The finalizer a Network holds while it claims an ID.
pub const FINALIZER: &str = "keelson.dev/network-id";

#[derive(Debug, thiserror::Error)]
pub enum AllocError {
    #[error("--min-vni {min} and --max-vni {max}: want 1 <= min <= max <= {MAX_ID}")]
    BadRange { min: u32, max: u32 },
    #[error("spec.id {id} is outside the allowed range {min}..={max}")]
    OutOfRange { id: u32, min: u32, max: u32 },
    #[error("spec.id {id} is already allocated to {by}")]
    Taken { id: u32, by: String },
    #[error("all IDs of {min}..={max} are allocated")]
    Exhausted { min: u32, max: u32 },
    #[error("no free ID claimed after {attempts} attempts (other allocators took each one first)")]
    Contended { attempts: usize },
    /// The Network changed since it was read: read it again.
    #[error("the Network changed while its ID was claimed")]
    NetworkChanged,
    #[error("{0}")]
    Store(#[from] StoreError),
}

impl AllocError {
    /// Errors that belong in the Network's status (the rest are the store's, retried).
    pub fn is_user_facing(&self) -> bool {
        matches!(
            self,
            Self::OutOfRange { .. }
                | Self::Taken { .. }
                | Self::Exhausted { .. }
                | Self::Contended { .. }
        )
    }
}

/// The allowed IDs, both ends inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    min: u32,
    max: u32,
}

impl Default for Range {
    fn default() -> Self {
        Self { min: DEFAULT_MIN, max: DEFAULT_MAX }
    }
}

impl Range {
    pub fn new(min: u32, max: u32) -> Result<Self, AllocError> {
        if min == 0 || min > max || max > MAX_ID {
            return Err(AllocError::BadRange { min, max });
        }
        Ok(Self { min, max })
    }

    pub fn min(&self) -> u32 {
        self.min
    }

    pub fn max(&self) -> u32 {
        self.max
    }

    pub fn len(&self) -> u64 {
        u64::from(self.max - self.min) + 1
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    pub fn contains(&self, id: u32) -> bool {
        (self.min..=self.max).contains(&id)
    }

    /// The ID at `r` modulo the range's size.
    pub fn pick(&self, r: u64) -> u32 {
        // len <= 2^24, so the offset fits.
        self.min + (r % self.len()) as u32
    }

    /// Every ID once: `start` to `max`, then `min` to `start - 1`.
    pub fn from(&self, start: u32) -> impl Iterator<Item = u32> {
        let start = if self.contains(start) { start } else { self.min };
        (start..=self.max).chain(self.min..start)
    }
}

/// A random u64 from the standard library's per-process random hasher keys (no extra
/// dependency; an ID's start point need not be cryptographic, only spread out).
pub fn random() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    h.write_u64(t.map_or(0, |d| d.as_nanos() as u64));
    h.finish()
}

/// The claim a Network makes: its names and UID.
pub fn claim_of(n: &Network) -> ClaimRef {
    ClaimRef { namespace: n.metadata.namespace.clone(), name: n.metadata.id.clone(), uid: uid(n) }
}

fn describe_claim(c: &ClaimRef) -> String {
    base::names::escape(&format!("{}/{} (uid {})", c.namespace, c.name, c.uid), 300)
}

/// The ID this Network already holds: its status names one whose NetworkID claims this
/// Network's UID (what a leader that restarts finds).
pub fn held(store: &mut Store, n: &Network) -> Result<Option<u32>, StoreError> {
    let Some(id) = n.spec.status.id else { return Ok(None) };
    if n.spec.status.uid != uid(n) {
        return Ok(None);
    }
    let c: Option<NetworkId> = store.get(CLUSTER, NETWORK_IDS, &encode_id(id))?;
    Ok(c.filter(|c| c.spec.spec.claim_ref == claim_of(n)).map(|_| id))
}

/// The outcome of one create.
enum Try {
    Claimed(Box<Network>),
    Taken,
}

#[derive(Debug, Clone)]
pub struct Allocator {
    pub range: Range,
}

impl Allocator {
    pub fn new(range: Range) -> Self {
        Self { range }
    }

    /// Create `NetworkID/<id>` for `n` and record it in `n`'s status, atomically.
    fn try_claim(&self, store: &mut Store, n: &Network, id: u32) -> Result<Try, AllocError> {
        let claim = claim_of(n);
        let mut updated = n.clone();
        updated.spec.status.id = Some(id);
        updated.spec.status.uid = claim.uid.clone();
        if !updated.metadata.finalizers.iter().any(|f| f == FINALIZER) {
            updated.metadata.finalizers.push(FINALIZER.into());
        }
        let nid: NetworkId = Resource::new(
            CLUSTER,
            NETWORK_IDS,
            &encode_id(id),
            Body {
                annotations: Default::default(),
                labels: Default::default(),
                spec: NetworkIdSpec { claim_ref: claim },
                status: serde_json::Value::Null,
            },
        );
        let to_value = |e: serde_json::Error| StoreError::Encode {
            what: "network".into(),
            detail: e.to_string(),
        };
        let mut both = [as_value(&nid).map_err(to_value)?, as_value(&updated).map_err(to_value)?];
        match store.write_all(&mut both) {
            Ok(()) => {
                updated.metadata.version = both[1].metadata.version;
                updated.metadata.revision = both[1].metadata.revision;
                Ok(Try::Claimed(Box::new(updated)))
            }
            Err(e) if e.is_conflict() => {
                // Which compare failed: the Network's (re-read it) or the ID's (taken).
                let now: Option<Resource<serde_json::Value>> =
                    store.get(&n.metadata.namespace, &n.metadata.kind, &n.metadata.id)?;
                if now.map(|r| r.metadata.version) != Some(n.metadata.version) {
                    return Err(AllocError::NetworkChanged);
                }
                Ok(Try::Taken)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Claim an ID for `n` (as read): `requested`, or a free one. On success the returned
    /// Network is what is stored now.
    pub fn claim(
        &self,
        store: &mut Store,
        n: &Network,
        requested: Option<u32>,
        rng: &mut dyn FnMut() -> u64,
    ) -> Result<(u32, Network), AllocError> {
        if let Some(id) = requested {
            if !self.range.contains(id) {
                let (min, max) = (self.range.min, self.range.max);
                return Err(AllocError::OutOfRange { id, min, max });
            }
            return match self.try_claim(store, n, id)? {
                Try::Claimed(n) => Ok((id, *n)),
                Try::Taken => {
                    let by: Option<NetworkId> = store.get(CLUSTER, NETWORK_IDS, &encode_id(id))?;
                    let by = by.map_or_else(
                        || "another Network (since released: retrying)".into(),
                        |c| describe_claim(&c.spec.spec.claim_ref),
                    );
                    Err(AllocError::Taken { id, by })
                }
            };
        }
        let mut attempts = 0;
        for _ in 0..PROBES.min(MAX_ATTEMPTS) {
            let id = self.range.pick(rng());
            attempts += 1;
            if let Try::Claimed(n) = self.try_claim(store, n, id)? {
                return Ok((id, *n));
            }
        }
        // Contended or dense: walk what was free a moment ago.
        let taken = self.taken(store)?;
        let start = self.range.pick(rng());
        let mut free = self.range.from(start).filter(|id| !taken.contains(id)).peekable();
        if free.peek().is_none() {
            return Err(AllocError::Exhausted { min: self.range.min, max: self.range.max });
        }
        for id in free {
            if attempts >= MAX_ATTEMPTS {
                break;
            }
            attempts += 1;
            if let Try::Claimed(n) = self.try_claim(store, n, id)? {
                return Ok((id, *n));
            }
        }
        Err(AllocError::Contended { attempts })
    }

    /// The claimed IDs of this range (one listing).
    fn taken(&self, store: &mut Store) -> Result<BTreeSet<u32>, StoreError> {
        let (all, _) = store.list::<serde_json::Value>(CLUSTER, NETWORK_IDS)?;
        Ok(all.iter().filter_map(|r| parse_id(&r.metadata.id)).collect())
    }
}

fn as_value<S: serde::Serialize>(
    r: &Resource<S>,
) -> Result<Resource<serde_json::Value>, serde_json::Error> {
    Ok(Resource { metadata: r.metadata.clone(), spec: serde_json::to_value(&r.spec)? })
}

/// What [`release`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Released {
    Deleted(u32),
    /// No NetworkID of that number (released already).
    Gone,
    /// The NetworkID claims another Network (or another incarnation of this one): kept.
    NotOurs(String),
}

/// Delete the NetworkID this Network claimed, only while its claimRef names this Network's
/// UID, at the version that was checked (a re-claim in between is a conflict, not a delete).
pub fn release(store: &mut Store, n: &Network) -> Result<Released, StoreError> {
    let Some(id) = n.spec.status.id else { return Ok(Released::Gone) };
    let mine = ClaimRef { uid: n.spec.status.uid.clone(), ..claim_of(n) };
    for _ in 0..4 {
        let c: Option<NetworkId> = store.get(CLUSTER, NETWORK_IDS, &encode_id(id))?;
        let Some(c) = c else { return Ok(Released::Gone) };
        if c.spec.spec.claim_ref != mine {
            return Ok(Released::NotOurs(describe_claim(&c.spec.spec.claim_ref)));
        }
        match store.destroy(CLUSTER, NETWORK_IDS, &encode_id(id), c.metadata.version, "") {
            Ok(()) => return Ok(Released::Deleted(id)),
            Err(StoreError::NotFound(_)) => return Ok(Released::Gone),
            Err(e) if e.is_conflict() => continue,
            Err(e) => return Err(e),
        }
    }
    Err(StoreError::Conflict { what: format!("NetworkID {id}"), expected: 0, found: -1 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_checked_like_the_flags() {
        assert!(Range::new(200, MAX_ID).is_ok());
        assert!(Range::new(5, 5).is_ok());
        for (a, b) in [(0, 10), (10, 9), (1, MAX_ID + 1)] {
            assert!(matches!(Range::new(a, b), Err(AllocError::BadRange { .. })), "{a} {b}");
        }
        assert_eq!(Range::default().min(), 200);
        assert_eq!(Range::default().max(), 16_777_215);
    }

    #[test]
    fn the_scan_visits_every_id_once_wrapping() {
        let r = Range::new(10, 19).unwrap();
        for start in 0..30 {
            let v: Vec<u32> = r.from(start).collect();
            assert_eq!(v.len(), 10);
            let set: BTreeSet<u32> = v.iter().copied().collect();
            assert_eq!(set, (10..=19).collect());
            if r.contains(start) {
                assert_eq!(v[0], start);
            }
        }
        assert_eq!(r.from(17).collect::<Vec<_>>(), [17, 18, 19, 10, 11, 12, 13, 14, 15, 16]);
    }

    #[test]
    fn picks_stay_in_range() {
        let r = Range::new(200, 455).unwrap();
        let mut seen = BTreeSet::new();
        for i in 0..10_000u64 {
            let id = r.pick(i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            assert!(r.contains(id));
            seen.insert(id);
        }
        assert_eq!(seen.len(), 256);
        let full = Range::new(1, MAX_ID).unwrap();
        assert!(full.contains(full.pick(u64::MAX)));
        assert_ne!(random(), random());
    }
}
