// SPDX-License-Identifier: Apache-2.0
//! `Reset` and `Upgrade` against `keelson run` in a namespace this test creates, driven by the
//! PyPI Talos bindings (tests/data/reset_upgrade.py) and keelson's own CLI: the roles (an
//! os:reader is refused), the refusals of bad requests, an upgrade manifest whose digest does
//! not match (one line, the node keeps running) and one that does (verified; `run` loads
//! nothing). Repeats are no-ops: the same image again after it was verified, or while it is
//! still under way, is acknowledged and fetches nothing; a manifest naming the version the node
//! runs downloads nothing; another image while one is under way is refused. Then a reset: the state directory, the config file and etcd's data are wiped,
//! the process ends as for a reboot, and started again over the same directories the node
//! answers in maintenance mode.
#![allow(clippy::disallowed_methods)] // Tests drive keelson from outside: plain threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::path::Path;
use std::time::Duration;

use common::{gen_config as gen, keelson_in as keelson, require_root, wait_for, Background};
use common::{Netns, Node, TempDir};
use sha2::Digest as _;

const T: Duration = Duration::from_secs(20);
const AT: &str = "127.0.0.1:50000";
const SCRIPT: &str = "reset_upgrade.py";

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn hex(data: &[u8]) -> String {
    sha2::Sha256::digest(data).iter().map(|b| format!("{b:02x}")).collect()
}

/// A kernel and an initramfs stand-in and two manifests naming them, one with the
/// initramfs's digest wrong.
fn served(www: &Path) {
    let kernel = b"not a kernel: keelson run never loads it".repeat(100);
    let initramfs = b"not an initramfs either".repeat(300);
    std::fs::write(www.join("vmlinuz"), &kernel).unwrap();
    std::fs::write(www.join("initramfs.cpio.zst"), &initramfs).unwrap();
    let manifest = |initramfs_sha: &str| {
        format!(
            r#"{{"version": "v0.0.0-next", "kernel": {{"url": "vmlinuz", "sha256": "{}"}},
                "initramfs": {{"url": "/initramfs.cpio.zst", "sha256": "{initramfs_sha}"}}}}"#,
            hex(&kernel)
        )
    };
    std::fs::write(www.join("good.json"), manifest(&hex(&initramfs))).unwrap();
    std::fs::write(www.join("bad.json"), manifest(&"0".repeat(64))).unwrap();
    let current = manifest(&hex(&initramfs))
        .replace("v0.0.0-next", &format!("v{}", env!("CARGO_PKG_VERSION")));
    std::fs::write(www.join("current.json"), current).unwrap();
}

#[test]
fn upgrade_refusals_and_a_reset_back_to_maintenance() {
    if !require_root("upgrade_refusals_and_a_reset_back_to_maintenance") {
        return;
    }
    let dir = TempDir::new();
    let ours = gen(&dir, "reset");
    let ns = Netns::new();
    ns.ip(&["link", "set", "lo", "up"]);
    let root = TempDir::new();
    let config = root.path().join("config.yaml");
    std::fs::copy(ours.join("machine.yaml"), &config).unwrap();
    let etcd = root.path().join("var/lib/etcd/member");
    std::fs::create_dir_all(&etcd).unwrap();
    std::fs::write(etcd.join("wal"), "etcd data").unwrap();
    let node = Node::start_in_api_args(&ns, "", Some(&config), root, &["--api-listen", AT]);
    wait_for("mutual TLS", T, || node.log_text().contains("API: mutual TLS"), || node.log_text());
    let state = node.root.path().join("state");
    let admin = s(&ours.join("keelsonconfig"));
    let reader = s(&ours.join("keelsonconfig.reader"));
    let scenario = |args: &[&str]| common::python_scenario(&ns, &node, SCRIPT, args);
    println!("{}", scenario(&["refusals", AT, &admin, &reader]));

    let www = TempDir::new();
    served(www.path());
    let mut srv = Background::start(
        &ns,
        &[
            "python3",
            "-u",
            "-m",
            "http.server",
            "--bind",
            "127.0.0.1",
            "--directory",
            &s(www.path()),
            "8080",
        ],
        www.path().join("http.log"),
    );
    wait_for("the HTTP server", T, || srv.text().contains("Serving HTTP"), || srv.text());
    println!("{}", scenario(&["upgrade", AT, &admin, "http://127.0.0.1:8080/bad.json"]));
    wait_for(
        "the digest refusal",
        T,
        || node.log_text().contains("upgrade refused"),
        || node.log_text(),
    );
    let log = node.log_text();
    let refused: Vec<&str> = log.lines().filter(|l| l.contains("upgrade refused")).collect();
    assert_eq!(refused.len(), 1, "{log}");
    assert!(
        refused[0].contains(&format!(
            "upgrade refused: initramfs: sha256 mismatch: the manifest says {}, the download (6900 bytes) is ",
            "0".repeat(64)
        )) && refused[0].ends_with("nothing loaded, the node keeps running"),
        "{}",
        refused[0]
    );
    // The CLI, with talosctl's table; the good manifest verifies.
    let (ok, out, err) = keelson(
        &ns,
        &["upgrade", "--image", "http://127.0.0.1:8080/good.json", "--keelsonconfig", &admin],
    );
    assert!(
        ok && out.starts_with("NODE") && out.contains("ACK") && out.contains("STARTED"),
        "{out}{err}"
    );
    assert!(out.contains("Upgrade request received"), "{out}{err}");
    wait_for(
        "the verified upgrade",
        T,
        || node.log_text().contains("upgrade to v0.0.0-next downloaded and verified"),
        || node.log_text(),
    );
    let gets = |srv: &Background, path: &str| srv.text().matches(&format!("GET {path} ")).count();
    assert_eq!((gets(&srv, "/good.json"), gets(&srv, "/vmlinuz")), (1, 2), "{}", srv.text());

    // The same upgrade again: acknowledged as before; nothing fetched, verified or loaded.
    println!("{}", scenario(&["upgrade", AT, &admin, "http://127.0.0.1:8080/good.json"]));
    wait_for(
        "the repeat noticed",
        T,
        || node.log_text().contains("requested again: it was taken already (v0.0.0-next)"),
        || node.log_text(),
    );
    // A manifest naming the version the node runs: read, and nothing downloaded.
    println!("{}", scenario(&["upgrade", AT, &admin, "http://127.0.0.1:8080/current.json"]));
    wait_for(
        "the current version noticed",
        T,
        || node.log_text().contains("which this node runs already: nothing downloaded"),
        || node.log_text(),
    );
    let log = node.log_text();
    assert_eq!(log.matches("downloaded and verified").count(), 1, "{log}");
    assert_eq!(gets(&srv, "/good.json"), 1, "{}", srv.text());
    assert_eq!(gets(&srv, "/current.json"), 1, "{}", srv.text());
    assert_eq!(gets(&srv, "/vmlinuz"), 2, "{}", srv.text());

    // An upgrade still under way (its server accepts and never answers), asked for again:
    // acknowledged, nothing new started; another image meanwhile is refused.
    let mut slow = Background::start(
        &ns,
        &[
            "python3",
            "-u",
            "-c",
            "import socket,time\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\ns.bind(('127.0.0.1',8081))\ns.listen(8)\nprint('listening',flush=True)\nwhile True:\n  c,_=s.accept()\n  print('accepted',flush=True)\n  time.sleep(30)",
        ],
        www.path().join("slow.log"),
    );
    let slow_url = "http://127.0.0.1:8081/m.json";
    wait_for("the slow server", T, || slow.text().contains("listening"), || slow.text());
    println!("{}", scenario(&["upgrade", AT, &admin, slow_url]));
    wait_for("the slow fetch", T, || slow.text().contains("accepted"), || slow.text());
    println!("{}", scenario(&["upgrade", AT, &admin, slow_url]));
    wait_for(
        "the repeat under way noticed",
        T,
        || node.log_text().contains("requested again while it is under way: nothing new started"),
        || node.log_text(),
    );
    println!("{}", scenario(&["upgrade_busy", AT, &admin, "http://127.0.0.1:8080/good.json"]));
    assert_eq!(slow.text().matches("accepted").count(), 1, "{}", slow.text());
    // The slow server goes away: that upgrade ends in one refusal, the node keeps running.
    slow.stop();
    wait_for(
        "the slow upgrade's end",
        T,
        || node.log_text().matches("upgrade refused").count() == 2,
        || node.log_text(),
    );
    srv.stop();
    let (ok, out, err) = keelson(&ns, &["reset", "--reboot", "--keelsonconfig", &reader]);
    assert!(!ok && err.contains("os:reader is not allowed"), "{out}{err}");

    assert!(
        std::fs::read_dir(&state).unwrap().count() > 0,
        "the state directory holds files before the reset"
    );
    println!("{}", scenario(&["reset", AT, &admin]));
    wait_for("the reset", T, || node.log_text().contains("reset: wiped"), || node.log_text());
    let (log, root) = node.stop_keeping_root();
    assert!(log.contains("reset requested: wipe STATE and EPHEMERAL, then reboot"), "{log}");
    let left: Vec<_> = std::fs::read_dir(&state).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "the state directory is blank: {left:?}");
    assert!(!config.exists(), "the config file is wiped");
    assert_eq!(
        std::fs::read_dir(root.path().join("var/lib/etcd")).unwrap().count(),
        0,
        "etcd's data is wiped"
    );

    // Started again over the same directories: maintenance mode.
    let node = Node::start_in_api_args(&ns, "", Some(&config), root, &["--api-listen", AT]);
    wait_for(
        "maintenance mode",
        T,
        || node.log_text().contains("maintenance certificate SHA256 fingerprint"),
        || node.log_text(),
    );
    println!("{}", common::python_scenario(&ns, &node, SCRIPT, &["maintenance", AT]));
    node.stop();
}
