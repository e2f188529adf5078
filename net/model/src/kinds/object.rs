// SPDX-License-Identifier: Apache-2.0
//! The resource object the store holds: [`Metadata`] plus one [`AnySpec`].
//!
//! Invariants kept by the store (see `crate::runtime::store`): `version` starts at 1 and grows by
//! one on every change; an equal write changes nothing; a resource with finalizers is only ever
//! torn down (phase `tearingDown`), and destroyed once the last finalizer is gone.

use std::sync::Arc;
use std::time::SystemTime;

use serde::{Serialize, Serializer};

use super::kind::{AnySpec, Kind, SpecType};
use crate::merge::Provenance;
use crate::resource::{Namespace, Phase, Rfc3339};

/// COSI-style metadata.
#[derive(Clone, PartialEq, Debug, Serialize)]
pub struct Metadata {
    /// Namespace.
    pub namespace: Namespace,
    /// Kind, serialized as the full type name.
    #[serde(rename = "type")]
    pub kind: Kind,
    /// Natural (or layered) ID: one allocation shared with the store's key and every change
    /// event about the resource.
    #[serde(serialize_with = "ser_id")]
    pub id: Arc<str>,
    /// Starts at 1; grows by one on each change.
    pub version: u64,
    /// The controller that owns (alone may write) it: a controller's or input source's name.
    pub owner: &'static str,
    /// Running or tearing down.
    pub phase: Phase,
    /// When it was created.
    #[serde(serialize_with = "ser_time")]
    pub created: SystemTime,
    /// When it last changed.
    #[serde(serialize_with = "ser_time")]
    pub updated: SystemTime,
    /// Controllers that must release it before it can be destroyed.
    #[serde(skip_serializing_if = "Finalizers::is_empty")]
    pub finalizers: Finalizers,
}

/// The controllers holding a resource, by name and in name order.
///
/// Finalizer names are controller names (`&'static str`), so the lists that occur are few (a
/// resource has one or two, from a fixed set of controllers). Each distinct list is made once
/// and shared: a resource holds a reference to it and no allocation of its own, where a
/// vector per resource cost an allocation for each of ten thousand routes.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize)]
#[serde(transparent)]
pub struct Finalizers(&'static [&'static str]);

/// Every finalizer list made so far. A list is added only for a combination of controller
/// names not seen before, so this stays as small as the set of controllers allows.
static LISTS: std::sync::Mutex<Vec<&'static [&'static str]>> = std::sync::Mutex::new(Vec::new());

impl Finalizers {
    /// None left.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Is `name` holding the resource?
    pub fn contains(&self, name: &str) -> bool {
        self.0.binary_search(&name).is_ok()
    }

    /// Add `name`; false when it was already there.
    pub fn insert(&mut self, name: &'static str) -> bool {
        match self.0.binary_search(&name) {
            Ok(_) => false,
            Err(at) => {
                self.0 = shared(self.0, at, Some(name));
                true
            }
        }
    }

    /// Remove `name`; false when it was not there.
    pub fn remove(&mut self, name: &str) -> bool {
        match self.0.binary_search(&name) {
            Ok(at) => {
                self.0 = shared(self.0, at, None);
                true
            }
            Err(_) => false,
        }
    }

    /// The names, in order.
    pub fn iter(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.0.iter().copied()
    }
}

/// The one shared copy of `old` with `name` inserted at `at` (`None`: with the name at `at`
/// removed). The edited list is built only when it was never seen: every resource a
/// controller holds gets the same list, so a large apply finds it ten thousand times.
fn shared(
    old: &'static [&'static str],
    at: usize,
    name: Option<&'static str>,
) -> &'static [&'static str] {
    let (head, tail) = old.split_at_checked(at).unwrap_or((old, &[]));
    let tail = if name.is_some() { tail } else { tail.get(1..).unwrap_or_default() };
    let edited = || head.iter().copied().chain(name).chain(tail.iter().copied());
    let len = head.len() + usize::from(name.is_some()) + tail.len();
    if len == 0 {
        return &[];
    }
    // A poisoned lock still holds a valid list: a panic elsewhere cannot corrupt it.
    let mut lists = LISTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(found) = lists.iter().find(|l| l.len() == len && l.iter().copied().eq(edited())) {
        return found;
    }
    let made: &'static [&'static str] = Box::leak(edited().collect::<Box<[_]>>());
    lists.push(made);
    made
}

/// A resource: metadata plus its spec.
#[derive(Clone, PartialEq, Debug, Serialize)]
pub struct Resource {
    /// Metadata.
    pub metadata: Metadata,
    /// The spec.
    pub spec: AnySpec,
    /// For merged specs: per field, the `network-config` inputs its value came from (boxed:
    /// most resources have none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Box<Provenance>>,
}

impl Resource {
    /// The spec as type `S`, if it is one.
    pub fn spec_as<S: SpecType>(&self) -> Option<&S> {
        S::from_any(&self.spec)
    }
}

fn ser_id<S: Serializer>(id: &Arc<str>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(id)
}

fn ser_time<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    let t = Rfc3339(*t);
    match t.to_array() {
        Some(text) => s.serialize_str(std::str::from_utf8(&text).unwrap_or_default()),
        None => s.collect_str(&t),
    }
}

#[cfg(test)]
mod tests {
    use super::Finalizers;

    #[test]
    fn finalizers_stay_sorted_and_equal_lists_are_one_copy() {
        let mut a = Finalizers::default();
        assert!(a.insert("b.Controller") && a.insert("a.Controller"));
        assert!(!a.insert("a.Controller"));
        assert_eq!(a.iter().collect::<Vec<_>>(), ["a.Controller", "b.Controller"]);
        assert!(a.contains("b.Controller") && !a.contains("c.Controller"));
        let mut b = Finalizers::default();
        assert!(b.insert("a.Controller") && b.insert("b.Controller"));
        assert_eq!(a, b);
        // Made once, then shared.
        assert!(std::ptr::eq(a.0, b.0));
        assert!(a.remove("a.Controller") && !a.remove("a.Controller"));
        assert_eq!(a.iter().collect::<Vec<_>>(), ["b.Controller"]);
        assert!(a.remove("b.Controller") && a.is_empty());
        assert_eq!(serde_json::to_string(&b).unwrap(), r#"["a.Controller","b.Controller"]"#);
    }

    /// Inserting and removing at the front, the middle and the end gives the list a sorted
    /// `Vec` would hold.
    #[test]
    fn edits_anywhere_in_the_list_match_a_sorted_vec() {
        const NAMES: [&str; 5] = ["c", "a", "e", "b", "d"];
        let (mut f, mut v) = (Finalizers::default(), Vec::new());
        for name in NAMES {
            assert!(f.insert(name));
            v.push(name);
            v.sort_unstable();
            assert_eq!(f.iter().collect::<Vec<_>>(), v);
        }
        for name in ["e", "a", "c", "d", "b"] {
            assert!(f.remove(name));
            v.retain(|n| *n != name);
            assert_eq!(f.iter().collect::<Vec<_>>(), v);
        }
        assert!(f.is_empty());
    }
}
