// SPDX-License-Identifier: Apache-2.0
//! Calls for other nodes through one endpoint (`nodes`/`node` gRPC metadata, talosctl's
//! `-n a,b -e x`): two `keelson run` nodes in namespaces joined by a veth pair, driven by the
//! PyPI Talos bindings and grpcio (tests/data/talos_proxy.py).
#![allow(clippy::disallowed_methods)] // Tests drive keelson from outside.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{gen_config as gen, require_root, wait_for, Netns, Node, TempDir};

const T: Duration = Duration::from_secs(30);

/// A node's config: the cluster's `machine.ca`, a hostname, one address on eth0.
fn config(dir: &TempDir, machine_yaml: &Path, name: &str, addr: &str) -> PathBuf {
    let text = std::fs::read_to_string(machine_yaml).unwrap();
    let ca: String =
        text.lines().skip_while(|l| l.trim() != "ca:").take(3).map(|l| format!("{l}\n")).collect();
    assert!(ca.contains("crt:") && ca.contains("key:"), "{text}");
    let body = format!(
        "version: v1alpha1\nmachine:\n{ca}  network:\n    hostname: {name}\n    interfaces:\n      - interface: eth0\n        addresses: [{addr}/24]\n  time:\n    disabled: true\n"
    );
    let path = dir.path().join(format!("{name}.yaml"));
    std::fs::write(&path, body).unwrap();
    path
}

#[test]
fn version_for_two_nodes_through_one_endpoint() {
    if !require_root("version_for_two_nodes_through_one_endpoint") {
        return;
    }
    let dir = TempDir::new();
    let cluster = gen(&dir, "proxy");
    let (na, nb) = (Netns::new(), Netns::new());
    na.veth("eth0", &nb, "eth0");
    for ns in [&na, &nb] {
        ns.ip(&["link", "set", "lo", "up"]);
    }
    let (a, b) = ("10.0.0.1", "10.0.0.2");
    let machine = cluster.join("machine.yaml");
    let listen = ["--api-listen", "0.0.0.0:50000"];
    let node_a = Node::start_api_args(&na, "", Some(&config(&dir, &machine, "node-a", a)), &listen);
    let node_b = Node::start_api_args(&nb, "", Some(&config(&dir, &machine, "node-b", b)), &listen);
    for (node, addr) in [(&node_a, a), (&node_b, b)] {
        wait_for(
            "mutual TLS with the node's address",
            T,
            || {
                let log = node.log_text();
                log.lines().any(|l| l.contains("server certificate for") && l.contains(addr))
            },
            || node.log_text(),
        );
    }
    // The server certificates name the addresses once they are up.
    wait_for(
        "the address on eth0",
        T,
        || na.exec(&["ping", "-c1", "-W1", b]).status.success(),
        || node_b.log_text(),
    );
    let admin = cluster.join("keelsonconfig").display().to_string();
    let reader = cluster.join("keelsonconfig.reader").display().to_string();
    let endpoint = format!("{a}:50000");
    let sock = node_a.api.clone().unwrap().display().to_string();
    let args = ["proxy", &endpoint, a, b, &admin, &reader, &sock];
    let out = common::python_scenario(&na, &node_a, "talos_proxy.py", &args);
    println!("{out}");
    let log_a = node_a.stop();
    assert!(
        log_a.contains("proxy: /machine.MachineService/Version to 10.0.0.1, 10.0.0.2"),
        "{log_a}"
    );
    node_b.stop();
}
