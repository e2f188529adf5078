// SPDX-License-Identifier: Apache-2.0
//! Legacy `machine.network` selectors against the real kernel, in namespaces these tests
//! create: a `deviceSelector` configures every link it matches, and a bond's
//! `deviceSelectors` enslave every match and never the bond (which takes its first port's
//! MAC, and so matches a MAC glob too). Verified with the kernel's own view (`ip -j`).
#![allow(clippy::disallowed_methods)] // Tests and examples drive keelson from outside: plain threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::time::Duration;

use common::{require_full_kernel, require_root, wait_for, Netns, Node, TempDir};

/// How long a change may take to show (ten times longer under emulation, as in run_netns).
fn t() -> Duration {
    if std::env::var("KEELSON_FULL_KERNEL").as_deref() == Ok("1") {
        Duration::from_secs(90)
    } else {
        Duration::from_secs(15)
    }
}

fn write_config(dir: &TempDir, body: &str) -> std::path::PathBuf {
    let path = dir.path().join("config.yaml");
    let tmp = dir.path().join(".config.yaml.tmp");
    std::fs::write(&tmp, format!("version: v1alpha1\nmachine:\n  network:\n{body}")).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    path
}

/// `eth1`..`eth3` as veths to a peer namespace; eth1 and eth2 get MACs `02:5e:...`, eth3 not.
fn three_links() -> (Netns, Netns) {
    let (ns, peer) = (Netns::new(), Netns::new());
    for (i, (inside, outside)) in
        [("eth1", "p1"), ("eth2", "p2"), ("eth3", "p3")].iter().enumerate()
    {
        ns.veth(inside, &peer, outside);
        let mac = if *inside == "eth3" {
            "02:77:00:00:00:03".to_owned()
        } else {
            format!("02:5e:00:00:00:{:02x}", i + 1)
        };
        ns.ip(&["link", "set", inside, "address", &mac]);
    }
    (ns, peer)
}

fn link(ns: &Netns, name: &str) -> serde_json::Value {
    let links = ns.ip_json(&["-d", "link", "show"]);
    links.as_array().unwrap().iter().find(|l| l["ifname"] == name).cloned().unwrap_or_default()
}

fn is_up(l: &serde_json::Value) -> bool {
    l["flags"].as_array().is_some_and(|f| f.iter().any(|f| f == "UP"))
}

#[test]
fn device_selector_configures_every_matching_link() {
    let name = "device_selector_configures_every_matching_link";
    if !require_root(name) {
        return;
    }
    let (ns, _peer) = three_links();
    let dir = TempDir::new();
    let body =
        "    interfaces:\n      - deviceSelector: {hardwareAddr: \"02:5e:*\"}\n        mtu: 1400\n";
    let config = write_config(&dir, body);
    let node = Node::start(&ns, "", Some(&config));
    wait_for(
        "both matches at MTU 1400 and up",
        t(),
        || {
            ["eth1", "eth2"].iter().all(|n| {
                let l = link(&ns, n);
                l["mtu"] == 1400 && is_up(&l)
            })
        },
        || format!("{}\n{}", ns.ip(&["link", "show"]), node.log_text()),
    );
    assert_eq!(link(&ns, "eth3")["mtu"], 1500, "eth3 does not match");
    node.stop();
}

#[test]
fn bond_selectors_enslave_every_match_and_not_the_bond() {
    let name = "bond_selectors_enslave_every_match_and_not_the_bond";
    if !require_root(name) || !require_full_kernel(name) {
        return;
    }
    let (ns, _peer) = three_links();
    let dir = TempDir::new();
    let body = concat!(
        "    interfaces:\n",
        "      - interface: bond0\n",
        "        addresses: [10.45.0.2/24]\n",
        "        bond:\n",
        "          mode: active-backup\n",
        "          miimon: 100\n",
        "          deviceSelectors: [{hardwareAddr: \"02:5e:*\"}]\n",
    );
    let config = write_config(&dir, body);
    let node = Node::start(&ns, "", Some(&config));
    let enslaved = || {
        ["eth1", "eth2"].iter().all(|n| link(&ns, n)["master"] == "bond0")
            && ns.addresses().contains(&"bond0/10.45.0.2/24".to_owned())
    };
    wait_for("both ports in bond0", t(), enslaved, || {
        format!("{}\n{:?}\n{}", ns.ip(&["-d", "link", "show"]), ns.addresses(), node.log_text())
    });
    // The bond now carries eth1's MAC, so the selector matches it as well: later passes must
    // neither enslave it to itself nor drop a port.
    let bond = link(&ns, "bond0");
    assert_eq!(bond["address"], "02:5e:00:00:00:01", "the bond took its first port's MAC");
    std::thread::sleep(t() / 15);
    assert!(enslaved(), "{}", ns.ip(&["-d", "link", "show"]));
    let bond = link(&ns, "bond0");
    assert!(bond["master"].is_null(), "bond0 is nobody's port: {bond}");
    assert!(is_up(&bond));
    assert!(link(&ns, "eth3")["master"].is_null(), "eth3 does not match");
    node.stop();
}

#[test]
fn bridge_port_and_default_stp() {
    let name = "bridge_port_and_default_stp";
    if !require_root(name) {
        return;
    }
    let (ns, _peer) = three_links();
    let dir = TempDir::new();
    let body = concat!(
        "    interfaces:\n",
        "      - interface: br0\n",
        "        bridge: {interfaces: [eth1]}\n",
        "        addresses: [10.46.0.2/24]\n",
        "      - {interface: eth3, bridgePort: {master: br0}}\n",
    );
    let config = write_config(&dir, body);
    let node = Node::start(&ns, "", Some(&config));
    wait_for(
        "eth1 and eth3 in br0",
        t(),
        || {
            ["eth1", "eth3"].iter().all(|n| link(&ns, n)["master"] == "br0")
                && ns.addresses().contains(&"br0/10.46.0.2/24".to_owned())
        },
        || format!("{}\n{}", ns.ip(&["-d", "link", "show"]), node.log_text()),
    );
    // No `stp` in a legacy bridge: STP runs (Talos's v1alpha1 default).
    let br0 = link(&ns, "br0");
    assert_eq!(br0["linkinfo"]["info_data"]["stp_state"], 1, "{br0}");
    assert!(link(&ns, "eth2")["master"].is_null());
    node.stop();
}

const WG_PRIVATE: &str = "sPXZDmfUaPAyu0GDFi4oHh8hMJbR9Ee6lNYD7N3K2Hk=";
const WG_PEER: &str = "mhdgcLzt1OWBMLLIZvkYZfh5Nz/7ax7HhBSiNQOSAHU=";

#[test]
fn dummy_and_wireguard_devices() {
    let name = "dummy_and_wireguard_devices";
    if !require_root(name) || !require_full_kernel(name) {
        return;
    }
    let ns = Netns::new();
    let dir = TempDir::new();
    let body = format!(
        concat!(
            "    interfaces:\n",
            "      - {{interface: dummy0, dummy: true, addresses: [10.47.0.1/32]}}\n",
            "      - interface: wg0\n",
            "        addresses: [10.48.0.1/24]\n",
            "        wireguard:\n",
            "          privateKey: {private}\n",
            "          listenPort: 51999\n",
            "          firewallMark: 66\n",
            "          peers:\n",
            "            - publicKey: {peer}\n",
            "              endpoint: 192.0.2.1:51820\n",
            "              persistentKeepaliveInterval: 25s\n",
            "              allowedIPs: [10.48.0.2/32]\n",
        ),
        private = WG_PRIVATE,
        peer = WG_PEER,
    );
    let config = write_config(&dir, &body);
    let node = Node::start(&ns, "", Some(&config));
    let dump = || ns.sh(&["wg", "show", "wg0", "dump"]);
    wait_for(
        "dummy0 and wg0 with their addresses and peer",
        t(),
        || {
            let a = ns.addresses();
            a.contains(&"dummy0/10.47.0.1/32".to_owned())
                && a.contains(&"wg0/10.48.0.1/24".to_owned())
                && dump().contains(WG_PEER)
        },
        || format!("{}\n{:?}\n{}", ns.ip(&["-d", "link", "show"]), ns.addresses(), node.log_text()),
    );
    assert_eq!(link(&ns, "dummy0")["linkinfo"]["info_kind"], "dummy");
    assert_eq!(link(&ns, "wg0")["linkinfo"]["info_kind"], "wireguard");
    // `wg show dump`: the device line (private, public, port, fwmark), then one per peer
    // (public, preshared, endpoint, allowed IPs, handshake, rx, tx, keepalive).
    let dump = dump();
    let mut lines = dump.lines();
    let device: Vec<&str> = lines.next().unwrap().split('\t').collect();
    assert_eq!((device[0], device[2], device[3]), (WG_PRIVATE, "51999", "0x42"), "{dump}");
    let peer: Vec<&str> = lines.next().unwrap().split('\t').collect();
    assert_eq!(
        (peer[0], peer[2], peer[3], peer[7]),
        (WG_PEER, "192.0.2.1:51820", "10.48.0.2/32", "25"),
        "{dump}"
    );
    let log = node.stop();
    assert!(!log.contains(WG_PRIVATE), "the private key never reaches the log");
}
