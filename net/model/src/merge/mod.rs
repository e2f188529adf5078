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
mod fold;
mod hostname;
mod link;
mod operator;
mod resolver;
mod route;
mod rule;
mod timeserver;

pub use address::merge_addresses;
pub use fold::{Merged, MergedSpec, Provenance};
pub use hostname::merge_hostnames;
pub use link::merge_links;
pub use operator::merge_operators;
pub use resolver::merge_resolvers;
pub use route::merge_routes;
pub use rule::merge_rules;
pub use timeserver::merge_time_servers;

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
    use super::fold::*;
    use crate::resource::{ConfigLayer, LayeredSpec};

    #[derive(Clone, Debug, PartialEq)]
    struct Toy {
        key: &'static str,
        layer: ConfigLayer,
    }

    impl Layered for Toy {
        const FIELDS: &'static [&'static str] = &["key", "layer"];
    }

    impl LayeredSpec for Toy {
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

    /// `merge_whole` gives what grouping by natural ID and picking each group's winner gives,
    /// for both tie rules, on inputs with shared natural IDs, mixed layers, unsorted and
    /// repeated input IDs.
    #[test]
    fn merge_whole_is_pick_winner_per_group() {
        use ConfigLayer::*;
        const KEYS: [&str; 5] = ["a", "b", "c", "d", "e"];
        const LAYERS: [ConfigLayer; 5] = [Default, Cmdline, Platform, Operator, Configuration];
        const IDS: [&str; 7] = ["x/1", "c/2", "p/3", "x/1", "a/9", "o/4", "d/0"];
        let mut x: u64 = 7;
        let mut next = |m: usize| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            usize::try_from(x >> 33).unwrap() % m
        };
        for n in 0..40 {
            let toys: Vec<(&str, Toy)> = (0..n)
                .map(|_| (IDS[next(IDS.len())], toy(KEYS[next(KEYS.len())], LAYERS[next(5)])))
                .collect();
            let inputs: Vec<(&str, &Toy)> = toys.iter().map(|(id, t)| (*id, t)).collect();
            for tie in [SameLayer::LaterWins, SameLayer::FirstWins] {
                let mut want = Merged::default();
                for (natural, group) in by_natural_id(&inputs) {
                    let (id, spec) = pick_winner(&group, tie).unwrap();
                    let provenance = Provenance::whole(id);
                    want.specs.insert(natural, MergedSpec { spec: spec.clone(), provenance });
                }
                let got = merge_whole(&inputs, tie, |_, _, _, _| {});
                assert_eq!(got, want, "{n} inputs, {tie:?}: {toys:?}");
            }
        }
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
        assert!(p.of("mtu").is_empty() && p.is_empty());
    }

    #[test]
    fn provenance_compacts_to_one_list_and_serializes_as_star() {
        let mut p = Provenance::default();
        p.record("mtu", "a");
        p.record("up", "a");
        let whole = p.compacted();
        assert_eq!((whole.fields().count(), whole.of("anything")), (0, &["a".to_owned()][..]));
        let json = serde_json::to_string(&whole).unwrap();
        assert_eq!(json, r#"{"*":["a"]}"#);
        let mut p = Provenance::default();
        p.record("mtu", "a");
        p.record("up", "b");
        let per_field = p.compacted();
        assert_eq!(serde_json::to_string(&per_field).unwrap(), r#"{"mtu":["a"],"up":["b"]}"#);
        assert!(per_field.of("name").is_empty());
    }
}
