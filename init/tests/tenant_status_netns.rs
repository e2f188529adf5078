// SPDX-License-Identifier: Apache-2.0
//! `keelson get networks` against `keelson run` in a namespace this test creates, the tenant
//! agent's status file written by hand (the agent itself needs VRF and VXLAN: the VM suite's
//! `operator/tests/tenant_node_status.rs` runs it). The node shows each network and its
//! peers, `--watch` sees a peer go back to Pending, a bad file (bad field, too large, a FIFO)
//! is one log line naming what is wrong and the networks shown before stay, a removed file
//! removes them, and a removed and re-made directory is followed again.
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
use std::time::{Duration, Instant};

use common::{keelson, require_root, wait_for, Netns, Node};

const T: Duration = Duration::from_secs(20);

/// Where the node reads the agent's status, under its root.
const STATUS: &str = "run/keelson/tenant-networks.json";

/// Write the status file as the agent does: a temporary file renamed over it.
fn write_status(root: &Path, text: &str) {
    let path = root.join(STATUS);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
}

/// Two peered networks; `peer` is network 300's state of its peer 301.
fn two_networks(peer: &str) -> String {
    format!(
        r#"{{"version": 1, "node": "n1", "networks": [
  {{"id": 300, "state": "Ready", "vrf": "tvrf300", "vxlan": "tvx300", "vni": 300,
    "table": 268435756, "vtep": "192.0.2.1", "prefixes": ["10.1.2.0/24"],
    "peers": [{{"id": 301, "state": "{peer}", "prefixes": ["10.2.0.0/16"]}}]}},
  {{"id": 301, "state": "Ready", "vrf": "tvrf301", "vxlan": "tvx301", "vni": 301,
    "table": 268435757, "peers": [{{"id": 300, "state": "Ready", "prefixes": ["10.1.0.0/16"]}}]}}
]}}"#
    )
}

fn get(sock: &str, args: &[&str]) -> String {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--socket", sock]);
    let (ok, out, err) = keelson(&all);
    assert!(ok, "keelson {all:?}: {err}");
    out
}

#[test]
fn get_networks_shows_the_agents_status_and_survives_a_bad_file() {
    if !require_root("get_networks_shows_the_agents_status_and_survives_a_bad_file") {
        return;
    }
    let ns = Netns::new();
    ns.ip(&["link", "set", "lo", "up"]);
    let node = Node::start_api(&ns, "", None);
    let root = node.root.path().to_owned();
    let sock = node.api.clone().unwrap();
    wait_for("the API socket", T, || sock.exists(), || node.log_text());
    let sock = sock.display().to_string();
    // No file yet: no networks, and the kind is known by each of its names.
    for name in ["networks", "tenantnetworks", "tenantnetworkstatus"] {
        assert_eq!(get(&sock, &[name, "-o", "yaml"]).trim(), "", "{name}");
    }

    write_status(&root, &two_networks("Ready"));
    wait_for(
        "two networks",
        T,
        || get(&sock, &["networks", "-o", "yaml"]).matches("state: Ready").count() == 4,
        || get(&sock, &["networks", "-o", "yaml"]),
    );
    let yaml = get(&sock, &["networks", "-o", "yaml"]);
    println!("{yaml}");
    for want in [
        "type: TenantNetworkStatuses.net.keelson.dev",
        "id: '300'",
        "vrf: tvrf300",
        "vxlan: tvx300",
        "table: 268435756",
        "vtep: 192.0.2.1",
        "- 10.1.2.0/24",
        "- 10.2.0.0/16",
        "- 10.1.0.0/16",
    ] {
        assert!(yaml.contains(want), "{want} in\n{yaml}");
    }
    let table = get(&sock, &["networks"]);
    println!("{table}");
    let header = table.lines().next().unwrap();
    for col in ["STATE", "VRF", "VXLAN", "TABLE", "PREFIXES", "PEERS"] {
        assert!(header.contains(col), "{col} in {header}");
    }
    let row = table.lines().find(|l| l.contains("tvrf300")).unwrap_or_default();
    for cell in ["Ready", "tvx300", "268435756", "10.1.2.0/24", "301:Ready"] {
        assert!(row.split_whitespace().any(|c| c == cell), "{cell} in {row}");
    }
    let one = get(&sock, &["networks", "301", "-o", "yaml"]);
    assert!(one.contains("vrf: tvrf301") && !one.contains("tvrf300"), "{one}");

    // A watch sees 301 go back to Pending on 300.
    let mut watch = Command::new(env!("CARGO_BIN_EXE_keelson"))
        .args(["get", "networks", "--watch", "-o", "json", "--socket", &sock])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<serde_json::Value>();
    let stdout = watch.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines() {
            let Ok(l) = l else { return };
            let _ = tx.send(serde_json::from_str(&l).unwrap());
        }
    });
    let wait_event = |what: &str, f: &dyn Fn(&serde_json::Value) -> bool| {
        let end = Instant::now() + T;
        while let Ok(v) = rx.recv_timeout(end.saturating_duration_since(Instant::now())) {
            if f(&v) {
                return v;
            }
        }
        panic!("no event: {what}\n{}", node.log_text());
    };
    // The watch lists what is there first.
    wait_event("300 listed", &|v| v["resource"]["metadata"]["id"] == "300");
    write_status(&root, &two_networks("Pending"));
    let v = wait_event("300's peer Pending", &|v| {
        v["event"] == "updated"
            && v["resource"]["metadata"]["id"] == "300"
            && v["resource"]["spec"]["peers"][0]["state"] == "Pending"
    });
    assert_eq!(v["resource"]["spec"]["peers"][0]["id"], 301, "{v}");

    // A bad file: one line naming the field; what was shown stays.
    let bad = two_networks("Ready").replace("\"10.2.0.0/16\"", "\"10.2.0.0/99\"");
    write_status(&root, &bad);
    let field = "networks[0].peers[0].prefixes[0]: \"10.2.0.0/99\" is not a CIDR prefix";
    wait_for("the bad file logged", T, || node.log_text().contains(field), || node.log_text());
    // Rewritten bad again (as the agent does each round): not logged again.
    write_status(&root, &format!("{bad}\n"));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(node.log_text().matches(field).count(), 1, "{}", node.log_text());
    let yaml = get(&sock, &["networks", "300", "-o", "yaml"]);
    assert!(yaml.contains("state: Pending") && yaml.contains("- 10.2.0.0/16"), "{yaml}");
    // Too large: refused before parsing, the networks stay.
    write_status(&root, &" ".repeat(300 * 1024));
    wait_for(
        "the large file logged",
        T,
        || node.log_text().contains("larger than the limit of 262144 bytes"),
        || node.log_text(),
    );
    assert!(get(&sock, &["networks", "-o", "yaml"]).contains("vrf: tvrf301"));
    // A FIFO in its place: refused without blocking (the node answers), the networks stay.
    let fifo = root.join("run/keelson/fifo");
    common::sh(&["mkfifo", fifo.to_str().unwrap()]);
    std::fs::rename(&fifo, root.join(STATUS)).unwrap();
    wait_for(
        "the FIFO logged",
        T,
        || node.log_text().contains("not a regular file (a FIFO)"),
        || node.log_text(),
    );
    assert!(get(&sock, &["networks", "-o", "yaml"]).contains("vrf: tvrf301"));

    // The file removed: the networks go, and the watch sees them go.
    std::fs::remove_file(root.join(STATUS)).unwrap();
    wait_event("300 destroyed", &|v| {
        v["event"] == "destroyed" && v["resource"]["metadata"]["id"] == "300"
    });
    wait_for(
        "no networks",
        T,
        || get(&sock, &["networks", "-o", "yaml"]).trim().is_empty(),
        || get(&sock, &["networks", "-o", "yaml"]),
    );
    // The directory itself removed and made again: still followed.
    std::fs::remove_dir_all(root.join("run/keelson")).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    write_status(&root, &two_networks("Ready"));
    wait_event("300 back", &|v| {
        v["event"] == "created" && v["resource"]["metadata"]["id"] == "300"
    });
    let _ = watch.kill();
    let _ = watch.wait();
    node.stop();
}
