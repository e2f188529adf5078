// SPDX-License-Identifier: Apache-2.0
//! The local API against `keelson run --api-socket` in namespaces these tests create: the CLI
//! and raw socket clients, checked against the kernel's own view (`ip -j`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{require_root, wait_for, Netns, Node, TempDir};

const T: Duration = Duration::from_secs(15);

fn write_config(dir: &TempDir, name: &str, addrs: &str) -> PathBuf {
    let path = dir.path().join(name);
    let tmp = dir.path().join(format!(".{name}.tmp"));
    let body = format!(
        "version: v1alpha1\nmachine:\n  network:\n    interfaces:\n      - interface: eth0\n        addresses: [{addrs}]\n"
    );
    std::fs::write(&tmp, body).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    path
}

fn keelson(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_keelson")).args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn sock(node: &Node) -> String {
    node.api.as_ref().unwrap().display().to_string()
}

/// Addresses from the API as `link/addr`, sorted (the same shape as `ip`).
fn api_addresses(node: &Node) -> Vec<String> {
    let (ok, out, err) = keelson(&["get", "addresses", "-o", "json", "--socket", &sock(node)]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let mut a: Vec<String> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{}/{}",
                r["spec"]["linkName"].as_str().unwrap(),
                r["spec"]["address"].as_str().unwrap()
            )
        })
        .collect();
    a.sort();
    a
}

fn ip_addresses(ns: &Netns) -> Vec<String> {
    let mut a: Vec<String> = ns
        .addresses()
        .iter()
        .map(|s| {
            let mut p = s.splitn(3, '/');
            let (l, ad, len) = (p.next().unwrap(), p.next().unwrap(), p.next().unwrap());
            format!("{l}/{ad}/{len}")
        })
        .collect();
    a.sort();
    a
}

fn request(path: &Path, line: &[u8]) -> String {
    let mut s = UnixStream::connect(path).unwrap();
    s.set_read_timeout(Some(T)).unwrap();
    s.write_all(line).unwrap();
    let mut r = BufReader::new(s);
    let mut out = String::new();
    r.read_line(&mut out).unwrap();
    out
}

fn setup() -> (Netns, Netns, TempDir, Node) {
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.veth("eth0", &peer, "up0");
    let dir = TempDir::new();
    let config = write_config(&dir, "config.yaml", "10.7.0.2/24");
    let node = Node::start_api(&ns, "", Some(&config));
    wait_for(
        "config applied",
        T,
        || {
            ns.addresses().contains(&"eth0/10.7.0.2/24".to_owned())
                && node.api.as_ref().unwrap().exists()
        },
        || node.log_text(),
    );
    (ns, peer, dir, node)
}

#[test]
fn get_list_match_ip_and_cli_formats() {
    if !require_root("get_list_match_ip_and_cli_formats") {
        return;
    }
    let (ns, _peer, _dir, node) = setup();
    wait_for(
        "api matches ip",
        T,
        || api_addresses(&node) == ip_addresses(&ns),
        || format!("{:?} vs {:?}", api_addresses(&node), ip_addresses(&ns)),
    );
    let (ok, table, _) = keelson(&["get", "addresses", "--socket", &sock(&node)]);
    assert!(ok);
    assert!(table.starts_with("NODE"), "{table}");
    assert!(table.lines().next().unwrap().split_whitespace().eq([
        "NODE",
        "NAMESPACE",
        "TYPE",
        "ID",
        "VERSION",
        "ADDRESS",
        "LINK"
    ]));
    assert!(table.contains("eth0/10.7.0.2/24"), "{table}");
    let (ok, yaml, err) =
        keelson(&["get", "address", "eth0/10.7.0.2/24", "-o", "yaml", "--socket", &sock(&node)]);
    assert!(ok, "{err}");
    assert!(
        yaml.contains("node:") && yaml.contains("metadata:") && yaml.contains("spec:"),
        "{yaml}"
    );
    let (ok, yaml, _) = keelson(&["get", "addressspecs", "-o", "yaml", "--socket", &sock(&node)]);
    assert!(ok && yaml.contains("provenance:") && yaml.contains("---"), "{yaml}");
    let (ok, ex, err) =
        keelson(&["explain", "addressspec", "eth0/10.7.0.2/24", "--socket", &sock(&node)]);
    assert!(ok && ex.contains("from "), "{ex}{err}");
    let (ok, _, err) = keelson(&["get", "bogus", "--socket", &sock(&node)]);
    assert!(!ok && err.contains("known types"), "{err}");
    let (ok, _, err) = keelson(&["get", "routes", "--socket", "/nonexistent/api.sock"]);
    assert!(!ok && err.contains("/nonexistent/api.sock"), "{err}");
    let (ok, _, err) = keelson(&["get", "address", "eth0/1.2.3.4/32", "--socket", &sock(&node)]);
    assert!(!ok && err.contains("not found"), "{err}");
    node.stop();
}

#[test]
fn watch_sees_config_changes_and_apply_config() {
    if !require_root("watch_sees_config_changes_and_apply_config") {
        return;
    }
    let (ns, _peer, dir, node) = setup();
    let mut child = Command::new(env!("CARGO_BIN_EXE_keelson"))
        .args(["get", "addresses", "--watch", "-o", "json", "--socket", &sock(&node)])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<serde_json::Value>();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines() {
            let Ok(l) = l else { return };
            let _ = tx.send(serde_json::from_str(&l).unwrap());
        }
    });
    let wait_event = |event: &str, id: &str| {
        let end = Instant::now() + T;
        while let Ok(v) = rx.recv_timeout(end.saturating_duration_since(Instant::now())) {
            if v["event"] == event && v["resource"]["metadata"]["id"] == id {
                return;
            }
        }
        panic!("no {event} event for {id}\n{}", node.log_text());
    };
    wait_event("created", "eth0/10.7.0.2/24");
    write_config(&dir, "config.yaml", "10.7.0.2/24, 10.7.0.9/24");
    wait_event("created", "eth0/10.7.0.9/24");
    write_config(&dir, "config.yaml", "10.7.0.2/24");
    wait_event("destroyed", "eth0/10.7.0.9/24");

    // apply-config: dry run changes nothing and prints the diff; then it applies.
    let new = write_config(&dir, "new.yaml", "10.7.0.5/24");
    let (ok, out, err) =
        keelson(&["apply-config", new.to_str().unwrap(), "--dry-run", "--socket", &sock(&node)]);
    assert!(ok, "{err}");
    assert!(out.contains("+ added AddressSpec eth0/10.7.0.5/24"), "{out}");
    assert!(out.contains("- removed AddressSpec eth0/10.7.0.2/24"), "{out}");
    std::thread::sleep(Duration::from_millis(500));
    assert!(ns.addresses().contains(&"eth0/10.7.0.2/24".to_owned()));
    assert!(!ns.addresses().contains(&"eth0/10.7.0.5/24".to_owned()));
    let (ok, out, err) =
        keelson(&["apply-config", new.to_str().unwrap(), "--socket", &sock(&node)]);
    assert!(ok && out.contains("applied"), "{out}{err}");
    wait_for(
        "applied",
        T,
        || {
            let a = ns.addresses();
            a.contains(&"eth0/10.7.0.5/24".to_owned())
                && !a.contains(&"eth0/10.7.0.2/24".to_owned())
        },
        || node.log_text(),
    );
    wait_event("created", "eth0/10.7.0.5/24");
    // A bad config is refused with its location, and nothing changes.
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "version: v1alpha1\nmachine:\n  network:\n    interfaces: 3\n").unwrap();
    let (ok, _, err) = keelson(&["apply-config", bad.to_str().unwrap(), "--socket", &sock(&node)]);
    assert!(!ok && err.contains("line"), "{err}");
    let _ = child.kill();
    let _ = child.wait();
    node.stop();
}

#[test]
fn logs_and_follow() {
    if !require_root("logs_and_follow") {
        return;
    }
    let (_ns, _peer, dir, node) = setup();
    let (ok, out, _) = keelson(&["logs", "--socket", &sock(&node)]);
    assert!(ok && out.contains("settled"), "{out}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_keelson"))
        .args(["logs", "-f", "--socket", &sock(&node)])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    std::thread::sleep(Duration::from_millis(300));
    // A config change logs a new line ("loaded ...").
    write_config(&dir, "config.yaml", "10.7.0.3/24");
    let end = Instant::now() + T;
    let mut found = false;
    while Instant::now() < end {
        match lines.next() {
            Some(Ok(l)) if l.contains("loaded") && !out.contains(&l) || l.contains("10.7.0.3") => {
                found = true;
                break;
            }
            Some(_) => {}
            None => break,
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(found, "no followed line\n{}", node.log_text());
    node.stop();
}

#[test]
fn bad_input_and_limits() {
    if !require_root("bad_input_and_limits") {
        return;
    }
    let (ns, _peer, dir, node) = setup();
    let path = node.api.clone().unwrap();
    // Garbage: an error line, and the connection still answers.
    let mut s = UnixStream::connect(&path).unwrap();
    s.set_read_timeout(Some(T)).unwrap();
    s.write_all(b"\x00\xff\xfegarbage\n{\"op\":\"machine-status\"}\n").unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut l = String::new();
    r.read_line(&mut l).unwrap();
    assert!(l.contains("\"ok\":false"), "{l}");
    l.clear();
    r.read_line(&mut l).unwrap();
    assert!(l.contains("\"ok\":true") && l.contains("uptimeSeconds"), "{l}");

    // An over-size request: an error (or a reset) and the connection closes.
    let mut big = UnixStream::connect(&path).unwrap();
    big.set_read_timeout(Some(T)).unwrap();
    big.set_write_timeout(Some(T)).unwrap();
    let chunk = vec![b'x'; 1 << 20];
    for _ in 0..100 {
        if big.write_all(&chunk).is_err() {
            break;
        }
    }
    let mut resp = String::new();
    let _ = big.read_to_string(&mut resp);
    assert!(resp.is_empty() || resp.contains("longer than"), "{resp}");

    // Idle: a silent client is closed after 10 s, while others are served meanwhile.
    let mut idle = UnixStream::connect(&path).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let started = Instant::now();
    let waiter = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = idle.read_to_end(&mut b);
        started.elapsed()
    });
    // 200 concurrent connections, all open at once, each asks for something.
    let conns: Vec<UnixStream> = (0..200).map(|_| UnixStream::connect(&path).unwrap()).collect();
    assert!(request(&path, b"{\"op\":\"list\",\"type\":\"links\"}\n").contains("\"ok\":true"));
    for mut c in conns {
        c.set_read_timeout(Some(T)).unwrap();
        let _ = c.write_all(b"{\"op\":\"get\",\"type\":\"hostname\",\"id\":\"hostname\"}\n");
        let mut line = String::new();
        let _ = BufReader::new(c).read_line(&mut line);
        // An answer (ok or error) or a dropped connection; never a hang.
    }
    // And it keeps reconciling.
    write_config(&dir, "config.yaml", "10.7.0.8/24");
    wait_for(
        "still reconciling",
        T,
        || ns.addresses().contains(&"eth0/10.7.0.8/24".to_owned()),
        || node.log_text(),
    );
    let idle_for = waiter.join().unwrap();
    assert!(
        idle_for >= Duration::from_secs(9) && idle_for < Duration::from_secs(15),
        "{idle_for:?}"
    );

    // Non-root callers are refused by the socket's mode.
    let out = Command::new("setpriv")
        .args([
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            env!("CARGO_BIN_EXE_keelson"),
        ])
        .args(["get", "addresses", "--socket", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("Permission denied"));
    assert!(request(&path, b"{\"op\":\"machine-status\"}\n").contains("\"ok\":true"));
    node.stop();
}

#[test]
fn a_watcher_that_does_not_read_is_dropped() {
    if !require_root("a_watcher_that_does_not_read_is_dropped") {
        return;
    }
    let (ns, _peer, _dir, node) = setup();
    let path = node.api.clone().unwrap();
    let mut slow = UnixStream::connect(&path).unwrap();
    slow.write_all(b"{\"op\":\"watch\",\"type\":\"addresses\"}\n").unwrap();
    // Thousands of kernel addresses: several MiB of events for a client that reads none.
    let batch = node.root.path().join("batch");
    let lines: String = (0..12_000)
        .map(|i| {
            format!("addr add 10.{}.{}.{}/32 dev eth0\n", 100 + i / 65536, (i / 256) % 256, i % 256)
        })
        .collect();
    std::fs::write(&batch, lines).unwrap();
    ns.ip(&["-batch", batch.to_str().unwrap()]);
    wait_for(
        "the slow watcher dropped",
        Duration::from_secs(60),
        || node.log_text().contains("dropping a client that does not read"),
        || node.log_text().lines().rev().take(20).collect::<Vec<_>>().join("\n"),
    );
    // The node still answers, and the dropped connection ends.
    assert!(request(&path, b"{\"op\":\"machine-status\"}\n").contains("\"ok\":true"));
    slow.set_read_timeout(Some(T)).unwrap();
    let mut sink = Vec::new();
    let _ = slow.read_to_end(&mut sink);
    node.stop();
}
