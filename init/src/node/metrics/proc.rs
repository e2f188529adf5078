// SPDX-License-Identifier: Apache-2.0
//! The process's own resident memory and open fds, from `/proc/self`: reads that never block
//! (procfs files, opened `O_NONBLOCK` and bounded) and a directory listing that is capped.

use std::path::Path;

use super::render::Process;

/// `/proc/self/status` is about 1.5 KiB; anything much larger is not what we expect.
const STATUS_LIMIT: u64 = 64 * 1024;
/// Count no further than this many fds (PID 1's limit is far below).
const MAX_FDS: usize = 1 << 20;

/// Read both; either is `None` when it could not be read.
pub fn read() -> Process {
    let rss_bytes = base::bounded::read_text(Path::new("/proc/self/status"), STATUS_LIMIT)
        .ok()
        .and_then(|s| vm_rss(&s));
    let open_fds = std::fs::read_dir("/proc/self/fd")
        .ok()
        // The listing's own fd is one of the entries.
        .map(|d| (d.take(MAX_FDS).count() as u64).saturating_sub(1));
    Process { rss_bytes, open_fds }
}

/// `VmRSS:    1234 kB` in bytes.
fn vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vm_rss_is_read_in_bytes_and_this_process_has_some() {
        assert_eq!(vm_rss("Name:\tx\nVmRSS:\t    1234 kB\nVmData: 1 kB\n"), Some(1234 * 1024));
        assert_eq!(vm_rss("VmRSS: lots\n"), None);
        let p = read();
        assert!(p.rss_bytes.is_some_and(|b| b > 0), "{p:?}");
        assert!(p.open_fds.is_some_and(|n| n >= 3), "{p:?}");
    }
}
