// SPDX-License-Identifier: Apache-2.0
//! The resource object the store holds: [`Metadata`] plus one [`AnySpec`].
//!
//! Invariants kept by the store (see `crate::runtime::store`): `version` starts at 1 and grows by
//! one on every change; an equal write changes nothing; a resource with finalizers is only ever
//! torn down (phase `tearingDown`), and destroyed once the last finalizer is gone.

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
    /// Natural (or layered) ID.
    pub id: String,
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

/// The controllers holding a resource, by name and in name order. A resource has one or
/// two at most, so a sorted list beats a tree (which allocates a node for the first one).
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize)]
#[serde(transparent)]
pub struct Finalizers(Vec<&'static str>);

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
                self.0.insert(at, name);
                true
            }
        }
    }

    /// Remove `name`; false when it was not there.
    pub fn remove(&mut self, name: &str) -> bool {
        match self.0.binary_search(&name) {
            Ok(at) => {
                self.0.remove(at);
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

fn ser_time<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    let t = Rfc3339(*t);
    match t.to_array() {
        Some(text) => s.serialize_str(std::str::from_utf8(&text).unwrap_or_default()),
        None => s.collect_str(&t),
    }
}
