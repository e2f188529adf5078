// SPDX-License-Identifier: Apache-2.0
//! Which operators should run, from the merged operator specs and the links the kernel has.
//! Pure: the manager diffs this against what runs.

use crate::resource::{LinkStatus, LinkView, Operator, OperatorSpec};

/// One operator that should run.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Want {
    /// The operator ID (`dhcp4/eth0`), also the owner of everything it writes.
    pub id: String,
    /// The merged spec.
    pub spec: OperatorSpec,
    /// The link's kernel index.
    pub index: u32,
    /// The link's MAC.
    pub mac: [u8; 6],
    /// Whether the operator may send now (the link has carrier, or the spec does not care).
    pub up: bool,
}

impl Want {
    /// Whether a running operator for `self` must be restarted to become `other` (a new link
    /// behind the name, or new settings); carrier changes are not restarts.
    pub fn same_instance(&self, other: &Want) -> bool {
        self.index == other.index && self.mac == other.mac && self.spec == other.spec
    }
}

/// Whether a link can carry traffic: carrier, or an operational state of `up`.
pub fn link_up(link: &LinkStatus) -> bool {
    link.link_state || link.operational_state == "up"
}

/// The operators of kinds in `kinds` that should run: one per spec whose link exists with an
/// Ethernet-sized hardware address. Specs for missing links wait (the link may appear later);
/// that is not an error.
pub fn wanted<'a>(
    specs: impl IntoIterator<Item = (&'a str, &'a OperatorSpec)>,
    links: &LinkView<'_>,
    kinds: &[Operator],
) -> Vec<Want> {
    specs
        .into_iter()
        .filter(|(_, s)| kinds.contains(&s.operator))
        .filter_map(|(id, spec)| {
            let link = links.get(&spec.link_name)?;
            let mac: [u8; 6] = link.hardware_addr.0.as_slice().try_into().ok()?;
            Some(Want {
                id: id.to_owned(),
                spec: spec.clone(),
                index: link.index,
                mac,
                up: !spec.require_up || link_up(link),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::{ClientIdentifier, ConfigLayer, HardwareAddr};

    fn link(index: u32, mac: Vec<u8>, carrier: bool) -> LinkStatus {
        LinkStatus {
            index,
            hardware_addr: HardwareAddr(mac),
            link_state: carrier,
            operational_state: if carrier { "up" } else { "down" }.into(),
            ..LinkStatus::default()
        }
    }

    #[test]
    fn wants_follow_links_and_kinds() {
        let eth0 = link(2, vec![2, 0, 0, 0, 0, 1], true);
        let eth1 = link(3, vec![2, 0, 0, 0, 0, 2], false);
        let wg = link(4, vec![], true);
        let view = LinkView::new([("eth0", &eth0), ("eth1", &eth1), ("wg0", &wg)]);
        let spec =
            |l: &str| OperatorSpec::dhcp4(l, 1024, ClientIdentifier::Mac, ConfigLayer::Default);
        let (a, b, c, d) = (spec("eth0"), spec("eth1"), spec("wg0"), spec("eth9"));
        let mut vip = spec("eth0");
        vip.operator = Operator::Vip;
        let specs = [
            ("dhcp4/eth0", &a),
            ("dhcp4/eth1", &b),
            ("dhcp4/wg0", &c),
            ("dhcp4/eth9", &d),
            ("vip", &vip),
        ];
        let w = wanted(specs, &view, &[Operator::Dhcp4]);
        let got: Vec<(&str, u32, bool)> =
            w.iter().map(|w| (w.id.as_str(), w.index, w.up)).collect();
        assert_eq!(got, [("dhcp4/eth0", 2, true), ("dhcp4/eth1", 3, false)]);
        assert_eq!(w[0].mac, [2, 0, 0, 0, 0, 1]);

        let mut moved = w[0].clone();
        moved.up = false;
        assert!(w[0].same_instance(&moved), "carrier is not a restart");
        moved.index = 9;
        assert!(!w[0].same_instance(&moved), "a new link behind the name is");
    }
}
