// SPDX-License-Identifier: Apache-2.0
//! Talos's gRPC machine API against `keelson run` in namespaces these tests create, driven
//! by clients nobody here wrote (tests/data/talos_api.py: the PyPI Talos bindings over
//! grpclib, grpcio, the h2 library): the local socket, maintenance mode over TLS without a
//! client certificate, mutual TLS with each role, streams, and hostile clients.
#![allow(clippy::disallowed_methods)] // Tests drive keelson from outside: plain threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{
    gen_config as gen, keelson_in as keelson, require_root, wait_for, Netns, Node, TempDir,
};

const T: Duration = Duration::from_secs(20);

/// The Python client (the PyPI Talos bindings and grpcio), in tests/data.
const SCRIPT: &str = "talos_api.py";

/// Run a scenario of the Python client inside `ns`.
fn scenario(ns: &Netns, node: &Node, args: &[&str]) -> String {
    common::python_scenario(ns, node, SCRIPT, args)
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// The `.proto` subset in talos-api compiles and has the field numbers of Talos's own
/// (the PyPI bindings); no namespace needed.
#[test]
fn the_proto_subset_has_talos_field_numbers() {
    let protos = concat!(env!("CARGO_MANIFEST_DIR"), "/../talos-api/proto");
    let out = Command::new("python3")
        .args([&format!("{}/tests/data/{SCRIPT}", env!("CARGO_MANIFEST_DIR")), "protos", protos])
        .current_dir("/")
        .output()
        .unwrap();
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains("ok protos"), "{text}");
}

#[test]
fn the_local_socket_speaks_grpc() {
    if !require_root("the_local_socket_speaks_grpc") {
        return;
    }
    let ns = Netns::new();
    ns.ip(&["link", "set", "lo", "up"]);
    let node = Node::start_api(&ns, "", None);
    let sock = node.api.clone().unwrap();
    wait_for("the API socket", T, || sock.exists(), || node.log_text());
    println!("{}", scenario(&ns, &node, &["local", &s(&sock)]));
    // And keelson's own client, on the same socket.
    let (ok, out, err) = keelson(&ns, &["version", "--socket", &s(&sock)]);
    assert!(ok, "{out}{err}");
    node.stop();
}

#[test]
fn a_client_that_stops_reading_a_stream_is_dropped_and_others_are_served() {
    if !require_root("a_client_that_stops_reading_a_stream_is_dropped_and_others_are_served") {
        return;
    }
    let ns = Netns::new();
    ns.ip(&["link", "set", "lo", "up"]);
    let node = Node::start_api(&ns, "", None);
    let sock = node.api.clone().unwrap();
    wait_for("the API socket", T, || sock.exists(), || node.log_text());
    println!("{}", scenario(&ns, &node, &["stall", &s(&sock)]));
    let log = node.stop();
    assert!(log.contains("dropping a stream whose client stopped reading"), "{log}");
}

const AT: &str = "127.0.0.1:50000";

/// Maintenance mode over TLS without a certificate, the apply that ends it, then mutual TLS
/// with each role, and a reboot.
#[test]
fn maintenance_then_mutual_tls_with_roles() {
    if !require_root("maintenance_then_mutual_tls_with_roles") {
        return;
    }
    let dir = TempDir::new();
    let ours = gen(&dir, "grpc");
    let ns = Netns::new();
    ns.ip(&["link", "set", "lo", "up"]);
    let node = Node::start_api_args(&ns, "", None, &["--api-listen", AT]);
    wait_for(
        "maintenance mode",
        T,
        || node.log_text().contains("maintenance certificate SHA256 fingerprint"),
        || node.log_text(),
    );
    let config = ours.join("machine.yaml");
    println!("{}", scenario(&ns, &node, &["maintenance", AT, &s(&config)]));
    wait_for("mutual TLS", T, || node.log_text().contains("API: mutual TLS"), || node.log_text());
    let admin = s(&ours.join("keelsonconfig"));
    let reader = s(&ours.join("keelsonconfig.reader"));
    println!("{}", scenario(&ns, &node, &["configured", AT, &admin, &reader]));
    println!("{}", scenario(&ns, &node, &["reboot", AT, &admin]));
    wait_for(
        "the node stopped",
        T,
        || node.log_text().contains("stopped (Reboot)"),
        || node.log_text(),
    );
}

/// A supervised kubelet (a shell that notes each start) in `ServiceList` and `Events`, and
/// `ServiceRestart` starting it again.
#[test]
fn service_list_events_and_restart_of_the_kubelet() {
    if !require_root("service_list_events_and_restart_of_the_kubelet") {
        return;
    }
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
    let sock = node.api.clone().unwrap();
    wait_for("the kubelet started", T, || starts.exists(), || node.log_text());
    println!("{}", scenario(&ns, &node, &["kubelet", &s(&sock), &s(&starts)]));
    let log = node.stop();
    assert!(log.contains("restarting kubelet"), "{log}");
}
