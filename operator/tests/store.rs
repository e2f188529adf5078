// SPDX-License-Identifier: Apache-2.0
//! The resource store on a real etcd (a private member per test, loopback, temp dir). Without
//! the `etcd` binary a test is skipped, or fails when `KEELSON_REQUIRE_ROOT=1`.
#![allow(clippy::disallowed_methods)] // Tests drive the client from outside: plain threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::time::{Duration, Instant};

use common::Dir;
use etcd::local::LocalEtcd;
use operator::key::Layout;
use operator::store::{EventKind, Phase, Ref, Resource, Store, StoreError};
use serde::{Deserialize, Serialize};

fn start(test: &str) -> Option<(LocalEtcd, Dir)> {
    common::start_etcd("op", test)
}

/// A typed kind, as the operator's kinds will be.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct MachineSpec {
    address: String,
    stage: String,
}

const NS: &str = "default";
const KIND: &str = "Machines.keelson.dev";

fn store(etcd: &LocalEtcd) -> Store {
    Store::new(etcd.client(), Layout::new("/keelson-operator", b"test-salt"))
}

fn machine(id: &str, stage: &str) -> Resource<MachineSpec> {
    Resource::new(NS, KIND, id, MachineSpec { address: "10.0.0.5".into(), stage: stage.into() })
}

#[test]
fn create_update_destroy_with_versions_from_etcd() {
    let Some((etcd, _dir)) = start("crud") else { return };
    let mut s = store(&etcd);
    let mut m = machine("node/a", "BOOTING");
    m.metadata.owner_refs.push(Ref {
        namespace: NS.into(),
        kind: "Clusters".into(),
        id: "c1".into(),
    });
    s.create(&mut m).unwrap();
    assert_eq!(m.metadata.version, 1);
    assert!(matches!(s.create(&mut machine("node/a", "X")), Err(StoreError::AlreadyExists(_))));

    let mut got: Resource<MachineSpec> = s.get(NS, KIND, "node/a").unwrap().unwrap();
    assert_eq!(got.spec, m.spec);
    assert_eq!(got.metadata.version, 1);
    assert_eq!(got.metadata.owner_refs, m.metadata.owner_refs);
    got.spec.stage = "RUNNING".into();
    s.update(&mut got).unwrap();
    assert_eq!(got.metadata.version, 2);

    // The key hides the ID; the raw value has no version in it (etcd's is the only one).
    let key = s.layout().key(NS, KIND, "node/a");
    let raw = s.client().get(&key).unwrap().unwrap();
    assert_eq!(raw.version, 2);
    assert!(!String::from_utf8_lossy(&key).contains("node"));
    let json: serde_json::Value = serde_json::from_slice(&raw.value).unwrap();
    assert!(json["metadata"].get("version").is_none(), "{json}");

    // Only the owner writes: another controller's update or destroy is refused.
    let mut owned = machine("owned", "BOOTING");
    owned.metadata.owner = "MachineController".into();
    s.create(&mut owned).unwrap();
    let mut other = owned.clone();
    other.metadata.owner = "SomeoneElse".into();
    other.spec.stage = "HIJACKED".into();
    match s.update(&mut other) {
        Err(StoreError::OwnerConflict { owner, by, .. }) => {
            assert_eq!((owner.as_str(), by.as_str()), ("MachineController", "SomeoneElse"))
        }
        other => panic!("expected an owner conflict, got {other:?}"),
    }
    assert!(matches!(
        s.destroy(NS, KIND, "owned", 1, "SomeoneElse"),
        Err(StoreError::OwnerConflict { .. })
    ));
    owned.spec.stage = "RUNNING".into();
    s.update(&mut owned).unwrap();
    s.destroy(NS, KIND, "owned", 2, "MachineController").unwrap();

    // Finalizers hold a destroy; the phase says deletion started.
    s.modify::<MachineSpec>(NS, KIND, "node/a", |r| r.metadata.finalizers.push("cleanup".into()))
        .unwrap();
    s.teardown(NS, KIND, "node/a").unwrap();
    let r: Resource<MachineSpec> = s.get(NS, KIND, "node/a").unwrap().unwrap();
    assert_eq!((r.metadata.phase, r.metadata.version), (Phase::TearingDown, 4));
    match s.destroy(NS, KIND, "node/a", 4, "") {
        Err(StoreError::PendingFinalizers { finalizers, .. }) => {
            assert_eq!(finalizers, ["cleanup"])
        }
        other => panic!("expected pending finalizers, got {other:?}"),
    }
    let r = s.modify::<MachineSpec>(NS, KIND, "node/a", |r| r.metadata.finalizers.clear()).unwrap();
    assert!(matches!(
        s.destroy(NS, KIND, "node/a", 4, ""),
        Err(StoreError::Conflict { found: 5, .. })
    ));
    s.destroy(NS, KIND, "node/a", r.metadata.version, "").unwrap();
    assert!(s.get::<MachineSpec>(NS, KIND, "node/a").unwrap().is_none());
    assert!(matches!(s.destroy(NS, KIND, "node/a", 5, ""), Err(StoreError::NotFound(_))));
    assert!(matches!(s.update(&mut got), Err(StoreError::NotFound(_))));
}

#[test]
fn a_second_writer_gets_a_conflict_and_wins_after_a_fresh_read() {
    let Some((etcd, _dir)) = start("conflict") else { return };
    let (mut a, mut b) = (store(&etcd), store(&etcd));
    a.create(&mut machine("m1", "BOOTING")).unwrap();
    let mut ra: Resource<MachineSpec> = a.get(NS, KIND, "m1").unwrap().unwrap();
    let mut rb: Resource<MachineSpec> = b.get(NS, KIND, "m1").unwrap().unwrap();
    ra.spec.stage = "INSTALLING".into();
    a.update(&mut ra).unwrap();
    rb.spec.stage = "REBOOTING".into();
    match b.update(&mut rb) {
        Err(StoreError::Conflict { expected: 1, found: 2, .. }) => {}
        other => panic!("expected a conflict, got {other:?}"),
    }
    // Nothing of B's reached etcd.
    let now: Resource<MachineSpec> = b.get(NS, KIND, "m1").unwrap().unwrap();
    assert_eq!(now.spec.stage, "INSTALLING");
    // A fresh read and a retry win.
    let mut fresh = now;
    fresh.spec.stage = "REBOOTING".into();
    b.update(&mut fresh).unwrap();
    assert_eq!(fresh.metadata.version, 3);
    let end: Resource<MachineSpec> = a.get(NS, KIND, "m1").unwrap().unwrap();
    assert_eq!((end.spec.stage.as_str(), end.metadata.version), ("REBOOTING", 3));
}

#[test]
fn list_and_a_watch_resumed_from_its_bookmark_miss_nothing() {
    let Some((etcd, _dir)) = start("watch") else { return };
    let mut s = store(&etcd);
    s.create(&mut machine("a", "BOOTING")).unwrap();
    s.create(&mut machine("b", "BOOTING")).unwrap();
    // Another kind and another namespace stay out of the list and the watch.
    s.create(&mut Resource::new(
        NS,
        "Clusters.keelson.dev",
        "c",
        MachineSpec { address: String::new(), stage: String::new() },
    ))
    .unwrap();
    s.create(&mut Resource::new(
        "other",
        KIND,
        "a",
        MachineSpec { address: String::new(), stage: String::new() },
    ))
    .unwrap();
    let (list, rev) = s.list::<MachineSpec>(NS, KIND).unwrap();
    let mut ids: Vec<_> = list.iter().map(|r| r.metadata.id.clone()).collect();
    ids.sort();
    assert_eq!(ids, ["a", "b"]);

    let mut w = s.watch_kind(NS, KIND, rev + 1).unwrap();
    s.modify::<MachineSpec>(NS, KIND, "a", |r| r.spec.stage = "RUNNING".into()).unwrap();
    let first = w.next::<MachineSpec>(Duration::from_secs(5)).unwrap().unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!(
        (first[0].kind, first[0].resource.spec.stage.as_str()),
        (EventKind::Updated, "RUNNING")
    );
    let bookmark = first[0].revision;
    drop(w);

    // While nobody watches: a create, an update, a destroy.
    let mut other = store(&etcd);
    other.create(&mut machine("c", "BOOTING")).unwrap();
    other.modify::<MachineSpec>(NS, KIND, "b", |r| r.spec.stage = "INSTALLING".into()).unwrap();
    let a: Resource<MachineSpec> = other.get(NS, KIND, "a").unwrap().unwrap();
    other.destroy(NS, KIND, "a", a.metadata.version, "").unwrap();

    let mut w = s.watch_kind(NS, KIND, bookmark + 1).unwrap();
    let mut seen = Vec::new();
    let until = Instant::now() + Duration::from_secs(10);
    while seen.len() < 3 {
        assert!(Instant::now() < until, "missing events: {seen:?}");
        if let Some(batch) = w.next::<MachineSpec>(Duration::from_secs(1)).unwrap() {
            seen.extend(batch);
        }
    }
    let got: Vec<_> = seen
        .iter()
        .map(|e| (e.kind, e.resource.metadata.id.as_str(), e.resource.spec.stage.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (EventKind::Created, "c", "BOOTING"),
            (EventKind::Updated, "b", "INSTALLING"),
            (EventKind::Destroyed, "a", "RUNNING"),
        ]
    );
    assert!(seen.windows(2).all(|p| p[0].revision < p[1].revision));
    assert!(seen[0].revision > bookmark);
}

#[test]
fn a_value_that_is_not_the_resource_its_key_names_is_refused() {
    let Some((etcd, _dir)) = start("corrupt") else { return };
    let mut s = store(&etcd);
    s.create(&mut machine("a", "BOOTING")).unwrap();
    // Copy a's value under b's key: b's reader must not take it for b.
    let a_key = s.layout().key(NS, KIND, "a");
    let b_key = s.layout().key(NS, KIND, "b");
    let value = s.client().get(&a_key).unwrap().unwrap().value;
    s.client().put(&b_key, &value, 0).unwrap();
    assert!(matches!(s.get::<MachineSpec>(NS, KIND, "b"), Err(StoreError::Corrupt { .. })));
    s.client().put(&b_key, b"\x1b[2J not json", 0).unwrap();
    match s.get::<MachineSpec>(NS, KIND, "b") {
        Err(e @ StoreError::Corrupt { .. }) => assert!(!e.to_string().contains('\u{1b}')),
        other => panic!("expected a corrupt value, got {other:?}"),
    }
    assert!(s.list::<MachineSpec>(NS, KIND).is_err());
    // A spec too large for etcd is refused before it is sent.
    let mut big = machine("big", &"x".repeat(2 << 20));
    assert!(matches!(s.create(&mut big), Err(StoreError::TooLarge { .. })));
}

#[test]
fn concurrent_writers_retrying_from_fresh_reads_lose_no_update() {
    let Some((etcd, _dir)) = start("race") else { return };
    let mut s = store(&etcd);
    let mut counter = Resource::new(NS, "Counters", "c", 0u64);
    s.create(&mut counter).unwrap();
    const WRITERS: usize = 4;
    const EACH: usize = 25;
    let conflicts = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let threads: Vec<_> = (0..WRITERS)
        .map(|_| {
            let mut s = store(&etcd);
            let conflicts = conflicts.clone();
            std::thread::spawn(move || {
                for _ in 0..EACH {
                    // Read, add one, write on the version read; a conflict means re-read.
                    loop {
                        let mut r: Resource<u64> = s.get(NS, "Counters", "c").unwrap().unwrap();
                        r.spec += 1;
                        match s.update(&mut r) {
                            Ok(()) => break,
                            Err(e) if e.is_conflict() => {
                                conflicts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            }
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let end: Resource<u64> = s.get(NS, "Counters", "c").unwrap().unwrap();
    assert_eq!(end.spec, (WRITERS * EACH) as u64, "an update was lost");
    assert_eq!(end.metadata.version, (WRITERS * EACH) as i64 + 1);
    eprintln!("{} conflicts retried", conflicts.load(std::sync::atomic::Ordering::Relaxed));
}

#[test]
fn a_write_landing_between_modifys_read_and_write_is_kept_and_the_change_made_again_on_it() {
    // Store::modify is how the operator changes what others may change too (a pool's
    // machines, a teardown): a second writer lands exactly between its read and its write.
    let Some((etcd, _dir)) = start("interleaved") else { return };
    let (mut a, mut b) = (store(&etcd), store(&etcd));
    a.create(&mut machine("m1", "BOOTING")).unwrap();
    let mut calls = Vec::new();
    let end = a
        .modify::<MachineSpec>(NS, KIND, "m1", |r| {
            calls.push((r.metadata.version, r.spec.address.clone()));
            if calls.len() == 1 {
                let mut other: Resource<MachineSpec> = b.get(NS, KIND, "m1").unwrap().unwrap();
                other.spec.address = "10.0.0.9".into();
                b.update(&mut other).unwrap();
            }
            r.spec.stage = "INSTALLING".into();
        })
        .unwrap();
    // The first change was computed on version 1 and refused; the second on the other
    // writer's version 2, which it keeps.
    assert_eq!(calls, [(1, "10.0.0.5".to_owned()), (2, "10.0.0.9".to_owned())]);
    assert_eq!(end.metadata.version, 3);
    let now: Resource<MachineSpec> = b.get(NS, KIND, "m1").unwrap().unwrap();
    assert_eq!((now.spec.address.as_str(), now.spec.stage.as_str()), ("10.0.0.9", "INSTALLING"));
    assert_eq!(now.metadata.version, 3);
}
