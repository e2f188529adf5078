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

use common::{keelson_in as keelson, require_root, wait_for, Netns, Node};

const T: Duration = Duration::from_secs(20);

/// Run a scenario of the Python client inside `ns`; its output, which must end in
/// `ok SCENARIO`.
fn scenario(ns: &Netns, node: &Node, args: &[&str]) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/talos_api.py");
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.name, "python3", script])
        .args(args)
        // The script's directory holds no package that shadows the standard library's.
        .current_dir("/")
        .output()
        .unwrap();
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success() && text.contains(&format!("ok {}", args[0])),
        "scenario {args:?} failed:\n{text}\n--- node log ---\n{}",
        node.log_text()
    );
    text
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn the_local_socket_speaks_grpc_and_json() {
    if !require_root("the_local_socket_speaks_grpc_and_json") {
        return;
    }
    let ns = Netns::new();
    ns.ip(&["link", "set", "lo", "up"]);
    let node = Node::start_api(&ns, "", None);
    let sock = node.api.clone().unwrap();
    wait_for("the API socket", T, || sock.exists(), || node.log_text());
    let out = scenario(&ns, &node, &["local", &s(&sock)]);
    println!("{out}");
    // The JSON protocol still answers on the same socket.
    let (ok, out, err) = keelson(&ns, &["version", "--socket", &s(&sock)]);
    assert!(ok, "{out}{err}");
    node.stop();
}
