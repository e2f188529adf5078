// SPDX-License-Identifier: Apache-2.0
//! Helpers for tests that run `keelson` against a real kernel in network namespaces they
//! create (and delete on drop): the `keelson run` child, helper processes, scratch
//! directories. Namespaces, commands inside them and the root skip-or-fail rule are the
//! workspace's one test helper, `testkit`, re-exported here.
#![allow(dead_code, unused_imports, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub use testkit::{require_full_kernel, require_root, sh, tag, Netns};

/// `secs` seconds, four times that under software emulation (the VM suite, where everything
/// is several times slower).
pub fn t(secs: u64) -> Duration {
    let scale = if std::env::var("KEELSON_FULL_KERNEL").as_deref() == Ok("1") { 4 } else { 1 };
    Duration::from_secs(secs * scale)
}

/// A scratch directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new() -> Self {
        let p = std::env::temp_dir().join(format!("keelson-test-{}", tag()));
        std::fs::create_dir_all(&p).unwrap();
        Self(p)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if !self.0.as_os_str().is_empty() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// `keelson run` inside a namespace (and its own UTS namespace, so sethostname is private).
pub struct Node {
    child: Option<Child>,
    pub root: TempDir,
    pub log: PathBuf,
    /// The API socket, when started with one.
    pub api: Option<PathBuf>,
}

impl Node {
    pub fn start(ns: &Netns, cmdline: &str, config: Option<&Path>) -> Self {
        Self::start_in(ns, cmdline, config, TempDir::new())
    }

    pub fn start_in(ns: &Netns, cmdline: &str, config: Option<&Path>, root: TempDir) -> Self {
        Self::spawn(ns, cmdline, config, root, false, &[])
    }

    /// Like [`Node::start`], serving the API on `<root>/api.sock`.
    pub fn start_api(ns: &Netns, cmdline: &str, config: Option<&Path>) -> Self {
        Self::spawn(ns, cmdline, config, TempDir::new(), true, &[])
    }

    /// Like [`Node::start_in`], serving the API.
    pub fn start_in_api(ns: &Netns, cmdline: &str, config: Option<&Path>, root: TempDir) -> Self {
        Self::spawn(ns, cmdline, config, root, true, &[])
    }

    /// Like [`Node::start`], with more `run` arguments.
    pub fn start_args(ns: &Netns, cmdline: &str, config: Option<&Path>, args: &[&str]) -> Self {
        Self::spawn(ns, cmdline, config, TempDir::new(), false, args)
    }

    /// Like [`Node::start_in_api`], with more `run` arguments.
    pub fn start_in_api_args(
        ns: &Netns,
        cmdline: &str,
        config: Option<&Path>,
        root: TempDir,
        args: &[&str],
    ) -> Self {
        Self::spawn(ns, cmdline, config, root, true, args)
    }

    /// Like [`Node::start_api`], with more `run` arguments.
    pub fn start_api_args(ns: &Netns, cmdline: &str, config: Option<&Path>, args: &[&str]) -> Self {
        Self::spawn(ns, cmdline, config, TempDir::new(), true, args)
    }

    fn spawn(
        ns: &Netns,
        cmdline: &str,
        config: Option<&Path>,
        root: TempDir,
        api: bool,
        args: &[&str],
    ) -> Self {
        let log = root.path().join("keelson.log");
        let mut cmd = Command::new("ip");
        cmd.args([
            "netns",
            "exec",
            &ns.name,
            "unshare",
            "-u",
            env!("CARGO_BIN_EXE_keelson"),
            "run",
        ]);
        cmd.arg("--cmdline").arg(cmdline).arg("--root").arg(root.path());
        // State (DHCP leases) lives in the root, so a restart over the same root keeps it.
        cmd.arg("--state").arg(root.path().join("state"));
        if let Some(c) = config {
            cmd.arg("--config").arg(c);
        }
        let api = api.then(|| root.path().join("api.sock"));
        if let Some(a) = &api {
            cmd.arg("--api-socket").arg(a);
        }
        cmd.args(args);
        cmd.env("KEELSON_LOG", "debug");
        cmd.stdout(Stdio::null()).stderr(std::fs::File::create(&log).unwrap());
        let child = cmd.spawn().unwrap();
        Self { child: Some(child), root, log, api }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM and wait; returns the log. The process must exit 0.
    pub fn stop(self) -> String {
        self.stop_keeping_root().0
    }

    /// Like [`Node::stop`], and hand over the root directory (for a restart over it).
    pub fn stop_keeping_root(mut self) -> (String, TempDir) {
        let mut child = self.child.take().unwrap();
        // `ip netns exec` and `unshare` exec into keelson, so the child pid is keelson's.
        sh(&["kill", "-TERM", &child.id().to_string()]);
        let status = child.wait().unwrap();
        let log = self.log_text();
        assert!(status.success(), "keelson run exited with {status}:\n{log}");
        // The placeholder's drop removes nothing (an empty path).
        let root = std::mem::replace(&mut self.root, TempDir(PathBuf::new()));
        (log, root)
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Poll `f` until it returns true or the deadline passes; panics with `what` and `context()`.
pub fn wait_for(
    what: &str,
    timeout: Duration,
    mut f: impl FnMut() -> bool,
    context: impl Fn() -> String,
) {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if f() {
            return;
        }
        // Each probe spawns `ip`: poll gently so the node under test keeps the CPU.
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("timed out waiting for {what}\n{}", context());
}

/// A helper process (a DHCP server, a capture), killed on drop; its output goes to a file.
pub struct Background {
    child: Child,
    pub log: PathBuf,
}

impl Background {
    /// Run `args` inside `ns`, output to `log`.
    pub fn start(ns: &Netns, args: &[&str], log: PathBuf) -> Self {
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &ns.name])
            .args(args)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        Self { child, log }
    }

    pub fn text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM (a clean stop) and wait.
    pub fn terminate(&mut self) {
        sh(&["kill", "-TERM", &self.child.id().to_string()]);
        let _ = self.child.wait();
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What a command said: (success, stdout, stderr).
pub type Said = (bool, String, String);

fn said(out: std::process::Output) -> Said {
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `keelson ARGS` in this namespace (the client of a node's socket).
pub fn keelson(args: &[&str]) -> Said {
    said(Command::new(env!("CARGO_BIN_EXE_keelson")).args(args).output().unwrap())
}

/// `keelson ARGS` inside `ns` (the client of a node's TCP API).
pub fn keelson_in(ns: &Netns, args: &[&str]) -> Said {
    let mut all = vec![env!("CARGO_BIN_EXE_keelson")];
    all.extend_from_slice(args);
    said(ns.exec(&all))
}

/// `keelson gen config NAME` into `dir/NAME`, with 127.0.0.1 as the endpoint.
pub fn gen_config(dir: &TempDir, name: &str) -> PathBuf {
    let out = dir.path().join(name);
    let status = Command::new(env!("CARGO_BIN_EXE_keelson"))
        .args(["gen", "config", name, "--output"])
        .arg(&out)
        .args(["--endpoints", "127.0.0.1"])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    out
}

/// Run `tests/data/<script>` with `args` in Python inside `ns`: a scenario whose output must end
/// in `ok <args[0]>`. On failure the assertion shows its output and the node's log. The working
/// directory is `/`, so no package beside the script shadows the standard library's.
pub fn python_scenario(ns: &Netns, node: &Node, script: &str, args: &[&str]) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(script);
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.name, "python3"])
        .arg(&path)
        .args(args)
        .current_dir("/")
        .output()
        .unwrap();
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let name = args.first().copied().unwrap_or_default();
    assert!(
        out.status.success() && text.contains(&format!("ok {name}")),
        "{script} scenario {args:?} failed (scripts/setup installs the Python packages):\n{text}\n--- node log ---\n{}",
        node.log_text()
    );
    text
}
