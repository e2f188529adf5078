// SPDX-License-Identifier: Apache-2.0
//! The controllers against a real node: `keelson run` in maintenance mode in a network
//! namespace this test creates, its Talos API on the namespace's loopback, and a private etcd
//! in the same namespace. A PXE TalosMachine must leave `Booting` for `Pending` through the
//! node's real `Disks` answer over maintenance TLS and gRPC. Needs root and the `keelson`
//! binary (`cargo build -p keelson`, or `KEELSON_BIN`); without them it is skipped, or fails
//! when `KEELSON_REQUIRE_ROOT=1`.
#![allow(clippy::disallowed_methods)] // Tests drive processes from outside: threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use etcd::local::{LocalEtcd, Options};
use operator::ctl;
use operator::key::Layout;
use operator::kinds::{Body, MachineSpec, TM};
use operator::reconcile::Reconciler;
use operator::states::State;
use operator::store::{Resource, Store};
use operator::talos::GrpcNode;
use testkit::Netns;

/// The `keelson` binary: `KEELSON_BIN`, else next to this test's target directory.
fn keelson_bin() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KEELSON_BIN") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let p = exe.parent()?.parent()?.join("keelson");
    p.is_file().then_some(p)
}

struct Killed(Child, PathBuf);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_dir_all(&self.1);
    }
}

#[test]
fn a_pxe_machine_reaches_pending_through_a_real_nodes_disks() {
    if !testkit::require_root("a_pxe_machine_reaches_pending_through_a_real_nodes_disks") {
        return;
    }
    let Some(bin) = keelson_bin() else {
        testkit::skip_or_fail("no keelson binary (cargo build -p keelson, or KEELSON_BIN)");
        return;
    };
    if !std::process::Command::new("etcd")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        testkit::skip_or_fail("no etcd binary (Debian: etcd-server)");
        return;
    }
    let ns = Netns::new();
    ns.ip(&["link", "set", "lo", "up"]);
    let root = std::env::temp_dir().join(format!("keelson-opnode-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let log = root.join("keelson.log");
    let child = Command::new("ip")
        .args(["netns", "exec", &ns.name, "unshare", "-u"])
        .arg(&bin)
        .arg("run")
        .args(["--cmdline", ""])
        .arg("--root")
        .arg(&root)
        .arg("--state")
        .arg(root.join("state"))
        .args(["--api-listen", "127.0.0.1:50000"])
        .env("KEELSON_LOG", "debug")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let node = Killed(child, root.clone());
    let until = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(&log).unwrap_or_default().contains("maintenance certificate") {
        assert!(
            Instant::now() < until,
            "node not in maintenance mode: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // The operator's side runs in the namespace too: etcd and the reconciler on its loopback.
    let name = ns.name.clone();
    let data = root.join("etcd");
    let seen = std::thread::spawn(move || {
        Netns { name }.enter_and_keep();
        let mut opts = Options::new(&data.join("data"), &data.join("etcd.log"));
        opts.no_fsync = true;
        let etcd = LocalEtcd::start(&opts).unwrap();
        let layout = Layout::new("/keelson-operator", b"/keelson-operator");
        let mut s = Store::new(etcd.client(), layout.clone());
        ctl::apply(
            &mut s,
            "apiVersion: keelson.dev/v1alpha1\nkind: TalosMachine\nmetadata:\n  name: n1\nspec:\n  endpoint: 127.0.0.1\n  version: v1.13.0\n  pxeClientSpec:\n    macAddress: 52:54:00:00:00:01\n    cpuArchitecture: amd64\n",
        )
        .unwrap();
        let mut r = Reconciler::new(Store::new(etcd.client(), layout), GrpcNode::new(None).unwrap(), "default");
        let mut seen = Vec::new();
        let until = Instant::now() + Duration::from_secs(30);
        while Instant::now() < until {
            r.pass().unwrap();
            let m: Resource<Body<MachineSpec>> = s.get("default", TM, "n1").unwrap().unwrap();
            if seen.last() != Some(&m.spec.status.state) {
                seen.push(m.spec.status.state);
            }
            if m.spec.status.state == Some(State::Pending) {
                let why = m.spec.status.conditions.iter().find(|c| c.reason == "NodeAnswered").cloned();
                return (seen, why);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        (seen, None)
    })
    .join()
    .unwrap();
    let (states, why) = seen;
    assert_eq!(
        states,
        [Some(State::Booting), Some(State::Pending)],
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let why = why.expect("a NodeAnswered condition");
    assert!(why.message.starts_with("maintenance API answered Disks ("), "{why:?}");
    drop(node);
}

/// Entering a namespace without dropping it (the test's `Netns` deletes it on drop).
trait EnterAndKeep {
    fn enter_and_keep(self);
}

impl EnterAndKeep for Netns {
    fn enter_and_keep(self) {
        self.enter();
        std::mem::forget(self);
    }
}
