// SPDX-License-Identifier: Apache-2.0
//! Hostname merge (docs/talos.md: Merge).

use super::fold::{merge_whole, Layered, Merged, SameLayer};
use crate::resource::HostnameSpec;

impl Layered for HostnameSpec {
    #[cfg(test)]
    const FIELDS: &'static [&'static str] = &["hostname", "domainname", "layer"];
}

/// Merge layered hostnames into the singleton `hostname` (docs/talos.md: Merge).
///
/// Inputs are walked in ID order and a spec is taken if none is held yet or its layer is
/// *strictly* higher, so inside a layer the **first** in ID order wins: `dhcp4/eth0/hostname`
/// beats `dhcp4/eth1/hostname`, and `dhcp4/*` beats `dhcp6/*`. Host and domain name always
/// come together from one spec (no field-wise merge).
pub fn merge_hostnames(inputs: &[(&str, &HostnameSpec)]) -> Merged<HostnameSpec> {
    merge_whole(inputs, SameLayer::FirstWins, |_, _, _, _| {})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merge::test_support::{assert_fields_match, assert_order_independent};
    use crate::resource::{ConfigLayer, HOSTNAME_ID};

    fn host(name: &str, domain: &str, layer: ConfigLayer) -> HostnameSpec {
        HostnameSpec { hostname: name.into(), domainname: domain.into(), layer }
    }

    /// (case name, inputs, winning input id)
    type Case = (&'static str, Vec<(&'static str, HostnameSpec)>, &'static str);

    #[test]
    fn table() {
        use ConfigLayer::*;
        let cases: Vec<Case> = vec![
            (
                "higher layer wins",
                vec![
                    ("default/hostname", host("talos-10-0-0-5", "", Default)),
                    ("cmdline/hostname", host("node1", "example.org", Cmdline)),
                ],
                "cmdline/hostname",
            ),
            (
                "same layer: first in ID order wins",
                vec![
                    ("dhcp4/eth1/hostname", host("from-eth1", "b.org", Operator)),
                    ("dhcp6/eth0/hostname", host("from-v6", "c.org", Operator)),
                    ("dhcp4/eth0/hostname", host("from-eth0", "a.org", Operator)),
                ],
                "dhcp4/eth0/hostname",
            ),
            (
                "operator layer beats default",
                vec![
                    ("default/hostname", host("talos-10-0-0-5", "", Default)),
                    ("dhcp4/eth0/hostname", host("from-dhcp", "", Operator)),
                ],
                "dhcp4/eth0/hostname",
            ),
            (
                // Domain name never mixes in from a lower layer.
                "no field-wise merge",
                vec![
                    ("platform/hostname", host("cloud", "cloud.internal", Platform)),
                    ("configuration/hostname", host("mine", "", Configuration)),
                ],
                "configuration/hostname",
            ),
        ];
        for (name, specs, winner) in cases {
            let inputs: Vec<(&str, &HostnameSpec)> = specs.iter().map(|(id, s)| (*id, s)).collect();
            let merged = merge_hostnames(&inputs);
            assert_eq!(merged.specs.len(), 1, "{name}");
            let got = &merged.specs[HOSTNAME_ID];
            let want = inputs.iter().find(|(id, _)| *id == winner).unwrap().1;
            assert_eq!(&got.spec, want, "{name}");
            for field in HostnameSpec::FIELDS {
                assert_eq!(got.provenance.of(field), [winner], "{name}: {field}");
            }
            assert_order_independent(&inputs, merge_hostnames);
        }
    }

    #[test]
    fn no_inputs_no_output() {
        assert!(merge_hostnames(&[]).specs.is_empty());
    }

    #[test]
    fn field_names_match_serialization() {
        assert_fields_match(HostnameSpec::FIELDS, &host("a", "b", ConfigLayer::Default));
    }
}
