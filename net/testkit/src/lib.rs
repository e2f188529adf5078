// SPDX-License-Identifier: Apache-2.0
//! keelson's one test helper for tests against a real kernel, used (as a dev-dependency) by
//! the tests of `net`, `kubespan` and `keelson` (and, for [`fuzzkit`] only, `discovery` and
//! `discovery-server`):
//!
//! - [`in_netns`]: run a closure on a thread of its own inside a fresh, private network
//!   namespace that disappears with the thread;
//! - [`Netns`]: a named namespace (`ip netns add`, deleted on drop) with `ip -n` helpers,
//!   [`Netns::exec`] to run commands inside, [`Netns::enter`] to move a thread into it and
//!   [`Netns::veth`] to join two of them;
//! - the skip-or-fail rule, once: [`require_root`] and [`skip_or_fail`] skip a test that lacks
//!   the privilege unless `KEELSON_REQUIRE_ROOT=1`, which turns the skip into a failure;
//!   [`require_full_kernel`] gates the tests that need bond/8021q/dummy/WireGuard modules on
//!   `KEELSON_FULL_KERNEL=1`.
//!
//! - [`configmap_swap`]: replace a config file the way Kubernetes' atomic writer does.
//!
//! Never the host namespace, never fixed names: every named namespace carries [`tag`].
//!
//! - [`fuzzkit`]: the structured mutation fuzzer every crate's parser fuzz targets share.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod fuzzkit;

use std::fs::File;
use std::panic;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;

use nix::sched::{setns, unshare, CloneFlags};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A unique short tag (interface names are limited to 15 characters).
pub fn tag() -> String {
    format!("{:x}{:x}", std::process::id() % 0xffff, COUNTER.fetch_add(1, Ordering::SeqCst))
}

/// True when `KEELSON_REQUIRE_ROOT=1`: a test that cannot run must fail, not skip.
pub fn root_required() -> bool {
    std::env::var("KEELSON_REQUIRE_ROOT").as_deref() == Ok("1")
}

/// Prints a skip line, or panics when `KEELSON_REQUIRE_ROOT=1` says skips are not allowed.
pub fn skip_or_fail(why: &str) {
    if root_required() {
        panic!("netns test cannot run and KEELSON_REQUIRE_ROOT=1: {why}");
    }
    eprintln!("SKIP (needs root / CAP_SYS_ADMIN): {why}");
}

/// Root is required; without it the test is skipped, or fails when `KEELSON_REQUIRE_ROOT=1`.
pub fn require_root(test: &str) -> bool {
    if is_root() {
        return true;
    }
    skip_or_fail(&format!("{test}: needs root"));
    false
}

/// True when `KEELSON_FULL_KERNEL=1`: the kernel has the dummy, bond, 8021q and WireGuard
/// modules. The development machines lack them, so tests of those kinds only run in the VM
/// suite, which sets it; elsewhere they print a skip line.
pub fn require_full_kernel(test: &str) -> bool {
    if std::env::var("KEELSON_FULL_KERNEL").as_deref() == Ok("1") {
        return true;
    }
    eprintln!(
        "SKIP {test}: needs dummy/bond/8021q/wireguard modules (set KEELSON_FULL_KERNEL=1, as \
         the VM suite does)"
    );
    false
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// Runs `f` on a new thread inside a new network namespace. Returns `None` (after printing a
/// skip line) when namespaces cannot be created, unless `KEELSON_REQUIRE_ROOT=1`, in which case
/// it panics. A panic inside `f` fails the test.
///
/// `unshare(CLONE_NEWNET)` only moves the calling thread, and libtest does not promise a thread
/// per test (rust-lang/rust#104053), so every closure runs on a thread of its own. Nothing
/// holds the namespace open: it disappears with the thread, links and all. The host namespace
/// is never touched.
pub fn in_netns<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    #[allow(clippy::disallowed_methods)] // Test support: a namespace per thread, not PID 1.
    let handle = thread::spawn(move || match unshare(CloneFlags::CLONE_NEWNET) {
        Ok(()) => Some(f()),
        Err(e) => {
            skip_or_fail(&format!("unshare(CLONE_NEWNET): {e}"));
            None
        }
    });
    match handle.join() {
        Ok(v) => v,
        Err(p) => panic::resume_unwind(p),
    }
}

/// Runs a command and returns its output, whatever its status.
pub fn run(args: &[&str]) -> Output {
    Command::new(args[0]).args(&args[1..]).output().unwrap()
}

/// Runs a command; panics with its output if it fails.
pub fn sh(args: &[&str]) -> String {
    let out = run(args);
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A named network namespace, deleted on drop.
#[derive(Debug)]
pub struct Netns {
    /// The name `ip netns` knows it by.
    pub name: String,
}

impl Netns {
    /// `ip netns add kt-<tag>`, without IPv6 duplicate address detection: the kernel's own
    /// link-local addresses would otherwise appear a second after a link comes up, as noise in
    /// event counts.
    #[allow(clippy::new_without_default)] // each call creates a namespace
    pub fn new() -> Self {
        let name = format!("kt-{}", tag());
        sh(&["ip", "netns", "add", &name]);
        let ns = Self { name };
        for conf in ["all", "default"] {
            ns.sh(&["sysctl", "-qw", &format!("net.ipv6.conf.{conf}.accept_dad=0")]);
        }
        ns
    }

    /// Moves the calling thread into this namespace (use a thread of its own, e.g. inside
    /// [`in_netns`]).
    pub fn enter(&self) {
        let f = File::open(format!("/run/netns/{}", self.name)).unwrap();
        setns(f, CloneFlags::CLONE_NEWNET).unwrap();
    }

    /// `ip netns exec <ns> args...`, whatever its status.
    pub fn exec(&self, args: &[&str]) -> Output {
        let mut all = vec!["ip", "netns", "exec", &self.name];
        all.extend_from_slice(args);
        run(&all)
    }

    /// `ip netns exec <ns> args...`; panics with its output if it fails.
    pub fn sh(&self, args: &[&str]) -> String {
        let mut all = vec!["ip", "netns", "exec", &self.name];
        all.extend_from_slice(args);
        sh(&all)
    }

    /// `ip -n <ns> ...`
    pub fn ip(&self, args: &[&str]) -> String {
        let mut full = vec!["ip", "-n", &self.name];
        full.extend_from_slice(args);
        sh(&full)
    }

    /// `ip -n <ns> -j ...` parsed.
    pub fn ip_json(&self, args: &[&str]) -> serde_json::Value {
        let mut full = vec!["-j"];
        full.extend_from_slice(args);
        serde_json::from_str(&self.ip(&full)).unwrap()
    }

    /// Addresses as `link/addr/len`, sorted.
    pub fn addresses(&self) -> Vec<String> {
        let mut out = Vec::new();
        for link in self.ip_json(&["addr", "show"]).as_array().unwrap() {
            let name = link["ifname"].as_str().unwrap();
            for a in link["addr_info"].as_array().unwrap() {
                out.push(format!("{name}/{}/{}", a["local"].as_str().unwrap(), a["prefixlen"]));
            }
        }
        out.sort();
        out
    }

    /// Routes of a table as `ip -j route show table T` objects.
    pub fn routes(&self, table: &str) -> Vec<serde_json::Value> {
        self.ip_json(&["route", "show", "table", table]).as_array().unwrap().clone()
    }

    /// A veth pair: `inside` in this namespace, `outside` in `peer` (up on the outside).
    pub fn veth(&self, inside: &str, peer: &Netns, outside: &str) {
        sh(&[
            "ip", "link", "add", inside, "netns", &self.name, "type", "veth", "peer", "name",
            outside, "netns", &peer.name,
        ]);
        peer.ip(&["link", "set", outside, "up"]);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).status();
    }
}

/// Kubernetes' atomic writer: `body` goes into a new directory `dir/generation`, and a new
/// `..data` link to it is renamed over the old one, so `config.yaml -> ..data/config.yaml`
/// never changes while what it resolves to does.
pub fn configmap_swap(dir: &std::path::Path, generation: &str, body: &str) {
    let data = dir.join(generation);
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("config.yaml"), body).unwrap();
    std::os::unix::fs::symlink(generation, dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
}
