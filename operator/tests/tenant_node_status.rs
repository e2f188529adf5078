// SPDX-License-Identifier: Apache-2.0
//! `keelson get networks` on a keelson node, end to end on a kernel with VRF and VXLAN
//! (`KEELSON_FULL_KERNEL=1`, the VM suite). In one network namespace: a real etcd, the
//! operator's controller (in this process), the real `keelson-operator tenant-agent`
//! realising the NodeNetworks in the kernel and writing its status file, and `keelson run`
//! reading that file into `TenantNetworkStatus` resources. The node shows both peered
//! networks Ready with their devices and the peer's prefixes; when one side is deleted its
//! network leaves the node and the other shows no peer (its peering is Pending in the
//! operator's store).
#![allow(clippy::disallowed_methods)] // Tests drive the parts from outside.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use operator::ctl;
use operator::key::Layout;
use operator::kinds::Kind;
use operator::networks::allocate::{Allocator, Range};
use operator::networks::controller::Controller;
use operator::networks::kinds::{NetState, Network, NETWORKS};
use operator::store::Store;
use testkit::{require_full_kernel, Netns};

const PREFIX: &str = "/keelson-operator";

fn net(s: &mut Store, name: &str) -> Network {
    s.get("default", NETWORKS, name).unwrap().unwrap()
}

/// `keelson get networks -o yaml` over the node's socket.
fn networks(bin: &Path, sock: &Path) -> String {
    let out = Command::new(bin)
        .args(["get", "networks", "-o", "yaml", "--socket"])
        .arg(sock)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Run the controller's passes until `done` holds for the node's networks (or panic).
fn until(
    what: &str,
    c: &mut Controller,
    s: &mut Store,
    bin: &Path,
    sock: &Path,
    log: &Path,
    done: impl Fn(&str) -> bool,
) -> String {
    let end = Instant::now() + Duration::from_secs(90);
    loop {
        c.pass(s).unwrap();
        let y = networks(bin, sock);
        if done(&y) {
            return y;
        }
        if Instant::now() > end {
            let log = std::fs::read_to_string(log).unwrap_or_default();
            panic!("timed out waiting for {what}\nnetworks:\n{y}\nnode log:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn keelson_get_networks_shows_what_the_agent_realised() {
    if !require_full_kernel("keelson_get_networks_shows_what_the_agent_realised") {
        return;
    }
    let Some(bin) = common::keelson_bin() else {
        testkit::skip_or_fail("keelson_get_networks_shows_what_the_agent_realised: no keelson binary (cargo build -p keelson, or KEELSON_BIN)");
        return;
    };
    // This thread, and every process it starts, lives in the node's namespace: etcd, the
    // agent (whose devices go there) and the node.
    let ns = Netns::new();
    ns.ip(&["link", "set", "lo", "up"]);
    ns.enter();
    let Some((etcd, _dir)) = common::start_etcd("tn", "node-status") else { return };
    let mut s = Store::new(etcd.client(), Layout::new(PREFIX, PREFIX.as_bytes()));
    let mut c = Controller::new(Allocator::new(Range::default()), "default");

    let root = common::temp("tn", "node-root");
    let sock = root.0.join("api.sock");
    let log = root.0.join("keelson.log");
    let node = Command::new(&bin)
        .args(["run", "--cmdline", ""])
        .arg("--root")
        .arg(&root.0)
        .arg("--state")
        .arg(root.0.join("state"))
        .arg("--api-socket")
        .arg(&sock)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::create(root.0.join("keelson.err")).unwrap())
        .spawn()
        .unwrap();
    let _node = common::Killed(node, root.0.join("state"));
    let status = root.0.join("run/keelson/tenant-networks.json");
    let agent = Command::new(env!("CARGO_BIN_EXE_keelson-operator"))
        .args(["tenant-agent", "--node", "n1", "--interval", "1", "--prefix", PREFIX])
        .args(["--etcd-endpoints", &etcd.client_url])
        .arg("--status-file")
        .arg(&status)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let _agent = common::Killed(agent, root.0.join("agent-none"));

    let t0 = Instant::now();
    ctl::apply(&mut s, common::PEERED_NETWORKS).unwrap();
    let both_ready = |y: &str| y.matches("state: Ready").count() == 4;
    let yaml =
        until("both networks Ready on the node", &mut c, &mut s, &bin, &sock, &log, both_ready);
    eprintln!("apply to `keelson get networks` showing both Ready: {:?}", t0.elapsed());
    println!("{yaml}");
    let (ida, idb) = {
        let (a, b) = (net(&mut s, "a"), net(&mut s, "b"));
        (a.spec.status.id.unwrap(), b.spec.status.id.unwrap())
    };
    for want in [
        "type: TenantNetworkStatuses.net.keelson.dev".to_owned(),
        format!("vrf: tvrf{ida}"),
        format!("vxlan: tvx{ida}"),
        format!("vrf: tvrf{idb}"),
        format!("vni: {idb}"),
        // a reaches b's prefixes, b reaches a's.
        "- 10.2.0.0/16".into(),
        "- fd00:2::/64".into(),
        "- 10.1.0.0/16".into(),
    ] {
        assert!(yaml.contains(&want), "{want} in\n{yaml}");
    }
    // The file the node read is the agent's, in the model's shape.
    let doc = net::resource::parse_status_file(&std::fs::read_to_string(&status).unwrap()).unwrap();
    assert_eq!((doc.node.as_str(), doc.networks.len()), ("n1", 2));

    // b goes: its network leaves the node, a keeps no peer, and a's peering is Pending.
    let t0 = Instant::now();
    ctl::delete(&mut s, "default", Kind::Network, "b").unwrap();
    let gone = |y: &str| !y.contains(&format!("tvrf{idb}")) && !y.contains("peers:\n  - id");
    let yaml = until("b gone from the node", &mut c, &mut s, &bin, &sock, &log, |y| {
        gone(y) && y.contains(&format!("vrf: tvrf{ida}"))
    });
    eprintln!("delete to `keelson get networks` without b: {:?}", t0.elapsed());
    println!("{yaml}");
    assert!(yaml.contains("peers: []"), "{yaml}");
    assert!(!yaml.contains("10.2.0.0/16"), "{yaml}");
    c.pass(&mut s).unwrap();
    assert_eq!(net(&mut s, "a").spec.status.peerings[0].state, NetState::Pending);
    drop(ns);
}
