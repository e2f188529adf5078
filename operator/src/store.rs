// SPDX-License-Identifier: Apache-2.0
//! The operator's resources in etcd, kept as Omni keeps its COSI resources (cosi-project/
//! state-etcd): one key per resource ([`crate::key`]), its value the resource as JSON, and its
//! version etcd's own per-key `Version` (not stored in the value, so it can never disagree).
//!
//! - Create: a transaction `Version(key) == 0 ⇒ Put` (else [`StoreError::AlreadyExists`]).
//! - Update: the caller's resource carries the version it read; `Version(key) == v ⇒ Put`, a
//!   failed compare is [`StoreError::Conflict`]. Callers re-read and retry ([`Store::modify`]
//!   does it for them), so two writers never overwrite each other blindly. As in COSI, the
//!   stored resource is read first and only its owner may write it
//!   ([`StoreError::OwnerConflict`]); the version guard makes that read binding.
//! - Destroy: the same guards, and only without pending finalizers.
//! - List: one range over the kind's prefix, with the revision it was read at.
//! - Watch: from a revision (a bookmark: the last event's mod revision), with the previous
//!   value so a destroy says what went away.
//!
//! Resources are generic over their spec, so typed kinds sit on the same store as JSON ones.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use etcd::request::{prefix_end, range_key};
use etcd::wire::*;
use etcd::{Client, Watch};
use serde::de::{DeserializeOwned, IgnoredAny};
use serde::{Deserialize, Serialize};

use crate::key::Layout;

/// The largest value written (etcd refuses requests above 1.5 MiB by default).
pub const MAX_VALUE: usize = 1 << 20;
/// [`Store::modify`]'s attempts before it gives up on a hot resource.
const MODIFY_ATTEMPTS: usize = 16;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{0} not found")]
    NotFound(String),
    #[error("{0} already exists")]
    AlreadyExists(String),
    /// The resource changed since it was read: re-read and retry.
    #[error("{what}: version conflict (expected {expected}, found {found})")]
    Conflict { what: String, expected: i64, found: i64 },
    /// Only the resource's owner (the controller that writes it) may change or delete it.
    #[error("{what}: owned by {owner:?}, not {by:?}")]
    OwnerConflict { what: String, owner: String, by: String },
    #[error("{what}: finalizers pending: {finalizers:?}")]
    PendingFinalizers { what: String, finalizers: Vec<String> },
    #[error("{what}: encoded resource is {size} bytes, more than {MAX_VALUE}")]
    TooLarge { what: String, size: usize },
    #[error("{what}: {detail}")]
    Encode { what: String, detail: String },
    /// A stored value that is not a resource of this kind (or not the one its key names).
    #[error("stored value at {key}: {detail}")]
    Corrupt { key: String, detail: String },
    #[error("etcd: {0}")]
    Etcd(#[from] etcd::ClientError),
    /// The election key this store's writes are fenced on is gone: this replica no longer
    /// leads, and nothing was written.
    #[error("no longer leading (the election key is gone)")]
    Deposed,
}

impl StoreError {
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Conflict { .. })
    }
}

/// A resource's life phase (COSI's): tearing down once deletion started, while finalizers
/// are still on it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Phase {
    #[default]
    Running,
    TearingDown,
}

/// Another resource, by name (an owner reference).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ref {
    pub namespace: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
}

/// What every resource carries besides its spec.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    pub namespace: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
    /// etcd's per-key version: 0 before the create, read from etcd, never stored.
    #[serde(skip)]
    pub version: i64,
    /// The revision of the last write (for watch bookmarks), read from etcd.
    #[serde(skip)]
    pub revision: i64,
    /// The revision that created the key, read from etcd: unique per incarnation of a name
    /// (tenant networks use it as the resource's UID).
    #[serde(skip)]
    pub create_revision: i64,
    /// The controller that writes this resource (empty: anyone).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub owner: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owner_refs: Vec<Ref>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub finalizers: Vec<String>,
    #[serde(default)]
    pub phase: Phase,
    /// Unix seconds.
    #[serde(default)]
    pub created: u64,
    #[serde(default)]
    pub updated: u64,
}

impl Metadata {
    pub fn new(namespace: &str, kind: &str, id: &str) -> Self {
        Self { namespace: namespace.into(), kind: kind.into(), id: id.into(), ..Default::default() }
    }

    fn what(&self) -> String {
        describe(&self.namespace, &self.kind, &self.id)
    }
}

fn describe(ns: &str, kind: &str, id: &str) -> String {
    base::names::escape(&format!("{ns}/{kind}/{id}"), 512)
}

/// A resource: metadata and a spec of any serde type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resource<S> {
    pub metadata: Metadata,
    pub spec: S,
}

impl<S> Resource<S> {
    pub fn new(namespace: &str, kind: &str, id: &str, spec: S) -> Self {
        Self { metadata: Metadata::new(namespace, kind, id), spec }
    }
}

/// What a watch saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Created,
    Updated,
    Destroyed,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Event<S> {
    pub kind: EventKind,
    /// For `Destroyed`, the resource as it was last.
    pub resource: Resource<S>,
    /// The event's revision: resume after it.
    pub revision: i64,
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// A leader's election key and its create revision. While set, every write also compares
/// the key's create revision, so a replica whose lease expired or was revoked (its key gone
/// with it) writes nothing, however late it notices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    pub key: Vec<u8>,
    pub create_revision: i64,
}

/// The store over one etcd client.
#[derive(Debug)]
pub struct Store {
    client: Client,
    layout: Layout,
    /// Request latency goes here when set (`serve --metrics-listen`).
    metrics: Option<std::sync::Arc<crate::metrics::Metrics>>,
    fence: Option<Fence>,
}

impl Store {
    pub fn new(client: Client, layout: Layout) -> Self {
        Self { client, layout, metrics: None, fence: None }
    }

    /// Fence every later write on `fence` (`None`: unfenced, as `apply` writes).
    pub fn set_fence(&mut self, fence: Option<Fence>) {
        self.fence = fence;
    }

    /// Whether the fence still stands: one read of the election key. `Ok` without a fence.
    pub fn check_fence(&mut self) -> Result<(), StoreError> {
        let Some(f) = self.fence.clone() else { return Ok(()) };
        match self.timed("get", |c| c.get(&f.key))? {
            Some(kv) if kv.create_revision == f.create_revision => Ok(()),
            _ => Err(StoreError::Deposed),
        }
    }

    /// The fence's compare, if any.
    fn fence_compare(&self) -> Option<Compare> {
        let f = self.fence.as_ref()?;
        Some(Compare::create_revision(&f.key, CompareResult::Equal, f.create_revision))
    }

    /// After a failed fenced transaction whose failure op `at` read the fence key: whether
    /// the fence is what failed.
    fn fence_failed(&self, t: &TxnResponse, at: usize) -> bool {
        let Some(f) = &self.fence else { return false };
        t.range(at)
            .and_then(|r| r.kvs.first())
            .is_none_or(|kv| kv.create_revision != f.create_revision)
    }

    /// Count each etcd request's latency in `m`.
    pub fn with_metrics(mut self, m: std::sync::Arc<crate::metrics::Metrics>) -> Self {
        self.metrics = Some(m);
        self
    }

    /// Run one etcd request, timed.
    fn timed<T>(
        &mut self,
        op: &'static str,
        f: impl FnOnce(&mut Client) -> Result<T, etcd::ClientError>,
    ) -> Result<T, etcd::ClientError> {
        let start = std::time::Instant::now();
        let r = f(&mut self.client);
        if let Some(m) = &self.metrics {
            m.etcd(op, start.elapsed().as_secs_f64(), r.is_ok());
        }
        r
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn client(&mut self) -> &mut Client {
        &mut self.client
    }
}

/// A stored value as a resource, checked against its key.
fn decode<S: DeserializeOwned>(
    layout: &Layout,
    kv: &KeyValue,
    want: Option<(&str, &str, &str)>,
) -> Result<Resource<S>, StoreError> {
    let corrupt = |detail: String| StoreError::Corrupt {
        key: base::names::escape(&String::from_utf8_lossy(&kv.key), 256),
        detail: base::names::escape(&detail, 256),
    };
    let mut r: Resource<S> =
        serde_json::from_slice(&kv.value).map_err(|e| corrupt(e.to_string()))?;
    let m = &r.metadata;
    // The key must be the one this resource's names hash to: a value copied under another
    // key (or a hash collision) is not silently taken for a different resource.
    if layout.key(&m.namespace, &m.kind, &m.id) != kv.key {
        return Err(corrupt("names do not match the key".into()));
    }
    if let Some((ns, kind, id)) = want {
        if (m.namespace.as_str(), m.kind.as_str(), m.id.as_str()) != (ns, kind, id) {
            return Err(corrupt("names do not match the request".into()));
        }
    }
    r.metadata.version = kv.version;
    r.metadata.revision = kv.mod_revision;
    r.metadata.create_revision = kv.create_revision;
    Ok(r)
}

impl Store {
    fn encode<S: Serialize>(r: &Resource<S>) -> Result<Vec<u8>, StoreError> {
        let what = r.metadata.what();
        let bytes = serde_json::to_vec(r)
            .map_err(|e| StoreError::Encode { what: what.clone(), detail: e.to_string() })?;
        if bytes.len() > MAX_VALUE {
            return Err(StoreError::TooLarge { what, size: bytes.len() });
        }
        Ok(bytes)
    }

    /// One resource, if it exists.
    pub fn get<S: DeserializeOwned>(
        &mut self,
        ns: &str,
        kind: &str,
        id: &str,
    ) -> Result<Option<Resource<S>>, StoreError> {
        let key = self.layout.key(ns, kind, id);
        match self.timed("get", |c| c.get(&key))? {
            None => Ok(None),
            Some(kv) => decode(&self.layout, &kv, Some((ns, kind, id))).map(Some),
        }
    }

    /// A guarded write: `Version(key) == expected ⇒ ops`, else read the key.
    fn guarded(
        &mut self,
        key: &[u8],
        expected: i64,
        op: RequestOp,
    ) -> Result<TxnResponse, StoreError> {
        let mut req = TxnRequest {
            compare: vec![Compare::version(key, CompareResult::Equal, expected)],
            success: vec![op, RequestOp::Range(range_key(key))],
            failure: vec![RequestOp::Range(range_key(key))],
        };
        if let (Some(c), Some(f)) = (self.fence_compare(), &self.fence) {
            req.compare.push(c);
            req.failure.push(RequestOp::Range(range_key(&f.key)));
        }
        let t = self.timed("txn", |c| c.txn(&req))?;
        if !t.succeeded && self.fence_failed(&t, 1) {
            return Err(StoreError::Deposed);
        }
        Ok(t)
    }

    /// The version a failed guard found (0: the key is gone).
    fn found(t: &TxnResponse) -> i64 {
        t.range(0).and_then(|r| r.kvs.first()).map_or(0, |kv| kv.version)
    }

    /// After a successful guarded put: the version and revision written.
    fn written<S>(r: &mut Resource<S>, t: &TxnResponse) {
        if let Some(kv) = t.range(1).and_then(|r| r.kvs.first()) {
            r.metadata.version = kv.version;
            r.metadata.revision = kv.mod_revision;
        }
    }

    /// Create `r`; its version becomes 1.
    pub fn create<S: Serialize>(&mut self, r: &mut Resource<S>) -> Result<(), StoreError> {
        let now = now_secs();
        r.metadata.created = now;
        r.metadata.updated = now;
        let m = &r.metadata;
        let key = self.layout.key(&m.namespace, &m.kind, &m.id);
        let value = Self::encode(r)?;
        let put = RequestOp::Put(PutRequest { key: key.clone(), value, ..Default::default() });
        let t = self.guarded(&key, 0, put)?;
        if !t.succeeded {
            return Err(StoreError::AlreadyExists(r.metadata.what()));
        }
        Self::written(r, &t);
        Ok(())
    }

    /// Write `r` over the version it carries; on success it carries the new one.
    pub fn update<S: Serialize>(&mut self, r: &mut Resource<S>) -> Result<(), StoreError> {
        let expected = r.metadata.version;
        let what = r.metadata.what();
        if expected <= 0 {
            return Err(StoreError::NotFound(what));
        }
        let m = &r.metadata;
        let current = self.get::<IgnoredAny>(&m.namespace, &m.kind, &m.id)?;
        let Some(current) = current else { return Err(StoreError::NotFound(what)) };
        if current.metadata.version != expected {
            let found = current.metadata.version;
            return Err(StoreError::Conflict { what, expected, found });
        }
        if current.metadata.owner != m.owner {
            let (owner, by) = (current.metadata.owner, m.owner.clone());
            return Err(StoreError::OwnerConflict { what, owner, by });
        }
        r.metadata.updated = now_secs();
        let m = &r.metadata;
        let key = self.layout.key(&m.namespace, &m.kind, &m.id);
        let value = Self::encode(r)?;
        let put = RequestOp::Put(PutRequest { key: key.clone(), value, ..Default::default() });
        let t = self.guarded(&key, expected, put)?;
        if !t.succeeded {
            return Err(match Self::found(&t) {
                0 => StoreError::NotFound(what),
                found => StoreError::Conflict { what, expected, found },
            });
        }
        Self::written(r, &t);
        Ok(())
    }

    /// Create or update several resources in one transaction: each at the version it carries
    /// (0: create), all or none. A failed compare is [`StoreError::Conflict`] (re-read and
    /// retry). Owners are not checked: this is for writers that own everything they write
    /// (`apply`).
    pub fn write_all<S: Serialize>(&mut self, rs: &mut [Resource<S>]) -> Result<(), StoreError> {
        let now = now_secs();
        let mut compare = Vec::new();
        let mut success = Vec::new();
        let mut keys = Vec::new();
        for r in rs.iter_mut() {
            if r.metadata.version == 0 {
                r.metadata.created = now;
            }
            r.metadata.updated = now;
            let m = &r.metadata;
            let key = self.layout.key(&m.namespace, &m.kind, &m.id);
            compare.push(Compare::version(&key, CompareResult::Equal, m.version));
            let value = Self::encode(r)?;
            success.push(RequestOp::Put(PutRequest {
                key: key.clone(),
                value,
                ..Default::default()
            }));
            keys.push(key);
        }
        for k in &keys {
            success.push(RequestOp::Range(range_key(k)));
        }
        let mut failure = vec![];
        if let (Some(c), Some(f)) = (self.fence_compare(), &self.fence) {
            compare.push(c);
            failure.push(RequestOp::Range(range_key(&f.key)));
        }
        let req = TxnRequest { compare, success, failure };
        let t = self.timed("txn", |c| c.txn(&req))?;
        if !t.succeeded && self.fence_failed(&t, 0) {
            return Err(StoreError::Deposed);
        }
        if !t.succeeded {
            let what = rs.iter().map(|r| r.metadata.what()).collect::<Vec<_>>().join(", ");
            return Err(StoreError::Conflict { what, expected: 0, found: -1 });
        }
        let n = rs.len();
        for (i, r) in rs.iter_mut().enumerate() {
            if let Some(kv) = t.range(n + i).and_then(|r| r.kvs.first()) {
                r.metadata.version = kv.version;
                r.metadata.revision = kv.mod_revision;
            }
        }
        Ok(())
    }

    /// Read, change with `f`, write; retried from a fresh read on a conflict.
    pub fn modify<S: Serialize + DeserializeOwned>(
        &mut self,
        ns: &str,
        kind: &str,
        id: &str,
        mut f: impl FnMut(&mut Resource<S>),
    ) -> Result<Resource<S>, StoreError> {
        let mut last = None;
        for _ in 0..MODIFY_ATTEMPTS {
            let Some(mut r) = self.get::<S>(ns, kind, id)? else {
                return Err(StoreError::NotFound(describe(ns, kind, id)));
            };
            f(&mut r);
            match self.update(&mut r) {
                Ok(()) => return Ok(r),
                Err(e) if e.is_conflict() => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| StoreError::NotFound(describe(ns, kind, id))))
    }

    /// Start deleting: the phase becomes `TearingDown` (finalizer holders see it and let go).
    /// The stored owner is kept: tearing down is asked of the resource, not a write of its
    /// spec.
    pub fn teardown(&mut self, ns: &str, kind: &str, id: &str) -> Result<(), StoreError> {
        self.modify::<serde_json::Value>(ns, kind, id, |r| r.metadata.phase = Phase::TearingDown)
            .map(|_| ())
    }

    /// Delete the resource at `version` as `owner`; it must have no finalizers left.
    pub fn destroy(
        &mut self,
        ns: &str,
        kind: &str,
        id: &str,
        version: i64,
        owner: &str,
    ) -> Result<(), StoreError> {
        let what = describe(ns, kind, id);
        let Some(current) = self.get::<IgnoredAny>(ns, kind, id)? else {
            return Err(StoreError::NotFound(what));
        };
        if current.metadata.version != version {
            return Err(StoreError::Conflict {
                what,
                expected: version,
                found: current.metadata.version,
            });
        }
        if current.metadata.owner != owner {
            let by = owner.to_owned();
            return Err(StoreError::OwnerConflict { what, owner: current.metadata.owner, by });
        }
        if !current.metadata.finalizers.is_empty() {
            return Err(StoreError::PendingFinalizers {
                what,
                finalizers: current.metadata.finalizers,
            });
        }
        let key = self.layout.key(ns, kind, id);
        let del =
            RequestOp::DeleteRange(DeleteRangeRequest { key: key.clone(), ..Default::default() });
        let t = self.guarded(&key, version, del)?;
        if !t.succeeded {
            return Err(match Self::found(&t) {
                0 => StoreError::NotFound(what),
                found => StoreError::Conflict { what, expected: version, found },
            });
        }
        Ok(())
    }

    /// Every resource of a kind in a namespace, and the revision they were read at (watch
    /// from the next one to miss nothing).
    pub fn list<S: DeserializeOwned>(
        &mut self,
        ns: &str,
        kind: &str,
    ) -> Result<(Vec<Resource<S>>, i64), StoreError> {
        let p = self.layout.kind_prefix(ns, kind);
        let r = self.timed("range", |c| c.range(&etcd::request::range_prefix(&p, 0)))?;
        let list =
            r.kvs.iter().map(|kv| decode(&self.layout, kv, None)).collect::<Result<_, _>>()?;
        Ok((list, r.header.revision))
    }

    /// Watch a kind from `from_revision` (inclusive; a bookmark plus one). A compacted
    /// revision is `etcd::ClientError::Compacted` from [`KindWatch::next`]: list again and watch
    /// from there.
    pub fn watch_kind(
        &mut self,
        ns: &str,
        kind: &str,
        from_revision: i64,
    ) -> Result<KindWatch, StoreError> {
        let p = self.layout.kind_prefix(ns, kind);
        let w = self.client.watch(&WatchCreateRequest {
            range_end: prefix_end(&p),
            key: p,
            start_revision: from_revision,
            prev_kv: true,
            ..Default::default()
        })?;
        Ok(KindWatch {
            watch: w,
            layout: self.layout.clone(),
            after: from_revision.saturating_sub(1),
        })
    }
}

/// A running watch of one kind.
#[derive(Debug)]
pub struct KindWatch {
    watch: Watch,
    layout: Layout,
    /// Events at or below this revision were delivered already.
    after: i64,
}

impl KindWatch {
    /// The next batch of events, waiting at most `wait` (`Ok(None)`: nothing came).
    pub fn next<S: DeserializeOwned>(
        &mut self,
        wait: Duration,
    ) -> Result<Option<Vec<Event<S>>>, StoreError> {
        let Some(r) = self.watch.next(wait)? else { return Ok(None) };
        let mut out = Vec::new();
        for ev in r.events {
            let revision = ev.kv.mod_revision;
            if revision <= self.after {
                continue;
            }
            self.after = revision;
            let (kind, kv) = match ev.kind {
                EventType::Delete => {
                    let Some(prev) = ev.prev_kv else { continue };
                    (EventKind::Destroyed, prev)
                }
                EventType::Put if ev.kv.version == 1 => (EventKind::Created, ev.kv),
                EventType::Put => (EventKind::Updated, ev.kv),
            };
            let mut resource = decode::<S>(&self.layout, &kv, None)?;
            if kind == EventKind::Destroyed {
                resource.metadata.revision = revision;
            }
            out.push(Event { kind, resource, revision });
        }
        Ok(Some(out))
    }
}
