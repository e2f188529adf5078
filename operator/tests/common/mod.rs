// SPDX-License-Identifier: Apache-2.0
//! What the operator's integration tests share: scratch directories and a private etcd.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::Child;

use etcd::local::{LocalEtcd, Options};

/// A scratch directory, removed when dropped.
pub struct Dir(pub PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// An empty `keelson-<suite>-<test>-<pid>` under the temporary directory.
pub fn temp(suite: &str, test: &str) -> Dir {
    let dir = std::env::temp_dir().join(format!("keelson-{suite}-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Dir(dir)
}

/// Whether the `etcd` binary runs; without it the test is skipped (or fails when
/// `KEELSON_REQUIRE_ROOT=1`).
pub fn have_etcd(test: &str) -> bool {
    let found = std::process::Command::new("etcd").arg("--version").output();
    if found.is_ok_and(|o| o.status.success()) {
        return true;
    }
    testkit::skip_or_fail(&format!("{test}: no etcd binary (Debian: etcd-server)"));
    false
}

/// A private etcd member on loopback, its data in a scratch directory (no fsync).
pub fn start_etcd(suite: &str, test: &str) -> Option<(LocalEtcd, Dir)> {
    if !have_etcd(test) {
        return None;
    }
    let dir = temp(suite, test);
    let mut opts = Options::new(&dir.0.join("data"), &dir.0.join("etcd.log"));
    opts.no_fsync = true;
    Some((LocalEtcd::start(&opts).unwrap(), dir))
}

/// Network IDs claimed by someone else (`PREFIX<id>` in namespace `x`), with the index keys
/// keelson's allocator reads, 50 to a transaction: a range filled before a test or bench.
pub fn claim_ids_as_others(s: &mut operator::store::Store, ids: &[u32], prefix: &str) {
    use operator::networks::allocate;
    use operator::networks::kinds::{CLUSTER, NETWORK_IDS};
    use operator::store::Resource;
    for chunk in ids.chunks(50) {
        let mut rs: Vec<Resource<serde_json::Value>> = chunk
            .iter()
            .map(|id| {
                let spec = serde_json::json!({"spec": {"claimRef": {"namespace": "x", "name": format!("{prefix}{id}"), "uid": "1"}}});
                Resource::new(CLUSTER, NETWORK_IDS, &id.to_string(), spec)
            })
            .collect();
        s.write_all(&mut rs).unwrap();
        let layout = s.layout().clone();
        let puts = chunk
            .iter()
            .map(|id| {
                etcd::wire::RequestOp::Put(etcd::wire::PutRequest {
                    key: allocate::index_key(&layout, *id),
                    ..Default::default()
                })
            })
            .collect();
        let t = etcd::wire::TxnRequest { compare: vec![], success: puts, failure: vec![] };
        assert!(s.client().txn(&t).unwrap().succeeded);
    }
}

/// A free loopback port (bound and let go: another process may take it first, rarely).
pub fn port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// etcd members on loopback ports (no fsync), killed when dropped. A member can be killed
/// (SIGKILL) and started again on its data and ports.
#[allow(missing_debug_implementations)]
pub struct Cluster {
    children: Vec<Option<std::process::Child>>,
    pub urls: Vec<String>,
    peers: Vec<String>,
    token: String,
    pub dir: Dir,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for c in self.children.iter_mut().flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Cluster {
    /// `n` members (`m0`, `m1`, ...), each healthy before this returns; `None` without etcd.
    pub fn start(test: &str, n: usize) -> Option<Self> {
        if !have_etcd(test) {
            return None;
        }
        let dir = temp("cluster", test);
        let peers: Vec<String> = (0..n).map(|_| format!("http://127.0.0.1:{}", port())).collect();
        let urls: Vec<String> = (0..n).map(|_| format!("http://127.0.0.1:{}", port())).collect();
        let mut c = Self { children: Vec::new(), urls, peers, token: test.to_owned(), dir };
        for i in 0..n {
            let child = c.spawn(i);
            c.children.push(Some(child));
        }
        for i in 0..n {
            c.wait_healthy(i, std::time::Duration::from_secs(30));
        }
        Some(c)
    }

    fn spawn(&self, i: usize) -> std::process::Child {
        use std::process::{Command, Stdio};
        let initial: Vec<String> =
            self.peers.iter().enumerate().map(|(i, p)| format!("m{i}={p}")).collect();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.0.join(format!("m{i}.log")))
            .unwrap();
        // On a data directory that exists, etcd ignores the initial-cluster flags.
        Command::new("etcd")
            .args(["--name", &format!("m{i}")])
            .arg("--data-dir")
            .arg(self.dir.0.join(format!("m{i}")))
            .args(["--listen-client-urls", &self.urls[i], "--advertise-client-urls", &self.urls[i]])
            .args(["--listen-peer-urls", &self.peers[i]])
            .args(["--initial-advertise-peer-urls", &self.peers[i]])
            .args(["--initial-cluster", &initial.join(",")])
            .args(["--initial-cluster-state", "new", "--initial-cluster-token", &self.token])
            .args(["--unsafe-no-fsync", "--logger=zap", "--log-outputs=stderr"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap()
    }

    /// Wait until member `i` says it is healthy.
    pub fn wait_healthy(&self, i: usize, within: std::time::Duration) {
        let until = std::time::Instant::now() + within;
        let mut one = etcd::Client::new(etcd::Config::new(&[self.urls[i].as_str()], None).unwrap());
        while !one.health().unwrap_or(false) {
            assert!(std::time::Instant::now() < until, "member {} not healthy", self.urls[i]);
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// A client of every member.
    pub fn client(&self) -> etcd::Client {
        let urls: Vec<&str> = self.urls.iter().map(String::as_str).collect();
        let mut config = etcd::Config::new(&urls, None).unwrap();
        config.timeout = std::time::Duration::from_secs(10);
        etcd::Client::new(config)
    }

    /// The members' client URLs, comma-separated (`--etcd-endpoints`).
    pub fn endpoints(&self) -> String {
        self.urls.join(",")
    }

    /// SIGKILL member `i` and reap it.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.children[i].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Start member `i` again (after [`Cluster::kill`]), on its data and ports.
    pub fn restart(&mut self, i: usize) {
        self.kill(i);
        let child = self.spawn(i);
        self.children[i] = Some(child);
    }
}

/// A `keelson-operator serve` process and its log lines (read on a thread, echoed to stderr
/// with `tag`).
#[allow(missing_debug_implementations)]
pub struct Operator {
    pub child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
    pub seen: Vec<String>,
}

impl Operator {
    pub fn start(args: &[&str], env: &[(&str, &std::path::Path)]) -> Self {
        Self::start_tagged("operator", args, env)
    }

    pub fn start_tagged(tag: &str, args: &[&str], env: &[(&str, &std::path::Path)]) -> Self {
        use std::io::{BufRead, BufReader};
        use std::process::{Command, Stdio};
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_keelson-operator"));
        cmd.arg("serve").args(args).stderr(Stdio::piped()).stdout(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let err = child.stderr.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        let tag = tag.to_owned();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                eprintln!("{tag}: {line}");
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self { child, lines, seen: Vec::new() }
    }

    /// Wait for a line containing `text`.
    pub fn wait_for(&mut self, text: &str, within: std::time::Duration) -> String {
        let until = std::time::Instant::now() + within;
        loop {
            let left = until.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(text) {
                        return line;
                    }
                }
                Err(_) => panic!("no line with {text:?} within {within:?}; saw {:?}", self.seen),
            }
        }
    }

    /// Every line logged so far (without waiting).
    pub fn drain(&mut self) -> &[String] {
        while let Ok(line) = self.lines.try_recv() {
            self.seen.push(line);
        }
        &self.seen
    }

    pub fn signal(&self, sig: nix::sys::signal::Signal) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, sig).unwrap();
    }

    pub fn wait_exit(&mut self, within: std::time::Duration) -> std::process::ExitStatus {
        let until = std::time::Instant::now() + within;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            assert!(std::time::Instant::now() < until, "operator did not exit");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `keelson` binary: `KEELSON_BIN`, else next to this test's target directory.
pub fn keelson_bin() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KEELSON_BIN") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let p = exe.parent()?.parent()?.join("keelson");
    p.is_file().then_some(p)
}

/// A node process, killed and its directory removed when dropped.
pub struct Killed(pub Child, pub PathBuf);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_dir_all(&self.1);
    }
}

/// `keelson gen config ours` into `dir/gen` (endpoint 127.0.0.1): its `machine.yaml` and
/// `keelsonconfig`. Returns that directory.
pub fn gen_config(bin: &std::path::Path, dir: &std::path::Path) -> PathBuf {
    let gen = dir.join("gen");
    let ok = std::process::Command::new(bin)
        .args(["gen", "config", "ours", "--output"])
        .arg(&gen)
        .args(["--endpoints", "127.0.0.1"])
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(ok.success());
    gen
}

/// The admin context's CA, certificate and key of a keelsonconfig, as PEM files.
pub fn client_pems(
    keelsonconfig: &std::path::Path,
    dir: &std::path::Path,
) -> (PathBuf, PathBuf, PathBuf) {
    use base64::Engine;
    let v: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(keelsonconfig).unwrap()).unwrap();
    let ctx = &v["contexts"][v["context"].as_str().unwrap()];
    let write = |field: &str| {
        let pem = base64::engine::general_purpose::STANDARD
            .decode(ctx[field].as_str().unwrap().trim())
            .unwrap();
        let p = dir.join(format!("client-{field}.pem"));
        std::fs::write(&p, pem).unwrap();
        p
    };
    (write("ca"), write("crt"), write("key"))
}

/// Entering a namespace without dropping it (the test's `Netns` deletes it on drop).
pub trait EnterAndKeep {
    fn enter_and_keep(self);
}

impl EnterAndKeep for testkit::Netns {
    fn enter_and_keep(self) {
        self.enter();
        std::mem::forget(self);
    }
}

/// Two Networks peering each other (all of each side's prefixes): `a`, and `b` with an IPv4
/// and an IPv6 prefix. The tenant dataplane tests apply them.
pub const PEERED_NETWORKS: &str = "\
apiVersion: keelson.dev/v1alpha1
kind: Network
metadata:
  name: a
spec:
  prefixes: [10.1.0.0/16]
  peerings:
    - name: to-b
      networkRef: {name: b}
---
apiVersion: keelson.dev/v1alpha1
kind: Network
metadata:
  name: b
spec:
  prefixes: [10.2.0.0/16, fd00:2::/64]
  peerings:
    - name: to-a
      networkRef: {name: a}
";
