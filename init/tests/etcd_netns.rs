// SPDX-License-Identifier: Apache-2.0
//! etcd on a keelson control plane: `keelson run` with `machine.type: controlplane` and an
//! etcd CA in a namespace; `Bootstrap` over the local API (grpcio and the PyPI Talos
//! bindings) starts a real etcd, which `etcdctl` (with a client certificate signed by the
//! same CA with openssl, nothing of ours) finds healthy over mutual TLS; a second
//! `Bootstrap` is refused as Talos refuses it.
#![allow(clippy::disallowed_methods)] // Tests drive keelson from outside: plain threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use base64::Engine;
use common::{require_root, sh, wait_for, Netns, Node, TempDir};

const T: Duration = Duration::from_secs(30);
const ADDR: &str = "10.77.0.2";

fn b64(path: &Path) -> String {
    base64::engine::general_purpose::STANDARD.encode(std::fs::read(path).unwrap())
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// A P-256 CA whose key is SEC1 (`EC PRIVATE KEY`, as Talos writes its etcd CA key), and a
/// client certificate from it for etcdctl, with openssl.
fn pki(dir: &Path) {
    let f = |n: &str| s(&dir.join(n));
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
    let (ca_key, ca_crt) = (f("ca.key"), f("ca.crt"));
    sh(&["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", &ca_key]);
    assert!(std::fs::read_to_string(&ca_key).unwrap().starts_with("-----BEGIN EC PRIVATE KEY"));
    sh(&[
        "openssl",
        "req",
        "-x509",
        "-key",
        &ca_key,
        "-out",
        &ca_crt,
        "-subj",
        "/O=etcd/CN=etcd",
        "-days",
        "2",
    ]);
    let mut csr = vec!["openssl", "req"];
    csr.extend(ec);
    let (client_key, client_csr, client_crt) = (f("client.key"), f("client.csr"), f("client.crt"));
    csr.extend(["-keyout", &client_key, "-out", &client_csr, "-subj", "/CN=root"]);
    sh(&csr);
    let ext = f("client.ext");
    std::fs::write(&ext, "extendedKeyUsage=clientAuth\n").unwrap();
    let serial = f("ca.srl");
    sh(&[
        "openssl",
        "x509",
        "-req",
        "-in",
        &client_csr,
        "-CA",
        &ca_crt,
        "-CAkey",
        &ca_key,
        "-CAserial",
        &serial,
        "-CAcreateserial",
        "-out",
        &client_crt,
        "-days",
        "2",
        "-extfile",
        &ext,
    ]);
}

/// A control plane `cp-1` on eth0 with `ADDR`, time sync off, an etcd CA made with openssl;
/// `extra` goes under the interface.
fn control_plane_config(dir: &TempDir, extra: &str) -> std::path::PathBuf {
    pki(dir.path());
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "version: v1alpha1\nmachine:\n  type: controlplane\n  time: {{disabled: true}}\n  \
             network:\n    hostname: cp-1\n    interfaces:\n      - interface: eth0\n        \
             addresses: [{ADDR}/24]\n{extra}cluster:\n  etcd:\n    ca:\n      crt: {}\n      \
             key: {}\n",
            b64(&dir.path().join("ca.crt")),
            b64(&dir.path().join("ca.key")),
        ),
    )
    .unwrap();
    config
}

/// Run a scenario of the Python client inside `ns`.
fn scenario(ns: &Netns, node: &Node, what: &str) -> String {
    let sock = s(node.api.as_ref().unwrap());
    common::python_scenario(ns, node, "etcd_bootstrap.py", &[what, &sock])
}

fn etcdctl_health(ns: &Netns, dir: &Path) -> (bool, String) {
    let out = ns.exec(&[
        "etcdctl",
        &format!("--endpoints=https://{ADDR}:2379"),
        &format!("--cacert={}", s(&dir.join("ca.crt"))),
        &format!("--cert={}", s(&dir.join("client.crt"))),
        &format!("--key={}", s(&dir.join("client.key"))),
        "--dial-timeout=2s",
        "endpoint",
        "health",
    ]);
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success() && text.contains("is healthy"), text)
}

#[test]
fn bootstrap_starts_etcd_with_mutual_tls_and_a_second_bootstrap_is_already_exists() {
    if !require_root(
        "bootstrap_starts_etcd_with_mutual_tls_and_a_second_bootstrap_is_already_exists",
    ) {
        return;
    }
    for tool in ["etcd", "etcdctl", "openssl"] {
        assert!(
            Command::new("sh")
                .args(["-c", &format!("command -v {tool}")])
                .status()
                .unwrap()
                .success(),
            "{tool} is missing (scripts/setup installs it)"
        );
    }
    let dir = TempDir::new();
    let config = control_plane_config(&dir, "");
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.ip(&["link", "set", "lo", "up"]);
    ns.veth("eth0", &peer, "up0");
    let node = Node::start_api(&ns, "", Some(&config));
    let sock = node.api.clone().unwrap();
    wait_for("the API socket", T, || sock.exists(), || node.log_text());
    wait_for(
        "the address",
        T,
        || ns.addresses().contains(&format!("eth0/{ADDR}/24")),
        || node.log_text(),
    );
    // Before Bootstrap nothing listens on etcd's port.
    std::thread::sleep(Duration::from_secs(1));
    assert!(!etcdctl_health(&ns, dir.path()).0, "etcd ran before Bootstrap");

    println!("{}", scenario(&ns, &node, "bootstrap"));
    let last = std::cell::RefCell::new(String::new());
    wait_for(
        "etcdctl endpoint health",
        T,
        || {
            let (ok, text) = etcdctl_health(&ns, dir.path());
            *last.borrow_mut() = text;
            ok
        },
        || format!("{}\n--- node log ---\n{}", last.borrow(), node.log_text()),
    );
    println!("{}", last.borrow());
    wait_for(
        "etcd listed healthy",
        T,
        || {
            Command::new("ip")
                .args(["netns", "exec", &ns.name, "python3"])
                .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/etcd_bootstrap.py"))
                .args(["service", &s(&sock)])
                .current_dir("/")
                .output()
                .unwrap()
                .status
                .success()
        },
        || node.log_text(),
    );
    println!("{}", scenario(&ns, &node, "service"));
    println!("{}", scenario(&ns, &node, "again"));
    // The request was kept before etcd started, and etcd wrote its member directory.
    let root = node.api.as_ref().unwrap().parent().unwrap().to_path_buf();
    assert!(root.join("state/etcd-bootstrap-requested").exists());
    assert!(root.join("var/lib/etcd/member").is_dir());
    let log = node.stop();
    assert!(log.contains("certificates issued for cp-1"), "{log}");
}

const VIP: &str = "10.77.0.100";

/// The shared VIP on a real control plane: after Bootstrap the node wins Talos's election in
/// its etcd (the key `etcdctl` reads carries its hostname), the address appears on the link,
/// tcpdump on the other end sees three gratuitous ARP requests and replies, and a stop hands
/// the address back.
#[test]
fn a_bootstrapped_control_plane_holds_and_announces_its_vip() {
    if !require_root("a_bootstrapped_control_plane_holds_and_announces_its_vip") {
        return;
    }
    let dir = TempDir::new();
    let config = control_plane_config(&dir, &format!("        vip: {{ip: {VIP}}}\n"));
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.ip(&["link", "set", "lo", "up"]);
    ns.veth("eth0", &peer, "up0");
    let capture = dir.path().join("tcpdump.log");
    let mut tcpdump = common::Background::start(
        &peer,
        &["tcpdump", "-i", "up0", "-e", "-n", "-l", "arp"],
        capture.clone(),
    );
    wait_for("tcpdump to listen", T, || tcpdump.text().contains("listening on"), || tcpdump.text());
    let node = Node::start_api(&ns, "", Some(&config));
    let sock = node.api.clone().unwrap();
    wait_for("the API socket", T, || sock.exists(), || node.log_text());
    wait_for(
        "the address",
        T,
        || ns.addresses().contains(&format!("eth0/{ADDR}/24")),
        || node.log_text(),
    );
    let vip = format!("eth0/{VIP}/32");
    std::thread::sleep(Duration::from_secs(1));
    assert!(!ns.addresses().contains(&vip), "the VIP came before etcd did");
    println!("{}", scenario(&ns, &node, "bootstrap"));
    wait_for("the VIP on eth0", T, || ns.addresses().contains(&vip), || node.log_text());
    // The announcements go out over 2 s (more on a loaded machine): wait for the third.
    let request = format!("Request who-has {VIP} tell {VIP}");
    wait_for(
        "three gratuitous ARP requests",
        Duration::from_secs(10),
        || tcpdump.text().matches(&request).count() >= 3,
        || tcpdump.text(),
    );
    let out = ns.exec(&[
        "etcdctl",
        &format!("--endpoints=https://{ADDR}:2379"),
        &format!("--cacert={}", s(&dir.path().join("ca.crt"))),
        &format!("--cert={}", s(&dir.path().join("client.crt"))),
        &format!("--key={}", s(&dir.path().join("client.key"))),
        "get",
        "--prefix",
        &format!("talos:v1:vip:election:{VIP}/"),
    ]);
    let keys = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = keys.lines().collect();
    assert_eq!(lines.len(), 2, "one candidate key and its value: {keys}");
    assert!(lines[0].starts_with(&format!("talos:v1:vip:election:{VIP}/")), "{keys}");
    assert_eq!(lines[1], "cp-1", "{keys}");
    let log = node.stop();
    assert!(!ns.addresses().contains(&vip), "the VIP stayed after the stop:\n{log}");
    tcpdump.stop();
    let text = tcpdump.text();
    let requests = text.matches(&request).count();
    let replies = text.matches(&format!("Reply {VIP} is-at")).count();
    let vip_log: Vec<&str> = log.lines().filter(|l| l.contains("vip")).collect();
    assert_eq!((requests, replies), (3, 3), "gratuitous ARP seen:\n{text}\n{vip_log:#?}");
    // Seconds of the day from tcpdump's `HH:MM:SS.micros` prefix.
    let at = |line: &str| -> f64 {
        let stamp = line.split_whitespace().next().unwrap();
        stamp.split(':').fold(0.0, |acc, part| acc * 60.0 + part.parse::<f64>().unwrap())
    };
    let times: Vec<f64> = text.lines().filter(|l| l.contains(&request)).map(at).collect();
    assert!(times[2] - times[0] >= 1.8, "the three requests are not a second apart: {times:?}");
    assert!(log.contains("this node holds 10.77.0.100"), "{log}");
    assert!(log.contains("this node no longer holds 10.77.0.100"), "{log}");
}
