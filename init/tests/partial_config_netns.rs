// SPDX-License-Identifier: Apache-2.0
//! One invalid entry costs its entry, on a real node: `keelson run` in namespaces these tests
//! create applies the rest of its config file and shows what it dropped in `machinestatus`
//! (an unmet `config` condition); `apply-config` over the local API socket refuses such a
//! config whole unless `--allow-partial` is given; an over-long `--api-socket` does not keep
//! the network from being configured.
#![allow(clippy::disallowed_methods)] // Tests and examples drive keelson from outside: plain threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::time::Duration;

use common::{keelson, require_root, wait_for, Netns, Node, TempDir};

const T: Duration = Duration::from_secs(15);

/// `eth0` with a good address and an MTU no link takes, then a device whose name no link can
/// have, then a route via a gateway of the other family.
fn config_with_bad_entries(addr: &str) -> String {
    format!(
        "version: v1alpha1
machine:
  network:
    interfaces:
      - interface: eth0
        mtu: 65536
        addresses: [{addr}]
        routes:
          - network: 10.66.0.0/16
            gateway: fd00::1
      - interface: averyveryverylongname0
        dummy: true
"
    )
}

fn machine_status(node: &Node) -> serde_json::Value {
    let sock = node.api.as_ref().unwrap().display().to_string();
    let (ok, out, err) = keelson(&["machine-status", "--socket", &sock]);
    assert!(ok, "{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// The `config` condition's reason, if it is unmet.
fn config_condition(status: &serde_json::Value) -> Option<String> {
    status["unmetConditions"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == "config")
        .map(|c| c["reason"].as_str().unwrap_or_default().to_owned())
}

#[test]
fn run_applies_the_rest_and_machinestatus_names_what_was_dropped() {
    if !require_root("run_applies_the_rest_and_machinestatus_names_what_was_dropped") {
        return;
    }
    let dir = TempDir::new();
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, config_with_bad_entries("10.8.0.2/24")).unwrap();
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.veth("eth0", &peer, "up0");
    let node = Node::start_api(&ns, "", Some(&path));
    wait_for(
        "the good address applied",
        T,
        || ns.addresses().contains(&"eth0/10.8.0.2/24".to_owned()),
        || node.log_text(),
    );
    wait_for(
        "machinestatus shows the config condition",
        T,
        || {
            node.api.as_ref().unwrap().exists()
                && config_condition(&machine_status(&node)).is_some()
        },
        || node.log_text(),
    );
    let status = machine_status(&node);
    let reason = config_condition(&status).unwrap();
    assert_eq!(status["ready"], false, "{status}");
    assert!(reason.starts_with("3 invalid entries dropped, the rest applies: "), "{reason}");
    for (path, line) in [
        ("machine.network.interfaces[0].mtu", 6),
        ("machine.network.interfaces[0].routes[0].gateway", 10),
        ("machine.network.interfaces[1].interface", 11),
    ] {
        assert!(reason.contains(&format!("{path} (line {line}")), "{path}: {reason}");
    }
    // The log has one line per drop, naming the file.
    let log = node.log_text();
    let file = path.display().to_string();
    let lines: Vec<&str> =
        log.lines().filter(|l| l.contains(&file) && l.contains("(dropped ")).collect();
    assert_eq!(lines.len(), 3, "{log}");
    // The dropped MTU left the link's alone; the dropped route is not there.
    let routes = ns.sh(&["ip", "route", "show", "10.66.0.0/16"]);
    assert!(routes.trim().is_empty(), "{routes}");

    // A config with nothing wrong clears the condition.
    std::fs::write(&path, "version: v1alpha1\nmachine:\n  network:\n    interfaces:\n      - interface: eth0\n        addresses: [10.8.0.3/24]\n").unwrap();
    wait_for(
        "the fixed config applied and the condition gone",
        T,
        || {
            ns.addresses().contains(&"eth0/10.8.0.3/24".to_owned())
                && config_condition(&machine_status(&node)).is_none()
        },
        || node.log_text(),
    );
    // Swapped for garbage: the file and the parse error's position, and what runs stays.
    std::fs::write(&path, b"\x01\x02\x7fELF\x00garbage").unwrap();
    let said = format!("{file}: (document) (line 1, column 1): not YAML: ");
    wait_for("garbage reported", T, || node.log_text().contains(&said), || node.log_text());
    assert!(!node.log_text().contains("configuration is empty"));
    assert!(ns.addresses().contains(&"eth0/10.8.0.3/24".to_owned()));
    node.stop();
}

#[test]
fn apply_config_is_refused_whole_unless_partial_is_allowed() {
    if !require_root("apply_config_is_refused_whole_unless_partial_is_allowed") {
        return;
    }
    let dir = TempDir::new();
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, "version: v1alpha1\nmachine:\n  network:\n    interfaces:\n      - interface: eth0\n        addresses: [10.9.0.2/24]\n").unwrap();
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.veth("eth0", &peer, "up0");
    let node = Node::start_api(&ns, "", Some(&path));
    wait_for(
        "first config applied",
        T,
        || {
            ns.addresses().contains(&"eth0/10.9.0.2/24".to_owned())
                && node.api.as_ref().unwrap().exists()
        },
        || node.log_text(),
    );
    let sock = node.api.as_ref().unwrap().display().to_string();
    let new = dir.path().join("new.yaml");
    std::fs::write(&new, config_with_bad_entries("10.9.0.5/24")).unwrap();

    // Refused as a whole, every invalid entry named; the running config stays.
    let (ok, out, err) = keelson(&["apply-config", new.to_str().unwrap(), "--socket", &sock]);
    assert!(!ok, "{out}");
    for path in [
        "machine.network.interfaces[0].mtu (line 6",
        "machine.network.interfaces[0].routes[0].gateway (line 10",
        "machine.network.interfaces[1].interface (line 11",
    ] {
        assert!(err.contains(path), "{path}: {err}");
    }
    assert!(err.contains("nothing applied; --allow-partial applies the rest"), "{err}");
    std::thread::sleep(Duration::from_millis(500));
    let a = ns.addresses();
    assert!(
        a.contains(&"eth0/10.9.0.2/24".to_owned()) && !a.contains(&"eth0/10.9.0.5/24".to_owned()),
        "{a:?}"
    );

    // Asked for: the rest applies, and the answer lists what was dropped.
    let (ok, out, err) =
        keelson(&["apply-config", new.to_str().unwrap(), "--allow-partial", "--socket", &sock]);
    assert!(ok, "{out}{err}");
    assert_eq!(out.matches("dropped: ").count(), 3, "{out}");
    assert!(out.contains("dropped: machine.network.interfaces[0].mtu (line 6"), "{out}");
    wait_for(
        "partial config applied",
        T,
        || {
            let a = ns.addresses();
            a.contains(&"eth0/10.9.0.5/24".to_owned())
                && !a.contains(&"eth0/10.9.0.2/24".to_owned())
        },
        || node.log_text(),
    );
    let status = machine_status(&node);
    let reason = config_condition(&status).unwrap_or_default();
    assert!(reason.starts_with("3 invalid entries dropped"), "{status}");
    node.stop();
}

#[test]
fn an_over_long_api_socket_is_reported_once_and_the_network_is_configured() {
    if !require_root("an_over_long_api_socket_is_reported_once_and_the_network_is_configured") {
        return;
    }
    let dir = TempDir::new();
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, "version: v1alpha1\nmachine:\n  network:\n    interfaces:\n      - interface: eth0\n        addresses: [10.10.0.2/24]\n").unwrap();
    let long = dir.path().join(format!("{}.sock", "s".repeat(120)));
    let long_arg = long.display().to_string();
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.veth("eth0", &peer, "up0");
    let node = Node::start_args(&ns, "", Some(&path), &["--api-socket", &long_arg]);
    wait_for(
        "address applied without the API",
        T,
        || ns.addresses().contains(&"eth0/10.10.0.2/24".to_owned()),
        || node.log_text(),
    );
    let log = node.stop();
    let said: Vec<&str> = log.lines().filter(|l| l.contains("a Unix socket path may be")).collect();
    assert_eq!(said.len(), 1, "{log}");
    assert!(said[0].contains(&long_arg) && said[0].contains("the API is not served"), "{log}");
    assert!(!long.exists());
}
