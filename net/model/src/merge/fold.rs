// SPDX-License-Identifier: Apache-2.0
//! The fold every merge shares: [`Merged`] output with [`Provenance`], grouping by natural ID in
//! `network-config` ID order, and the winner rules (docs/talos.md: Merge).

use std::collections::BTreeMap;

use crate::resource::LayeredSpec;

/// Output of one merge: one spec per natural ID, with where its values came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Merged<S> {
    /// Merged specs keyed by natural ID (the ID they get in namespace `network`).
    pub specs: BTreeMap<String, MergedSpec<S>>,
    /// Problems fixed up while merging, e.g. dropped unmanaged address flags (docs/talos.md:
    /// Merge).
    pub warnings: Vec<String>,
}

// Written by hand: a derive would demand `S: Default`, which most specs are not.
impl<S> Default for Merged<S> {
    fn default() -> Self {
        Self { specs: BTreeMap::new(), warnings: Vec::new() }
    }
}

/// One merged spec and the provenance of its fields.
#[derive(Debug, Clone, PartialEq)]
pub struct MergedSpec<S> {
    /// The merged value, as written to namespace `network`.
    pub spec: S,
    /// Which inputs determined which field.
    pub provenance: Provenance,
}

/// For each top-level field (camelCase name as serialized, e.g. `"mtu"`, `"dnsServers"`), the
/// IDs of the `network-config` inputs that determined its value, in the order they were
/// applied. Fields no input set are absent.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Provenance {
    /// Field name to contributing input IDs.
    pub fields: BTreeMap<&'static str, Vec<String>>,
}

impl Provenance {
    /// The inputs that determined `field`; empty when none did.
    pub fn of(&self, field: &str) -> &[String] {
        self.fields.get(field).map_or(&[], Vec::as_slice)
    }

    /// Every field of a whole-spec winner comes from that one input.
    pub(super) fn whole(fields: &[&'static str], id: &str) -> Self {
        Self { fields: crate::sort::into_map(fields.iter().map(|f| (*f, vec![id.to_owned()]))) }
    }

    /// Append `id` to the contributors of `field`.
    pub(super) fn record(&mut self, field: &'static str, id: &str) {
        self.fields.entry(field).or_default().push(id.to_owned());
    }

    /// Replace the contributors of `field`; an empty list removes the field, keeping "absent
    /// means unset" true.
    pub(super) fn set(&mut self, field: &'static str, ids: Vec<String>) {
        if ids.is_empty() {
            self.fields.remove(field);
        } else {
            self.fields.insert(field, ids);
        }
    }
}

/// What the merge needs to know about a layered spec type beyond its natural ID and layer
/// ([`LayeredSpec`], beside the type).
pub(super) trait Layered: Clone + LayeredSpec {
    /// Serialized names of all top-level fields, for whole-spec provenance.
    const FIELDS: &'static [&'static str];
}

/// How a tie between two inputs at the same layer is broken when one spec wins outright.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SameLayer {
    /// The input later in ID order wins (address, route, operator, rule: docs/talos.md: Merge).
    LaterWins,
    /// The input first in ID order wins (hostname: docs/talos.md: Merge).
    FirstWins,
}

/// The inputs sorted by `network-config` ID (docs/talos.md: Resources and IDs). The sort is stable.
pub(super) fn sorted_by_id<'a, S>(inputs: &[(&'a str, &'a S)]) -> Vec<(&'a str, &'a S)> {
    let mut sorted = inputs.to_vec();
    crate::sort::by(&mut sorted, |a, b| a.0.cmp(b.0));
    sorted
}

/// The inputs grouped by natural ID, each group in `network-config` ID order.
pub(super) fn by_natural_id<'a, S: Layered>(
    inputs: &[(&'a str, &'a S)],
) -> BTreeMap<String, Vec<(&'a str, &'a S)>> {
    let mut groups: BTreeMap<String, Vec<(&'a str, &'a S)>> = BTreeMap::new();
    for (id, spec) in sorted_by_id(inputs) {
        groups.entry(spec.natural_id()).or_default().push((id, spec));
    }
    groups
}

/// The single winner of a group given in ID order: a strictly higher layer always replaces
/// the current pick, an equal layer only under [`SameLayer::LaterWins`].
pub(super) fn pick_winner<'a, S: Layered>(
    group: &[(&'a str, &'a S)],
    tie: SameLayer,
) -> Option<(&'a str, &'a S)> {
    group.iter().copied().fold(None, |best, candidate| match best {
        Some(current) => {
            let (new, old) = (candidate.1.layer(), current.1.layer());
            let take = new > old || (new == old && tie == SameLayer::LaterWins);
            Some(if take { candidate } else { current })
        }
        None => Some(candidate),
    })
}

/// Whole-spec merge shared by every "one input wins outright" type. `finish` sees each winner
/// as `(natural id, input id, spec, warnings)` and may fix it up before output.
pub(super) fn merge_whole<S: Layered>(
    inputs: &[(&str, &S)],
    tie: SameLayer,
    mut finish: impl FnMut(&str, &str, &mut S, &mut Vec<String>),
) -> Merged<S> {
    let mut merged = Merged::default();
    for (natural, group) in by_natural_id(inputs) {
        let Some((id, winner)) = pick_winner(&group, tie) else {
            continue;
        };
        let mut spec = winner.clone();
        finish(&natural, id, &mut spec, &mut merged.warnings);
        let provenance = Provenance::whole(S::FIELDS, id);
        merged.specs.insert(natural, MergedSpec { spec, provenance });
    }
    merged
}

/// The IDs from `applied` (in application order) that still own an entry of the merged list
/// (`owners` holds the input ID behind each surviving entry) or that equal `decider`: an input
/// that fixed the list's value without leaving an entry, e.g. an explicit empty override.
pub(super) fn contributors<'a>(
    applied: impl IntoIterator<Item = &'a str>,
    owners: &[&str],
    decider: Option<&str>,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for id in applied {
        let counts = decider == Some(id) || owners.contains(&id);
        if counts && !out.iter().any(|o| o == id) {
            out.push(id.to_owned());
        }
    }
    out
}
