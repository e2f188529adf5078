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

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{client_pems, keelson_bin, EnterAndKeep, Killed};
use etcd::local::{LocalEtcd, Options};
use operator::ctl;
use operator::key::Layout;
use operator::kinds::{Body, MachineSpec, Status, TM};
use operator::reconcile::Reconciler;
use operator::secrets::{SecretsKey, CLUSTER_SECRETS};
use operator::states::State;
use operator::store::{Resource, Store};
use operator::talos::GrpcNode;
use testkit::Netns;

/// What a PXE TalosMachine went through against `keelson run --cmdline CMDLINE`, until
/// Installing asked about kubelet: its states in order, its status and the node's log. `None`
/// when skipped.
/// `generated`: the machine has no `config`; the reconciler generates the cluster's secrets
/// and configuration and calls the configured node with its own admin client (none given).
/// The fourth value is the stored cluster secrets resource, as JSON (empty without).
fn drive(
    test: &str,
    cmdline: &str,
    generated: bool,
) -> Option<(Vec<Option<State>>, Status, String, String)> {
    if !testkit::require_root(test) {
        return None;
    }
    let Some(bin) = keelson_bin() else {
        testkit::skip_or_fail("no keelson binary (cargo build -p keelson, or KEELSON_BIN)");
        return None;
    };
    if !std::process::Command::new("etcd")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        testkit::skip_or_fail("no etcd binary (Debian: etcd-server)");
        return None;
    }
    let ns = Netns::new();
    ns.ip(&["link", "set", "lo", "up"]);
    let root = std::env::temp_dir().join(format!("keelson-opnode-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let log = root.join("keelson.log");
    let child = Command::new("ip")
        .args(["netns", "exec", &ns.name, "unshare", "-u"])
        .arg(&bin)
        .arg("run")
        .args(["--cmdline", cmdline])
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
    // A machine configuration and an admin client certificate from `keelson gen config`.
    let gen = common::gen_config(&bin, &root);
    let config = std::fs::read_to_string(gen.join("machine.yaml")).unwrap();
    let pems = client_pems(&gen.join("keelsonconfig"), &root);
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
        let indented: String = config.lines().map(|l| format!("    {l}\n")).collect();
        let mut doc = "apiVersion: keelson.dev/v1alpha1\nkind: TalosMachine\nmetadata:\n  name: n1\nspec:\n  endpoint: 127.0.0.1\n  version: v1.13.0\n  pxeClientSpec:\n    macAddress: 52:54:00:00:00:01\n    cpuArchitecture: amd64\n".to_owned();
        if !generated {
            doc.push_str(&format!("  config: |\n{indented}"));
        }
        ctl::apply(&mut s, &doc).unwrap();
        let (ca, crt, key) = &pems;
        let secure = etcd::client::tls_config(ca, Some((crt, key))).unwrap();
        let node = GrpcNode::new((!generated).then_some(secure)).unwrap();
        let mut r = Reconciler::new(Store::new(etcd.client(), layout), node, "default");
        if generated {
            r = r.with_secrets_key(SecretsKey::from_bytes(&[9; 32]).unwrap());
        }
        let stored = |s: &mut Store| {
            s.get::<serde_json::Value>("default", CLUSTER_SECRETS, "n1")
                .unwrap()
                .map(|r| r.spec.to_string())
                .unwrap_or_default()
        };
        let mut seen = Vec::new();
        let until = Instant::now() + Duration::from_secs(30);
        while Instant::now() < until {
            r.pass().unwrap();
            let m: Resource<Body<MachineSpec>> = s.get("default", TM, "n1").unwrap().unwrap();
            if seen.last() != Some(&m.spec.status.state) {
                seen.push(m.spec.status.state);
            }
            // Installing asks the configured node about kubelet over mutual TLS; any answer
            // (a kubelet that is not running in a namespace) ends the test.
            let asked = m.spec.status.events.iter().any(|e| e.reason == "KubeletNotReady" || e.reason == "KubeletRunning");
            let wrong = m.spec.status.events.iter().any(|e| e.reason == "WrongMachine");
            if (m.spec.status.state == Some(State::Installing) && asked) || wrong {
                return (seen, m.spec.status, stored(&mut s));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let m: Resource<Body<MachineSpec>> = s.get("default", TM, "n1").unwrap().unwrap();
        (seen, m.spec.status, stored(&mut s))
    })
    .join()
    .unwrap();
    let (states, status, secrets) = seen;
    let log_text = std::fs::read_to_string(&log).unwrap_or_default();
    drop(node);
    Some((states, status, log_text, secrets))
}

#[test]
fn a_pxe_machine_reaches_pending_through_a_real_nodes_disks() {
    // No BOOTIF= on the node's command line: no boot report, so Disks answers instead.
    let Some((states, status, log_text, _)) =
        drive("a_pxe_machine_reaches_pending_through_a_real_nodes_disks", "", false)
    else {
        return;
    };
    assert_eq!(
        states,
        [Some(State::Booting), Some(State::Pending), Some(State::Installing)],
        "{status:?}\n{log_text}"
    );
    let reasons: Vec<&str> = status.events.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(reasons[..3], ["WaitingForBoot", "NodeAnswered", "Applied"], "{status:?}");
    let answered = &status.events[1];
    assert!(answered.message.starts_with("maintenance API answered Disks ("), "{answered:?}");
    let kubelet = &status.events[3];
    assert!(kubelet.message.starts_with("kubelet is "), "{kubelet:?}");
    eprintln!("events: {:?}", status.events);
    // The applied configuration is in status without its secrets.
    assert!(status.config.contains("REDACTED") && !status.config_hash.is_empty());
}

#[test]
fn a_pxe_machine_reaches_pending_on_the_nodes_boot_report() {
    // The command line a keelson-operator boot script gives: the node reports its boot NIC
    // and image in Version, and the operator matches the MAC to the pxeClientSpec.
    let Some((states, status, log_text, _)) = drive(
        "a_pxe_machine_reaches_pending_on_the_nodes_boot_report",
        "BOOTIF=01-52-54-00-00-00-01 keelson.image=v1.13.0",
        false,
    ) else {
        return;
    };
    assert_eq!(
        states,
        [Some(State::Booting), Some(State::Pending), Some(State::Installing)],
        "{status:?}\n{log_text}"
    );
    let reasons: Vec<&str> = status.events.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(reasons[..3], ["WaitingForBoot", "BootReported", "Applied"], "{status:?}");
    assert_eq!(status.events[1].message, "node booted from 52:54:00:00:00:01 (v1.13.0)");
    // The image is the version asked for: recorded as observed.
    assert_eq!(status.observed_version, "v1.13.0");
}

#[test]
fn a_pxe_machine_stays_booting_when_another_machine_answers() {
    let Some((states, status, log_text, _)) = drive(
        "a_pxe_machine_stays_booting_when_another_machine_answers",
        "BOOTIF=01-52-54-00-00-00-99 keelson.image=v1.13.0",
        false,
    ) else {
        return;
    };
    assert_eq!(states, [Some(State::Booting)], "{status:?}\n{log_text}");
    let wrong = status.events.iter().find(|e| e.reason == "WrongMachine");
    assert!(
        wrong.is_some_and(|e| e.message
            == "the node at this endpoint booted from 52:54:00:00:00:99, not 52:54:00:00:00:01"),
        "{status:?}"
    );
}

#[test]
fn a_machine_without_config_gets_its_clusters_generated_one() {
    // No config and no client certificate given: the operator generates the cluster's
    // secrets, applies the configuration rendered from them in maintenance mode, and the
    // configured node answers ServiceList to the operator's own admin certificate.
    let Some((states, status, log_text, secrets)) = drive(
        "a_machine_without_config_gets_its_clusters_generated_one",
        "BOOTIF=01-52-54-00-00-00-01 keelson.image=v1.13.0",
        true,
    ) else {
        return;
    };
    assert_eq!(
        states,
        [Some(State::Booting), Some(State::Pending), Some(State::Installing)],
        "{status:?}\n{log_text}"
    );
    let reasons: Vec<&str> = status.events.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(
        reasons[..4],
        ["WaitingForBoot", "BootReported", "Applied", "KubeletNotReady"],
        "{status:?}"
    );
    // The applied configuration is the generated one, its keys redacted in status.
    assert!(status.config.contains("type: controlplane"), "{}", status.config);
    assert!(status.config.contains("clusterName: n1"), "{}", status.config);
    assert!(!status.config.contains("LS0tLS1CRUdJTiBQUklWQVRF"), "{}", status.config);
    // Stored sealed: a nonce and ciphertext, no PEM and no token in the clear.
    let v: serde_json::Value = serde_json::from_str(&secrets).unwrap();
    assert!(v["nonce"].is_string() && v["sealed"].is_string(), "{secrets}");
    assert!(!secrets.contains("BEGIN") && !secrets.contains("LS0tLS1CRUdJT"), "{secrets}");
}
