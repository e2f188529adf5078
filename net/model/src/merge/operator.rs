// SPDX-License-Identifier: Apache-2.0
//! Operator merge (docs/talos.md: Merge).

use super::fold::{merge_whole, Layered, Merged, SameLayer};
use crate::resource::OperatorSpec;

impl Layered for OperatorSpec {
    #[cfg(test)]
    const FIELDS: &'static [&'static str] =
        &["operator", "linkName", "requireUp", "dhcp4", "dhcp6", "vip", "layer"];
}

/// Merge layered operator specs into one per operator ID (`dhcp4/eth0`, `vip/eth0/<ip>`;
/// docs/talos.md: Merge).
///
/// A higher layer wins outright; at the same layer the input later in ID order wins (the
/// generic Talos merge); different IDs all survive.
pub fn merge_operators(inputs: &[(&str, &OperatorSpec)]) -> Merged<OperatorSpec> {
    merge_whole(inputs, SameLayer::LaterWins, |_, _, _, _| {})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merge::test_support::{assert_fields_match, check_winners, WinnerCase};
    use crate::resource::ConfigLayer;
    use crate::resource::{ClientIdentifier, Dhcp6OperatorSpec, Operator, VipOperatorSpec};

    fn dhcp4(link: &str, metric: u32, layer: ConfigLayer) -> OperatorSpec {
        OperatorSpec::dhcp4(link, metric, ClientIdentifier::None, layer)
    }

    type Case = WinnerCase<OperatorSpec>;

    fn cases() -> Vec<Case> {
        use ConfigLayer::*;
        vec![
            Case {
                name: "higher layer wins",
                inputs: vec![
                    ("default/dhcp4/eth0", dhcp4("eth0", 1024, Default)),
                    ("cmdline/dhcp4/eth0", dhcp4("eth0", 100, Cmdline)),
                ],
                want: vec![("dhcp4/eth0", "cmdline/dhcp4/eth0")],
            },
            Case {
                name: "same layer: later in ID order wins",
                inputs: vec![
                    ("platform/b/dhcp4/eth0", dhcp4("eth0", 2, Platform)),
                    ("platform/a/dhcp4/eth0", dhcp4("eth0", 1, Platform)),
                ],
                want: vec![("dhcp4/eth0", "platform/b/dhcp4/eth0")],
            },
            Case {
                name: "different keys: union",
                inputs: vec![
                    ("default/dhcp4/eth0", dhcp4("eth0", 1024, Default)),
                    ("default/dhcp4/eth1", dhcp4("eth1", 1024, Default)),
                ],
                want: vec![
                    ("dhcp4/eth0", "default/dhcp4/eth0"),
                    ("dhcp4/eth1", "default/dhcp4/eth1"),
                ],
            },
        ]
    }

    #[test]
    fn table() {
        check_winners(cases(), "dhcp4", merge_operators);
    }

    #[test]
    fn field_names_match_serialization() {
        let full = OperatorSpec {
            operator: Operator::Vip,
            dhcp6: Some(Dhcp6OperatorSpec::default()),
            vip: Some(VipOperatorSpec { ip: "10.5.0.50".parse().unwrap(), gratuitous_arp: true }),
            ..dhcp4("eth0", 1024, ConfigLayer::Operator)
        };
        assert_fields_match(OperatorSpec::FIELDS, &full);
    }
}
