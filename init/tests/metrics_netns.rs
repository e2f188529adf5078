// SPDX-License-Identifier: Apache-2.0
//! The Prometheus listener of `keelson run` in namespaces these tests create: scraped from
//! inside by Python (`tests/metrics_scrape.py`: prometheus_client's parsers, promtool), with
//! values checked against what the test configured, hostile clients, and the listener
//! following the config.
#![allow(clippy::disallowed_methods)] // Tests and examples drive keelson from outside: plain threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::{require_root, wait_for, Netns, Node, TempDir};

const T: Duration = Duration::from_secs(15);

fn write_config(dir: &TempDir, addrs: &str, metrics: Option<&str>) -> PathBuf {
    let path = dir.path().join("config.yaml");
    let tmp = dir.path().join(".config.yaml.tmp");
    let mut body = format!(
        "version: v1alpha1\nmachine:\n  network:\n    interfaces:\n      - interface: eth0\n        addresses: [{addrs}]\n"
    );
    if let Some(listen) = metrics {
        body.push_str(&format!("  metrics:\n    listen: \"{listen}\"\n"));
    }
    std::fs::write(&tmp, body).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    path
}

/// Run a scenario of the scrape script inside `ns`; panics with its output on failure.
fn scrape(ns: &Netns, args: &[&str], node: &Node) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/metrics_scrape.py");
    let mut all = vec!["python3", script];
    all.extend_from_slice(args);
    let out = ns.exec(&all);
    assert!(
        out.status.success(),
        "{args:?}: {}{}\nnode log:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        node.log_text()
    );
}

/// Whether something accepts TCP connections on `addr` inside `ns`.
fn listening(ns: &Netns, addr: &str) -> bool {
    let (host, port) = addr.rsplit_once(':').unwrap();
    let code = format!(
        "import socket\ntry:\n socket.create_connection(('{host}', {port}), timeout=2).close()\nexcept OSError:\n raise SystemExit(1)"
    );
    ns.exec(&["python3", "-c", &code]).status.success()
}

fn setup(metrics_in_config: Option<&str>) -> (Netns, Netns, TempDir, Node) {
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.veth("eth0", &peer, "up0");
    // The listener binds 127.0.0.1: loopback must be up before the node starts.
    ns.ip(&["link", "set", "lo", "up"]);
    let dir = TempDir::new();
    let config = write_config(&dir, "10.7.0.2/24, 10.7.0.3/24", metrics_in_config);
    let node = Node::start_args(&ns, "", Some(&config), &["--metrics-listen", "127.0.0.1:9100"]);
    wait_for(
        "config applied",
        T,
        || {
            let a = ns.addresses();
            a.contains(&"eth0/10.7.0.2/24".to_owned()) && a.contains(&"eth0/10.7.0.3/24".to_owned())
        },
        || node.log_text(),
    );
    (ns, peer, dir, node)
}

#[test]
fn metrics_parse_in_both_formats_and_match_what_the_node_runs() {
    if !require_root("metrics_parse_in_both_formats_and_match_what_the_node_runs") {
        return;
    }
    let (ns, _peer, _dir, node) = setup(None);
    wait_for("metrics listener", T, || listening(&ns, "127.0.0.1:9100"), || node.log_text());
    // Two configured addresses (plus loopback's and the link-local ones the kernel adds).
    scrape(&ns, &["scrape", "127.0.0.1:9100", "2"], &node);
    node.stop();
}

#[test]
fn grpc_calls_are_counted_by_method_and_code() {
    if !require_root("grpc_calls_are_counted_by_method_and_code") {
        return;
    }
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.veth("eth0", &peer, "up0");
    ns.ip(&["link", "set", "lo", "up"]);
    let dir = TempDir::new();
    let config = write_config(&dir, "10.7.0.2/24", None);
    let node =
        Node::start_api_args(&ns, "", Some(&config), &["--metrics-listen", "127.0.0.1:9100"]);
    let sock = node.api.clone().unwrap();
    wait_for("the API socket", T, || sock.exists(), || node.log_text());
    wait_for("metrics listener", T, || listening(&ns, "127.0.0.1:9100"), || node.log_text());
    scrape(&ns, &["api", "127.0.0.1:9100", &sock.display().to_string()], &node);
    node.stop();
}

#[test]
fn slow_and_oversized_heads_do_not_keep_a_scrape_out() {
    if !require_root("slow_and_oversized_heads_do_not_keep_a_scrape_out") {
        return;
    }
    let (ns, _peer, _dir, node) = setup(None);
    wait_for("metrics listener", T, || listening(&ns, "127.0.0.1:9100"), || node.log_text());
    scrape(&ns, &["hostile", "127.0.0.1:9100"], &node);
    // The node is still serving, and still running its controllers.
    scrape(&ns, &["scrape", "127.0.0.1:9100", "2"], &node);
    node.stop();
}

#[test]
fn the_listener_follows_the_config_and_falls_back_to_the_flag() {
    if !require_root("the_listener_follows_the_config_and_falls_back_to_the_flag") {
        return;
    }
    let (ns, _peer, dir, node) = setup(Some("127.0.0.1:9200"));
    // The config's address wins over --metrics-listen.
    wait_for("listener on 9200", T, || listening(&ns, "127.0.0.1:9200"), || node.log_text());
    assert!(!listening(&ns, "127.0.0.1:9100"), "{}", node.log_text());
    // Moved by a config change.
    write_config(&dir, "10.7.0.2/24, 10.7.0.3/24", Some("127.0.0.1:9300"));
    wait_for(
        "listener moved to 9300",
        T,
        || listening(&ns, "127.0.0.1:9300") && !listening(&ns, "127.0.0.1:9200"),
        || node.log_text(),
    );
    scrape(&ns, &["scrape", "127.0.0.1:9300", "2"], &node);
    // A config without machine.metrics: the flag's address again.
    write_config(&dir, "10.7.0.2/24, 10.7.0.3/24", None);
    wait_for(
        "listener back on the flag's 9100",
        T,
        || listening(&ns, "127.0.0.1:9100") && !listening(&ns, "127.0.0.1:9300"),
        || node.log_text(),
    );
    let log = node.stop();
    assert!(log.contains("stopped listening on 127.0.0.1:9300"), "{log}");
}
