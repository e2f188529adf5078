// SPDX-License-Identifier: Apache-2.0
use std::net::IpAddr;

use super::{veth_up, with_sock};
use crate::netlink::{KernelAddress, KernelRoute, NlErrorKind, RouteSocket};
use crate::resource::nethelpers::{
    AddressFlags, Family, RouteFlags, RouteProtocol, RouteType, RoutingTable, Scope,
};

fn same_key(a: &KernelRoute, b: &KernelRoute) -> bool {
    a.family == b.family && a.dst == b.dst && a.table == b.table && a.priority == b.priority
}

fn find(sock: &mut RouteSocket, r: &KernelRoute) -> Option<KernelRoute> {
    sock.dump_routes().unwrap().into_iter().find(|k| same_key(k, r))
}

/// Link with 192.0.2.1/24 and 2001:db8::1/64 (nodad), up.
fn setup(sock: &mut RouteSocket) -> u32 {
    let (ix, _) = veth_up(sock, "kv0", "kv1");
    sock.address_add(&KernelAddress::new(ix, "192.0.2.1/24".parse().unwrap())).unwrap();
    let mut v6 = KernelAddress::new(ix, "2001:db8::1/64".parse().unwrap());
    v6.flags = AddressFlags::NODAD;
    sock.address_add(&v6).unwrap();
    ix
}

fn roundtrip(sock: &mut RouteSocket, r: &KernelRoute) {
    sock.route_add(r).unwrap();
    let got = find(sock, r).unwrap_or_else(|| panic!("route missing: {r:?}"));
    assert_eq!(got.gateway, r.gateway);
    assert_eq!(got.oif, r.oif);
    assert_eq!((got.protocol, got.kind, got.mtu), (r.protocol, r.kind, r.mtu));
    if r.family == Family::Inet4 {
        assert_eq!(got.scope, r.scope);
    }
    assert_eq!(got.onlink(), r.onlink());
    let e = sock.route_add(r).unwrap_err();
    assert_eq!(e.kind(), NlErrorKind::Exists, "{e}");
    sock.route_replace(r).unwrap();
    sock.route_delete(&got).unwrap();
    assert_eq!(find(sock, r), None);
    let e = sock.route_delete(&got).unwrap_err();
    assert_eq!(e.kind(), NlErrorKind::NotFound, "{e}");
}

#[test]
fn routes_main_and_table_100() {
    with_sock(|sock| {
        let ix = setup(sock);
        for table in [RoutingTable::MAIN, RoutingTable(100), RoutingTable(1000)] {
            // IPv4 default via a gateway, metric, MTU, protocol boot.
            let mut r = KernelRoute::new(Family::Inet4, None);
            r.gateway = Some("192.0.2.254".parse().unwrap());
            r.oif = Some(ix);
            r.table = table;
            r.priority = 1024;
            r.mtu = 1400;
            r.protocol = RouteProtocol::BOOT;
            roundtrip(sock, &r);
            // IPv4 on-link prefix (scope link, no gateway).
            let mut r = KernelRoute::new(Family::Inet4, Some("198.51.100.0/24".parse().unwrap()));
            r.oif = Some(ix);
            r.scope = Scope::LINK;
            r.table = table;
            r.priority = 50;
            roundtrip(sock, &r);
            // IPv4 gateway outside every connected prefix, declared on-link.
            let mut r = KernelRoute::new(Family::Inet4, Some("203.0.113.0/24".parse().unwrap()));
            r.gateway = Some("10.99.0.1".parse().unwrap());
            r.oif = Some(ix);
            r.flags = RouteFlags::ONLINK;
            r.table = table;
            roundtrip(sock, &r);
            // IPv6 via gateway and on-link.
            let mut r = KernelRoute::new(Family::Inet6, Some("2001:db8:1::/48".parse().unwrap()));
            r.gateway = Some("2001:db8::fe".parse().unwrap());
            r.oif = Some(ix);
            r.table = table;
            r.priority = 1024;
            r.mtu = 1280;
            roundtrip(sock, &r);
            let mut r = KernelRoute::new(Family::Inet6, None);
            r.oif = Some(ix);
            r.table = table;
            r.priority = 2048;
            r.protocol = RouteProtocol::BOOT;
            roundtrip(sock, &r);
        }
    });
}

#[test]
fn dump_covers_all_tables() {
    with_sock(|sock| {
        let ix = setup(sock);
        let routes = sock.dump_routes().unwrap();
        // The kernel's own local-table entries and the connected prefix are reported.
        assert!(routes.iter().any(|r| r.table == RoutingTable::LOCAL
            && r.kind == RouteType::LOCAL
            && r.dst == Some("192.0.2.1/32".parse().unwrap())));
        let connected = routes
            .iter()
            .find(|r| {
                r.table == RoutingTable::MAIN && r.dst == Some("192.0.2.0/24".parse().unwrap())
            })
            .expect("connected route");
        assert_eq!(
            (connected.oif, connected.protocol, connected.scope),
            (Some(ix), RouteProtocol::KERNEL, Scope::LINK)
        );
        assert_eq!(connected.src, Some("192.0.2.1".parse::<IpAddr>().unwrap()));
        assert!(routes.iter().any(|r| r.family == Family::Inet6
            && r.dst == Some("2001:db8::/64".parse().unwrap())
            && r.priority == 256));
    });
}

/// A dump of one family in one table holds exactly what the full dump holds there; a table
/// that does not exist (or has none of that family) is empty, not an error.
#[test]
fn a_dump_of_one_table_is_that_part_of_the_full_dump() {
    with_sock(|sock| {
        let ix = setup(sock);
        let mut r = KernelRoute::new(Family::Inet4, Some("198.51.100.0/24".parse().unwrap()));
        r.oif = Some(ix);
        r.scope = Scope::LINK;
        r.table = RoutingTable(100);
        sock.route_add(&r).unwrap();
        let all = sock.dump_routes().unwrap();
        for (family, table) in [
            (Family::Inet4, RoutingTable::MAIN),
            (Family::Inet4, RoutingTable::LOCAL),
            (Family::Inet4, RoutingTable(100)),
            (Family::Inet6, RoutingTable::MAIN),
            (Family::Inet6, RoutingTable(100)),
            (Family::Inet4, RoutingTable(4242)),
            (Family::Inet6, RoutingTable(4242)),
        ] {
            let want: Vec<&KernelRoute> =
                all.iter().filter(|k| k.family == family && k.table == table).collect();
            let got = sock.dump_routes_in(family, table).unwrap();
            assert_eq!(got.iter().collect::<Vec<_>>(), want, "{family:?} {table:?}");
        }
        assert_eq!(sock.dump_routes_in(Family::Inet4, RoutingTable(100)).unwrap().len(), 1);
        assert!(sock.dump_routes_in(Family::Inet4, RoutingTable(4242)).unwrap().is_empty());
    });
}

#[test]
fn unreachable_gateway_is_invalid_with_reason() {
    with_sock(|sock| {
        let ix = setup(sock);
        let mut r = KernelRoute::new(Family::Inet4, None);
        r.gateway = Some("10.9.9.9".parse().unwrap());
        r.oif = Some(ix);
        let e = sock.route_add(&r).unwrap_err();
        assert_eq!(e.kind(), NlErrorKind::Invalid, "{e}");
        let msg = e.kernel_message().unwrap_or_else(|| panic!("no kernel reason in {e}"));
        assert!(msg.to_lowercase().contains("gateway"), "{msg}");
        assert!(e.to_string().contains("kernel:"), "{e}");
    });
}

#[test]
fn dump_10000_routes() {
    with_sock(|sock| {
        let ix = setup(sock);
        for i in 0..10_000u32 {
            let ip = std::net::Ipv4Addr::from(0x0a_c8_00_00 + i);
            let mut r = KernelRoute::new(Family::Inet4, Some(ipnet::IpNet::from(IpAddr::V4(ip))));
            r.oif = Some(ix);
            r.scope = Scope::LINK;
            r.table = RoutingTable(200);
            sock.route_add(&r).unwrap();
        }
        let routes = sock.dump_routes().unwrap();
        let n = routes.iter().filter(|r| r.table == RoutingTable(200)).count();
        assert_eq!(n, 10_000);
    });
}

/// Only the last request of a window asks for an acknowledgement: when that one fails, or
/// when every request of a window fails, each still gets its own result and the next window
/// is not confused by replies to the previous one.
#[test]
fn a_window_whose_last_request_fails_is_answered() {
    with_sock(|sock| {
        let ix = setup(sock);
        let route = |i: u32| {
            let mut r = KernelRoute::new(
                Family::Inet4,
                Some(format!("10.{}.{}.0/24", i / 256, i % 256).parse().unwrap()),
            );
            r.gateway = Some("192.0.2.254".parse().unwrap());
            r.oif = Some(ix);
            r.priority = 1024;
            r
        };
        // Window 1 (256 requests): its last is a duplicate. Window 2: all deletes of routes
        // that do not exist. Window 3: one add, then the very last request fails.
        let mut changes: Vec<(bool, KernelRoute)> = (0..255).map(|i| (true, route(i))).collect();
        changes.push((true, route(0)));
        changes.extend((1000..1256).map(|i| (false, route(i))));
        changes.push((true, route(2000)));
        changes.push((true, route(2000)));
        let results = sock.route_batch(&changes);
        assert_eq!(results.len(), changes.len());
        for (i, r) in results.iter().enumerate() {
            match i {
                255 | 513 => assert_eq!(r.as_ref().unwrap_err().kind(), NlErrorKind::Exists),
                256..=511 => assert_eq!(r.as_ref().unwrap_err().kind(), NlErrorKind::NotFound),
                _ => assert!(r.is_ok(), "change {i}: {r:?}"),
            }
        }
        assert!(find(sock, &route(2000)).is_some());
    });
}

/// 700 changes, several datagrams' worth, with failures among them: every change gets its own
/// result in order, a failure stops nothing else, and the kernel holds exactly the successes.
#[test]
fn a_batch_gives_each_change_its_own_result() {
    with_sock(|sock| {
        let ix = setup(sock);
        let route = |i: u32, gw: &str| {
            let mut r = KernelRoute::new(
                Family::Inet4,
                Some(format!("10.{}.{}.0/24", i / 256, i % 256).parse().unwrap()),
            );
            r.gateway = Some(gw.parse().unwrap());
            r.oif = Some(ix);
            r.priority = 1024;
            r
        };
        let mut changes: Vec<(bool, KernelRoute)> =
            (0..700).map(|i| (true, route(i, "192.0.2.254"))).collect();
        // An unreachable gateway, a duplicate and a delete of nothing, spread over windows.
        changes[10] = (true, route(10, "198.51.100.1"));
        changes[300] = (true, route(299, "192.0.2.254"));
        changes[650] = (false, route(9999, "192.0.2.254"));
        let results = sock.route_batch(&changes);
        assert_eq!(results.len(), 700);
        for (i, r) in results.iter().enumerate() {
            match i {
                10 => assert_eq!(r.as_ref().unwrap_err().kind(), NlErrorKind::Invalid, "{r:?}"),
                300 => assert_eq!(r.as_ref().unwrap_err().kind(), NlErrorKind::Exists, "{r:?}"),
                650 => assert_eq!(r.as_ref().unwrap_err().kind(), NlErrorKind::NotFound, "{r:?}"),
                _ => assert!(r.is_ok(), "change {i}: {r:?}"),
            }
        }
        let kernel = sock.dump_routes().unwrap();
        let ours = kernel
            .iter()
            .filter(|k| k.dst.is_some_and(|d| d.addr().to_string().starts_with("10.")))
            .count();
        assert_eq!(ours, 697);
        assert!(find(sock, &route(10, "192.0.2.254")).is_none());
        // The error names its own route, not the batch's first.
        let text = results[10].as_ref().unwrap_err().to_string();
        assert!(text.contains("10.0.10.0/24"), "{text}");
        // Deleting them all in one batch leaves none.
        let deletes: Vec<(bool, KernelRoute)> = kernel
            .into_iter()
            .filter(|k| k.dst.is_some_and(|d| d.addr().to_string().starts_with("10.")))
            .map(|k| (false, k))
            .collect();
        assert!(sock.route_batch(&deletes).iter().all(Result::is_ok));
        assert!(sock
            .dump_routes()
            .unwrap()
            .iter()
            .all(|k| !k.dst.is_some_and(|d| d.addr().to_string().starts_with("10."))));
    });
}

/// The in-place reader and `netlink-packet-route` read a real kernel's dump alike: the
/// kernel's own local, broadcast and multicast entries, IPv6 routes with cache info and
/// preference, metrics, a table past 255, an IPv4 route via an IPv6 next hop.
#[test]
fn dump_reads_as_the_crate_reads_it() {
    use netlink_packet_route::route::RouteMessage;
    use netlink_packet_route::RouteNetlinkMessage;
    with_sock(|sock| {
        let ix = setup(sock);
        let mut r = KernelRoute::new(Family::Inet4, Some("198.51.100.0/24".parse().unwrap()));
        r.gateway = Some("192.0.2.254".parse().unwrap());
        r.oif = Some(ix);
        r.table = RoutingTable(1000);
        r.mtu = 1400;
        sock.route_add(&r).unwrap();
        let mut via = KernelRoute::new(Family::Inet4, Some("203.0.113.0/24".parse().unwrap()));
        via.gateway = Some("fe80::1".parse().unwrap());
        via.oif = Some(ix);
        // Older kernels refuse an IPv6 next hop for IPv4 (RFC 8950 support came in 5.2).
        let _ = sock.route_add(&via);
        let mine = sock.dump_routes().unwrap();
        let mut theirs = Vec::new();
        for family in [Family::Inet4, Family::Inet6] {
            let mut req = RouteMessage::default();
            req.header.address_family = netlink_packet_route::AddressFamily::from(family.af());
            for m in sock.dump("test", RouteNetlinkMessage::GetRoute(req)).unwrap() {
                if let RouteNetlinkMessage::NewRoute(m) = m {
                    theirs.extend(crate::netlink::route::decode(m));
                }
            }
        }
        assert!(mine.len() >= 8, "{mine:?}");
        assert!(mine.iter().any(|k| k.table == r.table && k.mtu == 1400), "{mine:?}");
        assert_eq!(mine, theirs);
    });
}
