// SPDX-License-Identifier: Apache-2.0
//! What the node loop and the API both need: the owner name of the inputs the node writes,
//! the machine facts the runtime's store does not hold, and the hooks of the machine's
//! lifecycle (install, flush before power off). Imports nothing from this crate,
//! so neither side imports the other.

use std::time::Instant;

/// The owner of the inputs the node writes (the config file, the command line, the
/// kubelet's status, and a config applied through the API).
pub const SOURCE: &str = "node";

/// What precedes the version suffix an image's builder may stamp into its copy of the binary
/// (`scripts/build-initramfs --version-suffix`): two images of one build tell themselves apart
/// without a rebuild (the upgrade boot test's image B).
const STAMP_MARK: &[u8; 23] = b"KEELSON-VERSION-SUFFIX=";
/// The suffix's room after the mark: NUL-padded, at most this many bytes.
pub const STAMP_ROOM: usize = 32;

const fn stamp_init() -> [u8; 23 + STAMP_ROOM] {
    let mut b = [0u8; 23 + STAMP_ROOM];
    let mut i = 0;
    while i < STAMP_MARK.len() {
        b[i] = STAMP_MARK[i];
        i += 1;
    }
    b
}

/// The mark and the room, once in the binary (kept by `#[used]`, read only volatilely, so
/// the bytes written after linking are the ones read).
#[used]
static VERSION_STAMP: [u8; 23 + STAMP_ROOM] = stamp_init();

/// The stamped suffix: printable ASCII up to the first NUL; anything else counts as none.
fn stamped_suffix() -> String {
    let mut out = String::new();
    for i in STAMP_MARK.len()..VERSION_STAMP.len() {
        // SAFETY: `i` is within the static; a volatile read keeps the optimiser from
        // folding the initial zeros in (the image's builder may have changed them).
        let b = unsafe { std::ptr::read_volatile(VERSION_STAMP.as_ptr().add(i)) };
        match b {
            0 => break,
            b if b.is_ascii_graphic() => out.push(char::from(b)),
            _ => return String::new(),
        }
    }
    out
}

/// The version this image reports (`Version`, the console's first line): keelson's, and the
/// image's stamped suffix if it has one.
pub fn version() -> String {
    format!("{}{}", env!("CARGO_PKG_VERSION"), stamped_suffix())
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

#[cfg(test)]
mod tests {
    #[test]
    fn an_unstamped_binary_reports_the_crate_version() {
        assert_eq!(super::version(), env!("CARGO_PKG_VERSION"));
    }
}
