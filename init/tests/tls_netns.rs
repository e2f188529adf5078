// SPDX-License-Identifier: Apache-2.0
//! The API over TLS against `keelson run --api-listen` in namespaces these tests create:
//! maintenance mode (`--insecure`), the move to mutual TLS when a config with `machine.ca`
//! is applied, roles, refusals at the handshake, and hostile clients on the TCP port.
#![allow(clippy::disallowed_methods)] // Tests and examples drive keelson from outside: plain threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{
    gen_config as gen, keelson_in as keelson, require_root, wait_for, Netns, Node, TempDir,
};

const T: Duration = Duration::from_secs(20);
const PORT: &str = "50000";

/// The generated machine config with eth0's address added.
fn machine_config(gen: &Path, addr: &str) -> PathBuf {
    let text = std::fs::read_to_string(gen.join("machine.yaml")).unwrap();
    let text = text.replace(
        "  network: {}\n",
        &format!(
            "  network:\n    interfaces:\n      - interface: eth0\n        addresses: [{addr}]\n"
        ),
    );
    assert!(text.contains("interfaces"), "{text}");
    let path = gen.join("node.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// A node with no config, serving TLS on `[::]:50000` (and the local socket).
fn start_bare(ns: &Netns) -> Node {
    ns.ip(&["link", "set", "lo", "up"]);
    let node = Node::start_api_args(ns, "", None, &["--api-listen", &format!("[::]:{PORT}")]);
    wait_for(
        "maintenance mode",
        T,
        || node.log_text().contains("maintenance certificate SHA256 fingerprint"),
        || node.log_text(),
    );
    node
}

/// Run `f` on a thread inside `ns`.
fn inside<R: Send>(ns: &Netns, f: impl FnOnce() -> R + Send) -> R {
    std::thread::scope(|sc| {
        sc.spawn(|| {
            ns.enter();
            f()
        })
        .join()
        .unwrap()
    })
}

#[test]
fn maintenance_then_mutual_tls_with_roles() {
    if !require_root("maintenance_then_mutual_tls_with_roles") {
        return;
    }
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.veth("eth0", &peer, "up0");
    let dir = TempDir::new();
    let ours = gen(&dir, "ours");
    let theirs = gen(&dir, "theirs");
    let node = start_bare(&ns);
    let log = node.log_text();
    let at = "127.0.0.1:50000";

    // Maintenance: --insecure reaches what maintenance allows, over IPv4 and IPv6.
    let (ok, out, err) = keelson(&ns, &["version", "-n", at, "--insecure"]);
    assert!(ok && out.contains("maintenance mode"), "{out}{err}");
    let (ok, out, err) = keelson(&ns, &["version", "-n", "[::1]:50000", "--insecure"]);
    assert!(ok && out.contains("maintenance mode"), "{out}{err}");
    let (ok, out, err) = keelson(&ns, &["get", "links", "-n", at, "--insecure"]);
    assert!(ok && out.contains(" lo "), "{out}{err}");
    // The fingerprint printed on the console pins the certificate; another one is refused.
    let print = log
        .lines()
        .find_map(|l| l.split("SHA256 fingerprint: ").nth(1))
        .map(|l| l.trim_end_matches(" ***").to_owned())
        .unwrap();
    let (ok, _, err) = keelson(&ns, &["version", "-n", at, "--insecure", "--fingerprint", &print]);
    assert!(ok, "{err}");
    let wrong = "00".repeat(32);
    let (ok, _, err) = keelson(&ns, &["version", "-n", at, "--insecure", "--fingerprint", &wrong]);
    assert!(!ok && err.contains("fingerprint"), "{err}");
    // Anything else is refused in maintenance mode.
    let (ok, out, err) = keelson(&ns, &["disks", "-n", at, "--insecure"]);
    assert!(ok && out.starts_with("DEV "), "{out}{err}");
    for args in
        [&["logs"][..], &["machine-status"], &["get", "machineconfig"], &["reboot"], &["dmesg"]]
    {
        let mut a = args.to_vec();
        a.extend_from_slice(&["-n", at, "--insecure"]);
        let (ok, _, err) = keelson(&ns, &a);
        assert!(!ok && err.contains("maintenance mode"), "{args:?}: {err}");
    }

    // apply-config over --insecure moves the node to mutual TLS with the config's CA.
    let config = machine_config(&ours, "10.7.0.2/24");
    let (ok, out, err) = keelson(&ns, &["apply-config", &s(&config), "-n", at, "--insecure"]);
    assert!(ok, "{out}{err}");
    wait_for(
        "mutual TLS",
        T,
        || {
            node.log_text().contains("API: mutual TLS")
                && ns.addresses().contains(&"eth0/10.7.0.2/24".to_owned())
        },
        || node.log_text(),
    );
    let admin = s(&ours.join("keelsonconfig"));
    let reader = s(&ours.join("keelsonconfig.reader"));
    // The server certificate is re-issued for the new address: reached at 10.7.0.2 too.
    wait_for(
        "a certificate for 10.7.0.2",
        T,
        || keelson(&ns, &["version", "-n", "10.7.0.2", "--keelsonconfig", &admin]).0,
        || node.log_text(),
    );
    let (ok, out, err) = keelson(&ns, &["get", "addresses", "-n", at, "--keelsonconfig", &admin]);
    assert!(ok && out.contains("10.7.0.2/24"), "{out}{err}");
    // Two nodes at once (here the same node by two addresses): each line says which.
    let (ok, out, err) =
        keelson(&ns, &["version", "-n", &format!("{at},10.7.0.2"), "--keelsonconfig", &admin]);
    assert!(ok, "{err}");
    assert!(out.contains("127.0.0.1:50000: Server:") && out.contains("10.7.0.2: Server:"), "{out}");
    // The CA key never leaves the node.
    let (ok, out, err) =
        keelson(&ns, &["get", "machineconfig", "-o", "yaml", "-n", at, "--keelsonconfig", &admin]);
    assert!(ok && out.contains("key: <redacted>"), "{out}{err}");
    let key_b64 = std::fs::read_to_string(&config).unwrap();
    let key_b64 = key_b64.lines().find_map(|l| l.trim().strip_prefix("key: ")).unwrap();
    assert!(!out.contains(key_b64));
    assert!(!node.log_text().contains(key_b64));

    // A reader may read, not apply.
    let (ok, out, err) = keelson(&ns, &["get", "links", "-n", at, "--keelsonconfig", &reader]);
    assert!(ok && out.contains("eth0"), "{out}{err}");
    let (ok, _, err) =
        keelson(&ns, &["apply-config", &s(&config), "-n", at, "--keelsonconfig", &reader]);
    assert!(!ok && err.contains("permission denied"), "{err}");
    // Another CA's admin, and a client with no certificate, are refused at the handshake.
    // (A client of the other cluster does not trust this node to begin with.)
    let other = s(&theirs.join("keelsonconfig"));
    let (ok, _, err) = keelson(&ns, &["version", "-n", at, "--keelsonconfig", &other]);
    assert!(!ok && err.contains("UnknownIssuer"), "{err}");
    // The node refuses a certificate from another CA, even from a client that trusts it.
    let ca_line = |p: &Path| {
        let t = std::fs::read_to_string(p).unwrap();
        t.lines().find(|l| l.trim_start().starts_with("ca: ")).unwrap().to_owned()
    };
    let mixed_text = std::fs::read_to_string(theirs.join("keelsonconfig"))
        .unwrap()
        .replace(&ca_line(&theirs.join("keelsonconfig")), &ca_line(&ours.join("keelsonconfig")));
    let mixed = dir.path().join("mixed");
    std::fs::write(&mixed, mixed_text).unwrap();
    let (ok, _, err) = keelson(&ns, &["version", "-n", at, "--keelsonconfig", &s(&mixed)]);
    assert!(!ok && err.contains("refused this client"), "{err}");
    let (ok, _, err) = keelson(&ns, &["version", "-n", at, "--insecure"]);
    assert!(!ok && err.contains("refused this client"), "{err}");
    // The local socket still answers as before.
    let sock = s(node.api.as_ref().unwrap());
    let (ok, _, err) = keelson(&ns, &["version", "--socket", &sock]);
    assert!(ok, "{err}");
    // A reader may not reboot; the admin may: the answer comes, then the node stops.
    let (ok, _, err) = keelson(&ns, &["reboot", "-n", at, "--keelsonconfig", &reader]);
    assert!(!ok && err.contains("permission denied"), "{err}");
    let (ok, out, err) = keelson(&ns, &["reboot", "-n", at, "--keelsonconfig", &admin]);
    assert!(ok && out.contains("accepted"), "{out}{err}");
    wait_for(
        "the node stopped",
        T,
        || node.log_text().contains("stopped (Reboot)"),
        || node.log_text(),
    );
}

/// Open a TCP connection to the node's TLS port from inside `ns`.
fn tcp(ns: &Netns) -> TcpStream {
    inside(ns, || {
        let s = TcpStream::connect(("127.0.0.1", 50000)).unwrap();
        s.set_read_timeout(Some(T)).unwrap();
        s
    })
}

/// Read until the node closes (EOF or reset); how long that took.
fn closed_within(s: &mut TcpStream) -> Duration {
    let start = Instant::now();
    let mut b = [0u8; 4096];
    loop {
        match s.read(&mut b) {
            Ok(0) | Err(_) => return start.elapsed(),
            Ok(_) => {}
        }
    }
}

#[test]
fn hostile_tls_clients_do_not_stop_the_node() {
    if !require_root("hostile_tls_clients_do_not_stop_the_node") {
        return;
    }
    let ns = Netns::new();
    let node = start_bare(&ns);
    let answers = || keelson(&ns, &["version", "-n", "127.0.0.1", "--insecure"]).0;

    // Plain-text garbage, and a TLS record header followed by garbage: closed at once.
    let mut plain = tcp(&ns);
    plain.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    assert!(closed_within(&mut plain) < Duration::from_secs(3));
    let mut bad_tls = tcp(&ns);
    let mut record = vec![0x16, 0x03, 0x01, 0x00, 0x80];
    record.extend((0..128u8).map(|i| i.wrapping_mul(37)));
    bad_tls.write_all(&record).unwrap();
    assert!(closed_within(&mut bad_tls) < Duration::from_secs(3));
    // A record that claims 16 KiB and stops after a few bytes, a client that says nothing,
    // and one that drips a byte a second: all held to the handshake deadline, meanwhile
    // the node answers others.
    let mut partial = tcp(&ns);
    partial.write_all(&[0x16, 0x03, 0x01, 0x40, 0x00, 1, 2, 3]).unwrap();
    let mut silent = tcp(&ns);
    let mut dripper = tcp(&ns);
    dripper.set_nonblocking(true).unwrap();
    let hello = [0x16, 0x03, 0x01, 0x00, 0xc8, 0x01, 0x00, 0x00, 0xc4, 0x03, 0x03];
    assert!(answers());
    let started = Instant::now();
    let mut dripped = 0;
    while started.elapsed() < Duration::from_secs(8) {
        if dripped < hello.len() {
            let _ = dripper.write_all(&hello[dripped..=dripped]);
            dripped += 1;
        }
        std::thread::sleep(Duration::from_millis(700));
    }
    dripper.set_nonblocking(false).unwrap();
    dripper.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    for (what, s) in [("partial", &mut partial), ("silent", &mut silent), ("dripper", &mut dripper)]
    {
        let mut b = [0u8; 64];
        match s.read(&mut b) {
            Ok(0) | Err(_) => {}
            Ok(n) => panic!("{what}: {n} bytes instead of a close"),
        }
        // Closed, not merely quiet: a second read gives EOF or an error at once.
        s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        assert!(!matches!(s.read(&mut b), Ok(n) if n > 0), "{what}");
    }
    assert!(answers());

    // 300 connections that never handshake (the cap is 256): a new client still gets in.
    let many: Vec<TcpStream> = inside(&ns, || {
        (0..300).filter_map(|_| TcpStream::connect(("127.0.0.1", 50000)).ok()).collect()
    });
    assert!(many.len() >= 256, "{}", many.len());
    assert!(answers(), "{}", node.log_text());
    drop(many);
    assert!(answers());
    node.stop();
}

#[test]
fn a_tls_watcher_that_does_not_read_is_dropped() {
    if !require_root("a_tls_watcher_that_does_not_read_is_dropped") {
        return;
    }
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.veth("eth0", &peer, "up0");
    ns.ip(&["link", "set", "lo", "up"]);
    let dir = TempDir::new();
    let ours = gen(&dir, "ours");
    let config = machine_config(&ours, "10.7.0.2/24");
    let node = Node::start_api_args(&ns, "", Some(&config), &["--api-listen", "0.0.0.0:50000"]);
    wait_for("mutual TLS", T, || node.log_text().contains("API: mutual TLS"), || node.log_text());
    let admin = s(&ours.join("keelsonconfig"));
    // The real client, watching, with its stdout a pipe nobody reads: once the pipe is full
    // it stops reading the socket.
    let mut watcher = Command::new("ip")
        .args(["netns", "exec", &ns.name, env!("CARGO_BIN_EXE_keelson")])
        .args(["get", "addresses", "--watch", "-n", "127.0.0.1", "--keelsonconfig", &admin])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let batch = node.root.path().join("batch");
    let lines: String = (0..20_000)
        .map(|i| {
            format!("addr add 10.{}.{}.{}/32 dev eth0\n", 100 + i / 65536, (i / 256) % 256, i % 256)
        })
        .collect();
    std::fs::write(&batch, lines).unwrap();
    ns.ip(&["-batch", batch.to_str().unwrap()]);
    // A watcher that does not read is dropped (its output stalls), or its COSI watch ends
    // once it falls a ring's length behind: the node buffers nothing per watcher, so which
    // comes first depends on how much the kernel's socket buffers took.
    wait_for(
        "the slow TLS watcher dropped",
        Duration::from_secs(150),
        || {
            let log = node.log_text();
            log.contains("dropping a client that does not read")
                || log.contains("ending a watch that fell behind")
        },
        // The API's lines (the rest is time sync failing without a network).
        || node.log_text().lines().filter(|l| l.contains(" api:")).collect::<Vec<_>>().join("\n"),
    );
    let (ok, _, err) = keelson(&ns, &["version", "-n", "127.0.0.1", "--keelsonconfig", &admin]);
    assert!(ok, "{err}");
    let _ = watcher.kill();
    let _ = watcher.wait();
    node.stop();
}

#[test]
fn apply_config_try_rolls_back_unless_confirmed() {
    if !require_root("apply_config_try_rolls_back_unless_confirmed") {
        return;
    }
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.veth("eth0", &peer, "up0");
    let dir = TempDir::new();
    let with = |name: &str, addr: &str| {
        let p = dir.path().join(name);
        std::fs::write(
            &p,
            format!("version: v1alpha1\nmachine:\n  network:\n    interfaces:\n      - interface: eth0\n        addresses: [{addr}]\n"),
        )
        .unwrap();
        p
    };
    let old = with("config.yaml", "10.7.0.2/24");
    let new = with("new.yaml", "10.7.0.3/24");
    let node = Node::start_api(&ns, "", Some(&old));
    let sock = s(node.api.as_ref().unwrap());
    let has = |a: &str| ns.addresses().contains(&format!("eth0/{a}"));
    wait_for("the first config", T, || has("10.7.0.2/24"), || node.log_text());
    let (ok, _, err) = keelson(&ns, &["config", "confirm", "--socket", &sock]);
    assert!(!ok && err.contains("no config on trial"), "{err}");

    // Not confirmed: the node goes back by itself.
    let args = ["apply-config", &s(&new), "--mode", "try", "--timeout", "3s", "--socket", &sock];
    let (ok, out, err) = keelson(&ns, &args);
    assert!(ok && out.contains("on trial for 3 s"), "{out}{err}");
    wait_for(
        "the config on trial",
        T,
        || has("10.7.0.3/24") && !has("10.7.0.2/24"),
        || node.log_text(),
    );
    wait_for("the rollback", T, || has("10.7.0.2/24") && !has("10.7.0.3/24"), || node.log_text());
    assert!(node.log_text().contains("rolled back to the previous config"));
    let on_disk = || std::fs::read_to_string(&old).unwrap();
    assert!(on_disk().contains("10.7.0.2/24"), "a config on trial is not written");

    // Confirmed in time: it stays. The trial is long here: under emulation on shared cores,
    // the steps between apply and confirm can take longer than a short one.
    let args = ["apply-config", &s(&new), "--mode", "try", "--timeout", "5m", "--socket", &sock];
    let (ok, out, err) = keelson(&ns, &args);
    assert!(ok, "{out}{err}");
    wait_for("the config on trial", T, || has("10.7.0.3/24"), || node.log_text());
    let (ok, out, err) = keelson(&ns, &["config", "confirm", "--socket", &sock]);
    assert!(ok && out.contains("kept"), "{out}{err}");
    std::thread::sleep(Duration::from_secs(5));
    assert!(has("10.7.0.3/24") && !has("10.7.0.2/24"), "{:?}", ns.addresses());
    assert!(on_disk().contains("10.7.0.3/24"), "a confirmed config is kept in the config file");
    let (ok, _, err) =
        keelson(&ns, &["apply-config", &s(&new), "--mode", "staged", "--socket", &sock]);
    assert!(ok, "{err}");
    let staged = dir.path().join("config.yaml.staged");
    assert!(staged.exists(), "a staged config waits beside the config file");
    // A plain apply is kept too (and drops the staged config: the newer one wins), and a
    // restart runs it.
    let third = with("third.yaml", "10.7.0.4/24");
    let (ok, out, err) = keelson(&ns, &["apply-config", &s(&third), "--socket", &sock]);
    assert!(ok && out.contains("kept:"), "{out}{err}");
    assert!(!staged.exists(), "the staged config is dropped");
    assert!(on_disk().contains("10.7.0.4/24"));
    node.stop();
    // (The kernel keeps what the stopped node configured: start from a bare link.)
    ns.ip(&["addr", "flush", "dev", "eth0"]);
    let node = Node::start_api(&ns, "", Some(&old));
    wait_for(
        "the kept config after a restart",
        T,
        || has("10.7.0.4/24") && node.log_text().contains("settled"),
        || node.log_text(),
    );
    node.stop();
}
