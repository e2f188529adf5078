// SPDX-License-Identifier: Apache-2.0
//! Time server merge (docs/talos.md: Merge).

use super::fold::{contributors, sorted_by_id, Merged, MergedSpec, Provenance};
use crate::resource::{TimeServerSpec, TIMESERVER_ID};

/// The fold state: the merged spec, the input behind each server, and the inputs that took
/// part in the `useNTS` conjunction.
struct Fold<'a> {
    spec: TimeServerSpec,
    owners: Vec<&'a str>,
    /// The input that replaced the list last: it decided the value even when it was empty.
    base: &'a str,
    nts_from: Vec<String>,
    last: &'a str,
}

impl<'a> Fold<'a> {
    fn start(id: &'a str, spec: &TimeServerSpec) -> Self {
        Self {
            spec: spec.clone(),
            owners: vec![id; spec.time_servers.len()],
            base: id,
            nts_from: vec![id.to_owned()],
            last: id,
        }
    }
}

/// Merge layered time server specs into the singleton `timeservers` (docs/talos.md: Merge
/// item 5).
///
/// Inputs are walked in ID order (not layer order). A spec at a lower layer than the result is
/// skipped, one at the same layer is appended with `useNTS = useNTS && new.useNTS`, and one at
/// a higher layer replaces the result. The output exists whenever some input does.
///
/// Provenance: `timeServers` lists the replacing input and every appended input that added
/// servers; `useNTS` lists every input in the conjunction; `layer` the last applied input.
pub fn merge_time_servers(inputs: &[(&str, &TimeServerSpec)]) -> Merged<TimeServerSpec> {
    let sorted = sorted_by_id(inputs);
    let mut fold: Option<Fold<'_>> = None;
    for &(id, spec) in &sorted {
        match fold.as_mut() {
            Some(f) if spec.layer < f.spec.layer => {}
            Some(f) if spec.layer == f.spec.layer => {
                f.spec.time_servers.extend(spec.time_servers.iter().cloned());
                f.owners.extend(spec.time_servers.iter().map(|_| id));
                f.spec.use_nts &= spec.use_nts;
                f.nts_from.push(id.to_owned());
                f.last = id;
            }
            _ => fold = Some(Fold::start(id, spec)),
        }
    }
    let Some(fold) = fold else {
        return Merged::default();
    };

    let mut provenance = Provenance::default();
    let order = sorted.iter().map(|(id, _)| *id);
    provenance.set("timeServers", contributors(order, &fold.owners, Some(fold.base)));
    provenance.set("useNTS", fold.nts_from);
    provenance.set("layer", vec![fold.last.to_owned()]);
    let mut merged = Merged::default();
    merged.specs.insert(TIMESERVER_ID.to_owned(), MergedSpec { spec: fold.spec, provenance });
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merge::test_support::{assert_fields_match, assert_order_independent};
    use crate::resource::ConfigLayer;

    use ConfigLayer::*;

    fn ts(layer: ConfigLayer, servers: &[&str], use_nts: bool) -> TimeServerSpec {
        TimeServerSpec {
            time_servers: servers.iter().map(|s| (*s).to_owned()).collect(),
            use_nts,
            layer,
        }
    }

    fn default_ts() -> (&'static str, TimeServerSpec) {
        ("default/timeservers", ts(Default, &["time.cloudflare.com"], true))
    }

    struct Case {
        name: &'static str,
        inputs: Vec<(&'static str, TimeServerSpec)>,
        want: TimeServerSpec,
    }

    fn cases() -> Vec<Case> {
        vec![
            Case {
                name: "same layer appends, NTS only if all agree",
                inputs: vec![
                    default_ts(),
                    ("dhcp4/eth1/timeservers", ts(Operator, &["10.0.1.1"], false)),
                    ("dhcp4/eth0/timeservers", ts(Operator, &["ntp.a.org"], true)),
                ],
                want: ts(Operator, &["ntp.a.org", "10.0.1.1"], false),
            },
            Case {
                name: "same layer, all NTS: stays on",
                inputs: vec![
                    ("dhcp4/eth0/timeservers", ts(Operator, &["a.org"], true)),
                    ("dhcp6/eth0/timeservers", ts(Operator, &["b.org"], true)),
                ],
                want: ts(Operator, &["a.org", "b.org"], true),
            },
            Case {
                // `configuration/` sorts before `default/` and `dhcp4/`: those are skipped.
                name: "higher replaces, lower skipped",
                inputs: vec![
                    default_ts(),
                    ("dhcp4/eth0/timeservers", ts(Operator, &["10.0.0.1"], false)),
                    ("configuration/timeservers", ts(Configuration, &["pool.ntp.org"], false)),
                ],
                want: ts(Configuration, &["pool.ntp.org"], false),
            },
            Case {
                // `cmdline/` sorts before `platform/`: the higher layer replaces it.
                name: "higher later in ID order replaces",
                inputs: vec![
                    ("cmdline/timeservers", ts(Cmdline, &["a.org"], true)),
                    ("platform/timeservers", ts(Platform, &["b.org"], false)),
                ],
                want: ts(Platform, &["b.org"], false),
            },
        ]
    }

    #[test]
    fn table() {
        for case in cases() {
            let inputs: Vec<(&str, &TimeServerSpec)> =
                case.inputs.iter().map(|(id, s)| (*id, s)).collect();
            let merged = merge_time_servers(&inputs);
            assert_eq!(merged.specs.len(), 1, "{}", case.name);
            assert_eq!(merged.specs[TIMESERVER_ID].spec, case.want, "{}", case.name);
            assert_order_independent(&inputs, merge_time_servers);
        }
    }

    #[test]
    fn no_inputs_no_output() {
        assert!(merge_time_servers(&[]).specs.is_empty());
    }

    #[test]
    fn provenance() {
        let (default_id, default) = default_ts();
        let a = ts(Operator, &["a.org"], true);
        let empty = ts(Operator, &[], true);
        let merged = merge_time_servers(&[
            (default_id, &default),
            ("dhcp4/eth0/timeservers", &a),
            ("dhcp4/eth1/timeservers", &empty),
        ]);
        let p = &merged.specs[TIMESERVER_ID].provenance;
        assert_eq!(p.of("timeServers"), ["dhcp4/eth0/timeservers"]);
        assert_eq!(p.of("useNTS"), ["dhcp4/eth0/timeservers", "dhcp4/eth1/timeservers"]);
        assert_eq!(p.of("layer"), ["dhcp4/eth1/timeservers"]);
    }

    #[test]
    fn field_names_match_serialization() {
        assert_fields_match(&["timeServers", "useNTS", "layer"], &ts(Default, &["a.org"], true));
    }
}
