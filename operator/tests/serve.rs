// SPDX-License-Identifier: Apache-2.0
//! `keelson-operator serve` as a process: its private etcd comes and goes with it (no etcd
//! left behind, the data kept), and replicas on one etcd elect one leader. Without the `etcd`
//! binary a test is skipped, or fails when `KEELSON_REQUIRE_ROOT=1`.
#![allow(clippy::disallowed_methods)] // Tests drive the client from outside: plain threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use nix::sys::signal::Signal;

use common::{have_etcd, Dir, Operator};

const BIN: &str = env!("CARGO_BIN_EXE_keelson-operator");

fn temp(test: &str) -> Dir {
    common::temp("opserve", test)
}

fn pid_in(line: &str) -> u32 {
    let at = line.find("(pid ").unwrap() + 5;
    line[at..].split(')').next().unwrap().parse().unwrap()
}

fn running(pid: u32) -> bool {
    // A zombie is not running (it is reaped by its parent's wait).
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| !s.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'))
}

#[test]
fn serve_starts_its_private_etcd_and_stops_it_on_sigterm_keeping_the_data() {
    if !have_etcd("private") {
        return;
    }
    let dir = temp("private");
    // No flags: the state directory comes from XDG_STATE_HOME.
    let mut op = Operator::start(&[], &[("XDG_STATE_HOME", &dir.0)]);
    let line = op.wait_for("private etcd at http://127.0.0.1:", Duration::from_secs(60));
    let etcd_pid = pid_in(&line);
    let data = dir.0.join("keelson-operator/etcd");
    assert!(line.contains(&data.display().to_string()), "{line}");
    assert!(running(etcd_pid));
    op.wait_for(" leads (lease ", Duration::from_secs(30));
    op.signal(Signal::SIGTERM);
    let status = op.wait_exit(Duration::from_secs(30));
    assert!(status.success(), "{status}");
    op.wait_for("stopped", Duration::from_secs(5));
    assert!(!running(etcd_pid), "etcd {etcd_pid} left behind");
    assert!(data.join("member/wal").is_dir(), "data dir not kept");

    // Again on the same data (SIGINT this time): the history is still there.
    let mut op =
        Operator::start(&["--data-dir", dir.0.join("keelson-operator").to_str().unwrap()], &[]);
    let line = op.wait_for("private etcd at", Duration::from_secs(60));
    let etcd_pid = pid_in(&line);
    let status_line = op.wait_for("etcd 3.", Duration::from_secs(30));
    let rev: i64 = status_line.rsplit("revision ").next().unwrap().parse().unwrap();
    assert!(rev > 1, "{status_line}");
    op.signal(Signal::SIGINT);
    assert!(op.wait_exit(Duration::from_secs(30)).success());
    assert!(!running(etcd_pid));

    // Killed outright (no Drop, no cleanup): its etcd gets SIGTERM from the kernel.
    let mut op =
        Operator::start(&["--data-dir", dir.0.join("keelson-operator").to_str().unwrap()], &[]);
    let etcd_pid = pid_in(&op.wait_for("private etcd at", Duration::from_secs(60)));
    op.wait_for(" leads (lease ", Duration::from_secs(30));
    op.signal(Signal::SIGKILL);
    op.wait_exit(Duration::from_secs(10));
    let until = std::time::Instant::now() + Duration::from_secs(15);
    while running(etcd_pid) {
        assert!(std::time::Instant::now() < until, "etcd {etcd_pid} outlived its killed operator");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn replicas_on_one_etcd_elect_one_leader_and_hand_over_on_exit() {
    if !have_etcd("replicas") {
        return;
    }
    let dir = temp("replicas");
    let mut opts = etcd::local::Options::new(&dir.0.join("data"), &dir.0.join("etcd.log"));
    opts.no_fsync = true;
    let etcd = etcd::local::LocalEtcd::start(&opts).unwrap();
    let url = etcd.client_url.clone();
    let mut a = Operator::start(
        &["--etcd-endpoints", &url, "--name", "replica-a", "--lease-ttl", "3"],
        &[],
    );
    a.wait_for("replica-a leads", Duration::from_secs(30));
    let mut b = Operator::start(
        &["--etcd-endpoints", &url, "--name", "replica-b", "--lease-ttl", "3"],
        &[],
    );
    b.wait_for("replica-a leads; replica-b waits", Duration::from_secs(30));
    // A stops in order: it resigns and B leads well before A's lease would expire.
    a.signal(Signal::SIGTERM);
    let started = std::time::Instant::now();
    b.wait_for("replica-b leads", Duration::from_secs(10));
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    assert!(a.wait_exit(Duration::from_secs(10)).success());
    // A crashed leader (SIGKILL: no resign, no revoke): a new replica leads once the lease
    // runs out.
    let mut c = Operator::start(
        &["--etcd-endpoints", &url, "--name", "replica-c", "--lease-ttl", "3"],
        &[],
    );
    c.wait_for("replica-b leads; replica-c waits", Duration::from_secs(30));
    b.signal(Signal::SIGKILL);
    c.wait_for("replica-c leads", Duration::from_secs(15));
    // C crashes with a long lease and comes back under its name: it clears its earlier key
    // instead of queueing behind it for the lease's 30 s.
    c.signal(Signal::SIGKILL);
    c.wait_exit(Duration::from_secs(10));
    let long = ["--etcd-endpoints", &url, "--name", "replica-c", "--lease-ttl", "30"];
    let mut c = Operator::start(&long, &[]);
    c.wait_for("replica-c leads (", Duration::from_secs(30));
    c.signal(Signal::SIGKILL);
    c.wait_exit(Duration::from_secs(10));
    let mut c = Operator::start(&long, &[]);
    let restarted = std::time::Instant::now();
    c.wait_for("removed 1 election key(s) of an earlier replica-c", Duration::from_secs(10));
    c.wait_for("replica-c leads (", Duration::from_secs(10));
    assert!(restarted.elapsed() < Duration::from_secs(10), "{:?}", restarted.elapsed());
    c.signal(Signal::SIGTERM);
    assert!(c.wait_exit(Duration::from_secs(10)).success());
    let mut client = etcd.client();
    assert_eq!(etcd::session::leader(&mut client, b"/keelson-operator/leader").unwrap(), None);
}

/// A CA, a server certificate for 127.0.0.1 (server and client auth: etcd's gateway presents it
/// to etcd itself) and a client certificate, as PEM files in `dir`.
fn certificates(dir: &Path) -> [PathBuf; 5] {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose as Eku, IsCa, Issuer,
        KeyPair, SanType,
    };
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::default();
    ca.distinguished_name.push(DnType::CommonName, "keelson-operator test CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, &ca_key);
    let issue = |usages: Vec<Eku>| {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::default();
        p.subject_alt_names = vec![SanType::IpAddress("127.0.0.1".parse().unwrap())];
        p.extended_key_usages = usages;
        (p.signed_by(&key, &issuer).unwrap().pem(), key.serialize_pem())
    };
    let (server, server_key) = issue(vec![Eku::ServerAuth, Eku::ClientAuth]);
    let (client, client_key) = issue(vec![Eku::ClientAuth]);
    let files = [
        ("ca.pem", ca_cert.pem()),
        ("server.pem", server),
        ("server-key.pem", server_key),
        ("client.pem", client),
        ("client-key.pem", client_key),
    ];
    files.map(|(name, text)| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    })
}

#[test]
fn serve_on_an_external_etcd_with_client_certificates() {
    if !have_etcd("tls") {
        return;
    }
    let dir = temp("tls");
    let [ca, server, server_key, client, client_key] = certificates(&dir.0);
    let mut opts = etcd::local::Options::new(&dir.0.join("data"), &dir.0.join("etcd.log"));
    opts.no_fsync = true;
    opts.tls =
        Some(etcd::local::ServerTls { cert: server, key: server_key, client_ca: ca.clone() });
    opts.client_tls = Some(etcd::client::tls_config(&ca, Some((&client, &client_key))).unwrap());
    let etcd = etcd::local::LocalEtcd::start(&opts).unwrap();
    let url = etcd.client_url.clone();
    let s = |p: &PathBuf| p.to_str().unwrap().to_owned();
    let (ca, client, client_key) = (s(&ca), s(&client), s(&client_key));
    let mut op = Operator::start(
        &[
            "--etcd-endpoints",
            &url,
            "--etcd-cacert",
            &ca,
            "--etcd-cert",
            &client,
            "--etcd-key",
            &client_key,
            "--name",
            "tls-replica",
        ],
        &[],
    );
    op.wait_for(&format!("etcd 3.4.23 at {url}"), Duration::from_secs(30));
    op.wait_for("tls-replica leads", Duration::from_secs(30));
    op.signal(Signal::SIGTERM);
    assert!(op.wait_exit(Duration::from_secs(10)).success());
    // No private etcd was started: the data directory flag was never needed.
    assert!(!op.seen.iter().any(|l| l.contains("private etcd")));

    // Without its client certificate the operator cannot reach etcd: one error, exit 1.
    let mut op = Operator::start(&["--etcd-endpoints", &url, "--etcd-cacert", &ca], &[]);
    let status = op.wait_exit(Duration::from_secs(30));
    assert_eq!(status.code(), Some(1));
    let err = op.wait_for("error", Duration::from_secs(5));
    assert!(err.contains(&url), "{err}");
}

fn ctl(args: &[&str]) -> std::process::Output {
    Command::new(BIN).args(args).output().unwrap()
}

#[test]
fn the_leader_reconciles_what_apply_writes_to_its_private_etcd() {
    if !have_etcd("reconcile") {
        return;
    }
    let dir = temp("reconcile");
    let data = dir.0.join("state");
    let data = data.to_str().unwrap();
    // Without a running serve there is no etcd to talk to: one line saying so.
    let out = ctl(&["get", "tm", "--data-dir", data]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no keelson-operator serve is running"));

    // The node's API port is closed: every call is refused at once.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port().to_string();
    drop(closed);
    let mut op = Operator::start(&["--data-dir", data, "--talos-port", &port], &[]);
    op.wait_for(" leads (lease ", Duration::from_secs(60));
    let file = dir.0.join("m.yaml");
    std::fs::write(
        &file,
        "apiVersion: keelson.dev/v1alpha1\nkind: TalosMachine\nmetadata:\n  name: m1\nspec:\n  endpoint: 127.0.0.1\n  version: v1.13.0\n  pxeClientSpec:\n    macAddress: 52:54:00:00:00:07\n    cpuArchitecture: amd64\n",
    )
    .unwrap();
    let out = ctl(&["apply", "-f", file.to_str().unwrap(), "--data-dir", data]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "talosmachine/m1 created\n");
    op.wait_for("TalosMachine m1: (new) -> Booting", Duration::from_secs(20));
    // Booting polls Version (the node's boot report); the condition says why it waits.
    op.wait_for("TalosMachine m1: Booting -> Booting (WaitingForBoot)", Duration::from_secs(20));
    let out = ctl(&["get", "tm", "--data-dir", data]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.lines().nth(1).is_some_and(|l| l.starts_with("m1") && l.contains("Booting")),
        "{text}"
    );
    let out = ctl(&["describe", "tm", "m1", "--data-dir", data]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("WaitingForBoot") && text.contains("Version: "), "{text}");
    assert!(text.contains("refused"), "{text}");

    // A bad document: refused with document, field path and line, exit 1, nothing written.
    std::fs::write(&file, "apiVersion: keelson.dev/v1alpha1\nkind: TalosMachine\nmetadata:\n  name: m2\nspec:\n  endpoint: 192.0.2.8\n  version: latest\n").unwrap();
    let out = ctl(&["apply", "-f", file.to_str().unwrap(), "--data-dir", data]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(err.contains("document 1 (line 7): spec.version:"), "{err}");
    let out = ctl(&["get", "tm", "m2", "--data-dir", data]);
    assert!(!out.status.success());

    let out = ctl(&["get", "tm", "m1", "-o", "json", "--data-dir", data]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"]["state"], "Booting");
    op.signal(Signal::SIGTERM);
    assert!(op.wait_exit(Duration::from_secs(30)).success());
}

/// One HTTP/1.1 request to the metrics listener: the status code and body.
fn http(addr: &str, request: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut raw = Vec::new();
    // A refused request may end in a reset after the answer: keep what arrived.
    let _ = s.read_to_end(&mut raw);
    let out = String::from_utf8_lossy(&raw).into_owned();
    let code = out.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    (code, body)
}

#[test]
fn serve_exposes_prometheus_metrics() {
    if !have_etcd("metrics") {
        return;
    }
    let dir = temp("metrics");
    let data = dir.0.join("state");
    let data = data.to_str().unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port().to_string();
    drop(closed);
    let mut op = Operator::start(
        &["--data-dir", data, "--talos-port", &port, "--metrics-listen", "127.0.0.1:0"],
        &[],
    );
    let line = op.wait_for("metrics on http://", Duration::from_secs(60));
    let addr = line.split("http://").nth(1).unwrap().trim_end_matches("/metrics").to_owned();
    op.wait_for(" leads (lease ", Duration::from_secs(60));
    let file = dir.0.join("m.yaml");
    std::fs::write(
        &file,
        "apiVersion: keelson.dev/v1alpha1\nkind: TalosMachine\nmetadata:\n  name: m1\nspec:\n  endpoint: 127.0.0.1\n  version: v1.13.0\n  pxeClientSpec:\n    macAddress: 52:54:00:00:00:08\n    cpuArchitecture: amd64\n",
    )
    .unwrap();
    assert!(ctl(&["apply", "-f", file.to_str().unwrap(), "--data-dir", data]).status.success());
    op.wait_for("TalosMachine m1: Booting -> Booting (WaitingForBoot)", Duration::from_secs(20));
    // The gauge is the state at the start of a pass: the next pass counts Booting.
    let want = "keelson_operator_resources{kind=\"TalosMachines.keelson.dev\",state=\"Booting\"} 1";
    let until = std::time::Instant::now() + Duration::from_secs(15);
    let body = loop {
        let (code, body) = http(&addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(code, 200, "{body}");
        if body.lines().any(|l| l == want) || std::time::Instant::now() > until {
            break body;
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    for line in [want, "keelson_operator_leader 1"] {
        assert!(body.lines().any(|l| l == line), "{line} not in\n{body}");
    }
    assert!(body.contains("keelson_operator_etcd_request_seconds_count{op=\"range\"}"), "{body}");
    assert!(
        body.contains(
            "keelson_operator_reconcile_seconds_count{kind=\"TalosMachines.keelson.dev\"}"
        ),
        "{body}"
    );
    match Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(mut p) => {
            use std::io::Write;
            p.stdin.take().unwrap().write_all(body.as_bytes()).unwrap();
            let out = p.wait_with_output().unwrap();
            assert!(out.status.success(), "promtool: {out:?}\n{body}");
        }
        Err(_) => testkit::skip_or_fail("no promtool (Debian: prometheus)"),
    }
    assert_eq!(http(&addr, "GET /other HTTP/1.1\r\n\r\n").0, 404);
    assert_eq!(http(&addr, "POST /metrics HTTP/1.1\r\n\r\n").0, 405);
    // A head that never ends is cut at 8 KiB.
    assert_eq!(
        http(&addr, &format!("GET /metrics HTTP/1.1\r\nX: {}\r\n", "a".repeat(9000))).0,
        400
    );
    op.signal(Signal::SIGTERM);
    assert!(op.wait_exit(Duration::from_secs(30)).success());
}
