// SPDX-License-Identifier: Apache-2.0
//! Time sync against real NTP servers: chrony (`-x`: it never touches the clock) in one
//! namespace, `keelson run` in another joined by a veth pair. keelson runs without
//! `--set-clock`, so it only measures: nothing in these tests changes this machine's clock.
#![allow(clippy::disallowed_methods)] // Tests and examples drive keelson from outside: plain threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::net::UdpSocket;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use common::{require_root, t, wait_for, Background, Netns, Node, TempDir};

const CHRONY_A: &str = "10.78.0.1";
const CHRONY_B: &str = "10.78.0.2";
const LIAR: &str = "10.78.0.3";
const CLIENT: &str = "10.78.0.10";

/// A server namespace with `s0` holding the server addresses, a client namespace with `v0`.
struct Lab {
    server: Netns,
    client: Netns,
    dir: TempDir,
}

impl Lab {
    fn new() -> Self {
        let server = Netns::new();
        let client = Netns::new();
        client.veth("v0", &server, "s0");
        for a in [CHRONY_A, CHRONY_B, LIAR] {
            server.ip(&["addr", "add", &format!("{a}/24"), "dev", "s0"]);
        }
        server.ip(&["link", "set", "lo", "up"]);
        Self { server, client, dir: TempDir::new() }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// chronyd serving its own clock at stratum 8 on `addr`:123, never adjusting the clock,
    /// with every file it writes in the lab's directory.
    fn chrony(&self, addr: &str) -> Background {
        self.chrony_with(addr, "", addr)
    }

    /// [`Lab::chrony`] with `extra` lines in its config; `tag` names its files.
    fn chrony_with(&self, addr: &str, extra: &str, tag: &str) -> Background {
        let conf = self.file(&format!("chrony-{tag}.conf"));
        let dir = self.dir.path().display();
        std::fs::write(
            &conf,
            format!(
                "local stratum 8\nallow all\nport 123\nbindaddress {addr}\ncmdport 0\n{extra}\
                 pidfile {dir}/chronyd-{tag}.pid\ndumpdir {dir}\n"
            ),
        )
        .unwrap();
        let conf = conf.display().to_string();
        let args = ["chronyd", "-x", "-d", "-u", "root", "-f", &conf];
        Background::start(&self.server, &args, self.file(&format!("chrony-{tag}.log")))
    }

    /// The client's config: a static address, these time servers, `extra` under `machine:`.
    fn config(&self, servers: &[&str], extra: &str) -> PathBuf {
        let path = self.file("config.yaml");
        let list = servers.join(", ");
        std::fs::write(
            &path,
            format!(
                "version: v1alpha1\nmachine:\n  network:\n    hostname: ntp-node\n    interfaces:\n      - interface: v0\n        addresses: [{CLIENT}/24]\n  time:\n    servers: [{list}]\n{extra}"
            ),
        )
        .unwrap();
        path
    }
}

/// An NTP server in the test itself that answers every request an hour fast.
struct Liar {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Liar {
    fn start(ns: &Netns, addr: &str) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let name = ns.name.clone();
        let addr = format!("{addr}:123");
        let flag = stop.clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let ns = Netns { name };
            ns.enter();
            let socket = UdpSocket::bind(&addr).unwrap();
            std::mem::forget(ns); // the lab owns and deletes the namespace
            socket.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
            ready_tx.send(()).unwrap();
            let mut buf = [0u8; 512];
            while !flag.load(Ordering::Relaxed) {
                let Ok((n, from)) = socket.recv_from(&mut buf) else { continue };
                if n < 48 {
                    continue;
                }
                let reply = lie(&buf[..48], 3600);
                let _ = socket.send_to(&reply, from);
            }
        });
        ready_rx.recv_timeout(Duration::from_secs(5)).unwrap();
        Self { stop, thread: Some(thread) }
    }
}

impl Drop for Liar {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A well-formed stratum-2 reply to `request` with the clock `ahead` seconds fast.
fn lie(request: &[u8], ahead: u64) -> [u8; 48] {
    let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap();
    let secs = now.as_secs() + 2_208_988_800 + ahead;
    let frac = (u64::from(now.subsec_nanos()) << 32) / 1_000_000_000;
    let ts = ((secs << 32) | frac).to_be_bytes();
    let mut r = [0u8; 48];
    r[0] = (4 << 3) | 4; // leap 0, version 4, mode 4 (server)
    r[1] = 2;
    r[2] = 6;
    r[3] = 0xec; // precision 2^-20
    r[12..16].copy_from_slice(b"LIAR");
    r[16..24].copy_from_slice(&ts); // reference
    r[24..32].copy_from_slice(&request[40..48]); // origin = the request's transmit
    r[32..40].copy_from_slice(&ts);
    r[40..48].copy_from_slice(&ts);
    r
}

/// `keelson get timestatus -o yaml` through the node's API socket.
fn timestatus(node: &Node) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_keelson"))
        .args(["get", "timestatus", "-o", "yaml", "--socket"])
        .arg(node.api.as_ref().unwrap())
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The value of `key: value` in YAML output.
fn field<'a>(yaml: &'a str, key: &str) -> Option<&'a str> {
    let prefix = format!("{key}: ");
    yaml.lines().find_map(|l| l.trim_start().strip_prefix(&prefix)).map(str::trim)
}

/// Same machine, same clock: the true offset is zero, so the measured one is within its
/// error bound, half the round trip (RFC 5905 §8), plus a millisecond for the clock reads.
fn assert_small_offset(status: &str, ctx: &dyn Fn() -> String) {
    let num = |k: &str| -> i64 { field(status, k).unwrap_or("0").parse().unwrap() };
    let (offset, round_trip) = (num("offsetNs"), num("roundTripNs"));
    assert!(
        offset.abs() <= round_trip / 2 + 1_000_000,
        "offset {offset} ns, round trip {round_trip} ns\n{}",
        ctx()
    );
    assert!(round_trip < 1_000_000_000, "{}", ctx());
}

/// The items of the YAML list under `key:`.
fn list(yaml: &str, key: &str) -> Vec<String> {
    let head = format!("{key}:");
    yaml.lines()
        .skip_while(|l| l.trim() != head)
        .skip(1)
        .map_while(|l| l.trim().strip_prefix("- ").map(str::to_owned))
        .collect()
}

fn context<'a>(node: &'a Node, servers: &[&Background]) -> impl Fn() -> String + 'a {
    let logs: Vec<PathBuf> = servers.iter().map(|b| b.log.clone()).collect();
    move || {
        let servers: String =
            logs.iter().map(|p| std::fs::read_to_string(p).unwrap_or_default()).collect();
        format!(
            "timestatus:\n{}\nkeelson:\n{}\nservers:\n{servers}",
            timestatus(node),
            node.log_text()
        )
    }
}

#[test]
fn measures_a_chrony_server_and_reports_synced() {
    if !require_root("measures_a_chrony_server_and_reports_synced") {
        return;
    }
    let lab = Lab::new();
    let chrony = lab.chrony(CHRONY_A);
    let config = lab.config(&[CHRONY_A], "");
    let node = Node::start_api(&lab.client, "", Some(&config));
    let ctx = context(&node, &[&chrony]);
    wait_for(
        "timestatus synced",
        t(30),
        || field(&timestatus(&node), "synced") == Some("true"),
        &ctx,
    );
    let status = timestatus(&node);
    assert_eq!(field(&status, "server"), Some("10.78.0.1:123"), "{}", ctx());
    assert_eq!(field(&status, "mode"), Some("measure"));
    assert_eq!(field(&status, "stratum"), Some("8"), "{}", ctx());
    assert_small_offset(&status, &ctx);
    assert!(field(&status, "lastSync").is_some());
    assert_eq!(field(&status, "epoch"), Some("0"), "measuring never steps");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_keelson"))
        .args(["machine-status", "--socket"])
        .arg(node.api.as_ref().unwrap())
        .output()
        .unwrap();
    let machine: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(machine["time"]["synced"], true, "{machine}");
    drop(ctx);
    let log = node.stop();
    assert!(log.contains("synced to 10.78.0.1:123"), "{log}");
    assert!(!log.contains("clock stepped"), "{log}");
}

#[test]
fn a_server_an_hour_fast_among_three_is_rejected_as_a_falseticker() {
    if !require_root("a_server_an_hour_fast_among_three_is_rejected_as_a_falseticker") {
        return;
    }
    let lab = Lab::new();
    let a = lab.chrony(CHRONY_A);
    let b = lab.chrony(CHRONY_B);
    let _liar = Liar::start(&lab.server, LIAR);
    let config = lab.config(&[CHRONY_A, CHRONY_B, LIAR], "");
    let node = Node::start_api(&lab.client, "", Some(&config));
    let ctx = context(&node, &[&a, &b]);
    wait_for(
        "synced with the liar rejected",
        t(40),
        || {
            let s = timestatus(&node);
            field(&s, "synced") == Some("true")
                && list(&s, "falsetickers") == [format!("{LIAR}:123")]
        },
        &ctx,
    );
    let status = timestatus(&node);
    let server = field(&status, "server").unwrap();
    assert!(server == "10.78.0.1:123" || server == "10.78.0.2:123", "{}", ctx());
    assert_small_offset(&status, &ctx);
    assert_eq!(list(&status, "servers").len(), 3, "{}", ctx());
    assert!(node.log_text().contains("not synced: "), "{}", ctx());
}

#[test]
fn without_an_answering_server_the_kubelet_starts_after_the_boot_timeout() {
    if !require_root("without_an_answering_server_the_kubelet_starts_after_the_boot_timeout") {
        return;
    }
    let lab = Lab::new();
    // Nothing listens on 10.78.0.9; the kubelet stand-in must wait for bootTimeout (4 s).
    let started = lab.file("kubelet-started");
    let extra = format!(
        "    bootTimeout: 4s\n  kubelet:\n    command: [/bin/sh, -c, 'touch {}; exec sleep 60']\n",
        started.display()
    );
    let config = lab.config(&["10.78.0.9"], &extra);
    let node = Node::start_api(&lab.client, "", Some(&config));
    let ctx = context(&node, &[]);
    wait_for("the kubelet", t(30), || started.exists(), &ctx);
    let log = node.log_text();
    assert!(log.contains("TIME NOT SYNCED after bootTimeout 4 s"), "{log}");
    // The timeout released it, not a sync: the order in the log says so.
    let timeout_at = log.find("TIME NOT SYNCED").unwrap();
    let kubelet_at = log.find("started kubelet").unwrap_or(usize::MAX);
    assert!(timeout_at < kubelet_at, "{log}");
    wait_for(
        "timestatus to say unreachable",
        t(30),
        || {
            let s = timestatus(&node);
            field(&s, "reason") == Some("unreachable")
                && field(&s, "bootTimeoutPassed") == Some("true")
        },
        &ctx,
    );
    assert_eq!(field(&timestatus(&node), "synced"), Some("false"));
}

#[test]
fn with_time_sync_unset_and_no_server_the_kubelet_waits() {
    if !require_root("with_time_sync_unset_and_no_server_the_kubelet_waits") {
        return;
    }
    let lab = Lab::new();
    let chrony = lab.chrony(CHRONY_A);
    let started = lab.file("kubelet-started");
    // No bootTimeout: the kubelet waits for sync, and starts once a server answers.
    let extra = format!(
        "  kubelet:\n    command: [/bin/sh, -c, 'touch {}; exec sleep 60']\n",
        started.display()
    );
    let config = lab.config(&[CHRONY_A], &extra);
    // Drop packets to the server until the node has been up a while.
    lab.server.sh(&["nft", "add table inet t; add chain inet t in { type filter hook input priority 0; }; add rule inet t in udp dport 123 drop"]);
    let node = Node::start_api(&lab.client, "", Some(&config));
    let ctx = context(&node, &[&chrony]);
    wait_for("timestatus", t(10), || field(&timestatus(&node), "synced") == Some("false"), &ctx);
    std::thread::sleep(t(4));
    assert!(!started.exists(), "the kubelet started without time sync\n{}", ctx());
    lab.server.sh(&["nft", "delete table inet t"]);
    wait_for("the kubelet after sync", t(60), || started.exists(), &ctx);
    assert_eq!(field(&timestatus(&node), "synced"), Some("true"), "{}", ctx());
}

#[test]
fn a_server_name_is_looked_up_through_the_node_resolvers() {
    if !require_root("a_server_name_is_looked_up_through_the_node_resolvers") {
        return;
    }
    let lab = Lab::new();
    let chrony = lab.chrony(CHRONY_A);
    let dns = lab.dnsmasq();
    let config = lab.config(&["ntp.test"], "");
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("  network:\n", &format!("  network:\n    nameservers: [{CHRONY_B}]\n"));
    std::fs::write(&config, text).unwrap();
    let node = Node::start_api(&lab.client, "", Some(&config));
    let ctx = context(&node, &[&chrony, &dns]);
    wait_for(
        "timestatus synced",
        t(30),
        || field(&timestatus(&node), "synced") == Some("true"),
        &ctx,
    );
    let status = timestatus(&node);
    assert_eq!(field(&status, "server"), Some("10.78.0.1:123"), "{}", ctx());
    assert!(node.log_text().contains("time server ntp.test: 10.78.0.1"), "{}", ctx());
    let queries = dns.text();
    assert!(
        queries.contains("query[A] ntp.test") && queries.contains("query[AAAA] ntp.test"),
        "{queries}"
    );
}

impl Lab {
    /// dnsmasq on 10.78.0.2 as the node's resolver: ntp.test is chrony's address.
    fn dnsmasq(&self) -> Background {
        let pid = self.file("dnsmasq.pid").display().to_string();
        Background::start(
            &self.server,
            &[
                "dnsmasq",
                "--no-daemon",
                "--conf-file=/dev/null",
                "--no-resolv",
                "--no-hosts",
                "--listen-address=10.78.0.2",
                "--bind-interfaces",
                "--address=/ntp.test/10.78.0.1",
                "--log-queries",
                &format!("--pid-file={pid}"),
            ],
            self.file("dnsmasq.log"),
        )
    }
}

/// A test CA and a server certificate for `CHRONY_A` and `ntp.test` (SANs) signed by it, made
/// with openssl in the lab's directory: `(ca.crt, server.crt, server.key)`.
fn nts_certificates(lab: &Lab, ca_name: &str) -> (PathBuf, PathBuf, PathBuf) {
    let f = |n: &str| lab.file(&format!("{ca_name}-{n}")).display().to_string();
    let run = |args: &[&str]| {
        let out = std::process::Command::new("openssl").args(args).output().unwrap();
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    let mut ca = vec!["req", "-x509"];
    ca.extend(ec);
    let (ca_key, ca_crt, key, csr, crt, ext) =
        (f("ca.key"), f("ca.crt"), f("server.key"), f("server.csr"), f("server.crt"), f("ext"));
    ca.extend(["-keyout", &ca_key, "-out", &ca_crt, "-days", "2", "-subj"]);
    let subject = format!("/CN={ca_name}");
    ca.push(&subject);
    run(&ca);
    let mut req = vec!["req"];
    req.extend(ec);
    req.extend(["-keyout", &key, "-out", &csr, "-subj", "/CN=nts-server"]);
    run(&req);
    std::fs::write(
        &ext,
        format!(
            "subjectAltName=IP:{CHRONY_A},DNS:ntp.test\nbasicConstraints=CA:FALSE\n\
             keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n"
        ),
    )
    .unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        &csr,
        "-CA",
        &ca_crt,
        "-CAkey",
        &ca_key,
        "-CAcreateserial",
        "-out",
        &crt,
        "-days",
        "2",
        "-extfile",
        &ext,
    ]);
    (PathBuf::from(ca_crt), PathBuf::from(crt), PathBuf::from(key))
}

impl Lab {
    /// chronyd as above, also serving NTS-KE on `CHRONY_A`:4460 with this certificate.
    fn chrony_nts(&self, cert: &std::path::Path, key: &std::path::Path) -> Background {
        let dir = self.dir.path().display();
        let nts = format!(
            "ntsport 4460\nntsserverkey {}\nntsservercert {}\nntsdumpdir {dir}\n",
            key.display(),
            cert.display()
        );
        self.chrony_with(CHRONY_A, &nts, "nts")
    }

    /// The client's config with a `TimeSyncConfig` document asking for NTS.
    fn nts_config(&self, servers: &[&str]) -> PathBuf {
        let path = self.file("config.yaml");
        let list = servers.join(", ");
        std::fs::write(
            &path,
            format!(
                "version: v1alpha1\nmachine:\n  network:\n    hostname: ntp-node\n    interfaces:\n      - interface: v0\n        addresses: [{CLIENT}/24]\n---\napiVersion: v1alpha1\nkind: TimeSyncConfig\nntp:\n  servers: [{list}]\n  useNTS: true\n"
            ),
        )
        .unwrap();
        path
    }
}

#[test]
fn syncs_over_nts_with_chrony_and_reports_it() {
    if !require_root("syncs_over_nts_with_chrony_and_reports_it") {
        return;
    }
    let lab = Lab::new();
    let (ca, cert, key) = nts_certificates(&lab, "test-ca");
    let chrony = lab.chrony_nts(&cert, &key);
    let config = lab.nts_config(&[CHRONY_A]);
    let ca = ca.display().to_string();
    let node = Node::start_api_args(&lab.client, "", Some(&config), &["--nts-ca", &ca]);
    let ctx = context(&node, &[&chrony]);
    wait_for(
        "timestatus synced over NTS",
        t(30),
        || {
            let s = timestatus(&node);
            field(&s, "synced") == Some("true") && field(&s, "nts") == Some("true")
        },
        &ctx,
    );
    let status = timestatus(&node);
    assert_eq!(field(&status, "server"), Some("10.78.0.1:123"), "{}", ctx());
    assert_eq!(field(&status, "mode"), Some("measure"));
    assert_eq!(field(&status, "stratum"), Some("8"), "{}", ctx());
    assert_eq!(field(&status, "epoch"), Some("0"), "measuring never steps");
    assert!(list(&status, "ntsErrors").is_empty(), "{}", ctx());
    assert_small_offset(&status, &ctx);
    let log = node.log_text();
    assert!(
        log.contains(
            "NTS key exchange with 10.78.0.1 (10.78.0.1:4460): 8 cookies, NTP server 10.78.0.1:123"
        ),
        "{}",
        ctx()
    );
    assert!(log.contains("servers: 10.78.0.1:123 (NTS)"), "{}", ctx());
}

#[test]
fn an_nts_server_with_a_certificate_from_an_unknown_ca_is_not_used() {
    if !require_root("an_nts_server_with_a_certificate_from_an_unknown_ca_is_not_used") {
        return;
    }
    let lab = Lab::new();
    let (_, cert, key) = nts_certificates(&lab, "test-ca");
    // The node trusts another CA than the one that signed the server's certificate.
    let (other_ca, _, _) = nts_certificates(&lab, "other-ca");
    let chrony = lab.chrony_nts(&cert, &key);
    let config = lab.nts_config(&[CHRONY_A]);
    let other_ca = other_ca.display().to_string();
    let node = Node::start_api_args(&lab.client, "", Some(&config), &["--nts-ca", &other_ca]);
    let ctx = context(&node, &[&chrony]);
    wait_for(
        "timestatus to say why the NTS server is not used",
        t(30),
        || !list(&timestatus(&node), "ntsErrors").is_empty(),
        &ctx,
    );
    let status = timestatus(&node);
    let errors = list(&status, "ntsErrors");
    assert_eq!(errors.len(), 1, "{}", ctx());
    assert!(
        errors[0]
            .trim_matches('\'')
            .starts_with("10.78.0.1: TLS: invalid peer certificate: UnknownIssuer"),
        "{}",
        ctx()
    );
    assert_eq!(field(&status, "synced"), Some("false"), "{}", ctx());
    assert_eq!(field(&status, "reason"), Some("NTS failed for every server (see ntsErrors)"));
    assert!(list(&status, "servers").is_empty(), "no NTP server without keys\n{}", ctx());
    // Still not used a little later (the retry waits 16 s), and logged once.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(field(&timestatus(&node), "synced"), Some("false"));
    let log = node.log_text();
    assert_eq!(log.matches("key exchange failed").count(), 1, "{log}");
}

#[test]
fn an_nts_server_name_is_looked_up_and_its_certificate_checked_for_that_name() {
    if !require_root("an_nts_server_name_is_looked_up_and_its_certificate_checked_for_that_name") {
        return;
    }
    let lab = Lab::new();
    let (ca, cert, key) = nts_certificates(&lab, "test-ca");
    let chrony = lab.chrony_nts(&cert, &key);
    let dns = lab.dnsmasq();
    let config = lab.nts_config(&["ntp.test"]);
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("  network:\n", &format!("  network:\n    nameservers: [{CHRONY_B}]\n"));
    std::fs::write(&config, text).unwrap();
    let ca = ca.display().to_string();
    let node = Node::start_api_args(&lab.client, "", Some(&config), &["--nts-ca", &ca]);
    let ctx = context(&node, &[&chrony, &dns]);
    wait_for(
        "timestatus synced over NTS",
        t(30),
        || {
            let s = timestatus(&node);
            field(&s, "synced") == Some("true") && field(&s, "nts") == Some("true")
        },
        &ctx,
    );
    assert_eq!(field(&timestatus(&node), "server"), Some("10.78.0.1:123"), "{}", ctx());
    assert!(
        node.log_text().contains("NTS key exchange with ntp.test (10.78.0.1:4460)"),
        "{}",
        ctx()
    );
}

/// The event loop's wakeups as the stop line counts them.
fn wakeups(log: &str) -> u64 {
    let at = log.find(" event loop wakeups)").expect("the stop line");
    let start = log[..at].rfind('(').unwrap() + 1;
    log[start..at].parse().unwrap()
}

#[test]
fn an_nts_server_name_nobody_answers_for_waits_without_spinning() {
    if !require_root("an_nts_server_name_nobody_answers_for_waits_without_spinning") {
        return;
    }
    let lab = Lab::new();
    // The resolver 10.78.0.2 exists but nothing answers on it.
    let config = lab.nts_config(&["ntp.test"]);
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("  network:\n", &format!("  network:\n    nameservers: [{CHRONY_B}]\n"));
    std::fs::write(&config, text).unwrap();
    let node = Node::start_api(&lab.client, "", Some(&config));
    let ctx = context(&node, &[]);
    wait_for(
        "timestatus to wait for the key exchange",
        t(10),
        || field(&timestatus(&node), "reason") == Some("waiting for NTS key exchange"),
        &ctx,
    );
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(field(&timestatus(&node), "synced"), Some("false"));
    drop(ctx);
    let log = node.stop();
    // Lookups back off, the exchange waits for an address: a few wakeups a second at most.
    let n = wakeups(&log);
    assert!(n < 300, "{n} wakeups\n{log}");
}
