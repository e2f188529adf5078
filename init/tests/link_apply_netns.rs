// SPDX-License-Identifier: Apache-2.0
//! Link settings the kernel refuses, and links something else also writes: `keelson run`
//! against the real kernel, in namespaces these tests create.
#![allow(clippy::disallowed_methods)] // Tests and examples drive keelson from outside: plain threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{require_root, wait_for, Netns, Node, TempDir};

fn write_config(dir: &TempDir, body: &str) -> std::path::PathBuf {
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, format!("version: v1alpha1\nmachine:\n  network:\n{body}")).unwrap();
    path
}

fn link(ns: &Netns, name: &str) -> serde_json::Value {
    ns.ip_json(&["link", "show", name])[0].clone()
}

fn is_up(ns: &Netns, name: &str) -> bool {
    link(ns, name)["flags"].as_array().unwrap().iter().any(|f| f == "UP")
}

/// An MTU that passes validation but that this device cannot take (a macvlan above its
/// lower link's MTU: EINVAL) is reported, and the link's other settings still apply.
#[test]
fn refused_mtu_is_reported_and_the_link_still_comes_up() {
    if !require_root("refused_mtu_is_reported_and_the_link_still_comes_up") {
        return;
    }
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.veth("eth0", &peer, "up0");
    ns.ip(&["link", "add", "mv0", "link", "eth0", "type", "macvlan", "mode", "bridge"]);
    let dir = TempDir::new();
    let body = "    interfaces:\n      - interface: eth0\n      - interface: mv0\n        mtu: 9000\n        addresses: [10.0.0.2/24]\n";
    let config = write_config(&dir, body);
    let node = Node::start(&ns, "", Some(&config));
    wait_for(
        "mv0 up with its address despite the refused MTU",
        Duration::from_secs(15),
        || is_up(&ns, "mv0") && ns.addresses().contains(&"mv0/10.0.0.2/24".to_owned()),
        || format!("{}\n{:?}\n{}", link(&ns, "mv0"), ns.addresses(), node.log_text()),
    );
    assert_eq!(link(&ns, "mv0")["mtu"], 1500);
    std::thread::sleep(Duration::from_secs(2));
    let log = node.stop();
    let refused: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with("error") && l.contains("link mv0: mtu 9000"))
        .collect();
    assert_eq!(refused.len(), 1, "reported once (retries at debug level):\n{log}");
}

/// Two writers on one link (two `keelson run` with MTU 1400 and 1500 on `eth0`): each
/// holds the MTU once it sees it undone, says so, and backs off, so the link changes a
/// bounded number of times instead of as fast as the two can go.
#[test]
fn two_writers_on_one_mtu_back_off() {
    if !require_root("two_writers_on_one_mtu_back_off") {
        return;
    }
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.veth("eth0", &peer, "up0");
    let (dir_a, dir_b) = (TempDir::new(), TempDir::new());
    let body = |mtu: u32| {
        format!("    interfaces:\n      - interface: eth0\n        mtu: {mtu}\n        addresses: [10.0.0.2/24]\n")
    };
    let config_a = write_config(&dir_a, &body(1400));
    let config_b = write_config(&dir_b, &body(1500));
    let a = Node::start(&ns, "", Some(&config_a));
    wait_for(
        "the first writer's MTU",
        Duration::from_secs(15),
        || link(&ns, "eth0")["mtu"] == 1400,
        || a.log_text(),
    );
    std::thread::sleep(Duration::from_millis(500));

    let mut mon = Command::new("ip")
        .args(["-n", &ns.name, "-o", "monitor", "link"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let start = Instant::now();
    let b = Node::start(&ns, "", Some(&config_b));
    std::thread::sleep(Duration::from_secs(10));
    let _ = mon.kill();
    let out = mon.stdout.take().unwrap();
    let _ = mon.wait();
    let events: Vec<String> =
        BufReader::new(out).lines().map_while(Result::ok).filter(|l| l.contains("eth0")).collect();
    let elapsed = start.elapsed();
    let (log_a, log_b) = (a.stop(), b.stop());
    eprintln!("{} eth0 link events in {elapsed:?}", events.len());
    assert!(
        events.len() < 30,
        "{} link changes in {elapsed:?}:\n{}",
        events.len(),
        events.join("\n")
    );
    let fight = |log: &str| {
        log.lines()
            .filter(|l| {
                l.starts_with("warn")
                    && l.contains("link eth0: mtu")
                    && l.contains("keeps changing it")
            })
            .count()
    };
    let (fa, fb) = (fight(&log_a), fight(&log_b));
    assert!(fa + fb >= 1, "a line about the fight:\nA:\n{log_a}\nB:\n{log_b}");
    assert!(fa <= 1 && fb <= 1, "said once each:\nA:\n{log_a}\nB:\n{log_b}");
}
