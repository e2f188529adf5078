// SPDX-License-Identifier: Apache-2.0
//! On a kernel with VRF and VXLAN (`KEELSON_FULL_KERNEL=1`, the VM suite): two peered
//! networks, realised, checked by dumping, synced again (nothing to do), withdrawn.
#![allow(clippy::disallowed_methods)]

use ipnet::IpNet;
use testkit::{in_netns, require_full_kernel};

use super::super::kernel::{observe, sync, Outcome};
use super::super::*;
use crate::netlink::RouteSocket;

fn p(s: &str) -> IpNet {
    s.parse().unwrap()
}

#[test]
fn vrf_and_vxlan_devices_and_leaked_routes() {
    if !require_full_kernel("vrf_and_vxlan_devices_and_leaked_routes") {
        return;
    }
    in_netns(|| {
        let mut sock = RouteSocket::new().expect("socket");
        let u = Underlay { local: Some("127.0.0.1".parse().unwrap()), port: 0 };
        let nets = vec![
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
        ];
        let out = sync(&mut sock, &nets, &u).expect("sync");
        assert_eq!(
            out[&300],
            Outcome::Realised { prefixes: vec![], peers: vec![301], failed: vec![] }
        );
        assert_eq!(
            out[&301],
            Outcome::Realised { prefixes: vec![], peers: vec![300], failed: vec![] }
        );
        let have = observe(&mut sock).expect("observe");
        let want = desired(&nets, &u);
        for d in &want.devices {
            let f = have.devices.iter().find(|f| f.name == d.name()).expect("device");
            assert_eq!(f.device.as_ref(), Some(d));
            assert!(f.up, "{} down", f.name);
            if let Device::Vxlan { id, .. } = d {
                assert_eq!(f.master, Some(*id), "{} not in its VRF", f.name);
            }
        }
        assert_eq!(have.routes, want.routes);
        // Both tables end in unreachable default (IPv4 and IPv6): no fall-through to main.
        assert_eq!(have.isolated, [300, 301].into_iter().collect());
        let vx = sock.get_link_by_name("tvx300").unwrap().unwrap();
        assert_eq!(vx.kind, "vxlan");
        assert_eq!(sock.get_link_by_name("tvrf300").unwrap().unwrap().vrf_table, Some(table(300)));
        // Idempotent: the kernel as it is now is the plan's target.
        assert_eq!(plan(&want, &have), []);

        // Another node carrying 300: its forwarding and neighbour entries and its prefixes via
        // its gateway (IPv4 through the IPv6 link-local next hop), read back as written.
        let mut two = nets.clone();
        two[0].prefixes = vec![p("10.1.0.0/16"), p("fd00:1::/48")];
        two[0].remotes = vec![Remote {
            vtep: "127.0.0.2".parse().unwrap(),
            prefixes: vec![p("10.1.2.0/24"), p("fd00:1:0:2::/64"), p("10.9.0.0/24")],
        }];
        let out = sync(&mut sock, &two, &u).expect("sync");
        assert_eq!(
            out[&300],
            Outcome::Realised { prefixes: vec![], peers: vec![301], failed: vec![] }
        );
        let have = observe(&mut sock).expect("observe");
        let want = desired(&two, &u);
        assert_eq!((have.fdb.len(), have.neighs.len()), (1, 1), "{have:?}");
        assert_eq!((&have.fdb, &have.neighs), (&want.fdb, &want.neighs));
        assert_eq!(have.routes, want.routes);
        assert_eq!(have.routes.iter().filter(|r| r.via == r.id).count(), 2);
        assert_eq!(plan(&want, &have), []);
        // A workload of this node's own (a connected route in the VRF) is reported.
        let dummy = ["link", "add", "wl0", "type", "dummy"];
        assert!(std::process::Command::new("ip").args(dummy).status().unwrap().success());
        for args in [
            &["link", "set", "wl0", "master", "tvrf300", "up"][..],
            &["addr", "add", "10.1.1.1/24", "dev", "wl0"],
            &["addr", "add", "fd00:1:0:1::1/64", "dev", "wl0", "nodad"],
            &["addr", "add", "10.200.0.1/24", "dev", "wl0"],
        ] {
            assert!(std::process::Command::new("ip").args(args).status().unwrap().success());
        }
        let out = sync(&mut sock, &two, &u).expect("sync");
        assert_eq!(
            out[&300],
            Outcome::Realised {
                prefixes: vec![p("10.1.1.0/24"), p("fd00:1:0:1::/64")],
                peers: vec![301],
                failed: vec![]
            }
        );
        // The other node gone: its entries and routes go.
        sync(&mut sock, &nets, &u).expect("sync");
        let have = observe(&mut sock).expect("observe");
        assert!(have.fdb.is_empty() && have.neighs.is_empty(), "{have:?}");
        assert!(!have.routes.iter().any(|r| r.via == r.id), "{:?}", have.routes);
        assert!(std::process::Command::new("ip")
            .args(["link", "del", "wl0"])
            .status()
            .unwrap()
            .success());

        // One side withdrawn: its routes go, the devices stay.
        let alone = vec![
            TenantNetwork { id: 300, ..Default::default() },
            TenantNetwork { id: 301, ..Default::default() },
        ];
        sync(&mut sock, &alone, &u).expect("sync");
        let have = observe(&mut sock).expect("observe");
        assert!(have.routes.is_empty(), "{:?}", have.routes);
        assert_eq!(have.devices.len(), 4);
        // A network gone: its devices go.
        sync(&mut sock, &alone[..1], &u).expect("sync");
        let names: Vec<String> =
            observe(&mut sock).unwrap().devices.into_iter().map(|f| f.name).collect();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(names.iter().all(|n| n.ends_with("300")), "{names:?}");
    });
}
