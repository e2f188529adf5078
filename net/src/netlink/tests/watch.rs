// SPDX-License-Identifier: Apache-2.0
use std::time::{Duration, Instant};

use super::{veth_up, with_sock};
use crate::netlink::{Changes, KernelAddress, KernelRoute, KernelRule, Watcher};
use crate::resource::nethelpers::{Family, RoutingTable, Scope};

#[test]
fn watcher_sees_changes_and_never_blocks() {
    with_sock(|sock| {
        let mut w = Watcher::new().unwrap();
        let t = Instant::now();
        assert_eq!(w.drain().unwrap(), Changes::default());
        assert!(t.elapsed() < Duration::from_millis(500), "drain blocked");

        let (ix, _) = veth_up(sock, "kv0", "kv1");
        let c = w.drain().unwrap();
        assert!(c.links && !c.overrun, "{c:?}");

        sock.address_add(&KernelAddress::new(ix, "192.0.2.1/24".parse().unwrap())).unwrap();
        let c = w.drain().unwrap();
        assert!(c.addresses && c.routes, "address plus its prefix route: {c:?}");

        let mut r = KernelRoute::new(Family::Inet4, Some("198.51.100.0/24".parse().unwrap()));
        r.oif = Some(ix);
        r.scope = Scope::LINK;
        sock.route_add(&r).unwrap();
        // Links are not checked here: the kernel reports a veth's carrier from its deferred
        // link-watch work, which may land in this drain rather than the first one.
        assert!(w.drain().unwrap().routes);

        sock.rule_add(&KernelRule::new(Family::Inet4, 100, RoutingTable(100))).unwrap();
        assert!(w.drain().unwrap().rules);

        sock.link_delete(ix).unwrap();
        let c = w.drain().unwrap();
        assert!(c.links, "{c:?}");
        assert!(!w.drain().unwrap().any(), "everything was drained");
    });
}

#[test]
fn watcher_overrun_marks_everything() {
    use nix::sys::socket::{setsockopt, sockopt};
    with_sock(|sock| {
        let mut w = Watcher::new().unwrap();
        // Shrink the buffer to the kernel minimum so a burst of route events overflows it.
        setsockopt(&w, sockopt::RcvBuf, &0usize).unwrap();
        let (ix, _) = veth_up(sock, "kv0", "kv1");
        for i in 0..500u32 {
            let ip = std::net::Ipv4Addr::from(0x0a_c8_00_00 + i);
            let mut r = KernelRoute::new(Family::Inet4, Some(std::net::IpAddr::V4(ip).into()));
            r.oif = Some(ix);
            r.scope = Scope::LINK;
            sock.route_add(&r).unwrap();
        }
        let c = w.drain().unwrap();
        assert!(c.overrun, "{c:?}");
        assert!(c.links && c.addresses && c.routes && c.rules, "overrun marks all: {c:?}");
        assert_eq!(w.drain().unwrap(), Changes::default(), "the next drain is clean");
    });
}
