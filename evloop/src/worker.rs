// SPDX-License-Identifier: Apache-2.0
//! The one way PID 1 starts a thread.
//!
//! PID 1 runs one event loop; the threads are for work that blocks (a TLS handshake, a disk,
//! `finit_module`) and report back through a channel and a byte on a socket the loop watches.
//! Every thread must block every signal: PID 1's signals (SIGTERM, ctrl-alt-del's SIGINT,
//! SIGCHLD...) go to its signalfd, and one delivered to another thread instead would be lost
//! to the loop, or, for a signal with a default action, end the process. A thread inherits
//! its mask from the thread that starts it, so the mask is set around the spawn.
//!
//! The list of threads, and how each talks to the loop, is in docs/architecture.md.

use std::io;
use std::thread::JoinHandle;

use nix::sys::signal::{SigSet, SigmaskHow};

/// Start `f` on a thread called `name` (at most 15 bytes show in `/proc`), with every signal
/// blocked. The caller's own mask is left as it was.
pub fn spawn_worker<F, T>(name: &str, f: F) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    // The new thread starts with the mask of the thread calling spawn: block everything for
    // the spawn, then put the caller's mask back.
    let old = SigSet::all().thread_swap_mask(SigmaskHow::SIG_BLOCK).ok();
    #[allow(clippy::disallowed_methods)] // This is the one place threads are started.
    let spawned = std::thread::Builder::new().name(name.to_owned()).spawn(f);
    if let Some(old) = old {
        let _ = old.thread_set_mask();
    }
    spawned
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::signal::Signal;

    #[test]
    fn the_worker_blocks_every_signal_and_the_caller_keeps_its_mask() {
        let before = SigSet::thread_get_mask().unwrap();
        let handle = spawn_worker("test-worker", || {
            let mask = SigSet::thread_get_mask().unwrap();
            let name = std::thread::current().name().map(str::to_owned);
            (
                [Signal::SIGTERM, Signal::SIGINT, Signal::SIGCHLD, Signal::SIGHUP, Signal::SIGPWR]
                    .iter()
                    .all(|s| mask.contains(*s)),
                name,
            )
        })
        .unwrap();
        let (blocked, name) = handle.join().unwrap();
        assert!(blocked, "a worker must block PID 1's signals");
        assert_eq!(name.as_deref(), Some("test-worker"));
        let after = SigSet::thread_get_mask().unwrap();
        for s in Signal::iterator() {
            assert_eq!(before.contains(s), after.contains(s), "{s} changed in the caller");
        }
    }
}
