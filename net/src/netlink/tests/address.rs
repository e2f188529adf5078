// SPDX-License-Identifier: Apache-2.0
use super::{veth_up, with_sock};
use crate::netlink::{Event, KernelAddress, NlErrorKind, RouteSocket, Watcher, FOREVER};
use crate::resource::nethelpers::{AddressFlags, Family, Scope};

fn find(sock: &mut RouteSocket, a: &KernelAddress) -> Option<KernelAddress> {
    sock.dump_addresses()
        .unwrap()
        .into_iter()
        .find(|k| k.index == a.index && k.net() == a.net() && k.family == a.family)
}

/// add, dump, duplicate add, replace with finite lifetimes in place, delete.
fn lifecycle(net: &str, flags: AddressFlags) {
    let net: ipnet::IpNet = net.parse().unwrap();
    with_sock(move |sock| {
        let (ix, _) = veth_up(sock, "kv0", "kv1");
        let mut a = KernelAddress::new(ix, net);
        a.flags = flags;
        a.priority = 300;
        sock.address_add(&a).unwrap();
        let got = find(sock, &a).expect("address present");
        assert_eq!(got.family, Family::of(&net.addr()));
        assert_eq!(
            (got.prefix_len, got.scope, got.priority),
            (net.prefix_len(), Scope::GLOBAL, 300)
        );
        assert!(got.flags.contains(AddressFlags::PERMANENT | flags), "{:?}", got.flags);
        assert_eq!((got.valid_lft, got.preferred_lft), (FOREVER, FOREVER));
        if net.addr().is_ipv4() {
            assert_eq!(got.local, Some(net.addr()));
            assert_eq!(got.broadcast.map(|b| b.to_string()).as_deref(), Some("192.0.2.255"));
        }
        let e = sock.address_add(&a).unwrap_err();
        assert_eq!(e.kind(), NlErrorKind::Exists, "{e}");

        // A DHCP renewal: new lifetimes and priority, same address, never removed.
        let mut watcher = Watcher::new().unwrap();
        watcher.drain().unwrap();
        let mut renewed = a.clone();
        renewed.valid_lft = 600;
        renewed.preferred_lft = 300;
        renewed.priority = 400;
        sock.address_replace(&renewed).unwrap();
        let got = find(sock, &a).expect("address still present");
        assert!((590..=600).contains(&got.valid_lft), "valid {}", got.valid_lft);
        assert!((290..=300).contains(&got.preferred_lft), "preferred {}", got.preferred_lft);
        assert_eq!(got.priority, 400);
        assert!(!got.flags.contains(AddressFlags::PERMANENT), "finite lifetimes: not permanent");
        let mut events = Vec::new();
        watcher.drain_events(|e| events.push(e)).unwrap();
        assert!(events.contains(&Event::AddressNew), "{events:?}");
        assert!(!events.contains(&Event::AddressDel), "replace must not delete: {events:?}");

        sock.address_delete(&a).unwrap();
        assert_eq!(find(sock, &a), None);
        let e = sock.address_delete(&a).unwrap_err();
        assert_eq!(e.kind(), NlErrorKind::NotFound, "{e}");
    });
}

#[test]
fn address_v4_lifecycle() {
    lifecycle("192.0.2.10/24", AddressFlags::default());
}

#[test]
fn address_v6_lifecycle() {
    // nodad: no 1-2 s of "tentative" Duplicate Address Detection.
    lifecycle("2001:db8::10/64", AddressFlags::NODAD);
}

#[test]
fn address_on_missing_link_is_not_found() {
    with_sock(|sock| {
        let a = KernelAddress::new(4242, "192.0.2.1/24".parse().unwrap());
        let e = sock.address_add(&a).unwrap_err();
        assert_eq!(e.kind(), NlErrorKind::NotFound, "{e}");
    });
}
