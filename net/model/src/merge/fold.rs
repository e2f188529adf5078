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

/// Where a merged spec's values came from: for each top-level field (camelCase name as
/// serialized, e.g. `"mtu"`, `"dnsServers"`), the IDs of the `network-config` inputs that
/// determined it, in the order they were applied. Fields no input set are absent.
///
/// The common case, one input winning the whole spec, is kept as that one list (`whole`)
/// instead of a copy per field: a node with ten thousand routes has ten thousand of these.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Provenance {
    /// Inputs that decided every field; empty when provenance is per field.
    whole: Vec<String>,
    /// Field name to contributing input IDs.
    fields: BTreeMap<&'static str, Vec<String>>,
}

impl Provenance {
    /// The inputs that determined `field`; empty when none did.
    pub fn of(&self, field: &str) -> &[String] {
        self.fields.get(field).map_or(&self.whole, Vec::as_slice)
    }

    /// True when nothing is recorded (specs that are not merged).
    pub fn is_empty(&self) -> bool {
        self.whole.is_empty() && self.fields.is_empty()
    }

    /// The fields with an entry of their own; empty for a whole-spec winner.
    pub fn fields(&self) -> impl Iterator<Item = (&'static str, &[String])> + '_ {
        self.fields.iter().map(|(k, v)| (*k, v.as_slice()))
    }

    /// Every field of a whole-spec winner comes from that one input.
    pub(super) fn whole(id: &str) -> Self {
        Self { whole: vec![id.to_owned()], fields: BTreeMap::new() }
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

    /// The same provenance, stored as one list when every recorded field has the same
    /// contributors (a spec one input decided, field by field).
    pub fn compacted(mut self) -> Self {
        let mut lists = self.fields.values();
        let same = lists.next().is_some_and(|first| lists.all(|l| l == first));
        if same && self.whole.is_empty() {
            let fields = std::mem::take(&mut self.fields);
            self.whole = fields.into_values().next().unwrap_or_default();
        }
        self
    }
}

/// Serialized as a map: field name to inputs, or `{"*": inputs}` for a whole-spec winner.
impl serde::Serialize for Provenance {
    fn serialize<Se: serde::Serializer>(&self, s: Se) -> Result<Se::Ok, Se::Error> {
        use serde::ser::SerializeMap;
        let whole = usize::from(!self.whole.is_empty());
        let mut map = s.serialize_map(Some(whole + self.fields.len()))?;
        if whole == 1 {
            map.serialize_entry("*", &self.whole)?;
        }
        for (k, v) in &self.fields {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// What the merge needs to know about a layered spec type beyond its natural ID and layer
/// ([`LayeredSpec`], beside the type).
pub(super) trait Layered: Clone + LayeredSpec {
    /// Serialized names of all top-level fields: the tests check them against serialization
    /// and that a whole-spec winner is named for each.
    #[cfg(test)]
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
/// the current pick, an equal layer only under [`SameLayer::LaterWins`]. The rule as written;
/// [`merge_whole`] applies it run by run, and the tests hold the two to the same result.
#[cfg(test)]
pub(super) fn pick_winner<'a, S: Layered>(
    group: &[(&'a str, &'a S)],
    tie: SameLayer,
) -> Option<(&'a str, &'a S)> {
    group.iter().copied().fold(None, |best, candidate| match best {
        Some(current) if !replaces(candidate.1, current.1, tie) => Some(current),
        _ => Some(candidate),
    })
}

/// Does `candidate`, later in ID order, take the place of the current pick `current`?
fn replaces<S: Layered>(candidate: &S, current: &S, tie: SameLayer) -> bool {
    let (new, old) = (candidate.layer(), current.layer());
    new > old || (new == old && tie == SameLayer::LaterWins)
}

/// Whole-spec merge shared by every "one input wins outright" type. `finish` sees each winner
/// as `(natural id, input id, spec, warnings)` and may fix it up before output.
///
/// The same result as `pick_winner` over each group of [`by_natural_id`], built without a
/// map of groups: the inputs are sorted once by (natural ID, input ID), so each group is a run
/// in ID order, and a natural ID one input provides (nearly every one) costs one clone.
pub(super) fn merge_whole<S: Layered>(
    inputs: &[(&str, &S)],
    tie: SameLayer,
    mut finish: impl FnMut(&str, &str, &mut S, &mut Vec<String>),
) -> Merged<S> {
    let mut keyed: Vec<(String, &str, &S)> = Vec::with_capacity(inputs.len());
    keyed.extend(inputs.iter().map(|&(id, spec)| (spec.natural_id(), id, spec)));
    // Stable, like `sorted_by_id`: inputs with equal IDs keep their order.
    crate::sort::by(&mut keyed, |a, b| {
        crate::sort::ids(&a.0, &b.0).then_with(|| crate::sort::ids(a.1, b.1))
    });
    let mut merged = Merged::default();
    let mut rest = keyed.into_iter().peekable();
    while let Some((natural, mut id, mut winner)) = rest.next() {
        while let Some((_, next_id, next)) = rest.next_if(|n| n.0 == natural) {
            if replaces(next, winner, tie) {
                (id, winner) = (next_id, next);
            }
        }
        let mut spec = winner.clone();
        finish(&natural, id, &mut spec, &mut merged.warnings);
        let provenance = Provenance::whole(id);
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
