// SPDX-License-Identifier: Apache-2.0
//! Early mounts of PID 1. Each is attempted once; failures are logged and the boot goes on
//! (a missing cgroup2, for instance, only matters to the kubelet later).

use nix::mount::{mount, MsFlags};

struct Mount {
    source: &'static str,
    target: &'static str,
    fstype: &'static str,
    flags: MsFlags,
    data: Option<&'static str>,
}

const NOSUID_NODEV_NOEXEC: MsFlags =
    MsFlags::MS_NOSUID.union(MsFlags::MS_NODEV).union(MsFlags::MS_NOEXEC);

const MOUNTS: &[Mount] = &[
    Mount {
        source: "proc",
        target: "/proc",
        fstype: "proc",
        flags: NOSUID_NODEV_NOEXEC,
        data: None,
    },
    Mount {
        source: "sysfs",
        target: "/sys",
        fstype: "sysfs",
        flags: NOSUID_NODEV_NOEXEC,
        data: None,
    },
    Mount {
        source: "devtmpfs",
        target: "/dev",
        fstype: "devtmpfs",
        flags: MsFlags::MS_NOSUID,
        data: Some("mode=0755"),
    },
    Mount {
        source: "devpts",
        target: "/dev/pts",
        fstype: "devpts",
        flags: MsFlags::MS_NOSUID.union(MsFlags::MS_NOEXEC),
        data: Some("gid=5,mode=0620,ptmxmode=0666"),
    },
    Mount {
        source: "tmpfs",
        target: "/run",
        fstype: "tmpfs",
        flags: MsFlags::MS_NOSUID.union(MsFlags::MS_NODEV),
        data: Some("mode=0755"),
    },
    Mount {
        source: "tmpfs",
        target: "/tmp",
        fstype: "tmpfs",
        flags: MsFlags::MS_NOSUID.union(MsFlags::MS_NODEV),
        data: Some("mode=1777"),
    },
    Mount {
        source: "cgroup2",
        target: "/sys/fs/cgroup",
        fstype: "cgroup2",
        flags: NOSUID_NODEV_NOEXEC,
        data: None,
    },
];

/// Mount everything; returns the failures as text (logged once the logger is up, since
/// `/dev/kmsg` itself needs `/dev`).
pub fn early() -> Vec<String> {
    let mut failures = Vec::new();
    for m in MOUNTS {
        let _ = std::fs::create_dir_all(m.target);
        match mount(Some(m.source), m.target, Some(m.fstype), m.flags, m.data) {
            // EBUSY: already mounted (the kernel mounts devtmpfs itself with CONFIG_DEVTMPFS_MOUNT).
            Ok(()) | Err(nix::errno::Errno::EBUSY) => {}
            Err(e) => failures.push(format!("mount {} on {}: {e}", m.fstype, m.target)),
        }
    }
    failures
}
