// SPDX-License-Identifier: Apache-2.0
//! What the node loop and the API both need: the owner name of the inputs the node writes,
//! the machine facts the runtime's store does not hold, and the hooks of the machine's
//! lifecycle (install, flush before power off). Imports nothing from this crate,
//! so neither side imports the other.

use std::time::Instant;

/// The owner of the inputs the node writes (the config file, the command line, the
/// kubelet's status, and a config applied through the API).
pub const SOURCE: &str = "node";

/// A suffix the build may add to the version (`KEELSON_VERSION_SUFFIX=-b cargo build`): two
/// images of one source tell themselves apart (the upgrade boot test's image B).
const VERSION_SUFFIX: &str = match option_env!("KEELSON_VERSION_SUFFIX") {
    Some(s) => s,
    None => "",
};

/// The version this image reports (`Version`, the console's first line).
pub fn version() -> String {
    format!("{}{VERSION_SUFFIX}", env!("CARGO_PKG_VERSION"))
}

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
    /// Stop services, wipe what [`Reset::wipe`] says, then reboot or power off.
    Reset(Reset),
    /// Stop services, then boot the kernel and initramfs an upgrade loaded (kexec).
    Kexec,
}

impl Power {
    /// The machine comes back by itself (a reboot, a reset with `reboot`, an upgrade).
    pub fn comes_back(self) -> bool {
        match self {
            Self::Reboot | Self::Kexec => true,
            Self::Shutdown => false,
            Self::Reset(r) => r.reboot,
        }
    }
}

/// What a `Reset` wipes and what follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reset {
    pub wipe: Wipe,
    /// Reboot afterwards; otherwise power off.
    pub reboot: bool,
    /// Give services their usual time to stop; otherwise they get none.
    pub graceful: bool,
}

/// The parts of the node a reset wipes, by Talos's partition labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Wipe {
    /// `STATE`: the state partition's slots and the state directory (configs, the node
    /// identity, leases, keys).
    pub state: bool,
    /// `EPHEMERAL`: etcd's data directory (RAM under PID 1; a directory under `--root` for
    /// `keelson run`).
    pub ephemeral: bool,
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
