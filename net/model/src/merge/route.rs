// SPDX-License-Identifier: Apache-2.0
//! Route merge (docs/talos.md: Merge).

use super::fold::{merge_whole, Layered, Merged, SameLayer};
use crate::resource::RouteSpec;

impl Layered for RouteSpec {
    #[cfg(test)]
    const FIELDS: &'static [&'static str] = &[
        "family",
        "dst",
        "src",
        "gateway",
        "outLinkName",
        "table",
        "priority",
        "scope",
        "type",
        "flags",
        "protocol",
        "mtu",
        "layer",
    ];
}

/// Merge layered routes into one per route ID (docs/talos.md: Merge).
///
/// As for addresses: a higher layer wins outright, at the same layer the input later in ID
/// order wins, and routes with different IDs all survive.
pub fn merge_routes(inputs: &[(&str, &RouteSpec)]) -> Merged<RouteSpec> {
    merge_whole(inputs, SameLayer::LaterWins, |_, _, _, _| {})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merge::test_support::{assert_fields_match, check_winners, WinnerCase};
    use crate::resource::ConfigLayer;
    use crate::resource::{Family, RouteFlags};

    fn route(gw: &str, dst: Option<&str>, layer: ConfigLayer, mtu: u32) -> RouteSpec {
        let mut r = RouteSpec::new(Family::Inet4, layer);
        r.gateway = Some(gw.parse().unwrap());
        r.dst = dst.map(|d| d.parse().unwrap());
        r.out_link_name = "eth0".into();
        r.mtu = mtu;
        r.normalize();
        r
    }

    type Case = WinnerCase<RouteSpec>;

    fn cases() -> Vec<Case> {
        use ConfigLayer::*;
        vec![
            Case {
                name: "higher layer wins",
                inputs: vec![
                    ("dhcp4/eth0/inet4/10.0.0.1//1024", route("10.0.0.1", None, Operator, 1)),
                    ("cmdline/inet4/10.0.0.1//1024", route("10.0.0.1", None, Cmdline, 2)),
                    ("platform/inet4/10.0.0.1//1024", route("10.0.0.1", None, Platform, 3)),
                ],
                want: vec![("inet4/10.0.0.1//1024", "dhcp4/eth0/inet4/10.0.0.1//1024")],
            },
            Case {
                name: "same layer: later in ID order wins",
                inputs: vec![
                    ("platform/inet4/10.0.0.1//1024", route("10.0.0.1", None, Platform, 2)),
                    ("operator-b/inet4/10.0.0.1//1024", route("10.0.0.1", None, Platform, 3)),
                    ("operator-a/inet4/10.0.0.1//1024", route("10.0.0.1", None, Platform, 1)),
                ],
                want: vec![("inet4/10.0.0.1//1024", "platform/inet4/10.0.0.1//1024")],
            },
            Case {
                name: "different keys: union",
                inputs: vec![
                    ("cmdline/inet4/10.0.0.1//1024", route("10.0.0.1", None, Cmdline, 0)),
                    (
                        "configuration/inet4/10.0.0.1/10.9.0.0/16/1024",
                        route("10.0.0.1", Some("10.9.0.0/16"), Configuration, 0),
                    ),
                ],
                want: vec![
                    ("inet4/10.0.0.1//1024", "cmdline/inet4/10.0.0.1//1024"),
                    (
                        "inet4/10.0.0.1/10.9.0.0/16/1024",
                        "configuration/inet4/10.0.0.1/10.9.0.0/16/1024",
                    ),
                ],
            },
        ]
    }

    #[test]
    fn table() {
        for (name, merged) in check_winners(cases(), "gateway", merge_routes) {
            for m in merged.specs.values() {
                let winner = m.provenance.of("gateway");
                for field in RouteSpec::FIELDS {
                    assert_eq!(m.provenance.of(field), winner, "{name}: {field}");
                }
            }
        }
    }

    #[test]
    fn field_names_match_serialization() {
        let mut full = route("10.0.0.1", Some("10.9.0.0/16"), ConfigLayer::Default, 1400);
        full.src = Some("10.0.0.2".parse().unwrap());
        full.flags = RouteFlags::ONLINK;
        assert_fields_match(RouteSpec::FIELDS, &full);
    }
}
