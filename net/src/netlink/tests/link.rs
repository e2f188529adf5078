// SPDX-License-Identifier: Apache-2.0
use super::{eventually, link, veth_up, with_sock};
use crate::netlink::{LinkKind, LinkRef, NewLink, NlErrorKind};
use crate::resource::nethelpers::{HardwareAddr, LinkType};
use crate::resource::{BridgeMasterSpec, StpSpec};

#[test]
fn dump_links_fresh_netns_has_lo() {
    with_sock(|sock| {
        let links = sock.dump_links().unwrap();
        assert_eq!(links.len(), 1, "{links:#?}");
        let lo = &links[0];
        assert_eq!((lo.index, lo.name.as_str()), (1, "lo"));
        assert_eq!(lo.link_type, LinkType::LOOPBACK);
        assert!(lo.kind.is_empty() && !lo.up);
        assert_eq!(lo.mac, HardwareAddr(vec![0; 6]));
        assert_eq!(sock.get_link(LinkRef::Index(1)).unwrap().as_ref(), Some(lo));
    });
}

#[test]
fn veth_up_mtu_mac() {
    with_sock(|sock| {
        let (a, b) = veth_up(sock, "kv0", "kv1");
        let mac: HardwareAddr = "02:00:00:aa:bb:01".parse().unwrap();
        sock.link_set_mtu(a, 1400).unwrap();
        sock.link_set_mac(a, &mac).unwrap();
        let links = sock.dump_links().unwrap();
        let kv0 = links.iter().find(|l| l.name == "kv0").unwrap();
        assert_eq!(kv0.kind, "veth");
        assert_eq!(kv0.link_type, LinkType::ETHER);
        assert!(kv0.up && kv0.flags & 1 == 1);
        assert_eq!((kv0.mtu, &kv0.mac), (1400, &mac));
        assert_eq!(kv0.parent, Some(b), "veth IFLA_LINK is the peer");
        assert_eq!(kv0.broadcast.to_string(), "ff:ff:ff:ff:ff:ff");
        eventually("veth operstate up", || {
            let l = link(sock, "kv0");
            l.operstate == "up" && l.carrier
        });
        sock.link_set_up(a, false).unwrap();
        let kv1 = link(sock, "kv1");
        assert!(!link(sock, "kv0").up);
        eventually("peer lowerlayerdown", || link(sock, "kv1").operstate == "lowerlayerdown");
        assert!(kv1.up);
        sock.link_delete(a).unwrap();
        assert_eq!(sock.get_link_by_name("kv1").unwrap(), None, "peer goes with it");
    });
}

#[test]
fn bridge_enslave_and_free() {
    with_sock(|sock| {
        // VLAN filtering is left off: the development kernel lacks
        // CONFIG_BRIDGE_VLAN_FILTERING (see full_kernel::bridge_vlan_filtering).
        let spec = BridgeMasterSpec { stp: StpSpec { enabled: true }, ..Default::default() };
        sock.link_create(&NewLink::new("kbr0", LinkKind::Bridge(spec.clone()))).unwrap();
        let br = link(sock, "kbr0");
        assert_eq!(br.kind, "bridge");
        assert_eq!(br.bridge.as_ref(), Some(&spec));
        let (a, _) = veth_up(sock, "kv0", "kv1");
        sock.link_set_master(a, Some(br.index)).unwrap();
        let kv0 = link(sock, "kv0");
        assert_eq!((kv0.master, kv0.slave_kind.as_str()), (Some(br.index), "bridge"));
        sock.link_set_bridge(br.index, &BridgeMasterSpec::default()).unwrap();
        assert_eq!(link(sock, "kbr0").bridge, Some(BridgeMasterSpec::default()));
        sock.link_set_master(a, None).unwrap();
        let kv0 = link(sock, "kv0");
        assert_eq!((kv0.master, kv0.slave_kind.as_str()), (None, ""));
    });
}

#[test]
fn errors_map_to_kinds() {
    with_sock(|sock| {
        assert_eq!(sock.get_link_by_name("nope0").unwrap(), None);
        let e = sock.link_set_up(9999, true).unwrap_err();
        assert_eq!(e.kind(), NlErrorKind::NotFound, "{e}");
        let veth = NewLink::new("kv0", LinkKind::Veth { peer: "kv1".into() });
        sock.link_create(&veth).unwrap();
        let e = sock.link_create(&veth).unwrap_err();
        assert_eq!(e.kind(), NlErrorKind::Exists, "{e}");
        assert!(e.to_string().contains("link_create kv0"), "{e}");
        let kv0 = link(sock, "kv0").index;
        let e = sock.link_set_mtu(kv0, 10_000_000).unwrap_err();
        assert_eq!(e.kind(), NlErrorKind::Invalid, "{e}");
        assert!(e.kernel_message().is_some(), "kernel explains a bad MTU: {e}");
        // A kind whose module is missing (dummy on the development kernel) is Unsupported.
        if let Err(e) = sock.link_create(&NewLink::new("kd0", LinkKind::Dummy)) {
            assert_eq!(e.kind(), NlErrorKind::Unsupported, "{e}");
        }
    });
}
