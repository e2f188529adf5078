// SPDX-License-Identifier: Apache-2.0
//! COSI's state service (`cosi.resource.State`) against `keelson run` in a namespace this
//! test creates, driven by grpcio with stubs compiled at run time from talos-api/proto
//! (tests/data/cosi_client.py): resolving `addresses` through the resource definitions,
//! list, get, a missing ID, refused writes, a watch that sees an address the client adds
//! with `ip addr add`, `tail_events`, a watch of one missing ID; and a node in maintenance
//! mode over TLS, which serves network and `meta` reads only; a watcher that stops reading
//! while 3,000 addresses appear is dropped while another client is answered, and a client
//! with a wide-open window gets a list of them twice on one connection; with mutual TLS,
//! os:reader reads what is not sensitive and os:admin the machine config, its keys redacted.
#![allow(clippy::disallowed_methods)] // Tests drive keelson from outside: plain threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::time::Duration;

use common::{gen_config, keelson_in, require_root, wait_for, Netns, Node, TempDir};

const T: Duration = Duration::from_secs(20);

/// Run a scenario of the Python client inside `ns`.
fn scenario(ns: &Netns, node: &Node, args: &[&str]) -> String {
    common::python_scenario(ns, node, "cosi_client.py", args)
}

#[test]
fn talosctl_style_get_list_and_watch_of_addresses() {
    if !require_root("talosctl_style_get_list_and_watch_of_addresses") {
        return;
    }
    let ns = Netns::new();
    ns.ip(&["link", "set", "lo", "up"]);
    // A veth pair inside the namespace: a link the node has no config for.
    ns.ip(&["link", "add", "v0", "type", "veth", "peer", "name", "v1"]);
    ns.ip(&["link", "set", "v0", "up"]);
    ns.ip(&["link", "set", "v1", "up"]);
    let node = Node::start_api(&ns, "", None);
    let sock = node.api.clone().unwrap();
    wait_for("the API socket", T, || sock.exists(), || node.log_text());
    let sock = sock.display().to_string();
    let out = scenario(&ns, &node, &["local", &sock, "v0", "10.77.0.5/24"]);
    println!("{out}");
    assert!(out.contains("event: CREATED v0/10.77.0.5/24"), "{out}");
    node.stop();
}

#[test]
fn maintenance_mode_reads_network_and_meta_only() {
    if !require_root("maintenance_mode_reads_network_and_meta_only") {
        return;
    }
    let ns = Netns::new();
    ns.ip(&["link", "set", "lo", "up"]);
    let node = Node::start_api_args(&ns, "", None, &["--api-listen", "127.0.0.1:50000"]);
    wait_for(
        "the maintenance listener",
        T,
        || node.log_text().contains("MAINTENANCE MODE"),
        || node.log_text(),
    );
    let out = scenario(&ns, &node, &["maintenance", "127.0.0.1:50000"]);
    println!("{out}");
    node.stop();
}

#[test]
fn a_watcher_that_stops_reading_is_dropped_and_others_are_answered() {
    if !require_root("a_watcher_that_stops_reading_is_dropped_and_others_are_answered") {
        return;
    }
    let ns = Netns::new();
    ns.ip(&["link", "set", "lo", "up"]);
    ns.ip(&["link", "add", "v0", "type", "veth", "peer", "name", "v1"]);
    ns.ip(&["link", "set", "v0", "up"]);
    let node = Node::start_api(&ns, "", None);
    let sock = node.api.clone().unwrap();
    wait_for("the API socket", T, || sock.exists(), || node.log_text());
    let out = scenario(&ns, &node, &["stall", &sock.display().to_string(), "v0", "3000"]);
    println!("{out}");
    assert!(node.log_text().contains("stopped reading"), "{}", node.log_text());
    node.stop();
}

#[test]
fn reader_reads_what_is_not_sensitive_and_admin_the_rest() {
    if !require_root("reader_reads_what_is_not_sensitive_and_admin_the_rest") {
        return;
    }
    let ns = Netns::new();
    ns.ip(&["link", "set", "lo", "up"]);
    let at = "127.0.0.1:50000";
    let node = Node::start_api_args(&ns, "", None, &["--api-listen", at]);
    wait_for(
        "maintenance mode",
        T,
        || node.log_text().contains("MAINTENANCE MODE"),
        || node.log_text(),
    );
    let dir = TempDir::new();
    let gen = gen_config(&dir, "cosi");
    let machine = gen.join("machine.yaml").display().to_string();
    let (ok, out, err) = keelson_in(&ns, &["apply-config", &machine, "-n", at, "--insecure"]);
    assert!(ok, "{out}{err}");
    wait_for("mutual TLS", T, || node.log_text().contains("API: mutual TLS"), || node.log_text());
    let admin = gen.join("keelsonconfig").display().to_string();
    let reader = gen.join("keelsonconfig.reader").display().to_string();
    let out = scenario(&ns, &node, &["roles", at, &admin, &reader, &machine]);
    println!("{out}");
    node.stop();
}
