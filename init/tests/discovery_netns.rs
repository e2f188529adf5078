// SPDX-License-Identifier: Apache-2.0
//! KubeSpan through discovery alone, on a real kernel with WireGuard (Debian's, under
//! virtme-ng): `keelson-discovery-server` on a bridge in its own namespace and three
//! `keelson run` nodes with KubeSpan on and no `peers:` in their configs. Checked through each
//! node's API, `ping` through the tunnel, and the server's process memory and snapshot file.
#![allow(clippy::disallowed_methods)] // Tests and examples drive keelson from outside: plain threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module,
    clippy::needless_range_loop
)]

mod common;

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{require_full_kernel, require_root, wait_for, Background, Netns, Node, TempDir};

const CLUSTER_ID: &str = "8XuV9TZHW08DOk3bVxQjH9ih_TBKjnh-j44tsCLSBzo=";
const CLUSTER_SECRET: &str = "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI=";
const SERVER: &str = "10.78.0.100:3000";
/// Discovery, handshakes and emulation: generous.
const UP: Duration = Duration::from_secs(120);

fn server_bin() -> PathBuf {
    let bin = Path::new(env!("CARGO_BIN_EXE_keelson")).with_file_name("keelson-discovery-server");
    assert!(bin.exists(), "{} is not built (cargo test --workspace builds it)", bin.display());
    bin
}

fn start_server(hub: &Netns, dir: &TempDir, snapshot: &Path, n: u32) -> Background {
    let bin = server_bin().display().to_string();
    let snap = snapshot.display().to_string();
    Background::start(
        hub,
        &[&bin, "--addr", SERVER, "--snapshot", &snap, "--gc-interval", "1s"],
        dir.path().join(format!("server-{n}.log")),
    )
}

struct Box3 {
    ns: Netns,
    ip: String,
    name: String,
}

fn nodes(hub: &Netns, n: usize) -> Vec<Box3> {
    // The test's curl reaches the server on the hub's own address, through its loopback.
    hub.ip(&["link", "set", "lo", "up"]);
    hub.ip(&["link", "add", "br0", "type", "bridge"]);
    hub.ip(&["addr", "add", "10.78.0.100/24", "dev", "br0"]);
    hub.ip(&["link", "set", "br0", "up"]);
    (0..n)
        .map(|i| {
            let ns = Netns::new();
            let outside = format!("d{i}");
            ns.veth("eth0", hub, &outside);
            hub.ip(&["link", "set", &outside, "master", "br0"]);
            ns.ip(&["link", "set", "eth0", "address", &format!("02:00:00:00:78:{:02x}", i + 1)]);
            Box3 { ns, ip: format!("10.78.0.{}", i + 1), name: format!("disc-node-{}", i + 1) }
        })
        .collect()
}

fn config(dir: &TempDir, b: &Box3) -> PathBuf {
    let path = dir.path().join(format!("{}.yaml", b.name));
    let body = format!(
        "version: v1alpha1\nmachine:\n  network:\n    hostname: {}\n    interfaces:\n      - interface: eth0\n        addresses: [{}/24]\n    kubespan:\n      enabled: true\ncluster:\n  id: {CLUSTER_ID}\n  secret: {CLUSTER_SECRET}\n  discovery:\n    enabled: true\n    registries:\n      kubernetes: {{disabled: true}}\n      service: {{endpoint: \"http://{SERVER}\", ttl: 20s}}\n",
        b.name, b.ip
    );
    std::fs::write(&path, body).unwrap();
    path
}

fn get(node: &Node, what: &str) -> Vec<serde_json::Value> {
    let sock = node.api.as_ref().unwrap().display().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_keelson"))
        .args(["get", what, "-o", "json", "--socket", &sock])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v.as_array().cloned().unwrap_or_default()
}

/// `(label, state)` of each peer, sorted.
fn peers(node: &Node) -> Vec<(String, String)> {
    let mut list: Vec<_> = get(node, "peers")
        .iter()
        .map(|r| {
            let s = &r["spec"];
            (
                s["label"].as_str().unwrap_or_default().to_owned(),
                s["state"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    list.sort();
    list
}

fn all_up(node: &Node, labels: &[&str]) -> bool {
    let p = peers(node);
    p.len() == labels.len() && p.iter().zip(labels).all(|(p, l)| p.0 == *l && p.1 == "up")
}

/// The node's KubeSpan address, from its identity.
fn kubespan_ip(node: &Node) -> String {
    let ids = get(node, "kubespanidentities");
    let addr = ids[0]["spec"]["address"].as_str().unwrap();
    addr.split('/').next().unwrap().to_owned()
}

/// The server's `/stats` count of affiliates (None while it does not answer).
fn server_affiliates(hub: &Netns) -> Option<u64> {
    let out = hub.exec(&["curl", "-s", "-m", "3", &format!("http://{SERVER}/stats")]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    v["affiliates"].as_u64()
}

fn ping(ns: &Netns, to: &str) -> bool {
    ns.exec(&["ping", "-c", "1", "-W", "3", to]).status.success()
}

fn logs(nodes: &[&Node], server: &Background) -> String {
    let mut s: Vec<String> = nodes.iter().map(|n| n.log_text()).collect();
    s.push(format!("server:\n{}", server.text()));
    s.join("\n=====\n")
}

/// Every readable, writable private mapping of `pid` (heap, stacks, anonymous memory).
fn memory_of(pid: u32) -> Vec<u8> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let mut mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    let mut out = Vec::new();
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms)) = (f.next(), f.next()) else { continue };
        if !perms.starts_with("rw") {
            continue;
        }
        let (a, b) = range.split_once('-').unwrap();
        let (a, b) = (u64::from_str_radix(a, 16).unwrap(), u64::from_str_radix(b, 16).unwrap());
        let mut buf = vec![0u8; (b - a) as usize];
        if mem.seek(SeekFrom::Start(a)).is_ok() && mem.read_exact(&mut buf).is_ok() {
            out.extend_from_slice(&buf);
        }
    }
    out
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// What only the encrypted payloads carry (the hostnames, KubeSpan addresses and WireGuard
/// keys) appears nowhere in `bytes`. The node addresses are not checked: the server sees
/// them anyway, as the TCP peers and in Hello's answer.
fn assert_opaque(what: &str, bytes: &[u8], secrets: &[(String, Vec<u8>)]) {
    for (name, needle) in secrets {
        assert!(!contains(bytes, needle), "{what} holds {name} in clear");
    }
}

#[test]
fn three_nodes_mesh_through_discovery_alone() {
    let test = "three_nodes_mesh_through_discovery_alone";
    if !require_root(test) || !require_full_kernel(test) {
        return;
    }
    let hub = Netns::new();
    let boxes = nodes(&hub, 3);
    let dir = TempDir::new();
    let snapshot = dir.path().join("state.binpb");
    let mut server = start_server(&hub, &dir, &snapshot, 1);
    let cfgs: Vec<PathBuf> = boxes.iter().map(|b| config(&dir, b)).collect();
    let mut n: Vec<Option<Node>> =
        (0..3).map(|i| Some(Node::start_api(&boxes[i].ns, "", Some(&cfgs[i])))).collect();
    let labels = |i: usize| -> Vec<&str> {
        (0..3).filter(|j| *j != i).map(|j| boxes[j].name.as_str()).collect()
    };
    let live = |n: &[Option<Node>]| -> String {
        let refs: Vec<&Node> = n.iter().flatten().collect();
        refs.iter().map(|x| x.log_text()).collect::<Vec<_>>().join("\n=====\n")
    };

    // 1. No peer lists: every node learns the two others from the service.
    for i in 0..3 {
        let me = n[i].as_ref().unwrap();
        wait_for(
            &format!("{} sees both peers up", boxes[i].name),
            UP,
            || all_up(me, &labels(i)),
            || format!("{:?}\n{}\nserver:\n{}", peers(me), live(&n), server.text()),
        );
    }
    let ks: Vec<String> = (0..3).map(|i| kubespan_ip(n[i].as_ref().unwrap())).collect();
    for i in 0..3 {
        for j in (0..3).filter(|j| *j != i) {
            assert!(ping(&boxes[i].ns, &ks[j]), "{} -> KubeSpan {}\n{}", i, ks[j], live(&n));
            assert!(ping(&boxes[i].ns, &boxes[j].ip), "{} -> {}\n{}", i, boxes[j].ip, live(&n));
        }
    }
    // The node addresses go through the tunnel, not the bridge.
    let route = boxes[0].ns.ip(&["route", "get", &boxes[1].ip, "mark", "0x40"]);
    assert!(route.contains("dev kubespan"), "{route}");
    let members = get(n[0].as_ref().unwrap(), "members");
    let mut names: Vec<&str> =
        members.iter().filter_map(|m| m["metadata"]["id"].as_str()).collect();
    names.sort();
    assert_eq!(names, ["disc-node-1", "disc-node-2", "disc-node-3"], "{members:?}");
    let os = members[0]["spec"]["operatingSystem"].as_str().unwrap_or_default();
    assert!(os.starts_with("keelson (v"), "{members:?}");

    // 2. The server never sees a hostname or an address in clear: not in its memory, not in
    // its snapshot (written at a clean stop).
    let mut secrets: Vec<(String, Vec<u8>)> = Vec::new();
    for i in 0..3 {
        secrets.push((boxes[i].name.clone(), boxes[i].name.as_bytes().to_vec()));
        let ula: std::net::Ipv6Addr = ks[i].parse().unwrap();
        secrets.push((ks[i].clone(), ula.octets().to_vec()));
        let ids = get(n[i].as_ref().unwrap(), "kubespanidentities");
        let key = ids[0]["spec"]["publicKey"].as_str().unwrap().to_owned();
        secrets.push((key.clone(), key.into_bytes()));
    }
    assert_opaque("the server's memory", &memory_of(server.pid()), &secrets);
    server.terminate();
    let snap = std::fs::read(&snapshot).unwrap();
    assert!(snap.len() > 100, "snapshot of {} bytes", snap.len());
    assert_opaque("the snapshot", &snap, &secrets);

    // 3. Restarted from its snapshot: it knows the three at once; the mesh stays up.
    let mut server = start_server(&hub, &dir, &snapshot, 2);
    wait_for(
        "the snapshot is loaded",
        UP,
        || server_affiliates(&hub) == Some(3),
        || format!("{:?}\n{}\nserver:\n{}", server_affiliates(&hub), live(&n), server.text()),
    );
    std::thread::sleep(Duration::from_secs(10));
    for i in 0..3 {
        let me = n[i].as_ref().unwrap();
        assert!(all_up(me, &labels(i)), "{:?}\n{}", peers(me), logs(&[me], &server));
    }
    // 4. Restarted empty (its state lost): the peers stay while the nodes publish again.
    server.stop();
    let empty = dir.path().join("empty.binpb");
    let mut server = start_server(&hub, &dir, &empty, 3);
    wait_for(
        "every node registered again with the empty server",
        UP,
        || server_affiliates(&hub) == Some(3),
        || format!("{}\nserver:\n{}", live(&n), server.text()),
    );
    for i in 0..3 {
        let me = n[i].as_ref().unwrap();
        assert!(all_up(me, &labels(i)), "{:?}\n{}", peers(me), logs(&[me], &server));
        assert!(!me.log_text().contains("left the service's list"), "{}", me.log_text());
    }
    assert!(ping(&boxes[0].ns, &ks[2]), "{}", live(&n));

    // 5. Service down, node 3 restarts: its cached affiliates mesh it again.
    server.stop();
    let (_, root) = n[2].take().unwrap().stop_keeping_root();
    let restarted = Node::start_in_api(&boxes[2].ns, "", Some(&cfgs[2]), root);
    wait_for(
        "node 3 meshes again from its cache",
        UP,
        || all_up(&restarted, &labels(2)),
        || format!("{:?}\n{}", peers(&restarted), restarted.log_text()),
    );
    assert!(
        restarted.log_text().contains("affiliate(s) from the last run"),
        "{}",
        restarted.log_text()
    );
    assert!(ping(&boxes[2].ns, &ks[0]), "{}", restarted.log_text());

    // 6. Node 3 leaves for good: once its TTL (20 s) and the grace are over, it is no
    // longer a peer of the others.
    let mut server = start_server(&hub, &dir, &empty, 4);
    std::thread::sleep(Duration::from_secs(10));
    drop(restarted.stop());
    for i in 0..2 {
        let me = n[i].as_ref().unwrap();
        wait_for(
            &format!("{} drops the node that left", boxes[i].name),
            Duration::from_secs(240),
            || peers(me).len() == 1,
            || format!("{:?}\n{}\nserver:\n{}", peers(me), me.log_text(), server.text()),
        );
    }
    server.terminate();
    for x in n.into_iter().flatten() {
        x.stop();
    }
}
