// SPDX-License-Identifier: Apache-2.0
//! Tenant networks on a real etcd (a private member per test): ID claims racing from two
//! allocators, requested IDs, the UID-checked release, and the peering handshake from `apply`
//! through the controller to a node's report and back. Without the `etcd` binary a test is
//! skipped, or fails when `KEELSON_REQUIRE_ROOT=1`.
#![allow(clippy::disallowed_methods)] // Tests drive the client from outside: plain threads are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use etcd::local::LocalEtcd;
use operator::ctl;
use operator::key::Layout;
use operator::kinds::Kind;
use operator::networks::allocate::{self, AllocError, Allocator, Range, Released};
use operator::networks::controller::Controller;
use operator::networks::kinds::{
    Body, NetState, Network, NetworkId, NetworkSpec, NetworkStatus, NodeNetwork, NodeNetworkSpec,
    NodeNetworkStatus, CLUSTER, NETWORKS, NETWORK_IDS, NODE_NETWORKS,
};
use operator::networks::node::{self, Dataplane, Outcome};
use operator::store::{Resource, Store};

const NS: &str = "default";

fn store(etcd: &LocalEtcd) -> Store {
    Store::new(etcd.client(), Layout::new("/keelson-operator", b"/keelson-operator"))
}

fn nid(s: &mut Store, id: &str) -> Option<NetworkId> {
    s.get(CLUSTER, NETWORK_IDS, id).unwrap()
}

fn network(s: &mut Store, name: &str, id: Option<u32>) -> Network {
    let mut n = Resource::new(
        NS,
        NETWORKS,
        name,
        Body {
            annotations: Default::default(),
            labels: Default::default(),
            spec: NetworkSpec { id, ..Default::default() },
            status: NetworkStatus::default(),
        },
    );
    s.create(&mut n).unwrap();
    s.get(NS, NETWORKS, name).unwrap().unwrap()
}

/// A xorshift generator per allocator (seeded differently), so the two race for real.
fn rng(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

#[test]
fn two_allocators_racing_never_claim_one_id_twice() {
    let Some((etcd, _dir)) = common::start_etcd("tn", "race") else { return };
    let range = Range::new(200, 455).unwrap();
    let started = Instant::now();
    let threads: Vec<_> = (0..2u64)
        .map(|t| {
            let mut s = store(&etcd);
            std::thread::spawn(move || {
                let a = Allocator::new(range);
                let mut r = rng(0x5eed + t * 7919);
                let mut got = Vec::new();
                for i in 0..100 {
                    let n = network(&mut s, &format!("t{t}-n{i}"), None);
                    let c = a.claim(&mut s, &n, None, &mut r).unwrap();
                    let (id, stored) = (c.id, c.network);
                    assert_eq!(stored.spec.status.id, Some(id));
                    got.push((n.metadata.id.clone(), id));
                }
                got
            })
        })
        .collect();
    let mut all: Vec<(String, u32)> = Vec::new();
    for t in threads {
        all.extend(t.join().unwrap());
    }
    let elapsed = started.elapsed();
    let ids: BTreeSet<u32> = all.iter().map(|(_, id)| *id).collect();
    assert_eq!(ids.len(), 200, "duplicate IDs: {all:?}");
    assert!(ids.iter().all(|id| range.contains(*id)));
    // Every claim is stored once, naming the Network that records it (with its UID).
    let mut s = store(&etcd);
    let (claims, _) =
        s.list::<Body<serde_json::Value, serde_json::Value>>(CLUSTER, NETWORK_IDS).unwrap();
    assert_eq!(claims.len(), 200);
    // The index names exactly the claimed IDs.
    let layout = s.layout().clone();
    let idx = s
        .client()
        .range(&etcd::wire::RangeRequest {
            key: allocate::index_key(&layout, 0),
            range_end: allocate::index_key(&layout, 99_999_999),
            keys_only: true,
            ..Default::default()
        })
        .unwrap();
    let indexed: BTreeSet<u32> = idx
        .kvs
        .iter()
        .map(|kv| String::from_utf8_lossy(&kv.key).rsplit('/').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(indexed, ids);
    for (name, id) in &all {
        let c: NetworkId = s.get(CLUSTER, NETWORK_IDS, &id.to_string()).unwrap().unwrap();
        let n: Network = s.get(NS, NETWORKS, name).unwrap().unwrap();
        assert_eq!(c.spec.spec.claim_ref.name, *name);
        assert_eq!(c.spec.spec.claim_ref.uid, n.metadata.create_revision.to_string());
        assert_eq!(n.spec.status.uid, c.spec.spec.claim_ref.uid);
        assert_eq!(allocate::held(&mut s, &n).unwrap(), Some(*id));
    }
    eprintln!("200 IDs claimed by two racing allocators into 256 in {elapsed:?}");
    // 56 left: they all go, then the range is full.
    let a = Allocator::new(range);
    let mut r = rng(42);
    for i in 0..56 {
        let n = network(&mut s, &format!("fill-{i}"), None);
        a.claim(&mut s, &n, None, &mut r).unwrap();
    }
    let n = network(&mut s, "one-too-many", None);
    let e = a.claim(&mut s, &n, None, &mut r).unwrap_err();
    assert!(matches!(e, AllocError::Exhausted { min: 200, max: 455 }), "{e}");
}

#[test]
fn requested_ids_and_a_release_that_checks_the_uid() {
    let Some((etcd, _dir)) = common::start_etcd("tn", "requested") else { return };
    let mut s = store(&etcd);
    let a = Allocator::new(Range::default());
    let mut r = rng(1);
    let first = network(&mut s, "a", Some(300));
    let c = a.claim(&mut s, &first, Some(300), &mut r).unwrap();
    let first = c.network;
    assert_eq!(c.id, 300);
    let second = network(&mut s, "b", Some(300));
    let e = a.claim(&mut s, &second, Some(300), &mut r).unwrap_err();
    assert!(matches!(&e, AllocError::Taken { id: 300, by } if by.contains("default/a")), "{e}");
    let e = a.claim(&mut s, &second, Some(100), &mut r).unwrap_err();
    assert_eq!(e.to_string(), "spec.id 100 is outside the allowed range 200..=16777215");
    // A stale copy (the Network changed since it was read) claims nothing.
    let e = a.claim(&mut s, &second, Some(301), &mut r);
    assert!(e.is_ok());
    let e = a.claim(&mut s, &second, Some(302), &mut r).unwrap_err();
    assert!(matches!(e, AllocError::NetworkChanged), "{e}");
    assert!(nid(&mut s, "302").is_none());

    // Network a goes and comes back under the same name: a new UID. The old incarnation's
    // release must not take the ID the new one claimed.
    let mut old = first.clone();
    s.modify::<Body<NetworkSpec, NetworkStatus>>(NS, NETWORKS, "a", |n| {
        n.metadata.finalizers.clear()
    })
    .unwrap();
    let cur: Network = s.get(NS, NETWORKS, "a").unwrap().unwrap();
    s.destroy(NS, NETWORKS, "a", cur.metadata.version, "").unwrap();
    assert_eq!(ctl::delete(&mut s, NS, Kind::NetworkId, "300").unwrap(), "networkid/300 deleted");
    assert!(ctl::delete(&mut s, NS, Kind::NetworkId, "300").is_err());
    let again = network(&mut s, "a", Some(300));
    assert_ne!(again.metadata.create_revision, first.metadata.create_revision);
    a.claim(&mut s, &again, Some(300), &mut r).unwrap();
    old.metadata.version = 99;
    assert!(matches!(allocate::release(&mut s, &old).unwrap(), Released::NotOurs(_)));
    assert!(nid(&mut s, "300").is_some());
    // The new incarnation releases its own.
    let cur: Network = s.get(NS, NETWORKS, "a").unwrap().unwrap();
    assert_eq!(allocate::release(&mut s, &cur).unwrap(), Released::Deleted(300));
    assert_eq!(allocate::release(&mut s, &cur).unwrap(), Released::Gone);
}

/// A node's dataplane that realises everything it is given and remembers what that was.
#[derive(Default)]
struct Recorder {
    now: BTreeMap<u32, NodeNetworkSpec>,
}

impl Dataplane for Recorder {
    fn apply(
        &mut self,
        want: &[NodeNetworkSpec],
        _remotes: &BTreeMap<u32, Vec<net::tenant::Remote>>,
    ) -> BTreeMap<u32, Outcome> {
        self.now = want.iter().map(|w| (w.id, w.clone())).collect();
        want.iter()
            .map(|w| {
                (
                    w.id,
                    Outcome::Realised {
                        prefixes: vec![],
                        peers: w.peered_ids.clone(),
                        failed: vec![],
                    },
                )
            })
            .collect()
    }
}

const A: &str = "\
apiVersion: keelson.dev/v1alpha1
kind: Network
metadata:
  name: a
spec:
  prefixes: [10.1.0.0/16]
  peerings:
    - name: to-b
      networkRef: {name: b}
";
const B_ALONE: &str = "\
apiVersion: keelson.dev/v1alpha1
kind: Network
metadata:
  name: b
spec:
  prefixes: [10.2.0.0/16, 10.3.0.0/16]
";
const B_PEERED: &str = "\
apiVersion: keelson.dev/v1alpha1
kind: Network
metadata:
  name: b
spec:
  prefixes: [10.2.0.0/16, 10.3.0.0/16]
  peerings:
    - name: to-a
      networkRef: {name: a, namespace: default}
      prefixes: [10.2.7.0/24]
";

fn net(s: &mut Store, name: &str) -> Option<Network> {
    s.get(NS, NETWORKS, name).unwrap()
}

fn node_net(s: &mut Store, id: u32) -> Option<NodeNetwork> {
    s.get(CLUSTER, NODE_NETWORKS, &id.to_string()).unwrap()
}

#[test]
fn peering_needs_both_sides_and_withdraws_when_one_goes() {
    let Some((etcd, _dir)) = common::start_etcd("tn", "peering") else { return };
    let mut s = store(&etcd);
    let mut c = Controller::new(Allocator::new(Range::default()), NS);
    let mut dp = Recorder::default();

    // One side: a and b get IDs and node layers, a's peering waits for b.
    ctl::apply(&mut s, &format!("{A}---\n{B_ALONE}")).unwrap();
    c.pass(&mut s).unwrap();
    let a = net(&mut s, "a").unwrap();
    let b = net(&mut s, "b").unwrap();
    let (ida, idb) = (a.spec.status.id.unwrap(), b.spec.status.id.unwrap());
    assert_ne!(ida, idb);
    assert_eq!(a.spec.status.state, NetState::Ready);
    assert_eq!(a.spec.status.peerings[0].state, NetState::Pending);
    assert!(
        a.spec.status.message.contains("has no peering naming default/a"),
        "{:?}",
        a.spec.status
    );
    assert!(node_net(&mut s, ida).unwrap().spec.spec.peered_ids.is_empty());

    // Both sides: the node layers carry each other's ID and the exposed prefixes; Pending
    // until a node realised them, then Ready.
    let t0 = Instant::now();
    ctl::apply(&mut s, B_PEERED).unwrap();
    c.pass(&mut s).unwrap();
    let na = node_net(&mut s, ida).unwrap().spec.spec;
    assert_eq!(na.peered_ids, [idb]);
    assert_eq!(na.peered_prefixes[0].prefixes, ["10.2.7.0/24"]);
    let nb = node_net(&mut s, idb).unwrap().spec.spec;
    assert_eq!(nb.peered_ids, [ida]);
    assert_eq!(nb.peered_prefixes[0].prefixes, ["10.1.0.0/16"]);
    assert_eq!(net(&mut s, "a").unwrap().spec.status.peerings[0].state, NetState::Pending);
    assert_eq!(node::sync(&mut s, "n1", &mut dp).unwrap(), 2);
    c.pass(&mut s).unwrap();
    let a = net(&mut s, "a").unwrap();
    assert_eq!(a.spec.status.peerings[0].state, NetState::Ready, "{:?}", a.spec.status);
    assert_eq!(a.spec.status.peerings[0].prefixes, ["10.2.7.0/24"]);
    assert_eq!(net(&mut s, "b").unwrap().spec.status.peerings[0].state, NetState::Ready);
    eprintln!(
        "both sides declared to Ready (one pass, one node round, one pass): {:?}",
        t0.elapsed()
    );
    assert_eq!(dp.now[&ida].peered_ids, [idb]);

    // A new leader (a restart) keeps every ID.
    let mut c2 = Controller::new(Allocator::new(Range::default()), NS);
    c2.pass(&mut s).unwrap();
    assert_eq!(net(&mut s, "a").unwrap().spec.status.id, Some(ida));
    let (claims, _) =
        s.list::<Body<serde_json::Value, serde_json::Value>>(CLUSTER, NETWORK_IDS).unwrap();
    assert_eq!(claims.len(), 2);

    // One side goes: a is Pending again, its node layer drops b, b's ID is released.
    let t0 = Instant::now();
    let said = ctl::delete(&mut s, NS, Kind::Network, "b").unwrap();
    assert!(said.contains("deleting"), "{said}");
    c2.pass(&mut s).unwrap();
    assert!(net(&mut s, "b").is_none());
    assert!(node_net(&mut s, idb).is_none());
    assert!(nid(&mut s, &idb.to_string()).is_none());
    assert!(node_net(&mut s, ida).unwrap().spec.spec.peered_ids.is_empty());
    let a = net(&mut s, "a").unwrap();
    assert_eq!(a.spec.status.peerings[0].state, NetState::Pending);
    assert!(a.spec.status.message.contains("does not exist"), "{:?}", a.spec.status);
    node::sync(&mut s, "n1", &mut dp).unwrap();
    assert!(dp.now[&ida].peered_ids.is_empty());
    assert!(!dp.now.contains_key(&idb));
    eprintln!("one side deleted to withdrawn on the node: {:?}", t0.elapsed());

    // A requested ID that another Network holds: Error, with who holds it.
    ctl::apply(
        &mut s,
        &format!("apiVersion: keelson.dev/v1alpha1\nkind: Network\nmetadata:\n  name: c\nspec:\n  id: {ida}\n"),
    )
    .unwrap();
    c2.pass(&mut s).unwrap();
    let cn = net(&mut s, "c").unwrap();
    assert_eq!(cn.spec.status.state, NetState::Error);
    assert_eq!(
        cn.spec.status.message,
        format!(
            "spec.id {ida} is already allocated to default/a (uid {})",
            a.metadata.create_revision
        )
    );
    assert_eq!(cn.spec.status.id, None);
    // A claim whose Network is gone (deleted behind the operator's back) is collected by a
    // leader's first pass; a live one is not.
    let mut ghost: Vec<Resource<serde_json::Value>> = vec![Resource::new(
        CLUSTER,
        NETWORK_IDS,
        "777",
        serde_json::json!({"spec": {"claimRef": {"namespace": NS, "name": "ghost", "uid": "5"}}}),
    )];
    s.write_all(&mut ghost).unwrap();
    Controller::new(Allocator::new(Range::default()), NS).pass(&mut s).unwrap();
    assert!(nid(&mut s, "777").is_none());
    assert!(nid(&mut s, &ida.to_string()).is_some());
    // The tables show it.
    let table = ctl::get(&mut s, NS, Kind::Network, None, ctl::Output::Table).unwrap();
    assert!(table.lines().any(|l| l.starts_with('c') && l.contains("Error")), "{table}");
    let table = ctl::get(&mut s, NS, Kind::NetworkId, None, ctl::Output::Table).unwrap();
    assert!(table.contains("default/a"), "{table}");
    let d = ctl::describe(&mut s, NS, Kind::NodeNetwork, &ida.to_string()).unwrap();
    assert!(d.contains("n1"), "{d}");
    let d = ctl::describe(&mut s, NS, Kind::Network, "a").unwrap();
    assert!(d.contains("Finalizers:   keelson.dev/network-id"), "{d}");
    // `get -o yaml` feeds back into apply unchanged.
    let y = ctl::get(&mut s, NS, Kind::Network, Some("a"), ctl::Output::Yaml).unwrap();
    assert_eq!(ctl::apply(&mut s, &y).unwrap(), ["network/a unchanged"]);
}

/// The allocator under contention, as a benchmark (`scripts/bench-networks`; ignored in the
/// suite): 32 allocators, a range of 20,000 IDs 90 % claimed, 1,000 claims (95 % after). Prints the claim
/// latency percentiles and the failed compares per claim; fails on a duplicate or an error.
#[test]
#[ignore = "benchmark: scripts/bench-networks"]
fn bench_claims_under_contention() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let Some((etcd, _dir)) = common::start_etcd("tn", "bench") else { return };
    let (threads, size, filled, claims) = (32usize, 20_000u32, 18_000u32, 1_000usize);
    let range = Range::new(200, 200 + size - 1).unwrap();
    let mut s = store(&etcd);
    // Every tenth ID stays free.
    let taken: Vec<u32> = (0..size).filter(|i| i % 10 != 0).map(|i| 200 + i).collect();
    assert_eq!(taken.len() as u32, filled);
    common::claim_ids_as_others(&mut s, &taken, "n");
    let left = Arc::new(AtomicUsize::new(claims));
    let started = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let mut s = store(&etcd);
            let left = left.clone();
            std::thread::spawn(move || {
                let a = Allocator::new(range);
                let mut r = rng(0xbe9c + t as u64 * 104_729);
                let mut out = Vec::new();
                let mut i = 0;
                while left
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok()
                {
                    let n = network(&mut s, &format!("b{t}-{i}"), None);
                    i += 1;
                    let t0 = Instant::now();
                    let c = a.claim(&mut s, &n, None, &mut r).unwrap();
                    out.push((c.id, t0.elapsed(), c.attempts));
                }
                out
            })
        })
        .collect();
    let mut all = Vec::new();
    for w in workers {
        all.extend(w.join().unwrap());
    }
    let wall = started.elapsed();
    let ids: BTreeSet<u32> = all.iter().map(|x| x.0).collect();
    assert_eq!(ids.len(), claims, "duplicates");
    assert!(ids.iter().all(|id| (id - 200) % 10 == 0), "a claimed ID was handed out again");
    let mut lat: Vec<_> = all.iter().map(|x| x.1).collect();
    lat.sort();
    let pct = |p: usize| lat[(lat.len() * p / 100).min(lat.len() - 1)];
    let failed: usize = all.iter().map(|x| x.2 - 1).sum();
    let worst = all.iter().map(|x| x.2 - 1).max().unwrap_or(0);
    println!(
        "{claims} claims by {threads} allocators into {size} IDs {}% claimed: wall {wall:?}, \
         p50 {:?}, p99 {:?}, max {:?}; failed compares per claim {:.2} (worst {worst}); duplicates 0",
        filled * 100 / size,
        pct(50),
        pct(99),
        lat[lat.len() - 1],
        failed as f64 / claims as f64
    );
}

/// A node's dataplane that realises everything with `prefixes` as its workloads, under
/// `vtep`, and remembers the other nodes it was given.
struct Reporter {
    vtep: std::net::IpAddr,
    prefixes: Vec<ipnet::IpNet>,
    seen: BTreeMap<u32, Vec<net::tenant::Remote>>,
}

impl Reporter {
    fn new(vtep: &str, prefixes: &[&str]) -> Self {
        let prefixes = prefixes.iter().map(|p| p.parse().unwrap()).collect();
        Self { vtep: vtep.parse().unwrap(), prefixes, seen: BTreeMap::new() }
    }
}

impl Dataplane for Reporter {
    fn apply(
        &mut self,
        want: &[NodeNetworkSpec],
        remotes: &BTreeMap<u32, Vec<net::tenant::Remote>>,
    ) -> BTreeMap<u32, Outcome> {
        self.seen = remotes.clone();
        let realised = |w: &NodeNetworkSpec| Outcome::Realised {
            prefixes: self.prefixes.clone(),
            peers: w.peered_ids.clone(),
            failed: vec![],
        };
        want.iter().map(|w| (w.id, realised(w))).collect()
    }

    fn vtep(&self) -> Option<std::net::IpAddr> {
        Some(self.vtep)
    }
}

#[test]
fn nodes_learn_each_others_vtep_and_workload_prefixes_from_the_reports() {
    let Some((etcd, _dir)) = common::start_etcd("tn", "reports") else { return };
    let mut s = store(&etcd);
    let mut c = Controller::new(Allocator::new(Range::default()), NS);
    ctl::apply(&mut s, B_ALONE).unwrap();
    c.pass(&mut s).unwrap();
    let id = net(&mut s, "b").unwrap().spec.status.id.unwrap();
    let mut n1 = Reporter::new("192.0.2.1", &["10.2.1.0/24", "fd00:2:0:1::/64"]);
    let mut n2 = Reporter::new("192.0.2.2", &["10.2.2.0/24"]);
    // n1 first sees nobody; n2 sees n1; n1 then sees n2.
    node::sync(&mut s, "n1", &mut n1).unwrap();
    assert_eq!(n1.seen[&id], []);
    node::sync(&mut s, "n2", &mut n2).unwrap();
    node::sync(&mut s, "n1", &mut n1).unwrap();
    let remote = |vtep: &str, p: &[&str]| net::tenant::Remote {
        vtep: vtep.parse().unwrap(),
        prefixes: p.iter().map(|p| p.parse().unwrap()).collect(),
    };
    assert_eq!(n2.seen[&id], [remote("192.0.2.1", &["10.2.1.0/24", "fd00:2:0:1::/64"])]);
    assert_eq!(n1.seen[&id], [remote("192.0.2.2", &["10.2.2.0/24"])]);
    let st = node_net(&mut s, id).unwrap().spec.status;
    assert_eq!(st.nodes["n1"].prefixes, ["10.2.1.0/24", "fd00:2:0:1::/64"]);
    assert_eq!(st.nodes["n1"].vtep, Some("192.0.2.1".parse().unwrap()));

    // A report written by hand (or a hostile node): junk skipped, at most 64 taken, and a
    // report without a VTEP, or not Ready, is no node to reach.
    s.modify::<Body<NodeNetworkSpec, NodeNetworkStatus>>(
        CLUSTER,
        NODE_NETWORKS,
        &id.to_string(),
        |x| {
            let mut many = vec!["junk".to_owned()];
            many.extend((0..100).map(|i| format!("10.2.{i}.0/24")));
            let mut r = x.spec.status.nodes["n2"].clone();
            r.vtep = Some("192.0.2.3".parse().unwrap());
            r.prefixes = many;
            x.spec.status.nodes.insert("n3".into(), r.clone());
            r.vtep = None;
            x.spec.status.nodes.insert("n4".into(), r.clone());
            r.vtep = Some("192.0.2.5".parse().unwrap());
            r.state = NetState::Error;
            x.spec.status.nodes.insert("n5".into(), r);
        },
    )
    .unwrap();
    node::sync(&mut s, "n1", &mut n1).unwrap();
    let seen: Vec<(String, usize)> =
        n1.seen[&id].iter().map(|r| (r.vtep.to_string(), r.prefixes.len())).collect();
    assert_eq!(seen, [("192.0.2.2".into(), 1), ("192.0.2.3".into(), 63)]);
}
