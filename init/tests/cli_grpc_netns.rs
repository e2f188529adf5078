// SPDX-License-Identifier: Apache-2.0
//! The `keelson` client's verbs over Talos's gRPC API against `keelson run` in namespaces
//! these tests create: the local socket, maintenance mode over TLS (`--insecure`, ALPN h2),
//! and mutual TLS with a `keelsonconfig`. Each verb's output is the gRPC path's own layout
//! (talosctl's: `Tag:` lines, the disks columns, the services table).
#![allow(clippy::disallowed_methods)] // Tests drive keelson from outside: plain threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{
    gen_config as gen, keelson_in as keelson, require_root, wait_for, Netns, Node, TempDir,
};

const T: Duration = Duration::from_secs(20);
const AT: &str = "127.0.0.1:50000";

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// The header of `keelson disks` over gRPC: talosctl's columns.
const DISKS_HEADER: [&str; 13] = [
    "DEV",
    "MODEL",
    "SERIAL",
    "TYPE",
    "UUID",
    "WWID",
    "MODALIAS",
    "NAME",
    "SIZE",
    "BUS_PATH",
    "SUBSYSTEM",
    "READ_ONLY",
    "SYSTEM_DISK",
];

/// `keelson version`'s Server block over gRPC for the node named `node`.
fn assert_grpc_version(out: &str, node: &str, maintenance: bool) {
    let tag = format!("\tTag:         v{}\n", env!("CARGO_PKG_VERSION"));
    assert!(out.starts_with(&format!("Client:\n{tag}")), "{out}");
    let server = out.split("Server:\n").nth(1).unwrap_or_else(|| panic!("no Server: {out}"));
    assert!(server.starts_with(&format!("\tNODE:        {node}\n{tag}")), "{out}");
    assert!(server.contains("\tOS/Arch:     linux/"), "{out}");
    assert_eq!(server.contains("maintenance mode"), maintenance, "{out}");
    assert_eq!(server.contains("\tEnabled:     RBAC\n"), !maintenance, "{out}");
}

fn assert_grpc_disks(out: &str) {
    let header: Vec<&str> = out.lines().next().unwrap_or("").split_whitespace().collect();
    assert_eq!(header, DISKS_HEADER, "{out}");
}

#[test]
fn version_disks_services_dmesg_and_logs_over_the_local_socket() {
    if !require_root("version_disks_services_dmesg_and_logs_over_the_local_socket") {
        return;
    }
    let ns = Netns::new();
    ns.ip(&["link", "set", "lo", "up"]);
    let dir = TempDir::new();
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, "version: v1alpha1\nmachine:\n  network:\n    hostname: cli-grpc\n")
        .unwrap();
    let node = Node::start_api(&ns, "", Some(&config));
    let sock = s(node.api.as_ref().unwrap());
    wait_for("the API socket", T, || Path::new(&sock).exists(), || node.log_text());
    wait_for(
        "the config",
        T,
        || node.log_text().contains("machine stage: running"),
        || node.log_text(),
    );

    let (ok, out, err) = keelson(&ns, &["version", "--socket", &sock]);
    assert!(ok, "{out}{err}");
    assert_grpc_version(&out, &sock, false);

    let (ok, out, err) = keelson(&ns, &["disks", "--socket", &sock]);
    assert!(ok, "{out}{err}");
    assert_grpc_disks(&out);

    // Services: talosctl's table, machined among them, named after the socket.
    let (ok, out, err) = keelson(&ns, &["services", "--socket", &sock]);
    assert!(ok, "{out}{err}");
    let mut lines = out.lines();
    let header: Vec<&str> =
        lines.next().unwrap_or("").split("  ").filter(|c| !c.is_empty()).map(str::trim).collect();
    assert_eq!(
        header,
        ["NODE", "SERVICE", "STATE", "HEALTH", "LAST CHANGE", "LAST EVENT"],
        "{out}"
    );
    let machined = lines.find(|l| l.split_whitespace().nth(1) == Some("machined"));
    let machined = machined.unwrap_or_else(|| panic!("no machined: {out}"));
    assert!(machined.starts_with(&format!("{sock} ")), "{out}");
    assert!(machined.contains(" Running "), "{out}");
    // One service: its events, newest first.
    let (ok, out, err) = keelson(&ns, &["service", "machined", "--socket", &sock]);
    assert!(ok, "{out}{err}");
    let rows: Vec<Vec<&str>> = out.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows.first().map(Vec::as_slice), Some(&["NODE", sock.as_str()][..]), "{out}");
    assert_eq!(rows.get(1).map(Vec::as_slice), Some(&["ID", "machined"][..]), "{out}");
    let (ok, _, err) = keelson(&ns, &["service", "no-such-service", "--socket", &sock]);
    assert!(!ok && err.contains("not registered"), "{err}");

    // The node's own log over gRPC Logs (machined's), and the kernel's.
    let (ok, out, err) = keelson(&ns, &["logs", "--socket", &sock]);
    assert!(ok && out.contains("machine stage: running"), "{out}{err}");
    let (ok, out, err) = keelson(&ns, &["logs", "--tail", "1", "--socket", &sock]);
    assert!(ok && out.lines().count() == 1, "{out}{err}");
    let (ok, out, err) = keelson(&ns, &["dmesg", "--socket", &sock]);
    assert!(ok && !out.is_empty(), "{out}{err}");

    // Events: the history the node keeps (--tail -1), talosctl's columns, then it follows.
    let mut child = Command::new("ip")
        .args(["netns", "exec", &ns.name, env!("CARGO_BIN_EXE_keelson")])
        .args(["events", "--tail", "-1", "--socket", &sock])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines() {
            let Ok(l) = l else { return };
            if tx.send(l).is_err() {
                return;
            }
        }
    });
    let header = rx.recv_timeout(T).unwrap();
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        ["NODE", "ID", "EVENT", "ACTOR", "SOURCE", "MESSAGE"]
    );
    let status = loop {
        let l = rx.recv_timeout(T).unwrap_or_else(|_| panic!("no machine status event"));
        if l.contains("talos/runtime/machine.MachineStatusEvent") {
            break l;
        }
    };
    assert!(status.starts_with(&format!("{sock} ")) && status.contains(" RUNNING "), "{status}");
    // Still streaming: not exited.
    assert!(child.try_wait().unwrap().is_none());
    let _ = child.kill();
    let _ = child.wait();

    node.stop();
}

#[test]
fn maintenance_then_mutual_tls_over_grpc() {
    if !require_root("maintenance_then_mutual_tls_over_grpc") {
        return;
    }
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.veth("eth0", &peer, "up0");
    ns.ip(&["link", "set", "lo", "up"]);
    let dir = TempDir::new();
    let ours = gen(&dir, "ours");
    let node = Node::start_api_args(&ns, "", None, &["--api-listen", "[::]:50000"]);
    wait_for(
        "maintenance mode",
        T,
        || node.log_text().contains("maintenance certificate SHA256 fingerprint"),
        || node.log_text(),
    );

    // Maintenance: version and disks answer a client without a certificate; the rest is
    // refused as Talos's maintenance service refuses it.
    let (ok, out, err) = keelson(&ns, &["version", "-n", AT, "--insecure"]);
    assert!(ok, "{out}{err}");
    assert_grpc_version(&out, AT, true);
    let (ok, out, err) = keelson(&ns, &["disks", "-n", AT, "--insecure"]);
    assert!(ok, "{out}{err}");
    assert_grpc_disks(&out);
    for args in [&["services"][..], &["dmesg"], &["logs"], &["reboot"]] {
        let mut a = args.to_vec();
        a.extend_from_slice(&["-n", AT, "--insecure"]);
        let (ok, _, err) = keelson(&ns, &a);
        assert!(!ok && err.contains("maintenance mode"), "{args:?}: {err}");
    }

    // A config with the CA moves the node to mutual TLS; the admin's keelsonconfig then
    // reaches every verb over gRPC.
    let text = std::fs::read_to_string(ours.join("machine.yaml")).unwrap().replace(
        "  network: {}\n",
        "  network:\n    interfaces:\n      - interface: eth0\n        addresses: [10.7.0.2/24]\n",
    );
    let config = dir.path().join("node.yaml");
    std::fs::write(&config, text).unwrap();
    let (ok, out, err) = keelson(&ns, &["apply-config", &s(&config), "-n", AT, "--insecure"]);
    assert!(ok, "{out}{err}");
    let admin = s(&ours.join("keelsonconfig"));
    wait_for(
        "mutual TLS",
        T,
        || keelson(&ns, &["version", "-n", AT, "--keelsonconfig", &admin]).0,
        || node.log_text(),
    );
    let (ok, out, err) = keelson(&ns, &["version", "-n", AT, "--keelsonconfig", &admin]);
    assert!(ok, "{out}{err}");
    assert_grpc_version(&out, AT, false);
    let (ok, out, err) = keelson(&ns, &["services", "-n", AT, "--keelsonconfig", &admin]);
    assert!(ok && out.lines().any(|l| l.starts_with(AT) && l.contains(" machined ")), "{out}{err}");
    // Two nodes named: each answer prefixed with its node (both are this node).
    let two = format!("{AT},[::1]:50000");
    let (ok, out, err) = keelson(&ns, &["disks", "-n", &two, "--keelsonconfig", &admin]);
    assert!(ok, "{out}{err}");
    assert!(out.lines().any(|l| l.starts_with(&format!("{AT}: DEV "))), "{out}");
    assert!(out.lines().any(|l| l.starts_with("[::1]:50000: DEV ")), "{out}");
    // A reader may read but not reboot: the node's PermissionDenied, said as such.
    let reader = s(&ours.join("keelsonconfig.reader"));
    let (ok, _, err) = keelson(&ns, &["dmesg", "-n", AT, "--keelsonconfig", &reader]);
    assert!(ok, "{err}");
    let (ok, _, err) = keelson(&ns, &["reboot", "-n", AT, "--keelsonconfig", &reader]);
    assert!(!ok && err.contains("PermissionDenied"), "{err}");

    node.stop();
}
