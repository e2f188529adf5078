// SPDX-License-Identifier: Apache-2.0
//! Workers get their API certificate from a control plane's trustd (Talos's port 50001): a
//! control-plane `keelson run` with the CA's key and a worker `keelson run` with a
//! Talos-style worker config (`machine.ca.crt` only, `machine.token`,
//! `cluster.controlPlane.endpoint`), in namespaces joined by a veth pair. The worker's API
//! comes up with a certificate the CA signed (the admin client verifies it); a Python client (h2, ssl) checks
//! the refusals (wrong or missing token, garbage, oversized and tampered CSRs) and what is
//! signed (tests/data/trustd_client.py); a worker with the wrong token never gets one. A
//! worker renews its certificate two thirds of the way through its lifetime.
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

use common::{gen_config as gen, keelson_in, require_root, wait_for, Netns, Node, TempDir};

const T: Duration = Duration::from_secs(30);
const TOKEN: &str = "k9x2pl.q8h3m4n5b6v7c8z0";

/// `machine.ca`'s crt and key lines of a generated machine config.
fn ca_lines(machine_yaml: &Path) -> (String, String) {
    let text = std::fs::read_to_string(machine_yaml).unwrap();
    let ca: Vec<&str> = text.lines().skip_while(|l| l.trim() != "ca:").take(3).collect();
    let crt = ca.iter().find(|l| l.trim().starts_with("crt:")).unwrap().to_string();
    let key = ca.iter().find(|l| l.trim().starts_with("key:")).unwrap().to_string();
    (crt, key)
}

/// A node's config: `addrs` on eth0, eth1, ...; the control plane at `endpoint`.
fn config(
    dir: &TempDir,
    name: &str,
    addrs: &[&str],
    ca: &str,
    token: &str,
    endpoint: &str,
) -> PathBuf {
    let links: String = addrs
        .iter()
        .enumerate()
        .map(|(i, a)| format!("      - interface: eth{i}\n        addresses: [{a}/24]\n"))
        .collect();
    let body = format!(
        "version: v1alpha1\nmachine:\n  token: {token}\n  ca:\n{ca}  network:\n    hostname: {name}\n    interfaces:\n{links}  time:\n    disabled: true\ncluster:\n  controlPlane:\n    endpoint: https://{endpoint}:6443\n"
    );
    let path = dir.path().join(format!("{name}.yaml"));
    std::fs::write(&path, body).unwrap();
    path
}

#[test]
fn a_worker_gets_its_api_certificate_from_the_control_plane() {
    if !require_root("a_worker_gets_its_api_certificate_from_the_control_plane") {
        return;
    }
    let dir = TempDir::new();
    let cluster = gen(&dir, "trustd");
    let (crt, key) = ca_lines(&cluster.join("machine.yaml"));
    let (ncp, nw, nbad) = (Netns::new(), Netns::new(), Netns::new());
    // The intruder on a link of its own (the control plane's eth1).
    ncp.veth("eth0", &nw, "eth0");
    ncp.veth("eth1", &nbad, "eth0");
    for ns in [&ncp, &nw, &nbad] {
        ns.ip(&["link", "set", "lo", "up"]);
    }
    let both = format!("{crt}\n{key}\n");
    let cp_cfg = config(&dir, "cp", &["10.0.0.1", "10.0.1.1"], &both, TOKEN, "10.0.0.1");
    let only_crt = format!("{crt}\n");
    let w_cfg = config(&dir, "worker", &["10.0.0.2"], &only_crt, TOKEN, "10.0.0.1");
    let bad_cfg = config(&dir, "intruder", &["10.0.1.3"], &only_crt, "wrong.token", "10.0.1.1");
    let cp_args = ["--api-listen", "0.0.0.0:50000", "--trustd-listen", "0.0.0.0:50001"];
    let cp = Node::start_api_args(&ncp, "", Some(&cp_cfg), &cp_args);
    let w_args = ["--api-listen", "0.0.0.0:50000"];
    let worker = Node::start_api_args(&nw, "", Some(&w_cfg), &w_args);
    let intruder = Node::start_api_args(&nbad, "", Some(&bad_cfg), &w_args);
    wait_for(
        "the worker's certificate from trustd",
        T,
        || {
            worker
                .log_text()
                .lines()
                .any(|l| l.contains("signed by trustd at 10.0.0.1") && l.contains("10.0.0.2"))
        },
        || format!("{}\n--- control plane ---\n{}", worker.log_text(), cp.log_text()),
    );
    // The admin client verifies the worker's server certificate against the CA.
    let admin = cluster.join("keelsonconfig").display().to_string();
    let (ok, out, err) =
        keelson_in(&ncp, &["get", "addresses", "-n", "10.0.0.2", "--keelsonconfig", &admin]);
    assert!(ok && out.contains("10.0.0.2/24"), "{out}\n{err}\n{}", worker.log_text());

    // The refusals and what is signed, from Python.
    let ca_pem = dir.path().join("ca.pem");
    std::fs::write(&ca_pem, ca_from(&crt)).unwrap();
    let ca_arg = ca_pem.display().to_string();
    let args = ["trustd", "10.0.0.1:50001", &ca_arg, TOKEN];
    common::python_scenario(&nw, &cp, "trustd_client.py", &args);

    // The worker with the wrong token: refused, said once, no TLS API.
    wait_for(
        "the intruder told no",
        T,
        || intruder.log_text().contains("Unauthenticated"),
        || intruder.log_text(),
    );
    let log_bad = intruder.stop();
    assert!(!log_bad.contains("signed by trustd"), "{log_bad}");
    assert!(!log_bad.contains("wrong.token"), "the token was logged:\n{log_bad}");
    assert_eq!(log_bad.matches("invalid token").count(), 1, "{log_bad}");
    worker.stop();
    let log_cp = cp.stop();
    assert!(log_cp.contains("signed a certificate for worker"), "{log_cp}");
    assert!(log_cp.contains("refused a caller: invalid token"), "{log_cp}");
    assert!(log_cp.contains("refused: certificate request: bad signature"), "{log_cp}");
    assert!(!log_cp.contains(TOKEN), "the token was logged:\n{log_cp}");
}

/// With a short lifetime (`--trustd-cert-lifetime` on the control plane), the worker asks for
/// a new certificate two thirds of the way through the one it has, serving the old one until
/// the new one is in place: past the first certificate's end, the admin client still connects.
#[test]
fn a_workers_certificate_from_trustd_is_renewed_before_it_ends() {
    if !require_root("a_workers_certificate_from_trustd_is_renewed_before_it_ends") {
        return;
    }
    const LIFETIME: u64 = 18;
    let dir = TempDir::new();
    let cluster = gen(&dir, "renew");
    let (crt, key) = ca_lines(&cluster.join("machine.yaml"));
    let (ncp, nw) = (Netns::new(), Netns::new());
    ncp.veth("eth0", &nw, "eth0");
    for ns in [&ncp, &nw] {
        ns.ip(&["link", "set", "lo", "up"]);
    }
    let both = format!("{crt}\n{key}\n");
    let cp_cfg = config(&dir, "cp", &["10.0.0.1"], &both, TOKEN, "10.0.0.1");
    let w_cfg = config(&dir, "worker", &["10.0.0.2"], &format!("{crt}\n"), TOKEN, "10.0.0.1");
    let lifetime = LIFETIME.to_string();
    let cp_args = [
        "--api-listen",
        "0.0.0.0:50000",
        "--trustd-listen",
        "0.0.0.0:50001",
        "--trustd-cert-lifetime",
        &lifetime,
    ];
    let cp = Node::start_api_args(&ncp, "", Some(&cp_cfg), &cp_args);
    let worker = Node::start_api_args(&nw, "", Some(&w_cfg), &["--api-listen", "0.0.0.0:50000"]);
    let signed = |n: &Node| n.log_text().matches("signed by trustd at 10.0.0.1").count();
    let both_logs = || format!("{}\n--- control plane ---\n{}", worker.log_text(), cp.log_text());
    wait_for("the first certificate", T, || signed(&worker) >= 1, both_logs);
    let first = std::time::Instant::now();
    // Renewed at two thirds of the lifetime (12 s), well before it ends.
    wait_for("the renewed certificate", T, || signed(&worker) >= 2, both_logs);
    let renewed = first.elapsed();
    assert!(renewed < Duration::from_secs(LIFETIME - 2), "renewed after {renewed:?}");
    let log = worker.log_text();
    assert!(log.contains("two thirds through its lifetime: asking for a new one"), "{log}");
    // Past the first certificate's end: the worker serves a valid one.
    let end = Duration::from_secs(LIFETIME + 2);
    std::thread::sleep(end.saturating_sub(first.elapsed()));
    let admin = cluster.join("keelsonconfig").display().to_string();
    let (ok, out, err) =
        keelson_in(&ncp, &["get", "addresses", "-n", "10.0.0.2", "--keelsonconfig", &admin]);
    assert!(ok && out.contains("10.0.0.2/24"), "{out}\n{err}\n{}", worker.log_text());
    worker.stop();
    let log_cp = cp.stop();
    assert!(log_cp.matches("signed a certificate for worker").count() >= 2, "{log_cp}");
}

/// A worker still waiting for its first certificate (nobody answers on the control plane's
/// trustd port) does not wake its event loop on a timer: its `trustd-client` thread rings the
/// loop when it has an answer. Over 8 s of asking, the loop wakes a handful of times (the
/// retries' log lines, the network settling), not every 200 ms.
#[test]
fn a_worker_waiting_for_trustd_leaves_its_loop_asleep() {
    if !require_root("a_worker_waiting_for_trustd_leaves_its_loop_asleep") {
        return;
    }
    let dir = TempDir::new();
    let cluster = gen(&dir, "asleep");
    let (crt, _) = ca_lines(&cluster.join("machine.yaml"));
    let nw = Netns::new();
    nw.ip(&["link", "set", "lo", "up"]);
    nw.ip(&["link", "add", "eth0", "type", "veth", "peer", "name", "eth1"]);
    nw.ip(&["link", "set", "eth1", "up"]);
    // Its control plane is itself: nothing listens on 50001, every call is refused.
    let w_cfg = config(&dir, "worker", &["10.0.0.2"], &format!("{crt}\n"), TOKEN, "127.0.0.1");
    let worker = Node::start_api_args(&nw, "", Some(&w_cfg), &["--api-listen", "0.0.0.0:50000"]);
    wait_for(
        "the first refusal",
        T,
        || worker.log_text().contains("no API certificate yet"),
        || worker.log_text(),
    );
    std::thread::sleep(Duration::from_secs(8));
    let log = worker.stop();
    assert!(!log.contains("signed by trustd"), "{log}");
    let wakeups: u64 = log
        .lines()
        .find_map(|l| l.split(" event loop wakeups)").next()?.rsplit('(').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no wakeup count:\n{log}"));
    eprintln!("event loop wakeups while waiting for trustd: {wakeups}");
    // A 200 ms poll alone would be 40 and more (33 in all were counted with one).
    assert!(wakeups < 16, "{wakeups} wakeups:\n{log}");
}

/// The PEM of `machine.ca.crt`'s line (`crt: BASE64`).
fn ca_from(line: &str) -> Vec<u8> {
    use base64::Engine;
    let b64 = line.trim().trim_start_matches("crt:").trim();
    base64::engine::general_purpose::STANDARD.decode(b64).unwrap()
}
