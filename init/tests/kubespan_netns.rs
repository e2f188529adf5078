// SPDX-License-Identifier: Apache-2.0
//! KubeSpan end to end on a real kernel with WireGuard (Debian's, under virtme-ng): three
//! `keelson run` nodes, each in its own namespace, joined by a bridge in a fourth; every config
//! names the other nodes as peers. Checked through each node's API and the kernel's own tools
//! (`wg show`, `ip route get`, `nft -j`).
#![allow(clippy::disallowed_methods)] // Tests and examples drive keelson from outside: plain threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use common::{require_full_kernel, require_root, sh, wait_for, Netns, Node, TempDir};

const CLUSTER_ID: &str = "8XuV9TZHW08DOk3bVxQjH9ih_TBKjnh-j44tsCLSBzo=";
const CLUSTER_SECRET: &str = "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI=";
/// Handshakes and rotation under TCG emulation: generous.
const UP: Duration = Duration::from_secs(90);

fn wg_key() -> (String, String) {
    let private = sh(&["wg", "genkey"]).trim().to_owned();
    let mut child = Command::new("wg")
        .arg("pubkey")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(private.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (private, String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// One node of the mesh: its namespace, keys, address and MAC (hence its KubeSpan ULA).
struct Member {
    ns: Netns,
    private: String,
    public: String,
    ip: String,
    ula: String,
}

fn ula_of(mac: &str) -> String {
    let subnet =
        kubespan::identity::ula_subnet(CLUSTER_ID, kubespan::identity::ULA_PURPOSE_KUBESPAN);
    kubespan::identity::eui64_address(subnet, &mac.parse().unwrap()).unwrap().to_string()
}

/// `n` members on a bridge in `hub`, 10.77.0.(i+1)/24 on their `eth0`.
fn mesh(hub: &Netns, n: usize) -> Vec<Member> {
    hub.ip(&["link", "add", "br0", "type", "bridge"]);
    hub.ip(&["link", "set", "br0", "up"]);
    (0..n)
        .map(|i| {
            let ns = Netns::new();
            let outside = format!("p{i}");
            ns.veth("eth0", hub, &outside);
            hub.ip(&["link", "set", &outside, "master", "br0"]);
            let mac = format!("02:00:00:00:77:{:02x}", i + 1);
            ns.ip(&["link", "set", "eth0", "address", &mac]);
            let (private, public) = wg_key();
            Member { ns, private, public, ip: format!("10.77.0.{}", i + 1), ula: ula_of(&mac) }
        })
        .collect()
}

/// A peer entry: public key, endpoints, addresses (node IP and KubeSpan ULA), label.
fn peer_yaml(m: &Member, label: &str, endpoints: &[String]) -> String {
    format!(
        "        - publicKey: {}\n          label: {label}\n          endpoints: [{}]\n          addresses: [{}/32, {}/128]\n",
        m.public,
        endpoints.iter().map(|e| format!("\"{e}\"")).collect::<Vec<_>>().join(", "),
        m.ip,
        m.ula
    )
}

fn config(dir: &TempDir, me: &Member, bypass: bool, peers: &str) -> PathBuf {
    let path = dir.path().join("config.yaml");
    let body = format!(
        "version: v1alpha1\nmachine:\n  network:\n    interfaces:\n      - interface: eth0\n        addresses: [{}/24]\n    kubespan:\n      enabled: true\n      allowDownPeerBypass: {bypass}\n      privateKey: {}\n      peers:\n{peers}cluster:\n  id: {CLUSTER_ID}\n  secret: {CLUSTER_SECRET}\n",
        me.ip, me.private
    );
    std::fs::write(&path, body).unwrap();
    path
}

/// `keelson get peers -o json` through the node's API: `(label, state, endpoint, rx, tx)`.
fn peers(node: &Node) -> Vec<(String, String, String, u64, u64)> {
    let sock = node.api.as_ref().unwrap().display().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_keelson"))
        .args(["get", "peers", "-o", "json", "--socket", &sock])
        .output()
        .unwrap();
    if !out.status.success() {
        return Vec::new();
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let mut list: Vec<_> = v
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|r| {
            let s = &r["spec"];
            (
                s["label"].as_str().unwrap_or_default().to_owned(),
                s["state"].as_str().unwrap_or_default().to_owned(),
                s["endpoint"].as_str().unwrap_or_default().to_owned(),
                s["receiveBytes"].as_u64().unwrap_or_default(),
                s["transmitBytes"].as_u64().unwrap_or_default(),
            )
        })
        .collect();
    list.sort();
    list
}

fn state_of(node: &Node, label: &str) -> String {
    peers(node).into_iter().find(|p| p.0 == label).map(|p| p.1).unwrap_or_default()
}

fn nft_set(ns: &Netns, set: &str) -> Vec<String> {
    let out = ns.exec(&["nft", "-j", "list", "set", "inet", "talos_kubespan", set]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let mut elems = Vec::new();
    for item in v["nftables"].as_array().cloned().unwrap_or_default() {
        for e in item["set"]["elem"].as_array().cloned().unwrap_or_default() {
            elems.push(match &e {
                serde_json::Value::String(s) => s.clone(),
                other => {
                    match (other["prefix"]["addr"].as_str(), other["prefix"]["len"].as_u64()) {
                        (Some(a), Some(l)) => format!("{a}/{l}"),
                        _ => other.to_string(),
                    }
                }
            });
        }
    }
    elems
}

/// Does a set element (`a.b.c.d` or `a.b.c.d/len`) contain `ip`?
fn covers(elems: &[String], ip: &str) -> bool {
    let ip: std::net::IpAddr = ip.parse().unwrap();
    elems.iter().any(|e| {
        let net: Option<ipnet::IpNet> = if e.contains('/') {
            e.parse().ok()
        } else {
            e.parse::<std::net::IpAddr>().ok().map(ipnet::IpNet::from)
        };
        net.is_some_and(|n| n.contains(&ip))
    })
}

fn ping(ns: &Netns, to: &str) -> bool {
    ns.exec(&["ping", "-c", "1", "-W", "2", to]).status.success()
}

fn logs(nodes: &[&Node]) -> String {
    nodes.iter().map(|n| n.log_text()).collect::<Vec<_>>().join("\n=====\n")
}

#[test]
fn three_nodes_mesh_route_and_converge() {
    let test = "three_nodes_mesh_route_and_converge";
    if !require_root(test) || !require_full_kernel(test) {
        return;
    }
    let hub = Netns::new();
    let m = mesh(&hub, 3);
    let ep = |i: usize| format!("{}:51820", m[i].ip);
    // Node 1 reaches node 2 only after rotating past a dead first endpoint; node 2 knows no
    // endpoint for node 1, so the tunnel cannot come up from its side (no roaming shortcut).
    let dirs: Vec<TempDir> = (0..3).map(|_| TempDir::new()).collect();
    let c0 = config(
        &dirs[0],
        &m[0],
        false,
        &(peer_yaml(&m[1], "node-2", &["10.77.0.99:51820".into(), ep(1)])
            + &peer_yaml(&m[2], "node-3", &[ep(2)])),
    );
    let c1 = config(
        &dirs[1],
        &m[1],
        false,
        &(peer_yaml(&m[0], "node-1", &[]) + &peer_yaml(&m[2], "node-3", &[ep(2)])),
    );
    let c2 = config(
        &dirs[2],
        &m[2],
        false,
        &(peer_yaml(&m[0], "node-1", &[ep(0)]) + &peer_yaml(&m[1], "node-2", &[ep(1)])),
    );
    // Someone else's table in node 1's namespace: it sets a mark bit of its own (0x1000) on
    // everything it sends, before our chains run, and counts packets that leave with both
    // that bit and our 0x40. Ours must preserve it; the table must survive every change.
    let nft_in = |ns: &Netns, script: &str| {
        let path = dirs[0].path().join("foreign.nft");
        std::fs::write(&path, script).unwrap();
        ns.sh(&["nft", "-f", &path.display().to_string()]);
    };
    nft_in(
        &m[0].ns,
        "table inet foreign {\n\
         chain tagout { type route hook output priority -10; meta mark set meta mark | 0x1000; }\n\
         chain verify { type filter hook output priority 10; meta mark & 0x1060 == 0x1040 counter; }\n\
         }\n",
    );
    let n0 = Node::start_api(&m[0].ns, "", Some(&c0));
    let n1 = Node::start_api(&m[1].ns, "", Some(&c1));
    let n2 = Node::start_api(&m[2].ns, "", Some(&c2));
    let all = [&n0, &n1, &n2];

    for (i, node) in all.iter().enumerate() {
        wait_for(
            &format!("node {} sees both peers up", i + 1),
            UP,
            || {
                let p = peers(node);
                p.len() == 2 && p.iter().all(|x| x.1 == "up")
            },
            || format!("{:?}\n{}", peers(node), logs(&all)),
        );
    }
    // The rotation: node 1 moved to node 2's second endpoint.
    let to2 = peers(&n0).into_iter().find(|p| p.0 == "node-2").unwrap();
    assert_eq!(to2.2, ep(1), "{to2:?}");
    assert!(
        n0.log_text().contains("trying endpoint 10.77.0.99:51820")
            && n0.log_text().contains(&format!("trying endpoint {}", ep(1))),
        "{}",
        n0.log_text()
    );

    // Traffic to the peers' ULAs and node addresses goes through the tunnel.
    let before = peers(&n0);
    assert!(ping(&m[0].ns, &m[1].ula), "ping ULA\n{}", logs(&all));
    assert!(ping(&m[0].ns, &m[2].ip), "ping node address\n{}", logs(&all));
    // The status refreshes the counters every few seconds once every peer is up.
    wait_for(
        "rx/tx of both peers grow",
        Duration::from_secs(30),
        || {
            let after = peers(&n0);
            after.len() == before.len()
                && before.iter().zip(&after).all(|(b, a)| a.3 > b.3 && a.4 > b.4)
        },
        || format!("{before:?} -> {:?}", peers(&n0)),
    );
    let route = m[0].ns.ip(&["route", "get", &m[1].ip, "mark", "0x40"]);
    assert!(route.contains("table 180") && route.contains("dev kubespan"), "{route}");
    let plain = m[0].ns.ip(&["route", "get", &m[1].ip]);
    assert!(plain.contains("dev eth0"), "{plain}");
    let v4 = nft_set(&m[0].ns, "kubespan_targets_ipv4");
    assert!(covers(&v4, &m[1].ip) && covers(&v4, &m[2].ip), "{v4:?}");
    assert!(!covers(&v4, "10.77.0.99"), "{v4:?}");
    // Our table has Talos's KubeSpan shape; the foreign table is intact and saw its bit kept.
    let ours = m[0].ns.sh(&["nft", "-j", "list", "table", "inet", "talos_kubespan"]);
    for name in [
        "kubespan_prerouting",
        "kubespan_outgoing",
        "kubespan_targets_ipv4",
        "kubespan_targets_ipv6",
    ] {
        assert!(ours.contains(&format!("\"{name}\"")), "{name} missing: {ours}");
    }
    let foreign = m[0].ns.sh(&["nft", "-j", "list", "table", "inet", "foreign"]);
    let v: serde_json::Value = serde_json::from_str(&foreign).unwrap();
    let packets: u64 = v["nftables"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["rule"]["expr"].as_array())
        .flatten()
        .filter_map(|e| e["counter"]["packets"].as_u64())
        .sum();
    assert!(packets > 0, "no packet left with 0x1000 and 0x40: {foreign}");
    // The kernel's own view agrees with the API: two peers with a handshake.
    let wg = m[0].ns.sh(&["wg", "show", "kubespan", "latest-handshakes"]);
    assert_eq!(wg.lines().filter(|l| !l.ends_with("\t0")).count(), 2, "{wg}");

    for n in [n0, n1, n2] {
        n.stop();
    }
}

/// `wg show kubespan endpoints` of one peer.
fn wg_endpoint(ns: &Netns, public: &str) -> String {
    let out = ns.sh(&["wg", "show", "kubespan", "endpoints"]);
    out.lines()
        .find_map(|l| l.strip_prefix(public).map(|e| e.trim().to_owned()))
        .unwrap_or_default()
}

#[test]
fn a_roamed_peer_keeps_the_kernels_endpoint_across_a_reload() {
    let test = "a_roamed_peer_keeps_the_kernels_endpoint_across_a_reload";
    if !require_root(test) || !require_full_kernel(test) {
        return;
    }
    let hub = Netns::new();
    let m = mesh(&hub, 2);
    let ep = |i: usize| format!("{}:51820", m[i].ip);
    // Node 1 knows only a dead endpoint for node 2; node 2 knows node 1's real one. The
    // tunnel comes up from node 2's side and node 1's WireGuard roams to node 2's address.
    let dirs: Vec<TempDir> = (0..2).map(|_| TempDir::new()).collect();
    let dead = "10.77.0.99:51820".to_owned();
    let c0 =
        config(&dirs[0], &m[0], false, &peer_yaml(&m[1], "node-2", std::slice::from_ref(&dead)));
    let c1 = config(&dirs[1], &m[1], false, &peer_yaml(&m[0], "node-1", &[ep(0)]));
    let n0 = Node::start_api(&m[0].ns, "", Some(&c0));
    let n1 = Node::start_api(&m[1].ns, "", Some(&c1));
    let all = [&n0, &n1];
    wait_for(
        "node 1 sees node 2 up",
        UP,
        || state_of(&n0, "node-2") == "up",
        || format!("{:?}\n{}", peers(&n0), logs(&all)),
    );
    // The status, the log and the kernel agree on the endpoint in use: the roamed one.
    let kernel = wg_endpoint(&m[0].ns, &m[1].public);
    assert_eq!(kernel, ep(1), "{}", logs(&all));
    let api = peers(&n0).into_iter().find(|p| p.0 == "node-2").unwrap();
    assert_eq!(api.2, ep(1), "{api:?}");
    let log = n0.log_text();
    assert!(!log.contains(&format!("up via {dead}")), "{log}");

    // A reload that only adds an allowed IP to that peer must leave the roamed endpoint.
    let extra = "10.200.0.0/24";
    let body = std::fs::read_to_string(&c0).unwrap().replace(
        &format!("addresses: [{}/32,", m[1].ip),
        &format!("addresses: [{extra}, {}/32,", m[1].ip),
    );
    assert!(body.contains(extra), "{body}");
    let staged = dirs[0].path().join("config.yaml.new");
    std::fs::write(&staged, body).unwrap();
    std::fs::rename(&staged, &c0).unwrap();
    wait_for(
        "the new allowed IP reaches WireGuard",
        Duration::from_secs(60),
        || m[0].ns.sh(&["wg", "show", "kubespan", "allowed-ips"]).contains(extra),
        || logs(&all),
    );
    // Watch a while: the kernel's endpoint never goes back to the dead one.
    for _ in 0..20 {
        let now = wg_endpoint(&m[0].ns, &m[1].public);
        assert_eq!(now, ep(1), "re-pointed after the reload\n{}", logs(&all));
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(state_of(&n0, "node-2"), "up");
    for n in [n0, n1] {
        n.stop();
    }
}

#[test]
fn down_peer_leaves_the_sets_with_bypass() {
    let test = "down_peer_leaves_the_sets_with_bypass";
    if !require_root(test) || !require_full_kernel(test) {
        return;
    }
    let hub = Netns::new();
    let m = mesh(&hub, 2);
    let ep = |i: usize| format!("{}:51820", m[i].ip);
    let dirs: Vec<TempDir> = (0..2).map(|_| TempDir::new()).collect();
    let c0 = config(&dirs[0], &m[0], true, &peer_yaml(&m[1], "node-2", &[ep(1)]));
    let c1 = config(&dirs[1], &m[1], true, &peer_yaml(&m[0], "node-1", &[ep(0)]));
    let n0 = Node::start_api(&m[0].ns, "", Some(&c0));
    let n1 = Node::start_api(&m[1].ns, "", Some(&c1));
    wait_for("node-2 up", UP, || state_of(&n0, "node-2") == "up", || logs(&[&n0, &n1]));
    wait_for(
        "node-2's address in the set",
        Duration::from_secs(10),
        || covers(&nft_set(&m[0].ns, "kubespan_targets_ipv4"), &m[1].ip),
        || format!("{:?}", nft_set(&m[0].ns, "kubespan_targets_ipv4")),
    );
    // Take node 2 away: its keelson stops and its side of the wire goes down.
    n1.stop();
    m[1].ns.ip(&["link", "set", "eth0", "down"]);
    // Down once the last handshake is older than the peer-down interval (275 s).
    wait_for(
        "node-2 down",
        Duration::from_secs(400),
        || state_of(&n0, "node-2") == "down",
        || format!("{:?}\n{}", peers(&n0), n0.log_text()),
    );
    wait_for(
        "node-2's address out of the set",
        Duration::from_secs(10),
        || !covers(&nft_set(&m[0].ns, "kubespan_targets_ipv4"), &m[1].ip),
        || format!("{:?}", nft_set(&m[0].ns, "kubespan_targets_ipv4")),
    );
    // Bypassed: the node address is reached over the plain network again (no mark).
    let route = m[0].ns.ip(&["route", "get", &m[1].ip]);
    assert!(route.contains("dev eth0"), "{route}");
    n0.stop();
}

/// `wg show kubespan <what>`'s value for peer `public`, or "" (no device yet, no such peer).
fn wg_value(ns: &Netns, what: &str, public: &str) -> String {
    let out = ns.exec(&["wg", "show", "kubespan", what]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix(public).map(|v| v.trim().to_owned()))
        .unwrap_or_default()
}

#[test]
fn both_first_initiations_lost_still_up_within_seconds() {
    let test = "both_first_initiations_lost_still_up_within_seconds";
    if !require_root(test) || !require_full_kernel(test) {
        return;
    }
    use std::time::Instant;
    let hub = Netns::new();
    let m = mesh(&hub, 2);
    // The worst order: each node's first handshake initiation is lost, as when each reaches a
    // node that does not know us yet. An nftables quota on each node drops exactly that
    // packet (the first WireGuard message of type 1 it sends: one initiation, at most 176
    // bytes, fits under the quota, two do not), so the loss does not hang on timing.
    for me in &m {
        me.ns.sh(&["nft", "add", "table", "inet", "lose"]);
        me.ns.sh(&[
            "nft",
            "add",
            "chain",
            "inet",
            "lose",
            "out",
            "{ type filter hook output priority 0; }",
        ]);
        me.ns.sh(&[
            "nft", "add", "rule", "inet", "lose", "out", "udp", "dport", "51820", "@th,64,8", "1",
            "quota", "until", "200", "bytes", "counter", "drop",
        ]);
    }
    // Both start with no peer, and learn each other in one config reload written to both at
    // once: the two nodes' initiations leave within a moment of each other, as two booting
    // nodes' do, whatever the emulated CPUs' start-up times.
    let dirs: Vec<TempDir> = (0..2).map(|_| TempDir::new()).collect();
    let ep = |i: usize| format!("{}:51820", m[i].ip);
    let labels = ["node-1", "node-2"];
    let full: Vec<(PathBuf, String)> = (0..2)
        .map(|i| {
            let path =
                config(&dirs[i], &m[i], false, &peer_yaml(&m[1 - i], labels[1 - i], &[ep(1 - i)]));
            let body = std::fs::read_to_string(&path).unwrap();
            let lonely = body.replace(&peer_yaml(&m[1 - i], labels[1 - i], &[ep(1 - i)]), "");
            std::fs::write(&path, lonely.replace("      peers:\n", "      peers: []\n")).unwrap();
            (path, body)
        })
        .collect();
    let n0 = Node::start_api(&m[0].ns, "", Some(&full[0].0));
    let n1 = Node::start_api(&m[1].ns, "", Some(&full[1].0));
    let all = [&n0, &n1];
    let device_up = |i: usize| {
        let out = m[i].ns.exec(&["ip", "-o", "link", "show", "kubespan"]);
        String::from_utf8_lossy(&out.stdout).contains(",UP")
    };
    wait_for("both KubeSpan devices up", UP, || device_up(0) && device_up(1), || logs(&all));
    for (i, (path, body)) in full.iter().enumerate() {
        let staged = dirs[i].path().join("config.yaml.new");
        std::fs::write(&staged, body).unwrap();
        std::fs::rename(&staged, path).unwrap();
    }
    // A node has sent its first initiation once the peer is on its running device (the kernel
    // sends one as a peer with a persistent keepalive is added to a running device).
    let start = Instant::now();
    let mut sent: [Option<Instant>; 2] = [None, None];
    while sent.contains(&None) {
        assert!(start.elapsed() < UP, "the peers never reached WireGuard\n{}", logs(&all));
        for (i, at) in sent.iter_mut().enumerate() {
            if at.is_none() && wg_value(&m[i].ns, "endpoints", &m[1 - i].public) == ep(1 - i) {
                *at = Some(Instant::now());
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let first = sent.iter().flatten().min().copied().unwrap();
    let handshake = |i: usize| {
        wg_value(&m[i].ns, "latest-handshakes", &m[1 - i].public).parse::<u64>().unwrap_or(0) > 0
    };
    while !(handshake(0) && handshake(1)) {
        assert!(start.elapsed() < UP, "no handshake\n{}", logs(&all));
        std::thread::sleep(Duration::from_millis(20));
    }
    let took = first.elapsed();
    let skew = sent.iter().flatten().max().unwrap().duration_since(first);
    // Each node did lose its first initiation, and only that.
    for me in &m {
        let rule = me.ns.sh(&["nft", "list", "chain", "inet", "lose", "out"]);
        assert!(rule.contains("counter packets 1 "), "{rule}");
    }
    // A correctness bound, not a benchmark: on its own, WireGuard sends the next initiation
    // REKEY_TIMEOUT (5 s, plus up to 1/3 s of jitter) after the lost one, which left no later
    // than `first`. Under 4 s means keelson asked for one sooner (after 1 s, then 2 s more):
    // without that this takes about 5 s, at least ~4.5 s allowing for the polling's lag.
    assert!(
        took < Duration::from_secs(4),
        "took {took:?} (second node {skew:?} later)\n{}",
        logs(&all)
    );
    eprintln!("up {took:?} after the first initiation (second node {skew:?} later)");
    for n in [n0, n1] {
        n.stop();
    }
}
