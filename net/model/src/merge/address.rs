// SPDX-License-Identifier: Apache-2.0
//! Address merge (docs/talos.md: Merge).

use super::fold::{merge_whole, Layered, Merged, SameLayer};
use crate::resource::{AddressFlags, AddressSpec};

impl Layered for AddressSpec {
    #[cfg(test)]
    const FIELDS: &'static [&'static str] = &[
        "address",
        "linkName",
        "family",
        "scope",
        "flags",
        "announceWithArp",
        "priority",
        "validLifetime",
        "preferredLifetime",
        "layer",
    ];
}

/// Merge layered addresses into one per `<link>/<addr>/<bits>` (docs/talos.md: Merge).
///
/// A higher layer wins outright; at the same layer the input later in ID order wins. Addresses
/// with different natural IDs all survive (the union). Flags outside
/// [`AddressFlags::MANAGED`] are dropped from the winner with a warning, as Talos does before
/// output, so a platform or config cannot ask the kernel for `secondary` or `tentative`.
pub fn merge_addresses(inputs: &[(&str, &AddressSpec)]) -> Merged<AddressSpec> {
    merge_whole(inputs, SameLayer::LaterWins, |natural, id, spec, warnings| {
        let unmanaged = AddressFlags(spec.flags.0 & !AddressFlags::MANAGED.0);
        if !unmanaged.is_empty() {
            spec.flags = spec.flags & AddressFlags::MANAGED;
            warnings
                .push(format!("address {natural} from {id}: dropped unmanaged flags {unmanaged}"));
        }
    })
}

#[cfg(test)]
mod tests {
    use ipnet::IpNet;

    use super::*;
    use crate::merge::test_support::{assert_fields_match, check_winners, WinnerCase};
    use crate::resource::ConfigLayer;

    fn addr(link: &str, cidr: &str, layer: ConfigLayer, priority: u32) -> AddressSpec {
        let net: IpNet = cidr.parse().unwrap();
        AddressSpec { priority, ..AddressSpec::new(link, net, layer) }
    }

    type Case = WinnerCase<AddressSpec>;

    fn cases() -> Vec<Case> {
        use ConfigLayer::*;
        vec![
            Case {
                // `configuration/` sorts before `default/`, so the layer, not ID order, decides.
                name: "higher layer wins",
                inputs: vec![
                    ("default/eth0/10.0.0.5/24", addr("eth0", "10.0.0.5/24", Default, 1)),
                    (
                        "configuration/eth0/10.0.0.5/24",
                        addr("eth0", "10.0.0.5/24", Configuration, 2),
                    ),
                    ("cmdline/eth0/10.0.0.5/24", addr("eth0", "10.0.0.5/24", Cmdline, 3)),
                ],
                want: vec![("eth0/10.0.0.5/24", "configuration/eth0/10.0.0.5/24")],
            },
            Case {
                name: "same layer: later in ID order wins",
                inputs: vec![
                    ("dhcp4/eth1/eth0/10.0.0.5/24", addr("eth0", "10.0.0.5/24", Operator, 2)),
                    ("dhcp4/eth0/eth0/10.0.0.5/24", addr("eth0", "10.0.0.5/24", Operator, 1)),
                ],
                want: vec![("eth0/10.0.0.5/24", "dhcp4/eth1/eth0/10.0.0.5/24")],
            },
            Case {
                name: "different keys: union",
                inputs: vec![
                    ("cmdline/eth0/10.0.0.5/24", addr("eth0", "10.0.0.5/24", Cmdline, 0)),
                    ("platform/eth1/10.0.0.6/24", addr("eth1", "10.0.0.6/24", Platform, 0)),
                    ("default/lo/127.0.0.1/8", addr("lo", "127.0.0.1/8", Default, 0)),
                ],
                want: vec![
                    ("eth0/10.0.0.5/24", "cmdline/eth0/10.0.0.5/24"),
                    ("eth1/10.0.0.6/24", "platform/eth1/10.0.0.6/24"),
                    ("lo/127.0.0.1/8", "default/lo/127.0.0.1/8"),
                ],
            },
        ]
    }

    #[test]
    fn table() {
        for (name, merged) in check_winners(cases(), "address", merge_addresses) {
            assert!(merged.warnings.is_empty(), "{name}");
        }
    }

    #[test]
    fn unmanaged_flags_dropped_with_warning() {
        let mut spec = addr("eth0", "10.0.0.5/24", ConfigLayer::Configuration, 0);
        spec.flags = AddressFlags::PERMANENT | AddressFlags::SECONDARY | AddressFlags::NODAD;
        let merged = merge_addresses(&[("configuration/eth0/10.0.0.5/24", &spec)]);
        assert_eq!(
            merged.specs["eth0/10.0.0.5/24"].spec.flags,
            AddressFlags::PERMANENT | AddressFlags::NODAD
        );
        assert_eq!(
            merged.warnings,
            ["address eth0/10.0.0.5/24 from configuration/eth0/10.0.0.5/24: \
              dropped unmanaged flags secondary"]
        );
    }

    #[test]
    fn provenance_names_the_winner_for_every_field() {
        let low = addr("eth0", "10.0.0.5/24", ConfigLayer::Default, 0);
        let high = addr("eth0", "10.0.0.5/24", ConfigLayer::Platform, 7);
        let merged = merge_addresses(&[
            ("default/eth0/10.0.0.5/24", &low),
            ("platform/eth0/10.0.0.5/24", &high),
        ]);
        let provenance = &merged.specs["eth0/10.0.0.5/24"].provenance;
        assert_eq!(provenance.fields().count(), 0, "one list for the whole spec");
        for field in AddressSpec::FIELDS {
            assert_eq!(provenance.of(field), ["platform/eth0/10.0.0.5/24"], "{field}");
        }
    }

    #[test]
    fn field_names_match_serialization() {
        let full = AddressSpec {
            announce_with_arp: true,
            priority: 1,
            valid_lifetime: Some(1),
            preferred_lifetime: Some(1),
            ..addr("eth0", "10.0.0.5/24", ConfigLayer::Default, 1)
        };
        assert_fields_match(AddressSpec::FIELDS, &full);
    }
}
