// SPDX-License-Identifier: Apache-2.0
//! A leader whose election lease is revoked or expires in the middle of a reconcile pass
//! stops that pass before its next node call or store write, against a real etcd (a private
//! member on loopback): the replicas' election (`etcd::session`), the store fenced on the
//! leader's key as `serve` fences it, and a node that records its calls (and, inside the
//! first, revokes the lease as `etcdctl lease revoke` would, or outlasts a lease no longer
//! renewed, as a leader paused past its TTL). The other replica then leads and reconciles.
//! Without the `etcd` binary a test is skipped, or fails when `KEELSON_REQUIRE_ROOT=1`.
#![allow(clippy::disallowed_methods)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd::session::{self, Session};
use operator::key::Layout;
use operator::kinds::{Body, MachineSpec, TM};
use operator::reconcile::{NodeApi, Reconciler};
use operator::states::{CallError, ServiceObs};
use operator::store::{Fence, Resource, Store, StoreError};

const PREFIX: &str = "/keelson-operator";
const ELECTION: &[u8] = b"/keelson-operator/leader";

/// What the first node call does before it answers (revoke the lease, outlast it).
type OnFirst = Box<dyn FnOnce() + Send>;

/// A node that records every call; the first call runs `on_first` (if set) before it
/// answers.
#[derive(Clone, Default)]
struct Recording {
    calls: Arc<Mutex<Vec<String>>>,
    on_first: Arc<Mutex<Option<OnFirst>>>,
}

impl Recording {
    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
    fn record(&self, call: String) {
        self.calls.lock().unwrap().push(call);
        let first = self.on_first.lock().unwrap().take();
        if let Some(f) = first {
            f();
        }
    }
}

impl NodeApi for Recording {
    fn version(&mut self, a: &str) -> Result<String, CallError> {
        self.record(format!("Version {a}"));
        Ok("v1.13.0".into())
    }
    fn disks(&mut self, a: &str) -> Result<usize, CallError> {
        self.record(format!("Disks {a}"));
        Ok(1)
    }
    fn apply_configuration(
        &mut self,
        a: &str,
        _insecure: bool,
        _config: &str,
        _dry_run: bool,
    ) -> Result<bool, CallError> {
        self.record(format!("ApplyConfiguration {a}"));
        Ok(true)
    }
    fn service_info(&mut self, a: &str, name: &str) -> Result<ServiceObs, CallError> {
        self.record(format!("ServiceInfo {a} {name}"));
        Ok(ServiceObs { state: "Running".into(), healthy: true })
    }
    fn bootstrap(&mut self, a: &str) -> Result<(), CallError> {
        self.record(format!("Bootstrap {a}"));
        Ok(())
    }
    fn kubeconfig(&mut self, a: &str) -> Result<String, CallError> {
        self.record(format!("Kubeconfig {a}"));
        Err(CallError::Unreachable("not here".into()))
    }
    fn reset(&mut self, a: &str) -> Result<(), CallError> {
        self.record(format!("Reset {a}"));
        Ok(())
    }
    fn upgrade(&mut self, a: &str, image: &str) -> Result<(), CallError> {
        self.record(format!("Upgrade {a} {image}"));
        Ok(())
    }
}

fn store(client: etcd::Client) -> Store {
    Store::new(client, Layout::new(PREFIX, PREFIX.as_bytes()))
}

/// Two machines, each a node call away from its first step.
fn apply_machines(s: &mut Store) {
    for (name, addr) in [("m1", "10.0.0.21"), ("m2", "10.0.0.22")] {
        let doc = format!(
            "apiVersion: keelson.dev/v1alpha1\nkind: TalosMachine\nmetadata:\n  name: {name}\nspec:\n  endpoint: {addr}\n  version: v1.13.0\n  config: 'machine: {{type: worker}}'\n"
        );
        operator::ctl::apply(s, &doc).unwrap();
    }
}

/// The machines' store revisions (a write moves one).
fn revisions(s: &mut Store) -> Vec<i64> {
    ["m1", "m2"]
        .iter()
        .map(|id| {
            let m: Resource<Body<MachineSpec>> = s.get("default", TM, id).unwrap().unwrap();
            m.metadata.revision
        })
        .collect()
}

/// A replica's session, elected (the campaign must end with it leading), and the fence
/// `serve` sets for its term.
fn elect(client: &mut etcd::Client, name: &str) -> (Session, Fence) {
    let session = Session::grant(client, 30, Duration::from_secs(5)).unwrap();
    let stop = AtomicBool::new(false);
    let e = session::campaign(client, &session, ELECTION, name.as_bytes(), &stop).unwrap();
    let fence = Fence { key: e.key().to_vec(), create_revision: e.revision() };
    (session, fence)
}

#[test]
fn a_leader_whose_lease_is_revoked_mid_pass_makes_no_further_node_call_or_write() {
    let Some((etcd, _dir)) = common::start_etcd("fence", "mid_pass") else { return };
    let mut admin = store(etcd.client());
    apply_machines(&mut admin);
    // A first pass (no election yet) takes both machines to where their next step is a node
    // call.
    let first = Recording::default();
    let mut r0 = Reconciler::new(store(etcd.client()), first.clone(), "default");
    while first.calls().is_empty() {
        r0.pass().unwrap();
    }
    let before = revisions(&mut admin);

    // Replica a leads; its lease goes during its first node call of the pass.
    let mut ca = etcd.client();
    let (sa, fa) = elect(&mut ca, "replica-a");
    let node = Recording::default();
    let (mut c, lease) = (etcd.client(), sa.id());
    *node.on_first.lock().unwrap() = Some(Box::new(move || {
        c.lease_revoke(lease).unwrap();
    }));
    let mut sta = store(etcd.client());
    sta.set_fence(Some(fa.clone()));
    let mut ra = Reconciler::new(sta, node.clone(), "default");
    let r = ra.pass();
    assert!(matches!(r, Err(StoreError::Deposed)), "{r:?}");
    // One node call (the one the lease went in), no write of its answer, no call for the
    // other machine.
    assert_eq!(node.calls().len(), 1, "{:?}", node.calls());
    assert_eq!(revisions(&mut admin), before);
    // Its session has not noticed yet (no keep-alive since): the fence, not the local lease
    // clock, stopped the pass. A second pass stops before any node call.
    assert!(sa.alive());
    let r = ra.pass();
    assert!(matches!(r, Err(StoreError::Deposed)), "{r:?}");
    assert_eq!(node.calls().len(), 1, "{:?}", node.calls());
    assert_eq!(revisions(&mut admin), before);

    // Replica b leads now (a's key went with its lease) and reconciles both machines.
    let mut cb = etcd.client();
    let (_sb, fb) = elect(&mut cb, "replica-b");
    assert_ne!(fb, fa);
    let leader = session::leader(&mut cb, ELECTION).unwrap().unwrap();
    assert_eq!(leader.value, b"replica-b");
    let nb = Recording::default();
    let mut stb = store(etcd.client());
    stb.set_fence(Some(fb));
    let mut rb = Reconciler::new(stb, nb.clone(), "default");
    rb.pass().unwrap();
    let calls = nb.calls();
    for addr in ["10.0.0.21", "10.0.0.22"] {
        assert!(
            calls.iter().any(|c| c.ends_with(addr) || c.contains(&format!("{addr} "))),
            "{calls:?}"
        );
    }
    let after = revisions(&mut admin);
    assert!(after.iter().zip(&before).all(|(a, b)| a > b), "{before:?} -> {after:?}");
    // a, still fenced on its old key, cannot write over b's work either.
    let mut m: Resource<Body<MachineSpec>> = ra.store.get("default", TM, "m1").unwrap().unwrap();
    m.spec.status.failures += 1;
    assert!(matches!(ra.store.update(&mut m), Err(StoreError::Deposed)));
    assert_eq!(revisions(&mut admin), after);
    drop(etcd);
}

#[test]
fn a_leader_whose_lease_expires_during_a_node_call_writes_nothing_after_it() {
    let Some((etcd, _dir)) = common::start_etcd("fence", "expiry") else { return };
    let mut admin = store(etcd.client());
    apply_machines(&mut admin);
    let before = revisions(&mut admin);
    // A 2 s lease no longer renewed: as a leader paused (SIGSTOP) or stuck in a node call
    // past its TTL. Its first node call lasts until etcd has expired the lease.
    let mut c = etcd.client();
    let session = Session::grant(&c, 2, Duration::from_millis(500)).unwrap();
    let stop = AtomicBool::new(false);
    let e = session::campaign(&mut c, &session, ELECTION, b"replica-a", &stop).unwrap();
    let fence = Fence { key: e.key().to_vec(), create_revision: e.revision() };
    session.abandon();
    let node = Recording::default();
    let (mut watch, key) = (etcd.client(), fence.key.clone());
    *node.on_first.lock().unwrap() = Some(Box::new(move || {
        let until = std::time::Instant::now() + Duration::from_secs(15);
        while watch.get(&key).unwrap().is_some() {
            assert!(std::time::Instant::now() < until, "the lease did not expire");
            std::thread::sleep(Duration::from_millis(100));
        }
    }));
    let mut st = store(etcd.client());
    st.set_fence(Some(fence));
    let mut r = Reconciler::new(st, node.clone(), "default");
    let out = r.pass();
    assert!(matches!(out, Err(StoreError::Deposed)), "{out:?}");
    assert_eq!(node.calls().len(), 1, "{:?}", node.calls());
    assert_eq!(revisions(&mut admin), before);
    // Nobody leads now; the next campaign does.
    assert!(session::leader(&mut c, ELECTION).unwrap().is_none());
    let (_sb, _) = elect(&mut etcd.client(), "replica-b");
    let leader = session::leader(&mut c, ELECTION).unwrap().unwrap();
    assert_eq!(leader.value, b"replica-b");
}
