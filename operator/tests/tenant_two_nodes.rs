// SPDX-License-Identifier: Apache-2.0
//! Tenant networks across two nodes on a kernel with VRF and VXLAN (`KEELSON_FULL_KERNEL=1`,
//! the VM suite): two node namespaces joined by a veth underlay, each running the node round
//! (`tenant-agent`'s kernel dataplane) with its own VTEP; networks X, Y and Z with a workload
//! namespace per node on a prefix of its own, attached by a veth in the network's VRF. Real
//! pings decide: X reaches X across nodes (IPv4 and IPv6), X and Y peered reach only the
//! prefixes each side allows, Z reaches neither (IPv4 or IPv6); removing one side's peering
//! withdraws the routes on both nodes. Each node has a static forwarding and a permanent
//! neighbour entry per other node and no flooding entry.
#![allow(clippy::disallowed_methods)] // Tests drive the parts from outside.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::time::Instant;

use net::netlink::RouteSocket;
use net::tenant::{gateway, kernel::observe, router_mac, Underlay};
use operator::ctl;
use operator::key::Layout;
use operator::networks::agent::Kernel;
use operator::networks::allocate::{Allocator, Range};
use operator::networks::controller::Controller;
use operator::networks::kinds::{NetState, Network, NETWORKS};
use operator::networks::node;
use operator::store::Store;
use testkit::{require_full_kernel, Netns};

/// X lets Y reach only its node-1 workloads; Y lets X reach only its node-2 workloads.
const NETS: &str = "\
apiVersion: keelson.dev/v1alpha1
kind: Network
metadata:
  name: x
spec:
  prefixes: [10.1.0.0/16, fd00:1::/48]
  peerings:
    - name: to-y
      networkRef: {name: y}
      prefixes: [10.1.1.0/24]
---
apiVersion: keelson.dev/v1alpha1
kind: Network
metadata:
  name: y
spec:
  prefixes: [10.2.0.0/16]
  peerings:
    - name: to-x
      networkRef: {name: x}
      prefixes: [10.2.2.0/24]
---
apiVersion: keelson.dev/v1alpha1
kind: Network
metadata:
  name: z
spec:
  prefixes: [10.3.0.0/16, fd00:3::/48]
";

/// Y without its side of the peering.
const Y_ALONE: &str = "\
apiVersion: keelson.dev/v1alpha1
kind: Network
metadata:
  name: y
spec:
  prefixes: [10.2.0.0/16]
";

fn net(s: &mut Store, name: &str) -> Network {
    s.get("default", NETWORKS, name).unwrap().unwrap()
}

/// A route socket in `ns` (opened on a thread that entered it; the socket stays there).
fn socket_in(ns: &Netns) -> RouteSocket {
    std::thread::scope(|s| {
        s.spawn(|| {
            ns.enter();
            RouteSocket::new().expect("socket")
        })
        .join()
        .unwrap()
    })
}

/// A node: its namespace, its dataplane, and a socket to read back what its kernel has.
struct Node {
    name: &'static str,
    ns: Netns,
    dp: Kernel,
    look: RouteSocket,
}

impl Node {
    fn new(name: &'static str, vtep: &str) -> Self {
        let ns = Netns::new();
        // A node routes between its workloads' interfaces and the overlay; strict reverse
        // path filtering would drop what arrives through another VRF's table.
        for (k, v) in [
            ("net.ipv4.ip_forward", "1"),
            ("net.ipv6.conf.all.forwarding", "1"),
            ("net.ipv6.conf.default.forwarding", "1"),
            ("net.ipv4.conf.all.rp_filter", "0"),
            ("net.ipv4.conf.default.rp_filter", "0"),
        ] {
            ns.sh(&["sysctl", "-qw", &format!("{k}={v}")]);
        }
        let underlay = Underlay { local: Some(vtep.parse().unwrap()), port: 0 };
        let dp = Kernel::new(socket_in(&ns), underlay);
        let look = socket_in(&ns);
        Self { name, ns, dp, look }
    }

    fn round(&mut self, s: &mut Store) -> usize {
        node::sync(s, self.name, &mut self.dp).unwrap()
    }
}

/// A workload of network `id` on `node`: its own namespace, `addr` on a veth whose other end
/// is in the network's VRF with `gw`; and `v6` (gateway, address) alike.
fn workload(
    node: &Node,
    id: u32,
    dev: &str,
    gw: &str,
    addr: &str,
    v6: Option<(&str, &str)>,
) -> Netns {
    let w = Netns::new();
    w.veth("eth0", &node.ns, dev);
    node.ns.ip(&["link", "set", dev, "master", &format!("tvrf{id}")]);
    node.ns.ip(&["addr", "add", gw, "dev", dev]);
    node.ns.ip(&["link", "set", dev, "up"]);
    w.ip(&["addr", "add", addr, "dev", "eth0"]);
    w.ip(&["link", "set", "eth0", "up"]);
    let via = gw.split('/').next().unwrap();
    w.ip(&["route", "add", "default", "via", via]);
    if let Some((gw6, addr6)) = v6 {
        // No duplicate address detection: the addresses are usable at once.
        node.ns.ip(&["addr", "add", gw6, "dev", dev, "nodad"]);
        w.ip(&["addr", "add", addr6, "dev", "eth0", "nodad"]);
        let via = gw6.split('/').next().unwrap();
        w.ip(&["-6", "route", "add", "default", "via", via]);
    }
    w
}

/// Pings, all at once (the VM is slow, and a ping that must fail costs its whole deadline):
/// each `(from, to, reaches, why)` must reach or not. Reaching is a reply within 8 s (only
/// the workload's own ARP or neighbour discovery with its node; nothing is resolved across
/// the overlay); not reaching is no reply within 3 s.
fn pings(cases: &[(&Netns, &str, bool, &str)]) {
    let running: Vec<_> = cases
        .iter()
        .map(|(from, to, reaches, _)| {
            let deadline = if *reaches { "8" } else { "3" };
            std::process::Command::new("ip")
                .args(["netns", "exec", &from.name, "ping", "-n", "-q", "-i", "0.5"])
                .args(["-c", "1", "-w", deadline, to])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut wrong = Vec::new();
    for (mut child, (_, to, reaches, why)) in running.into_iter().zip(cases) {
        // `-c 1 -w N`: a packet every 0.5 s until one is answered (success) or N seconds
        // passed (failure).
        let ok = child.wait().unwrap().success();
        if ok != *reaches {
            wrong.push(format!("{why} ({to}): reached {ok}, want {reaches}"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn two_nodes_reach_across_the_underlay_only_where_peered() {
    let test = "two_nodes_reach_across_the_underlay_only_where_peered";
    if !require_full_kernel(test) {
        return;
    }
    // A step the kernel refuses is logged (as the agent does).
    base::stderr_log::init_from_env("KEELSON_LOG");
    let Some((etcd, _dir)) = common::start_etcd("tn", "two") else { return };
    let t0 = Instant::now();
    let mut n1 = Node::new("n1", "192.168.77.1");
    let mut n2 = Node::new("n2", "192.168.77.2");
    n1.ns.veth("ul", &n2.ns, "ul");
    n1.ns.ip(&["link", "set", "ul", "up"]);
    n1.ns.ip(&["addr", "add", "192.168.77.1/24", "dev", "ul"]);
    n2.ns.ip(&["addr", "add", "192.168.77.2/24", "dev", "ul"]);

    let mut s = Store::new(etcd.client(), Layout::new("/keelson-operator", b"/keelson-operator"));
    let mut c = Controller::new(Allocator::new(Range::default()), "default");
    ctl::apply(&mut s, NETS).unwrap();
    c.pass(&mut s).unwrap();
    // Each node's first round makes the devices and reports its VTEP; the second writes the
    // other's entries.
    for _ in 0..2 {
        assert_eq!(n1.round(&mut s), 3);
        assert_eq!(n2.round(&mut s), 3);
    }
    c.pass(&mut s).unwrap();
    let (x, y, z) = (net(&mut s, "x"), net(&mut s, "y"), net(&mut s, "z"));
    for n in [&x, &y, &z] {
        assert_eq!(n.spec.status.state, NetState::Ready, "{:?}", n.spec.status);
    }
    assert_eq!(x.spec.status.peerings[0].state, NetState::Ready, "{:?}", x.spec.status);
    assert_eq!(y.spec.status.peerings[0].state, NetState::Ready, "{:?}", y.spec.status);
    assert_eq!(x.spec.status.peerings[0].prefixes, ["10.2.2.0/24"]);
    assert_eq!(y.spec.status.peerings[0].prefixes, ["10.1.1.0/24"]);
    eprintln!("apply to Ready on both nodes: {:?}", t0.elapsed());
    let (ix, iy, iz) =
        (x.spec.status.id.unwrap(), y.spec.status.id.unwrap(), z.spec.status.id.unwrap());

    let x1 = workload(
        &n1,
        ix,
        "wx",
        "10.1.1.1/24",
        "10.1.1.2/24",
        Some(("fd00:1:0:1::1/64", "fd00:1:0:1::2/64")),
    );
    let x2 = workload(
        &n2,
        ix,
        "wx",
        "10.1.2.1/24",
        "10.1.2.2/24",
        Some(("fd00:1:0:2::1/64", "fd00:1:0:2::2/64")),
    );
    let y1 = workload(&n1, iy, "wy", "10.2.1.1/24", "10.2.1.2/24", None);
    let y2 = workload(&n2, iy, "wy", "10.2.2.1/24", "10.2.2.2/24", None);
    let z1 = workload(
        &n1,
        iz,
        "wz",
        "10.3.1.1/24",
        "10.3.1.2/24",
        Some(("fd00:3:0:1::1/64", "fd00:3:0:1::2/64")),
    );
    let z2 = workload(
        &n2,
        iz,
        "wz",
        "10.3.2.1/24",
        "10.3.2.2/24",
        Some(("fd00:3:0:2::1/64", "fd00:3:0:2::2/64")),
    );
    // Each node reports its workloads' prefixes on its next round; the other routes them on
    // the round after.
    let t2 = Instant::now();
    n1.round(&mut s);
    n2.round(&mut s);
    n1.round(&mut s);
    eprintln!("workloads attached to routed on both nodes (three rounds): {:?}", t2.elapsed());

    // Per other node and network: one static forwarding entry (its MAC at its VTEP), one
    // permanent neighbour entry (its link-local gateway at that MAC), the prefixes it
    // reported via that gateway; and no flooding entry anywhere.
    let reported = |id: u32, node: &str| -> Vec<&str> {
        match (id == ix, id == iy, node) {
            (true, _, "n1") => vec!["10.1.1.0/24", "fd00:1:0:1::/64"],
            (true, _, _) => vec!["10.1.2.0/24", "fd00:1:0:2::/64"],
            (_, true, "n1") => vec!["10.2.1.0/24"],
            (_, true, _) => vec!["10.2.2.0/24"],
            (_, _, "n1") => vec!["10.3.1.0/24", "fd00:3:0:1::/64"],
            _ => vec!["10.3.2.0/24", "fd00:3:0:2::/64"],
        }
    };
    for (n, other, other_vtep) in [(&mut n1, "n2", "192.168.77.2"), (&mut n2, "n1", "192.168.77.1")]
    {
        let have = observe(&mut n.look).unwrap();
        let fdb_text =
            String::from_utf8_lossy(&n.ns.exec(&["bridge", "fdb", "show"]).stdout).into_owned();
        let neigh_text =
            String::from_utf8_lossy(&n.ns.exec(&["ip", "-6", "neigh", "show"]).stdout).into_owned();
        let mac = router_mac(other_vtep.parse().unwrap());
        let gw = gateway(mac);
        let mac_text = mac.map(|b| format!("{b:02x}")).join(":");
        assert!(
            !fdb_text.contains("00:00:00:00:00:00"),
            "{}: a flooding entry\n{fdb_text}",
            n.name
        );
        for id in [ix, iy, iz] {
            let fdb: Vec<_> = have
                .fdb
                .iter()
                .filter(|f| f.id == id)
                .map(|f| (f.mac, f.dst.to_string()))
                .collect();
            assert_eq!(fdb, [(mac, other_vtep.to_string())], "{}: {id}\n{fdb_text}", n.name);
            let neighs: Vec<_> =
                have.neighs.iter().filter(|e| e.id == id).map(|e| (e.addr, e.mac)).collect();
            assert_eq!(neighs, [(gw, mac)], "{}: {id}\n{neigh_text}", n.name);
            let dev = format!("dev tvx{id} ");
            let has = |text: &str, words: &[&str]| {
                text.lines().any(|l| words.iter().all(|w| format!("{l} ").contains(w)))
            };
            let dst = format!("dst {other_vtep} ");
            assert!(
                has(&fdb_text, &[&mac_text, &dev, &dst, "permanent"]),
                "{}: no static entry {mac_text} {dev}{dst}\n{fdb_text}",
                n.name
            );
            let gw_text = format!("{gw} ");
            assert!(
                has(&neigh_text, &[&gw_text, &dev, &mac_text, "PERMANENT"]),
                "{}: no neighbour {gw} {dev}\n{neigh_text}",
                n.name
            );
            let routed: Vec<String> = have
                .routes
                .iter()
                .filter(|r| r.id == id && r.via == id)
                .map(|r| {
                    assert_eq!(r.gw, Some(gw.into()), "{r:?}");
                    r.dst.to_string()
                })
                .collect();
            assert_eq!(routed, reported(id, other), "{}: routes of {id} to {other}", n.name);
        }
        // The route into the other node's X prefix, as `ip route` shows it: IPv4 via the IPv6
        // link-local gateway.
        let table = net::tenant::table(ix).to_string();
        let r = n.ns.exec(&["ip", "route", "show", "table", &table]);
        let text = String::from_utf8_lossy(&r.stdout);
        assert!(text.contains(&format!("via inet6 {gw} dev tvx{ix}")), "{}:\n{text}", n.name);
    }

    pings(&[
        // A network reaches itself across the nodes.
        (&x1, "10.1.2.2", true, "X on n1 -> X on n2"),
        (&x2, "10.1.1.2", true, "X on n2 -> X on n1"),
        (&z1, "10.3.2.2", true, "Z on n1 -> Z on n2"),
        (&x1, "fd00:1:0:2::2", true, "X on n1 -> X on n2 (IPv6)"),
        (&x2, "fd00:1:0:1::2", true, "X on n2 -> X on n1 (IPv6)"),
        (&z2, "fd00:3:0:1::2", true, "Z on n2 -> Z on n1 (IPv6)"),
        // Peered, in each direction, only what the other side allows.
        (&x1, "10.2.2.2", true, "X 10.1.1/24 -> Y 10.2.2/24 (both allowed)"),
        (&y2, "10.1.1.2", true, "Y 10.2.2/24 -> X 10.1.1/24 (both allowed)"),
        (&x1, "10.2.1.2", false, "Y allows X only 10.2.2.0/24"),
        (&y2, "10.1.2.2", false, "X allows Y only 10.1.1.0/24"),
        (&x2, "10.2.2.2", false, "Y has no route back to X's 10.1.2.0/24"),
        // Z reaches neither, on either node.
        (&z1, "10.1.2.2", false, "Z -> X"),
        (&z1, "10.2.2.2", false, "Z -> Y"),
        (&z2, "10.1.1.2", false, "Z -> X"),
        (&y1, "10.3.2.2", false, "Y -> Z"),
        (&z1, "fd00:1:0:2::2", false, "Z -> X (IPv6)"),
        (&z2, "fd00:1:0:1::2", false, "Z -> X (IPv6)"),
        (&x1, "fd00:3:0:2::2", false, "X -> Z (IPv6)"),
    ]);
    eprintln!("pings checked: {:?}", t0.elapsed());

    // Y withdraws its side: both nodes drop the leaked routes, X's peering goes Pending.
    let t1 = Instant::now();
    ctl::apply(&mut s, Y_ALONE).unwrap();
    c.pass(&mut s).unwrap();
    n1.round(&mut s);
    n2.round(&mut s);
    c.pass(&mut s).unwrap();
    assert_eq!(net(&mut s, "x").spec.status.peerings[0].state, NetState::Pending);
    assert!(net(&mut s, "y").spec.status.peerings.is_empty());
    for n in [&mut n1, &mut n2] {
        let have = observe(&mut n.look).unwrap();
        let leaked: Vec<_> = have.routes.iter().filter(|r| r.via != r.id).collect();
        assert!(leaked.is_empty(), "{}: {leaked:?}", n.name);
    }
    eprintln!("one side withdrawn to routes gone on both nodes: {:?}", t1.elapsed());
    pings(&[
        (&x1, "10.2.2.2", false, "withdrawn: X -> Y"),
        (&y2, "10.1.1.2", false, "withdrawn: Y -> X"),
        (&x1, "10.1.2.2", true, "X still reaches X"),
        (&x2, "fd00:1:0:1::2", true, "X still reaches X (IPv6)"),
    ]);
    eprintln!("total: {:?}", t0.elapsed());
}
