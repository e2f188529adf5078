// SPDX-License-Identifier: Apache-2.0
//! `machine.tenantNetworks` on `keelson run` in a namespace this test creates: the node runs
//! the real `keelson-operator tenant-agent` against a real etcd in the same namespace, with
//! the command line its config says (read back from /proc), shown as the `tenant-agent`
//! service; the agent's round reaches etcd and writes its status where the node reads it; a
//! `kill -9` is followed by a restart; a config change restarts it only when its command
//! changes; `apply-config` without the key stops it and the service is gone; the key back
//! starts it again, and the node's own stop stops it. No VRF is needed: the agent realises nothing until it has networks.
#![allow(clippy::disallowed_methods)] // Tests drive keelson from outside: plain threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{keelson, require_root, wait_for, Background, Netns, Node, TempDir};

const T: Duration = Duration::from_secs(30);
const ETCD: &str = "http://127.0.0.1:2379";

/// The operator binary: `KEELSON_OPERATOR_BIN`, else beside the keelson binary (cargo builds
/// it with the workspace's tests).
fn operator_bin() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KEELSON_OPERATOR_BIN") {
        return Some(PathBuf::from(p));
    }
    let p = Path::new(env!("CARGO_BIN_EXE_keelson")).parent()?.join("keelson-operator");
    p.is_file().then_some(p)
}

/// A worker `w-1` on eth0, time sync off; `tenant` is the `tenantNetworks` body (none: no key).
fn config(path: &Path, tenant: Option<&str>) {
    let mut text = "version: v1alpha1\nmachine:\n  time: {disabled: true}\n  network:\n    \
                    hostname: w-1\n    interfaces:\n      - interface: eth0\n        \
                    addresses: [10.79.0.2/24]\n"
        .to_owned();
    if let Some(t) = tenant {
        text.push_str("  tenantNetworks:\n");
        text.push_str(t);
    }
    std::fs::write(path, text).unwrap();
}

/// The `tenant-agent` service's status as YAML (empty when there is none).
fn service(sock: &str) -> String {
    let (_, out, _) = keelson(&["get", "services", "tenant-agent", "-o", "yaml", "--socket", sock]);
    out
}

/// Its pid while running.
fn running_pid(sock: &str) -> Option<u32> {
    let yaml = service(sock);
    if !yaml.contains("state: running") {
        return None;
    }
    yaml.lines().find_map(|l| l.trim().strip_prefix("pid: ")).and_then(|p| p.parse().ok())
}

fn cmdline(pid: u32) -> Vec<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    raw.split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

#[test]
fn the_node_runs_the_tenant_agent_restarts_it_and_stops_it_when_the_key_goes() {
    if !require_root("the_node_runs_the_tenant_agent_restarts_it_and_stops_it_when_the_key_goes") {
        return;
    }
    let Some(agent) = operator_bin() else {
        testkit::skip_or_fail("no keelson-operator binary (cargo build -p keelson-operator)");
        return;
    };
    if !Command::new("etcd").arg("--version").output().is_ok_and(|o| o.status.success()) {
        testkit::skip_or_fail("no etcd binary (Debian: etcd-server)");
        return;
    }
    let dir = TempDir::new();
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.ip(&["link", "set", "lo", "up"]);
    ns.veth("eth0", &peer, "up0");
    let data = dir.path().join("etcd");
    let etcd = Background::start(
        &ns,
        &[
            "etcd",
            "--name",
            "t",
            "--data-dir",
            data.to_str().unwrap(),
            "--listen-client-urls",
            ETCD,
            "--advertise-client-urls",
            ETCD,
            "--listen-peer-urls",
            "http://127.0.0.1:2380",
            "--initial-advertise-peer-urls",
            "http://127.0.0.1:2380",
            "--initial-cluster",
            "t=http://127.0.0.1:2380",
            "--unsafe-no-fsync",
        ],
        dir.path().join("etcd.log"),
    );

    let path = dir.path().join("config.yaml");
    let tenant = format!(
        "    agent: {}\n    etcdEndpoints: [\"{ETCD}\"]\n    prefix: /tenant-test\n    \
         vxlanPort: 4790\n",
        agent.display()
    );
    config(&path, Some(&tenant));
    let node = Node::start_api(&ns, "", Some(&path));
    let sock = node.api.clone().unwrap();
    wait_for("the API socket", T, || sock.exists(), || node.log_text());
    let sock = sock.display().to_string();
    let root = node.root.path().to_owned();
    let context = || format!("{}\n{}\n{}", service(&sock), node.log_text(), etcd.text());

    // Running, with the command line the config says, and listed as a service.
    wait_for("the agent running", T, || running_pid(&sock).is_some(), context);
    let first = running_pid(&sock).unwrap();
    let status_file = root.join("run/keelson/tenant-networks.json");
    let want = [
        agent.display().to_string(),
        "tenant-agent".into(),
        "--node".into(),
        "w-1".into(),
        "--status-file".into(),
        status_file.display().to_string(),
        "--etcd-endpoints".into(),
        ETCD.into(),
        "--prefix".into(),
        "/tenant-test".into(),
        "--vxlan-port".into(),
        "4790".into(),
    ];
    assert_eq!(cmdline(first), want, "{}", context());
    let (ok, out, err) = keelson(&["services", "--socket", &sock]);
    assert!(ok, "{err}");
    let row = out.lines().find(|l| l.split_whitespace().nth(1) == Some("tenant-agent"));
    assert!(row.is_some_and(|r| r.contains(" Running ")), "{out}");
    let (ok, out, err) = keelson(&["service", "tenant-agent", "--socket", &sock]);
    assert!(ok, "{err}");
    let rows: Vec<Vec<&str>> = out.lines().map(|l| l.split_whitespace().collect()).collect();
    assert!(rows.contains(&vec!["ID", "tenant-agent"]), "{out}");
    assert!(rows.contains(&vec!["STATE", "Running"]), "{out}");
    // Its round reached etcd and wrote where the node reads: an empty list, no networks.
    wait_for("the agent's status file", T, || status_file.exists(), context);
    let written = std::fs::read_to_string(&status_file).unwrap();
    println!("{written}");
    assert!(written.contains("\"node\"") && written.contains("w-1"), "{written}");

    // Killed: started again (after the first backoff), a new process with the same line.
    common::sh(&["kill", "-9", &first.to_string()]);
    wait_for("the agent restarted", T, || running_pid(&sock).is_some_and(|p| p != first), context);
    let second = running_pid(&sock).unwrap();
    assert_eq!(cmdline(second), want);
    let yaml = service(&sock);
    println!("{yaml}");
    assert!(yaml.contains("starts: 2") && yaml.contains("SIGKILL"), "{yaml}");
    assert!(node.log_text().contains("started tenant-agent"), "{}", node.log_text());

    // A config change that leaves its command alone leaves it running; one that changes it
    // restarts it with the new line.
    let changed = dir.path().join("changed.yaml");
    config(&changed, Some(&tenant));
    let text = std::fs::read_to_string(&changed).unwrap().replace("/24]", "/24, 10.79.0.3/24]");
    std::fs::write(&changed, text).unwrap();
    let apply = |file: &Path| {
        let (ok, out, err) = keelson(&["apply-config", file.to_str().unwrap(), "--socket", &sock]);
        assert!(ok, "{out}{err}");
    };
    apply(&changed);
    wait_for(
        "the second address",
        T,
        || ns.ip(&["addr", "show", "eth0"]).contains("10.79.0.3/24"),
        context,
    );
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(running_pid(&sock), Some(second), "{}", context());
    assert!(service(&sock).contains("starts: 2"), "{}", context());
    config(&changed, Some(&tenant.replace("4790", "4791")));
    apply(&changed);
    wait_for(
        "the agent restarted on its new port",
        T,
        || running_pid(&sock).is_some_and(|p| p != second && cmdline(p).contains(&"4791".into())),
        context,
    );
    let third = running_pid(&sock).unwrap();
    assert!(node.log_text().contains("stopping tenant-agent: its command changed"));

    // The key removed: the agent stops and the service is gone.
    let without = dir.path().join("without.yaml");
    config(&without, None);
    apply(&without);
    wait_for("the service gone", T, || service(&sock).trim().is_empty(), context);
    let (_, out, _) = keelson(&["services", "--socket", &sock]);
    assert!(!out.contains("tenant-agent"), "{out}");
    assert!(!Path::new(&format!("/proc/{third}")).exists(), "pid {third} still there");

    // The key back: started again; the node's stop stops it too (and exits 0).
    apply(&changed);
    wait_for("the agent back", T, || running_pid(&sock).is_some_and(|p| p != third), context);
    let fourth = running_pid(&sock).unwrap();
    node.stop();
    assert!(!Path::new(&format!("/proc/{fourth}")).exists(), "pid {fourth} outlived the node");
    drop(etcd);
}
