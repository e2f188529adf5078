// SPDX-License-Identifier: Apache-2.0
//! A three-node cluster driven by the controllers: three `keelson run` nodes in maintenance
//! mode, each in a network namespace of its own joined by a bridge to the operator's
//! namespace, where a private etcd and the reconciler run. A TalosControlPlane of one machine
//! and a TalosWorker of two go through every state to `Ready` on the nodes' real answers; a
//! `kubeVersion` change rolls the kubelets one at a time (`ApplyConfiguration` NO_REBOOT of
//! `machine.kubelet.image`), sampled through `ServiceList` every 100 ms; a kubelet that never
//! becomes healthy ends in `KubernetesUpgradeFailed` and an edit brings it back; pools
//! re-created in `import` mode adopt the running nodes without an apply or a kubelet restart;
//! deleting the worker resets its nodes back to maintenance; a machine naming a worker that
//! does not exist is `Orphaned`.
//!
//! What `tests/kinds.rs` covers against scripted nodes (apply/get/describe, the kubeconfig
//! sealing, conflicts) and `tests/node_netns.rs` against one real node (PXE, Disks, the boot
//! report) is not repeated. Needs root, the `keelson` and `demo-kubelet` binaries (`cargo
//! build -p keelson`, or `KEELSON_BIN`) and `etcd`; without them it is skipped, or fails when
//! `KEELSON_REQUIRE_ROOT=1`.
#![allow(clippy::disallowed_methods)] // Tests drive processes from outside: threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use operator::ctl;
use operator::key::Layout;
use operator::kinds::{Body, MachineSpec, PoolSpec, TCP, TM, TW};
use operator::reconcile::{NodeApi, Reconciler};
use operator::secrets::{self, SecretsKey};
use operator::states::State;
use operator::store::{Resource, Store};
use operator::talos::GrpcNode;
use testkit::Netns;

const NODES: [&str; 3] = ["10.77.0.11", "10.77.0.12", "10.77.0.13"];
/// The kubelet's bound in this test: a failing one is given up on after this long.
const BOUND: Duration = Duration::from_secs(3);

/// The `keelson` binary and the demo kubelet beside it.
fn binaries() -> Option<(PathBuf, PathBuf)> {
    let keelson = match std::env::var_os("KEELSON_BIN") {
        Some(p) => PathBuf::from(p),
        None => std::env::current_exe().ok()?.parent()?.parent()?.join("keelson"),
    };
    let demo = keelson.with_file_name("demo-kubelet");
    (keelson.is_file() && demo.is_file()).then_some((keelson, demo))
}

/// A `keelson run` that is started again when it exits (as a machine reboots: a Reset ends
/// the process), its log appended to one file.
struct Node {
    child: Arc<Mutex<Option<Child>>>,
    stop: Arc<AtomicBool>,
    watcher: Option<std::thread::JoinHandle<()>>,
    log: PathBuf,
    root: PathBuf,
}

impl Node {
    fn start(bin: &Path, ns: &Netns, address: &str, host: &str, root: PathBuf) -> Self {
        std::fs::create_dir_all(&root).unwrap();
        let log = root.join("keelson.log");
        let spawn = {
            let (bin, ns, root, log) = (bin.to_owned(), ns.name.clone(), root.clone(), log.clone());
            let cmdline = format!("ip={address}::10.77.0.1:24:{host}:eth0:off");
            move || {
                let out = std::fs::OpenOptions::new().create(true).append(true).open(&log).unwrap();
                Command::new("ip")
                    .args(["netns", "exec", &ns, "unshare", "-u"])
                    .arg(&bin)
                    .arg("run")
                    .args(["--cmdline", &cmdline])
                    .arg("--root")
                    .arg(&root)
                    .arg("--state")
                    .arg(root.join("state"))
                    .args(["--api-listen", "0.0.0.0:50000", "--trustd-listen", "0.0.0.0:50001"])
                    .env("KEELSON_LOG", "info")
                    .stdout(Stdio::null())
                    .stderr(out)
                    .spawn()
                    .unwrap()
            }
        };
        let child = Arc::new(Mutex::new(Some(spawn())));
        let stop = Arc::new(AtomicBool::new(false));
        let (c, s) = (child.clone(), stop.clone());
        let watcher = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                {
                    let mut g = c.lock().unwrap();
                    let exited = g.as_mut().is_some_and(|ch| ch.try_wait().unwrap().is_some());
                    if exited && !s.load(Ordering::Relaxed) {
                        *g = Some(spawn());
                    }
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        Self { child, stop, watcher: Some(watcher), log, root }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// How often the log says `needle`.
    fn count(&self, needle: &str) -> usize {
        self.log_text().matches(needle).count()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(w) = self.watcher.take() {
            let _ = w.join();
        }
        if let Some(mut c) = self.child.lock().unwrap().take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

const APPLIED: &str = "applied a new machine config";
/// What the node logs for a configuration identical to the one it runs.
const APPLIED_AGAIN: &str = "applied the running machine config again: nothing changes";
const KUBELET_STARTED: &str = "started kubelet (pid";
const MAINTENANCE: &str = "maintenance certificate";

/// The control plane `c1` (one machine) and the worker `w1` (two), their kubelets the demo
/// workload behind a shell that fails at once for Kubernetes v1.99 (a version whose kubelet
/// cannot run).
///
/// The worker configuration is the operator's as generated (Talos's: `machine.ca` without its
/// key): workers get their API certificate from the control plane's trustd.
fn pools(demo: &Path, kube: &str, extra: &str) -> String {
    let patch = format!(
        "        machine:\n          time: {{disabled: true}}\n          kubelet:\n            command: [/bin/sh, -c, 'case \"$KUBELET_IMAGE\" in *:v1.99.*) exit 3;; esac; exec \"$0\" \"$@\"', {}, --orphan-every, '60']\n",
        demo.display()
    );
    let machines = |addrs: &[&str]| -> String {
        addrs.iter().map(|a| format!("      - address: {a}\n")).collect()
    };
    format!(
        "apiVersion: keelson.dev/v1alpha1\nkind: TalosControlPlane\nmetadata:\n  name: c1\n{extra}spec:\n  version: v1.13.0\n  endpoint: https://10.77.0.11:6443\n  kubeVersion: {kube}\n  rolloutStrategy: {{maxUnavailable: 1}}\n  metalSpec:\n    machines:\n{}  configPatches:\n    - |\n{patch}---\napiVersion: keelson.dev/v1alpha1\nkind: TalosWorker\nmetadata:\n  name: w1\n{extra}spec:\n  version: v1.13.0\n  controlPlaneRef: c1\n  rolloutStrategy: {{maxUnavailable: 1}}\n  metalSpec:\n    machines:\n{}  configPatches:\n    - |\n{patch}",
        machines(&NODES[..1]),
        machines(&NODES[1..]),
    )
}

type Pool = Resource<Body<PoolSpec>>;
type Machine = Resource<Body<MachineSpec>>;

/// What one look at the store saw: the pools' and machines' states.
#[derive(Debug, Clone, PartialEq)]
struct Snapshot {
    cp: Option<State>,
    worker: Option<State>,
    machines: Vec<(String, Option<State>)>,
}

/// States seen in order, consecutive repeats dropped.
#[derive(Default, Debug)]
struct History {
    cp: Vec<Option<State>>,
    worker: Vec<Option<State>>,
    machines: std::collections::BTreeMap<String, Vec<Option<State>>>,
    /// The most machines seen Upgrading at once.
    most_upgrading: usize,
}

fn push(v: &mut Vec<Option<State>>, s: Option<State>) {
    if v.last() != Some(&s) {
        v.push(s);
    }
}

impl History {
    fn see(&mut self, s: &Snapshot) {
        push(&mut self.cp, s.cp);
        push(&mut self.worker, s.worker);
        for (name, st) in &s.machines {
            push(self.machines.entry(name.clone()).or_default(), *st);
        }
        let up = s.machines.iter().filter(|(_, st)| *st == Some(State::Upgrading)).count();
        self.most_upgrading = self.most_upgrading.max(up);
    }
}

fn snapshot(s: &mut Store) -> Snapshot {
    let pool = |s: &mut Store, kind: &str, id: &str| {
        s.get::<Body<PoolSpec>>("default", kind, id).unwrap().and_then(|p| p.spec.status.state)
    };
    let (ms, _) = s.list::<Body<MachineSpec>>("default", TM).unwrap();
    Snapshot {
        cp: pool(s, TCP, "c1"),
        worker: pool(s, TW, "w1"),
        machines: ms.into_iter().map(|m| (m.metadata.id, m.spec.status.state)).collect(),
    }
}

fn pool(s: &mut Store, kind: &str, id: &str) -> Option<Pool> {
    s.get("default", kind, id).unwrap()
}

/// Run passes (every 100 ms) until `done` holds of the store, recording what was seen.
fn until<N: NodeApi>(
    r: &mut Reconciler<N>,
    h: &mut History,
    what: &str,
    limit: Duration,
    mut done: impl FnMut(&mut Store) -> bool,
) {
    let end = Instant::now() + limit;
    h.see(&snapshot(&mut r.store));
    loop {
        r.pass().unwrap();
        let snap = snapshot(&mut r.store);
        h.see(&snap);
        if done(&mut r.store) {
            return;
        }
        if Instant::now() >= end {
            let (ms, _) = r.store.list::<Body<MachineSpec>>("default", TM).unwrap();
            let why: Vec<String> = ms
                .iter()
                .map(|m| format!("{}: {:?}", m.metadata.id, m.spec.status.conditions))
                .collect();
            panic!("{what}: not within {limit:?}; {snap:?}\n{h:?}\n{}", why.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn ready_at(s: &mut Store, kind: &str, id: &str, kube: &str) -> bool {
    pool(s, kind, id).is_some_and(|p| {
        p.spec.status.state == Some(State::Ready) && p.spec.status.observed_kube_version == kube
    })
}

/// Samples every node's kubelet through `ServiceList` (mutual TLS, the cluster's admin
/// client) every 100 ms until stopped: per round, which nodes' kubelets were not Running and
/// healthy.
struct Sampler {
    stop: Arc<AtomicBool>,
    rounds: Arc<Mutex<Vec<Vec<bool>>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sampler {
    fn start(client: Arc<rustls::ClientConfig>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let rounds = Arc::new(Mutex::new(Vec::new()));
        let (s, r) = (stop.clone(), rounds.clone());
        let thread = std::thread::spawn(move || {
            let mut node = GrpcNode::new(None).unwrap();
            node.use_client(Some(client));
            while !s.load(Ordering::Relaxed) {
                let down: Vec<bool> = NODES
                    .iter()
                    .map(|a| {
                        !node
                            .service_info(a, "kubelet")
                            .is_ok_and(|k| k.state == "Running" && k.healthy)
                    })
                    .collect();
                r.lock().unwrap().push(down);
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        Self { stop, rounds, thread: Some(thread) }
    }

    fn finish(mut self) -> Vec<Vec<bool>> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        std::mem::take(&mut *self.rounds.lock().unwrap())
    }
}

fn condition(p: &Pool, kind: &str) -> (String, String) {
    let c = p.spec.status.conditions.iter().find(|c| c.kind == kind).unwrap();
    (c.reason.clone(), c.message.clone())
}

#[test]
fn a_three_node_cluster_rolls_its_kubelets_one_at_a_time() {
    let test = "a_three_node_cluster_rolls_its_kubelets_one_at_a_time";
    if !testkit::require_root(test) || !common::have_etcd(test) {
        return;
    }
    let Some((keelson, demo)) = binaries() else {
        testkit::skip_or_fail(
            "no keelson or demo-kubelet binary (cargo build -p keelson, or KEELSON_BIN)",
        );
        return;
    };
    let started = Instant::now();
    let dir = common::temp("cluster", "rollout");
    // The operator's namespace: a bridge the nodes hang off.
    let op = Netns::new();
    op.ip(&["link", "set", "lo", "up"]);
    op.ip(&["link", "add", "br0", "type", "bridge"]);
    op.ip(&["addr", "add", "10.77.0.1/24", "dev", "br0"]);
    op.ip(&["link", "set", "br0", "up"]);
    let mut spaces = Vec::new();
    let mut nodes = Vec::new();
    for (i, a) in NODES.iter().enumerate() {
        let ns = Netns::new();
        let port = format!("vn{i}");
        ns.veth("eth0", &op, &port);
        op.ip(&["link", "set", &port, "master", "br0"]);
        nodes.push(Node::start(
            &keelson,
            &ns,
            a,
            &format!("node-{i}"),
            dir.0.join(format!("n{i}")),
        ));
        spaces.push(ns);
    }
    let wait_maintenance = |n: &Node, times: usize| {
        let end = Instant::now() + Duration::from_secs(30);
        while n.count(MAINTENANCE) < times {
            assert!(Instant::now() < end, "no maintenance mode: {}", n.log_text());
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    for n in &nodes {
        wait_maintenance(n, 1);
    }

    let op_name = op.name.clone();
    let data = dir.0.join("etcd");
    let nodes = Arc::new(nodes);
    let ns_nodes = nodes.clone();
    let run = std::thread::spawn(move || {
        let nodes = ns_nodes;
        testkit::Netns { name: op_name }.enter_and_keep();
        let mut opts = etcd::local::Options::new(&data.join("data"), &data.join("etcd.log"));
        opts.no_fsync = true;
        let etcd = etcd::local::LocalEtcd::start(&opts).unwrap();
        let layout = Layout::new("/keelson-operator", b"/keelson-operator");
        let reconciler = || {
            Reconciler::new(
                Store::new(etcd.client(), layout.clone()),
                GrpcNode::new(None).unwrap(),
                "default",
            )
            .with_secrets_key(SecretsKey::from_bytes(&[5; 32]).unwrap())
            .with_poll(Duration::from_millis(500))
            .with_kubelet_bound(BOUND)
        };
        let mut r = reconciler();
        let mut h = History::default();
        let key = SecretsKey::from_bytes(&[5; 32]).unwrap();
        let bundle = secrets::cluster_secrets(&mut r.store, "default", Some(&key), "c1", true)
            .unwrap()
            .unwrap();

        // 1. Up: every machine installed, the control plane bootstrapped, both pools Ready.
        ctl::apply(&mut r.store, &pools(&demo, "v1.35.0", "")).unwrap();
        until(&mut r, &mut h, "the cluster up", Duration::from_secs(60), |s| {
            ready_at(s, TCP, "c1", "v1.35.0") && ready_at(s, TW, "w1", "v1.35.0")
        });
        use State::*;
        assert_eq!(
            h.cp,
            [None, Some(Pending), Some(Available), Some(Bootstrapped), Some(Ready)],
            "{h:?}"
        );
        assert_eq!(h.worker, [None, Some(Pending), Some(Ready)], "{h:?}");
        for (name, seen) in &h.machines {
            assert_eq!(seen, &[Some(Installing), Some(Available)], "{name}: {h:?}");
        }
        for n in nodes.iter() {
            assert_eq!(n.count(APPLIED), 1, "{}", n.log_text());
            assert!(n.log_text().contains("KUBELET_IMAGE=ghcr.io/siderolabs/kubelet:v1.35.0"));
        }
        let c1 = pool(&mut r.store, TCP, "c1").unwrap();
        assert_eq!(condition(&c1, "Ready").0, "KubeconfigWritten");

        // 2. A new kubeVersion: the control plane's kubelet, then the workers', one at a time,
        // each applied once even across a new leader.
        let sampler = Sampler::start(bundle.admin_client().unwrap());
        let before: Vec<(usize, usize)> =
            nodes.iter().map(|n| (n.count(APPLIED), n.count(KUBELET_STARTED))).collect();
        ctl::apply(&mut r.store, &pools(&demo, "v1.36.0", "")).unwrap();
        let mut h = History::default();
        until(
            &mut r,
            &mut h,
            "the control plane's kubelet applied",
            Duration::from_secs(20),
            |s| {
                s.list::<Body<MachineSpec>>("default", TM)
                    .unwrap()
                    .0
                    .iter()
                    .any(|m| m.spec.status.kubelet_pending == "v1.36.0")
            },
        );
        // The leader changes: a new reconciler knows only the store.
        drop(r);
        let mut r = reconciler();
        until(&mut r, &mut h, "the rollout", Duration::from_secs(60), |s| {
            ready_at(s, TCP, "c1", "v1.36.0") && ready_at(s, TW, "w1", "v1.36.0")
        });
        let rounds = sampler.finish();
        assert_eq!(h.cp, [Some(Ready), Some(UpgradingKubernetes), Some(Ready)], "{h:?}");
        assert_eq!(h.worker, [Some(Ready), Some(UpgradingKubernetes), Some(Ready)], "{h:?}");
        for (name, seen) in &h.machines {
            assert_eq!(seen, &[Some(Available), Some(Upgrading), Some(Available)], "{name}: {h:?}");
        }
        assert_eq!(h.most_upgrading, 1, "{h:?}");
        for (n, (applied, started)) in nodes.iter().zip(&before) {
            assert_eq!(n.count(APPLIED), applied + 1, "{}", n.log_text());
            assert_eq!(n.count(KUBELET_STARTED), started + 1, "{}", n.log_text());
            assert!(n.log_text().contains("KUBELET_IMAGE=ghcr.io/siderolabs/kubelet:v1.36.0"));
        }
        let most_down = rounds.iter().map(|r| r.iter().filter(|d| **d).count()).max().unwrap();
        eprintln!(
            "{} ServiceList rounds, at most {most_down} kubelet(s) down at once",
            rounds.len()
        );
        // The sampler saw the restarts it is there to catch (each kubelet is down for a few
        // hundred milliseconds), and never two at once.
        assert!(most_down >= 1, "no kubelet seen down: {rounds:?}");
        assert!(most_down <= 1, "{rounds:?}");
        let machine =
            |s: &mut Store, id: &str| -> Machine { s.get("default", TM, id).unwrap().unwrap() };
        for a in NODES {
            let name = operator::reconcile::child_name(if a == NODES[0] { "c1" } else { "w1" }, a);
            let m = machine(&mut r.store, &name);
            assert_eq!(m.spec.status.observed_kube_version, "v1.36.0");
            assert!(
                m.spec.status.config.contains("image: ghcr.io/siderolabs/kubelet:v1.36.0"),
                "{}",
                m.spec.status.config
            );
        }
        // The window a lost status write leaves: the same configuration applied again
        // (NO_REBOOT) is taken and restarts nothing.
        let name = operator::reconcile::child_name("w1", NODES[1]);
        let spec = machine(&mut r.store, &name).spec.spec;
        let again =
            secrets::machine_config(&mut r.store, "default", Some(&key), &name, &spec, false)
                .unwrap()
                .config
                .unwrap();
        let (applied, again_before, started) = (
            nodes[1].count(APPLIED),
            nodes[1].count(APPLIED_AGAIN),
            nodes[1].count(KUBELET_STARTED),
        );
        let mut direct = GrpcNode::new(None).unwrap();
        direct.use_client(Some(bundle.admin_client().unwrap()));
        direct.apply_no_reboot(NODES[1], &again).unwrap();
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(nodes[1].count(APPLIED_AGAIN), again_before + 1, "{}", nodes[1].log_text());
        assert_eq!(nodes[1].count(APPLIED), applied, "{}", nodes[1].log_text());
        assert_eq!(nodes[1].count(KUBELET_STARTED), started, "{}", nodes[1].log_text());

        // 3. A version whose kubelet exits at once: the control plane's machine is given up on
        // after the bound, the rollout fails naming it, and the workers are left alone.
        let mut h = History::default();
        let t = Instant::now();
        ctl::apply(&mut r.store, &pools(&demo, "v1.99.0", "")).unwrap();
        until(&mut r, &mut h, "the failure", Duration::from_secs(30), |s| {
            pool(s, TCP, "c1").is_some_and(|p| p.spec.status.state == Some(KubernetesUpgradeFailed))
        });
        // Status keeps Unix seconds: the bound is whole seconds.
        let least = BOUND - Duration::from_secs(1);
        assert!(t.elapsed() >= least, "failed before the bound: {:?}", t.elapsed());
        let c1 = pool(&mut r.store, TCP, "c1").unwrap();
        let (reason, message) = condition(&c1, "KubernetesUpgrade");
        assert_eq!(reason, "KubernetesUpgradeFailed");
        assert!(
            message.starts_with("TalosMachine c1-10-77-0-11: kubelet v1.99.0 not healthy within 3s of its apply: kubelet is "),
            "{message}"
        );
        assert_eq!(
            h.cp,
            [Some(Ready), Some(UpgradingKubernetes), Some(KubernetesUpgradeFailed)],
            "{h:?}"
        );
        assert_eq!(h.worker, [Some(Ready)], "{h:?}");
        let worker_applies: Vec<usize> = nodes[1..].iter().map(|n| n.count(APPLIED)).collect();
        // Nothing more happens until the spec changes.
        for _ in 0..5 {
            r.pass().unwrap();
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(
            pool(&mut r.store, TCP, "c1").unwrap().spec.status.state,
            Some(KubernetesUpgradeFailed)
        );

        // 4. An edit (a version whose kubelet runs) retries: Ready again, the workers follow.
        let mut h = History::default();
        ctl::apply(&mut r.store, &pools(&demo, "v1.36.1", "")).unwrap();
        until(&mut r, &mut h, "the fix", Duration::from_secs(60), |s| {
            ready_at(s, TCP, "c1", "v1.36.1") && ready_at(s, TW, "w1", "v1.36.1")
        });
        assert_eq!(
            h.cp,
            [Some(KubernetesUpgradeFailed), Some(UpgradingKubernetes), Some(Ready)],
            "{h:?}"
        );
        let c1 = pool(&mut r.store, TCP, "c1").unwrap();
        assert!(c1.spec.status.events.iter().any(|e| e.reason == "Retrying"), "{c1:?}");
        for (n, before) in nodes[1..].iter().zip(&worker_applies) {
            assert_eq!(n.count(APPLIED), before + 1, "{}", n.log_text());
        }

        // 5. Import: the pools are let go of (preserve), then applied again with the
        // reconcile-mode annotation: adopted as they run, nothing applied, no kubelet restarted.
        let preserve = |doc: String| {
            doc.replace("  rolloutStrategy:", "  deletionPolicy: preserve\n  rolloutStrategy:")
        };
        ctl::apply(&mut r.store, &preserve(pools(&demo, "v1.36.1", ""))).unwrap();
        for _ in 0..3 {
            r.pass().unwrap();
        }
        ctl::delete(&mut r.store, "default", operator::kinds::Kind::Worker, "w1").unwrap();
        ctl::delete(&mut r.store, "default", operator::kinds::Kind::ControlPlane, "c1").unwrap();
        until(&mut r, &mut h, "the pools let go", Duration::from_secs(30), |s| {
            pool(s, TCP, "c1").is_none()
                && pool(s, TW, "w1").is_none()
                && s.list::<Body<MachineSpec>>("default", TM).unwrap().0.is_empty()
        });
        let before: Vec<(usize, usize)> =
            nodes.iter().map(|n| (n.count(APPLIED), n.count(KUBELET_STARTED))).collect();
        let mut h = History::default();
        let import = "  annotations:\n    keelson.dev/reconcile-mode: import\n";
        ctl::apply(&mut r.store, &pools(&demo, "v1.36.1", import)).unwrap();
        until(&mut r, &mut h, "the import", Duration::from_secs(30), |s| {
            ready_at(s, TCP, "c1", "v1.36.1") && ready_at(s, TW, "w1", "v1.36.1")
        });
        for _ in 0..5 {
            r.pass().unwrap();
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(h.cp, [None, Some(Bootstrapped), Some(Ready)], "{h:?}");
        assert_eq!(h.worker, [None, Some(Ready)], "{h:?}");
        for (name, seen) in &h.machines {
            assert_eq!(seen, &[Some(Available)], "{name}: {h:?}");
        }
        for (n, b) in nodes.iter().zip(&before) {
            assert_eq!((n.count(APPLIED), n.count(KUBELET_STARTED)), *b, "{}", n.log_text());
        }

        // 6. Deleting the worker resets its nodes: back in maintenance mode.
        ctl::delete(&mut r.store, "default", operator::kinds::Kind::Worker, "w1").unwrap();
        until(&mut r, &mut h, "the worker deleted", Duration::from_secs(30), |s| {
            pool(s, TW, "w1").is_none()
        });
        let applies = nodes[1].count(APPLIED);
        // 7. A machine naming a worker that does not exist: Orphaned, its node never called.
        let orphan = format!("apiVersion: keelson.dev/v1alpha1\nkind: TalosMachine\nmetadata:\n  name: lost\nspec:\n  endpoint: {}\n  version: v1.13.0\n  workerRef: gone\n", NODES[1]);
        ctl::apply(&mut r.store, &orphan).unwrap();
        until(&mut r, &mut h, "the orphan", Duration::from_secs(10), |s| {
            s.get::<Body<MachineSpec>>("default", TM, "lost")
                .unwrap()
                .is_some_and(|m| m.spec.status.state == Some(Orphaned))
        });
        assert_eq!(nodes[1].count(APPLIED), applies, "{}", nodes[1].log_text());
        drop(r);
        drop(etcd);
    });
    run.join().unwrap();
    // The worker nodes came back in maintenance mode after their reset; the control plane did not.
    for n in &nodes[1..] {
        let end = Instant::now() + Duration::from_secs(30);
        while n.count(MAINTENANCE) < 2 {
            assert!(Instant::now() < end, "not back in maintenance: {}", n.log_text());
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    assert_eq!(nodes[0].count(MAINTENANCE), 1, "{}", nodes[0].log_text());
    eprintln!("cluster test: {:?}", started.elapsed());
    drop(nodes);
    drop(spaces);
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
