// SPDX-License-Identifier: Apache-2.0
use std::collections::{BTreeMap, BTreeSet};

use super::super::*;

fn p(s: &str) -> IpNet {
    s.parse().unwrap()
}

fn peered() -> Vec<TenantNetwork> {
    vec![
        TenantNetwork {
            id: 300,
            peers: vec![Peer { id: 301, prefixes: vec![p("10.2.7.0/24")] }],
            ..Default::default()
        },
        TenantNetwork {
            id: 301,
            peers: vec![Peer { id: 300, prefixes: vec![p("10.1.0.0/16"), p("fd00:1::/64")] }],
            ..Default::default()
        },
    ]
}

/// What the kernel would show after `steps` (a model of the kernel, for idempotence).
fn after(want: &Desired) -> Observed {
    Observed {
        devices: want
            .devices
            .iter()
            .map(|d| Found {
                name: d.name(),
                device: Some(d.clone()),
                up: true,
                master: matches!(d, Device::Vxlan { .. }).then(|| d.id()),
            })
            .collect(),
        routes: want.routes.clone(),
        fdb: want.fdb.clone(),
        neighs: want.neighs.clone(),
        isolated: want
            .devices
            .iter()
            .filter(|d| matches!(d, Device::Vrf { .. }))
            .map(Device::id)
            .collect(),
        local: BTreeMap::new(),
    }
}

#[test]
fn a_vrf_and_a_vxlan_per_network_and_peer_routes_into_the_peers_vrf() {
    let want = desired(&peered(), &Underlay { local: Some("192.0.2.1".parse().unwrap()), port: 0 });
    assert_eq!(
        want.devices,
        [
            Device::Vrf { id: 300, table: TABLE_BASE + 300 },
            Device::Vrf { id: 301, table: TABLE_BASE + 301 },
            Device::Vxlan {
                id: 300,
                local: Some("192.0.2.1".parse().unwrap()),
                port: 4789,
                mac: Some([2, 0, 192, 0, 2, 1])
            },
            Device::Vxlan {
                id: 301,
                local: Some("192.0.2.1".parse().unwrap()),
                port: 4789,
                mac: Some([2, 0, 192, 0, 2, 1])
            },
        ]
    );
    let routes: Vec<_> = want.routes.iter().cloned().collect();
    assert_eq!(
        routes,
        [
            LeakRoute { id: 300, dst: p("10.2.7.0/24"), via: 301, gw: None },
            LeakRoute { id: 301, dst: p("10.1.0.0/16"), via: 300, gw: None },
            LeakRoute { id: 301, dst: p("fd00:1::/64"), via: 300, gw: None },
        ]
    );
    let steps = plan(&want, &Observed::default());
    // VRFs exist before the VXLAN devices enslaved to them at creation, routes come last.
    let pos = |s: &Step| steps.iter().position(|x| x == s).unwrap();
    assert!(
        pos(&Step::CreateDevice(want.devices[0].clone()))
            < pos(&Step::CreateDevice(want.devices[2].clone()))
    );
    assert!(!steps.iter().any(|s| matches!(s, Step::SetMaster { .. })));
    assert_eq!(steps.iter().filter(|s| matches!(s, Step::SetUp(_))).count(), 4);
    assert!(matches!(steps.last(), Some(Step::AddRoute(_))));
    // Each VRF's table is closed (unreachable default) before any route leads into it.
    let first_route = steps.iter().position(|s| matches!(s, Step::AddRoute(_))).unwrap();
    for id in [300, 301] {
        assert!(pos(&Step::Isolate(id)) < first_route, "{steps:?}");
    }
    // Applied, nothing is left to do.
    assert_eq!(plan(&want, &after(&want)), []);
    // A table that lost its unreachable default (someone flushed it) is closed again.
    let mut open = after(&want);
    open.isolated.remove(&301);
    assert_eq!(plan(&want, &open), [Step::Isolate(301)]);
}

#[test]
fn withdrawing_a_peer_removes_only_its_routes_and_a_gone_network_its_devices() {
    let u = Underlay::default();
    let before = desired(&peered(), &u);
    let mut nets = peered();
    nets[0].peers.clear();
    nets[1].peers.clear();
    let steps = plan(&desired(&nets, &u), &after(&before));
    assert_eq!(steps.len(), 3, "{steps:?}");
    assert!(steps.iter().all(|s| matches!(s, Step::DeleteRoute(_))));
    let steps = plan(&desired(&nets[..1], &u), &after(&before));
    let deleted: Vec<_> = steps
        .iter()
        .filter_map(|s| match s {
            Step::DeleteDevice(n) => Some(n.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deleted, ["tvrf301", "tvx301"]);
    // Routes into the VRF that goes are removed before it.
    let first_delete = steps.iter().position(|s| matches!(s, Step::DeleteDevice(_))).unwrap();
    assert!(
        steps[..first_delete].iter().filter(|s| matches!(s, Step::DeleteRoute(_))).count() == 3
    );
}

#[test]
fn devices_that_differ_are_replaced_and_strays_removed() {
    let u = Underlay::default();
    let want = desired(&peered(), &u);
    let mut have = after(&want);
    // A VXLAN under our name with another VNI (read as unknown), one not enslaved, a stray.
    have.devices[2].device = None;
    have.devices[3].master = None;
    have.devices.push(Found { name: "tvx999".into(), device: None, up: true, master: None });
    let steps = plan(&want, &have);
    assert!(steps.contains(&Step::DeleteDevice("tvx300".into())));
    assert!(steps.contains(&Step::CreateDevice(want.devices[2].clone())));
    assert!(steps.contains(&Step::SetUp("tvx300".into())));
    assert!(steps.contains(&Step::SetMaster { device: "tvx301".into(), vrf: "tvrf301".into() }));
    assert!(steps.contains(&Step::DeleteDevice("tvx999".into())));
    assert_eq!(steps.len(), 5, "{steps:?}");
}

#[test]
fn peers_that_cannot_be_realised_say_why() {
    let nets = vec![TenantNetwork {
        id: 300,
        peers: vec![
            Peer { id: 300, prefixes: vec![p("10.0.0.0/8")] },
            Peer { id: 555, prefixes: vec![p("10.5.0.0/16")] },
        ],
        ..Default::default()
    }];
    let want = desired(&nets, &Underlay::default());
    assert!(want.routes.is_empty());
    let out = peer_outcomes(&nets, &want, &BTreeMap::new());
    let (ok, bad) = &out[&300];
    assert!(ok.is_empty());
    assert_eq!(bad.len(), 2);
    assert!(bad[1].1.contains("not on this node"));
    assert_eq!(id_of("tvrf300"), Some(300));
    for n in ["tvrf", "tvrf0300", "tvx16777216", "eth0", "tvrf1x"] {
        assert_eq!(id_of(n), None, "{n}");
    }
    assert!(vrf_name(MAX_ID).len() <= 15 && vxlan_name(MAX_ID).len() <= 15);
}

fn remote(vtep: &str, prefixes: &[&str]) -> Remote {
    Remote { vtep: vtep.parse().unwrap(), prefixes: prefixes.iter().map(|s| p(s)).collect() }
}

#[test]
fn router_macs_and_their_link_local_gateways_are_deterministic() {
    assert_eq!(router_mac("192.0.2.7".parse().unwrap()), [0x02, 0, 192, 0, 2, 7]);
    let a = router_mac("2001:db8::1".parse().unwrap());
    let b = router_mac("2001:db8::2".parse().unwrap());
    assert_ne!(a, b);
    assert_eq!(a, router_mac("2001:db8::1".parse().unwrap()));
    // Locally administered unicast, and never the IPv4 form.
    assert_eq!((a[0] & 0x03, a[0]), (0x02, 0x06));
    // The modified EUI-64 of 02:00:c0:00:02:07 (the U/L bit flipped back, ff:fe inserted):
    // what the kernel gives a device with that MAC as its link-local address.
    assert_eq!(gateway([0x02, 0, 192, 0, 2, 7]).to_string(), "fe80::c0ff:fe00:207");
}

#[test]
fn other_nodes_get_static_entries_and_routes_to_the_prefixes_they_reported() {
    let u = Underlay { local: Some("192.0.2.1".parse().unwrap()), port: 0 };
    let mut nets = peered();
    nets[0].prefixes = vec![p("10.1.0.0/16"), p("fd00:1::/48")];
    // Alone on the node: nothing leads away, no entries.
    let want = desired(&nets, &u);
    assert!(want.fdb.is_empty() && want.neighs.is_empty());
    assert!(!want.routes.iter().any(|r| r.via == r.id), "{:?}", want.routes);
    nets[0].remotes = vec![
        remote("192.0.2.2", &["10.1.2.0/24", "fd00:1:0:2::/64"]),
        // Outside the network's prefixes, wider than them, another's (taken), and this
        // node's own workloads' (the local connected route wins): none routed.
        remote("192.0.2.3", &["10.9.0.0/24", "10.0.0.0/8", "10.1.2.0/25", "10.1.1.0/24"]),
        remote("192.0.2.4", &["fd00:1:0:4::/64"]),
        // This node's own VTEP: not another node.
        remote("192.0.2.1", &["10.1.7.0/24"]),
    ];
    let local = BTreeMap::from([(300, [p("10.1.1.0/24")].into_iter().collect())]);
    let want = desired_with(&nets, &u, &local);
    let mac = |v: &str| router_mac(v.parse().unwrap());
    let fdb: Vec<(u32, [u8; 6], String)> =
        want.fdb.iter().map(|f| (f.id, f.mac, f.dst.to_string())).collect();
    assert_eq!(
        fdb,
        [
            (300, mac("192.0.2.2"), "192.0.2.2".into()),
            (300, mac("192.0.2.3"), "192.0.2.3".into()),
            (300, mac("192.0.2.4"), "192.0.2.4".into()),
        ]
    );
    // No flooding entry: every MAC is known.
    assert!(want.fdb.iter().all(|f| f.mac != [0; 6]));
    let neighs: Vec<(Ipv6Addr, [u8; 6])> = want.neighs.iter().map(|n| (n.addr, n.mac)).collect();
    assert_eq!(
        neighs,
        ["192.0.2.2", "192.0.2.3", "192.0.2.4"].map(|v| (gateway(mac(v)), mac(v))).to_vec()
    );
    let gw = |v: &str| Some(IpAddr::V6(gateway(mac(v))));
    let node_routes: Vec<&LeakRoute> = want.routes.iter().filter(|r| r.via == r.id).collect();
    assert_eq!(
        node_routes,
        [
            // IPv4 via the IPv6 link-local gateway (RFC 8950), IPv6 alike.
            &LeakRoute { id: 300, dst: p("10.1.2.0/24"), via: 300, gw: gw("192.0.2.2") },
            &LeakRoute { id: 300, dst: p("fd00:1:0:2::/64"), via: 300, gw: gw("192.0.2.2") },
            &LeakRoute { id: 300, dst: p("fd00:1:0:4::/64"), via: 300, gw: gw("192.0.2.4") },
        ]
    );
    // From nothing: entries after the devices and before the routes that use them; then
    // nothing left to do.
    let steps = plan(&want, &Observed::default());
    let pos = |f: fn(&Step) -> bool| steps.iter().position(f).unwrap();
    let last_create = steps.iter().rposition(|s| matches!(s, Step::CreateDevice(_))).unwrap();
    assert!(last_create < pos(|s| matches!(s, Step::AddFdb(_))), "{steps:?}");
    assert!(pos(|s| matches!(s, Step::AddNeigh(_))) < pos(|s| matches!(s, Step::AddRoute(_))));
    assert_eq!(steps.iter().filter(|s| matches!(s, Step::AddFdb(_))).count(), 3);
    assert_eq!(steps.iter().filter(|s| matches!(s, Step::AddNeigh(_))).count(), 3);
    assert!(plan(&want, &after(&want)).is_empty());

    // A node that left: its entries and routes go, the others stay.
    let have = after(&want);
    nets[0].remotes.remove(2);
    let want = desired_with(&nets, &u, &local);
    let steps = plan(&want, &have);
    assert_eq!(
        steps,
        [
            Step::DeleteRoute(LeakRoute {
                id: 300,
                dst: p("fd00:1:0:4::/64"),
                via: 300,
                gw: gw("192.0.2.4")
            }),
            Step::DeleteFdb(Fdb {
                id: 300,
                mac: mac("192.0.2.4"),
                dst: "192.0.2.4".parse().unwrap()
            }),
            Step::DeleteNeigh(Neigh {
                id: 300,
                addr: gateway(mac("192.0.2.4")),
                mac: mac("192.0.2.4")
            }),
        ]
    );
    // A flooding entry left by an older version, and one node's prefix moved to another:
    // the flood goes, the route is replaced.
    let mut have = after(&want);
    have.fdb.insert(Fdb { id: 300, mac: [0; 6], dst: "192.0.2.2".parse().unwrap() });
    nets[0].remotes[0].prefixes.retain(|p| p.addr().is_ipv6());
    nets[0].remotes[1].prefixes = vec![p("10.1.2.0/24")];
    let want = desired_with(&nets, &u, &local);
    let steps = plan(&want, &have);
    assert!(steps.contains(&Step::DeleteFdb(Fdb {
        id: 300,
        mac: [0; 6],
        dst: "192.0.2.2".parse().unwrap()
    })));
    assert!(steps.contains(&Step::AddRoute(LeakRoute {
        id: 300,
        dst: p("10.1.2.0/24"),
        via: 300,
        gw: gw("192.0.2.3")
    })));
    assert_eq!(steps.len(), 3, "{steps:?}");
    // The last one gone: every entry and route through the VXLAN device goes.
    let have = after(&want);
    nets[0].remotes.clear();
    let steps = plan(&desired_with(&nets, &u, &local), &have);
    assert_eq!(steps.len(), 2 + 2 + 2, "{steps:?}");
    assert!(steps
        .iter()
        .all(|s| matches!(s, Step::DeleteRoute(_) | Step::DeleteFdb(_) | Step::DeleteNeigh(_))));
}

#[test]
fn a_node_reports_only_its_connected_prefixes_inside_the_networks_own() {
    let nets = vec![TenantNetwork {
        id: 300,
        prefixes: vec![p("10.1.0.0/16"), p("fd00:1::/48")],
        ..Default::default()
    }];
    let mut have = Observed::default();
    have.local.insert(
        300,
        [p("10.1.1.0/24"), p("10.0.0.0/8"), p("192.168.0.0/24"), p("fd00:1:0:1::/64")]
            .into_iter()
            .collect(),
    );
    have.local.insert(301, [p("10.2.1.0/24")].into_iter().collect());
    let r = reported(&nets, &have);
    assert_eq!(r.len(), 1);
    assert_eq!(r[&300], [p("10.1.1.0/24"), p("fd00:1:0:1::/64")]);
    // A node with hundreds of workload subnets reports at most MAX_REPORTED.
    let many: BTreeSet<IpNet> = (0..=255u8).map(|i| p(&format!("10.1.{i}.0/24"))).collect();
    have.local.insert(300, many);
    assert_eq!(reported(&nets, &have)[&300].len(), MAX_REPORTED);
}
