// SPDX-License-Identifier: Apache-2.0
use std::collections::BTreeMap;

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
        floods: want.floods.clone(),
        isolated: want
            .devices
            .iter()
            .filter(|d| matches!(d, Device::Vrf { .. }))
            .map(Device::id)
            .collect(),
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
            Device::Vxlan { id: 300, local: Some("192.0.2.1".parse().unwrap()), port: 4789 },
            Device::Vxlan { id: 301, local: Some("192.0.2.1".parse().unwrap()), port: 4789 },
        ]
    );
    let routes: Vec<_> = want.routes.iter().cloned().collect();
    assert_eq!(
        routes,
        [
            LeakRoute { id: 300, dst: p("10.2.7.0/24"), via: 301 },
            LeakRoute { id: 301, dst: p("10.1.0.0/16"), via: 300 },
            LeakRoute { id: 301, dst: p("fd00:1::/64"), via: 300 },
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

#[test]
fn other_nodes_get_a_flood_entry_each_and_the_networks_prefixes_through_its_vxlan() {
    let mut nets = peered();
    nets[0].prefixes = vec![p("10.1.0.0/16")];
    // Alone on the node: nothing leads away.
    let want = desired(&nets, &Underlay::default());
    assert!(want.floods.is_empty());
    assert!(!want.routes.iter().any(|r| r.via == r.id), "{:?}", want.routes);
    nets[0].remotes = vec!["192.0.2.2".parse().unwrap(), "192.0.2.3".parse().unwrap()];
    let want = desired(&nets, &Underlay::default());
    let floods: Vec<(u32, String)> =
        want.floods.iter().map(|f| (f.id, f.dst.to_string())).collect();
    assert_eq!(floods, [(300, "192.0.2.2".into()), (300, "192.0.2.3".into())]);
    assert!(want.routes.contains(&LeakRoute { id: 300, dst: p("10.1.0.0/16"), via: 300 }));
    // From nothing: both entries added after the devices; then nothing left to do.
    let steps = plan(&want, &Observed::default());
    let first_flood = steps.iter().position(|s| matches!(s, Step::AddFlood(_))).unwrap();
    let last_create = steps.iter().rposition(|s| matches!(s, Step::CreateDevice(_))).unwrap();
    assert!(last_create < first_flood, "{steps:?}");
    assert_eq!(steps.iter().filter(|s| matches!(s, Step::AddFlood(_))).count(), 2);
    assert!(plan(&want, &after(&want)).is_empty());
    // A node that left: its entry goes, the other stays.
    let have = after(&want);
    nets[0].remotes.truncate(1);
    let want = desired(&nets, &Underlay::default());
    assert_eq!(
        plan(&want, &have),
        [Step::DeleteFlood(Flood { id: 300, dst: "192.0.2.3".parse().unwrap() })]
    );
    // The last one gone: the route through the VXLAN device goes too.
    nets[0].remotes.clear();
    let want = desired(&nets, &Underlay::default());
    let steps = plan(&want, &have);
    assert!(steps.contains(&Step::DeleteRoute(LeakRoute {
        id: 300,
        dst: p("10.1.0.0/16"),
        via: 300
    })));
    assert_eq!(steps.len(), 3, "{steps:?}");
}
