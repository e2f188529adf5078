// SPDX-License-Identifier: Apache-2.0
//! Tenant networks end to end on a kernel with VRF and VXLAN (`KEELSON_FULL_KERNEL=1`, the VM
//! suite): `apply` two Networks peering each other into a real etcd, the controller's passes,
//! and the node agent realising the NodeNetworks in a network namespace of its own; the
//! Networks' peerings go Ready once the kernel has the devices and routes, and back to
//! Pending (routes withdrawn) when one side is deleted.
#![allow(clippy::disallowed_methods)] // Tests drive the parts from outside.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::time::Instant;

use net::netlink::RouteSocket;
use net::tenant::{kernel::observe, Underlay};
use operator::ctl;
use operator::key::Layout;
use operator::kinds::Kind;
use operator::networks::agent::Kernel;
use operator::networks::allocate::{Allocator, Range};
use operator::networks::controller::Controller;
use operator::networks::kinds::{NetState, Network, NETWORKS};
use operator::networks::node;
use operator::store::Store;
use testkit::{in_netns, require_full_kernel};

fn net(s: &mut Store, name: &str) -> Network {
    s.get("default", NETWORKS, name).unwrap().unwrap()
}

#[test]
fn peered_networks_reach_the_kernel_and_come_back_ready() {
    if !require_full_kernel("peered_networks_reach_the_kernel_and_come_back_ready") {
        return;
    }
    let Some((etcd, _dir)) = common::start_etcd("tn", "agent") else { return };
    // Route sockets bound to a fresh namespace: the node's kernel. The etcd client stays in
    // this one. A second socket there reads back what the kernel has.
    let (sock, mut look) =
        in_netns(|| (RouteSocket::new().expect("socket"), RouteSocket::new().expect("socket")))
            .expect("namespace");
    let mut dp = Kernel::new(sock, Underlay::default());
    let mut s = Store::new(etcd.client(), Layout::new("/keelson-operator", b"/keelson-operator"));
    let mut c = Controller::new(Allocator::new(Range::default()), "default");

    let t0 = Instant::now();
    ctl::apply(&mut s, common::PEERED_NETWORKS).unwrap();
    c.pass(&mut s).unwrap();
    assert_eq!(node::sync(&mut s, "n1", &mut dp).unwrap(), 2);
    c.pass(&mut s).unwrap();
    let (a, b) = (net(&mut s, "a"), net(&mut s, "b"));
    assert_eq!(a.spec.status.peerings[0].state, NetState::Ready, "{:?}", a.spec.status);
    assert_eq!(b.spec.status.peerings[0].state, NetState::Ready, "{:?}", b.spec.status);
    eprintln!("apply to Ready with the kernel realised: {:?}", t0.elapsed());
    let (ida, idb) = (a.spec.status.id.unwrap(), b.spec.status.id.unwrap());

    let have = observe(&mut look).unwrap();
    let names: Vec<&str> = have.devices.iter().map(|f| f.name.as_str()).collect();
    for want in
        [format!("tvrf{ida}"), format!("tvx{ida}"), format!("tvrf{idb}"), format!("tvx{idb}")]
    {
        assert!(names.contains(&want.as_str()), "{want} missing from {names:?}");
    }
    let leaked: Vec<(u32, String, u32)> =
        have.routes.iter().map(|r| (r.id, r.dst.to_string(), r.via)).collect();
    assert!(leaked.contains(&(ida, "10.2.0.0/16".into(), idb)), "{leaked:?}");
    assert!(leaked.contains(&(ida, "fd00:2::/64".into(), idb)), "{leaked:?}");
    assert!(leaked.contains(&(idb, "10.1.0.0/16".into(), ida)), "{leaked:?}");

    // One side goes: a's peering is Pending, and the node has no routes and no b devices.
    let t0 = Instant::now();
    ctl::delete(&mut s, "default", Kind::Network, "b").unwrap();
    c.pass(&mut s).unwrap();
    assert_eq!(node::sync(&mut s, "n1", &mut dp).unwrap(), 1);
    c.pass(&mut s).unwrap();
    assert_eq!(net(&mut s, "a").spec.status.peerings[0].state, NetState::Pending);
    let have = observe(&mut look).unwrap();
    assert!(have.routes.is_empty(), "{:?}", have.routes);
    assert_eq!(have.devices.len(), 2, "{:?}", have.devices);
    eprintln!("delete to withdrawn on the node: {:?}", t0.elapsed());
}
