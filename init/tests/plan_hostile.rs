// SPDX-License-Identifier: Apache-2.0
//! `keelson plan --config` over hostile inputs: the files under `tests/data/hostile/`, and
//! generated ones (alias bombs, a FIFO, devices, an oversized file). Each must end quickly
//! with one precise line, quote nothing long or secret, and stay small.
#![allow(clippy::disallowed_methods)] // Tests and examples drive keelson from outside: plain threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::resource::{getrusage, UsageWho};

/// A guard against a hang, not a speed check: any input that takes this long (a debug build
/// under emulation takes a few seconds) is killed and fails.
const TIME_LIMIT: Duration = Duration::from_secs(60);
/// The most memory any `plan` child may use at its peak.
const RSS_LIMIT_KIB: i64 = 64 * 1024;

struct Outcome {
    code: Option<i32>,
    stderr: String,
    took: Duration,
}

/// `keelson plan --config PATH`, killed after [`TIME_LIMIT`].
fn plan(path: &Path) -> Outcome {
    let dir = scratch();
    let err_path = dir.join("stderr");
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_keelson"))
        .args(["plan", "--config"])
        .arg(path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > TIME_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{}: still running after {TIME_LIMIT:?}", path.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = String::from_utf8_lossy(&std::fs::read(&err_path).unwrap()).into_owned();
    Outcome { code: status.code(), stderr, took: start.elapsed() }
}

fn scratch() -> PathBuf {
    let d = std::env::temp_dir().join(format!("keelson-plan-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/hostile").join(name)
}

/// One anchored list of `n` addresses, reused by `devices - 1` more devices.
fn alias_bomb(n: usize, devices: usize) -> String {
    let list: Vec<String> = (0..n).map(|i| format!("10.{}.{}.1/32", i / 256, i % 256)).collect();
    let mut s = String::from("version: v1alpha1\nmachine:\n  network:\n    interfaces:\n");
    s += &format!("      - interface: eth0\n        addresses: &A [{}]\n", list.join(", "));
    for i in 1..devices {
        s += &format!("      - interface: eth{i}\n        addresses: *A\n");
    }
    s
}

/// Nine levels of ten aliases each to the level below ("billion laughs").
fn laughs() -> String {
    let mut s = String::from("version: v1alpha1\nl0: &l0 [a, a, a, a, a, a, a, a, a, a]\n");
    for i in 1..10 {
        s += &format!("l{i}: &l{i} [{}]\n", vec![format!("*l{}", i - 1); 10].join(", "));
    }
    s
}

/// What `plan` must answer for one input.
enum Expect {
    /// Exit 0 (accepted).
    Accepted,
    /// Exit 1, the config rejected with this text in its error line.
    Rejected(&'static str),
    /// Exit 2, the file refused before parsing with this text.
    Unreadable(&'static str),
}

fn check(path: &Path, expect: Expect, secrets: &[&str]) {
    let out = plan(path);
    let what = path.display();
    let lines: Vec<&str> = out.stderr.lines().collect();
    match expect {
        Expect::Accepted => assert_eq!(out.code, Some(0), "{what}: {}", out.stderr),
        Expect::Rejected(text) => {
            assert_eq!(out.code, Some(1), "{what}: {}", out.stderr);
            assert_eq!(lines.len(), 1, "{what}: one line: {}", out.stderr);
            assert!(lines[0].starts_with("error: "), "{what}: {}", out.stderr);
            assert!(lines[0].contains(text), "{what}: {text:?} not in {}", out.stderr);
        }
        Expect::Unreadable(text) => {
            assert_eq!(out.code, Some(2), "{what}: {}", out.stderr);
            assert_eq!(lines.len(), 1, "{what}: one line: {}", out.stderr);
            assert!(lines[0].contains(text), "{what}: {text:?} not in {}", out.stderr);
        }
    }
    for s in secrets {
        assert!(!out.stderr.contains(s), "{what}: {s:?} echoed: {}", out.stderr);
    }
    assert!(!out.stderr.chars().any(|c| c.is_control() && c != '\n'), "{what}: {:?}", out.stderr);
    assert!(out.stderr.len() < 1024, "{what}: {} bytes of errors", out.stderr.len());
    eprintln!("{what}: {:?}, exit {:?}", out.took, out.code);
}

#[test]
fn hostile_configs_are_refused_quickly_and_small() {
    let dir = scratch();
    let write = |name: &str, body: &str| {
        let p = dir.join(name);
        std::fs::write(&p, body).unwrap();
        p
    };

    // Checked-in files.
    check(
        &data("shadow"),
        Expect::Rejected("unknown key (not a name, "),
        &["root", "$6$", "daemon"],
    );
    check(
        &data("shadow-as-string"),
        Expect::Rejected("the document is a scalar, not a YAML mapping"),
        &["root", "$6$"],
    );
    check(&data("sequence.yaml"), Expect::Rejected("the document is a sequence"), &[]);
    check(&data("bom.yaml"), Expect::Accepted, &[]);
    check(&data("control-chars.yaml"), Expect::Rejected("unknown key (not a name"), &["forged"]);
    check(&data("long-value.yaml"), Expect::Rejected("machine.type (line 3"), &[&"A".repeat(25)]);
    check(
        &data("two-documents.yaml"),
        Expect::Rejected("a second v1alpha1 machine configuration"),
        &[],
    );
    check(&data("not-utf8.yaml"), Expect::Unreadable("not UTF-8 text (byte 52)"), &[]);

    // Generated: alias expansion.
    let bomb = write("bomb.yaml", &alias_bomb(1000, 1000));
    check(&bomb, Expect::Rejected("alias expansion"), &[]);
    check(&write("laughs.yaml", &laughs()), Expect::Rejected("alias expansion"), &[]);
    check(&write("anchors.yaml", &alias_bomb(16, 50)), Expect::Accepted, &[]);
    // Deep nesting: refused at 128 levels, not a stack overflow.
    let deep = format!("version: v1alpha1\nx: {}{}\n", "[".repeat(10_000), "]".repeat(10_000));
    check(&write("deep.yaml", &deep), Expect::Rejected("nested deeper than 128 levels"), &[]);
    // No alias, but 8 million nodes in 16 MiB: refused before serde_yaml loads any of it.
    let flat = format!("version: v1alpha1\nx: [{}0]\n", "0,".repeat((16 << 20) / 2 - 20));
    check(&write("flat.yaml", &flat), Expect::Rejected("YAML nodes after alias expansion"), &[]);

    // Generated: things that are not config files.
    let fifo = dir.join("fifo");
    let _ = std::fs::remove_file(&fifo);
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    check(&fifo, Expect::Unreadable("not a regular file (a FIFO)"), &[]);
    check(
        Path::new("/dev/zero"),
        Expect::Unreadable("not a regular file (a character device)"),
        &[],
    );
    check(Path::new("/"), Expect::Unreadable("not a regular file (a directory)"), &[]);
    // 17 MiB, sparse: refused by its size, before any of it is read.
    let big = dir.join("big.yaml");
    std::fs::File::create(&big).unwrap().set_len(17 << 20).unwrap();
    check(&big, Expect::Unreadable("larger than the limit of 16777216 bytes"), &[]);

    // Every child above stayed small; the largest is what counts.
    let peak = getrusage(UsageWho::RUSAGE_CHILDREN).unwrap().max_rss();
    eprintln!("largest plan peak RSS: {peak} KiB");
    assert!(peak < RSS_LIMIT_KIB, "a plan child peaked at {peak} KiB");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A directory of one test's own: the hostile test removes [`scratch`] when it ends.
fn own_scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("keelson-plan-{name}-{}", std::process::id()))
}

/// `keelson plan --config PATH --link eth9 --link eth1`: exit code, stdout, stderr.
fn plan_output(path: &Path) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_keelson"))
        .args(["plan", "--link", "eth9", "--link", "eth1", "-o", "json", "--config"])
        .arg(path)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

/// A good device, then one bad entry of each class the finding named: each costs its own
/// entry, `plan` shows the rest (the good address among it) and exits 1, one line per drop.
#[test]
fn one_invalid_entry_costs_its_entry_and_plan_exits_1() {
    let dir = own_scratch("partial");
    std::fs::create_dir_all(&dir).unwrap();
    let head = "version: v1alpha1\nmachine:\n  network:\n    interfaces:\n      - interface: eth9\n        addresses: [10.42.0.9/24]\n";
    let cases: [(&str, &str, &str); 5] = [
        (
            "long-name",
            "      - interface: averyveryverylongname0\n        dummy: true\n",
            "machine.network.interfaces[1].interface (line 7",
        ),
        ("mtu", "      - interface: eth1\n        mtu: 65536\n", "machine.network.interfaces[1].mtu (line 8"),
        (
            "gateway",
            "        routes:\n          - network: 10.50.0.0/16\n            gateway: fd00::1\n",
            "machine.network.interfaces[0].routes[0].gateway (line 9",
        ),
        (
            "bridge-name",
            "      - interface: br/x\n        bridge:\n          interfaces: [eth1]\n",
            "machine.network.interfaces[1].interface (line 7",
        ),
        (
            "second-master",
            "      - interface: bond0\n        bond:\n          mode: active-backup\n          interfaces: [eth1]\n      - interface: br0\n        bridge:\n          interfaces: [eth1]\n",
            "machine.network.interfaces[2].bridge.interfaces[0] (line 13",
        ),
    ];
    for (name, tail, line) in cases {
        let path = dir.join(format!("{name}.yaml"));
        std::fs::write(&path, format!("{head}{tail}")).unwrap();
        let (code, stdout, stderr) = plan_output(&path);
        assert_eq!(code, Some(1), "{name}: {stderr}");
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{name}: one line: {stderr}");
        assert!(lines[0].starts_with(&format!("error: {}: ", path.display())), "{name}: {stderr}");
        assert!(lines[0].contains(line), "{name}: {line:?} not in {stderr}");
        assert!(lines[0].contains("(dropped machine.network.interfaces["), "{name}: {stderr}");
        assert!(!stderr.contains("planning without it"), "{name}: {stderr}");
        assert!(
            stdout.contains("eth9/10.42.0.9/24"),
            "{name}: the good address is planned: {stdout}"
        );
        // `config validate` says the same and exits 1 too.
        let out = Command::new(env!("CARGO_BIN_EXE_keelson"))
            .args(["config", "validate"])
            .arg(&path)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        assert!(err.contains(line) && err.contains("(dropped "), "{name}: {err}");
    }
    // The multi-document shape: a typed document's bad MTU costs that field, a second
    // document for the same link costs that document; the first link's address is planned.
    let path = dir.join("documents.yaml");
    let docs = "apiVersion: v1alpha1\nkind: LinkConfig\nname: eth9\nmtu: 65536\naddresses:\n  - address: 10.42.0.9/24\n---\napiVersion: v1alpha1\nkind: LinkConfig\nname: eth9\naddresses:\n  - address: 10.42.0.10/24\n";
    std::fs::write(&path, docs).unwrap();
    let (code, stdout, stderr) = plan_output(&path);
    assert_eq!(code, Some(1), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert!(lines[0].contains("document 1 (LinkConfig eth9): mtu (line 4"), "{stderr}");
    assert!(lines[0].ends_with("(dropped mtu)"), "{stderr}");
    assert!(lines[1].contains("document 2 (LinkConfig eth9): (document) (line 7"), "{stderr}");
    assert!(lines[1].ends_with("(dropped the whole document)"), "{stderr}");
    assert!(stdout.contains("eth9/10.42.0.9/24") && !stdout.contains("10.42.0.10"), "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A file that is not YAML at all names the file, line and column of the parse error.
#[test]
fn garbage_is_reported_with_its_position_not_as_empty() {
    let dir = own_scratch("garbage");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("garbage.yaml");
    std::fs::write(&path, b"\x01\x02\x7fELF garbage\n").unwrap();
    let (code, _, stderr) = plan_output(&path);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(!stderr.contains("empty"), "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "error: {}: (document) (line 1, column 1): not YAML: ",
            path.display()
        )),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
