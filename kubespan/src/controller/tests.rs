// SPDX-License-Identifier: Apache-2.0
//! The three controllers on a runtime with a fake firewall and a fake WireGuard: config in,
//! `network-config` specs, peer statuses and nftables plans out, time driven explicitly.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime};

use net::config::MachineConfig;
use net::controllers::MACHINE_CONFIG_ID;
use net::resource::{
    AddressSpec, HardwareAddr, Kind, KubeSpanIdentity, KubeSpanPeerSpec, KubeSpanPeerStatus,
    LinkSpec, LinkStatus, LinkType, Namespace, PeerState, RouteSpec, RoutingRuleSpec,
    KUBESPAN_IDENTITY_ID,
};
use runtime::Runtime;

use super::*;
use crate::firewall::FakeFirewall;
use crate::identity::{KeyOps, KeyOpsError};
use crate::wg::{FakeWg, WgPeerState};
use net::resource::WireguardSpec;
use net::wireguard_keys::Key;

const KEY_A: &str = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
const KEY_B: &str = "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBA=";
const KEY_SELF_PRIV: &str = "cHJpdmF0ZXByaXZhdGVwcml2YXRlcHJpdmF0ZTEyMzQ=";

fn config(enabled: bool, bypass: bool) -> MachineConfig {
    let yaml = format!(
        r#"
version: v1alpha1
machine:
  network:
    kubespan:
      enabled: {enabled}
      allowDownPeerBypass: {bypass}
      endpointTimeout: 5s
      privateKey: {KEY_SELF_PRIV}
      peers:
        - publicKey: SELFSELFSELFSELFSELFSELFSELFSELFSELFSELFSEA=
          addresses: [10.0.0.1/32]
        - publicKey: {KEY_A}
          label: node-a
          endpoints: ["192.0.2.2:51820", "198.51.100.2:51820"]
          addresses: [10.0.0.2/32, 10.244.2.0/24]
        - publicKey: {KEY_B}
          label: node-b
          endpoints: ["192.0.2.3:51820", "198.51.100.3:51820"]
          addresses: [10.0.0.3/32, 10.244.2.0/24]
cluster:
  id: 8XuV9TZHW08DOk3bVxQjH9ih_TBKjnh-j44tsCLSBzo=
  secret: c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI=
"#
    );
    net::config::parse(&yaml).unwrap()
}

/// Public key = the private key's text reversed: deterministic and distinguishable.
struct ReverseKeys;
impl KeyOps for ReverseKeys {
    fn generate(&self) -> Result<Key, KeyOpsError> {
        Err(std::io::Error::other("tests configure the key").into())
    }
    fn public_of(&self, private: &Key) -> Result<String, KeyOpsError> {
        let private = private.to_base64();
        if private == KEY_SELF_PRIV {
            Ok("SELFSELFSELFSELFSELFSELFSELFSELFSELFSELFSEA=".into())
        } else {
            Ok(private.chars().rev().collect())
        }
    }
}

struct Rig {
    rt: Runtime,
    fw: Rc<RefCell<FakeFirewall>>,
    wg: Rc<RefCell<FakeWg>>,
    start: Instant,
}

impl Rig {
    fn new() -> Self {
        let fw = Rc::new(RefCell::new(FakeFirewall::default()));
        let wg = Rc::new(RefCell::new(FakeWg::default()));
        let mut rt = Runtime::new();
        rt.register(Box::new(IdentityController::new(None, Box::new(ReverseKeys)))).unwrap();
        rt.register(Box::new(PeerSpecController::default())).unwrap();
        rt.register(Box::new(Manager::new(Box::new(fw.clone()), Box::new(wg.clone())))).unwrap();
        let eth0 = LinkStatus {
            index: 2,
            link_type: LinkType::ETHER,
            hardware_addr: "2e:1a:b6:53:81:69".parse::<HardwareAddr>().unwrap(),
            ..LinkStatus::default()
        };
        rt.put_input("test", Namespace::Network, "eth0", eth0).unwrap();
        Self { rt, fw, wg, start: Instant::now() }
    }

    fn config(&mut self, cfg: MachineConfig) {
        self.rt.put_input("test", Namespace::Config, MACHINE_CONFIG_ID, cfg).unwrap();
    }

    fn at(&mut self, secs: u64) {
        let now = self.start + Duration::from_secs(secs);
        loop {
            self.rt.run(now);
            if !self.rt.has_work() {
                break;
            }
        }
    }

    /// The WireGuard part of the `kubespan` LinkSpec the manager wrote.
    fn wg_spec(&self) -> WireguardSpec {
        let link =
            self.rt.store().get_spec::<LinkSpec>(Namespace::NetworkConfig, "operator/kubespan");
        link.and_then(|l| l.wireguard.clone()).unwrap()
    }

    fn status(&self, key: &str) -> KubeSpanPeerStatus {
        self.rt.store().get_spec::<KubeSpanPeerStatus>(Namespace::KubeSpan, key).cloned().unwrap()
    }

    fn ids(&self, kind: Kind) -> Vec<String> {
        self.rt
            .store()
            .list(Namespace::NetworkConfig, kind)
            .map(|r| r.metadata.id.to_string())
            .collect()
    }

    fn handshake(&self, key: &str, endpoint: &str, age: u64, rx: u64) {
        let mut wg = self.wg.borrow_mut();
        wg.peers.retain(|p| p.public_key != key);
        wg.peers.push(WgPeerState {
            public_key: key.into(),
            endpoint: Some(endpoint.parse().unwrap()),
            last_handshake: Some(SystemTime::now() - Duration::from_secs(age)),
            handshake_age: Some(Duration::from_secs(age)),
            rx_bytes: rx,
            tx_bytes: rx * 2,
        });
    }
}

fn sock(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

#[test]
fn enabled_writes_everything_from_one_snapshot() {
    let mut rig = Rig::new();
    rig.config(config(true, false));
    rig.at(0);

    let store = rig.rt.store();
    let id = store.get_spec::<KubeSpanIdentity>(Namespace::KubeSpan, KUBESPAN_IDENTITY_ID).unwrap();
    assert_eq!(id.address.to_string(), "fd7f:175a:b97c:5602:2c1a:b6ff:fe53:8169/128");
    let specs: Vec<&str> =
        store.list_specs::<KubeSpanPeerSpec>(Namespace::KubeSpan).map(|(k, _)| k).collect();
    assert_eq!(specs, [KEY_A, KEY_B], "the node's own entry is skipped");

    assert_eq!(rig.ids(Kind::LinkSpec), ["operator/kubespan"]);
    assert_eq!(
        rig.ids(Kind::AddressSpec),
        ["operator/kubespan/fd7f:175a:b97c:5602:2c1a:b6ff:fe53:8169/64"]
    );
    assert_eq!(
        rig.ids(Kind::RouteSpec),
        ["operator/180/inet4///1", "operator/180/kubespan/inet6///1"]
    );
    assert_eq!(rig.ids(Kind::RoutingRuleSpec), ["operator/inet4/32500", "operator/inet6/32500"]);
    let store = rig.rt.store();
    assert!(store.get_spec::<LinkSpec>(Namespace::NetworkConfig, "operator/kubespan").is_some());
    assert!(store.list_specs::<AddressSpec>(Namespace::NetworkConfig).count() == 1);
    assert!(store.list_specs::<RouteSpec>(Namespace::NetworkConfig).all(|(_, r)| r.table.0 == 180));
    assert!(store
        .list_specs::<RoutingRuleSpec>(Namespace::NetworkConfig)
        .all(|(_, r)| r.fw_mark == 0x40));

    // Both peers are pointed at their first endpoint; B lost 10.244.2.0/24 to A.
    let wg = rig.wg_spec();
    let eps: Vec<Option<SocketAddr>> = wg.peers.iter().map(|p| p.endpoint).collect();
    assert_eq!(eps, [Some(sock("192.0.2.2:51820")), Some(sock("192.0.2.3:51820"))]);
    assert_eq!(wg.peers[1].allowed_ips, ["10.0.0.3/32".parse().unwrap()]);
    let table = rig.fw.borrow().table.clone().unwrap();
    let v4: Vec<String> = table.targets_v4.iter().map(ToString::to_string).collect();
    assert_eq!(v4, ["10.0.0.2/31", "10.244.2.0/24"], "the same peers' allowed IPs");
    assert_eq!(rig.status(KEY_A).state, PeerState::Unknown);
    assert_eq!(rig.status(KEY_A).label, "node-a");
}

#[test]
fn handshakes_rotation_and_bypass() {
    let mut rig = Rig::new();
    rig.config(config(true, true));
    rig.at(0);
    assert_eq!(rig.fw.borrow().table.as_ref().map(|t| t.targets_v4.len()), Some(0), "nobody up");

    rig.handshake(KEY_A, "192.0.2.2:51820", 0, 100);
    rig.rt.mark_all_dirty();
    rig.at(1);
    let a = rig.status(KEY_A);
    assert_eq!((a.state, a.receive_bytes, a.transmit_bytes), (PeerState::Up, 100, 200));
    let v4: Vec<String> = rig
        .fw
        .borrow()
        .table
        .as_ref()
        .unwrap()
        .targets_v4
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(v4, ["10.0.0.2/32", "10.244.2.0/24"], "only the up peer is marked");

    // B never answers on its first endpoint: the manager's own deadline moves it on.
    assert_eq!(rig.rt.poll_at().map(|t| t <= rig.start + Duration::from_secs(5)), Some(true));
    rig.at(5);
    let b = rig.status(KEY_B);
    assert_eq!(b.last_used_endpoint, Some(sock("198.51.100.3:51820")));
    assert_eq!(b.state, PeerState::Unknown);
    assert_eq!(rig.wg_spec().peers[1].endpoint, Some(sock("198.51.100.3:51820")));
    let log = rig.fw.borrow().log.clone();
    assert_eq!(
        log.iter().filter(|l| l.starts_with("apply")).count(),
        2,
        "{log:?}: unchanged plans are not re-applied"
    );
}

#[test]
fn disabling_removes_everything() {
    let mut rig = Rig::new();
    rig.config(config(true, false));
    rig.at(0);
    assert!(!rig.ids(Kind::RouteSpec).is_empty());
    rig.config(config(false, false));
    rig.at(1);
    for kind in [Kind::LinkSpec, Kind::AddressSpec, Kind::RouteSpec, Kind::RoutingRuleSpec] {
        assert!(rig.ids(kind).is_empty(), "{kind}");
    }
    let store = rig.rt.store();
    assert_eq!(store.list(Namespace::KubeSpan, Kind::KubeSpanPeerStatus).count(), 0);
    assert_eq!(store.list(Namespace::KubeSpan, Kind::KubeSpanPeerSpec).count(), 0);
    assert_eq!(store.list(Namespace::KubeSpan, Kind::KubeSpanIdentity).count(), 0);
    assert_eq!(rig.fw.borrow().table, None);
    assert_eq!(rig.fw.borrow().log.last().map(String::as_str), Some("remove"));
    // Idle once off: no wake-ups.
    let c = rig.rt.controllers();
    assert!(c.iter().all(|c| c.last_error.is_none()), "{c:?}");
}

#[test]
fn identity_waits_for_what_it_needs() {
    let mut rt = Runtime::new();
    rt.register(Box::new(IdentityController::new(None, Box::new(ReverseKeys)))).unwrap();
    let mut cfg = config(true, false);
    cfg.machine.network.kubespan.private_key = None;
    rt.put_input("test", Namespace::Config, MACHINE_CONFIG_ID, cfg).unwrap();
    let eth0 = LinkStatus {
        link_type: LinkType::ETHER,
        hardware_addr: "02:00:00:00:00:01".parse::<HardwareAddr>().unwrap(),
        ..LinkStatus::default()
    };
    rt.put_input("test", Namespace::Network, "eth0", eth0).unwrap();
    rt.run(Instant::now());
    assert_eq!(rt.store().list(Namespace::KubeSpan, Kind::KubeSpanIdentity).count(), 0);
    let cond = rt.controllers()[0].condition.clone().unwrap_or_default();
    assert!(cond.contains("no state directory"), "{cond}");
}
