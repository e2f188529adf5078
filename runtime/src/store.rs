// SPDX-License-Identifier: Apache-2.0
//! The resource store: one ordered map keyed by (namespace, kind, id).
//!
//! Rules it enforces, whoever calls it:
//! - only the owner writes, tears down or destroys a resource;
//! - an equal write is a no-op: no version bump, no change event, nobody woken;
//! - a resource with finalizers cannot be destroyed, only torn down; writes to a resource that
//!   is tearing down are refused (the owner waits for the finalizers, then destroys it);
//! - lists come back ordered by ID, which the merge rules depend on (docs/talos.md: Resources and
//!   IDs).

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use model::kinds::{AnySpec, Finalizers, Kind, Metadata, Resource, SpecType};
use model::merge::Provenance;
use model::resource::{Namespace, Phase};

/// Why the store refused an operation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The resource belongs to another controller.
    #[error("{kind} {namespace}/{id} is owned by {owner}, not {writer}")]
    NotOwner {
        /// Namespace.
        namespace: Namespace,
        /// Kind.
        kind: Kind,
        /// ID.
        id: String,
        /// The real owner.
        owner: &'static str,
        /// Who tried.
        writer: &'static str,
    },
    /// Destroy while finalizers remain.
    #[error("{kind} {namespace}/{id} still has finalizers {finalizers:?}")]
    HasFinalizers {
        /// Namespace.
        namespace: Namespace,
        /// Kind.
        kind: Kind,
        /// ID.
        id: String,
        /// The finalizers left.
        finalizers: Vec<&'static str>,
    },
    /// Write to a resource that is tearing down.
    #[error("{kind} {namespace}/{id} is tearing down")]
    TearingDown {
        /// Namespace.
        namespace: Namespace,
        /// Kind.
        kind: Kind,
        /// ID.
        id: String,
    },
    /// No such resource.
    #[error("{kind} {namespace}/{id} not found")]
    NotFound {
        /// Namespace.
        namespace: Namespace,
        /// Kind.
        kind: Kind,
        /// ID.
        id: String,
    },
}

/// What happened to a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// It appeared.
    Created,
    /// Its spec changed.
    Updated,
    /// It entered the tearing-down phase.
    TearingDown,
    /// Its finalizers changed (and it is otherwise unchanged).
    Finalizers,
    /// It is gone.
    Destroyed,
}

/// One change, as reported to the runtime (which wakes dependents) and later to watchers.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// Namespace.
    pub namespace: Namespace,
    /// Kind.
    pub kind: Kind,
    /// ID: the store's own key, shared rather than copied (most changes are dropped unread).
    pub id: Arc<str>,
    /// What happened.
    pub what: ChangeKind,
    /// The owner of the resource.
    pub owner: &'static str,
    /// True when the resource is tearing down with no finalizers left: its owner may destroy it.
    pub destroy_ready: bool,
}

/// Key of a resource in the store.
pub type Key = (Namespace, Kind, String);

/// Ordered resource storage.
///
/// One map per (namespace, kind), each keyed by ID: a lookup borrows the caller's `&str`
/// (no key is built per call) and compares IDs only, and a list is one inner map.
#[derive(Debug, Default)]
pub struct Store {
    // Boxed: B-tree nodes filled in ID order stay about half full, so a slot should be small.
    items: BTreeMap<(Namespace, Kind), BTreeMap<IdKey, Box<Entry>>>,
    len: usize,
    /// The current write pass (see [`Store::begin_pass`]).
    pass: u64,
}

/// A stored resource and the pass that last wrote it, equal writes included: what its owner
/// did not write in a pass, it no longer wants ([`Store::untouched`]).
#[derive(Debug)]
struct Entry {
    resource: Resource,
    written_in: u64,
}

/// A resource ID as the store orders it: byte-wise, as `str` does, but compared eight bytes
/// at a time. The store's IDs share long prefixes (`inet4/10.0.0.1/10.100.3.7/32/1024`), and
/// musl's `memcmp`, which `str`'s ordering calls, compares them one byte at a time.
#[derive(PartialEq, Eq)]
#[repr(transparent)]
struct Id(str);

impl Id {
    fn new(id: &str) -> &Id {
        // SAFETY: `Id` is a `repr(transparent)` wrapper of `str`: same layout and metadata.
        unsafe { &*(id as *const str as *const Id) }
    }
}

impl Ord for Id {
    fn cmp(&self, other: &Self) -> Ordering {
        model::sort::ids(&self.0, &other.0)
    }
}

impl PartialOrd for Id {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The owned key of the store's maps: the same allocation as the resource's
/// [`Metadata::id`] and each [`Change`]'s ID.
#[derive(Debug, PartialEq, Eq)]
struct IdKey(Arc<str>);

impl Borrow<Id> for IdKey {
    fn borrow(&self) -> &Id {
        Id::new(&self.0)
    }
}

impl Ord for IdKey {
    fn cmp(&self, other: &Self) -> Ordering {
        model::sort::ids(&self.0, &other.0)
    }
}

impl PartialOrd for IdKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Store {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// One resource.
    pub fn get(&self, namespace: Namespace, kind: Kind, id: &str) -> Option<&Resource> {
        self.items.get(&(namespace, kind)).and_then(|m| m.get(Id::new(id))).map(|e| &e.resource)
    }

    /// One typed spec.
    pub fn get_spec<S: SpecType>(&self, namespace: Namespace, id: &str) -> Option<&S> {
        self.get(namespace, S::KIND, id).and_then(Resource::spec_as)
    }

    /// All resources of a kind in a namespace, ordered by ID.
    pub fn list(&self, namespace: Namespace, kind: Kind) -> impl Iterator<Item = &Resource> {
        self.items
            .get(&(namespace, kind))
            .into_iter()
            .flat_map(BTreeMap::values)
            .map(|e| &e.resource)
    }

    /// All typed specs of a kind in a namespace as `(id, spec)`, ordered by ID.
    pub fn list_specs<S: SpecType>(
        &self,
        namespace: Namespace,
    ) -> impl Iterator<Item = (&str, &S)> {
        self.list(namespace, S::KIND).filter_map(|r| r.spec_as::<S>().map(|s| (&*r.metadata.id, s)))
    }

    /// Every resource, ordered by (namespace, kind, id).
    pub fn iter(&self) -> impl Iterator<Item = &Resource> {
        self.items.values().flat_map(BTreeMap::values).map(|e| &e.resource)
    }

    /// How many resources each (namespace, kind) holds, in (namespace, kind) order, kinds
    /// without any left out: one step per kind, not per resource.
    pub fn counts(&self) -> impl Iterator<Item = (Namespace, Kind, usize)> + '_ {
        self.items.iter().filter(|(_, m)| !m.is_empty()).map(|((ns, k), m)| (*ns, *k, m.len()))
    }

    /// Start a new write pass: every put from now on is stamped with it.
    pub fn begin_pass(&mut self) {
        self.pass += 1;
    }

    /// The IDs of the resources of `kind` in `namespace` owned by `owner` that were not
    /// written (not even with an equal spec) during the current pass.
    pub fn untouched(&self, owner: &str, namespace: Namespace, kind: Kind) -> Vec<Arc<str>> {
        self.items
            .get(&(namespace, kind))
            .into_iter()
            .flat_map(BTreeMap::values)
            .filter(|e| e.written_in != self.pass && e.resource.metadata.owner == owner)
            .map(|e| e.resource.metadata.id.clone())
            .collect()
    }

    /// Number of resources.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Create or update a resource owned by `owner`. Returns the change, or `None` when the
    /// stored spec was already equal.
    pub fn put(
        &mut self,
        owner: &'static str,
        namespace: Namespace,
        id: &str,
        spec: AnySpec,
    ) -> Result<Option<Change>, StoreError> {
        self.write(owner, namespace, id, spec, None)
    }

    /// [`Store::put`], then [`Store::set_provenance`], in one lookup.
    pub fn put_with_provenance(
        &mut self,
        owner: &'static str,
        namespace: Namespace,
        id: &str,
        spec: AnySpec,
        provenance: Provenance,
    ) -> Result<Option<Change>, StoreError> {
        self.write(owner, namespace, id, spec, Some(provenance))
    }

    /// Put `spec`, and replace the provenance when one is given.
    fn write(
        &mut self,
        owner: &'static str,
        namespace: Namespace,
        id: &str,
        spec: AnySpec,
        provenance: Option<Provenance>,
    ) -> Result<Option<Change>, StoreError> {
        let kind = spec.kind();
        let items = self.items.entry((namespace, kind)).or_default();
        // An ID past the last one is new without a search: writers that go in ID order (the
        // merges, a layer written afresh) then pay for one search per resource, not two.
        let id = Id::new(id);
        let past_the_end =
            items.last_key_value().is_none_or(|(last, _)| Borrow::<Id>::borrow(last) < id);
        let found = if past_the_end { None } else { items.get_mut(id) };
        match found {
            Some(entry) => {
                let existing = &mut entry.resource;
                check_owner(existing, owner)?;
                if existing.metadata.phase == Phase::TearingDown {
                    return Err(StoreError::TearingDown { namespace, kind, id: id.0.to_owned() });
                }
                entry.written_in = self.pass;
                if let Some(provenance) = provenance {
                    set_provenance(existing, provenance);
                }
                if existing.spec == spec {
                    return Ok(None);
                }
                existing.spec = spec;
                existing.metadata.version += 1;
                existing.metadata.updated = SystemTime::now();
                Ok(Some(change(existing, ChangeKind::Updated)))
            }
            None => {
                let now = SystemTime::now();
                let key = IdKey(Arc::from(&id.0));
                let resource = Resource {
                    metadata: Metadata {
                        namespace,
                        kind,
                        id: key.0.clone(),
                        version: 1,
                        owner,
                        phase: Phase::Running,
                        created: now,
                        updated: now,
                        finalizers: Finalizers::default(),
                    },
                    spec,
                    provenance: provenance.filter(|p| !p.is_empty()).map(Box::new),
                };
                let ch = change(&resource, ChangeKind::Created);
                let entry = Entry { resource, written_in: self.pass };
                items.insert(key, Box::new(entry));
                self.len += 1;
                Ok(Some(ch))
            }
        }
    }

    /// Replace the provenance of a resource the caller owns. Provenance is explanation, not
    /// state: it bumps no version and wakes nobody.
    pub fn set_provenance(
        &mut self,
        owner: &'static str,
        namespace: Namespace,
        kind: Kind,
        id: &str,
        provenance: Provenance,
    ) -> Result<(), StoreError> {
        let r = &mut self.get_mut(namespace, kind, id)?.resource;
        check_owner(r, owner)?;
        set_provenance(r, provenance);
        Ok(())
    }

    /// Is any resource of `kind` in `namespace` tearing down? One walk of the kind, for
    /// callers that would otherwise look each of their IDs up.
    pub fn any_tearing_down(&self, namespace: Namespace, kind: Kind) -> bool {
        self.list(namespace, kind).any(|r| r.metadata.phase == Phase::TearingDown)
    }

    /// Start tearing a resource down. If it has no finalizers it is destroyed at once.
    /// Returns `None` when nothing changed (already tearing down, or absent).
    pub fn teardown(
        &mut self,
        owner: &'static str,
        namespace: Namespace,
        kind: Kind,
        id: &str,
    ) -> Result<Option<Change>, StoreError> {
        let Some(Entry { resource: r, .. }) = self
            .items
            .get_mut(&(namespace, kind))
            .and_then(|m| m.get_mut(Id::new(id)))
            .map(|e| &mut **e)
        else {
            return Ok(None);
        };
        check_owner(r, owner)?;
        if r.metadata.finalizers.is_empty() {
            return self.destroy(owner, namespace, kind, id);
        }
        if r.metadata.phase == Phase::TearingDown {
            return Ok(None);
        }
        r.metadata.phase = Phase::TearingDown;
        r.metadata.version += 1;
        r.metadata.updated = SystemTime::now();
        Ok(Some(change(r, ChangeKind::TearingDown)))
    }

    /// Remove a resource that has no finalizers. Absent resources are not an error.
    pub fn destroy(
        &mut self,
        owner: &'static str,
        namespace: Namespace,
        kind: Kind,
        id: &str,
    ) -> Result<Option<Change>, StoreError> {
        let Some(items) = self.items.get_mut(&(namespace, kind)) else {
            return Ok(None);
        };
        let id = Id::new(id);
        let Some(Entry { resource: r, .. }) = items.get(id).map(|e| &**e) else {
            return Ok(None);
        };
        check_owner(r, owner)?;
        if !r.metadata.finalizers.is_empty() {
            return Err(StoreError::HasFinalizers {
                namespace,
                kind,
                id: id.0.to_owned(),
                finalizers: r.metadata.finalizers.iter().collect(),
            });
        }
        let mut ch = change(r, ChangeKind::Destroyed);
        ch.destroy_ready = false;
        items.remove(id);
        if items.is_empty() {
            self.items.remove(&(namespace, kind));
        }
        self.len -= 1;
        Ok(Some(ch))
    }

    /// Add a finalizer (any controller may, on any resource that is running).
    pub fn add_finalizer(
        &mut self,
        namespace: Namespace,
        kind: Kind,
        id: &str,
        finalizer: &'static str,
    ) -> Result<Option<Change>, StoreError> {
        let Entry { resource: r, .. } = self.get_mut(namespace, kind, id)?;
        if r.metadata.phase == Phase::TearingDown {
            return Err(StoreError::TearingDown { namespace, kind, id: id.to_owned() });
        }
        if !r.metadata.finalizers.insert(finalizer) {
            return Ok(None);
        }
        Ok(Some(change(r, ChangeKind::Finalizers)))
    }

    /// Remove a finalizer. When it was the last one on a resource that is tearing down, the
    /// change is `destroy_ready` and the runtime wakes the owner to destroy it.
    pub fn remove_finalizer(
        &mut self,
        namespace: Namespace,
        kind: Kind,
        id: &str,
        finalizer: &str,
    ) -> Result<Option<Change>, StoreError> {
        let Entry { resource: r, .. } = self.get_mut(namespace, kind, id)?;
        if !r.metadata.finalizers.remove(finalizer) {
            return Ok(None);
        }
        Ok(Some(change(r, ChangeKind::Finalizers)))
    }

    fn get_mut(
        &mut self,
        namespace: Namespace,
        kind: Kind,
        id: &str,
    ) -> Result<&mut Entry, StoreError> {
        self.items
            .get_mut(&(namespace, kind))
            .and_then(|m| m.get_mut(Id::new(id)))
            .map(|e| &mut **e)
            .ok_or_else(|| StoreError::NotFound { namespace, kind, id: id.to_owned() })
    }
}

/// The provenance of `r` becomes `provenance` (none when empty); the box is reused.
fn set_provenance(r: &mut Resource, provenance: Provenance) {
    match (&mut r.provenance, provenance.is_empty()) {
        (_, true) => r.provenance = None,
        (Some(held), false) => **held = provenance,
        (None, false) => r.provenance = Some(Box::new(provenance)),
    }
}

fn check_owner(r: &Resource, writer: &'static str) -> Result<(), StoreError> {
    if r.metadata.owner == writer {
        return Ok(());
    }
    Err(StoreError::NotOwner {
        namespace: r.metadata.namespace,
        kind: r.metadata.kind,
        id: r.metadata.id.to_string(),
        owner: r.metadata.owner,
        writer,
    })
}

fn change(r: &Resource, what: ChangeKind) -> Change {
    Change {
        namespace: r.metadata.namespace,
        kind: r.metadata.kind,
        id: r.metadata.id.clone(),
        what,
        owner: r.metadata.owner,
        destroy_ready: r.metadata.phase == Phase::TearingDown && r.metadata.finalizers.is_empty(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::resource::{ConfigLayer, HostnameSpec};

    fn host(name: &str) -> AnySpec {
        HostnameSpec {
            hostname: name.into(),
            domainname: String::new(),
            layer: ConfigLayer::Default,
        }
        .into()
    }

    #[test]
    fn equal_write_changes_nothing() {
        let mut s = Store::new();
        let ch = s.put("a", Namespace::Network, "hostname", host("x")).unwrap().unwrap();
        assert_eq!(ch.what, ChangeKind::Created);
        assert_eq!(s.put("a", Namespace::Network, "hostname", host("x")).unwrap(), None);
        assert_eq!(
            s.get(Namespace::Network, Kind::HostnameSpec, "hostname").unwrap().metadata.version,
            1
        );
        let ch = s.put("a", Namespace::Network, "hostname", host("y")).unwrap().unwrap();
        assert_eq!(ch.what, ChangeKind::Updated);
        assert_eq!(
            s.get(Namespace::Network, Kind::HostnameSpec, "hostname").unwrap().metadata.version,
            2
        );
    }

    /// The provenance a merge of one hostname input `id` records.
    fn provenance_from(id: &str) -> Provenance {
        let spec = HostnameSpec {
            hostname: "x".into(),
            domainname: String::new(),
            layer: ConfigLayer::Default,
        };
        let merged = model::merge::merge_hostnames(&[(id, &spec)]);
        merged.specs.into_values().next().unwrap().provenance
    }

    /// One write of spec and provenance does what `put` then `set_provenance` did: the
    /// provenance is replaced even when the spec is equal (which changes nothing else), an
    /// empty one clears it, and the owner and tearing-down rules hold.
    #[test]
    fn counts_agree_with_a_walk_over_every_resource_and_leave_out_emptied_kinds() {
        let mut s = Store::new();
        for (ns, id) in
            [(Namespace::Network, "a"), (Namespace::Network, "b"), (Namespace::Config, "c")]
        {
            s.put("o", ns, id, host(id)).unwrap();
        }
        let walked = |s: &Store| {
            let mut v: Vec<(Namespace, Kind, usize)> = Vec::new();
            for r in s.iter() {
                match v.last_mut() {
                    Some((ns, k, n)) if (*ns, *k) == (r.metadata.namespace, r.metadata.kind) => {
                        *n += 1
                    }
                    _ => v.push((r.metadata.namespace, r.metadata.kind, 1)),
                }
            }
            v
        };
        let counts: Vec<_> = s.counts().collect();
        assert_eq!(counts.len(), 2, "{counts:?}");
        assert_eq!(counts, walked(&s));
        s.destroy("o", Namespace::Config, Kind::HostnameSpec, "c").unwrap();
        let counts: Vec<_> = s.counts().collect();
        assert_eq!(counts, [(Namespace::Network, Kind::HostnameSpec, 2)]);
        assert_eq!(counts, walked(&s));
    }

    #[test]
    fn put_with_provenance_is_put_then_set_provenance() {
        let (ns, kind) = (Namespace::Network, Kind::HostnameSpec);
        let (a, b) = (provenance_from("default/a"), provenance_from("default/b"));
        let mut one = Store::new();
        let mut two = Store::new();
        let steps = [(host("x"), a.clone()), (host("x"), b.clone()), (host("y"), a.clone())];
        for (spec, provenance) in steps.into_iter().chain([(host("y"), Provenance::default())]) {
            let got = one.put_with_provenance("o", ns, "h", spec.clone(), provenance.clone());
            let want = two.put("o", ns, "h", spec);
            two.set_provenance("o", ns, kind, "h", provenance).unwrap();
            assert_eq!(got, want);
            let (r1, r2) = (one.get(ns, kind, "h").unwrap(), two.get(ns, kind, "h").unwrap());
            assert_eq!((&r1.spec, &r1.provenance), (&r2.spec, &r2.provenance));
            assert_eq!(r1.metadata.version, r2.metadata.version);
        }
        assert!(one.get(ns, kind, "h").unwrap().provenance.is_none());
        let fresh = one.put_with_provenance("o", ns, "new", host("z"), b.clone()).unwrap();
        assert_eq!(fresh.map(|c| c.what), Some(ChangeKind::Created));
        assert_eq!(one.get(ns, kind, "new").unwrap().provenance.as_deref(), Some(&b));
        let err = one.put_with_provenance("p", ns, "new", host("z"), a.clone()).unwrap_err();
        assert!(matches!(err, StoreError::NotOwner { .. }), "{err}");
        assert_eq!(one.get(ns, kind, "new").unwrap().provenance.as_deref(), Some(&b));

        assert!(!one.any_tearing_down(ns, kind));
        one.add_finalizer(ns, kind, "new", "spec").unwrap();
        one.teardown("o", ns, kind, "new").unwrap();
        assert!(one.any_tearing_down(ns, kind) && !one.any_tearing_down(ns, Kind::RouteSpec));
        let err = one.put_with_provenance("o", ns, "new", host("z"), a).unwrap_err();
        assert!(matches!(err, StoreError::TearingDown { .. }), "{err}");
    }

    /// New IDs past the last one skip the search; whatever the order, a second write of each
    /// finds it (equal: no change; different: updated) and nothing is stored twice.
    #[test]
    fn writes_in_and_out_of_id_order_find_their_resource() {
        let mut s = Store::new();
        let ns = Namespace::Network;
        for id in ["b", "a", "c", "e", "d"] {
            let ch = s.put("o", ns, id, host(id)).unwrap().unwrap();
            assert_eq!(ch.what, ChangeKind::Created);
        }
        for id in ["a", "b", "c", "d", "e"] {
            assert_eq!(s.put("o", ns, id, host(id)).unwrap(), None, "{id}");
        }
        let ch = s.put("o", ns, "e", host("x")).unwrap().unwrap();
        assert_eq!(ch.what, ChangeKind::Updated);
        assert!(s.put("p", ns, "e", host("y")).is_err(), "the last ID is looked up");
        assert_eq!(s.len(), 5);
        let ids: Vec<_> = s.list(ns, Kind::HostnameSpec).map(|r| &*r.metadata.id).collect();
        assert_eq!(ids, ["a", "b", "c", "d", "e"]);
    }

    /// The word-wise comparison orders IDs exactly as `str` does: shared prefixes of every
    /// length around the word size, a prefix of the other, bytes above 0x7f.
    #[test]
    fn ids_order_as_str_does() {
        let mut ids: Vec<String> = Vec::new();
        for stem in ["", "inet4/10.0.0.1/", "inet4/10.0.0.1/10.100.3.", "a", "abcdefgh", "é"] {
            for tail in ["", "7", "7/32/1024", "10/32/1024", "9", "\u{ff}", "abcdefghi", "abcdefgh"]
            {
                ids.push(format!("{stem}{tail}"));
            }
        }
        for a in &ids {
            for b in &ids {
                assert_eq!(model::sort::ids(a, b), a.cmp(b), "{a:?} {b:?}");
            }
        }
        let mut s = Store::new();
        for id in ids.iter().rev() {
            s.put("o", Namespace::Network, id, host(id)).unwrap();
        }
        let listed: Vec<&str> =
            s.list(Namespace::Network, Kind::HostnameSpec).map(|r| &*r.metadata.id).collect();
        let mut sorted: Vec<&str> = ids.iter().map(String::as_str).collect();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(listed, sorted);
        for id in &sorted {
            assert!(s.get(Namespace::Network, Kind::HostnameSpec, id).is_some(), "{id:?}");
        }
    }

    #[test]
    fn only_the_owner_writes() {
        let mut s = Store::new();
        s.put("a", Namespace::Network, "hostname", host("x")).unwrap();
        let err = s.put("b", Namespace::Network, "hostname", host("y")).unwrap_err();
        assert!(matches!(err, StoreError::NotOwner { .. }), "{err}");
        assert!(s.destroy("b", Namespace::Network, Kind::HostnameSpec, "hostname").is_err());
        assert!(s.teardown("b", Namespace::Network, Kind::HostnameSpec, "hostname").is_err());
        assert_eq!(
            s.get_spec::<HostnameSpec>(Namespace::Network, "hostname").unwrap().hostname,
            "x"
        );
    }

    #[test]
    fn finalizers_block_destroy_until_removed() {
        let mut s = Store::new();
        let ns = Namespace::Network;
        s.put("a", ns, "hostname", host("x")).unwrap();
        s.add_finalizer(ns, Kind::HostnameSpec, "hostname", "spec").unwrap();
        assert!(matches!(
            s.destroy("a", ns, Kind::HostnameSpec, "hostname"),
            Err(StoreError::HasFinalizers { .. })
        ));
        let ch = s.teardown("a", ns, Kind::HostnameSpec, "hostname").unwrap().unwrap();
        assert_eq!((ch.what, ch.destroy_ready), (ChangeKind::TearingDown, false));
        assert!(matches!(
            s.put("a", ns, "hostname", host("y")),
            Err(StoreError::TearingDown { .. })
        ));
        assert!(s.add_finalizer(ns, Kind::HostnameSpec, "hostname", "other").is_err());
        let ch = s.remove_finalizer(ns, Kind::HostnameSpec, "hostname", "spec").unwrap().unwrap();
        assert!(ch.destroy_ready);
        assert_eq!(
            s.destroy("a", ns, Kind::HostnameSpec, "hostname").unwrap().unwrap().what,
            ChangeKind::Destroyed
        );
        assert!(s.is_empty());
    }

    #[test]
    fn teardown_without_finalizers_destroys() {
        let mut s = Store::new();
        s.put("a", Namespace::Network, "hostname", host("x")).unwrap();
        let ch =
            s.teardown("a", Namespace::Network, Kind::HostnameSpec, "hostname").unwrap().unwrap();
        assert_eq!(ch.what, ChangeKind::Destroyed);
        assert!(s.is_empty());
    }

    #[test]
    fn lists_are_id_ordered_and_scoped() {
        let mut s = Store::new();
        for id in ["c", "a", "b"] {
            s.put("o", Namespace::NetworkConfig, id, host(id)).unwrap();
        }
        s.put("o", Namespace::Network, "z", host("z")).unwrap();
        let ids: Vec<_> =
            s.list_specs::<HostnameSpec>(Namespace::NetworkConfig).map(|(id, _)| id).collect();
        assert_eq!(ids, ["a", "b", "c"]);
        assert_eq!(s.list(Namespace::Network, Kind::AddressSpec).count(), 0);
    }
}
