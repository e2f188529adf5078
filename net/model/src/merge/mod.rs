// SPDX-License-Identifier: Apache-2.0
//! Pure merge functions: fold layered specs into one spec per natural ID (docs/talos.md: Merge).
//!
//! Every `merge_*` function takes `(network-config id, spec)` pairs and returns a [`Merged`]:
//! one [`MergedSpec`] per natural ID plus human-readable warnings. The functions never touch
//! the kernel or the resource store.
//!
//! Contract and invariants:
//!
//! * Inputs may arrive in any order. They are sorted by their `network-config` ID first, because
//!   COSI lists are sorted by ID (docs/talos.md: Resources and IDs) and several Talos rules depend
//!   on that order (hostname: first in a layer wins; address/route: later in a layer wins). Two
//!   inputs with the same ID keep their relative order (IDs are unique in a real store).
//! * Specs are grouped by the *natural* ID computed from their content (`spec.id()`), never by
//!   stripping the layer prefix, exactly as the Talos merge controllers do.
//! * The merged spec's `layer` is the layer of the winning (or last applied) input.
//! * [`Provenance`] maps each serialized top-level field name to the inputs that determined
//!   its value, in the order they were applied. A field absent from
//!   the map was set by no input: it holds its zero value.

mod address;
mod hostname;
mod link;
mod operator;
mod resolver;
mod route;
mod rule;
mod timeserver;

use std::collections::BTreeMap;

use crate::resource::ConfigLayer;

pub use address::merge_addresses;
pub use hostname::merge_hostnames;
pub use link::merge_links;
pub use operator::merge_operators;
pub use resolver::merge_resolvers;
pub use route::merge_routes;
pub use rule::merge_rules;
pub use timeserver::merge_time_servers;

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
    fn whole(fields: &[&'static str], id: &str) -> Self {
        Self { fields: fields.iter().map(|f| (*f, vec![id.to_owned()])).collect() }
    }

    /// Append `id` to the contributors of `field`.
    fn record(&mut self, field: &'static str, id: &str) {
        self.fields.entry(field).or_default().push(id.to_owned());
    }

    /// Replace the contributors of `field`; an empty list removes the field, keeping "absent
    /// means unset" true.
    fn set(&mut self, field: &'static str, ids: Vec<String>) {
        if ids.is_empty() {
            self.fields.remove(field);
        } else {
            self.fields.insert(field, ids);
        }
    }
}

/// What the merge needs to know about a layered spec type.
trait Layered: Clone {
    /// Serialized names of all top-level fields, for whole-spec provenance.
    const FIELDS: &'static [&'static str];
    /// The natural ID (the key in namespace `network`).
    fn natural_id(&self) -> String;
    /// The layer the spec was produced at.
    fn layer(&self) -> ConfigLayer;
}

/// How a tie between two inputs at the same layer is broken when one spec wins outright.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SameLayer {
    /// The input later in ID order wins (address, route, operator, rule: docs/talos.md: Merge).
    LaterWins,
    /// The input first in ID order wins (hostname: docs/talos.md: Merge).
    FirstWins,
}

/// The inputs sorted by `network-config` ID (docs/talos.md: Resources and IDs). The sort is stable.
fn sorted_by_id<'a, S>(inputs: &[(&'a str, &'a S)]) -> Vec<(&'a str, &'a S)> {
    let mut sorted = inputs.to_vec();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    sorted
}

/// The inputs grouped by natural ID, each group in `network-config` ID order.
fn by_natural_id<'a, S: Layered>(
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
fn pick_winner<'a, S: Layered>(
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
fn merge_whole<S: Layered>(
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
fn contributors<'a>(
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

#[cfg(test)]
mod test_support {
    use std::collections::BTreeSet;

    use serde::Serialize;

    use super::Merged;

    /// One table-driven case of a whole-spec merge: the inputs, and for each natural ID the
    /// input that must win.
    pub(super) struct WinnerCase<S> {
        pub(super) name: &'static str,
        pub(super) inputs: Vec<(&'static str, S)>,
        /// (natural id, winning input id)
        pub(super) want: Vec<(&'static str, &'static str)>,
    }

    /// Run whole-spec merge cases: the winners (read back through `field`'s provenance) and
    /// their specs are as wanted, and the result does not depend on input order. Returns each
    /// case with its merge, for checks of its own.
    pub(super) fn check_winners<S: Clone + PartialEq + std::fmt::Debug>(
        cases: Vec<WinnerCase<S>>,
        field: &str,
        merge: impl Fn(&[(&str, &S)]) -> Merged<S>,
    ) -> Vec<(&'static str, Merged<S>)> {
        let mut out = Vec::new();
        for case in cases {
            let inputs: Vec<(&str, &S)> = case.inputs.iter().map(|(id, s)| (*id, s)).collect();
            let merged = merge(&inputs);
            let got: Vec<(&str, &str)> = merged
                .specs
                .iter()
                .map(|(k, m)| (k.as_str(), m.provenance.of(field)[0].as_str()))
                .collect();
            assert_eq!(got, case.want, "{}", case.name);
            for (natural, winner) in &case.want {
                let input = inputs.iter().find(|(id, _)| id == winner).map(|(_, s)| *s);
                assert_eq!(Some(&merged.specs[*natural].spec), input, "{}", case.name);
            }
            assert_order_independent(&inputs, &merge);
            out.push((case.name, merged));
        }
        out
    }

    /// The merge gives the same result for the inputs in their given order, reversed and
    /// rotated: the function sorts by ID itself.
    pub(super) fn assert_order_independent<S: Clone + PartialEq + std::fmt::Debug>(
        inputs: &[(&str, &S)],
        merge: impl Fn(&[(&str, &S)]) -> Merged<S>,
    ) {
        let expected = merge(inputs);
        let mut reversed = inputs.to_vec();
        reversed.reverse();
        assert_eq!(merge(&reversed), expected, "reversed input order");
        for k in 1..inputs.len() {
            let mut rotated = inputs.to_vec();
            rotated.rotate_left(k);
            assert_eq!(merge(&rotated), expected, "input order rotated by {k}");
        }
    }

    /// The top-level keys `spec` serializes to.
    pub(super) fn serialized_keys<S: Serialize>(spec: &S) -> BTreeSet<String> {
        match serde_json::to_value(spec) {
            Ok(serde_json::Value::Object(map)) => map.keys().cloned().collect(),
            other => panic!("spec did not serialize to an object: {other:?}"),
        }
    }

    /// `fields` names exactly the keys of `full` (a spec with every optional field set).
    pub(super) fn assert_fields_match<S: Serialize>(fields: &[&str], full: &S) {
        let ours: BTreeSet<String> = fields.iter().map(|f| (*f).to_owned()).collect();
        assert_eq!(ours, serialized_keys(full));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, PartialEq)]
    struct Toy {
        key: &'static str,
        layer: ConfigLayer,
    }

    impl Layered for Toy {
        const FIELDS: &'static [&'static str] = &["key", "layer"];
        fn natural_id(&self) -> String {
            self.key.to_owned()
        }
        fn layer(&self) -> ConfigLayer {
            self.layer
        }
    }

    fn toy(key: &'static str, layer: ConfigLayer) -> Toy {
        Toy { key, layer }
    }

    #[test]
    fn pick_winner_rules() {
        use ConfigLayer::*;
        let (a, b, c) = (toy("k", Cmdline), toy("k", Cmdline), toy("k", Default));
        let group = [("cmdline/a", &a), ("cmdline/b", &b), ("default/k", &c)];
        let later = pick_winner(&group, SameLayer::LaterWins).map(|w| w.0);
        let first = pick_winner(&group, SameLayer::FirstWins).map(|w| w.0);
        assert_eq!(later, Some("cmdline/b"));
        assert_eq!(first, Some("cmdline/a"));
        assert_eq!(pick_winner::<Toy>(&[], SameLayer::LaterWins), None);
    }

    #[test]
    fn grouping_sorts_by_input_id() {
        use ConfigLayer::*;
        let (x, y, z) = (toy("k", Platform), toy("j", Default), toy("k", Default));
        let groups = by_natural_id(&[("platform/k", &x), ("default/j", &y), ("default/k", &z)]);
        let ids: Vec<(&str, Vec<&str>)> =
            groups.iter().map(|(k, v)| (k.as_str(), v.iter().map(|e| e.0).collect())).collect();
        assert_eq!(ids, [("j", vec!["default/j"]), ("k", vec!["default/k", "platform/k"])]);
    }

    #[test]
    fn contributors_keep_application_order_and_deciders() {
        let applied = ["a", "b", "c", "d"];
        assert_eq!(contributors(applied, &["c", "a", "c"], None), ["a", "c"]);
        assert_eq!(contributors(applied, &["d"], Some("b")), ["b", "d"]);
        assert!(contributors(applied, &[], None).is_empty());
    }

    #[test]
    fn provenance_set_empty_removes() {
        let mut p = Provenance::default();
        p.record("mtu", "a");
        p.record("mtu", "b");
        assert_eq!(p.of("mtu"), ["a", "b"]);
        p.set("mtu", Vec::new());
        assert!(p.of("mtu").is_empty() && p.fields.is_empty());
    }
}
