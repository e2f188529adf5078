// SPDX-License-Identifier: Apache-2.0
//! `TimeCheck` against a time server in the test's namespace, and `ServiceStop`/
//! `ServiceStart` of a supervised kubelet (a shell that notes each start), with grpcio and the
//! PyPI Talos bindings' messages (tests/data/talos_services.py).
#![allow(clippy::disallowed_methods)] // Tests drive keelson from outside.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::time::Duration;

use common::{require_root, wait_for, Netns, Node, TempDir};

const T: Duration = Duration::from_secs(20);
const SCRIPT: &str = "talos_services.py";

#[test]
fn time_check_and_service_stop_and_start() {
    if !require_root("time_check_and_service_stop_and_start") {
        return;
    }
    // The kubelet starts once the network is ready: an address on a link.
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.veth("eth0", &peer, "up0");
    ns.ip(&["link", "set", "lo", "up"]);
    let dir = TempDir::new();
    let starts = dir.path().join("kubelet-starts");
    let config = dir.path().join("config.yaml");
    let body = format!(
        "version: v1alpha1\nmachine:\n  network:\n    hostname: node-1\n    interfaces:\n      - interface: eth0\n        addresses: [10.0.0.2/24]\n  kubelet:\n    command: [/bin/sh, -c, 'echo start >> {}; exec sleep 600']\n  time:\n    disabled: true\n",
        starts.display()
    );
    std::fs::write(&config, body).unwrap();
    let node = Node::start_api(&ns, "", Some(&config));
    let sock = node.api.clone().unwrap().display().to_string();
    wait_for("the kubelet started", T, || starts.exists(), || node.log_text());
    println!("{}", common::python_scenario(&ns, &node, SCRIPT, &["timecheck", &sock]));
    let starts = starts.display().to_string();
    println!("{}", common::python_scenario(&ns, &node, SCRIPT, &["services", &sock, &starts]));
    let log = node.stop();
    assert!(log.contains("stopping kubelet (asked through the API)"), "{log}");
    assert!(log.contains("starting kubelet (asked through the API)"), "{log}");
}
