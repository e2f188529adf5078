// SPDX-License-Identifier: Apache-2.0
//! The kinds on a real etcd (a private member per test, loopback, temp dir): apply, get,
//! describe, delete, and the controllers driving machines through their states against a
//! scripted node. Without the `etcd` binary a test is skipped, or fails when
//! `KEELSON_REQUIRE_ROOT=1`.
#![allow(clippy::disallowed_methods)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::collections::BTreeMap;

use common::Dir;
use etcd::local::LocalEtcd;
use operator::ctl::{self, CtlError, Output};
use operator::key::Layout;
use operator::kinds::{Body, Kind, MachineSpec, PoolSpec, TCP, TM};
use operator::reconcile::{Kubeconfig, NodeApi, Reconciler, KUBECONFIGS, RESET_FINALIZER};
use operator::states::{CallError, ServiceObs, State};
use operator::store::{Resource, Store};

fn start(test: &str) -> Option<(LocalEtcd, Dir)> {
    common::start_etcd("kinds", test)
}

fn store(etcd: &LocalEtcd) -> Store {
    Store::new(etcd.client(), Layout::new("/keelson-operator", b"/keelson-operator"))
}

/// `printf 'apiVersion: v1\nkind: Config\nclusters: []\n' > kubeconfig; tar cf - kubeconfig |
/// gzip -9 | base64`.
const KUBECONFIG_TGZ: &str = "H4sIAAAAAAACA+3SMQ7CMAyF4cw5hY/gSA1DVu7AghhKKSgqSlDacn5CFyQGmEAg/d9iy8+T5WHe911Ox3gyH6PVqmmWWj1XVe8e/X3unPdqRM0XzOPUFhFTcp5e7b3L/1R7iZu+jDGnIFdnh5gOQdbLQ9juXI9TwyDbnTUAAAAAAAAAAAAAAAAAgF9yA8S2kFoAKAAA";

const CP: &str = "\
apiVersion: keelson.dev/v1alpha1
kind: TalosControlPlane
metadata:
  name: cp
spec:
  version: v1.13.0
  endpoint: https://10.0.0.10:6443
  kubeVersion: v1.35.0
  config: |
    machine:
      type: controlplane
      token: sekrit.token
  metalSpec:
    machines:
      - address: 10.0.0.11
        pxeClientSpec:
          macAddress: 52:54:00:00:00:11
          cpuArchitecture: amd64
      - address: 10.0.0.12
";

const TM_DOC: &str = "\
apiVersion: keelson.dev/v1alpha1
kind: TalosMachine
metadata:
  name: lone
spec:
  endpoint: 10.0.0.20
  version: v1.13.0
  config: 'machine: {type: worker}'
  pxeClientSpec:
    macAddress: 52:54:00:00:00:20
    cpuArchitecture: arm64
";

#[test]
fn apply_get_describe_delete() {
    let Some((etcd, _dir)) = start("crud") else { return };
    let mut s = store(&etcd);
    let text = format!("{CP}---\n{TM_DOC}");
    let out = ctl::apply(&mut s, &text).unwrap();
    assert_eq!(out, ["taloscontrolplane/cp created", "talosmachine/lone created"]);
    assert_eq!(ctl::apply(&mut s, &text).unwrap()[1], "talosmachine/lone unchanged");
    let out = ctl::apply(&mut s, &TM_DOC.replace("v1.13.0", "v1.13.1")).unwrap();
    assert_eq!(out, ["talosmachine/lone configured"]);

    // One bad document refuses the whole input: nothing of the good one is written.
    let bad = format!(
        "{}---\n{}",
        CP.replace("name: cp", "name: cp2"),
        TM_DOC.replace("name: lone", "name: other").replace("10.0.0.20", "10.0.0.300")
    );
    let e = ctl::apply(&mut s, &bad).unwrap_err();
    let CtlError::Input(e) = e else { panic!("{e}") };
    assert_eq!((e.doc, e.path.as_str(), e.line), (2, "spec.endpoint", 26));
    assert!(s.get::<serde_json::Value>("default", TCP, "cp2").unwrap().is_none());

    let table = ctl::get(&mut s, "default", Kind::Machine, None, Output::Table).unwrap();
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 2, "{table}");
    let head: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(head, ["NAME", "STATE", "VERSION", "ENDPOINT", "AGE"]);
    let row: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(row[..3], ["lone", "v1.13.1", "10.0.0.20"]);

    // YAML out is YAML in.
    let yaml = ctl::get(&mut s, "default", Kind::ControlPlane, Some("cp"), Output::Yaml).unwrap();
    assert_eq!(ctl::apply(&mut s, &yaml).unwrap(), ["taloscontrolplane/cp unchanged"]);
    let json = ctl::get(&mut s, "default", Kind::ControlPlane, None, Output::Json).unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["items"][0]["spec"]["metalSpec"]["machines"][1]["address"], "10.0.0.12");

    let d = ctl::describe(&mut s, "default", Kind::Machine, "lone").unwrap();
    assert!(d.contains("Name:         lone") && d.contains("Conditions:") && d.contains("Events:"));
    assert!(matches!(
        ctl::describe(&mut s, "default", Kind::Machine, "nope"),
        Err(CtlError::NotFound { .. })
    ));

    assert_eq!(
        ctl::delete(&mut s, "default", Kind::Machine, "lone").unwrap(),
        "talosmachine/lone deleted"
    );
    assert!(s.get::<serde_json::Value>("default", TM, "lone").unwrap().is_none());
}

/// A node that answers as a script says, and records the calls.
#[derive(Debug, Default)]
struct Scripted {
    /// Disks fails this many times first (the node is still booting).
    boot_failures: usize,
    /// ServiceInfo says "Waiting" this many times first.
    kubelet_waits: usize,
    version: String,
    calls: Vec<String>,
    applied: BTreeMap<String, String>,
}

impl NodeApi for Scripted {
    fn version(&mut self, a: &str) -> Result<String, CallError> {
        self.calls.push(format!("Version {a}"));
        Ok(self.version.clone())
    }
    fn disks(&mut self, a: &str) -> Result<usize, CallError> {
        self.calls.push(format!("Disks {a}"));
        if self.boot_failures > 0 {
            self.boot_failures -= 1;
            return Err(CallError::Unreachable("connection refused".into()));
        }
        Ok(1)
    }
    fn apply_configuration(
        &mut self,
        a: &str,
        insecure: bool,
        config: &str,
        dry_run: bool,
    ) -> Result<bool, CallError> {
        self.calls.push(format!("ApplyConfiguration {a} insecure={insecure} dry_run={dry_run}"));
        self.applied.insert(a.into(), config.into());
        // The node reboots into the install and drops the connection.
        Ok(true)
    }
    fn service_info(&mut self, a: &str, name: &str) -> Result<ServiceObs, CallError> {
        self.calls.push(format!("ServiceInfo {a} {name}"));
        if self.kubelet_waits > 0 {
            self.kubelet_waits -= 1;
            return Ok(ServiceObs { state: "Waiting".into(), healthy: false });
        }
        Ok(ServiceObs { state: "Running".into(), healthy: true })
    }
    fn bootstrap(&mut self, a: &str) -> Result<(), CallError> {
        self.calls.push(format!("Bootstrap {a}"));
        Ok(())
    }
    fn kubeconfig(&mut self, a: &str) -> Result<String, CallError> {
        self.calls.push(format!("Kubeconfig {a}"));
        // As a node answers: base64 of a .tar.gz holding `kubeconfig` (GNU tar, gzip -9).
        Ok(KUBECONFIG_TGZ.into())
    }
    fn reset(&mut self, a: &str) -> Result<(), CallError> {
        self.calls.push(format!("Reset {a}"));
        Ok(())
    }
    fn upgrade(&mut self, a: &str, image: &str) -> Result<(), CallError> {
        self.calls.push(format!("Upgrade {a} {image}"));
        Ok(())
    }
}

fn machine(s: &mut Store, id: &str) -> Resource<Body<MachineSpec>> {
    s.get("default", TM, id).unwrap().unwrap()
}

fn state_of(s: &mut Store, id: &str) -> Option<State> {
    machine(s, id).spec.status.state
}

#[test]
fn a_machine_goes_from_booting_to_available_and_upgrades() {
    let Some((etcd, _dir)) = start("machine") else { return };
    let mut s = store(&etcd);
    ctl::apply(&mut s, TM_DOC).unwrap();
    let node = Scripted {
        boot_failures: 2,
        kubelet_waits: 1,
        version: "v1.13.0".into(),
        ..Default::default()
    };
    let mut r = Reconciler::new(store(&etcd), node, "default");
    let mut seen = Vec::new();
    for _ in 0..12 {
        // Backoff and polling are the loop's business; the test steps without waiting.
        r.store
            .modify::<Body<MachineSpec>>("default", TM, "lone", |m| m.spec.status.next_attempt = 0)
            .unwrap();
        r.pass().unwrap();
        let st = state_of(&mut s, "lone");
        if seen.last() != Some(&st) {
            seen.push(st);
        }
    }
    use State::*;
    assert_eq!(seen, [Some(Booting), Some(Pending), Some(Installing), Some(Available)]);
    let calls = &r.node.calls;
    assert_eq!(calls.iter().filter(|c| c.starts_with("Disks")).count(), 3, "{calls:?}");
    assert!(calls.contains(&"ApplyConfiguration 10.0.0.20 insecure=true dry_run=false".into()));
    let m = machine(&mut s, "lone");
    assert_eq!(m.spec.status.observed_version, "v1.13.0");
    assert!(m.metadata.finalizers.contains(&RESET_FINALIZER.to_owned()));
    let reasons: Vec<&str> = m.spec.status.events.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(
        reasons,
        [
            "WaitingForBoot",
            "WaitingForBoot",
            "NodeAnswered",
            "Applied",
            "KubeletNotReady",
            "KubeletRunning"
        ]
    );
    assert!(m.spec.status.events.iter().all(|e| e.time > 0));

    // A new version: Upgrade, then Available once the node runs it.
    ctl::apply(&mut s, &TM_DOC.replace("v1.13.0", "v1.14.0")).unwrap();
    r.pass().unwrap();
    assert_eq!(state_of(&mut s, "lone"), Some(Upgrading));
    assert!(r
        .node
        .calls
        .contains(&"Upgrade 10.0.0.20 ghcr.io/siderolabs/installer:v1.14.0".into()));
    r.pass().unwrap();
    assert_eq!(state_of(&mut s, "lone"), Some(Upgrading), "the node still runs v1.13.0");
    r.node.version = "v1.14.0".into();
    r.pass().unwrap();
    assert_eq!(state_of(&mut s, "lone"), Some(Available));

    // Delete: the node is reset, then the resource goes.
    let out = ctl::delete(&mut s, "default", Kind::Machine, "lone").unwrap();
    assert!(out.contains("deleting"), "{out}");
    r.pass().unwrap();
    assert!(r.node.calls.contains(&"Reset 10.0.0.20".into()));
    assert!(s.get::<serde_json::Value>("default", TM, "lone").unwrap().is_none());
}

#[test]
fn a_control_plane_creates_its_machines_bootstraps_and_is_ready() {
    let Some((etcd, _dir)) = start("cp") else { return };
    let mut s = store(&etcd);
    ctl::apply(&mut s, CP).unwrap();
    let node = Scripted { version: "v1.13.0".into(), kubelet_waits: 1, ..Default::default() };
    let key = || operator::secrets::SecretsKey::from_bytes(&[7; 32]).unwrap();
    let mut r = Reconciler::new(store(&etcd), node, "default").with_secrets_key(key());
    // The control plane's states as each pass leaves them, repeats dropped.
    let mut seen: Vec<Option<State>> = vec![];
    for _ in 0..12 {
        r.pass().unwrap();
        let cp: Resource<Body<PoolSpec>> = s.get("default", TCP, "cp").unwrap().unwrap();
        let st = cp.spec.status.state;
        if seen.last() != Some(&st) {
            seen.push(st);
        }
        // Available only once every machine is.
        if st == Some(State::Available) {
            for id in ["cp-10-0-0-11", "cp-10-0-0-12"] {
                assert_eq!(state_of(&mut s, id), Some(State::Available), "{seen:?}");
            }
        }
    }
    use State::{Available, Bootstrapped, Pending, Ready};
    assert_eq!(seen, [Some(Pending), Some(Available), Some(Bootstrapped), Some(Ready)]);
    let cp: Resource<Body<PoolSpec>> = s.get("default", TCP, "cp").unwrap().unwrap();
    assert_eq!(cp.spec.status.state, Some(State::Ready), "{:?}", cp.spec.status);
    for id in ["cp-10-0-0-11", "cp-10-0-0-12"] {
        assert_eq!(state_of(&mut s, id), Some(State::Available));
    }
    // Bootstrap goes to the first machine only, once.
    let boots: Vec<&String> = r.node.calls.iter().filter(|c| c.starts_with("Bootstrap")).collect();
    assert_eq!(boots, ["Bootstrap 10.0.0.11"]);
    // The kubeconfig is stored sealed: neither its text nor the node's archive is readable
    // in etcd; `kubeconfig` opens it with the key, and only with that key.
    let k: Resource<Kubeconfig> = s.get("default", KUBECONFIGS, "cp").unwrap().unwrap();
    let raw = serde_json::to_string(&k.spec).unwrap();
    assert!(!raw.contains("H4sI") && !raw.contains("Config"), "{raw}");
    let text = ctl::kubeconfig(&mut s, "default", &key(), "cp").unwrap();
    assert_eq!(text, b"apiVersion: v1\nkind: Config\nclusters: []\n");
    let other = operator::secrets::SecretsKey::from_bytes(&[8; 32]).unwrap();
    let e = ctl::kubeconfig(&mut s, "default", &other, "cp").unwrap_err().to_string();
    assert!(e.contains("cannot be opened"), "{e}");
    let e = ctl::kubeconfig(&mut s, "default", &key(), "nope").unwrap_err().to_string();
    assert!(e.contains("no kubeconfig of TalosControlPlane nope"), "{e}");
    // The status shows the configuration applied without its secrets.
    let m = machine(&mut s, "cp-10-0-0-11");
    assert!(r.node.applied["10.0.0.11"].contains("sekrit.token"));
    assert!(!m.spec.status.config.contains("sekrit") && m.spec.status.config.contains("REDACTED"));

    // A machine dropped from the list is reset and goes; deleting the control plane takes the
    // rest with it.
    ctl::apply(&mut s, &CP.replace("      - address: 10.0.0.12\n", "")).unwrap();
    r.pass().unwrap();
    r.pass().unwrap();
    assert!(s.get::<serde_json::Value>("default", TM, "cp-10-0-0-12").unwrap().is_none());
    assert!(r.node.calls.contains(&"Reset 10.0.0.12".into()));
    ctl::delete(&mut s, "default", Kind::ControlPlane, "cp").unwrap();
    for _ in 0..3 {
        r.pass().unwrap();
    }
    assert!(s.get::<serde_json::Value>("default", TCP, "cp").unwrap().is_none());
    assert!(s.get::<serde_json::Value>("default", TM, "cp-10-0-0-11").unwrap().is_none());
    assert!(r.node.calls.contains(&"Reset 10.0.0.11".into()));
}

#[test]
fn a_machine_whose_parent_is_gone_is_orphaned_and_not_reset() {
    let Some((etcd, _dir)) = start("orphan") else { return };
    let mut s = store(&etcd);
    let doc = TM_DOC.replace("  version: v1.13.0\n", "  version: v1.13.0\n  workerRef: gone\n");
    ctl::apply(&mut s, &doc).unwrap();
    let mut r = Reconciler::new(store(&etcd), Scripted::default(), "default");
    r.pass().unwrap();
    r.pass().unwrap();
    assert_eq!(state_of(&mut s, "lone"), Some(State::Orphaned));
    assert!(r.node.calls.is_empty(), "{:?}", r.node.calls);
    ctl::delete(&mut s, "default", Kind::Machine, "lone").unwrap();
    assert!(r.node.calls.is_empty());
}

/// A node whose Disks answer comes while someone else rewrites the machine.
struct Meddling {
    other: Store,
    /// Concurrent writes still to make, and Disks calls seen.
    meddle: usize,
    calls: usize,
}

impl NodeApi for Meddling {
    fn version(&mut self, _: &str) -> Result<String, CallError> {
        Err(CallError::Timeout)
    }
    fn disks(&mut self, _: &str) -> Result<usize, CallError> {
        self.calls += 1;
        if self.meddle == 0 {
            return Ok(1);
        }
        self.meddle -= 1;
        // Between the reconciler's read and its write: a label added by another writer.
        self.other
            .modify::<Body<MachineSpec>>("default", TM, "lone", |m| {
                let n = m.spec.labels.len();
                m.spec.labels.insert(format!("touched-{n}"), "yes".into());
            })
            .unwrap();
        Ok(1)
    }
    fn apply_configuration(
        &mut self,
        _: &str,
        _: bool,
        _: &str,
        _: bool,
    ) -> Result<bool, CallError> {
        Err(CallError::Timeout)
    }
    fn service_info(&mut self, _: &str, _: &str) -> Result<ServiceObs, CallError> {
        Err(CallError::Timeout)
    }
    fn bootstrap(&mut self, _: &str) -> Result<(), CallError> {
        Err(CallError::Timeout)
    }
    fn kubeconfig(&mut self, _: &str) -> Result<String, CallError> {
        Err(CallError::Timeout)
    }
    fn reset(&mut self, _: &str) -> Result<(), CallError> {
        Err(CallError::Timeout)
    }
    fn upgrade(&mut self, _: &str, _: &str) -> Result<(), CallError> {
        Err(CallError::Timeout)
    }
}

#[test]
fn a_status_write_that_conflicts_is_computed_again_from_a_fresh_read() {
    let Some((etcd, _dir)) = start("conflict") else { return };
    let mut s = store(&etcd);
    ctl::apply(&mut s, TM_DOC).unwrap();
    let mut r = Reconciler::new(
        store(&etcd),
        Meddling { other: store(&etcd), meddle: 2, calls: 0 },
        "default",
    );
    r.pass().unwrap(); // (new) -> Booting, no call
    assert_eq!(state_of(&mut s, "lone"), Some(State::Booting));
    // Disks answers, but the first two answers come with a concurrent write: those status
    // writes conflict, each retry reads afresh (and asks again), and the third write lands
    // without losing the other writer's labels.
    r.pass().unwrap();
    let m = machine(&mut s, "lone");
    assert_eq!(m.spec.status.state, Some(State::Pending));
    assert_eq!(r.node.calls, 3);
    assert_eq!(m.spec.labels.len(), 2, "{:?}", m.spec.labels);
    assert_eq!(m.spec.status.events.iter().filter(|e| e.reason == "NodeAnswered").count(), 1);
}

/// A network-booted node: it reports its boot NIC and image, and a reboot brings it back
/// with the image the boot service serves then.
#[derive(Debug, Default)]
struct Netboot {
    image: String,
    /// What the next boot gets (the boot service's answer for this MAC).
    served: String,
    calls: Vec<String>,
}

impl NodeApi for Netboot {
    fn version(&mut self, a: &str) -> Result<String, CallError> {
        self.calls.push(format!("Version {a}"));
        Ok("v0.1.0".into())
    }
    fn boot_report(
        &mut self,
        a: &str,
        insecure: bool,
    ) -> Result<Option<operator::states::BootReport>, CallError> {
        self.calls.push(format!("BootReport {a} insecure={insecure}"));
        Ok(Some(operator::states::BootReport {
            mac: "52:54:00:00:00:20".into(),
            image: self.image.clone(),
        }))
    }
    fn disks(&mut self, a: &str) -> Result<usize, CallError> {
        self.calls.push(format!("Disks {a}"));
        Ok(1)
    }
    fn apply_configuration(
        &mut self,
        a: &str,
        insecure: bool,
        _config: &str,
        _dry_run: bool,
    ) -> Result<bool, CallError> {
        self.calls.push(format!("ApplyConfiguration {a} insecure={insecure}"));
        Ok(false)
    }
    fn service_info(&mut self, a: &str, name: &str) -> Result<ServiceObs, CallError> {
        self.calls.push(format!("ServiceInfo {a} {name}"));
        Ok(ServiceObs { state: "Running".into(), healthy: true })
    }
    fn bootstrap(&mut self, _a: &str) -> Result<(), CallError> {
        Ok(())
    }
    fn kubeconfig(&mut self, _a: &str) -> Result<String, CallError> {
        Ok(String::new())
    }
    fn reset(&mut self, a: &str) -> Result<(), CallError> {
        self.calls.push(format!("Reset {a}"));
        Ok(())
    }
    fn upgrade(&mut self, a: &str, image: &str) -> Result<(), CallError> {
        self.calls.push(format!("Upgrade {a} {image}"));
        Ok(())
    }
    fn reboot(&mut self, a: &str) -> Result<(), CallError> {
        self.calls.push(format!("Reboot {a}"));
        self.image = self.served.clone();
        Ok(())
    }
}

#[test]
fn a_network_booted_machine_is_reimaged_by_a_reboot() {
    let Some((etcd, _dir)) = start("netboot") else { return };
    let mut s = store(&etcd);
    ctl::apply(&mut s, TM_DOC).unwrap();
    let node = Netboot { image: "v1.13.0".into(), served: "v1.13.0".into(), ..Default::default() };
    let mut r = Reconciler::new(store(&etcd), node, "default");
    let mut seen = Vec::new();
    let step = |r: &mut Reconciler<Netboot>, seen: &mut Vec<Option<State>>| {
        r.store
            .modify::<Body<MachineSpec>>("default", TM, "lone", |m| m.spec.status.next_attempt = 0)
            .unwrap();
        r.pass().unwrap();
        let st = state_of(&mut store(&etcd), "lone");
        if seen.last() != Some(&st) {
            seen.push(st);
        }
    };
    for _ in 0..6 {
        step(&mut r, &mut seen);
    }
    use State::*;
    assert_eq!(seen, [Some(Booting), Some(Pending), Some(Installing), Some(Available)]);
    // The boot report settled Booting: no Disks call.
    assert!(!r.node.calls.iter().any(|c| c.starts_with("Disks")), "{:?}", r.node.calls);
    assert_eq!(machine(&mut s, "lone").spec.status.observed_version, "v1.13.0");

    // A new version: the boot service serves it from now on; the operator reboots the node.
    r.node.served = "v1.13.1".into();
    r.node.calls.clear();
    ctl::apply(&mut s, &TM_DOC.replace("version: v1.13.0", "version: v1.13.1")).unwrap();
    seen.clear();
    for _ in 0..6 {
        step(&mut r, &mut seen);
    }
    assert_eq!(seen, [Some(Upgrading), Some(Available)], "{:?}", r.node.calls);
    let calls = &r.node.calls;
    assert!(calls.contains(&"Reboot 10.0.0.20".to_owned()), "{calls:?}");
    // Not Talos's Upgrade (an installer image for a disk install).
    assert!(!calls.iter().any(|c| c.starts_with("Upgrade")), "{calls:?}");
    // Upgrading ends on the image the node reports, over mutual TLS.
    assert!(calls.contains(&"BootReport 10.0.0.20 insecure=false".to_owned()), "{calls:?}");
    let m = machine(&mut s, "lone");
    assert_eq!(m.spec.status.observed_version, "v1.13.1");
    let reasons: Vec<&str> = m.spec.status.events.iter().map(|e| e.reason.as_str()).collect();
    assert!(reasons.ends_with(&["Upgrading", "KubeletRunning"]), "{reasons:?}");
    assert!(reasons.contains(&"BootReported"), "{reasons:?}");
}

#[test]
fn pools_without_config_get_their_clusters_generated_configs() {
    let Some((etcd, _dir)) = start("generated") else { return };
    let mut s = store(&etcd);
    let cp = CP
        .replace(
            "  config: |\n    machine:\n      type: controlplane\n      token: sekrit.token\n",
            "",
        )
        .replace("      - address: 10.0.0.12\n", "");
    let tw = "apiVersion: keelson.dev/v1alpha1\nkind: TalosWorker\nmetadata:\n  name: w\nspec:\n  version: v1.13.0\n  controlPlaneRef: cp\n  metalSpec:\n    machines:\n      - address: 10.0.0.21\n";
    ctl::apply(&mut s, &format!("{cp}---\n{tw}")).unwrap();
    let node = Scripted { version: "v1.13.0".into(), ..Default::default() };
    let key = operator::secrets::SecretsKey::from_bytes(&[5; 32]).unwrap();
    let mut r = Reconciler::new(store(&etcd), node, "default").with_secrets_key(key);
    for _ in 0..12 {
        r.pass().unwrap();
    }
    let parse =
        |a: &str| -> serde_yaml::Value { serde_yaml::from_str(&r.node.applied[a]).unwrap() };
    let (c, w) = (parse("10.0.0.11"), parse("10.0.0.21"));
    assert_eq!(c["machine"]["type"].as_str(), Some("controlplane"));
    assert_eq!(w["machine"]["type"].as_str(), Some("worker"));
    // One cluster: the same CA and token, the control plane's endpoint.
    assert_eq!(c["machine"]["ca"]["crt"], w["machine"]["ca"]["crt"]);
    assert_eq!(c["cluster"]["token"], w["cluster"]["token"]);
    assert_eq!(c["cluster"]["clusterName"].as_str(), Some("cp"));
    for v in [&c, &w] {
        assert_eq!(
            v["cluster"]["controlPlane"]["endpoint"].as_str(),
            Some("https://10.0.0.10:6443")
        );
    }
    // The worker holds no CA key; the control plane does.
    assert!(c["machine"]["ca"]["key"].is_string() && w["machine"]["ca"].get("key").is_none());
    // One sealed bundle, for the control plane's name.
    use operator::secrets::CLUSTER_SECRETS;
    let (bundles, _) = s.list::<serde_json::Value>("default", CLUSTER_SECRETS).unwrap();
    let ids: Vec<&str> = bundles.iter().map(|b| b.metadata.id.as_str()).collect();
    assert_eq!(ids, ["cp"]);
    for id in ["cp-10-0-0-11", "w-10-0-0-21"] {
        assert_eq!(state_of(&mut s, id), Some(State::Available), "{id}");
    }
    // Another key cannot open it: the machines are not configured, and say why.
    let other = operator::secrets::SecretsKey::from_bytes(&[6; 32]).unwrap();
    let mut r2 =
        Reconciler::new(store(&etcd), Scripted::default(), "default").with_secrets_key(other);
    ctl::apply(
        &mut s,
        &TM_DOC
            .replace("name: lone", "name: cp2")
            .replace("  config: 'machine: {type: worker}'\n", "  controlPlaneRef: cp\n"),
    )
    .unwrap();
    for _ in 0..4 {
        r2.store
            .modify::<Body<MachineSpec>>("default", TM, "cp2", |m| m.spec.status.next_attempt = 0)
            .unwrap();
        r2.pass().unwrap();
    }
    let m = machine(&mut s, "cp2");
    assert!(r2.node.applied.is_empty(), "{:?}", r2.node.calls);
    let why = m.spec.status.conditions.iter().find(|c| c.kind == "ConfigApplied").unwrap();
    assert!(why.message.contains("cannot be opened"), "{why:?}");
}

#[test]
fn a_worker_is_pending_until_every_machine_is_available_then_ready() {
    let Some((etcd, _dir)) = start("worker") else { return };
    let mut s = store(&etcd);
    let tw = "apiVersion: keelson.dev/v1alpha1\nkind: TalosWorker\nmetadata:\n  name: w\nspec:\n  version: v1.13.0\n  controlPlaneRef: cp\n  config: |\n    machine:\n      type: worker\n  metalSpec:\n    machines:\n      - address: 10.0.0.21\n      - address: 10.0.0.22\n";
    ctl::apply(&mut s, &format!("{CP}---\n{tw}")).unwrap();
    // kubelet answers Waiting four times: the worker's machines become Available apart.
    let node = Scripted { version: "v1.13.0".into(), kubelet_waits: 4, ..Default::default() };
    let mut r = Reconciler::new(store(&etcd), node, "default");
    let ids = ["w-10-0-0-21", "w-10-0-0-22"];
    let mut seen: Vec<Option<State>> = vec![];
    let mut partly_available_while_pending = false;
    for _ in 0..20 {
        // Every machine due at once (its 30 s wait skipped): a write makes it due.
        for id in ids {
            let _ = r.store.modify::<Body<MachineSpec>>("default", TM, id, |m| {
                m.spec.status.next_attempt = 0;
            });
        }
        r.pass().unwrap();
        let w: Resource<Body<PoolSpec>> =
            s.get("default", operator::kinds::TW, "w").unwrap().unwrap();
        let st = w.spec.status.state;
        let available =
            ids.iter().filter(|id| state_of(&mut s, id) == Some(State::Available)).count();
        match st {
            Some(State::Ready) => assert_eq!(available, 2, "Ready before its machines"),
            Some(State::Pending) if available == 1 => partly_available_while_pending = true,
            _ => {}
        }
        if seen.last() != Some(&st) {
            seen.push(st);
        }
    }
    assert_eq!(seen, [Some(State::Pending), Some(State::Ready)]);
    assert!(partly_available_while_pending, "one machine Available, the worker still Pending");
    let w: Resource<Body<PoolSpec>> = s.get("default", operator::kinds::TW, "w").unwrap().unwrap();
    let reasons: Vec<&str> = w.spec.status.events.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(reasons, ["ConfigReady", "MachinesAvailable"]);
}

#[test]
fn the_kubeconfig_command_prints_and_writes_the_control_planes_kubeconfig() {
    use std::os::unix::fs::PermissionsExt;
    use std::process::Command;
    let Some((etcd, dir)) = start("kubeconfig-cmd") else { return };
    let mut s = store(&etcd);
    ctl::apply(&mut s, CP).unwrap();
    let key_file = dir.0.join("secrets.key");
    std::fs::write(&key_file, [9u8; 32]).unwrap();
    let key = operator::secrets::SecretsKey::load(&key_file).unwrap();
    let node = Scripted { version: "v1.13.0".into(), ..Default::default() };
    let mut r = Reconciler::new(store(&etcd), node, "default").with_secrets_key(key);
    let bin = env!("CARGO_BIN_EXE_keelson-operator");
    let run = |args: &[&str]| {
        Command::new(bin)
            .arg("kubeconfig")
            .args(args)
            .args(["--etcd-endpoints", &etcd.client_url])
            .arg("--secrets-key")
            .arg(&key_file)
            .output()
            .unwrap()
    };
    // Before Ready: nothing stored, said so.
    let out = run(&["cp"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no kubeconfig of TalosControlPlane cp in namespace default"), "{err}");
    for _ in 0..12 {
        r.pass().unwrap();
    }
    let out = run(&["cp"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.stdout, b"apiVersion: v1\nkind: Config\nclusters: []\n");
    // To a file: mode 0600, even over an existing world-readable one.
    let path = dir.0.join("kc");
    std::fs::write(&path, "old").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = run(&["cp", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read(&path).unwrap(), b"apiVersion: v1\nkind: Config\nclusters: []\n");
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    // A missing key file is refused, and not made.
    let missing = dir.0.join("none.key");
    let out = Command::new(bin)
        .args(["kubeconfig", "cp", "--etcd-endpoints", &etcd.client_url, "--secrets-key"])
        .arg(&missing)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("none.key"));
    assert!(!missing.exists());
}

/// Nodes whose kubelet is unhealthy for `restart` ServiceInfo calls after each apply, and
/// counts each node's applies (the kubelet rollout's `NO_REBOOT` included).
#[derive(Default)]
struct Kubelets {
    restart: u32,
    down: BTreeMap<String, u32>,
    applies: BTreeMap<String, Vec<String>>,
}

impl NodeApi for Kubelets {
    fn version(&mut self, _: &str) -> Result<String, CallError> {
        Ok("v1.13.0".into())
    }
    fn disks(&mut self, _: &str) -> Result<usize, CallError> {
        Ok(1)
    }
    fn apply_configuration(
        &mut self,
        a: &str,
        _: bool,
        config: &str,
        _: bool,
    ) -> Result<bool, CallError> {
        self.applies.entry(a.into()).or_default().push(config.into());
        self.down.insert(a.into(), self.restart);
        Ok(false)
    }
    fn service_info(&mut self, a: &str, _: &str) -> Result<ServiceObs, CallError> {
        match self.down.get_mut(a) {
            Some(n) if *n > 0 => {
                *n -= 1;
                Ok(ServiceObs { state: "Running".into(), healthy: false })
            }
            _ => Ok(ServiceObs { state: "Running".into(), healthy: true }),
        }
    }
    fn bootstrap(&mut self, _: &str) -> Result<(), CallError> {
        Ok(())
    }
    fn kubeconfig(&mut self, _: &str) -> Result<String, CallError> {
        Ok(KUBECONFIG_TGZ.into())
    }
    fn reset(&mut self, _: &str) -> Result<(), CallError> {
        Ok(())
    }
    fn upgrade(&mut self, _: &str, _: &str) -> Result<(), CallError> {
        Ok(())
    }
}

#[test]
fn a_kubelet_rollout_goes_max_unavailable_machines_at_a_time() {
    let Some((etcd, _dir)) = start("kubelet-batches") else { return };
    let mut s = store(&etcd);
    let doc = |kube: &str| {
        format!("apiVersion: keelson.dev/v1alpha1\nkind: TalosControlPlane\nmetadata:\n  name: cp\nspec:\n  version: v1.13.0\n  endpoint: https://10.0.0.10:6443\n  kubeVersion: {kube}\n  rolloutStrategy:\n    maxUnavailable: 2\n  config: |\n    machine:\n      type: controlplane\n  metalSpec:\n    machines:\n      - address: 10.0.0.11\n      - address: 10.0.0.12\n      - address: 10.0.0.13\n")
    };
    ctl::apply(&mut s, &doc("v1.35.0")).unwrap();
    let key = operator::secrets::SecretsKey::from_bytes(&[3; 32]).unwrap();
    let node = Kubelets { restart: 2, ..Default::default() };
    let mut r = Reconciler::new(store(&etcd), node, "default")
        .with_secrets_key(key)
        .with_poll(std::time::Duration::ZERO);
    let cp = |s: &mut Store| -> Resource<Body<PoolSpec>> {
        s.get("default", TCP, "cp").unwrap().unwrap()
    };
    for _ in 0..40 {
        r.pass().unwrap();
        if cp(&mut s).spec.status.state == Some(State::Ready) {
            break;
        }
    }
    assert_eq!(cp(&mut s).spec.status.observed_kube_version, "v1.35.0");
    let ids = ["cp-10-0-0-11", "cp-10-0-0-12", "cp-10-0-0-13"];
    ctl::apply(&mut s, &doc("v1.36.0")).unwrap();
    // Per pass: the machines whose kubelet was applied and is not healthy yet.
    let mut batches: Vec<Vec<&str>> = vec![];
    for _ in 0..40 {
        r.pass().unwrap();
        let rolling: Vec<&str> = ids
            .iter()
            .copied()
            .filter(|id| !machine(&mut s, id).spec.status.kubelet_pending.is_empty())
            .collect();
        assert!(rolling.len() <= 2, "{rolling:?}");
        if batches.last() != Some(&rolling) {
            batches.push(rolling);
        }
        let p = cp(&mut s);
        if p.spec.status.state == Some(State::Ready)
            && p.spec.status.observed_kube_version == "v1.36.0"
        {
            break;
        }
    }
    // Two at once, then the third once they are healthy.
    assert_eq!(
        batches,
        [vec!["cp-10-0-0-11", "cp-10-0-0-12"], vec![], vec!["cp-10-0-0-13"], vec![]],
        "{:?}",
        cp(&mut s).spec.status
    );
    let p = cp(&mut s);
    assert_eq!(p.spec.status.observed_kube_version, "v1.36.0");
    let reasons: Vec<&str> = p.spec.status.events.iter().map(|e| e.reason.as_str()).collect();
    assert!(
        reasons.ends_with(&["Started", "Rolling", "Rolling", "KubernetesUpgradeSucceeded"]),
        "{reasons:?}"
    );
    let progress: Vec<&str> =
        p.spec.status.events.iter().rev().take(3).map(|e| e.message.as_str()).collect();
    assert_eq!(
        progress,
        ["3 of 3 kubelets at v1.36.0", "2 of 3 kubelets at v1.36.0", "0 of 3 kubelets at v1.36.0"]
    );
    // Each node: its install, then one apply carrying the new kubelet image.
    for a in ["10.0.0.11", "10.0.0.12", "10.0.0.13"] {
        let applied = &r.node.applies[a];
        assert_eq!(applied.len(), 2, "{a}");
        assert!(applied[0].contains("image: ghcr.io/siderolabs/kubelet:v1.35.0"), "{}", applied[0]);
        assert!(applied[1].contains("image: ghcr.io/siderolabs/kubelet:v1.36.0"), "{}", applied[1]);
    }
}

#[test]
fn a_wake_from_the_nodes_events_moves_a_machine_before_its_poll_and_says_so() {
    let Some((etcd, _dir)) = start("wake") else { return };
    let mut s = store(&etcd);
    ctl::apply(&mut s, TM_DOC).unwrap();
    let node = Scripted { kubelet_waits: 1000, version: "v1.13.0".into(), ..Default::default() };
    let mut r = Reconciler::new(store(&etcd), node, "default");
    // Up to Installing, kubelet not ready, and the look after that write: now it waits for
    // its poll (30 s).
    for _ in 0..8 {
        r.pass().unwrap();
    }
    assert_eq!(state_of(&mut s, "lone"), Some(State::Installing));
    let asked = |r: &Reconciler<Scripted>| {
        r.node.calls.iter().filter(|c| c.starts_with("ServiceInfo")).count()
    };
    let before = asked(&r);
    r.node.kubelet_waits = 0;
    r.pass().unwrap();
    assert_eq!(asked(&r), before, "not due before its poll");
    assert_eq!(state_of(&mut s, "lone"), Some(State::Installing));
    // The leader follows this machine's node past maintenance mode (mutual TLS).
    let w = r.watches().get("lone").cloned().unwrap();
    assert_eq!((w.address.as_str(), w.configured), ("10.0.0.20", true));

    // A backoff is no reason to ignore the node's word either.
    let later =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() + 300;
    r.store
        .modify::<Body<MachineSpec>>("default", TM, "lone", |m| m.spec.status.next_attempt = later)
        .unwrap();
    r.pass().unwrap();
    assert_eq!(asked(&r), before, "held by its backoff");

    r.wake("lone", "ServiceStateEvent kubelet Running, healthy".into());
    r.pass().unwrap();
    assert_eq!(asked(&r), before + 1);
    let m = machine(&mut s, "lone");
    assert_eq!(m.spec.status.state, Some(State::Available));
    let last = m.spec.status.events.last().unwrap();
    assert_eq!(
        last.message,
        "kubelet is running and healthy; on the node's event: ServiceStateEvent kubelet Running, healthy"
    );
    // The moves the reconciler made on its own say nothing of events.
    let said = m.spec.status.events.iter().filter(|e| e.message.contains("node's event")).count();
    assert_eq!(said, 1, "{:?}", m.spec.status.events);
    // A wake for a machine due anyway (its new version) is not credited with its move.
    ctl::apply(&mut s, &TM_DOC.replace("v1.13.0", "v1.14.0")).unwrap();
    r.wake("lone", "MachineStatusEvent stage running, ready".into());
    r.pass().unwrap();
    let m = machine(&mut s, "lone");
    assert_eq!(m.spec.status.state, Some(State::Upgrading));
    assert!(!m.spec.status.events.last().unwrap().message.contains("node's event"));
    // Deleted: no longer followed.
    ctl::delete(&mut s, "default", Kind::Machine, "lone").unwrap();
    r.pass().unwrap();
    r.pass().unwrap();
    assert!(r.watches().get("lone").is_none());
}
