// SPDX-License-Identifier: Apache-2.0
//! The network ID allocator under contention against a three-member etcd cluster (three
//! `etcd` processes on loopback ports, no fsync): a range of 100 IDs and 120 Networks gives
//! exactly 100 claims and 20 Exhausted; an ID freed by deletion is claimed again; a release
//! racing a re-claim of its ID (forced into the window between the release's read and its
//! delete) leaves the new claim alone; 32 allocators claiming many IDs get distinct IDs in
//! range, checked with `etcdctl`, a client we did not write.
#![allow(clippy::disallowed_methods)] // Tests drive the parts from outside.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::collections::BTreeSet;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use operator::key::Layout;
use operator::networks::allocate::{self, AllocError, Allocator, Range, Released};
use operator::networks::kinds::{
    Body, Network, NetworkSpec, NetworkStatus, CLUSTER, NETWORKS, NETWORK_IDS,
};
use operator::store::{Resource, Store};

use common::Cluster;

const PREFIX: &str = "/keelson-operator";
const NS: &str = "default";

impl Cluster {
    pub fn store(&self) -> Store {
        Store::new(self.client(), Layout::new(PREFIX, PREFIX.as_bytes()))
    }

    /// Every NetworkID's (name, claimRef name) as `etcdctl get --prefix` shows them.
    pub fn etcdctl_ids(&self) -> Vec<(u32, String)> {
        let layout = Layout::new(PREFIX, PREFIX.as_bytes());
        let prefix = String::from_utf8(layout.kind_prefix(CLUSTER, NETWORK_IDS)).unwrap();
        let out = Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={}", self.urls.join(",")))
            .args(["get", "--prefix", &prefix, "--print-value-only"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                let id = v.pointer("/metadata/id").and_then(|v| v.as_str());
                let by = v.pointer("/spec/spec/claimRef/name").and_then(|v| v.as_str());
                let (Some(id), Some(by)) = (id, by) else { panic!("a NetworkID as stored: {l}") };
                let id = id.parse().unwrap();
                let by = by.to_owned();
                (id, by)
            })
            .collect()
    }
}

fn network(s: &mut Store, name: &str) -> Network {
    let mut n = Resource::new(
        NS,
        NETWORKS,
        name,
        Body {
            annotations: Default::default(),
            labels: Default::default(),
            spec: NetworkSpec::default(),
            status: NetworkStatus::default(),
        },
    );
    s.create(&mut n).unwrap();
    s.get(NS, NETWORKS, name).unwrap().unwrap()
}

fn rng(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// `threads` allocators claim an ID each for `names` Networks (made first); a Contended claim
/// is tried again (as the leader's next pass would). The outcome per Network name.
fn claim_all(
    cl: &Cluster,
    range: Range,
    threads: usize,
    names: &[String],
) -> Vec<(String, Result<u32, String>, usize)> {
    let mut s = cl.store();
    let nets: Vec<Network> = names.iter().map(|n| network(&mut s, n)).collect();
    let nets = Arc::new(nets);
    let next = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let (mut s, nets, next) = (cl.store(), nets.clone(), next.clone());
            std::thread::spawn(move || {
                let a = Allocator::new(range);
                let mut r = rng(0x5eed + t as u64 * 7919);
                let mut out = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(n) = nets.get(i) else { break };
                    let mut contended = 0;
                    let res = loop {
                        match a.claim(&mut s, n, None, &mut r) {
                            Ok(c) => break Ok(c.id),
                            Err(AllocError::Contended { .. }) if contended < 5 => contended += 1,
                            Err(e) => break Err(e.to_string()),
                        }
                    };
                    out.push((n.metadata.id.clone(), res, contended));
                }
                out
            })
        })
        .collect();
    workers.into_iter().flat_map(|w| w.join().unwrap()).collect()
}

#[test]
fn a_range_of_100_gives_100_claims_and_20_exhausted_and_a_freed_id_comes_back() {
    let Some(cl) = Cluster::start("exhaust", 3) else { return };
    let range = Range::new(200, 299).unwrap();
    let names: Vec<String> = (0..120).map(|i| format!("n{i}")).collect();
    let out = claim_all(&cl, range, 8, &names);
    let ok: BTreeSet<u32> = out.iter().filter_map(|o| o.1.as_ref().ok().copied()).collect();
    let failed: Vec<&String> = out.iter().filter_map(|o| o.1.as_ref().err()).collect();
    assert_eq!(ok.len(), 100, "{out:?}");
    assert_eq!(ok, (200..=299).collect());
    assert_eq!(failed.len(), 20, "{failed:?}");
    for e in &failed {
        assert_eq!(e.as_str(), "all IDs of 200..=299 are allocated", "{e}");
    }
    let listed = cl.etcdctl_ids();
    assert_eq!(listed.len(), 100);

    // A Network deleted (its ID released): one that found the range full claims that ID.
    let mut s = cl.store();
    let (holder, _, _) = out.iter().find(|o| o.1 == Ok(250)).unwrap();
    let held: Network = s.get(NS, NETWORKS, holder).unwrap().unwrap();
    assert_eq!(allocate::release(&mut s, &held).unwrap(), Released::Deleted(250));
    let (waiting, _, _) = out.iter().find(|o| o.1.is_err()).unwrap();
    let w: Network = s.get(NS, NETWORKS, waiting).unwrap().unwrap();
    let c = Allocator::new(range).claim(&mut s, &w, None, &mut rng(3)).unwrap();
    assert_eq!(c.id, 250);
    let by: Vec<String> =
        cl.etcdctl_ids().into_iter().filter(|(id, _)| *id == 250).map(|x| x.1).collect();
    assert_eq!(by, std::slice::from_ref(waiting));
}

#[test]
fn a_release_racing_a_reclaim_never_deletes_the_new_claim() {
    let Some(cl) = Cluster::start("race", 3) else { return };
    let range = Range::new(200, 299).unwrap();
    let a = Allocator::new(range);
    let mut s = cl.store();
    let old = network(&mut s, "old");
    let c = a.claim(&mut s, &old, Some(250), &mut rng(1)).unwrap();
    let old = c.network;
    let new = network(&mut s, "new");
    // Between the release's read of the claim (still "old") and its delete, the claim is
    // removed by hand and "new" claims the same ID: the NetworkID's version is 1 again, as
    // it was when read, only its revision differs.
    let mut raced = false;
    let r = allocate::release_with(&mut s, &old, &mut |s| {
        if !raced {
            raced = true;
            assert!(allocate::delete_id(s, "250").unwrap());
            assert_eq!(a.claim(s, &new, Some(250), &mut rng(2)).unwrap().id, 250);
        }
    })
    .unwrap();
    assert!(raced);
    assert!(matches!(r, Released::NotOurs(ref by) if by.contains("default/new")), "{r:?}");
    assert_eq!(cl.etcdctl_ids(), [(250, "new".to_owned())]);
}

fn many(count: usize, test: &str) {
    let Some(cl) = Cluster::start(test, 3) else { return };
    let range = Range::default();
    let names: Vec<String> = (0..count).map(|i| format!("m{i}")).collect();
    let t0 = Instant::now();
    let out = claim_all(&cl, range, 32, &names);
    let wall = t0.elapsed();
    let ids: Vec<u32> = out.iter().map(|o| *o.1.as_ref().unwrap()).collect();
    let distinct: BTreeSet<u32> = ids.iter().copied().collect();
    assert_eq!(distinct.len(), count, "duplicates in what the allocators returned");
    // What etcd holds, read by etcdctl: one NetworkID per Network, each in range, no ID twice,
    // and each names the Network that was told it.
    let listed = cl.etcdctl_ids();
    let listed_ids: BTreeSet<u32> = listed.iter().map(|x| x.0).collect();
    assert_eq!(listed.len(), count);
    assert_eq!(listed_ids, distinct, "0 duplicates, the same IDs");
    assert!(listed_ids.iter().all(|id| range.contains(*id)));
    let told: BTreeSet<(u32, String)> =
        out.iter().map(|o| (*o.1.as_ref().unwrap(), o.0.clone())).collect();
    assert_eq!(listed.into_iter().collect::<BTreeSet<_>>(), told);
    let retried: usize = out.iter().map(|o| o.2).sum();
    println!(
        "{count} Networks by 32 allocators on a 3-member cluster: {wall:?}, {retried} \
         Contended retries, 0 duplicates (etcdctl)"
    );
}

#[test]
fn thirty_two_allocators_claim_distinct_ids_checked_with_etcdctl() {
    many(1_000, "many");
}

/// The full count (`scripts/bench-networks`; ignored in the suite).
#[test]
#[ignore = "benchmark: scripts/bench-networks"]
fn bench_ten_thousand_networks_on_three_members() {
    let n = std::env::var("KEELSON_BENCH_NETWORKS").ok().and_then(|v| v.parse().ok());
    many(n.unwrap_or(10_000), "many10k");
}

/// IronCore's allocator, in this harness, for comparison: a random start, a wrapping scan over
/// the whole range, one create per candidate (no index, no cap), then the Network's status as
/// a second write. Returns the ID and the creates tried.
fn ironcore_claim(
    s: &mut Store,
    range: Range,
    n: &Network,
    r: &mut dyn FnMut() -> u64,
) -> (u32, usize) {
    let claim = allocate::claim_of(n);
    let mut attempts = 0;
    for id in range.from(range.pick(r())) {
        attempts += 1;
        let body = serde_json::json!({"spec": {"claimRef": claim}});
        let mut nid = Resource::new(CLUSTER, NETWORK_IDS, &id.to_string(), body);
        match s.create(&mut nid) {
            Ok(()) => {
                s.modify::<operator::networks::kinds::Body<NetworkSpec, NetworkStatus>>(
                    NS,
                    NETWORKS,
                    &n.metadata.id,
                    |x| x.spec.status.id = Some(id),
                )
                .unwrap();
                return (id, attempts);
            }
            Err(operator::store::StoreError::AlreadyExists(_)) => {}
            Err(e) => panic!("{e}"),
        }
    }
    panic!("range exhausted");
}

/// `fill` of the IDs of `range`, spread pseudo-randomly, claimed by someone else (with their
/// index keys, which only keelson's allocator reads).
fn prefill(s: &mut Store, range: Range, fill: u32) {
    let taken: Vec<u32> = (range.min()..=range.max())
        .filter(|id| {
            (u64::from(*id).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) % 100 < u64::from(fill)
        })
        .collect();
    common::claim_ids_as_others(s, &taken, "f");
}

/// One row: `threads` allocators making `claims` claims into `range` with `algo`.
fn bench_row(
    cl: &Cluster,
    algo: &'static str,
    range: Range,
    threads: usize,
    claims: usize,
    tag: &str,
) -> String {
    let mut s = cl.store();
    let nets: Vec<Network> = (0..claims).map(|i| network(&mut s, &format!("{tag}-{i}"))).collect();
    let nets = Arc::new(nets);
    let next = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let (mut s, nets, next) = (cl.store(), nets.clone(), next.clone());
            std::thread::spawn(move || {
                let a = Allocator::new(range);
                let mut r = rng(0xbe9c + t as u64 * 104_729);
                let mut out = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(n) = nets.get(i) else { break };
                    let t1 = Instant::now();
                    let (id, attempts) = if algo == "keelson" {
                        let c = a.claim(&mut s, n, None, &mut r).unwrap();
                        (c.id, c.attempts)
                    } else {
                        ironcore_claim(&mut s, range, n, &mut r)
                    };
                    out.push((id, t1.elapsed(), attempts));
                }
                out
            })
        })
        .collect();
    let all: Vec<_> = workers.into_iter().flat_map(|w| w.join().unwrap()).collect();
    let wall = t0.elapsed();
    let ids: BTreeSet<u32> = all.iter().map(|x| x.0).collect();
    assert_eq!(ids.len(), claims, "{algo}: duplicates");
    let mut lat: Vec<Duration> = all.iter().map(|x| x.1).collect();
    lat.sort();
    let pct = |p: usize| lat[(lat.len() * p / 100).min(lat.len() - 1)];
    let failed: usize = all.iter().map(|x| x.2 - 1).sum();
    format!(
        "| {algo} | {threads} | {:.0} | {:.1} | {:.1} | {:.2} |",
        claims as f64 / wall.as_secs_f64(),
        pct(50).as_secs_f64() * 1e3,
        pct(99).as_secs_f64() * 1e3,
        failed as f64 / claims as f64,
    )
}

/// A dataplane that realises whatever it is given (the bench times the store path).
struct Realise;

impl operator::networks::node::Dataplane for Realise {
    fn apply(
        &mut self,
        want: &[operator::networks::kinds::NodeNetworkSpec],
        _: &std::collections::BTreeMap<u32, Vec<net::tenant::Remote>>,
    ) -> std::collections::BTreeMap<u32, operator::networks::node::Outcome> {
        want.iter()
            .map(|w| {
                let o = operator::networks::node::Outcome::Realised {
                    prefixes: vec![],
                    peers: w.peered_ids.clone(),
                    failed: vec![],
                };
                (w.id, o)
            })
            .collect()
    }
}

/// The allocators side by side, and peering latency (`scripts/bench-networks`).
#[test]
#[ignore = "benchmark: scripts/bench-networks"]
fn bench_allocators_side_by_side() {
    use operator::networks::controller::Controller;
    use operator::networks::kinds::NetState;
    let Some(cl) = Cluster::start("bench", 3) else { return };
    let claims: usize =
        std::env::var("KEELSON_BENCH_CLAIMS").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    let size = 4_000u32;
    let mut s = cl.store();
    println!("range of {size} IDs per row, {claims} claims per row, 3-member etcd (no fsync)");
    println!("| algorithm | allocators | claims/s | p50 ms | p99 ms | failed compares/claim |");
    println!("|---|---|---|---|---|---|");
    let mut base = 1_000u32;
    for fill in [0u32, 50, 90] {
        println!("| **{fill} % filled** | | | | | |");
        for threads in [1usize, 8, 32] {
            for algo in ["keelson", "IronCore"] {
                let range = Range::new(base, base + size - 1).unwrap();
                base += size;
                prefill(&mut s, range, fill);
                let tag = format!("{algo}-{fill}-{threads}");
                println!("{}", bench_row(&cl, algo, range, threads, claims, &tag));
            }
        }
    }

    // Peering: both sides declared → Ready on two nodes, and one side removed → withdrawn,
    // through the controller's pass and each node's round (the store path, without the
    // pass and round intervals).
    let mut c = Controller::new(Allocator::new(Range::new(100_000, 200_000).unwrap()), NS);
    // A store prefix of its own: the pass lists every Network and claim, and the rows above
    // left tens of thousands.
    let mut s = Store::new(cl.client(), Layout::new("/bench-peering", b"/bench-peering"));
    let doc = |me: &str, peer: &str, octet: u8| {
        format!(
            "apiVersion: keelson.dev/v1alpha1\nkind: Network\nmetadata:\n  name: {me}\nspec:\n  \
             prefixes: [10.{octet}.0.0/16]\n  peerings:\n    - name: to-{peer}\n      \
             networkRef: {{name: {peer}}}\n"
        )
    };
    let (mut n1, mut n2) = (Realise, Realise);
    let mut ready = Vec::new();
    let mut gone = Vec::new();
    for round in 0..20 {
        let (a, b) = (format!("pa{round}"), format!("pb{round}"));
        let t0 = Instant::now();
        operator::ctl::apply(&mut s, &format!("{}---\n{}", doc(&a, &b, 1), doc(&b, &a, 2)))
            .unwrap();
        loop {
            c.pass(&mut s).unwrap();
            operator::networks::node::sync(&mut s, "n1", &mut n1).unwrap();
            operator::networks::node::sync(&mut s, "n2", &mut n2).unwrap();
            c.pass(&mut s).unwrap();
            let na: Network = s.get(NS, NETWORKS, &a).unwrap().unwrap();
            let nb: Network = s.get(NS, NETWORKS, &b).unwrap().unwrap();
            if na.spec.status.peerings[0].state == NetState::Ready
                && nb.spec.status.peerings[0].state == NetState::Ready
            {
                break;
            }
        }
        ready.push(t0.elapsed());
        let t0 = Instant::now();
        operator::ctl::delete(&mut s, NS, operator::kinds::Kind::Network, &b).unwrap();
        loop {
            c.pass(&mut s).unwrap();
            operator::networks::node::sync(&mut s, "n1", &mut n1).unwrap();
            operator::networks::node::sync(&mut s, "n2", &mut n2).unwrap();
            c.pass(&mut s).unwrap();
            let na: Network = s.get(NS, NETWORKS, &a).unwrap().unwrap();
            if na.spec.status.peerings[0].state == NetState::Pending {
                break;
            }
        }
        gone.push(t0.elapsed());
        operator::ctl::delete(&mut s, NS, operator::kinds::Kind::Network, &a).unwrap();
        c.pass(&mut s).unwrap();
    }
    ready.sort();
    gone.sort();
    println!(
        "peering, 2 nodes, 20 pairs (store path, no intervals): declared -> Ready p50 {:?} max {:?}; \
         one side deleted -> withdrawn p50 {:?} max {:?}",
        ready[10], ready[19], gone[10], gone[19]
    );
}
