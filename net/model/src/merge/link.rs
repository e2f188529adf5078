// SPDX-License-Identifier: Apache-2.0
//! Link merge (docs/talos.md: Merge): field-wise, "a non-zero incoming value overrides".

use super::fold::{by_natural_id, Layered, Merged, MergedSpec, Provenance};
use crate::resource::{LinkSpec, LinkType, WireguardSpec};

impl Layered for LinkSpec {
    // Field-wise merge records provenance per field; this list only documents the names.
    #[cfg(test)]
    const FIELDS: &'static [&'static str] = &[
        "name",
        "logical",
        "up",
        "mtu",
        "kind",
        "type",
        "parentName",
        "hardwareAddr",
        "multicast",
        "bondSlave",
        "bridgeSlave",
        "vrfSlave",
        "vlan",
        "bondMaster",
        "bridgeMaster",
        "vrfMaster",
        "veth",
        "wireguard",
        "layer",
    ];
}

/// Go's zero value: in the Talos link merge it means "this layer did not set the field".
trait Zero {
    /// True for `false`, `0`, `""`, `None` and `Some(<all-zero struct>)`.
    fn is_zero(&self) -> bool;
}

impl Zero for bool {
    fn is_zero(&self) -> bool {
        !*self
    }
}

impl Zero for u32 {
    fn is_zero(&self) -> bool {
        *self == 0
    }
}

impl Zero for String {
    fn is_zero(&self) -> bool {
        self.is_empty()
    }
}

impl Zero for LinkType {
    fn is_zero(&self) -> bool {
        *self == LinkType::default()
    }
}

// Talos embeds these sub-specs by value, so `Some(default)` is the Go zero struct.
impl<T: Default + PartialEq> Zero for Option<T> {
    fn is_zero(&self) -> bool {
        self.as_ref().is_none_or(|v| *v == T::default())
    }
}

/// Copy `src` over `dst` when it is non-zero, and record `id` as a contributor of `field`.
fn overlay<T: Zero + Clone>(
    dst: &mut T,
    src: &T,
    field: &'static str,
    id: &str,
    provenance: &mut Provenance,
) {
    if !src.is_zero() {
        *dst = src.clone();
        provenance.record(field, id);
    }
}

/// Merge `src` into `dst` field by field (Talos `LinkSpecSpec.Merge`).
fn merge_into(dst: &mut LinkSpec, src: &LinkSpec, id: &str, provenance: &mut Provenance) {
    overlay(&mut dst.logical, &src.logical, "logical", id, provenance);
    overlay(&mut dst.up, &src.up, "up", id, provenance);
    overlay(&mut dst.mtu, &src.mtu, "mtu", id, provenance);
    overlay(&mut dst.kind, &src.kind, "kind", id, provenance);
    overlay(&mut dst.link_type, &src.link_type, "type", id, provenance);
    overlay(&mut dst.parent_name, &src.parent_name, "parentName", id, provenance);
    overlay(&mut dst.bond_slave, &src.bond_slave, "bondSlave", id, provenance);
    overlay(&mut dst.bridge_slave, &src.bridge_slave, "bridgeSlave", id, provenance);
    overlay(&mut dst.vlan, &src.vlan, "vlan", id, provenance);
    overlay(&mut dst.bridge_master, &src.bridge_master, "bridgeMaster", id, provenance);
    overlay(&mut dst.vrf_slave, &src.vrf_slave, "vrfSlave", id, provenance);
    overlay(&mut dst.vrf_master, &src.vrf_master, "vrfMaster", id, provenance);
    overlay(&mut dst.veth, &src.veth, "veth", id, provenance);
    // Replaced as a whole when non-zero: no field-wise merge of bond options.
    overlay(&mut dst.bond_master, &src.bond_master, "bondMaster", id, provenance);
    merge_wireguard(&mut dst.wireguard, &src.wireguard, id, provenance);
    // Talos checks `!= nil` here, not zero-ness: any given address replaces.
    if src.hardware_addr.is_some() {
        dst.hardware_addr.clone_from(&src.hardware_addr);
        provenance.record("hardwareAddr", id);
    }
    dst.layer = src.layer;
    provenance.set("layer", vec![id.to_owned()]);
}

/// Talos `WireguardSpec.Merge`: a zero base takes the incoming spec whole; otherwise the
/// private key, listen port and firewall mark are overridden when non-zero and peers are
/// appended when their public key is new (no per-peer merge). The result is normalized.
fn merge_wireguard(
    dst: &mut Option<WireguardSpec>,
    src: &Option<WireguardSpec>,
    id: &str,
    provenance: &mut Provenance,
) {
    let Some(src) = src.as_ref().filter(|w| **w != WireguardSpec::default()) else {
        return;
    };
    provenance.record("wireguard", id);
    let Some(base) = dst.as_mut().filter(|w| **w != WireguardSpec::default()) else {
        let mut whole = src.clone();
        whole.normalize();
        *dst = Some(whole);
        return;
    };
    if src.private_key.is_some() {
        base.private_key = src.private_key;
    }
    if src.listen_port != 0 {
        base.listen_port = src.listen_port;
    }
    if src.firewall_mark != 0 {
        base.firewall_mark = src.firewall_mark;
    }
    for peer in &src.peers {
        if !base.peers.iter().any(|p| p.public_key == peer.public_key) {
            base.peers.push(peer.clone());
        }
    }
    base.normalize();
}

/// Merge layered link specs into one per link name (docs/talos.md: Merge).
///
/// Specs of one link are ordered by layer, lowest first; Talos has no tie-break inside a layer,
/// we keep ID order there so the result is deterministic. The first spec is the base and each
/// next one overrides every field where its value is non-zero (`hardwareAddr`: where it is
/// set). Consequences kept on purpose, because they are what Talos users observe:
///
/// * a higher layer cannot set `up = false` or `mtu = 0` over a lower layer's value;
/// * `multicast` is not merged: only the lowest-layer spec's value survives;
/// * `bondMaster` is replaced as a whole, never merged option by option.
///
/// Provenance lists, per field, every input whose non-zero value was applied; `multicast` and
/// `name` come from the base, `layer` from the last spec merged.
pub fn merge_links(inputs: &[(&str, &LinkSpec)]) -> Merged<LinkSpec> {
    let mut merged = Merged::default();
    for (name, mut group) in by_natural_id(inputs) {
        // Stable: equal layers keep the ID order `by_natural_id` gave them.
        crate::sort::by_key(&mut group, |(_, spec)| spec.layer);
        let Some((base_id, base)) = group.first().copied() else {
            continue;
        };
        // Starting from zero and merging the base in yields the base itself, and records the
        // base's non-zero fields with the same code as every later layer.
        let mut spec =
            LinkSpec { name: base.name.clone(), multicast: base.multicast, ..LinkSpec::default() };
        let mut provenance = Provenance::default();
        provenance.record("name", base_id);
        if base.multicast.is_some() {
            provenance.record("multicast", base_id);
        }
        for (id, layered) in &group {
            merge_into(&mut spec, layered, id, &mut provenance);
        }
        merged.specs.insert(name, MergedSpec { spec, provenance });
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merge::test_support::{assert_fields_match, assert_order_independent};
    use crate::resource::ConfigLayer;
    use crate::resource::{
        BondMasterSpec, BondMode, BondSlave, BridgeMasterSpec, BridgeSlave, HardwareAddr, VethSpec,
        VlanSpec, VrfMasterSpec, VrfSlave, WireguardPeer,
    };

    use ConfigLayer::*;

    fn link(layer: ConfigLayer, edit: impl FnOnce(&mut LinkSpec)) -> LinkSpec {
        let mut spec = LinkSpec { name: "eth0".into(), layer, ..LinkSpec::default() };
        edit(&mut spec);
        spec
    }

    fn mac(s: &str) -> Option<HardwareAddr> {
        Some(s.parse().unwrap())
    }

    fn bond(mode: BondMode, mii_mon: u32) -> Option<BondMasterSpec> {
        Some(BondMasterSpec { mode, mii_mon, ..BondMasterSpec::default() })
    }

    /// A distinct key per name.
    fn test_key(name: &str) -> crate::wgkey::Key {
        let mut k = [0u8; 32];
        for (d, s) in k.iter_mut().zip(name.bytes()) {
            *d = s;
        }
        crate::wgkey::Key(k)
    }

    fn wg(key: &str, port: u16, mark: u32, peers: &[(&str, &str)]) -> Option<WireguardSpec> {
        Some(WireguardSpec {
            private_key: Some(test_key(key)),
            listen_port: port,
            firewall_mark: mark,
            peers: peers
                .iter()
                .map(|(pk, ip)| WireguardPeer {
                    public_key: (*pk).into(),
                    allowed_ips: vec![ip.parse().unwrap()],
                    ..WireguardPeer::default()
                })
                .collect(),
        })
    }

    struct Case {
        name: &'static str,
        inputs: Vec<(&'static str, LinkSpec)>,
        want: LinkSpec,
    }

    fn cases() -> Vec<Case> {
        vec![
            Case {
                name: "higher layer cannot unset up or mtu",
                inputs: vec![
                    ("default/eth0", link(Default, |l| (l.up, l.mtu) = (true, 1500))),
                    ("configuration/eth0", link(Configuration, |l| l.up = false)),
                ],
                want: link(Configuration, |l| (l.up, l.mtu) = (true, 1500)),
            },
            Case {
                name: "non-zero values override, layer from the last merged",
                inputs: vec![
                    ("default/eth0", link(Default, |l| (l.up, l.mtu) = (true, 1500))),
                    ("cmdline/eth0", link(Cmdline, |l| l.mtu = 9000)),
                    ("platform/eth0", link(Platform, |l| l.kind = "dummy".into())),
                ],
                want: link(Platform, |l| {
                    (l.up, l.mtu, l.kind) = (true, 9000, "dummy".into());
                }),
            },
            Case {
                name: "multicast only from the lowest layer",
                inputs: vec![
                    ("cmdline/eth0", link(Cmdline, |l| l.multicast = Some(false))),
                    ("configuration/eth0", link(Configuration, |l| l.multicast = Some(true))),
                    ("platform/eth0", link(Platform, |l| l.up = true)),
                ],
                want: link(Configuration, |l| (l.up, l.multicast) = (true, Some(false))),
            },
            Case {
                name: "multicast unset at the lowest layer stays unset",
                inputs: vec![
                    ("default/eth0", link(Default, |l| l.up = true)),
                    ("configuration/eth0", link(Configuration, |l| l.multicast = Some(true))),
                ],
                want: link(Configuration, |l| l.up = true),
            },
            Case {
                name: "bond master replaced as a whole",
                inputs: vec![
                    ("cmdline/eth0", link(Cmdline, |l| l.bond_master = bond(BondMode::LACP, 100))),
                    (
                        "configuration/eth0",
                        link(Configuration, |l| {
                            l.bond_master = bond(BondMode::ACTIVE_BACKUP, 0);
                        }),
                    ),
                ],
                want: link(Configuration, |l| {
                    l.bond_master = bond(BondMode::ACTIVE_BACKUP, 0);
                }),
            },
            Case {
                name: "zero bond master does not replace",
                inputs: vec![
                    ("cmdline/eth0", link(Cmdline, |l| l.bond_master = bond(BondMode::LACP, 100))),
                    (
                        "configuration/eth0",
                        link(Configuration, |l| l.bond_master = bond(BondMode::default(), 0)),
                    ),
                ],
                want: link(Configuration, |l| l.bond_master = bond(BondMode::LACP, 100)),
            },
            Case {
                name: "hardware address replaced",
                inputs: vec![
                    (
                        "platform/eth0",
                        link(Platform, |l| l.hardware_addr = mac("02:00:00:00:00:01")),
                    ),
                    (
                        "configuration/eth0",
                        link(Configuration, |l| l.hardware_addr = mac("02:00:00:00:00:02")),
                    ),
                    ("default/eth0", link(Default, |l| l.up = true)),
                ],
                want: link(Configuration, |l| {
                    (l.up, l.hardware_addr) = (true, mac("02:00:00:00:00:02"));
                }),
            },
            Case {
                name: "wireguard: zero base takes the other whole, sorted",
                inputs: vec![
                    ("default/eth0", link(Default, |l| l.up = true)),
                    (
                        "operator/eth0",
                        link(Operator, |l| {
                            l.wireguard = wg(
                                "k1",
                                51820,
                                0x20,
                                &[("b", "10.0.0.2/32"), ("a", "10.0.0.1/32")],
                            );
                        }),
                    ),
                ],
                want: link(Operator, |l| {
                    l.up = true;
                    l.wireguard =
                        wg("k1", 51820, 0x20, &[("a", "10.0.0.1/32"), ("b", "10.0.0.2/32")]);
                }),
            },
            Case {
                name: "wireguard: non-zero fields override, only new peers appended",
                inputs: vec![
                    (
                        "operator/eth0",
                        link(Operator, |l| {
                            l.wireguard = wg("k1", 51820, 0x20, &[("b", "10.0.0.2/32")]);
                        }),
                    ),
                    (
                        "configuration/eth0",
                        link(Configuration, |l| {
                            // Peer b's allowed IPs are not merged: the first b stays.
                            l.wireguard =
                                wg("k2", 0, 0x30, &[("b", "10.9.9.9/32"), ("a", "10.0.0.1/32")]);
                        }),
                    ),
                ],
                want: link(Configuration, |l| {
                    l.wireguard =
                        wg("k2", 51820, 0x30, &[("a", "10.0.0.1/32"), ("b", "10.0.0.2/32")]);
                }),
            },
            Case {
                name: "wireguard: a zero spec does not replace",
                inputs: vec![
                    ("operator/eth0", link(Operator, |l| l.wireguard = wg("k1", 1, 0, &[]))),
                    (
                        "configuration/eth0",
                        link(Configuration, |l| l.wireguard = Some(WireguardSpec::default())),
                    ),
                ],
                want: link(Configuration, |l| l.wireguard = wg("k1", 1, 0, &[])),
            },
            Case {
                // No Talos tie-break inside a layer; ours is ID order, so `b` is merged last.
                name: "same layer: merged in ID order",
                inputs: vec![
                    ("platform/b/eth0", link(Platform, |l| l.mtu = 1400)),
                    ("platform/a/eth0", link(Platform, |l| (l.mtu, l.up) = (1300, true))),
                ],
                want: link(Platform, |l| (l.mtu, l.up) = (1400, true)),
            },
        ]
    }

    #[test]
    fn table() {
        for case in cases() {
            let inputs: Vec<(&str, &LinkSpec)> =
                case.inputs.iter().map(|(id, s)| (*id, s)).collect();
            let merged = merge_links(&inputs);
            assert_eq!(merged.specs.len(), 1, "{}", case.name);
            assert_eq!(merged.specs["eth0"].spec, case.want, "{}", case.name);
            assert_order_independent(&inputs, merge_links);
        }
    }

    #[test]
    fn different_links_are_kept_apart() {
        let eth0 = link(Default, |l| l.up = true);
        let eth1 = link(Default, |l| (l.name, l.mtu) = ("eth1".into(), 9000));
        let merged = merge_links(&[("default/eth1", &eth1), ("default/eth0", &eth0)]);
        let names: Vec<&str> = merged.specs.keys().map(String::as_str).collect();
        assert_eq!(names, ["eth0", "eth1"]);
        assert_eq!(merged.specs["eth0"].spec, eth0);
        assert_eq!(merged.specs["eth1"].spec, eth1);
    }

    #[test]
    fn provenance_per_field() {
        let default = link(Default, |l| (l.up, l.mtu) = (true, 1500));
        let cmdline = link(Cmdline, |l| l.multicast = Some(true));
        let config = link(Configuration, |l| (l.mtu, l.up) = (9000, false));
        let merged = merge_links(&[
            ("configuration/eth0", &config),
            ("default/eth0", &default),
            ("cmdline/eth0", &cmdline),
        ]);
        let p = &merged.specs["eth0"].provenance;
        assert_eq!(p.of("up"), ["default/eth0"]);
        assert_eq!(p.of("mtu"), ["default/eth0", "configuration/eth0"]);
        assert_eq!(merged.specs["eth0"].spec.mtu, 9000);
        assert_eq!(p.of("name"), ["default/eth0"]);
        assert_eq!(p.of("layer"), ["configuration/eth0"]);
        // Cmdline's multicast was not the base's, so it was not applied.
        assert!(p.of("multicast").is_empty());
        let fields: Vec<&str> = p.fields().map(|(k, _)| k).collect();
        assert_eq!(fields, ["layer", "mtu", "name", "up"]);

        // The common case: mtu only from configuration, up only from default.
        let default = link(Default, |l| l.up = true);
        let config = link(Configuration, |l| l.mtu = 9000);
        let merged = merge_links(&[("default/eth0", &default), ("configuration/eth0", &config)]);
        let p = &merged.specs["eth0"].provenance;
        assert_eq!(p.of("mtu"), ["configuration/eth0"]);
        assert_eq!(p.of("up"), ["default/eth0"]);
    }

    #[test]
    fn field_names_match_serialization() {
        let full = link(Default, |l| {
            l.logical = true;
            l.up = true;
            l.mtu = 1;
            l.kind = "bond".into();
            l.link_type = LinkType::ETHER;
            l.parent_name = "eth1".into();
            l.hardware_addr = mac("02:00:00:00:00:01");
            l.multicast = Some(true);
            l.bond_slave = Some(BondSlave::default());
            l.bridge_slave = Some(BridgeSlave::default());
            l.vlan = Some(VlanSpec::default());
            l.bond_master = Some(BondMasterSpec::default());
            l.bridge_master = Some(BridgeMasterSpec::default());
            l.vrf_slave = Some(VrfSlave { master_name: "vrf0".into() });
            l.vrf_master = Some(VrfMasterSpec { table: crate::resource::RoutingTable(10) });
            l.veth = Some(VethSpec::default());
            l.wireguard = wg("k", 1, 0, &[]);
        });
        assert_fields_match(LinkSpec::FIELDS, &full);
    }
}
