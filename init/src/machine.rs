// SPDX-License-Identifier: Apache-2.0
//! What the node loop and the API both need: the owner name of the inputs the node writes,
//! the machine facts the runtime's store does not hold, and the hooks of the machine's
//! lifecycle (install, flush before power off). Imports nothing from this crate,
//! so neither side imports the other.

use std::time::Instant;

/// The owner of the inputs the node writes (the config file, the command line, the
/// kubelet's status, and a config applied through the API).
pub const SOURCE: &str = "node";

/// Node facts the runtime's store does not hold.
#[derive(Debug, Clone, Copy)]
pub struct Machine {
    /// When the loop started.
    pub started: Instant,
    /// All controllers ran without error at least once.
    pub settled: bool,
}

/// What an API client may ask of the machine itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Power {
    /// Stop services, then reboot.
    Reboot,
    /// Stop services, then power off.
    Shutdown,
}

/// The install step is preparing a disk (shown as the `installing` stage).
static INSTALLING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The hook the install step marks its work with: `true` before it touches the disk, `false`
/// once done (or refused). Any thread may call it; the node loop reads it on every iteration,
/// so the caller wakes the loop afterwards (the install's own completion event does).
pub fn set_installing(on: bool) {
    INSTALLING.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// True while the install step runs.
pub fn installing() -> bool {
    INSTALLING.load(std::sync::atomic::Ordering::Relaxed)
}

/// Make what the node keeps durable before a reboot or power off: the page cache to disk
/// (persistent state writes its own files with fsync; this catches anything else).
pub fn flush_state() {
    nix::unistd::sync();
}
