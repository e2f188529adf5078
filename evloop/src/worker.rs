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
//! A worker reports back through a channel and a [`Bell`]: the loop watches the bell's fd, a
//! worker holds a [`Ringer`] and rings after it sent its result, so the loop wakes and takes
//! the result without waiting.
//!
//! The list of threads, and how each talks to the loop, is in docs/architecture.md.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixDatagram;
use std::sync::Arc;
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

/// The loop's end of a wake-up: readable once a [`Ringer`] rang, until [`Bell::drain`].
#[derive(Debug)]
pub struct Bell {
    rx: UnixDatagram,
    tx: Ringer,
}

/// A worker's end of a [`Bell`]; cloning it is cheap (no new fd).
#[derive(Debug, Clone)]
pub struct Ringer(Arc<UnixDatagram>);

impl Bell {
    /// A datagram socket pair, both ends non-blocking.
    pub fn new() -> io::Result<Self> {
        let (rx, tx) = UnixDatagram::pair()?;
        rx.set_nonblocking(true)?;
        tx.set_nonblocking(true)?;
        Ok(Self { rx, tx: Ringer(Arc::new(tx)) })
    }

    /// A ringer for a worker.
    pub fn ringer(&self) -> Ringer {
        self.tx.clone()
    }

    /// Take every ring so far; never blocks.
    pub fn drain(&self) {
        let mut b = [0u8; 64];
        while matches!(self.rx.recv(&mut b), Ok(n) if n > 0) {}
    }
}

impl AsFd for Bell {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.rx.as_fd()
    }
}

impl Ringer {
    /// Wake the loop; never blocks. A full socket buffer already means "look", so a ring
    /// that does not fit is not needed.
    pub fn ring(&self) {
        let _ = self.0.send(&[1]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::signal::Signal;

    /// How many rings are waiting (takes them).
    fn waiting(bell: &Bell) -> usize {
        let mut b = [0u8; 8];
        let mut n = 0;
        while bell.rx.recv(&mut b).is_ok() {
            n += 1;
        }
        n
    }

    #[test]
    fn a_ring_wakes_until_drained_and_never_blocks() {
        let bell = Bell::new().unwrap();
        assert_eq!(waiting(&bell), 0);
        let ringer = bell.ringer();
        spawn_worker("test-ring", move || ringer.ring()).unwrap().join().unwrap();
        assert_eq!(waiting(&bell), 1);
        bell.ringer().ring();
        bell.ringer().ring();
        bell.drain();
        assert_eq!(waiting(&bell), 0);
        // Far more rings than the socket buffer holds: none blocks, and some wait.
        let ringer = bell.ringer();
        for _ in 0..100_000 {
            ringer.ring();
        }
        assert!(waiting(&bell) > 0);
    }

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
