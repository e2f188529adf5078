// SPDX-License-Identifier: Apache-2.0
//! KubeSpan's controllers with `net`'s whole pipeline on the fake host: what the manager writes
//! at the operator layer is merged and applied (WireGuard link and peers, ULA, table-180
//! routes, rules), and disabling KubeSpan takes all of it back out of the kernel.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

use net::controllers::{pipeline, MACHINE_CONFIG_ID, MIRRORED};
use net::host::fake::FakeHost;
use net::host::SharedHost;
use net::resource::{LinkType, Namespace};
use runtime::Runtime;

use super::*;
use crate::firewall::FakeFirewall;
use crate::identity::KeyOps;
use crate::kernel::{HostWg, WgKeys};

fn settle(rt: &mut Runtime, fake: &Rc<RefCell<FakeHost>>) {
    let now = Instant::now();
    let mut seen = fake.borrow().log.len();
    for _ in 0..50 {
        if !rt.has_work() {
            return;
        }
        rt.run(now);
        let len = fake.borrow().log.len();
        if len != seen {
            seen = len;
            for kind in MIRRORED {
                rt.mark_dirty(kind);
            }
        }
    }
    panic!("did not settle: {:?}", rt.controllers());
}

fn config(enabled: bool, private: &str, peer: &str) -> net::config::MachineConfig {
    net::config::parse(&format!(
        "version: v1alpha1\nmachine:\n  network:\n    kubespan:\n      enabled: {enabled}\n      privateKey: {private}\n      peers:\n        - publicKey: {peer}\n          endpoints: [\"192.0.2.2:51820\"]\n          addresses: [10.0.0.2/32]\ncluster:\n  id: abcd\n  secret: c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI=\n"
    ))
    .unwrap()
}

#[test]
fn applied_through_the_pipeline_and_removed() {
    let fake = Rc::new(RefCell::new(FakeHost::new()));
    fake.borrow_mut().add_link("eth0", LinkType::ETHER, "");
    let host: SharedHost = fake.clone();
    let fw = Rc::new(RefCell::new(FakeFirewall::default()));
    let mut rt = Runtime::new();
    for c in pipeline(&host) {
        rt.register(c).unwrap();
    }
    rt.register(Box::new(IdentityController::new(None, Box::new(WgKeys)))).unwrap();
    rt.register(Box::new(PeerSpecController::default())).unwrap();
    rt.register(Box::new(Manager::new(Box::new(fw.clone()), Box::new(HostWg(host.clone())))))
        .unwrap();
    let private = WgKeys.generate().unwrap().to_base64();
    let peer = WgKeys.public_of(&WgKeys.generate().unwrap()).unwrap();
    rt.put_input("test", Namespace::Config, MACHINE_CONFIG_ID, config(true, &private, &peer))
        .unwrap();
    settle(&mut rt, &fake);

    {
        let f = fake.borrow();
        assert_eq!(f.links.get("kubespan").map(|l| l.link_type), Some(LinkType::NONE));
        let dev = f.wireguard.get("kubespan").unwrap();
        assert_eq!((dev.listen_port, dev.fwmark), (51820, 0x20));
        assert_eq!(dev.peers.len(), 1);
        assert_eq!(dev.peers[0].public_key.to_base64(), peer);
        assert_eq!(dev.peers[0].endpoint, Some("192.0.2.2:51820".parse().unwrap()));
        assert_eq!(dev.peers[0].keepalive, 25);
        assert!(dev.peers[0].preshared_key.is_some());
        let t180: Vec<String> = f
            .routes
            .iter()
            .filter(|r| r.table.0 == 180)
            .map(|r| format!("{} {}", r.family, r.out_link_name))
            .collect();
        assert_eq!(t180, ["inet4 kubespan", "inet6 kubespan"], "{:?}", f.routes);
        let rules: Vec<(u32, u32, u32)> =
            f.rules.iter().map(|r| (r.priority, r.fw_mark, r.fw_mask)).collect();
        assert_eq!(rules, [(32500, 0x40, 0x60), (32500, 0x40, 0x60)]);
        assert!(f
            .addresses
            .iter()
            .any(|a| a.link_name == "kubespan" && a.address.prefix_len() == 64));
    }
    assert_eq!(fw.borrow().table.as_ref().map(|t| t.targets_v4.len()), Some(1));

    rt.put_input("test", Namespace::Config, MACHINE_CONFIG_ID, config(false, &private, &peer))
        .unwrap();
    settle(&mut rt, &fake);
    let f = fake.borrow();
    assert!(!f.links.contains_key("kubespan"), "{:?}", f.links.keys());
    assert!(f.routes.iter().all(|r| r.table.0 != 180));
    assert!(f.rules.is_empty(), "{:?}", f.rules);
    assert_eq!(fw.borrow().table, None);
}
