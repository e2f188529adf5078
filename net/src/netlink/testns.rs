// SPDX-License-Identifier: Apache-2.0
//! Test helper: run a closure in a fresh, private network namespace.
//!
//! `unshare(CLONE_NEWNET)` only moves the calling thread, and libtest does not promise a thread
//! per test (rust-lang/rust#104053), so every closure runs on a thread of its own. Nothing
//! holds the namespace open: it disappears with the thread, links and all. The host namespace
//! is never touched.

use std::panic;
use std::thread;

use nix::sched::{unshare, CloneFlags};

/// Runs `f` on a new thread inside a new network namespace. Returns `None` (after printing a
/// skip line) when namespaces cannot be created, unless `KEELSON_REQUIRE_ROOT=1`, in which case
/// it panics. A panic inside `f` fails the test.
pub(crate) fn in_netns<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
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

/// Prints a skip line, or panics when `KEELSON_REQUIRE_ROOT=1` says skips are not allowed.
pub(crate) fn skip_or_fail(why: &str) {
    if std::env::var("KEELSON_REQUIRE_ROOT").as_deref() == Ok("1") {
        panic!("netns test cannot run and KEELSON_REQUIRE_ROOT=1: {why}");
    }
    eprintln!("SKIP (needs root / CAP_SYS_ADMIN): {why}");
}

/// True when `KEELSON_FULL_KERNEL=1`: the kernel has the dummy, bond and 8021q modules. The
/// development machines lack them, so tests of those kinds only run where this is set.
pub(crate) fn full_kernel() -> bool {
    let on = std::env::var("KEELSON_FULL_KERNEL").as_deref() == Ok("1");
    if !on {
        eprintln!("SKIP (set KEELSON_FULL_KERNEL=1 to run: needs dummy/bond/8021q modules)");
    }
    on
}
