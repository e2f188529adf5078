// SPDX-License-Identifier: Apache-2.0
//! Who gets what over the TLS API, against `keelson run --api-listen` in namespaces these
//! tests create, with a scripted Python `ssl` client (tests/data/tls_client.py) and the
//! keelson client: a handshake begun in maintenance and finished after a config arrived gets
//! nothing; a CA rotation ends the sessions of the old CA; a machine.ca the node cannot use
//! is refused by apply-config; a node with a config is never in maintenance mode; readers
//! cannot take the admin's or the local socket's connection slots; `dmesg` redacts the
//! command line.
#![allow(clippy::disallowed_methods)] // Tests and examples drive keelson from outside: plain threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use common::{
    gen_config as gen, keelson_in as keelson, require_root, tag, wait_for, Netns, Node, TempDir,
};
use serde_json::json;

const T: Duration = Duration::from_secs(20);
const AT: &str = "127.0.0.1:50000";

/// The generated machine config with eth0's address, in `gen/NAME`.
fn machine_config(gen: &Path, name: &str, addr: &str) -> PathBuf {
    let text = std::fs::read_to_string(gen.join("machine.yaml")).unwrap();
    let text = text.replace(
        "  network: {}\n",
        &format!(
            "  network:\n    interfaces:\n      - interface: eth0\n        addresses: [{addr}]\n"
        ),
    );
    assert!(text.contains("interfaces"), "{text}");
    let path = gen.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn b64(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// The scripted TLS client, inside `ns`.
struct Client {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Client {
    fn start(ns: &Netns) -> Self {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tls_client.py");
        let mut child = Command::new("ip")
            .args(["netns", "exec", &ns.name, "python3", script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Self { child, stdin, stdout }
    }

    fn run(&mut self, cmd: serde_json::Value) -> String {
        writeln!(self.stdin, "{cmd}").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        line.trim().to_owned()
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A node with no config, serving TLS on 127.0.0.1:50000 (and the local socket).
fn start_bare(ns: &Netns) -> Node {
    ns.ip(&["link", "set", "lo", "up"]);
    let node = Node::start_api_args(ns, "", None, &["--api-listen", AT]);
    wait_for(
        "maintenance mode",
        T,
        || node.log_text().contains("maintenance certificate SHA256 fingerprint"),
        || node.log_text(),
    );
    node
}

/// A node with `config`, serving TLS on 127.0.0.1:50000.
fn start_configured(ns: &Netns, config: &Path, args: &[&str]) -> Node {
    ns.ip(&["link", "set", "lo", "up"]);
    let mut all = vec!["--api-listen", AT];
    all.extend_from_slice(args);
    let node = Node::start_api_args(ns, "", Some(config), &all);
    wait_for("mutual TLS", T, || node.log_text().contains("API: mutual TLS"), || node.log_text());
    node
}

fn apply_request(config: &Path) -> serde_json::Value {
    json!({"call": "apply", "config": std::fs::read_to_string(config).unwrap()})
}

#[test]
fn a_handshake_pending_when_maintenance_ends_gets_nothing() {
    if !require_root("a_handshake_pending_when_maintenance_ends_gets_nothing") {
        return;
    }
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.veth("eth0", &peer, "up0");
    let dir = TempDir::new();
    let ours = gen(&dir, "ours");
    let theirs = gen(&dir, "theirs");
    let node = start_bare(&ns);
    let mut attacker = Client::start(&ns);

    // Opened in maintenance, no ClientHello yet.
    assert_eq!(attacker.run(json!({"do": "connect", "id": "early"})), "ok");
    // The operator configures the node.
    let config = machine_config(&ours, "node.yaml", "10.7.0.2/24");
    let (ok, out, err) = keelson(&ns, &["apply-config", &s(&config), "-n", AT, "--insecure"]);
    assert!(ok, "{out}{err}");
    wait_for("mutual TLS", T, || node.log_text().contains("API: mutual TLS"), || node.log_text());

    // The early connection finishes its handshake with no certificate and tries to take
    // the node over with its own CA.
    let takeover = machine_config(&theirs, "node.yaml", "10.7.0.2/24");
    let shook = attacker.run(json!({"do": "tls", "id": "early", "client": null}));
    let answer = if shook == "ok" {
        attacker.run(json!({"do": "send", "id": "early", "req": apply_request(&takeover)}))
    } else {
        shook
    };
    assert!(!answer.starts_with("ok"), "maintenance rights after maintenance: {answer}");

    // The operator's admin still works; the attacker's does not.
    let admin = s(&ours.join("keelsonconfig"));
    let (ok, _, err) = keelson(&ns, &["version", "-n", AT, "--keelsonconfig", &admin]);
    assert!(ok, "{err}\n{}", node.log_text());
    let other = s(&theirs.join("keelsonconfig"));
    let (ok, _, _) = keelson(&ns, &["version", "-n", AT, "--keelsonconfig", &other]);
    assert!(!ok, "{}", node.log_text());
    node.stop();
}

#[test]
fn a_ca_rotation_ends_the_old_cas_sessions() {
    if !require_root("a_ca_rotation_ends_the_old_cas_sessions") {
        return;
    }
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.veth("eth0", &peer, "up0");
    let dir = TempDir::new();
    let ours = gen(&dir, "ours");
    let next = gen(&dir, "next");
    let config = machine_config(&ours, "node.yaml", "10.7.0.2/24");
    let node = start_configured(&ns, &config, &[]);
    let admin = s(&ours.join("keelsonconfig"));
    let mut old = Client::start(&ns);

    // A busy admin session of the old CA, and a connection whose handshake is still to come.
    assert_eq!(old.run(json!({"do": "connect", "id": "busy"})), "ok");
    assert_eq!(old.run(json!({"do": "tls", "id": "busy", "client": admin})), "ok");
    let v = old.run(json!({"do": "send", "id": "busy", "req": {"call": "version"}}));
    assert_eq!(v, "ok");
    assert_eq!(old.run(json!({"do": "connect", "id": "late"})), "ok");

    // The CA is rotated (from the local socket).
    let rotated = machine_config(&next, "node.yaml", "10.7.0.2/24");
    let (ok, out, err) =
        keelson(&ns, &["apply-config", &s(&rotated), "--socket", &s(node.api.as_ref().unwrap())]);
    assert!(ok, "{out}{err}");
    let new_admin = s(&next.join("keelsonconfig"));
    wait_for(
        "the new CA",
        T,
        || keelson(&ns, &["version", "-n", AT, "--keelsonconfig", &new_admin]).0,
        || node.log_text(),
    );

    // Neither old session may put the old CA back.
    let back = apply_request(&config);
    let busy = old.run(json!({"do": "send", "id": "busy", "req": back}));
    assert!(!busy.starts_with("ok"), "the old CA's session applied a config: {busy}");
    let shook = old.run(json!({"do": "tls", "id": "late", "client": admin}));
    let late = if shook == "ok" {
        old.run(json!({"do": "send", "id": "late", "req": apply_request(&config)}))
    } else {
        shook
    };
    assert!(!late.starts_with("ok"), "a handshake of the old CA applied a config: {late}");
    let (ok, _, err) = keelson(&ns, &["version", "-n", AT, "--keelsonconfig", &new_admin]);
    assert!(ok, "{err}");
    node.stop();
}

#[test]
fn a_machine_ca_the_node_cannot_use_is_refused() {
    if !require_root("a_machine_ca_the_node_cannot_use_is_refused") {
        return;
    }
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.veth("eth0", &peer, "up0");
    let dir = TempDir::new();
    let ours = gen(&dir, "ours");
    let theirs = gen(&dir, "theirs");
    let good = std::fs::read_to_string(machine_config(&ours, "node.yaml", "10.7.0.2/24")).unwrap();
    let field = |text: &str, name: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(&format!("{name}: ")).map(str::to_owned))
            .unwrap()
    };
    let key = field(&good, "key");
    let crt = field(&good, "crt");
    let other_key = field(&std::fs::read_to_string(theirs.join("machine.yaml")).unwrap(), "key");
    let garbage_key = b64("-----BEGIN PRIVATE KEY-----\nZ2FyYmFnZQ==\n-----END PRIVATE KEY-----\n");
    let not_der = b64("-----BEGIN CERTIFICATE-----\nbm90IGRlcg==\n-----END CERTIFICATE-----\n");
    let cases = [
        ("garbage key", good.replace(&key, &garbage_key), "machine.ca"),
        ("no key", good.replace(&format!("    key: {key}\n"), ""), "no key"),
        ("certificate not DER", good.replace(&crt, &not_der), "machine.ca"),
        ("another CA's key", good.replace(&key, &other_key), "not the key of machine.ca.crt"),
    ];
    let node = start_bare(&ns);
    for (what, text, says) in &cases {
        assert_ne!(*text, good, "{what}");
        let path = dir.path().join("bad.yaml");
        std::fs::write(&path, text).unwrap();
        let (ok, out, err) = keelson(&ns, &["apply-config", &s(&path), "-n", AT, "--insecure"]);
        assert!(!ok, "{what}: accepted: {out}");
        assert!(err.contains(says), "{what}: {err}");
        // Nothing changed: still in maintenance, waiting for a config.
        let (ok, out, err) = keelson(&ns, &["version", "-n", AT, "--insecure"]);
        assert!(ok && out.contains("maintenance mode"), "{what}: {out}{err}");
    }
    // On a configured node, the running config stays (refused over the local socket too).
    let path = dir.path().join("good.yaml");
    std::fs::write(&path, &good).unwrap();
    let (ok, out, err) = keelson(&ns, &["apply-config", &s(&path), "-n", AT, "--insecure"]);
    assert!(ok, "{out}{err}");
    let sock = s(node.api.as_ref().unwrap());
    let (_, text, _) = &cases[0];
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, text).unwrap();
    let (ok, _, err) = keelson(&ns, &["apply-config", &s(&bad), "--socket", &sock]);
    assert!(!ok && err.contains("machine.ca"), "{err}");
    let admin = s(&ours.join("keelsonconfig"));
    wait_for(
        "the good config's CA serving",
        T,
        || keelson(&ns, &["version", "-n", AT, "--keelsonconfig", &admin]).0,
        || node.log_text(),
    );
    node.stop();
}

#[test]
fn a_node_with_a_config_is_never_in_maintenance_mode() {
    if !require_root("a_node_with_a_config_is_never_in_maintenance_mode") {
        return;
    }
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.veth("eth0", &peer, "up0");
    ns.ip(&["link", "set", "lo", "up"]);
    let dir = TempDir::new();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        "version: v1alpha1\nmachine:\n  network:\n    interfaces:\n      - interface: eth0\n        addresses: [10.7.0.2/24]\n",
    )
    .unwrap();
    let node = Node::start_api_args(&ns, "", Some(&config), &["--api-listen", AT]);
    wait_for(
        "the config",
        T,
        || ns.addresses().contains(&"eth0/10.7.0.2/24".to_owned()),
        || node.log_text(),
    );
    // Addresses change (the certificate's names would): said once all the same.
    ns.ip(&["addr", "add", "10.7.0.9/24", "dev", "eth0"]);
    std::thread::sleep(Duration::from_secs(3));
    let (ok, out, err) = keelson(&ns, &["version", "-n", AT, "--insecure"]);
    assert!(!ok, "a configured node answered --insecure: {out}{err}");
    let takeover = dir.path().join("takeover.yaml");
    std::fs::write(&takeover, std::fs::read_to_string(&config).unwrap()).unwrap();
    let (ok, out, _) = keelson(&ns, &["apply-config", &s(&takeover), "-n", AT, "--insecure"]);
    assert!(!ok, "{out}");
    // The local socket serves.
    let (ok, out, err) = keelson(&ns, &["version", "--socket", &s(node.api.as_ref().unwrap())]);
    assert!(ok && !out.contains("maintenance"), "{out}{err}");
    let log = node.stop();
    assert!(!log.contains("MAINTENANCE MODE"), "{log}");
    assert_eq!(log.matches("the TLS API is off").count(), 1, "{log}");
}

#[test]
fn readers_cannot_lock_out_the_admin_or_the_local_socket() {
    if !require_root("readers_cannot_lock_out_the_admin_or_the_local_socket") {
        return;
    }
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.veth("eth0", &peer, "up0");
    let dir = TempDir::new();
    let ours = gen(&dir, "ours");
    let config = machine_config(&ours, "node.yaml", "10.7.0.2/24");
    let node = start_configured(&ns, &config, &[]);
    let mut reader = Client::start(&ns);
    let opened = reader
        .run(json!({"do": "watchers", "n": 256, "client": s(&ours.join("keelsonconfig.reader"))}));
    let opened: usize = opened.parse().unwrap_or_else(|_| panic!("{opened}"));
    assert!(opened >= 150, "{opened} watches\n{}", node.log_text());
    // Readers share at most 192 of the 256 slots (docs/security.md).
    assert!(opened <= 192, "{opened} reader watches");

    let sock = s(node.api.as_ref().unwrap());
    let (ok, out, err) = keelson(&ns, &["version", "--socket", &sock]);
    assert!(ok, "root's socket with {opened} reader watches open: {out}{err}");
    let admin = s(&ours.join("keelsonconfig"));
    let (ok, out, err) = keelson(&ns, &["get", "links", "-n", AT, "--keelsonconfig", &admin]);
    assert!(ok, "the admin with {opened} reader watches open: {out}{err}");
    assert_eq!(reader.run(json!({"do": "close"})), "ok");
    node.stop();
}

#[test]
fn dmesg_redacts_the_command_line() {
    if !require_root("dmesg_redacts_the_command_line") {
        return;
    }
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.veth("eth0", &peer, "up0");
    let dir = TempDir::new();
    let ours = gen(&dir, "ours");
    let config = machine_config(&ours, "node.yaml", "10.7.0.2/24");
    let node = start_configured(&ns, &config, &[]);
    // A record as the kernel writes at boot, in the ring buffer dmesg reads.
    let secret = format!("s3cret-{}", tag());
    let inline = b64("version: v1alpha1\n");
    std::fs::write(
        "/dev/kmsg",
        format!("Command line: console=ttyS0 talos.config=http://10.0.2.2/c?token={secret} talos.config.inline={inline}\n"),
    )
    .unwrap();
    let reader = s(&ours.join("keelsonconfig.reader"));
    let (ok, out, err) = keelson(&ns, &["dmesg", "-n", AT, "--keelsonconfig", &reader]);
    assert!(ok, "{err}");
    let line = out.lines().find(|l| l.contains("talos.config=http://10.0.2.2/c")).unwrap_or("");
    assert!(!line.is_empty(), "the record is not in dmesg");
    assert!(!out.contains(&secret) && !out.contains(&inline), "{line}");
    assert!(line.contains("talos.config=http://10.0.2.2/c?…"), "{line}");
    assert!(line.contains("talos.config.inline=<"), "{line}");
    node.stop();
}

/// A client flooding the handshake pool (32 of the 256 slots) from one address closes only
/// its own pending handshakes: the admin's, older than all of them, still completes.
#[test]
fn a_handshake_flood_from_one_address_cannot_close_the_admins() {
    if !require_root("a_handshake_flood_from_one_address_cannot_close_the_admins") {
        return;
    }
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.veth("eth0", &peer, "up0");
    let dir = TempDir::new();
    let ours = gen(&dir, "ours");
    let config = machine_config(&ours, "node.yaml", "10.7.0.2/24");
    let node = start_configured(&ns, &config, &[]);
    let mut client = Client::start(&ns);

    assert_eq!(client.run(json!({"do": "connect", "id": "admin"})), "ok");
    // The node takes the admin's connection before the flood's (accepted first: the oldest).
    std::thread::sleep(Duration::from_millis(300));
    let flooded = client.run(json!({"do": "flood", "n": 48, "from": "127.0.0.2"}));
    assert_eq!(flooded, "48", "{}", node.log_text());
    std::thread::sleep(Duration::from_millis(300));

    let admin = s(&ours.join("keelsonconfig"));
    let shook = client.run(json!({"do": "tls", "id": "admin", "client": admin}));
    assert_eq!(shook, "ok", "{}", node.log_text());
    let v = client.run(json!({"do": "send", "id": "admin", "req": {"call": "version"}}));
    assert!(v == "ok", "the admin's handshake after a flood: {v}\n{}", node.log_text());
    assert_eq!(client.run(json!({"do": "close"})), "ok");
    node.stop();
}
