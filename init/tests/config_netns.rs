// SPDX-License-Identifier: Apache-2.0
//! The config file of `keelson run` replaced by hostile things (a FIFO, `/dev/zero`, an alias
//! bomb through the API) and by a ConfigMap-style `..data` swap, in namespaces these tests
//! create. The node must keep serving its API, honour SIGTERM and stay small.
#![allow(clippy::disallowed_methods)] // Tests and examples drive keelson from outside: plain threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{keelson, require_root, sh, wait_for, Netns, Node, TempDir};
use testkit::configmap_swap;

const T: Duration = Duration::from_secs(15);
/// The most memory the node may have used at its peak after the hostile inputs.
const RSS_LIMIT_KIB: u64 = 64 * 1024;

fn config(addr: &str, mtu: u32) -> String {
    format!(
        "version: v1alpha1\nmachine:\n  network:\n    interfaces:\n      - interface: eth0\n        mtu: {mtu}\n        addresses: [{addr}]\n"
    )
}

/// Replace `path` atomically (write beside it, rename over it).
fn replace(path: &Path, body: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, body).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn mkfifo(path: &Path) {
    sh(&["mkfifo", path.to_str().unwrap()]);
}

/// The API answers (`machine-status` through the CLI).
fn api_answers(node: &Node) -> bool {
    let sock = node.api.as_ref().unwrap().display().to_string();
    keelson(&["machine-status", "--socket", &sock]).0
}

fn mtu(ns: &Netns) -> u64 {
    ns.ip_json(&["link", "show", "eth0"])[0]["mtu"].as_u64().unwrap()
}

/// `VmHWM` (peak resident set) of a process, in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// SIGTERM; the node must be gone within `T` (not merely signalled), then exit 0.
fn stop_within(node: Node) -> String {
    let pid = node.pid();
    sh(&["kill", "-TERM", &pid.to_string()]);
    let end = Instant::now() + T;
    loop {
        // Exited and not yet reaped: a zombie.
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if stat.rsplit(')').next().is_some_and(|s| s.trim_start().starts_with('Z')) {
            break;
        }
        assert!(Instant::now() < end, "SIGTERM not honoured within {T:?}:\n{}", node.log_text());
        std::thread::sleep(Duration::from_millis(100));
    }
    node.stop()
}

fn setup(config_path: &Path) -> (Netns, Netns, Node) {
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.veth("eth0", &peer, "up0");
    let node = Node::start_api(&ns, "", Some(config_path));
    wait_for(
        "API up",
        T,
        || node.api.as_ref().unwrap().exists() && api_answers(&node),
        || node.log_text(),
    );
    (ns, peer, node)
}

#[test]
fn a_fifo_as_config_never_blocks_the_node() {
    if !require_root("a_fifo_as_config_never_blocks_the_node") {
        return;
    }
    let dir = TempDir::new();
    let path = dir.path().join("config.yaml");
    // A FIFO from the start: nobody ever writes to it.
    mkfifo(&path);
    let (ns, _peer, node) = setup(&path);
    wait_for(
        "FIFO refused",
        T,
        || node.log_text().contains("not a regular file (a FIFO)"),
        || node.log_text(),
    );

    // A real config replacing it is applied...
    replace(&path, &config("10.8.0.2/24", 1400));
    wait_for(
        "config applied",
        T,
        || ns.addresses().contains(&"eth0/10.8.0.2/24".to_owned()),
        || node.log_text(),
    );
    // ...and a FIFO in its place again is refused while the node keeps what runs.
    std::fs::remove_file(&path).unwrap();
    mkfifo(&path);
    wait_for(
        "second FIFO refused",
        T,
        || node.log_text().matches("not a regular file (a FIFO)").count() >= 2,
        || node.log_text(),
    );
    assert!(api_answers(&node), "API dead:\n{}", node.log_text());
    assert!(ns.addresses().contains(&"eth0/10.8.0.2/24".to_owned()));
    stop_within(node);
}

#[test]
fn dev_zero_and_an_alias_bomb_are_refused_small() {
    if !require_root("dev_zero_and_an_alias_bomb_are_refused_small") {
        return;
    }
    let dir = TempDir::new();
    let path = dir.path().join("config.yaml");
    symlink("/dev/zero", &path).unwrap();
    let (ns, _peer, node) = setup(&path);
    wait_for(
        "/dev/zero refused",
        T,
        || node.log_text().contains("not a regular file (a character device)"),
        || node.log_text(),
    );

    // One anchored list of 1,000 addresses, reused by 999 more devices: 62 KB of text.
    let list: Vec<String> = (0..1000).map(|i| format!("10.{}.{}.1/32", i / 256, i % 256)).collect();
    let mut bomb = String::from("version: v1alpha1\nmachine:\n  network:\n    interfaces:\n");
    bomb += &format!("      - interface: eth0\n        addresses: &A [{}]\n", list.join(", "));
    for i in 1..1000 {
        bomb += &format!("      - interface: eth{i}\n        addresses: *A\n");
    }
    let bomb_path = dir.path().join("bomb.yaml");
    std::fs::write(&bomb_path, &bomb).unwrap();
    let sock = node.api.as_ref().unwrap().display().to_string();
    let (ok, _, err) =
        keelson(&["apply-config", bomb_path.to_str().unwrap(), "--dry-run", "--socket", &sock]);
    assert!(!ok);
    assert!(err.contains("alias expansion"), "{err}");

    // Through the file too.
    std::fs::remove_file(&path).unwrap();
    replace(&path, &bomb);
    wait_for(
        "bomb refused",
        T,
        || node.log_text().matches("alias expansion").count() >= 1,
        || node.log_text(),
    );
    assert!(api_answers(&node), "API dead:\n{}", node.log_text());
    let peak = peak_rss_kib(node.pid());
    assert!(peak < RSS_LIMIT_KIB, "peak RSS {peak} KiB");
    // Nothing of either was applied.
    assert!(ns.addresses().iter().all(|a| !a.starts_with("eth0/10.")), "{:?}", ns.addresses());
    stop_within(node);
}

#[test]
fn a_configmap_swap_is_applied_without_sighup() {
    if !require_root("a_configmap_swap_is_applied_without_sighup") {
        return;
    }
    let dir = TempDir::new();
    configmap_swap(dir.path(), "..2026_01_01_00_00_00.1", &config("10.9.0.2/24", 1400));
    let path: PathBuf = dir.path().join("config.yaml");
    symlink("..data/config.yaml", &path).unwrap();
    let (ns, _peer, node) = setup(&path);
    wait_for(
        "first generation applied",
        T,
        || ns.addresses().contains(&"eth0/10.9.0.2/24".to_owned()) && mtu(&ns) == 1400,
        || node.log_text(),
    );

    configmap_swap(dir.path(), "..2026_01_01_00_01_00.2", &config("10.9.0.3/24", 1300));
    wait_for(
        "second generation applied",
        T,
        || {
            let a = ns.addresses();
            a.contains(&"eth0/10.9.0.3/24".to_owned())
                && !a.contains(&"eth0/10.9.0.2/24".to_owned())
                && mtu(&ns) == 1300
        },
        || format!("{:?}\n{}", ns.addresses(), node.log_text()),
    );
    // The old generation goes, as the atomic writer removes it; a third swap still works.
    std::fs::remove_dir_all(dir.path().join("..2026_01_01_00_00_00.1")).unwrap();
    configmap_swap(dir.path(), "..2026_01_01_00_02_00.3", &config("10.9.0.4/24", 1300));
    wait_for(
        "third generation applied",
        T,
        || ns.addresses().contains(&"eth0/10.9.0.4/24".to_owned()),
        || format!("{:?}\n{}", ns.addresses(), node.log_text()),
    );
    let log = stop_within(node);
    // Each generation loaded once: events that changed nothing did not re-apply.
    assert_eq!(log.matches("loaded ").count(), 3, "{log}");
}
