// SPDX-License-Identifier: Apache-2.0
//! The admin kubeconfig (`Kubeconfig`, `keelson kubeconfig`) of a control-plane node in a
//! namespace, checked by tests/data/talos_kubeconfig.py (grpcio, tarfile, `cryptography`);
//! a worker refuses it.
#![allow(clippy::disallowed_methods)] // Tests drive keelson from outside.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::time::Duration;

use common::{keelson, require_root, wait_for, Netns, Node, TempDir};

const T: Duration = Duration::from_secs(20);
const SCRIPT: &str = "talos_kubeconfig.py";

/// A node of `kind` (`controlplane`, `worker`) with a Kubernetes CA the script made.
fn node(kind: &str, dir: &TempDir) -> (Netns, Netns, Node) {
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.veth("eth0", &peer, "up0");
    ns.ip(&["link", "set", "lo", "up"]);
    let config = dir.path().join(format!("{kind}.yaml"));
    let ca = dir.path().join("ca").display().to_string();
    let out = std::process::Command::new("python3")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/talos_kubeconfig.py"))
        .args(["config", &config.display().to_string(), &ca, kind])
        .current_dir("/")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let node = Node::start_api(&ns, "", Some(&config));
    let sock = node.api.clone().unwrap();
    wait_for("the API socket", T, || sock.exists(), || node.log_text());
    (ns, peer, node)
}

#[test]
fn a_control_plane_issues_the_admin_kubeconfig_and_a_worker_refuses() {
    if !require_root("a_control_plane_issues_the_admin_kubeconfig_and_a_worker_refuses") {
        return;
    }
    let dir = TempDir::new();
    let (ns, _peer, cp) = node("controlplane", &dir);
    let sock = cp.api.clone().unwrap().display().to_string();
    let file = dir.path().join("out").join("kubeconfig");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    // An existing file with a wider mode ends up 0600.
    std::fs::write(&file, "old").unwrap();
    let path = file.display().to_string();
    let (ok, out, err) = keelson(&["kubeconfig", &path, "--socket", &sock]);
    assert!(ok, "{out}{err}\n{}", cp.log_text());
    let ca = dir.path().join("ca").display().to_string();
    println!("{}", common::python_scenario(&ns, &cp, SCRIPT, &["check", &sock, &ca, &path]));
    let log = cp.stop();
    assert!(log.contains("admin kubeconfig issued from cluster.ca"), "{log}");
    let (ns, _peer, worker) = node("worker", &dir);
    let sock = worker.api.clone().unwrap().display().to_string();
    println!("{}", common::python_scenario(&ns, &worker, SCRIPT, &["worker", &sock]));
    let (ok, _, err) = keelson(&["kubeconfig", &path, "--socket", &sock]);
    assert!(!ok && err.contains("only available on control plane nodes"), "{err}");
    // `keelson bootstrap` says the worker's refusal as the node gave it.
    let (ok, _, err) = keelson(&["bootstrap", "--socket", &sock]);
    assert!(!ok && err.contains("FailedPrecondition") && err.contains("control plane"), "{err}");
    worker.stop();
}
