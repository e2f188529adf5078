// SPDX-License-Identifier: Apache-2.0
//! The process's own resident memory and open fds, from `/proc/self`: reads that never block
//! (procfs files, opened `O_NONBLOCK` and bounded) and a directory listing that is capped.
//!
//! Both are read the cheap way, since a scrape runs on the event loop: resident pages from
//! `statm` (the same counter `status` prints as `VmRSS`, without formatting the rest of
//! `status`), and the fd count as the size `stat` reports for `/proc/self/fd` (Linux 6.2 and
//! later: one syscall, however many fds are open); the listing only where that size is 0.

use std::path::Path;

use super::render::Process;

/// `/proc/self/statm` is one short line; anything much larger is not what we expect.
const STATM_LIMIT: u64 = 4 * 1024;
/// Count no further than this many fds (PID 1's limit is far below).
const MAX_FDS: usize = 1 << 20;

/// Read both; either is `None` when it could not be read.
pub fn read() -> Process {
    let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .and_then(|p| u64::try_from(p).ok());
    let rss_bytes = base::bounded::read_text(Path::new("/proc/self/statm"), STATM_LIMIT)
        .ok()
        .zip(page)
        .and_then(|(s, page)| resident_bytes(&s, page));
    let open_fds = match std::fs::metadata("/proc/self/fd") {
        Ok(m) if m.len() > 0 => Some(m.len()),
        _ => std::fs::read_dir("/proc/self/fd")
            .ok()
            // The listing's own fd is one of the entries.
            .map(|d| (d.take(MAX_FDS).count() as u64).saturating_sub(1)),
    };
    Process { rss_bytes, open_fds }
}

/// `size resident shared ...` (in pages): the resident set in bytes.
fn resident_bytes(statm: &str, page: u64) -> Option<u64> {
    let pages: u64 = statm.split_ascii_whitespace().nth(1)?.parse().ok()?;
    pages.checked_mul(page)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn resident_memory_is_read_in_bytes_and_this_process_has_some() {
        assert_eq!(resident_bytes("2000 1234 300 10 0 500 0\n", 4096), Some(1234 * 4096));
        assert_eq!(resident_bytes("2000 lots\n", 4096), None);
        assert_eq!(resident_bytes("2000\n", 4096), None);
        let p = read();
        assert!(p.rss_bytes.is_some_and(|b| b > 0), "{p:?}");
        assert!(p.open_fds.is_some_and(|n| n >= 3), "{p:?}");
    }

    #[test]
    fn the_counts_match_what_status_and_the_fd_listing_say() {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).unwrap();
        let kib: u64 = line.trim().strip_suffix("kB").unwrap().trim().parse().unwrap();
        let listed = std::fs::read_dir("/proc/self/fd").unwrap().count() as u64 - 1;
        // Other test threads may open and close files meanwhile: retry a few times.
        let ok = (0..50).any(|_| {
            let p = read();
            let listed_now = std::fs::read_dir("/proc/self/fd").unwrap().count() as u64 - 1;
            p.open_fds == Some(listed_now) || p.open_fds == Some(listed)
        });
        assert!(ok, "{:?} vs {listed} listed", read());
        let rss = read().rss_bytes.unwrap();
        // Same counter; the process may grow or shrink a little between the two reads.
        assert!(rss.abs_diff(kib * 1024) < 4 * 1024 * 1024, "{rss} vs {kib} kB");
    }
}
