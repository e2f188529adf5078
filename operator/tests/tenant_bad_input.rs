// SPDX-License-Identifier: Apache-2.0
//! Bad tenant network input against a real etcd: each refused with its field path, and the
//! store holds nothing of the refused `apply` (a good document before the bad one is not
//! written either). A peering to a Network that does not exist is not an input error: it is
//! Pending, saying so. An ID outside `serve`'s range is the Network's `Error`; a range with
//! min > max stops `serve` before it starts.
#![allow(clippy::disallowed_methods)] // Tests drive the parts from outside.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use etcd::request::range_prefix;
use operator::ctl;
use operator::key::Layout;
use operator::networks::allocate::{Allocator, Range};
use operator::networks::controller::Controller;
use operator::networks::kinds::{NetState, Network, NETWORKS};
use operator::store::Store;

const PREFIX: &str = "/keelson-operator";

const GOOD: &str = "\
apiVersion: keelson.dev/v1alpha1
kind: Network
metadata:
  name: good
spec:
  prefixes: [10.9.0.0/16]
---
";

fn bad(name: &str, spec: &str) -> String {
    format!(
        "{GOOD}apiVersion: keelson.dev/v1alpha1\nkind: Network\nmetadata:\n  name: {name}\nspec:\n{spec}"
    )
}

fn keys(etcd: &etcd::local::LocalEtcd) -> usize {
    let r = etcd.client().range(&range_prefix(PREFIX.as_bytes(), 0)).unwrap();
    r.kvs.len()
}

#[test]
fn bad_networks_are_refused_by_field_path_and_nothing_is_written() {
    let Some((etcd, _dir)) = common::start_etcd("tn", "bad") else { return };
    let mut s = Store::new(etcd.client(), Layout::new(PREFIX, PREFIX.as_bytes()));
    let before = keys(&etcd);
    let cases = [
        (
            "a peering to itself",
            bad("a", "  prefixes: [10.1.0.0/16]\n  peerings:\n    - name: me\n      networkRef: {name: a}\n"),
            "spec.peerings[0].networkRef",
        ),
        (
            "overlapping prefixes",
            bad("a", "  prefixes: [10.1.0.0/16, 10.1.4.0/24]\n"),
            "spec.prefixes[1]",
        ),
        ("host bits set", bad("a", "  prefixes: [10.1.0.1/16]\n"), "spec.prefixes[0]"),
        ("not a prefix", bad("a", "  prefixes: [ten.one/16]\n"), "spec.prefixes[0]"),
        (
            "a peering prefix outside the network's",
            bad(
                "a",
                "  prefixes: [10.1.0.0/16]\n  peerings:\n    - name: to-b\n      networkRef: {name: b}\n      prefixes: [10.2.0.0/24]\n",
            ),
            "spec.peerings[0].prefixes[0]",
        ),
        (
            "overlapping peering prefixes",
            bad(
                "a",
                "  prefixes: [10.1.0.0/16]\n  peerings:\n    - name: to-b\n      networkRef: {name: b}\n      prefixes: [10.1.0.0/17, 10.1.0.0/24]\n",
            ),
            "spec.peerings[0].prefixes[1]",
        ),
        ("an ID beyond 24 bits", bad("a", "  id: 16777216\n"), "spec.id"),
        ("ID 0", bad("a", "  id: 0\n"), "spec.id"),
    ];
    for (what, doc, path) in cases {
        let e = ctl::apply(&mut s, &doc).expect_err(what).to_string();
        assert!(e.contains(path), "{what}: {e}");
        // One line, the path, and no echo of the whole document.
        assert!(!e.contains('\n') && !e.contains("good"), "{what}: {e}");
        assert_eq!(keys(&etcd), before, "{what}: something was written");
    }
    let (nets, _) = s.list::<serde_json::Value>("default", NETWORKS).unwrap();
    assert!(nets.is_empty(), "{nets:?}");
}

#[test]
fn a_missing_peer_is_pending_and_an_id_outside_the_range_is_an_error() {
    let Some((etcd, _dir)) = common::start_etcd("tn", "pending") else { return };
    let mut s = Store::new(etcd.client(), Layout::new(PREFIX, PREFIX.as_bytes()));
    let docs = "\
apiVersion: keelson.dev/v1alpha1
kind: Network
metadata:
  name: lonely
spec:
  prefixes: [10.1.0.0/16]
  peerings:
    - name: to-ghost
      networkRef: {name: ghost}
---
apiVersion: keelson.dev/v1alpha1
kind: Network
metadata:
  name: far
spec:
  id: 5000
";
    ctl::apply(&mut s, docs).unwrap();
    let mut c = Controller::new(Allocator::new(Range::new(200, 299).unwrap()), "default");
    c.pass(&mut s).unwrap();
    let lonely: Network = s.get("default", NETWORKS, "lonely").unwrap().unwrap();
    let p = &lonely.spec.status.peerings[0];
    assert_eq!(p.state, NetState::Pending, "{:?}", lonely.spec.status);
    assert!(p.prefixes.is_empty(), "{:?}", lonely.spec.status);
    assert!(
        lonely.spec.status.message.contains("to-ghost: Network default/ghost does not exist"),
        "{:?}",
        lonely.spec.status
    );
    let far: Network = s.get("default", NETWORKS, "far").unwrap().unwrap();
    assert_eq!(far.spec.status.state, NetState::Error, "{:?}", far.spec.status);
    assert!(
        far.spec.status.message.contains("spec.id 5000 is outside the allowed range 200..=299"),
        "{:?}",
        far.spec.status
    );
    assert_eq!(far.spec.status.id, None);
}

#[test]
fn serve_refuses_a_range_with_min_above_max() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_keelson-operator"))
        .args(["serve", "--min-vni", "300", "--max-vni", "299"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--min-vni 300 and --max-vni 299"), "{err}");
    for args in [["--min-vni", "0"], ["--max-vni", "16777216"]] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_keelson-operator"))
            .arg("serve")
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
    }
}
