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

/// A scenario of the Python client on node `i` (1-based) with more arguments; the text after
/// `prefix ` on its output line (empty when the scenario prints none).
fn etcd_call(c: &Cluster, nodes: &[Node], i: usize, args: &[&str], prefix: &str) -> String {
    let sock = s(nodes[i - 1].api.as_ref().unwrap());
    let mut all = vec![args[0], sock.as_str()];
    all.extend(&args[1..]);
    let out = common::python_scenario(&c.nodes[i - 1], &nodes[i - 1], "etcd_bootstrap.py", &all);
    let want = format!("{prefix} ");
    out.lines().find_map(|l| l.strip_prefix(want.as_str())).unwrap_or_default().to_owned()
}

/// `(id, name, learner)` of every member, sorted, as `etcdctl member list -w json` shows them.
fn etcdctl_members(c: &Cluster) -> Vec<(u64, String, bool)> {
    let out = c.etcdctl(&["member", "list", "-w", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let mut m: Vec<(u64, String, bool)> = v["members"]
        .as_array()
        .map(|ms| {
            ms.iter()
                .map(|m| {
                    (
                        m["ID"].as_u64().unwrap_or(0),
                        m["name"].as_str().unwrap_or("").to_owned(),
                        m["isLearner"].as_bool().unwrap_or(false),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    m.sort();
    m
}

/// The raft leader's ID as every member's status says it (0 where a member does not answer).
fn etcdctl_leaders(c: &Cluster) -> Vec<u64> {
    let out = c.etcdctl(&["endpoint", "status", "-w", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v.as_array()
        .map(|a| a.iter().map(|e| e["Status"]["leader"].as_u64().unwrap_or(0)).collect())
        .unwrap_or_default()
}

/// `EtcdMemberList` and `EtcdStatus` through grpcio and the PyPI Talos bindings agree with
/// etcdctl; `EtcdForfeitLeadership` on the raft leader hands leadership to another member
/// (etcdctl's endpoint status shows it), and removing a node's own member is refused.
fn etcd_calls_on_three_members(c: &Cluster, nodes: &[Node]) {
    let started = std::time::Instant::now();
    let want = etcdctl_members(c);
    assert_eq!(want.len(), 3, "{want:?}");
    let listed = etcd_call(c, nodes, 1, &["members"], "members");
    let v: Vec<(u64, String, bool)> = serde_json::from_str(&listed).unwrap();
    let mut got = v.clone();
    got.sort();
    assert_eq!(got, want, "EtcdMemberList against etcdctl member list");
    let id_of = |i: usize| want.iter().find(|m| m.1 == format!("cp-{i}")).unwrap().0;
    // The leader, as all three see it.
    let leaders = etcdctl_leaders(c);
    assert!(
        leaders.len() == 3 && leaders.iter().all(|l| *l == leaders[0] && *l != 0),
        "{leaders:?}"
    );
    let leader = (1..=3).find(|i| id_of(*i) == leaders[0]).unwrap();
    let st: serde_json::Value =
        serde_json::from_str(&etcd_call(c, nodes, leader, &["status"], "status")).unwrap();
    assert_eq!(st["member_id"].as_u64(), Some(id_of(leader)), "EtcdStatus of cp-{leader}: {st}");
    assert_eq!(st["leader"].as_u64(), Some(leaders[0]), "EtcdStatus of cp-{leader}: {st}");
    // Forfeit: the reply names the new leader, and etcd agrees.
    let to = etcd_call(c, nodes, leader, &["forfeit"], "forfeit");
    assert!(
        to.starts_with("cp-") && to != format!("cp-{leader}"),
        "EtcdForfeitLeadership on cp-{leader} answered {to:?}"
    );
    let seen = std::cell::RefCell::new(Vec::new());
    wait_for(
        "another raft leader after the forfeit",
        Duration::from_secs(10),
        || {
            *seen.borrow_mut() = etcdctl_leaders(c);
            let l = seen.borrow();
            l.len() == 3 && l.iter().all(|x| *x == l[0] && *x != 0 && *x != leaders[0])
        },
        || format!("leaders {:?}\n{}", seen.borrow(), logs(nodes)),
    );
    let new_leader = (1..=3).find(|i| id_of(*i) == seen.borrow()[0]).unwrap();
    println!("etcd calls: list, status and forfeit in {:?}", started.elapsed());
    assert_eq!(to, format!("cp-{new_leader}"), "the reply named another member than etcd's leader");
    // The same calls through `keelson etcd`: the members table names every member by its
    // hex ID, and forfeiting on a member that does not lead moves nothing.
    let keelson_etcd = |i: usize, verb: &str| {
        let sock = s(nodes[i - 1].api.as_ref().unwrap());
        let out = common::keelson_in(&c.nodes[i - 1], &["etcd", verb, "--socket", &sock]);
        assert!(out.0, "keelson etcd {verb} on cp-{i}: {out:?}");
        out.1
    };
    let table = keelson_etcd(1, "members");
    for (id, name, _) in &want {
        let row = table.lines().find(|l| l.starts_with(&format!("{id:016x} "))).unwrap_or_default();
        assert!(row.contains(name.as_str()) && row.contains("false"), "{name}:\n{table}");
    }
    let not_leader = (1..=3).find(|i| *i != new_leader).unwrap();
    let said = keelson_etcd(not_leader, "forfeit-leadership");
    assert_eq!(said.trim(), "not the leader: nothing to forfeit", "cp-{not_leader}");
    assert_eq!(etcdctl_leaders(c), vec![id_of(new_leader); 3], "a forfeit by a follower moved it");
    // Removing itself through remove-member is refused; so is a name that is no member.
    etcd_call(c, nodes, 1, &["remove-self", &id_of(1).to_string()], "");
    etcd_call(c, nodes, 1, &["remove-name", "no-such-node"], "");
    assert_eq!(etcdctl_members(c), want, "a refused removal changed the members");
    println!("etcd calls: cp-{leader} forfeited to cp-{new_leader}; {:?}", started.elapsed());
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
    // `keelson bootstrap` hears the same AlreadyExists.
    let out = Command::new(env!("CARGO_BIN_EXE_keelson"))
        .args(["bootstrap", "--socket", &s(&sock)])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("AlreadyExists"), "{err}");
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
    // The only member: a graceful Reset is refused (the node keeps running, the VIP too).
    let (ok, _, err) = common::keelson_in(&ns, &["reset", "--socket", sock.to_str().unwrap()]);
    assert!(!ok && err.contains("FailedPrecondition") && err.contains("only member"), "{err}");
    assert!(err.contains("graceful=false"), "{err}");
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        ns.addresses().contains(&vip),
        "the VIP went after a refused reset:\n{}",
        node.log_text()
    );
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

/// The addresses of a three-node test: IPv4 or IPv6 throughout.
struct Family {
    /// Node `i`'s address is `<prefix><i>`.
    prefix: &'static str,
    len: u8,
    vip: &'static str,
    vip_len: u8,
    observer: &'static str,
}

const V4: Family =
    Family { prefix: "10.78.0.", len: 24, vip: "10.78.0.100", vip_len: 32, observer: "10.78.0.50" };

const V6: Family =
    Family { prefix: "fd78::", len: 64, vip: "fd78::100", vip_len: 128, observer: "fd78::50" };

impl Family {
    fn addr(&self, i: usize) -> String {
        format!("{}{i}", self.prefix)
    }

    fn url(&self, host: &str, port: u16) -> String {
        if host.contains(':') {
            format!("https://[{host}]:{port}")
        } else {
            format!("https://{host}:{port}")
        }
    }
}

/// Three control planes (`cp-1`..`cp-3`) on one bridge, and a fourth namespace that watches.
struct Cluster {
    f: &'static Family,
    switch: Netns,
    nodes: Vec<Netns>,
    observer: Netns,
    dir: TempDir,
}

impl Cluster {
    fn new(f: &'static Family) -> Self {
        let dir = TempDir::new();
        pki(dir.path());
        let switch = Netns::new();
        switch.ip(&["link", "add", "br0", "type", "bridge"]);
        switch.ip(&["link", "set", "br0", "up"]);
        let attach = |ns: &Netns, port: &str| {
            ns.ip(&["link", "set", "lo", "up"]);
            ns.veth("eth0", &switch, port);
            switch.ip(&["link", "set", port, "master", "br0"]);
        };
        let nodes: Vec<Netns> = (1..=3)
            .map(|i| {
                let ns = Netns::new();
                attach(&ns, &format!("p{i}"));
                ns
            })
            .collect();
        let observer = Netns::new();
        attach(&observer, "p9");
        observer.ip(&["addr", "add", &format!("{}/{}", f.observer, f.len), "dev", "eth0"]);
        observer.ip(&["link", "set", "eth0", "up"]);
        Self { f, switch, nodes, observer, dir }
    }

    /// `cp-<i>`, the shared VIP on eth0, the control-plane endpoint on the VIP (where a
    /// joining member looks for the cluster).
    fn config(&self, i: usize) -> std::path::PathBuf {
        let f = self.f;
        let vip = format!("        vip: {{ip: \"{}\"}}\n", f.vip);
        let cluster = format!("  controlPlane: {{endpoint: \"{}\"}}\n", f.url(f.vip, 6443));
        self.write_config(i, &vip, &cluster)
    }

    fn write_config(&self, i: usize, interface: &str, cluster: &str) -> std::path::PathBuf {
        let (d, f) = (self.dir.path(), self.f);
        let config = d.join(format!("cp-{i}.yaml"));
        std::fs::write(
            &config,
            format!(
                "version: v1alpha1\nmachine:\n  type: controlplane\n  time: {{disabled: true}}\n  \
                 network:\n    hostname: cp-{i}\n    interfaces:\n      - interface: eth0\n        \
                 addresses: [\"{}/{}\"]\n{interface}cluster:\n{cluster}  etcd:\n    ca:\n      \
                 crt: {}\n      key: {}\n",
                f.addr(i),
                f.len,
                b64(&d.join("ca.crt")),
                b64(&d.join("ca.key")),
            ),
        )
        .unwrap();
        config
    }

    /// `etcdctl` from the observer against every member.
    fn etcdctl(&self, args: &[&str]) -> std::process::Output {
        let (d, f) = (self.dir.path(), self.f);
        let endpoints: Vec<String> = (1..=3).map(|i| f.url(&f.addr(i), 2379)).collect();
        let mut all = vec![
            "etcdctl".to_owned(),
            format!("--endpoints={}", endpoints.join(",")),
            format!("--cacert={}", s(&d.join("ca.crt"))),
            format!("--cert={}", s(&d.join("client.crt"))),
            format!("--key={}", s(&d.join("client.key"))),
            "--dial-timeout=2s".to_owned(),
            "--command-timeout=3s".to_owned(),
        ];
        all.extend(args.iter().map(|a| (*a).to_owned()));
        let refs: Vec<&str> = all.iter().map(String::as_str).collect();
        self.observer.exec(&refs)
    }

    /// `(name, started, learner, peer URLs)` of every member, as etcd lists them.
    fn members(&self) -> Vec<(String, bool, bool, String)> {
        let out = self.etcdctl(&["member", "list", "-w", "json"]);
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(&out.stdout) else {
            return Vec::new();
        };
        v["members"]
            .as_array()
            .map(|ms| {
                ms.iter()
                    .map(|m| {
                        (
                            m["name"].as_str().unwrap_or("").to_owned(),
                            m["clientURLs"].as_array().is_some_and(|u| !u.is_empty()),
                            m["isLearner"].as_bool().unwrap_or(false),
                            m["peerURLs"].to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Node `i`'s bridge port was taken off the bridge (the partition).
    fn switch_port_cut(&self, i: usize) -> bool {
        let v = self.switch.ip_json(&["link", "show", &format!("p{i}")]);
        v[0]["master"].as_str() != Some("br0")
    }

    /// Which nodes have the VIP on their link now (1-based).
    fn holders(&self) -> Vec<usize> {
        let vip = format!("eth0/{}/{}", self.f.vip, self.f.vip_len);
        (1..=3).filter(|i| self.nodes[i - 1].addresses().contains(&vip)).collect()
    }

    /// The MAC that answers ARP (or neighbor solicitation) for the VIP from the observer.
    fn vip_owner(&self) -> Option<String> {
        let out = if self.f.vip.contains(':') {
            self.observer.exec(&["ndisc6", "-q", "-r", "1", "-w", "1000", self.f.vip, "eth0"])
        } else {
            self.observer.exec(&["arping", "-c", "1", "-w", "1", "-I", "eth0", self.f.vip])
        };
        let text = String::from_utf8_lossy(&out.stdout).to_lowercase();
        text.split_whitespace()
            .find(|w| w.len() == 17 && w.matches(':').count() == 5)
            .map(str::to_owned)
    }

    fn mac(&self, i: usize) -> String {
        let v = self.nodes[i - 1].ip_json(&["link", "show", "eth0"]);
        v[0]["address"].as_str().unwrap().to_lowercase()
    }
}

impl Drop for Cluster {
    /// Whatever still runs in the node namespaces (an etcd whose keelson was killed) goes.
    fn drop(&mut self) {
        for ns in &self.nodes {
            let out = Command::new("ip").args(["netns", "pids", &ns.name]).output();
            let pids = out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
            for pid in pids.unwrap_or_default().split_whitespace() {
                let _ = Command::new("kill").args(["-KILL", pid]).status();
            }
        }
    }
}

/// `keelson get vipstatus -o yaml` on node `i` (1-based) over its API socket.
fn vipstatus(c: &Cluster, nodes: &[Node], i: usize) -> String {
    let sock = nodes[i - 1].api.clone().unwrap();
    let (ok, out, err) = common::keelson_in(
        &c.nodes[i - 1],
        &["get", "vipstatus", "-o", "yaml", "--socket", sock.to_str().unwrap()],
    );
    assert!(ok, "keelson get vipstatus on cp-{i}: {err}");
    out
}

/// Wait until every node's `VIPStatus` for the VIP holds `want(node)`'s lines: the status
/// follows the election within the loop's 50 ms look at the worker.
fn wait_for_vipstatus(
    c: &Cluster,
    nodes: &[Node],
    what: &str,
    want: impl Fn(usize) -> Vec<String>,
) {
    for i in 1..=3 {
        let last = std::cell::RefCell::new(String::new());
        wait_for(
            &format!("{what} (cp-{i})"),
            Duration::from_secs(10),
            || {
                let y = vipstatus(c, nodes, i);
                let done = y.contains(&format!("vip: {}", c.f.vip))
                    && want(i).iter().all(|l| y.contains(l.as_str()));
                *last.borrow_mut() = y;
                done
            },
            || format!("cp-{i} wants {:?}, shows:\n{}\n{}", want(i), last.borrow(), logs(nodes)),
        );
    }
}

fn logs(nodes: &[Node]) -> String {
    nodes
        .iter()
        .enumerate()
        .map(|(i, n)| format!("--- cp-{} ---\n{}", i + 1, n.log_text()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn wait_for_three_voters(
    c: &Cluster,
    nodes: &[Node],
    what: &str,
) -> Vec<(String, bool, bool, String)> {
    let last = std::cell::RefCell::new(Vec::new());
    wait_for(
        what,
        Duration::from_secs(90),
        || {
            let m = c.members();
            let done =
                m.len() == 3 && m.iter().all(|(_, started, learner, _)| *started && !learner);
            *last.borrow_mut() = m;
            done
        },
        || format!("members: {:?}\n{}", last.borrow(), logs(nodes)),
    );
    last.into_inner()
}

/// Three `keelson run` control planes on one bridge, the VIP as their control-plane endpoint:
/// `cp-1` is bootstrapped, `cp-2` and `cp-3` find the cluster through the VIP, add themselves
/// as learners, start etcd with `--initial-cluster-state=existing` and promote themselves, so
/// `etcdctl member list` shows three started voting members. With `rejoin`, `cp-3` then loses
/// its data and joins again (its stale entry removed first). Then the VIP's holder is cut off
/// the bridge: it lets the address go, and only then does another node take it (polled on
/// every node's link; never two at once), and the VIP answers ARP or NDP from the new holder's
/// MAC. Returns the cluster (for more checks) and the new holder.
fn three_nodes_and_a_failover(
    f: &'static Family,
    rejoin: bool,
    before_cut: impl FnOnce(&Cluster),
) -> (Cluster, Vec<Node>, usize) {
    for tool in ["etcd", "etcdctl", "openssl", "arping", "ndisc6"] {
        assert!(
            Command::new("sh")
                .args(["-c", &format!("command -v {tool}")])
                .status()
                .unwrap()
                .success(),
            "{tool} is missing (scripts/setup installs it)"
        );
    }
    let started = std::time::Instant::now();
    let c = Cluster::new(f);
    let mut nodes: Vec<Node> =
        (1..=3).map(|i| Node::start_api(&c.nodes[i - 1], "", Some(&c.config(i)))).collect();
    let sock = nodes[0].api.clone().unwrap();
    wait_for("cp-1's API socket", T, || sock.exists(), || logs(&nodes));
    let own = format!("eth0/{}/{}", f.addr(1), f.len);
    wait_for("cp-1's address", T, || c.nodes[0].addresses().contains(&own), || logs(&nodes));
    println!("{}", scenario(&c.nodes[0], &nodes[0], "bootstrap"));
    let members = wait_for_three_voters(&c, &nodes, "three started voting members");
    let mut names: Vec<String> = members.iter().map(|m| m.0.clone()).collect();
    names.sort();
    assert_eq!(names, ["cp-1", "cp-2", "cp-3"]);
    // Peers talk over the family's addresses.
    for i in 1..=3 {
        let url = f.url(&f.addr(i), 2380);
        assert!(members.iter().any(|m| m.3.contains(&url)), "{url} not a peer URL: {members:?}");
    }
    for (i, n) in nodes.iter().enumerate().skip(1) {
        let log = n.log_text();
        assert!(log.contains("added as learner"), "cp-{} did not join as a learner:\n{log}", i + 1);
        assert!(log.contains("promoted to a voting member"), "cp-{}:\n{log}", i + 1);
    }
    println!("joined in {:?}", started.elapsed());

    if rejoin {
        // cp-3 loses its data (a new root: an empty /var/lib/etcd) but is still listed: it
        // removes its old entry, adds itself again and is promoted again.
        let (old_log, _) = nodes.pop().unwrap().stop_keeping_root();
        nodes.push(Node::start_api(&c.nodes[2], "", Some(&c.config(3))));
        wait_for(
            "cp-3 promoted again",
            Duration::from_secs(60),
            || nodes[2].log_text().contains("promoted to a voting member"),
            || format!("previous cp-3:\n{old_log}\n{}", logs(&nodes)),
        );
        let log = nodes[2].log_text();
        assert!(log.contains("is this node with an empty data directory: removing it"), "{log}");
        wait_for_three_voters(&c, &nodes, "three voting members again");
        println!("cp-3 rejoined after losing its data at {:?}", started.elapsed());
    }

    // The VIP: exactly one holder, answering with its MAC.
    wait_for("one VIP holder", T, || c.holders().len() == 1, || logs(&nodes));
    let old = c.holders()[0];
    let old_mac = c.mac(old);
    wait_for(
        "the VIP answering from its holder",
        T,
        || c.vip_owner().as_deref() == Some(&old_mac),
        || logs(&nodes),
    );
    before_cut(&c);

    // Cut the holder off the bridge (its processes run on: a partition, the hard case for
    // overlap) and watch every node's link until another holds the VIP.
    let cut = std::time::Instant::now();
    c.switch.ip(&["link", "set", &format!("p{old}"), "nomaster"]);
    let mut timeline: Vec<(Duration, Vec<usize>)> = vec![(Duration::ZERO, vec![old])];
    let new = loop {
        let h = c.holders();
        assert!(
            h.len() <= 1,
            "two nodes hold the VIP at once: {h:?} after {:?}\n{timeline:?}\n{}",
            cut.elapsed(),
            logs(&nodes)
        );
        if timeline.last().map(|(_, l)| l) != Some(&h) {
            timeline.push((cut.elapsed(), h.clone()));
        }
        if let [n] = h.as_slice() {
            if *n != old {
                break *n;
            }
        }
        assert!(
            cut.elapsed() < Duration::from_secs(30),
            "no failover: {timeline:?}\n{}",
            logs(&nodes)
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    println!("failover timeline (since the cut, holders): {timeline:?}");
    // The order: the old holder let go strictly before the new one took the address.
    let dropped = timeline.iter().position(|(_, h)| h.is_empty());
    let taken = timeline.iter().position(|(_, h)| h == &vec![new]);
    assert!(matches!((dropped, taken), (Some(d), Some(t)) if d < t), "{timeline:?}");
    let new_mac = c.mac(new);
    wait_for(
        "the VIP answering from the new holder",
        T,
        || c.vip_owner().as_deref() == Some(&new_mac),
        || logs(&nodes),
    );
    println!("failover to cp-{new} answered {:?} after the cut", cut.elapsed());
    let gone = format!("this node no longer holds {}", f.vip);
    assert!(nodes[old - 1].log_text().contains(&gone), "{}", logs(&nodes));
    println!("whole test: {:?}", started.elapsed());
    (c, nodes, new)
}

#[test]
fn three_control_planes_join_as_learners_and_the_vip_fails_over_without_overlap() {
    if !require_root("three_control_planes_join_as_learners_and_the_vip_fails_over_without_overlap")
    {
        return;
    }
    let (c, nodes, new) = three_nodes_and_a_failover(&V4, true, |_| {});
    // The new holder says so; the third node (not the cut one) waits behind it.
    let yaml = vipstatus(&c, &nodes, new);
    assert!(yaml.contains("state: holding") && yaml.contains("holding: true"), "{yaml}");
    let third = (1..=3).find(|i| *i != new && !c.switch_port_cut(*i)).unwrap();
    let want = format!("reason: waiting behind cp-{new}");
    let last = std::cell::RefCell::new(String::new());
    wait_for(
        "the third node waiting behind the new holder",
        Duration::from_secs(10),
        || {
            *last.borrow_mut() = vipstatus(&c, &nodes, third);
            last.borrow().contains(&want)
        },
        || format!("cp-{third}:\n{}\n{}", last.borrow(), logs(&nodes)),
    );

    // Decommission: the cut node comes back, then a graceful Reset of the holder hands the
    // VIP over, removes its etcd member and wipes it; the other two keep quorum and the VIP.
    for p in 1..=3 {
        c.switch.ip(&["link", "set", &format!("p{p}"), "master", "br0"]);
    }
    wait_for_three_voters(&c, &nodes, "three voting members after the partition");
    // The cut member comes back with a stale log and a raised term (etcd 3.4 runs without
    // pre-vote): wait until raft settled and all three applied the same index, or removing
    // an up-to-date member would leave the two remaining electing for seconds.
    let status = std::cell::RefCell::new(String::new());
    wait_for(
        "the three members in step",
        Duration::from_secs(30),
        || {
            let _ = c.etcdctl(&["put", "before-reset", "ok"]);
            let out = c.etcdctl(&["endpoint", "status", "-w", "json"]);
            *status.borrow_mut() = String::from_utf8_lossy(&out.stdout).into_owned();
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
            let seen: Vec<(i64, i64)> = v
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|e| {
                            let st = &e["Status"];
                            (
                                st["raftTerm"].as_i64().unwrap_or(-1),
                                st["raftAppliedIndex"].as_i64().unwrap_or(-1),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            seen.len() == 3 && seen.iter().all(|x| *x == seen[0] && x.0 > 0)
        },
        || format!("{}\n{}", status.borrow(), logs(&nodes)),
    );
    etcd_calls_on_three_members(&c, &nodes);
    watch_vip(&c, &nodes, "stable holder", &[], T, |h| h == [new]);
    let sock = nodes[new - 1].api.clone().unwrap();
    let asked = std::time::Instant::now();
    let out = common::keelson_in(&c.nodes[new - 1], &["reset", "--socket", sock.to_str().unwrap()]);
    assert!(out.0, "keelson reset of cp-{new}: {out:?}\n{}", logs(&nodes));
    let took = watch_vip(&c, &nodes, "handover on reset", &[], Duration::from_secs(10), |h| {
        h.len() == 1 && h[0] != new
    });
    println!("reset of cp-{new}: another node held the VIP {took:?} later");
    let gone = format!("cp-{new}");
    let members = std::cell::RefCell::new(Vec::new());
    wait_for(
        "two members after the reset",
        Duration::from_secs(20),
        || {
            *members.borrow_mut() = c.members();
            let m = members.borrow();
            m.len() == 2
                && m.iter().all(|(name, started, learner, _)| *name != gone && *started && !learner)
        },
        || format!("members: {:?}\n{}", members.borrow(), logs(&nodes)),
    );
    println!("members {:?} after {:?}", members.borrow(), asked.elapsed());
    let log = nodes[new - 1].log_text();
    assert!(log.contains("leave etcd: member") && log.contains("removed; 2 remain"), "{log}");
    // Quorum: a write goes through the remaining two (once they have a raft leader again,
    // when the removed member was it), and the VIP stays with one of them.
    let err = std::cell::RefCell::new(String::new());
    let wrote = std::time::Instant::now();
    wait_for(
        "a write to the two remaining members",
        Duration::from_secs(15),
        || {
            let put = c.etcdctl(&["put", "after-reset", "ok"]);
            *err.borrow_mut() = String::from_utf8_lossy(&put.stderr).into_owned();
            put.status.success()
        },
        || format!("{}\n{}", err.borrow(), logs(&nodes)),
    );
    println!("a write went through {:?} after the members were two", wrote.elapsed());
    for _ in 0..20 {
        let h = c.holders();
        assert!(h.len() == 1 && h[0] != new, "the VIP after the reset: {h:?}\n{}", logs(&nodes));
        std::thread::sleep(Duration::from_millis(100));
    }
    // EtcdRemoveMemberByID of the other remaining member, asked of one of the two: one
    // member left, which may not leave (EtcdLeaveCluster refused).
    let two = etcdctl_members(&c);
    let (a, b) = ((1..=3).find(|i| *i != new).unwrap(), (1..=3).rev().find(|i| *i != new).unwrap());
    let id_b = two.iter().find(|m| m.1 == format!("cp-{b}")).unwrap().0;
    etcd_call(&c, &nodes, a, &["remove", &id_b.to_string()], "");
    let left = std::cell::RefCell::new(Vec::new());
    wait_for(
        "one member after EtcdRemoveMemberByID",
        Duration::from_secs(10),
        || {
            *left.borrow_mut() = etcdctl_members(&c);
            let l = left.borrow();
            l.len() == 1 && l[0].1 == format!("cp-{a}")
        },
        || format!("members {:?} (before: {two:?})\n{}", left.borrow(), logs(&nodes)),
    );
    etcd_call(&c, &nodes, a, &["leave-last"], "");
    drop(nodes);
}

/// The pids of `comm` in `ns` (e.g. a node's etcd).
fn pids_of(ns: &Netns, comm: &str) -> Vec<String> {
    sh(&["ip", "netns", "pids", &ns.name])
        .split_whitespace()
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == comm)
        })
        .map(str::to_owned)
        .collect()
}

/// Sample every node's link every 50 ms (never two holders among `live`) until `done`
/// holds; returns the time it took. `dead` nodes (powered off) do not count as holders.
fn watch_vip(
    c: &Cluster,
    nodes: &[Node],
    what: &str,
    dead: &[usize],
    limit: Duration,
    done: impl Fn(&[usize]) -> bool,
) -> Duration {
    let start = std::time::Instant::now();
    loop {
        let h: Vec<usize> = c.holders().into_iter().filter(|n| !dead.contains(n)).collect();
        // The links are read one after another: a handover between two reads looks like two
        // holders. It is two only if the first still holds after the second was seen holding.
        let vip = format!("eth0/{}/{}", c.f.vip, c.f.vip_len);
        let both = h.len() > 1 && c.nodes[h[0] - 1].addresses().contains(&vip);
        assert!(!both, "{what}: two holders {h:?} after {:?}\n{}", start.elapsed(), logs(nodes));
        if done(&h) {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < limit,
            "{what}: not within {limit:?} (holders {h:?})\n{}",
            logs(nodes)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// After the partition above (the cut node comes back): a planned `keelson shutdown` of the
/// holder hands the VIP over at once; a `kill -9` of the next holder (keelson and its etcd,
/// its port off the bridge: a power-off) moves the VIP within the lease; then the remaining
/// non-holder's etcd is stopped (SIGSTOP: two of three members gone, quorum lost) and the
/// holder's fence drops the VIP; when that etcd runs again, the VIP comes back.
#[test]
fn the_vip_moves_on_shutdown_and_kill_and_leaves_while_quorum_is_lost() {
    if !require_root("the_vip_moves_on_shutdown_and_kill_and_leaves_while_quorum_is_lost") {
        return;
    }
    let (c, mut nodes, held) = three_nodes_and_a_failover(&V4, false, |_| {});
    // The cut node comes back and queues again; the holder keeps the VIP.
    for p in 1..=3 {
        c.switch.ip(&["link", "set", &format!("p{p}"), "master", "br0"]);
    }
    wait_for_three_voters(&c, &nodes, "three voting members after the partition");
    watch_vip(&c, &nodes, "stable holder", &[], T, |h| h == [held]);
    // Every node says who holds the VIP: the holder itself, the others wait behind it.
    wait_for_vipstatus(&c, &nodes, "the VIP's status", |i| {
        if i == held {
            vec!["holding: true".into(), "state: holding".into(), format!("holder: cp-{held}")]
        } else {
            vec![
                "holding: false".into(),
                "state: waiting".into(),
                format!("holder: cp-{held}"),
                format!("reason: waiting behind cp-{held}"),
            ]
        }
    });

    // Planned: `keelson shutdown` of the holder.
    let sock = nodes[held - 1].api.clone().unwrap();
    let asked = std::time::Instant::now();
    let out =
        common::keelson_in(&c.nodes[held - 1], &["shutdown", "--socket", sock.to_str().unwrap()]);
    // `keelson run` may stop before its answer is out (the request was taken all the same:
    // the handover below shows it).
    assert!(out.0 || out.2.contains("Broken pipe"), "keelson shutdown: {out:?}");
    watch_vip(&c, &nodes, "handover on shutdown", &[], Duration::from_secs(10), |h| {
        h.len() == 1 && h[0] != held
    });
    let took = asked.elapsed();
    let next = c.holders()[0];
    println!("shutdown of cp-{held}: cp-{next} held the VIP {took:?} later");
    assert!(took < Duration::from_millis(1500), "handover took {took:?}");
    // It comes back over its state.
    let (_, root) = nodes.remove(held - 1).stop_keeping_root();
    nodes.insert(held - 1, Node::start_in_api(&c.nodes[held - 1], "", Some(&c.config(held)), root));
    wait_for_three_voters(&c, &nodes, "three voting members after the restart");

    // Ungraceful: everything of the holder killed, its port off the bridge.
    c.switch.ip(&["link", "set", &format!("p{next}"), "nomaster"]);
    sh(&["sh", "-c", &format!("kill -KILL $(ip netns pids {})", c.nodes[next - 1].name)]);
    let took =
        watch_vip(&c, &nodes, "failover after kill -9", &[next], Duration::from_secs(15), |h| {
            h.len() == 1
        });
    let last = c.holders().into_iter().find(|n| *n != next).unwrap();
    println!("kill -9 of cp-{next}: cp-{last} held the VIP {took:?} later");

    // Quorum lost: the third node's etcd stopped too.
    let other = (1..=3).find(|n| *n != next && *n != last).unwrap();
    let etcd = pids_of(&c.nodes[other - 1], "etcd");
    assert_eq!(etcd.len(), 1, "cp-{other}'s etcd: {etcd:?}");
    sh(&["kill", "-STOP", &etcd[0]]);
    let gone = watch_vip(
        &c,
        &nodes,
        "the VIP gone without quorum",
        &[next],
        Duration::from_secs(5),
        |h| h.is_empty(),
    );
    println!("quorum lost: cp-{last} let the VIP go {gone:?} later");
    // Its log says why nobody holds the VIP.
    let log = nodes[last - 1].log_text();
    assert!(log.contains("fenced: no successful keep-alive"), "cp-{last}:\n{log}");
    // And so does its VIPStatus: quorum lost, fenced since its last keep-alive.
    let last_want = [
        "holding: false",
        "state: quorum lost",
        "quorum lost: etcd answers no leader or not in time; fenced: no keep-alive since 20",
    ];
    let y = std::cell::RefCell::new(String::new());
    wait_for(
        "the former holder's VIPStatus saying quorum lost",
        Duration::from_secs(10),
        || {
            *y.borrow_mut() = vipstatus(&c, &nodes, last);
            last_want.iter().all(|l| y.borrow().contains(l))
        },
        || format!("cp-{last}:\n{}\n{}", y.borrow(), logs(&nodes)),
    );
    println!("cp-{last}'s VIPStatus without quorum:\n{}", y.borrow());
    sh(&["kill", "-CONT", &etcd[0]]);
    let back =
        watch_vip(&c, &nodes, "the VIP back with quorum", &[next], Duration::from_secs(30), |h| {
            h.len() == 1
        });
    println!("quorum back: the VIP held again {back:?} later");
}

/// The same over IPv6 only: etcd's peers on IPv6 addresses, the endpoint and the VIP IPv6.
/// tcpdump in the observer sees the new holder's unsolicited Neighbor Advertisements for the
/// VIP (Override set, its MAC as the target link-layer address), and `ndisc6` resolves the
/// VIP to the new holder's MAC.
#[test]
fn an_ipv6_vip_is_announced_with_unsolicited_na_and_fails_over() {
    if !require_root("an_ipv6_vip_is_announced_with_unsolicited_na_and_fails_over") {
        return;
    }
    let capture = std::cell::RefCell::new(None);
    let (c, nodes, new) = three_nodes_and_a_failover(&V6, false, |c| {
        let log = c.dir.path().join("tcpdump.log");
        let tcpdump = common::Background::start(
            &c.observer,
            &["tcpdump", "-i", "eth0", "-e", "-n", "-l", "-v", "icmp6 and ip6[40] == 136"],
            log,
        );
        wait_for(
            "tcpdump to listen",
            T,
            || tcpdump.text().contains("listening on"),
            || tcpdump.text(),
        );
        *capture.borrow_mut() = Some(tcpdump);
    });
    let mut tcpdump = capture.into_inner().unwrap();
    let new_mac = c.mac(new);
    // Three unsolicited NAs (tcpdump -v: flags on the line, the option on the next), from
    // the new holder's MAC to all-nodes, with Override and that MAC as the target address.
    let nas = |text: &str| -> usize {
        let lines: Vec<&str> = text.lines().collect();
        lines
            .iter()
            .enumerate()
            .filter(|(i, l)| {
                let option = lines.get(i + 1).copied().unwrap_or_default();
                l.contains(&format!("{new_mac} > 33:33:00:00:00:01"))
                    && l.contains("hlim 255")
                    && l.contains(&format!("tgt is {}", V6.vip))
                    && l.contains("Flags [override]")
                    && option.contains("destination link-address option")
                    && option.contains(&new_mac)
            })
            .count()
    };
    wait_for(
        "three unsolicited NAs from the new holder",
        Duration::from_secs(10),
        || nas(&tcpdump.text()) >= 3,
        || tcpdump.text(),
    );
    tcpdump.stop();
    assert_eq!(nas(&tcpdump.text()), 3, "{}", tcpdump.text());
    drop(nodes);
}

const V4_DISCOVERY: Family =
    Family { prefix: "10.81.0.", len: 24, vip: "10.81.0.100", vip_len: 32, observer: "10.81.0.50" };

/// Without `cluster.controlPlane.endpoint`, a control plane finds the cluster through the
/// discovery service: `keelson-discovery-server` on the bridge, both nodes publishing
/// themselves (machine type `controlplane`, their addresses); `cp-2` asks `cp-1`, which
/// discovery lists, adds itself as a learner and is promoted.
#[test]
fn a_control_plane_finds_the_cluster_to_join_through_discovery() {
    if !require_root("a_control_plane_finds_the_cluster_to_join_through_discovery") {
        return;
    }
    let server_bin = std::path::Path::new(env!("CARGO_BIN_EXE_keelson"))
        .with_file_name("keelson-discovery-server");
    assert!(
        server_bin.exists(),
        "{} is not built (cargo test --workspace builds it)",
        server_bin.display()
    );
    let c = Cluster::new(&V4_DISCOVERY);
    let server_addr = "10.81.0.200";
    c.switch.ip(&["addr", "add", &format!("{server_addr}/24"), "dev", "br0"]);
    let _server = common::Background::start(
        &c.switch,
        &[&s(&server_bin), "--addr", &format!("{server_addr}:3000")],
        c.dir.path().join("server.log"),
    );
    let cluster = format!(
        "  id: 8XuV9TZHW08DOk3bVxQjH9ih_TBKjnh-j44tsCLSBzo=\n  \
         secret: c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI=\n  discovery:\n    enabled: true\n    \
         registries:\n      kubernetes: {{disabled: true}}\n      \
         service: {{endpoint: \"http://{server_addr}:3000\"}}\n"
    );
    let nodes: Vec<Node> = (1..=2)
        .map(|i| Node::start_api(&c.nodes[i - 1], "", Some(&c.write_config(i, "", &cluster))))
        .collect();
    let sock = nodes[0].api.clone().unwrap();
    wait_for("cp-1's API socket", T, || sock.exists(), || logs(&nodes));
    println!("{}", scenario(&c.nodes[0], &nodes[0], "bootstrap"));
    let last = std::cell::RefCell::new(Vec::new());
    wait_for(
        "two started voting members",
        Duration::from_secs(90),
        || {
            let m = c.members();
            let done =
                m.len() == 2 && m.iter().all(|(_, started, learner, _)| *started && !learner);
            *last.borrow_mut() = m;
            done
        },
        || format!("members: {:?}\n{}", last.borrow(), logs(&nodes)),
    );
    let log = nodes[1].log_text();
    assert!(log.contains("joining the etcd cluster at https://10.81.0.1:2379"), "{log}");
    assert!(log.contains("added as learner"), "{log}");
    assert!(log.contains("promoted to a voting member"), "{log}");

    // `EtcdLeaveCluster` on cp-2 (grpcio, the PyPI Talos bindings): its member is removed,
    // its etcd stops and stays stopped, its data directory is wiped; cp-1 goes on alone.
    let asked = std::time::Instant::now();
    let sock = s(nodes[1].api.as_ref().unwrap());
    common::python_scenario(&c.nodes[1], &nodes[1], "etcd_bootstrap.py", &["leave", &sock]);
    let one = etcdctl_members(&c);
    assert!(one.len() == 1 && one[0].1 == "cp-1", "members after cp-2 left: {one:?}");
    wait_for(
        "cp-2's etcd stopped and its data wiped",
        Duration::from_secs(10),
        || pids_of(&c.nodes[1], "etcd").is_empty() && nodes[1].log_text().contains("wiped"),
        || logs(&nodes),
    );
    let err = std::cell::RefCell::new(String::new());
    wait_for(
        "a write to cp-1 alone",
        Duration::from_secs(10),
        || {
            let put = c.etcdctl(&["put", "after-leave", "ok"]);
            *err.borrow_mut() = String::from_utf8_lossy(&put.stderr).into_owned();
            put.status.success()
        },
        || format!("{}\n{}", err.borrow(), logs(&nodes)),
    );
    // Stopped for good: still no etcd a moment later (not restarted, not joined again).
    std::thread::sleep(Duration::from_secs(2));
    assert!(pids_of(&c.nodes[1], "etcd").is_empty(), "cp-2's etcd runs again\n{}", logs(&nodes));
    assert_eq!(etcdctl_members(&c).len(), 1, "{}", logs(&nodes));
    println!("cp-2 left etcd in {:?}", asked.elapsed());
}
