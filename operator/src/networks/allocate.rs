// SPDX-License-Identifier: Apache-2.0
//! Network IDs: claimed by creating `NetworkID/<id>` in etcd, in the same transaction that
//! records the ID in the Network's status (`Version(NetworkID) == 0 ∧ Version(Network) == v`).
//! Either both are written or neither, so an ID is never claimed for a Network that does not
//! record it: there is nothing to leak and no orphan collector is needed (IronCore creates
//! the NetworkID before the Network exists and needs one).
//!
//! The same transaction writes an index key `<prefix>/_cluster/NetworkIDIndex/<id, 8 digits>`
//! (empty value): resource keys hash their IDs, so the index is what lets the allocator read
//! the claimed IDs near a point, keys only, in order.
//!
//! Without a requested ID the allocator probes a random ID of the range, then walks from a
//! random start, reading the index a page at a time and trying the first free ID it shows,
//! wrapping; a bounded number of creates in all, then [`AllocError::Contended`]. A full range
//! (one count of the index) is [`AllocError::Exhausted`]. Release deletes the NetworkID (and
//! its index key) only while its `claimRef` still names the Network by UID, guarded by the
//! version it was read at.

use std::hash::{BuildHasher, Hasher};
use std::time::{SystemTime, UNIX_EPOCH};

use etcd::request::range_key;
use etcd::wire::{
    Compare, CompareResult, DeleteRangeRequest, PutRequest, RangeRequest, RequestOp, TxnRequest,
};

use crate::store::{Resource, Store, StoreError};

use super::kinds::{
    encode_id, uid, Body, ClaimRef, Network, NetworkId, NetworkIdSpec, CLUSTER, MAX_ID, NETWORK_IDS,
};

/// IronCore's defaults (`--min-vni`, `--max-vni`), both inclusive.
pub const DEFAULT_MIN: u32 = 200;
pub const DEFAULT_MAX: u32 = MAX_ID;
/// Random probes before the allocator walks the index: one (in a sparse range it lands; in a
/// dense one the walk finds a free ID in one read, where more probes would each fail).
pub const PROBES: usize = 1;
/// Creates in all (probes and scan) before it gives up.
pub const MAX_ATTEMPTS: usize = 64;
/// Index keys read per page of the walk.
const PAGE: i64 = 256;
/// The index's type segment.
const INDEX: &str = "NetworkIDIndex";
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

/// A successful claim.
#[derive(Debug, Clone)]
pub struct Claim {
    pub id: u32,
    /// The Network as stored now.
    pub network: Network,
    /// Creates tried (the failed compares are one fewer).
    pub attempts: usize,
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

    /// Create `NetworkID/<id>` (and its index key) for `n` and record it in `n`'s status, in
    /// one transaction.
    fn try_claim(&self, store: &mut Store, n: &Network, id: u32) -> Result<Try, AllocError> {
        let claim = claim_of(n);
        let mut updated = n.clone();
        updated.spec.status.id = Some(id);
        updated.spec.status.uid = claim.uid.clone();
        if !updated.metadata.finalizers.iter().any(|f| f == FINALIZER) {
            updated.metadata.finalizers.push(FINALIZER.into());
        }
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        updated.metadata.updated = now;
        let mut nid: NetworkId = Resource::new(
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
        nid.metadata.created = now;
        nid.metadata.updated = now;
        let encode = |what: &str, v: Result<Vec<u8>, serde_json::Error>| {
            v.map_err(|e| StoreError::Encode { what: what.into(), detail: e.to_string() })
        };
        let layout = store.layout().clone();
        let nid_key = layout.key(CLUSTER, NETWORK_IDS, &nid.metadata.id);
        let m = &n.metadata;
        let net_key = layout.key(&m.namespace, &m.kind, &m.id);
        let put = |key: &[u8], value: Vec<u8>| {
            RequestOp::Put(PutRequest { key: key.to_vec(), value, ..Default::default() })
        };
        let t = store.client().txn(&TxnRequest {
            compare: vec![
                Compare::version(&nid_key, CompareResult::Equal, 0),
                Compare::version(&net_key, CompareResult::Equal, m.version),
            ],
            success: vec![
                put(&nid_key, encode("NetworkID", serde_json::to_vec(&nid))?),
                put(&net_key, encode("Network", serde_json::to_vec(&updated))?),
                put(&index_key(&layout, id), Vec::new()),
                RequestOp::Range(range_key(&net_key)),
            ],
            failure: vec![RequestOp::Range(range_key(&net_key))],
        });
        let t = t.map_err(StoreError::from)?;
        let net_now = t.range(if t.succeeded { 3 } else { 0 }).and_then(|r| r.kvs.first());
        if t.succeeded {
            if let Some(kv) = net_now {
                updated.metadata.version = kv.version;
                updated.metadata.revision = kv.mod_revision;
            }
            return Ok(Try::Claimed(Box::new(updated)));
        }
        // Which compare failed: the Network's (read it again) or the ID's (taken).
        if net_now.map(|kv| kv.version) != Some(m.version) {
            return Err(AllocError::NetworkChanged);
        }
        Ok(Try::Taken)
    }

    /// Claim an ID for `n` (as read): `requested`, or a free one.
    pub fn claim(
        &self,
        store: &mut Store,
        n: &Network,
        requested: Option<u32>,
        rng: &mut dyn FnMut() -> u64,
    ) -> Result<Claim, AllocError> {
        if let Some(id) = requested {
            if !self.range.contains(id) {
                let (min, max) = (self.range.min, self.range.max);
                return Err(AllocError::OutOfRange { id, min, max });
            }
            return match self.try_claim(store, n, id)? {
                Try::Claimed(n) => Ok(Claim { id, network: *n, attempts: 1 }),
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
                return Ok(Claim { id, network: *n, attempts });
            }
        }
        // Dense or contended: walk the index from a random point to the free IDs.
        let layout = store.layout().clone();
        let (min, max) = (self.range.min, self.range.max);
        let count = store.client().range(&RangeRequest {
            key: index_key(&layout, min),
            range_end: index_key(&layout, max + 1),
            count_only: true,
            ..Default::default()
        });
        if count.map_err(StoreError::from)?.count as u64 >= self.range.len() {
            return Err(AllocError::Exhausted { min, max });
        }
        let start = self.range.pick(rng());
        // The walk: [start, max], then [min, start).
        for (from, to) in [(start, max), (min, start.saturating_sub(1))] {
            let mut cursor = from;
            while cursor <= to && from <= to {
                let page = store.client().range(&RangeRequest {
                    key: index_key(&layout, cursor),
                    range_end: index_key(&layout, to + 1),
                    limit: PAGE,
                    keys_only: true,
                    ..Default::default()
                });
                let page = page.map_err(StoreError::from)?;
                let taken: Vec<u32> =
                    page.kvs.iter().filter_map(|kv| index_id(&layout, &kv.key)).collect();
                // Free IDs between the cursor and the last taken one this page shows (all of
                // them up to `to` when the page is the last).
                let upto = if page.more { taken.last().copied().unwrap_or(to) } else { to };
                let mut id = cursor;
                while id <= upto {
                    if !taken.contains(&id) {
                        if attempts >= MAX_ATTEMPTS {
                            return Err(AllocError::Contended { attempts });
                        }
                        attempts += 1;
                        if let Try::Claimed(n) = self.try_claim(store, n, id)? {
                            return Ok(Claim { id, network: *n, attempts });
                        }
                    }
                    id += 1;
                }
                if upto >= to {
                    break;
                }
                cursor = upto + 1;
            }
        }
        Err(AllocError::Contended { attempts })
    }
}

/// The index key of an ID: zero-padded so keys sort as numbers.
pub fn index_key(layout: &crate::key::Layout, id: u32) -> Vec<u8> {
    let mut k = layout.kind_prefix(CLUSTER, INDEX);
    k.extend_from_slice(format!("{id:08}").as_bytes());
    k
}

/// The ID an index key names.
fn index_id(layout: &crate::key::Layout, key: &[u8]) -> Option<u32> {
    let p = layout.kind_prefix(CLUSTER, INDEX);
    let rest = std::str::from_utf8(key.strip_prefix(p.as_slice())?).ok()?;
    (rest.len() == 8 && rest.bytes().all(|b| b.is_ascii_digit())).then(|| rest.parse().ok())?
}

/// Delete a NetworkID by hand (`keelson-operator delete nid ID`), with its index key, at the
/// version read. `Ok(false)`: there is none.
pub fn delete_id(store: &mut Store, name: &str) -> Result<bool, StoreError> {
    let Some(id) = super::kinds::parse_id(name) else { return Ok(false) };
    for _ in 0..4 {
        let c: Option<NetworkId> = store.get(CLUSTER, NETWORK_IDS, name)?;
        let Some(c) = c else { return Ok(false) };
        if delete_guarded(store, id, c.metadata.revision)? {
            return Ok(true);
        }
    }
    Err(StoreError::Conflict { what: format!("NetworkID {id}"), expected: 0, found: -1 })
}

/// Delete NetworkID `id` and its index key if the NetworkID is still the one read, at
/// `mod_revision` (a key's version starts again at 1 when it is deleted and created again, so
/// only the revision tells a re-claim from the claim that was read).
pub fn delete_guarded(store: &mut Store, id: u32, mod_revision: i64) -> Result<bool, StoreError> {
    let layout = store.layout().clone();
    let key = layout.key(CLUSTER, NETWORK_IDS, &encode_id(id));
    let del =
        |key: Vec<u8>| RequestOp::DeleteRange(DeleteRangeRequest { key, ..Default::default() });
    let t = store.client().txn(&TxnRequest {
        compare: vec![Compare::mod_revision(&key, CompareResult::Equal, mod_revision)],
        success: vec![del(key.clone()), del(index_key(&layout, id))],
        failure: vec![],
    })?;
    Ok(t.succeeded)
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
/// UID, at the revision that was checked (a re-claim in between is a conflict, not a delete).
pub fn release(store: &mut Store, n: &Network) -> Result<Released, StoreError> {
    release_with(store, n, &mut |_| {})
}

/// [`release`], running `between` after each read of the claim and before its guarded delete
/// (tests force a re-claim into that window).
pub fn release_with(
    store: &mut Store,
    n: &Network,
    between: &mut dyn FnMut(&mut Store),
) -> Result<Released, StoreError> {
    let Some(id) = n.spec.status.id else { return Ok(Released::Gone) };
    let mine = ClaimRef { uid: n.spec.status.uid.clone(), ..claim_of(n) };
    for _ in 0..4 {
        let c: Option<NetworkId> = store.get(CLUSTER, NETWORK_IDS, &encode_id(id))?;
        let Some(c) = c else { return Ok(Released::Gone) };
        if c.spec.spec.claim_ref != mine {
            return Ok(Released::NotOurs(describe_claim(&c.spec.spec.claim_ref)));
        }
        between(store);
        if delete_guarded(store, id, c.metadata.revision)? {
            return Ok(Released::Deleted(id));
        }
    }
    Err(StoreError::Conflict { what: format!("NetworkID {id}"), expected: 0, found: -1 })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

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
    fn index_keys_sort_as_numbers_and_read_back() {
        let l = crate::key::Layout::new("/op", b"s");
        assert_eq!(index_key(&l, 200), b"/op/_cluster/NetworkIDIndex/00000200");
        assert!(index_key(&l, 999) < index_key(&l, 1000));
        assert!(index_key(&l, MAX_ID) < index_key(&l, MAX_ID + 1));
        for id in [1, 200, 4242, MAX_ID] {
            assert_eq!(index_id(&l, &index_key(&l, id)), Some(id));
        }
        assert_eq!(index_id(&l, b"/op/_cluster/NetworkIDIndex/12"), None);
        assert_eq!(index_id(&l, b"/other/_cluster/NetworkIDIndex/00000200"), None);
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
