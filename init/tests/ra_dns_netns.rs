// SPDX-License-Identifier: Apache-2.0
//! DNS from Router Advertisements (RFC 8106) against a real router: radvd in one namespace
//! advertises a prefix, an RDNSS server and a DNSSL domain to `keelson run` in another,
//! joined by a veth pair. The kernel passes the two options to keelson over rtnetlink; the
//! test reads the merged resolvers through the API and the node's rendered
//! `/etc/resolv.conf`, then withdraws them (radvd's shutdown RA with lifetime 0) and lets them
//! expire (radvd killed, no shutdown RA).
#![allow(clippy::disallowed_methods)] // Tests drive keelson from outside: plain threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{require_root, t, wait_for, Background, Netns, Node, TempDir};

const SERVER: &str = "fd78::53";
const DOMAIN: &str = "ra.test";

/// A router namespace with `r0` and a node namespace with `v0`.
struct Lab {
    router: Netns,
    node: Netns,
    dir: TempDir,
}

impl Lab {
    fn new() -> Self {
        let router = Netns::new();
        let node = Netns::new();
        node.veth("v0", &router, "r0");
        router.ip(&["addr", "add", "fd78::1/64", "dev", "r0", "nodad"]);
        // radvd warns and may refuse to advertise when the namespace does not forward.
        router.exec(&["sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"]);
        Self { router, node, dir: TempDir::new() }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// radvd every 3-4 s with the prefix, `SERVER` and `DOMAIN` for `lifetime` seconds;
    /// `flush`: withdraw both (lifetime 0) in its shutdown RA.
    fn radvd(&self, lifetime: u32, flush: bool) -> Background {
        let flush = if flush { "on" } else { "off" };
        let conf = self.file("radvd.conf");
        std::fs::write(
            &conf,
            format!(
                "interface r0 {{\n  AdvSendAdvert on;\n  MinRtrAdvInterval 3;\n  MaxRtrAdvInterval 4;\n  \
                 prefix fd78::/64 {{ AdvOnLink on; AdvAutonomous on; }};\n  \
                 RDNSS {SERVER} {{ AdvRDNSSLifetime {lifetime}; FlushRDNSS {flush}; }};\n  \
                 DNSSL {DOMAIN} {{ AdvDNSSLLifetime {lifetime}; FlushDNSSL {flush}; }};\n}};\n"
            ),
        )
        .unwrap();
        let pid = self.file("radvd.pid").display().to_string();
        let args = [
            "radvd",
            "--nodaemon",
            "-d",
            "1",
            "-m",
            "stderr",
            "-C",
            conf.to_str().unwrap(),
            "-p",
            &pid,
        ];
        Background::start(&self.router, &args, self.file("radvd.log"))
    }
}

/// `keelson get KIND -o yaml` through the node's API socket.
fn get(node: &Node, kind: &str) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_keelson"))
        .args(["get", kind, "-o", "yaml", "--socket"])
        .arg(node.api.as_ref().expect("started with an API socket"))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn resolv(node: &Node) -> String {
    std::fs::read_to_string(node.root.path().join("etc/resolv.conf")).unwrap_or_default()
}

fn has_ra_dns(node: &Node) -> bool {
    let r = resolv(node);
    r.contains(&format!("nameserver {SERVER}")) && r.contains(DOMAIN)
}

#[test]
fn ra_dns_reaches_resolvers_and_leaves_with_its_lifetime() {
    if !require_root("ra_dns_reaches_resolvers_and_leaves_with_its_lifetime") {
        return;
    }
    let lab = Lab::new();
    let config = lab.file("config.yaml");
    std::fs::write(
        &config,
        "version: v1alpha1\nmachine:\n  network:\n    interfaces:\n      - interface: v0\n        addresses: [\"fd78::10/64\"]\n",
    )
    .unwrap();
    let node = Node::start_api(&lab.node, "", Some(&config));
    let mut radvd = lab.radvd(3600, true);
    let context = || format!("{}\n--- radvd\n{}", node.log_text(), radvd.text());

    // In the merged resolvers (the API) and in the rendered /etc/resolv.conf.
    wait_for("RA DNS in resolv.conf", t(20), || has_ra_dns(&node), context);
    let resolvers = get(&node, "resolvers");
    assert!(resolvers.contains(SERVER) && resolvers.contains(DOMAIN), "{resolvers}");
    // One spec at the operator layer, like DHCPv6's.
    let specs = get(&node, "resolverspecs");
    assert!(
        specs.contains("operator/ra/v0/resolvers") && specs.contains("layer: operator"),
        "{specs}"
    );

    // radvd's shutdown RA says lifetime 0: withdrawn at once, long before the hour is up.
    radvd.terminate();
    let stopped = Instant::now();
    wait_for(
        "RA DNS withdrawn",
        t(10),
        || !has_ra_dns(&node),
        || format!("{}\n{}", resolv(&node), node.log_text()),
    );
    assert!(stopped.elapsed() < t(10));
    assert!(!get(&node, "resolvers").contains(SERVER));

    // A router that dies without a word: its entries end with their 8 s lifetime.
    let mut radvd = lab.radvd(8, false);
    wait_for(
        "RA DNS again",
        t(20),
        || has_ra_dns(&node),
        || format!("{}\n{}", node.log_text(), radvd.text()),
    );
    radvd.stop();
    let killed = Instant::now();
    // Still there shortly after (the lifetime is honoured, not cut short)...
    std::thread::sleep(Duration::from_secs(2));
    assert!(has_ra_dns(&node), "gone before its lifetime ended:\n{}", resolv(&node));
    // ...and gone once it ends (at most 8 s after the last RA, which came before the kill).
    wait_for(
        "RA DNS expired",
        t(15),
        || !has_ra_dns(&node),
        || format!("{}\n{}", resolv(&node), node.log_text()),
    );
    assert!(killed.elapsed() <= t(10), "expired {:?} after the kill", killed.elapsed());
    let log = node.stop();
    assert!(log.contains("withdrawn or expired"), "{log}");
}
