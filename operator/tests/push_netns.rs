// SPDX-License-Identifier: Apache-2.0
//! Push against a real node: `keelson run` in a network namespace this test creates, with the
//! demo workload as its kubelet, and the controllers (a private etcd, the reconciler and the
//! event streams, as `serve`'s leader runs them) in the same namespace with a 120 s poll. A
//! PXE TalosMachine must go Booting → Pending → Installing → Available within 60 s of the
//! node's start, each move brought by the node's events, not the poll; a stream dropped by the
//! node's restart must be opened again. Needs root and the `keelson` and `demo-kubelet`
//! binaries (`cargo build -p keelson`, or `KEELSON_BIN`).
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

use common::{client_pems, keelson_bin, EnterAndKeep};
use etcd::local::{LocalEtcd, Options};
use operator::ctl;
use operator::key::Layout;
use operator::kinds::{Body, MachineSpec, Status, TM};
use operator::push::{Link, Push};
use operator::reconcile::Reconciler;
use operator::states::State;
use operator::store::{Resource, Store};
use operator::talos::GrpcNode;
use testkit::Netns;

const POLL: Duration = Duration::from_secs(120);

/// What the controllers' thread saw.
#[derive(Default)]
struct Seen {
    /// Each state when first seen.
    states: Vec<(Instant, Option<State>)>,
    status: Option<Status>,
    /// Wakes the streams delivered (machine, why).
    wakes: Vec<(Instant, String)>,
    /// The stream's link and how often it opened.
    link: Option<(Option<Link>, usize)>,
    passes: usize,
}

/// A node process: stopped with SIGTERM (which stops its kubelet too) when dropped.
struct Node(Child);

impl Node {
    /// `keelson run` in `ns`, its files under `root`; with `config`, configured from the start.
    fn start(bin: &Path, ns: &str, root: &Path, log: &Path, config: Option<&Path>) -> Self {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap();
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", ns, "unshare", "-u"])
            .arg(bin)
            .arg("run")
            .arg("--root")
            .arg(root)
            .arg("--state")
            .arg(root.join("state"))
            .args(["--api-listen", "127.0.0.1:50000"]);
        if let Some(c) = config {
            cmd.arg("--config").arg(c);
        }
        let child =
            cmd.env("KEELSON_LOG", "debug").stdout(Stdio::null()).stderr(log).spawn().unwrap();
        Self(child)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.0.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if matches!(self.0.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn demo_kubelet(keelson: &Path) -> PathBuf {
    keelson.with_file_name("demo-kubelet")
}

#[test]
fn a_machine_moves_on_its_nodes_events_and_the_stream_comes_back_after_a_restart() {
    let test = "a_machine_moves_on_its_nodes_events_and_the_stream_comes_back_after_a_restart";
    if !testkit::require_root(test) {
        return;
    }
    let Some(bin) = keelson_bin().filter(|b| demo_kubelet(b).is_file()) else {
        testkit::skip_or_fail("no keelson or demo-kubelet binary (cargo build -p keelson)");
        return;
    };
    if !common::have_etcd(test) {
        return;
    }
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.ip(&["link", "set", "lo", "up"]);
    // The kubelet waits for an address: the node's eth0, a veth to a peer namespace.
    ns.veth("eth0", &peer, "up0");
    let dir = common::temp("push", "events");
    let root = dir.0.join("node");
    std::fs::create_dir_all(&root).unwrap();
    let log = dir.0.join("keelson.log");
    let gen = common::gen_config(&bin, &dir.0);
    let config = std::fs::read_to_string(gen.join("machine.yaml")).unwrap();
    let pems = client_pems(&gen.join("keelsonconfig"), &dir.0);
    let patch = format!(
        "machine:\n  network:\n    hostname: node-1\n    interfaces:\n      - interface: eth0\n        addresses: [10.0.0.2/24]\n  kubelet:\n    command: [/bin/sh, -c, 'sleep 3; exec {} --listen 127.0.0.1:8080 \"$@\"', sh]\n  time:\n    disabled: true\n",
        demo_kubelet(&bin).display()
    );
    // What the node keeps across its restart: the configuration the operator applies.
    let applied = dir.0.join("applied.yaml");
    let full = operator::kinds::render_config(&config, std::slice::from_ref(&patch), &[]).unwrap();
    std::fs::write(&applied, full).unwrap();
    let indented: String = config.lines().map(|l| format!("    {l}\n")).collect();
    let patch: String = patch.lines().map(|l| format!("      {l}\n")).collect();
    let doc = format!(
        "apiVersion: keelson.dev/v1alpha1\nkind: TalosMachine\nmetadata:\n  name: n1\nspec:\n  endpoint: 127.0.0.1\n  version: v1.13.0\n  pxeClientSpec:\n    macAddress: 52:54:00:00:00:01\n    cpuArchitecture: amd64\n  config: |\n{indented}  configPatches:\n    - |\n{patch}"
    );

    // The controllers, in the namespace: a pass when due or woken, as serve's leader does.
    let seen = Arc::new(Mutex::new(Seen::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let (name, data) = (ns.name.clone(), dir.0.join("etcd"));
    let (seen2, stop2) = (seen.clone(), stop.clone());
    let metrics = operator::metrics::Metrics::new();
    let metrics2 = metrics.clone();
    let controllers = std::thread::spawn(move || {
        Netns { name }.enter_and_keep();
        let mut opts = Options::new(&data.join("data"), &data.join("etcd.log"));
        opts.no_fsync = true;
        let etcd = LocalEtcd::start(&opts).unwrap();
        let layout = Layout::new("/keelson-operator", b"/keelson-operator");
        let mut s = Store::new(etcd.client(), layout.clone());
        ctl::apply(&mut s, &doc).unwrap();
        let (ca, crt, key) = &pems;
        let secure = etcd::client::tls_config(ca, Some((crt, key))).unwrap();
        let node = GrpcNode::new(Some(secure)).unwrap();
        let mut push = Push::new(50000, node.insecure_client(), node.secure_client(), true)
            .with_metrics(metrics2);
        let mut r = Reconciler::new(Store::new(etcd.client(), layout), node, "default")
            .with_poll_interval(POLL);
        let mut next = Instant::now();
        while !stop2.load(Ordering::Relaxed) {
            if Instant::now() >= next {
                let wait = r.pass().unwrap();
                next =
                    Instant::now() + wait.clamp(Duration::from_millis(500), Duration::from_secs(5));
                push.sync(r.watches());
                let m: Resource<Body<MachineSpec>> = s.get("default", TM, "n1").unwrap().unwrap();
                let mut g = seen2.lock().unwrap();
                if g.states.last().map(|(_, s)| *s) != Some(m.spec.status.state) {
                    g.states.push((Instant::now(), m.spec.status.state));
                }
                g.status = Some(m.spec.status);
                g.passes += 1;
            }
            for (machine, why) in push.wait(Duration::from_millis(100)) {
                seen2.lock().unwrap().wakes.push((Instant::now(), why.clone()));
                r.wake(&machine, why);
                next = Instant::now();
            }
            seen2.lock().unwrap().link = push.link("n1");
        }
        push.clear();
        drop(etcd);
    });
    let wait_for = |what: &str, within: Duration, f: &dyn Fn(&Seen) -> bool| {
        let until = Instant::now() + within;
        loop {
            if f(&seen.lock().unwrap()) {
                return;
            }
            if Instant::now() > until {
                let g = seen.lock().unwrap();
                panic!(
                    "{what}: states {:?}\nwakes {:?}\nlink {:?}\nstatus {:?}\nnode log:\n{}",
                    g.states.iter().map(|(_, s)| *s).collect::<Vec<_>>(),
                    g.wakes,
                    g.link,
                    g.status,
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    // No node yet: the first look finds nothing, and the next poll is 120 s away.
    wait_for("Booting, the node unreachable", Duration::from_secs(30), &|g| {
        g.status.as_ref().is_some_and(|s| {
            s.events.iter().any(|e| e.reason == "WaitingForBoot" && e.message.contains("refused"))
        }) && matches!(g.link, Some((Some(Link::Down(_)), _)))
    });
    // The pass after that write looks once more (a new version of the machine is due at
    // once); after it, only the poll or an event moves the machine.
    let passes = seen.lock().unwrap().passes;
    wait_for("two more passes", Duration::from_secs(15), &|g| g.passes >= passes + 2);

    let started = Instant::now();
    let node = Node::start(&bin, &ns.name, &root, &log, None);
    wait_for("Available", Duration::from_secs(60), &|g| {
        g.states.last().is_some_and(|(_, s)| *s == Some(State::Available))
    });
    let took = started.elapsed();
    {
        let g = seen.lock().unwrap();
        let states: Vec<Option<State>> = g.states.iter().map(|(_, s)| *s).collect();
        assert_eq!(
            states,
            [
                Some(State::Booting),
                Some(State::Pending),
                Some(State::Installing),
                Some(State::Available)
            ],
            "{:?}",
            g.status
        );
        let status = g.status.as_ref().unwrap();
        eprintln!("node start to Available: {took:?}; wakes {:?}", g.wakes);
        for e in &status.events {
            eprintln!("event {} {}: {}", e.kind, e.reason, e.message);
        }
        // Well under the poll: only the events can have done it.
        assert!(took < POLL / 2, "{took:?}");
        // Each transition that waited on the node says which event brought it.
        let on_event = |reason: &str| {
            status
                .events
                .iter()
                .find(|e| e.reason == reason)
                .is_some_and(|e| e.message.contains("; on the node's event: "))
        };
        assert!(on_event("NodeAnswered"), "Booting -> Pending: {:?}", status.events);
        assert!(on_event("KubeletRunning"), "Installing -> Available: {:?}", status.events);
        let available = status.events.iter().find(|e| e.reason == "KubeletRunning").unwrap();
        assert!(
            available.message.contains("ServiceStateEvent kubelet")
                || available.message.contains("MachineStatusEvent")
                || available.message.contains("the event stream opened"),
            "{available:?}"
        );
    }
    wait_for("the stream open", Duration::from_secs(10), &|g| {
        matches!(g.link, Some((Some(Link::Open), _)))
    });
    let opens = seen.lock().unwrap().link.clone().unwrap().1;
    let wakes = seen.lock().unwrap().wakes.len();

    // The node restarts (with the configuration it was given): the stream ends, and is
    // opened again once its API is back.
    drop(node);
    // The link goes down. Its wake may carry the shutdown's last event instead: wakes
    // pending together keep the first reason.
    wait_for("the stream ended", Duration::from_secs(15), &|g| {
        matches!(g.link, Some((Some(Link::Down(_)), _))) && g.wakes.len() > wakes
    });
    let node = Node::start(&bin, &ns.name, &root, &log, Some(&applied));
    wait_for(
        "the stream open again",
        Duration::from_secs(30),
        &|g| matches!(&g.link, Some((Some(Link::Open), n)) if *n > opens),
    );
    {
        let g = seen.lock().unwrap();
        assert!(
            g.wakes[wakes..].iter().any(|(_, w)| w == "the event stream opened"),
            "{:?}",
            g.wakes
        );
        // Still Available: the woken passes found nothing to change.
        assert_eq!(g.states.last().map(|(_, s)| *s), Some(Some(State::Available)));
        // The leader's metrics: one stream open, every wake counted.
        let text = metrics.render(base::metrics::Format::Prometheus);
        assert!(text.lines().any(|l| l == "keelson_operator_event_streams 1"), "{text}");
        // (Wakes keep coming as the restarted node's kubelet starts: at least those seen.)
        let counted: usize = text
            .lines()
            .find_map(|l| l.strip_prefix("keelson_operator_wakes_total "))
            .and_then(|n| n.parse().ok())
            .unwrap();
        assert!(counted >= g.wakes.len() && g.wakes.len() >= 4, "{counted} {:?}", g.wakes);
    }
    stop.store(true, Ordering::Relaxed);
    controllers.join().unwrap();
    drop(node);
}
