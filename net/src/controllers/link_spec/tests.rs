// SPDX-License-Identifier: Apache-2.0
//! Planner tests against fixture kernels, and controller tests against `FakeHost`.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::*;
use crate::host::fake::FakeHost;
use crate::host::Host;
use crate::resource::{
    BondMode, BondSlave, BridgeMasterSpec, BridgeSlave, ConfigLayer, HardwareAddr, StpSpec,
    VethSpec,
};
use crate::runtime::Runtime;

const LAYER: ConfigLayer = ConfigLayer::Configuration;

fn physical(name: &str) -> LinkSpec {
    LinkSpec::up(name, LAYER)
}

fn logical(name: &str, kind: &str) -> LinkSpec {
    LinkSpec { logical: true, kind: kind.into(), link_type: LinkType::ETHER, ..physical(name) }
}

fn bond(name: &str, mode: BondMode) -> LinkSpec {
    let bond_master = Some(BondMasterSpec { mode, mii_mon: 100, ..Default::default() });
    LinkSpec { bond_master, ..logical(name, "bond") }
}

fn bond_port(name: &str, master: &str, slave_index: u32) -> LinkSpec {
    let bond_slave = Some(BondSlave { master_name: master.into(), slave_index });
    LinkSpec { bond_slave, ..physical(name) }
}

fn bridge(name: &str, stp: bool) -> LinkSpec {
    let bridge_master =
        Some(BridgeMasterSpec { stp: StpSpec { enabled: stp }, ..Default::default() });
    LinkSpec { bridge_master, ..logical(name, "bridge") }
}

fn bridge_port(name: &str, master: &str) -> LinkSpec {
    LinkSpec { bridge_slave: Some(BridgeSlave { master_name: master.into() }), ..physical(name) }
}

fn vlan(name: &str, parent: &str, vid: u16) -> LinkSpec {
    let vlan = Some(VlanSpec { vid, protocol: VlanProtocol::DOT1Q });
    LinkSpec { parent_name: parent.into(), vlan, ..logical(name, "vlan") }
}

/// A fake kernel with `lo` and these physical links, down.
fn host_with(physical: &[&str]) -> FakeHost {
    let mut h = FakeHost::new();
    for name in physical {
        h.add_link(name, LinkType::ETHER, "");
    }
    h
}

fn set(h: &mut FakeHost, op: LinkOp) {
    h.link(&op).unwrap();
}

fn index(h: &FakeHost, name: &str) -> u32 {
    h.links[name].index
}

fn plan_with(specs: &[LinkSpec], phase: Phase, h: &mut FakeHost) -> LinkPlan {
    let desired: Vec<_> =
        specs.iter().map(|spec| Desired { id: &spec.name, spec, phase }).collect();
    plan_links(&desired, &h.links().unwrap())
}

fn plan(specs: &[LinkSpec], h: &mut FakeHost) -> LinkPlan {
    plan_with(specs, Phase::Running, h)
}

fn ops(plan: &LinkPlan) -> Vec<LinkOp> {
    plan.ops.iter().map(|(_, op)| op.clone()).collect()
}

fn apply(plan: &LinkPlan, h: &mut FakeHost) {
    for (_, op) in &plan.ops {
        h.link(op).unwrap();
    }
}

/// Counts the reconciles in which the controller changed the kernel.
struct Counted {
    inner: LinkSpecController,
    host: Rc<RefCell<FakeHost>>,
    busy: Rc<Cell<u32>>,
}

impl Controller for Counted {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn inputs(&self) -> Vec<Input> {
        self.inner.inputs()
    }
    fn outputs(&self) -> Vec<Output> {
        self.inner.outputs()
    }
    fn reconcile(&mut self, ctx: &mut Ctx<'_>) -> Result<Next, ControllerError> {
        let before = self.host.borrow().log.len();
        let result = self.inner.reconcile(ctx);
        if self.host.borrow().log.len() > before {
            self.busy.set(self.busy.get() + 1);
        }
        result
    }
}

/// A runtime with the controller and `specs` in `network`, run once. Returns it and the
/// number of reconciles that changed the kernel.
fn reconcile(host: &Rc<RefCell<FakeHost>>, specs: &[LinkSpec]) -> (Runtime, Rc<Cell<u32>>) {
    let mut rt = Runtime::new();
    for s in specs {
        rt.put_input("test", Namespace::Network, &s.name, s.clone()).unwrap();
    }
    let shared: SharedHost = host.clone();
    let busy = Rc::new(Cell::new(0));
    let ctrl =
        Counted { inner: LinkSpecController::new(shared), host: host.clone(), busy: busy.clone() };
    rt.register(Box::new(ctrl)).unwrap();
    rt.run(Instant::now());
    (rt, busy)
}

fn has_finalizer(rt: &Runtime, id: &str) -> bool {
    let r = rt.store().get(Namespace::Network, Kind::LinkSpec, id).unwrap();
    r.metadata.finalizers.contains("network.LinkSpecController")
}

#[test]
fn vlan_on_bond_on_two_ports_in_one_reconcile() {
    let host = Rc::new(RefCell::new(host_with(&["eth0", "eth1"])));
    let specs = [
        bond("bond0", BondMode::LACP),
        bond_port("eth0", "bond0", 0),
        bond_port("eth1", "bond0", 1),
        vlan("bond0.10", "bond0", 10),
    ];
    let (mut rt, busy) = reconcile(&host, &specs);
    assert_eq!(busy.get(), 1, "one reconcile did all the work");
    {
        let h = host.borrow();
        let bond0 = &h.links["bond0"];
        assert_eq!(bond0.kind, "bond");
        assert_eq!(h.links["eth0"].master_index, bond0.index);
        assert_eq!(h.links["eth1"].master_index, bond0.index);
        assert_eq!(h.links["bond0.10"].link_index, bond0.index);
        for name in ["bond0", "eth0", "eth1", "bond0.10"] {
            assert!(h.links[name].is_up(), "{name} is up: {:?}", h.log);
        }
    }
    assert!(specs.iter().all(|s| has_finalizer(&rt, &s.name)));
    let state = &rt.controllers()[0];
    assert_eq!((&state.condition, &state.last_error), (&None, &None));

    let (log_len, runs) = (host.borrow().log.len(), state.runs);
    rt.mark_dirty(Kind::LinkStatus);
    rt.run(Instant::now());
    assert_eq!(rt.controllers()[0].runs, runs + 1, "it ran again");
    assert_eq!(host.borrow().log.len(), log_len, "and did nothing: {:?}", host.borrow().log);
}

#[test]
fn bridge_with_two_ports() {
    let host = Rc::new(RefCell::new(host_with(&["eth0", "eth1"])));
    let specs = [bridge("br0", true), bridge_port("eth0", "br0"), bridge_port("eth1", "br0")];
    let (_rt, busy) = reconcile(&host, &specs);
    assert_eq!(busy.get(), 1);
    let h = host.borrow();
    let br0 = &h.links["br0"];
    assert_eq!(
        (br0.kind.as_str(), br0.bridge_master.as_ref().map(|b| b.stp.enabled)),
        ("bridge", Some(true))
    );
    for port in ["eth0", "eth1"] {
        assert_eq!(h.links[port].master_index, br0.index, "{port}");
        assert!(h.links[port].is_up(), "{port}");
    }
    assert!(br0.is_up());
}

#[test]
fn mtu_and_mac_set_then_left_alone() {
    let mut h = host_with(&["eth0"]);
    let eth0 = index(&h, "eth0");
    set(&mut h, LinkOp::SetUp { index: eth0, up: true });
    let mac = HardwareAddr(vec![2, 0, 0, 0, 0, 0x42]);
    let spec = LinkSpec { mtu: 9000, hardware_addr: Some(mac.clone()), ..physical("eth0") };
    let p = plan(std::slice::from_ref(&spec), &mut h);
    assert_eq!(
        ops(&p),
        [LinkOp::SetMtu { index: eth0, mtu: 9000 }, LinkOp::SetMac { index: eth0, mac }]
    );
    assert_eq!(p.applied, ["eth0"]);
    apply(&p, &mut h);
    assert!(plan(&[spec], &mut h).ops.is_empty(), "equal MTU and MAC need nothing");
    // MTU 0 and no MAC leave whatever the kernel has.
    assert!(plan(&[physical("eth0")], &mut h).ops.is_empty());
}

#[test]
fn wrong_kind_logical_link_is_recreated_but_a_nic_never_deleted() {
    let mut h = host_with(&["eth0"]);
    let old = h.add_link("br0", LinkType::ETHER, "dummy");
    let spec = bridge("br0", false);
    let p = plan(std::slice::from_ref(&spec), &mut h);
    assert_eq!(ops(&p), [LinkOp::Delete { index: old, name: "br0".into() }]);
    apply(&p, &mut h);
    let p = plan(std::slice::from_ref(&spec), &mut h);
    assert!(
        matches!(&ops(&p)[..], [LinkOp::Create { name, kind: NewLinkKind::Bridge(_), .. }] if name == "br0"),
        "{p:?}"
    );

    // A logical spec named like a physical link waits instead of deleting it.
    let p = plan(&[logical("eth0", "dummy")], &mut h);
    assert!(p.ops.is_empty(), "{p:?}");
    assert!(p.waiting[0].1.contains("without a kind"), "{p:?}");
}

#[test]
fn vlan_id_change_recreates() {
    let mut h = host_with(&["eth0"]);
    let eth0 = index(&h, "eth0");
    let mut s = vlan("eth0.10", "eth0", 10);
    let p = plan(std::slice::from_ref(&s), &mut h);
    apply(&p, &mut h);
    apply(&plan(std::slice::from_ref(&s), &mut h), &mut h);
    // An unset protocol is 802.1Q, which is what the kernel reports: no change.
    s.vlan = Some(VlanSpec { vid: 10, protocol: VlanProtocol::default() });
    assert!(plan(std::slice::from_ref(&s), &mut h).ops.is_empty());

    s.vlan = Some(VlanSpec { vid: 20, protocol: VlanProtocol::DOT1Q });
    let old = index(&h, "eth0.10");
    let p = plan(std::slice::from_ref(&s), &mut h);
    assert_eq!(ops(&p), [LinkOp::Delete { index: old, name: "eth0.10".into() }]);
    apply(&p, &mut h);
    let p = plan(&[s], &mut h);
    let want = NewLinkKind::Vlan {
        parent: eth0,
        vlan: VlanSpec { vid: 20, protocol: VlanProtocol::DOT1Q },
    };
    assert!(matches!(&ops(&p)[..], [LinkOp::Create { kind, .. }] if *kind == want), "{p:?}");
}

#[test]
fn bond_mode_drift_goes_down_unslaves_and_sets() {
    let host = Rc::new(RefCell::new(host_with(&["eth0", "eth1"])));
    let specs = [
        bond("bond0", BondMode::ACTIVE_BACKUP),
        bond_port("eth0", "bond0", 0),
        bond_port("eth1", "bond0", 1),
    ];
    reconcile(&host, &specs);

    let mut h = host.borrow_mut();
    let (b, e0, e1) = (index(&h, "bond0"), index(&h, "eth0"), index(&h, "eth1"));
    let mut lacp = specs.clone();
    lacp[0] = bond("bond0", BondMode::LACP);
    // Fields the kernel does not report reliably are not drift.
    let mut unreliable = specs[0].clone();
    if let Some(b) = unreliable.bond_master.as_mut() {
        b.resend_igmp = 7;
        b.primary = "eth1".into();
    }
    assert!(plan(&[unreliable], &mut h).ops.is_empty());

    let p = plan(&lacp, &mut h);
    let want = lacp[0].bond_master.clone().unwrap();
    assert_eq!(
        ops(&p),
        [
            LinkOp::SetUp { index: b, up: false },
            LinkOp::SetMaster { index: e0, master: None },
            LinkOp::SetMaster { index: e1, master: None },
            LinkOp::SetBond { index: b, bond: want.clone() },
        ]
    );
    assert_eq!(p.waiting.len(), 2, "ports wait for the bond: {p:?}");
    drop(h);

    // The controller finishes the job: ports back in, everything up.
    reconcile(&host, &lacp);
    let h = host.borrow();
    assert_eq!(h.links["bond0"].bond_master.as_ref(), Some(&want));
    assert_eq!((h.links["eth0"].master_index, h.links["eth1"].master_index), (b, b));
    assert!(["bond0", "eth0", "eth1"].iter().all(|n| h.links[*n].is_up()));
}

#[test]
fn foreign_master_left_alone_and_our_former_port_released() {
    let mut h = host_with(&["eth0", "eth1"]);
    let foreign = h.add_link("ovs-br", LinkType::ETHER, "bridge");
    let br0 = h.add_link("br0", LinkType::ETHER, "bridge");
    let (e0, e1) = (index(&h, "eth0"), index(&h, "eth1"));
    for (i, m) in [(e0, foreign), (e1, br0)] {
        set(&mut h, LinkOp::SetMaster { index: i, master: Some(m) });
    }
    for i in [e0, e1, br0] {
        set(&mut h, LinkOp::SetUp { index: i, up: true });
    }
    // eth1's spec dropped `bridge_slave`; eth0 never had one.
    let specs = [bridge("br0", false), physical("eth0"), physical("eth1")];
    let p = plan(&specs, &mut h);
    assert_eq!(
        ops(&p),
        [
            LinkOp::SetUp { index: e1, up: false },
            LinkOp::SetMaster { index: e1, master: None },
            LinkOp::SetUp { index: e1, up: true },
        ]
    );
    assert_eq!(p.applied, ["br0", "eth0", "eth1"]);
}

#[test]
fn missing_physical_link_waits_without_ops() {
    let mut h = host_with(&["eth0"]);
    let p = plan(&[physical("eth9")], &mut h);
    assert!(p.ops.is_empty());
    assert_eq!(p.waiting, [("eth9".to_owned(), "link not found".to_owned())]);
    assert!(p.applied.is_empty());

    let host = Rc::new(RefCell::new(host_with(&["eth0"])));
    let (rt, busy) = reconcile(&host, &[physical("eth9")]);
    assert_eq!(busy.get(), 0);
    let condition = rt.controllers()[0].condition.clone().unwrap_or_default();
    assert!(condition.contains("eth9"), "{condition}");
    assert!(!has_finalizer(&rt, "eth9"));
}

#[test]
fn teardown_deletes_logical_children_first_and_leaves_physical() {
    let host = Rc::new(RefCell::new(host_with(&["eth0", "eth1"])));
    let specs = [
        bond("bond0", BondMode::LACP),
        bond_port("eth0", "bond0", 0),
        vlan("bond0.10", "bond0", 10),
        logical("dummy0", "dummy"),
    ];
    reconcile(&host, &specs);
    let mut h = host.borrow_mut();
    let (b, v, d, e0) =
        (index(&h, "bond0"), index(&h, "bond0.10"), index(&h, "dummy0"), index(&h, "eth0"));
    let p = plan_with(&specs, Phase::TearingDown, &mut h);
    assert_eq!(
        ops(&p),
        [
            LinkOp::Delete { index: d, name: "dummy0".into() },
            LinkOp::Delete { index: v, name: "bond0.10".into() },
            LinkOp::Delete { index: b, name: "bond0".into() },
        ],
        "the VLAN goes before its parent, eth0 is not touched"
    );
    assert_eq!(p.released.len(), 4);
    apply(&p, &mut h);
    assert!(h.links["eth0"].is_up() && h.links["eth0"].index == e0);
    let p = plan_with(&specs, Phase::TearingDown, &mut h);
    assert!(p.ops.is_empty() && p.released.len() == 4, "{p:?}");
}

#[test]
fn cycle_waits_without_ops() {
    let mut h = host_with(&["eth0"]);
    let specs = [vlan("a", "b", 10), vlan("b", "a", 20), physical("eth0")];
    let p = plan(&specs, &mut h);
    assert_eq!(ops(&p), [LinkOp::SetUp { index: index(&h, "eth0"), up: true }]);
    let ids: Vec<&str> = p.waiting.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["a", "b"]);
    assert!(p.waiting.iter().all(|(_, why)| why.contains("cycle")), "{p:?}");
}

#[test]
fn masters_and_parents_come_first_whatever_their_names() {
    // By name, eth0 and "a.5" sort before "zbond"; the graph puts the bond first.
    let host = Rc::new(RefCell::new(host_with(&["eth0"])));
    let specs = [
        bond_port("eth0", "zbond", 0),
        vlan("a.5", "zbond", 5),
        LinkSpec { mtu: 9000, ..bond("zbond", BondMode::LACP) },
    ];
    let (_rt, busy) = reconcile(&host, &specs);
    assert_eq!(busy.get(), 1);
    let h = host.borrow();
    let at = |needle: &str| h.log.iter().position(|l| l.contains(needle)).unwrap();
    let eth0 = h.links["eth0"].index;
    assert!(at("Create { name: \"zbond\"") < at(&format!("SetMaster {{ index: {eth0}")));
    assert!(at("Create { name: \"zbond\"") < at("Create { name: \"a.5\""));
    drop(h);

    // Within one step, the master's MTU is set before its port is brought up.
    let mut h = host_with(&["eth0"]);
    let z = h.add_link("zbond", LinkType::ETHER, "bond");
    let eth0 = index(&h, "eth0");
    let p = plan(&[specs[0].clone(), specs[2].clone()], &mut h);
    let pos = |op: &LinkOp| ops(&p).iter().position(|o| o == op).unwrap();
    assert!(
        pos(&LinkOp::SetMtu { index: z, mtu: 9000 })
            < pos(&LinkOp::SetUp { index: eth0, up: true })
    );
}

#[test]
fn veth_pair_with_both_ends_specified_is_created_once() {
    let host = Rc::new(RefCell::new(FakeHost::new()));
    let end = |name: &str, peer: &str| LinkSpec {
        veth: Some(VethSpec { peer_name: peer.into() }),
        ..logical(name, "veth")
    };
    let (rt, _) = reconcile(&host, &[end("veth0", "veth1"), end("veth1", "veth0")]);
    assert_eq!(rt.controllers()[0].last_error, None);
    let h = host.borrow();
    assert_eq!(h.log.iter().filter(|l| l.starts_with("Create")).count(), 1, "{:?}", h.log);
    assert!(h.links["veth0"].is_up() && h.links["veth1"].is_up());

    // A wrong peer is recreated.
    let mut k = h.links.clone().into_iter().collect::<Vec<_>>();
    k.sort_by_key(|(n, _)| n.clone());
    let spec = end("veth0", "other");
    let p = plan_links(&[Desired { id: "veth0", spec: &spec, phase: Phase::Running }], &k);
    assert!(matches!(&ops(&p)[..], [LinkOp::Delete { name, .. }] if name == "veth0"), "{p:?}");
}

fn wireguard_link(name: &str, peers: &[(&str, &str)]) -> LinkSpec {
    use crate::resource::{WireguardPeer, WireguardSpec};
    use crate::wireguard_keys::generate_private_key;
    let peers = peers
        .iter()
        .map(|(key, ip)| WireguardPeer {
            public_key: (*key).into(),
            allowed_ips: vec![ip.parse().unwrap()],
            persistent_keepalive_interval: 25,
            ..WireguardPeer::default()
        })
        .collect();
    LinkSpec {
        mtu: 1420,
        link_type: LinkType::NONE,
        wireguard: Some(WireguardSpec {
            private_key: Some(generate_private_key([4; 32])),
            listen_port: 51820,
            firewall_mark: 0x20,
            peers,
        }),
        ..logical(name, "wireguard")
    }
}

fn key_text(n: u8) -> String {
    crate::wireguard_keys::public_key(&crate::wireguard_keys::generate_private_key([n; 32]))
        .to_base64()
}

#[test]
fn wireguard_link_created_configured_then_left_alone() {
    let host = Rc::new(RefCell::new(host_with(&[])));
    let spec = wireguard_link("kubespan", &[(&key_text(1), "10.0.0.1/32")]);
    let (mut rt, busy) = reconcile(&host, &[spec]);
    assert_eq!(busy.get(), 1);
    {
        let h = host.borrow();
        let link = &h.links["kubespan"];
        assert_eq!(
            (link.kind.as_str(), link.link_type, link.mtu),
            ("wireguard", LinkType::NONE, 1420)
        );
        assert!(link.is_up());
        let dev = &h.wireguard["kubespan"];
        assert_eq!((dev.listen_port, dev.fwmark, dev.peers.len()), (51820, 0x20, 1));
        assert_eq!(dev.peers[0].allowed_ips, ["10.0.0.1/32".parse::<ipnet::IpNet>().unwrap()]);
        assert!(
            h.log.iter().any(|l| l.starts_with("wireguard set kubespan: private key")),
            "{:?}",
            h.log
        );
    }
    assert!(has_finalizer(&rt, "kubespan"));
    // Nothing differs now: no more writes.
    rt.mark_all_dirty();
    rt.run(Instant::now());
    assert_eq!(busy.get(), 1, "{:?}", host.borrow().log);
}

#[test]
fn wireguard_peer_change_updates_in_place() {
    let host = Rc::new(RefCell::new(host_with(&[])));
    let (k1, k2) = (key_text(1), key_text(2));
    let (mut rt, _) = reconcile(
        &host,
        &[wireguard_link("kubespan", &[(&k1, "10.0.0.1/32"), (&k2, "10.0.0.2/32")])],
    );
    let index = host.borrow().links["kubespan"].index;
    let ops_before = host.borrow().log.len();
    let changed = wireguard_link("kubespan", &[(&k1, "10.0.1.0/24")]);
    rt.put_input("test", Namespace::Network, "kubespan", changed).unwrap();
    rt.run(Instant::now());
    let h = host.borrow();
    assert_eq!(h.links["kubespan"].index, index);
    assert_eq!(h.log[ops_before..], [format!("wireguard set kubespan: peer {k1}, remove {k2}")]);
    let dev = &h.wireguard["kubespan"];
    assert_eq!(dev.peers.len(), 1);
    assert_eq!(dev.peers[0].allowed_ips, ["10.0.1.0/24".parse::<ipnet::IpNet>().unwrap()]);
}

#[test]
fn wireguard_bad_key_names_the_field_and_other_links_still_apply() {
    let host = Rc::new(RefCell::new(host_with(&[])));
    let bad = wireguard_link("kubespan", &[("not-base64", "10.0.0.1/32")]);
    let (rt, _) = reconcile(&host, &[bad, logical("d0", "dummy")]);
    let h = host.borrow();
    assert!(h.links.contains_key("d0"));
    // The link itself exists; its device got nothing.
    assert!(h.wireguard["kubespan"].peers.is_empty());
    let state = rt.controllers();
    let err = state[0].last_error.clone().unwrap_or_default();
    assert!(err.contains("wireguard.peers[0].publicKey"), "{err}");
}

#[test]
fn wireguard_change_refreshes_the_link_status_without_a_netlink_event() {
    let fake = Rc::new(RefCell::new(host_with(&[])));
    let shared: SharedHost = fake.clone();
    let mut rt = Runtime::new();
    rt.register(Box::new(crate::controllers::status::links(shared.clone()))).unwrap();
    rt.register(Box::new(LinkSpecController::new(shared))).unwrap();
    let k1 = key_text(1);
    let peers = |ip: &str| wireguard_link("kubespan", &[(&k1, ip)]);
    rt.put_input("test", Namespace::Network, "kubespan", peers("10.0.0.1/32")).unwrap();
    // No watcher here: only the LinkRefresh can wake the status controller.
    let now = Instant::now();
    while rt.has_work() {
        rt.run(now);
    }
    let allowed = |rt: &Runtime| {
        let s = rt.store().get_spec::<LinkStatus>(Namespace::Network, "kubespan");
        s.and_then(|s| s.wireguard.as_ref()).map(|w| w.peers[0].allowed_ips.clone())
    };
    assert_eq!(allowed(&rt), Some(vec!["10.0.0.1/32".parse().unwrap()]));
    rt.put_input("test", Namespace::Network, "kubespan", peers("10.0.0.9/32")).unwrap();
    while rt.has_work() {
        rt.run(now);
    }
    assert_eq!(allowed(&rt), Some(vec!["10.0.0.9/32".parse().unwrap()]));
}

/// The runtime with the controller over `host`, for tests that drive time themselves.
fn runtime(host: &Rc<RefCell<FakeHost>>, specs: &[LinkSpec]) -> Runtime {
    let mut rt = Runtime::new();
    for s in specs {
        rt.put_input("test", Namespace::Network, &s.name, s.clone()).unwrap();
    }
    let shared: SharedHost = host.clone();
    rt.register(Box::new(LinkSpecController::new(shared))).unwrap();
    rt
}

fn count(host: &Rc<RefCell<FakeHost>>, prefix: &str) -> usize {
    host.borrow().log.iter().filter(|l| l.starts_with(prefix)).count()
}

#[test]
fn refused_mtu_is_reported_and_the_link_still_comes_up() {
    let host = Rc::new(RefCell::new(host_with(&["eth0"])));
    host.borrow_mut().max_mtu = Some(1500);
    let spec = LinkSpec { mtu: 9000, ..physical("eth0") };
    let mut rt = runtime(&host, &[spec]);
    let t0 = Instant::now();
    rt.run(t0);
    assert!(host.borrow().links["eth0"].is_up(), "{:?}", host.borrow().log);
    assert_eq!(count(&host, "SetMtu"), 1, "refused once, not once per round");
    let err = rt.controllers()[0].last_error.clone().unwrap_or_default();
    assert!(err.contains("link eth0: mtu 9000") && err.contains("device maximum"), "{err}");
    assert!(has_finalizer(&rt, "eth0"));

    // The retry tries the MTU again and changes nothing else.
    let before = host.borrow().log.len();
    rt.run(t0 + Duration::from_secs(1));
    let log = host.borrow().log[before..].to_vec();
    assert_eq!(log.len(), 1, "{log:?}");
    assert!(log[0].starts_with("SetMtu"), "{log:?}");
}

#[test]
fn an_mtu_another_writer_keeps_undoing_is_held_with_growing_backoff() {
    let host = Rc::new(RefCell::new(host_with(&["eth0"])));
    let spec = LinkSpec { mtu: 1400, ..physical("eth0") };
    let mut rt = runtime(&host, &[spec]);
    let t0 = Instant::now();
    let step = Duration::from_millis(50);
    // Another writer puts 1500 back right after each of our writes, and its netlink event
    // wakes us, for 20 s.
    let mut now = t0;
    while now < t0 + Duration::from_secs(20) {
        rt.run(now);
        if host.borrow().links["eth0"].mtu != 1500 {
            host.borrow_mut().links.get_mut("eth0").unwrap().mtu = 1500;
            rt.mark_dirty(Kind::LinkStatus);
        }
        now += step;
    }
    let fights = count(&host, "SetMtu");
    // 5 applies to detect it, then about 2 per hold of 2, 4, 8 s; 400 without the guard.
    assert!((5..=14).contains(&fights), "{fights} MTU writes in 20 s");
    let condition = rt.controllers()[0].condition.clone().unwrap_or_default();
    assert!(condition.contains("link eth0: mtu 1400"), "{condition:?}");
    assert!(host.borrow().links["eth0"].is_up(), "the rest of the spec still applies");

    // The other writer stops: our value goes back once its hold ends and stays; the fight
    // is declared over after a quiet window.
    let end = now + Duration::from_secs(200);
    while now < end {
        rt.run(now);
        now += Duration::from_millis(500);
    }
    assert_eq!(host.borrow().links["eth0"].mtu, 1400);
    assert_eq!(count(&host, "SetMtu"), fights + 1);
    assert_eq!(rt.controllers()[0].condition, None);
}

#[test]
fn an_mtu_undone_within_one_reconcile_is_held_not_retried_every_round() {
    let host = Rc::new(RefCell::new(host_with(&["eth0"])));
    host.borrow_mut().mtu_reverts_to = Some(1500);
    let spec = LinkSpec { mtu: 1400, ..physical("eth0") };
    let mut rt = runtime(&host, &[spec]);
    let t0 = Instant::now();
    rt.run(t0);
    assert_eq!(count(&host, "SetMtu"), super::super::apply::FIGHT_LIMIT);
    assert!(host.borrow().links["eth0"].is_up(), "{:?}", host.borrow().log);
    // Woken by events during the hold, it writes nothing.
    for i in 1..10 {
        rt.mark_dirty(Kind::LinkStatus);
        rt.run(t0 + Duration::from_millis(100) * i);
    }
    assert_eq!(count(&host, "SetMtu"), super::super::apply::FIGHT_LIMIT);
}

/// The guard's text of a link operation names the link, the attribute and our value, as the
/// log and the condition have always said it.
#[test]
fn op_key_names_the_link_the_attribute_and_our_value() {
    let mac: HardwareAddr = "02:00:00:00:00:01".parse().unwrap();
    let create =
        LinkOp::Create { name: "br0".into(), kind: NewLinkKind::Dummy, mtu: None, mac: None };
    let cases = [
        (create, "create"),
        (LinkOp::Delete { index: 3, name: "br0".into() }, "delete"),
        (LinkOp::SetUp { index: 3, up: true }, "up"),
        (LinkOp::SetUp { index: 3, up: false }, "down"),
        (LinkOp::SetMtu { index: 3, mtu: 1400 }, "mtu 1400"),
        (LinkOp::SetMac { index: 3, mac: mac.clone() }, &format!("mac {mac}")),
        (LinkOp::SetMaster { index: 3, master: Some(7) }, "master index 7"),
        (LinkOp::SetMaster { index: 3, master: None }, "no master"),
        (LinkOp::SetBond { index: 3, bond: BondMasterSpec::default() }, "bond settings"),
        (LinkOp::SetBridge { index: 3, bridge: BridgeMasterSpec::default() }, "bridge settings"),
    ];
    let mut keys = std::collections::BTreeSet::new();
    for (op, what) in cases {
        assert_eq!(op_key("eth0", &op), format!("link eth0: {what}"));
        assert_eq!(Links::key("eth0", &op), OpKey::of_text(&op_key("eth0", &op)));
        keys.insert(Links::key("eth0", &op));
    }
    assert_eq!(keys.len(), 10);
    let other = LinkOp::SetMtu { index: 3, mtu: 1500 };
    assert!(!keys.contains(&Links::key("eth0", &other)), "our value is part of the key");
}
