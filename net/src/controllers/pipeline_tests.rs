// SPDX-License-Identifier: Apache-2.0
//! The whole pipeline against a fake host: inputs in, kernel operations and files out.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

use super::{pipeline, CMDLINE_ID, MACHINE_CONFIG_ID, NETWORK_STATUS_ID};
use crate::host::fake::FakeHost;
use crate::host::{Host, SharedHost};
use crate::resource::{Kind, LinkType, Namespace, NetworkStatus};
use crate::runtime::Runtime;

/// Run until quiet, playing the netlink watcher: whenever the fake kernel changed, the
/// mirrored kinds are marked dirty, as multicast events would.
fn settle_with(rt: &mut Runtime, fake: &Rc<RefCell<FakeHost>>) {
    let now = Instant::now();
    let mut seen = fake.borrow().log.len();
    while rt.has_work() {
        rt.run(now);
        let len = fake.borrow().log.len();
        if len != seen {
            seen = len;
            for kind in super::MIRRORED {
                rt.mark_dirty(kind);
            }
        }
    }
}

fn runtime(fake: &Rc<RefCell<FakeHost>>) -> Runtime {
    let host: SharedHost = fake.clone();
    let mut rt = Runtime::new();
    for c in pipeline(&host) {
        rt.register(c).unwrap();
    }
    rt
}

#[test]
fn cmdline_reaches_the_kernel_and_files() {
    let fake = Rc::new(RefCell::new(FakeHost::new()));
    fake.borrow_mut().add_link("eth1", LinkType::ETHER, "");
    let mut rt = runtime(&fake);
    let cmdline = crate::cmdline::parse(
        "ip=172.20.0.2::172.20.0.1:255.255.255.0::eth1:::::  talos.hostname=node-1.example.org",
    );
    rt.put_input("test", Namespace::Runtime, CMDLINE_ID, cmdline).unwrap();
    settle_with(&mut rt, &fake);

    let f = fake.borrow();
    let addrs: Vec<String> = f.addresses.iter().map(|a| a.id()).collect();
    assert!(addrs.contains(&"eth1/172.20.0.2/24".to_owned()), "{addrs:?}");
    assert!(addrs.contains(&"lo/127.0.0.1/8".to_owned()), "{addrs:?}");
    let routes: Vec<String> = f.routes.iter().map(|r| r.id()).collect();
    assert_eq!(routes, ["inet4/172.20.0.1//1024"]);
    assert_eq!(f.hostname, ("node-1".to_owned(), "example.org".to_owned()));
    assert_eq!(
        f.files.get("/etc/resolv.conf").map(String::as_str),
        Some("nameserver 1.1.1.1\nnameserver 8.8.8.8\n")
    );
    assert!(
        f.files
            .get("/etc/hosts")
            .is_some_and(|h| h.contains("172.20.0.2 node-1.example.org node-1")),
        "{:?}",
        f.files
    );
    assert_eq!(f.files.get("/etc/hostname").map(String::as_str), Some("node-1.example.org\n"));
    drop(f);

    let status =
        rt.store().get_spec::<NetworkStatus>(Namespace::Network, NETWORK_STATUS_ID).unwrap();
    assert!(
        status.address_ready
            && status.connectivity_ready
            && status.hostname_ready
            && status.etc_files_ready
    );
    assert!(rt.controllers().iter().all(|c| c.last_error.is_none()), "{:?}", rt.controllers());
}

#[test]
fn settled_pipeline_makes_no_kernel_changes() {
    let fake = Rc::new(RefCell::new(FakeHost::new()));
    fake.borrow_mut().add_link("eth1", LinkType::ETHER, "");
    let mut rt = runtime(&fake);
    let cmdline = crate::cmdline::parse("ip=172.20.0.2::172.20.0.1:24::eth1");
    rt.put_input("test", Namespace::Runtime, CMDLINE_ID, cmdline).unwrap();
    settle_with(&mut rt, &fake);
    let ops = fake.borrow().log.len();
    // A kernel event (self-induced or not) re-runs everything; nothing may change.
    rt.mark_all_dirty();
    settle_with(&mut rt, &fake);
    assert_eq!(fake.borrow().log[ops..], [] as [String; 0]);
}

#[test]
fn removed_config_address_leaves_the_kernel_and_foreign_ones_stay() {
    let fake = Rc::new(RefCell::new(FakeHost::new()));
    fake.borrow_mut().add_link("eth0", LinkType::ETHER, "");
    let mut rt = runtime(&fake);
    let cfg = |addrs: &str| {
        crate::config::parse(&format!(
            "version: v1alpha1\nmachine:\n  network:\n    interfaces:\n      - interface: eth0\n        addresses: [{addrs}]\n"
        ))
        .unwrap()
    };
    rt.put_input("test", Namespace::Config, MACHINE_CONFIG_ID, cfg("10.0.0.2/24, 10.0.0.3/24"))
        .unwrap();
    settle_with(&mut rt, &fake);
    // Someone else adds an address.
    let mut foreign =
        fake.borrow().addresses.iter().find(|a| a.link_name == "eth0").unwrap().clone();
    foreign.address = "192.0.2.9/24".parse().unwrap();
    fake.borrow_mut().addresses.push(foreign);
    rt.mark_dirty(Kind::AddressStatus);
    settle_with(&mut rt, &fake);

    rt.put_input("test", Namespace::Config, MACHINE_CONFIG_ID, cfg("10.0.0.2/24, 10.0.0.4/24"))
        .unwrap();
    settle_with(&mut rt, &fake);
    let mut ids: Vec<String> = fake
        .borrow_mut()
        .addresses()
        .unwrap()
        .iter()
        .filter(|a| a.link_name == "eth0")
        .map(|a| a.id())
        .collect();
    ids.sort();
    assert_eq!(ids, ["eth0/10.0.0.2/24", "eth0/10.0.0.4/24", "eth0/192.0.2.9/24"]);
    assert!(
        rt.store().get(Namespace::Network, Kind::AddressSpec, "eth0/10.0.0.3/24").is_none(),
        "spec destroyed once released"
    );
}

#[test]
fn unreachable_gateway_fails_alone() {
    let fake = Rc::new(RefCell::new(FakeHost::new()));
    fake.borrow_mut().add_link("eth0", LinkType::ETHER, "");
    fake.borrow_mut().unreachable_gateways.push("192.0.2.1".parse().unwrap());
    let mut rt = runtime(&fake);
    let cfg = crate::config::parse(
        "version: v1alpha1\nmachine:\n  network:\n    interfaces:\n      - interface: eth0\n        addresses: [10.0.0.2/24]\n        routes:\n          - {network: 10.9.0.0/16, gateway: 192.0.2.1}\n          - {network: 10.8.0.0/16, gateway: 10.0.0.1}\n",
    )
    .unwrap();
    rt.put_input("test", Namespace::Config, MACHINE_CONFIG_ID, cfg).unwrap();
    settle_with(&mut rt, &fake);
    let routes: Vec<String> = fake.borrow().routes.iter().map(|r| r.id()).collect();
    assert_eq!(routes, ["inet4/10.0.0.1/10.8.0.0/16/1024"]);
    let route_ctrl =
        rt.controllers().into_iter().find(|c| c.name == "network.RouteSpecController").unwrap();
    assert!(route_ctrl.last_error.unwrap().contains("invalid gateway"));
}

#[test]
fn a_diff_that_never_settles_is_reported_and_backed_off() {
    let fake = Rc::new(RefCell::new(FakeHost::new()));
    fake.borrow_mut().add_link("eth1", LinkType::ETHER, "");
    fake.borrow_mut().rewrite_route_protocol = Some(crate::resource::RouteProtocol::KERNEL);
    let mut rt = runtime(&fake);
    let cmdline = crate::cmdline::parse("ip=172.20.0.2::172.20.0.1:24::eth1");
    rt.put_input("test", Namespace::Runtime, CMDLINE_ID, cmdline).unwrap();
    // settle_with plays the watcher, so every re-add wakes the controller again: without the
    // guard this never returns.
    settle_with(&mut rt, &fake);
    let adds = fake.borrow().log.iter().filter(|l| l.starts_with("add route")).count();
    assert!(adds <= super::apply::REPEAT_LIMIT as usize, "{adds} adds");
    let route_ctrl =
        rt.controllers().into_iter().find(|c| c.name == "network.RouteSpecController").unwrap();
    assert!(route_ctrl.last_error.unwrap().contains("keeps reporting a difference"));
}

#[test]
fn wireguard_link_status_polls_only_while_a_wireguard_link_exists() {
    use crate::resource::{layered_id, ConfigLayer, LinkSpec, LinkStatus, WireguardSpec};
    let fake = Rc::new(RefCell::new(FakeHost::new()));
    let mut rt = runtime(&fake);
    settle_with(&mut rt, &fake);
    assert_eq!(rt.poll_at(), None, "{:?}", rt.controllers());

    let key = crate::wireguard_keys::generate_private_key([8; 32]);
    let spec = LinkSpec {
        name: "kubespan".into(),
        logical: true,
        up: true,
        kind: "wireguard".into(),
        link_type: LinkType::NONE,
        wireguard: Some(WireguardSpec {
            private_key: Some(key),
            listen_port: 51820,
            ..WireguardSpec::default()
        }),
        layer: ConfigLayer::Operator,
        ..LinkSpec::default()
    };
    let id = layered_id(ConfigLayer::Operator, "kubespan");
    let before = Instant::now();
    rt.put_input("test", Namespace::NetworkConfig, &id, spec).unwrap();
    settle_with(&mut rt, &fake);
    let status = rt.store().get_spec::<LinkStatus>(Namespace::Network, "kubespan").unwrap();
    let wg = status.wireguard.as_ref().unwrap();
    assert_eq!(wg.public_key, crate::wireguard_keys::public_key(&key).to_base64());
    assert_eq!(wg.listen_port, 51820);
    let after = Instant::now();
    let at = rt.poll_at().expect("a wake-up while a wireguard link exists");
    let poll = super::status::WIREGUARD_POLL;
    assert!(at >= before + poll && at <= after + poll, "{:?}", at - before);

    rt.remove_input("test", Namespace::NetworkConfig, Kind::LinkSpec, &id).unwrap();
    settle_with(&mut rt, &fake);
    assert!(!fake.borrow().links.contains_key("kubespan"));
    // The timer may still be armed once; running it finds no wireguard link and goes idle.
    rt.run(at);
    settle_with(&mut rt, &fake);
    assert_eq!(rt.poll_at(), None);
}

#[test]
fn a_refused_domain_or_etc_file_does_not_hold_readiness_forever() {
    use super::derived::{
        CopySpecsController, EtcFilesController, HostnameSpecController, NetworkStatusController,
    };
    use crate::resource::{
        EtcFileStatus, HostnameSpec, HostnameStatus, ResolverSpec, HOSTNAME_ID, RESOLVER_ID,
    };
    let fake = Rc::new(RefCell::new(FakeHost::new()));
    fake.borrow_mut().unwritable = vec!["/etc/resolv.conf".into()];
    let host: SharedHost = fake.clone();
    let mut rt = Runtime::new();
    rt.register(Box::new(HostnameSpecController::new(host.clone()))).unwrap();
    rt.register(Box::new(CopySpecsController)).unwrap();
    rt.register(Box::new(EtcFilesController::new(host))).unwrap();
    rt.register(Box::new(NetworkStatusController)).unwrap();
    // A domain setdomainname(2) refuses (the parsers stop it, a future source may not).
    let spec = HostnameSpec {
        hostname: "node-1".into(),
        domainname: "d".repeat(65),
        ..Default::default()
    };
    rt.put_input("test", Namespace::Network, HOSTNAME_ID, spec).unwrap();
    let resolver =
        ResolverSpec { dns_servers: vec!["192.0.2.53".parse().unwrap()], ..Default::default() };
    rt.put_input("test", Namespace::Network, RESOLVER_ID, resolver).unwrap();

    let t0 = Instant::now();
    for i in 0..60 {
        rt.run(t0 + std::time::Duration::from_millis(500) * i);
    }
    assert_eq!(fake.borrow().hostname, ("node-1".to_owned(), String::new()), "hostname alone");
    let status = rt.store().get_spec::<HostnameStatus>(Namespace::Network, HOSTNAME_ID).unwrap();
    assert_eq!((status.hostname.as_str(), status.domainname.as_str()), ("node-1", ""));
    let ctrl = &rt.controllers()[0];
    let condition = ctrl.condition.clone().unwrap_or_default();
    assert!(condition.contains("domain name not applied"), "{condition:?}");
    assert!(ctrl.last_error.as_deref().unwrap_or_default().contains("setdomainname"), "{ctrl:?}");

    let resolv = rt.store().get_spec::<EtcFileStatus>(Namespace::Network, "resolv.conf").unwrap();
    assert!(resolv.error.contains("read-only"), "{resolv:?}");
    assert!(fake.borrow().files.contains_key("/etc/hosts"), "the other files are written");
    let net = rt.store().get_spec::<NetworkStatus>(Namespace::Network, NETWORK_STATUS_ID).unwrap();
    assert!(net.hostname_ready && net.etc_files_ready, "{net:?}");

    // Once the file system takes it, the error goes.
    fake.borrow_mut().unwritable.clear();
    for i in 60..200 {
        rt.run(t0 + std::time::Duration::from_millis(500) * i);
    }
    let resolv = rt.store().get_spec::<EtcFileStatus>(Namespace::Network, "resolv.conf").unwrap();
    assert_eq!(resolv.error, "", "{resolv:?}");
    assert!(fake.borrow().files.contains_key("/etc/resolv.conf"));
}

#[test]
fn a_route_another_writer_keeps_deleting_is_held_with_growing_backoff() {
    let fake = Rc::new(RefCell::new(FakeHost::new()));
    fake.borrow_mut().add_link("eth1", LinkType::ETHER, "");
    let mut rt = runtime(&fake);
    let cmdline = crate::cmdline::parse("ip=172.20.0.2::172.20.0.1:24::eth1");
    rt.put_input("test", Namespace::Runtime, CMDLINE_ID, cmdline).unwrap();
    let t0 = Instant::now();
    let mut now = t0;
    // Each add is followed at once by another writer's delete, whose event wakes us: the
    // default route flips between there and gone, and "applied 5 reconciles in a row" never
    // sees it (the reconcile after our own add finds nothing to do).
    while now < t0 + std::time::Duration::from_secs(20) {
        rt.run(now);
        let deleted = {
            let mut f = fake.borrow_mut();
            let before = f.routes.len();
            f.routes.retain(|r| r.dst.is_some());
            f.routes.len() != before
        };
        if deleted {
            rt.mark_dirty(Kind::RouteStatus);
        }
        now += std::time::Duration::from_millis(50);
    }
    let adds = fake.borrow().log.iter().filter(|l| l.starts_with("add route")).count();
    assert!((5..=14).contains(&adds), "{adds} adds in 20 s");
    let route_ctrl =
        rt.controllers().into_iter().find(|c| c.name == "network.RouteSpecController").unwrap();
    let condition = route_ctrl.condition.unwrap_or_default();
    assert!(condition.contains("keeps changing it: route "), "{condition:?}");
}
