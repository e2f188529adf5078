// SPDX-License-Identifier: Apache-2.0
//! Routing rule merge: as for addresses (docs/talos.md: Merge rules applied to `RoutingRuleSpec`).

use super::fold::{merge_whole, Layered, Merged, SameLayer};
use crate::resource::RoutingRuleSpec;

impl Layered for RoutingRuleSpec {
    #[cfg(test)]
    const FIELDS: &'static [&'static str] = &[
        "family", "src", "dst", "table", "priority", "action", "iifName", "oifName", "fwMark",
        "fwMask", "layer",
    ];
}

/// Merge layered routing rules into one per `<family>/<priority>`.
///
/// Talos has no rule merge of its own in the sections we mirror; rules follow the generic merge
/// used for addresses and operators (docs/talos.md: Merge): a higher layer wins outright, at the
/// same layer the input later in ID order wins, different IDs all survive.
pub fn merge_rules(inputs: &[(&str, &RoutingRuleSpec)]) -> Merged<RoutingRuleSpec> {
    merge_whole(inputs, SameLayer::LaterWins, |_, _, _, _| {})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merge::test_support::{assert_fields_match, check_winners, WinnerCase};
    use crate::resource::ConfigLayer;
    use crate::resource::{Family, RoutingTable, RuleAction};

    fn rule(priority: u32, table: u32, layer: ConfigLayer) -> RoutingRuleSpec {
        RoutingRuleSpec {
            family: Family::Inet4,
            table: RoutingTable(table),
            priority,
            action: RuleAction::UNICAST,
            fw_mark: 0x40,
            fw_mask: 0x60,
            layer,
            ..RoutingRuleSpec::default()
        }
    }

    type Case = WinnerCase<RoutingRuleSpec>;

    fn cases() -> Vec<Case> {
        use ConfigLayer::*;
        vec![
            Case {
                name: "higher layer wins",
                inputs: vec![
                    ("kubespan/inet4/32500", rule(32500, 180, Operator)),
                    ("configuration/inet4/32500", rule(32500, 200, Configuration)),
                ],
                want: vec![("inet4/32500", "configuration/inet4/32500")],
            },
            Case {
                name: "same layer: later in ID order wins",
                inputs: vec![
                    ("vip/inet4/32500", rule(32500, 181, Operator)),
                    ("kubespan/inet4/32500", rule(32500, 180, Operator)),
                ],
                want: vec![("inet4/32500", "vip/inet4/32500")],
            },
            Case {
                name: "different keys: union",
                inputs: vec![
                    ("kubespan/inet4/32500", rule(32500, 180, Operator)),
                    ("configuration/inet4/00100", rule(100, 10, Configuration)),
                ],
                want: vec![
                    ("inet4/00100", "configuration/inet4/00100"),
                    ("inet4/32500", "kubespan/inet4/32500"),
                ],
            },
        ]
    }

    #[test]
    fn table() {
        check_winners(cases(), "table", merge_rules);
    }

    #[test]
    fn field_names_match_serialization() {
        let full = RoutingRuleSpec {
            src: Some("10.0.0.0/8".parse().unwrap()),
            dst: Some("10.1.0.0/16".parse().unwrap()),
            iif_name: "eth0".into(),
            oif_name: "eth1".into(),
            ..rule(100, 10, ConfigLayer::Default)
        };
        assert_fields_match(RoutingRuleSpec::FIELDS, &full);
    }
}
