// SPDX-License-Identifier: Apache-2.0
//! Tenant networks as the node round realised them, as `TenantNetworkStatus` resources.
//!
//! The node round (`keelson-operator tenant-agent`) is a process of its own: PID 1 does not
//! link the operator's store. After each round the agent replaces its status file
//! ([`STATUS_FILE`] under the node's root) by a rename; PID 1 watches the directory with
//! inotify and reads the file bounded and without blocking (tmpfs). The file is another
//! process's output: a bad one is one log line with the first bad field's path, and the
//! resources it last showed stay; a removed file removes them.

use std::collections::BTreeMap;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use net::bounded::{self, ReadError};
use net::resource::{
    parse_status_file, tenant_network_id, Kind, Namespace, TenantNetworkStatus, STATUS_FILE_LIMIT,
};
use nix::errno::Errno;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use runtime::Runtime;

use crate::machine::SOURCE;

/// Where the agent writes, relative to the node's root.
pub const STATUS_FILE: &str = "run/keelson/tenant-networks.json";

/// Without a watch (inotify refused), the file is read this often.
const POLL: Duration = Duration::from_secs(5);

const FLAGS: AddWatchFlags = AddWatchFlags::IN_CLOSE_WRITE
    .union(AddWatchFlags::IN_MOVED_TO)
    .union(AddWatchFlags::IN_MOVED_FROM)
    .union(AddWatchFlags::IN_DELETE)
    .union(AddWatchFlags::IN_CREATE);

/// What the file says now.
#[derive(Debug, PartialEq)]
pub enum Read {
    /// No file: no networks.
    Absent,
    /// The networks by resource ID.
    Networks(BTreeMap<String, TenantNetworkStatus>),
    /// A bad file (the line to log): keep what is shown.
    Bad(String),
}

/// Read and check the file at `path`.
pub fn read(path: &Path) -> Read {
    let text = match bounded::read_text(path, STATUS_FILE_LIMIT) {
        Ok(t) => t,
        Err(ReadError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => return Read::Absent,
        Err(e) => return Read::Bad(format!("{}: {e}", path.display())),
    };
    match parse_status_file(&text) {
        Ok(f) => {
            Read::Networks(f.networks.into_iter().map(|n| (tenant_network_id(n.id), n)).collect())
        }
        Err(e) => Read::Bad(format!("{}: {e}; keeping the networks shown before", path.display())),
    }
}

/// The resources to remove and to write to go from `shown` to `want`.
pub fn diff<'a>(
    shown: &'a BTreeMap<String, TenantNetworkStatus>,
    want: &'a BTreeMap<String, TenantNetworkStatus>,
) -> (Vec<&'a str>, Vec<(&'a str, &'a TenantNetworkStatus)>) {
    let gone = shown.keys().filter(|id| !want.contains_key(*id)).map(String::as_str).collect();
    let put = want
        .iter()
        .filter(|(id, n)| shown.get(*id) != Some(*n))
        .map(|(id, n)| (id.as_str(), n))
        .collect();
    (gone, put)
}

/// The status file as a node input.
pub struct TenantStatus {
    path: PathBuf,
    watch: Option<Inotify>,
    /// What the store holds, by ID.
    shown: BTreeMap<String, TenantNetworkStatus>,
    /// The last line logged for a bad file (a file rewritten bad every round logs once).
    last_bad: Option<String>,
    /// Without a watch: when to read next.
    next_poll: Option<Instant>,
    /// The watch's fd was handed to the loop.
    announced: bool,
}

impl std::fmt::Debug for TenantStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TenantStatus").field("path", &self.path).finish_non_exhaustive()
    }
}

impl TenantStatus {
    /// Follow `<root>/`[`STATUS_FILE`]: its directory is made if missing (under PID 1 it is on
    /// `/run`'s tmpfs) so that it can be watched before the agent first writes.
    pub fn start(root: &Path, rt: &mut Runtime, now: Instant) -> Self {
        let path = root.join(STATUS_FILE);
        let watch = path.parent().and_then(|dir| {
            if let Err(e) = std::fs::create_dir_all(dir) {
                log::warn!(target: "tenant", "{}: {e}; reading every {}s", dir.display(), POLL.as_secs());
                return None;
            }
            let ino = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).ok()?;
            match ino.add_watch(dir, FLAGS) {
                Ok(_) => Some(ino),
                Err(e) => {
                    log::warn!(target: "tenant", "cannot watch {}: {e}; reading every {}s", dir.display(), POLL.as_secs());
                    None
                }
            }
        });
        let next_poll = watch.is_none().then_some(now + POLL);
        let mut s = Self {
            path,
            watch,
            shown: BTreeMap::new(),
            last_bad: None,
            next_poll,
            announced: false,
        };
        s.reload(rt);
        s
    }

    /// Read the file and bring the resources to it.
    pub fn reload(&mut self, rt: &mut Runtime) {
        let want = match read(&self.path) {
            Read::Absent => BTreeMap::new(),
            Read::Networks(n) => n,
            Read::Bad(line) => {
                if self.last_bad.as_ref() != Some(&line) {
                    log::warn!(target: "tenant", "{line}");
                    self.last_bad = Some(line);
                }
                return;
            }
        };
        self.last_bad = None;
        let (gone, put) = diff(&self.shown, &want);
        for id in gone {
            if let Err(e) =
                rt.remove_input(SOURCE, Namespace::Network, Kind::TenantNetworkStatus, id)
            {
                log::warn!(target: "tenant", "network {id}: {e}");
            }
        }
        for (id, n) in put {
            if let Err(e) = rt.put_input(SOURCE, Namespace::Network, id, n.clone()) {
                log::warn!(target: "tenant", "network {id}: {e}");
            }
        }
        self.shown = want;
    }

    /// Without a watch: read the file when it is time (the loop calls this every iteration).
    pub fn tick(&mut self, rt: &mut Runtime, now: Instant) {
        if self.next_poll.is_some_and(|t| now >= t) {
            self.next_poll = Some(now + POLL);
            self.reload(rt);
        }
    }

    /// Drain the watch's events; whether any came.
    fn drain(&mut self) -> bool {
        let Some(ino) = &self.watch else { return false };
        let mut any = false;
        let mut lost = false;
        loop {
            match ino.read_events() {
                Ok(events) if events.is_empty() => break,
                // Any event in the directory: the rename that replaces the file, its removal.
                Ok(events) => {
                    any = true;
                    // The directory itself went (the kernel dropped the watch).
                    lost |= events.iter().any(|e| e.mask.contains(AddWatchFlags::IN_IGNORED));
                }
                Err(Errno::EINTR) => {}
                Err(Errno::EAGAIN) => break,
                Err(e) => {
                    log::warn!(target: "tenant", "inotify: {e}");
                    break;
                }
            }
        }
        if lost {
            self.rewatch();
        }
        any
    }

    /// Make the directory again and watch it on the same inotify fd (the loop keeps it).
    fn rewatch(&mut self) {
        let (Some(ino), Some(dir)) = (&self.watch, self.path.parent()) else { return };
        let again = std::fs::create_dir_all(dir).map_err(|e| e.to_string());
        if let Err(e) = again.and_then(|()| ino.add_watch(dir, FLAGS).map_err(|e| e.to_string())) {
            log::warn!(target: "tenant", "cannot watch {} again: {e}; reading every {}s", dir.display(), POLL.as_secs());
            self.next_poll = Some(Instant::now() + POLL);
        }
    }
}

/// The directory's watch (key 0); without one, a read every [`POLL`].
impl evloop::EventSource<Runtime> for TenantStatus {
    fn take_new_keys(&mut self) -> Vec<u64> {
        // The watch is handed to the loop once.
        if self.watch.is_some() && !self.announced {
            self.announced = true;
            return vec![0];
        }
        Vec::new()
    }

    fn fd(&self, key: u64) -> Option<BorrowedFd<'_>> {
        self.watch.as_ref().filter(|_| key == 0).map(AsFd::as_fd)
    }

    fn ready(&mut self, _key: u64, rt: &mut Runtime, _now: Instant) {
        if self.drain() {
            self.reload(rt);
        }
    }

    fn poll_at(&self) -> Option<Instant> {
        self.next_poll
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;

    fn net(id: u32, state: net::resource::TenantState) -> TenantNetworkStatus {
        TenantNetworkStatus { id, state, vrf: format!("tvrf{id}"), ..Default::default() }
    }

    #[test]
    fn the_diff_removes_the_gone_and_writes_only_the_changed() {
        use net::resource::TenantState::{Pending, Ready};
        let shown: BTreeMap<_, _> =
            [("300".into(), net(300, Ready)), ("301".into(), net(301, Ready))].into();
        let want: BTreeMap<_, _> =
            [("301".into(), net(301, Pending)), ("302".into(), net(302, Ready))].into();
        let (gone, put) = diff(&shown, &want);
        assert_eq!(gone, ["300"]);
        assert_eq!(put.iter().map(|(id, _)| *id).collect::<Vec<_>>(), ["301", "302"]);
        let (gone, put) = diff(&want, &want);
        assert!(gone.is_empty() && put.is_empty());
    }

    #[test]
    fn a_missing_file_is_no_networks_and_a_bad_one_names_its_field() {
        let dir = std::env::temp_dir().join(format!("keelson-tenant-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tenant-networks.json");
        let _ = std::fs::remove_file(&path);
        assert_eq!(read(&path), Read::Absent);
        std::fs::write(&path, r#"{"version":1,"networks":[{"id":0}]}"#).unwrap();
        match read(&path) {
            Read::Bad(line) => assert!(line.contains("networks[0].id: \"0\""), "{line}"),
            other => panic!("{other:?}"),
        }
        // Larger than the limit: refused before it is parsed.
        std::fs::write(&path, " ".repeat(STATUS_FILE_LIMIT as usize + 1)).unwrap();
        match read(&path) {
            Read::Bad(line) => assert!(line.contains("larger than the limit"), "{line}"),
            other => panic!("{other:?}"),
        }
        std::fs::write(&path, r#"{"version":1,"networks":[]}"#).unwrap();
        assert_eq!(read(&path), Read::Networks(BTreeMap::new()));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
