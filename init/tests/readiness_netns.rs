// SPDX-License-Identifier: Apache-2.0
//! Network readiness, and the kubelet behind it, against the real kernel and file system, in
//! namespaces these tests create.
#![allow(clippy::disallowed_methods)] // Tests and examples drive keelson from outside: plain threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::time::Duration;

use common::{require_root, wait_for, Netns, Node, TempDir};

/// `/etc/resolv.conf` cannot be written (a directory stands in its place): it is reported,
/// and after a few attempts it stops holding readiness, so the kubelet still starts.
#[test]
fn an_etc_file_that_cannot_be_written_does_not_hold_the_kubelet_forever() {
    if !require_root("an_etc_file_that_cannot_be_written_does_not_hold_the_kubelet_forever") {
        return;
    }
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.veth("eth0", &peer, "up0");
    let root = TempDir::new();
    std::fs::create_dir_all(root.path().join("etc/resolv.conf/in-the-way")).unwrap();
    let started = root.path().join("kubelet-started");
    let config = root.path().join("config.yaml");
    let body = format!(
        "version: v1alpha1\nmachine:\n  network:\n    hostname: node-1\n    interfaces:\n      - interface: eth0\n        addresses: [10.0.0.2/24]\n  kubelet:\n    command: [/bin/sh, -c, 'touch {}; exec sleep 60']\n  time:\n    disabled: true\n",
        started.display()
    );
    std::fs::write(&config, body).unwrap();
    let node = Node::start_in(&ns, "", Some(&config), root);
    wait_for(
        "the kubelet started",
        Duration::from_secs(20),
        || started.exists(),
        || node.log_text(),
    );
    let log = node.stop();
    let reported: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with("error") && l.contains("/etc/resolv.conf not written after"))
        .collect();
    assert_eq!(reported.len(), 1, "one line says readiness stopped waiting:\n{log}");
}
