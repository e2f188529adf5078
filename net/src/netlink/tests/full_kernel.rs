// SPDX-License-Identifier: Apache-2.0
//! Kinds whose modules the development kernel lacks (dummy, 8021q, bonding): these run only
//! with `KEELSON_FULL_KERNEL=1` (the Debian kernel in the VM).

use super::{link, veth_up, with_sock};
use crate::netlink::{LinkKind, NewLink};
use crate::resource::nethelpers::{HardwareAddr, LinkType};
use crate::resource::{
    BondMasterSpec, BondMode, BondXmitHashPolicy, BridgeMasterSpec, BridgeVlanSpec, LacpRate,
    StpSpec, VlanProtocol, VlanSpec,
};
use testkit::require_full_kernel;

#[test]
fn dummy_create() {
    if !require_full_kernel("dummy_create") {
        return;
    }
    with_sock(|sock| {
        let mac: HardwareAddr = "02:00:00:00:00:42".parse().unwrap();
        let mut new = NewLink::new("kd0", LinkKind::Dummy);
        new.mtu = 9000;
        new.mac = Some(mac.clone());
        sock.link_create(&new).unwrap();
        let d = link(sock, "kd0");
        assert_eq!(
            (d.kind.as_str(), d.link_type, d.mtu, d.mac),
            ("dummy", LinkType::ETHER, 9000, mac)
        );
    });
}

#[test]
fn vlan_on_veth() {
    if !require_full_kernel("vlan_on_veth") {
        return;
    }
    with_sock(|sock| {
        let (a, _) = veth_up(sock, "kv0", "kv1");
        let vlan = VlanSpec { vid: 42, protocol: VlanProtocol::DOT1AD };
        sock.link_create(&NewLink::new("kv0.42", LinkKind::Vlan { parent: a, vlan: vlan.clone() }))
            .unwrap();
        let v = link(sock, "kv0.42");
        assert_eq!((v.kind.as_str(), v.parent, v.vlan), ("vlan", Some(a), Some(vlan)));
    });
}

#[test]
fn bond_with_two_veth_slaves() {
    if !require_full_kernel("bond_with_two_veth_slaves") {
        return;
    }
    with_sock(|sock| {
        let mut spec = BondMasterSpec {
            mode: BondMode::LACP,
            lacp_rate: LacpRate::FAST,
            xmit_hash_policy: BondXmitHashPolicy::LAYER34,
            mii_mon: 100,
            up_delay: 200,
            down_delay: 200,
            min_links: 1,
            ..BondMasterSpec::default()
        };
        spec.fill_defaults();
        sock.link_create(&NewLink::new("kbond0", LinkKind::Bond(spec.clone()))).unwrap();
        let bond = link(sock, "kbond0");
        assert_eq!(bond.kind, "bond");
        let got = bond.bond.clone().expect("bond settings decoded");
        assert_eq!(
            (got.mode, got.lacp_rate, got.xmit_hash_policy, got.mii_mon, got.up_delay),
            (spec.mode, spec.lacp_rate, spec.xmit_hash_policy, 100, 200)
        );
        assert_eq!((got.down_delay, got.min_links, got.ad_actor_sys_prio), (200, 1, 65535));
        for (a, b) in [("ks0", "kp0"), ("ks1", "kp1")] {
            let (ia, _) = veth_up(sock, a, b);
            sock.link_set_up(ia, false).unwrap();
            sock.link_set_master(ia, Some(bond.index)).unwrap();
            let s = link(sock, a);
            assert_eq!((s.master, s.slave_kind.as_str()), (Some(bond.index), "bond"));
        }
        // Change settings the docs/talos.md: Applying specs way: down, unslave, write.
        sock.link_set_up(bond.index, false).unwrap();
        for a in ["ks0", "ks1"] {
            let ix = link(sock, a).index;
            sock.link_set_master(ix, None).unwrap();
        }
        let ab = BondMasterSpec {
            mode: BondMode::ACTIVE_BACKUP,
            primary: "ks1".into(),
            mii_mon: 50,
            ..BondMasterSpec::default()
        };
        sock.link_set_bond(bond.index, &ab).unwrap();
        let got = link(sock, "kbond0").bond.unwrap();
        assert_eq!((got.mode, got.mii_mon), (BondMode::ACTIVE_BACKUP, 50));
        let ks1 = link(sock, "ks1").index;
        sock.link_set_master(ks1, Some(bond.index)).unwrap();
        assert_eq!(link(sock, "kbond0").bond.unwrap().primary, "ks1");
    });
}

#[test]
fn bridge_vlan_filtering() {
    if !require_full_kernel("bridge_vlan_filtering") {
        return;
    }
    with_sock(|sock| {
        let spec = BridgeMasterSpec {
            stp: StpSpec { enabled: true },
            vlan: BridgeVlanSpec { filtering_enabled: true },
        };
        sock.link_create(&NewLink::new("kbr0", LinkKind::Bridge(spec.clone()))).unwrap();
        let br = link(sock, "kbr0");
        assert_eq!(br.bridge.as_ref(), Some(&spec));
        sock.link_set_bridge(br.index, &BridgeMasterSpec::default()).unwrap();
        assert_eq!(link(sock, "kbr0").bridge, Some(BridgeMasterSpec::default()));
    });
}
