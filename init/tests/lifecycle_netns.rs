// SPDX-License-Identifier: Apache-2.0
//! The machine's lifecycle with the demo workload as the kubelet, in namespaces these tests
//! create: `booting → running` once its health endpoint answers, a changed kubelet command
//! is `running → upgrading → running` (the old process gets SIGTERM and is reaped), and a new
//! command that fails keeps `upgrading`, names its exit status and restarts no faster than the
//! backoff.
#![allow(clippy::disallowed_methods)] // Tests and examples drive keelson from outside: plain threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{keelson, require_root, wait_for, Netns, Node, TempDir};

const T: Duration = Duration::from_secs(30);

/// A config whose kubelet is the demo workload, with `extra` as its `extraArgs` lines.
fn config(sigterm_log: &Path, extra: &str) -> String {
    format!(
        "version: v1alpha1\nmachine:\n  network:\n    hostname: node-1\n    interfaces:\n      - interface: eth0\n        addresses: [10.0.0.2/24]\n        routes:\n          - network: 0.0.0.0/0\n            gateway: 10.0.0.1\n  kubelet:\n    command: [{}, --sigterm-log, {}, --orphan-every, '0.5']\n    extraArgs:\n{extra}  time:\n    disabled: true\n",
        env!("CARGO_BIN_EXE_demo-kubelet"),
        sigterm_log.display()
    )
}

/// Replace `path` atomically (write beside it, rename over it).
fn replace(path: &Path, body: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, body).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// The `MachineStatus` resource's spec, through `keelson get machinestatus`.
fn machine_status(node: &Node) -> serde_json::Value {
    let socket = node.api.as_ref().unwrap().display().to_string();
    let (ok, out, err) = keelson(&["get", "machinestatus", "-o", "json", "--socket", &socket]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let list = v.as_array().cloned().unwrap_or_else(|| vec![v]);
    assert_eq!(list.len(), 1, "{out}");
    list[0]["spec"].clone()
}

/// The pids of `started kubelet (pid N)` lines, in order.
fn started_pids(log: &str) -> Vec<u32> {
    log.lines()
        .filter_map(|l| l.split("started kubelet (pid ").nth(1))
        .filter_map(|rest| rest.split(')').next()?.parse().ok())
        .collect()
}

/// Children of `parent` in state Z.
fn zombies_of(parent: u32) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else { continue };
        let Some(after) = stat.rsplit_once(") ").map(|(_, a)| a) else { continue };
        let f: Vec<&str> = after.split_whitespace().collect();
        if f.first() == Some(&"Z") && f.get(1) == Some(&parent.to_string().as_str()) {
            out.push(stat);
        }
    }
    out
}

fn stage_lines(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|l| l.split("machine stage: ").nth(1))
        .map(|s| s.split(" (").next().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn a_kubelet_upgrade_goes_through_upgrading_and_a_failing_one_stays_there() {
    if !require_root("a_kubelet_upgrade_goes_through_upgrading_and_a_failing_one_stays_there") {
        return;
    }
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.veth("eth0", &peer, "up0");
    let dir = TempDir::new();
    let sigterm_log = dir.path().join("sigterm.log");
    let path = dir.path().join("config.yaml");
    replace(&path, &config(&sigterm_log, "      variant: a\n"));
    let node = Node::start_api(&ns, "", Some(&path));
    let ctx = || node.log_text();

    // Booting until the demo's /healthz answers, then running and ready.
    wait_for("running", T, || node.log_text().contains("-> running"), ctx);
    wait_for("ready", T, || machine_status(&node)["status"]["ready"] == true, ctx);
    let s = machine_status(&node);
    assert_eq!(s["stage"], "running", "{s}");
    assert_eq!(s["status"]["unmetConditions"], serde_json::json!([]), "{s}");
    let old = *started_pids(&node.log_text()).last().unwrap();

    // An upgrade: other flags. The old process gets SIGTERM, the new one becomes healthy.
    // A watcher sees each stage as an update.
    let watched = dir.path().join("watch.out");
    let socket = node.api.as_ref().unwrap().display().to_string();
    let mut watcher = Command::new(env!("CARGO_BIN_EXE_keelson"))
        .args(["get", "machinestatus", "--watch", "--socket", &socket])
        .stdout(std::fs::File::create(&watched).unwrap())
        .spawn()
        .unwrap();
    let seen = |what: &str| std::fs::read_to_string(&watched).unwrap_or_default().contains(what);
    wait_for("the watch bootstrapped", T, || seen("running"), ctx);
    replace(&path, &config(&sigterm_log, "      variant: b\n"));
    wait_for("upgrading", T, || node.log_text().contains("running -> upgrading"), ctx);
    wait_for("running again", T, || node.log_text().contains("upgrading -> running"), ctx);
    wait_for("the watch saw upgrading", T, || seen("upgrading"), ctx);
    let _ = watcher.kill();
    let _ = watcher.wait();
    let log = node.log_text();
    let new = *started_pids(&log).last().unwrap();
    assert_ne!(old, new, "{log}");
    let got = std::fs::read_to_string(&sigterm_log).unwrap_or_default();
    assert!(
        got.contains(&format!("SIGTERM pid {old}\n")),
        "the old kubelet got SIGTERM: {got:?}\n{log}"
    );
    assert!(!Path::new(&format!("/proc/{old}")).exists(), "the old kubelet was reaped\n{log}");
    assert!(log.contains("--variant=b"), "{log}");
    assert_eq!(
        stage_lines(&log),
        ["booting", "booting -> running", "running -> upgrading", "upgrading -> running"],
        "one console line per transition\n{log}"
    );

    // A new command that fails: upgrading, with its exit status, restarted with backoff.
    let before = started_pids(&log).len();
    replace(&path, &config(&sigterm_log, "      variant: c\n      fail-with: '3'\n"));
    wait_for("upgrading again", T, || stage_lines(&node.log_text()).len() == 5, ctx);
    let window = Instant::now();
    wait_for(
        "the exit status in machinestatus",
        T,
        || {
            let s = machine_status(&node);
            s["stage"] == "upgrading"
                && s["status"]["unmetConditions"].as_array().into_iter().flatten().any(|c| {
                    c["name"] == "kubelet"
                        && c["reason"].as_str().unwrap_or("").contains("exited with status 3")
                })
        },
        ctx,
    );
    std::thread::sleep(Duration::from_secs(8).saturating_sub(window.elapsed()));
    let log = node.log_text();
    let restarts = started_pids(&log).len() - before;
    // Backoff 1 s, 2 s, 4 s...: within ~8 s at most five starts; a crash loop would do hundreds.
    assert!((2..=6).contains(&restarts), "{restarts} starts of the failing kubelet\n{log}");
    assert_eq!(machine_status(&node)["stage"], "upgrading", "{log}");
    assert_eq!(stage_lines(&log).last().map(String::as_str), Some("running -> upgrading"), "{log}");
    let zombies = zombies_of(node.pid());
    assert!(zombies.is_empty(), "zombies: {zombies:?}\n{log}");

    // Stopping the node: shuttingDown, the kubelet stopped, state flushed.
    let log = node.stop();
    assert!(log.contains("upgrading -> shuttingDown"), "{log}");
    assert!(log.contains("services stopped, state flushed"), "{log}");
}

/// `machine.kubelet.image` reaches the kubelet as `KUBELET_IMAGE`; a new image is an upgrade
/// (what keelson-operator's kubelet rollouts apply), the same configuration again is nothing.
#[test]
fn a_new_kubelet_image_restarts_the_kubelet_with_it_in_its_environment() {
    if !require_root("a_new_kubelet_image_restarts_the_kubelet_with_it_in_its_environment") {
        return;
    }
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.veth("eth0", &peer, "up0");
    let dir = TempDir::new();
    let sigterm_log = dir.path().join("sigterm.log");
    let path = dir.path().join("config.yaml");
    let with_image = |tag: &str| {
        config(&sigterm_log, "      variant: a\n").replace(
            "  kubelet:\n",
            // clusterDNS: a Talos key keelson warns about at every load, so a load shows.
            &format!(
                "  kubelet:\n    image: ghcr.io/siderolabs/kubelet:{tag}\n    clusterDNS: [10.96.0.10]\n"
            ),
        )
    };
    replace(&path, &with_image("v1.35.0"));
    let node = Node::start_api(&ns, "", Some(&path));
    let ctx = || node.log_text();
    wait_for("running", T, || node.log_text().contains("-> running"), ctx);
    let environ = |pid: u32| {
        let raw = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        raw.split(|b| *b == 0).map(|v| String::from_utf8_lossy(v).into_owned()).collect::<Vec<_>>()
    };
    let old = *started_pids(&node.log_text()).last().unwrap();
    let want = "KUBELET_IMAGE=ghcr.io/siderolabs/kubelet:v1.35.0".to_owned();
    assert!(environ(old).contains(&want), "{:?}", environ(old));

    replace(&path, &with_image("v1.36.0"));
    wait_for("upgrading", T, || node.log_text().contains("running -> upgrading"), ctx);
    wait_for("running again", T, || node.log_text().contains("upgrading -> running"), ctx);
    let log = node.log_text();
    let new = *started_pids(&log).last().unwrap();
    assert_ne!(old, new, "{log}");
    let want = "KUBELET_IMAGE=ghcr.io/siderolabs/kubelet:v1.36.0".to_owned();
    assert!(environ(new).contains(&want), "{:?}", environ(new));
    let got = std::fs::read_to_string(&sigterm_log).unwrap_or_default();
    assert!(got.contains(&format!("SIGTERM pid {old}\n")), "{got:?}\n{log}");
    assert!(log.contains(&format!("(pid {new}): {want} ")), "{log}");

    // The same configuration written again: read again, nothing restarted.
    let starts = started_pids(&log).len();
    let loads = |log: &str| log.matches("machine.kubelet.clusterDNS").count();
    let loaded = loads(&log);
    replace(&path, &format!("{}# again\n", with_image("v1.36.0")));
    wait_for("loaded again", T, || loads(&node.log_text()) > loaded, ctx);
    std::thread::sleep(Duration::from_secs(1));
    let log = node.log_text();
    assert_eq!(started_pids(&log).len(), starts, "{log}");
    assert_eq!(stage_lines(&log).len(), 4, "{log}");

    // `keelson run` killed outright: its kubelet does not outlive it.
    drop(node);
    let gone = || !Path::new(&format!("/proc/{new}")).exists() || zombie(new);
    wait_for("the kubelet ended with its node", T, gone, || log.clone());
}

/// Whether `pid` has exited and waits only to be reaped (by the host's init, now).
fn zombie(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z'))
}

fn plain_config(addr: &str) -> String {
    format!(
        "version: v1alpha1\nmachine:\n  network:\n    hostname: node-1\n    interfaces:\n      - interface: eth0\n        addresses: [{addr}]\n  time:\n    disabled: true\n"
    )
}

/// `apply-config --mode staged` changes nothing now; `reboot --mode staged` refuses without
/// one and reboots with one (`run` stops: `rebooting`); the next start boots into it.
#[test]
fn a_staged_config_is_booted_into_at_the_next_start() {
    if !require_root("a_staged_config_is_booted_into_at_the_next_start") {
        return;
    }
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.veth("eth0", &peer, "up0");
    let dir = TempDir::new();
    let path = dir.path().join("config.yaml");
    replace(&path, &plain_config("10.0.0.2/24"));
    let staged_text = plain_config("10.0.0.3/24");
    let staged_file = dir.path().join("next.yaml");
    std::fs::write(&staged_file, &staged_text).unwrap();
    let mut node = Node::start_api(&ns, "", Some(&path));
    let ctx = || node.log_text();
    // No kubelet configured: running once the config is in.
    wait_for("running", T, || node.log_text().contains("machine stage: running"), ctx);
    wait_for("the address", T, || ns.addresses().iter().any(|a| a.contains("10.0.0.2/24")), ctx);
    let socket = node.api.as_ref().unwrap().display().to_string();

    let (ok, _, err) = keelson(&["reboot", "--mode", "staged", "--socket", &socket]);
    assert!(!ok && err.contains("no staged config"), "{err}");
    let staged = staged_file.display().to_string();
    let (ok, out, err) =
        keelson(&["apply-config", &staged, "--mode", "staged", "--socket", &socket]);
    assert!(ok && out.contains("staged: "), "{out}{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), plain_config("10.0.0.2/24"));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("config.yaml.staged")).unwrap(),
        staged_text
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(!ns.addresses().iter().any(|a| a.contains("10.0.0.3/24")), "nothing applied now");

    let (ok, out, err) = keelson(&["reboot", "--mode", "staged", "--socket", &socket]);
    assert!(ok && out.contains("accepted"), "{out}{err}");
    wait_for("the node stopped", T, || node.log_text().contains("stopped (Reboot)"), ctx);
    let log = node.log_text();
    assert!(log.contains("running -> rebooting"), "{log}");
    assert!(log.contains("services stopped, state flushed"), "{log}");
    let root = std::mem::replace(&mut node.root, TempDir(std::path::PathBuf::new()));
    drop(node);

    let node = Node::start_in(&ns, "", Some(&path), root);
    let ctx = || node.log_text();
    wait_for(
        "the staged address",
        T,
        || ns.addresses().iter().any(|a| a.contains("10.0.0.3/24")),
        ctx,
    );
    assert!(node.log_text().contains("booting into the staged config"), "{}", node.log_text());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), staged_text);
    assert!(!dir.path().join("config.yaml.staged").exists());
    node.stop();
}

#[test]
fn a_network_boot_is_reported_in_machinestatus() {
    if !require_root("a_network_boot_is_reported_in_machinestatus") {
        return;
    }
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.veth("eth0", &peer, "up0");
    let dir = TempDir::new();
    let path = dir.path().join("config.yaml");
    replace(&path, &config(&dir.path().join("sigterm.log"), "      variant: a\n"));
    // What keelson-operator's boot script puts on the command line (docs/pxe.md).
    let node =
        Node::start_api(&ns, "BOOTIF=01-52-54-00-A1-B2-C3 keelson.image=v1.13.0", Some(&path));
    let ctx = || node.log_text();
    wait_for("running", T, || node.log_text().contains("-> running"), ctx);
    let s = machine_status(&node);
    assert_eq!(
        s["boot"],
        serde_json::json!({"mac": "52:54:00:a1:b2:c3", "image": "v1.13.0"}),
        "{s}"
    );
    // A bad BOOTIF= is one log line with its column, and nothing reported.
    let (ns2, peer2) = (Netns::new(), Netns::new());
    ns2.veth("eth0", &peer2, "up0");
    let other = Node::start_api(&ns2, "BOOTIF=52-54-00-a1-b2-c3", Some(&path));
    let ctx = || other.log_text();
    wait_for("running", T, || other.log_text().contains("-> running"), ctx);
    assert!(machine_status(&other).get("boot").is_none());
    assert!(
        other.log_text().contains("BOOTIF=52-54-00-a1-b2-c3: column 8"),
        "{}",
        other.log_text()
    );
}
