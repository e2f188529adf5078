// SPDX-License-Identifier: Apache-2.0
//! How the state thread learns that there is something to do, without polling: inotify on
//! the state directory (and its subdirectories, as deep as a snapshot looks), on the
//! directory of a config kept from outside it, and a bell the node rings with a request.
//!
//! The files are written by many parts of the node (the DHCP lease store, KubeSpan's key, the
//! node identity, a fetched or applied config); watching the directory sees every one of
//! them, including writers added later, without each having to remember to say so. Without
//! inotify (an instance or a watch could not be made) the thread looks every [`POLL`], as
//! it always did.

use std::ffi::{OsStr, OsString};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use evloop::Bell;
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, InotifyEvent, WatchDescriptor};

/// How often the directory is compared when it cannot be watched.
pub const POLL: Duration = Duration::from_millis(250);
/// After a change, how long to wait for the next one before writing: a writer's burst
/// (several files, a temporary and its rename) becomes one generation.
const SETTLE: Duration = Duration::from_millis(25);
/// The longest a stream of changes delays a write.
const SETTLE_MAX: Duration = Duration::from_millis(250);

/// Content changes only: a file created empty is seen when its writer closes it.
const FLAGS: AddWatchFlags = AddWatchFlags::IN_CLOSE_WRITE
    .union(AddWatchFlags::IN_MOVED_TO)
    .union(AddWatchFlags::IN_MOVED_FROM)
    .union(AddWatchFlags::IN_DELETE)
    .union(AddWatchFlags::IN_CREATE);

/// What woke the thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Woken {
    /// A file the state keeps may have changed (or the directory cannot be watched and it
    /// is time to look).
    pub changed: bool,
    /// A request was sent (the caller reads its channel).
    pub request: bool,
}

/// Does an event concern what a snapshot takes? Names it skips (hidden, `.tmp`) do not; a
/// file created is seen when written and closed; a lost queue may hide anything.
pub fn relevant(mask: AddWatchFlags, name: Option<&OsStr>) -> bool {
    if mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
        return true;
    }
    let Some(name) = name.and_then(OsStr::to_str) else { return false };
    if name.starts_with('.') || name.ends_with(".tmp") {
        return false;
    }
    if mask.contains(AddWatchFlags::IN_CREATE) && !mask.contains(AddWatchFlags::IN_ISDIR) {
        return false;
    }
    mask.intersects(FLAGS)
}

/// When the state thread compares next (pure: the rules without a disk or a clock).
///
/// A change is compared at once, but not sooner than [`POLL`] after the last comparison, so
/// a writer that never stops costs at most one generation per [`POLL`], as the old poll did;
/// during a failed write's backoff only the retry (or a flush) compares; a flush always does.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    /// A change was noticed since the last comparison (the first look counts as one: files
    /// written before the watch existed).
    pending: bool,
    last: Option<Instant>,
}

impl Schedule {
    /// Nothing compared yet, one look due.
    pub fn new() -> Self {
        Self { pending: true, last: None }
    }

    /// A change was noticed.
    pub fn changed(&mut self) {
        self.pending = true;
    }

    /// Compare now?
    pub fn due(&self, now: Instant, flush: bool, retry_at: Option<Instant>) -> bool {
        match retry_at {
            _ if flush => true,
            Some(t) => now >= t,
            None => self.pending && self.last.is_none_or(|l| now >= l + POLL),
        }
    }

    /// A comparison ran at `now`.
    pub fn stepped(&mut self, now: Instant) {
        self.pending = false;
        self.last = Some(now);
    }

    /// When to look again if nothing is noticed: the retry during a backoff, else the end of
    /// the gap after the last comparison when a change waits for it; at most `fallback` from
    /// now.
    pub fn wake_at(&self, now: Instant, retry_at: Option<Instant>, fallback: Duration) -> Instant {
        // During a backoff a pending change waits for the retry, not for the gap.
        let next = retry_at.or_else(|| self.last.filter(|_| self.pending).map(|l| l + POLL));
        next.map_or(now + fallback, |t| t.min(now + fallback))
    }
}

/// The watches and the bell.
pub struct Notices {
    dir: PathBuf,
    ino: Option<Inotify>,
    top: Option<WatchDescriptor>,
    /// The directory of a config kept from outside `dir`, and its file name.
    outside: Option<(WatchDescriptor, OsString)>,
    /// Without one (no socket pair at boot), requests are looked for every [`POLL`].
    bell: Option<Bell>,
}

impl Notices {
    /// Watch `dir` and its subdirectories; `bell` is rung with each request.
    pub fn new(dir: &Path, bell: Option<Bell>) -> Self {
        let mut n = Self { dir: dir.to_owned(), ino: None, top: None, outside: None, bell };
        match Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC) {
            Ok(ino) => match ino.add_watch(dir, FLAGS) {
                Ok(wd) => {
                    n.top = Some(wd);
                    n.ino = Some(ino);
                }
                Err(e) => {
                    log::warn!(target: "state", "cannot watch {}: {e}; looking every {} ms", dir.display(), POLL.as_millis());
                }
            },
            Err(e) => {
                log::warn!(target: "state", "inotify: {e}; looking every {} ms", POLL.as_millis());
            }
        }
        if n.ino.is_some() {
            let subdirs: Vec<OsString> = std::fs::read_dir(dir)
                .into_iter()
                .flatten()
                .filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.file_name())
                .collect();
            for s in subdirs {
                n.watch_subdir(&s);
            }
        }
        n
    }

    /// Whether changes are noticed (false: the directory is looked at every [`POLL`]).
    pub fn watching(&self) -> bool {
        self.ino.is_some()
    }

    fn watch_subdir(&mut self, name: &OsStr) {
        let Some(ino) = &self.ino else { return };
        let path = self.dir.join(name);
        // A subdirectory that cannot be watched is still compared at the fallback timeout.
        if let Err(e) = ino.add_watch(&path, FLAGS) {
            log::warn!(target: "state", "cannot watch {}: {e}", path.display());
        }
    }

    /// Also watch for `path` (a config outside the directory); `None` stops that.
    pub fn follow(&mut self, path: Option<&Path>) {
        let Some(ino) = &self.ino else { return };
        if let Some((wd, _)) = self.outside.take() {
            if Some(wd) != self.top {
                // Fails when the kernel dropped the watch already: nothing to do.
                let _ = ino.rm_watch(wd);
            }
        }
        let Some(path) = path else { return };
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else { return };
        let parent = if parent.as_os_str().is_empty() { Path::new(".") } else { parent };
        match ino.add_watch(parent, FLAGS) {
            Ok(wd) => self.outside = Some((wd, name.to_owned())),
            Err(e) => log::warn!(target: "state", "cannot watch {}: {e}", parent.display()),
        }
    }

    /// Wait at most `timeout` for a change or a request. A change is reported once the
    /// changes have settled (at most [`SETTLE_MAX`] later); a request at once.
    pub fn wait(&mut self, timeout: Duration) -> Woken {
        let start = Instant::now();
        let mut woken = Woken::default();
        let mut settle_until: Option<Instant> = None;
        loop {
            let now = Instant::now();
            let until = match settle_until {
                Some(t) => t,
                None if self.ino.is_none() || self.bell.is_none() => start + timeout.min(POLL),
                None => start + timeout,
            };
            if now >= until {
                // Without watches, a look is due whenever the wait ends.
                woken.changed |= self.ino.is_none() && !woken.request;
                return woken;
            }
            let (bell, ino) = self.poll(until - now);
            if let (true, Some(b)) = (bell, &self.bell) {
                b.drain();
                woken.request = true;
            }
            if ino && self.drain() {
                woken.changed = true;
                let first = *settle_until.get_or_insert(now);
                settle_until = Some((Instant::now() + SETTLE).min(first + SETTLE_MAX));
            }
            if woken.request {
                return woken;
            }
        }
    }

    /// poll(2) on the bell and the inotify fd: which are readable.
    fn poll(&self, wait: Duration) -> (bool, bool) {
        let timeout = PollTimeout::try_from(wait).unwrap_or(PollTimeout::MAX);
        let mut fds = Vec::with_capacity(2);
        if let Some(b) = &self.bell {
            fds.push(PollFd::new(b.as_fd(), PollFlags::POLLIN));
        }
        if let Some(ino) = &self.ino {
            fds.push(PollFd::new(ino.as_fd(), PollFlags::POLLIN));
        }
        let bell_at = self.bell.as_ref().map(|_| 0);
        let ino_at = self.ino.as_ref().map(|_| usize::from(self.bell.is_some()));
        match nix::poll::poll(&mut fds, timeout) {
            Ok(n) if n > 0 => {
                let ready = |i: Option<usize>| {
                    i.and_then(|i| fds.get(i))
                        .and_then(PollFd::revents)
                        .is_some_and(|r| !r.is_empty())
                };
                (ready(bell_at), ready(ino_at))
            }
            Ok(_) | Err(Errno::EINTR) => (false, false),
            Err(e) => {
                log::warn!(target: "state", "poll: {e}");
                // Do not spin: the caller's deadline still ends the wait.
                #[allow(clippy::disallowed_methods)] // The state thread, not the loop.
                std::thread::sleep(Duration::from_millis(100));
                (false, false)
            }
        }
    }

    /// Read every queued event; whether one of them matters. New subdirectories are watched.
    fn drain(&mut self) -> bool {
        let mut any = false;
        loop {
            let Some(ino) = &self.ino else { return any };
            let events = match ino.read_events() {
                Ok(events) if events.is_empty() => return any,
                Ok(events) => events,
                Err(Errno::EINTR) => continue,
                Err(Errno::EAGAIN) => return any,
                Err(e) => {
                    log::warn!(target: "state", "inotify: {e}");
                    return true;
                }
            };
            for e in events {
                any |= self.matters(&e);
            }
        }
    }

    fn matters(&mut self, e: &InotifyEvent) -> bool {
        let name = e.name.as_deref();
        if let Some((wd, file)) = &self.outside {
            if *wd == e.wd && Some(e.wd) != self.top {
                return name == Some(file.as_os_str())
                    || e.mask.contains(AddWatchFlags::IN_Q_OVERFLOW);
            }
        }
        let new_dir = e.mask.contains(AddWatchFlags::IN_ISDIR)
            && e.mask.intersects(AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO);
        if new_dir && Some(e.wd) == self.top && relevant(e.mask, name) {
            if let Some(n) = name {
                self.watch_subdir(n);
            }
        }
        let outside_here =
            self.outside.as_ref().is_some_and(|(wd, f)| *wd == e.wd && name == Some(f.as_os_str()));
        relevant(e.mask, name) || outside_here
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("keelson-notice-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// A wait far longer than the old 250 ms poll: anything that returns early was woken.
    const LONG: Duration = Duration::from_secs(30);

    #[test]
    fn a_change_after_a_quiet_time_is_compared_at_once() {
        let t0 = Instant::now();
        let mut plan = Schedule::new();
        assert!(plan.due(t0, false, None), "the first look");
        plan.stepped(t0);
        assert!(!plan.due(t0 + Duration::from_secs(5), false, None), "nothing changed");
        assert_eq!(plan.wake_at(t0, None, Duration::from_secs(60)), t0 + Duration::from_secs(60));
        // A write long after the last comparison: due the moment it is noticed, no period.
        let t1 = t0 + Duration::from_secs(10);
        plan.changed();
        assert!(plan.due(t1, false, None));
        plan.stepped(t1);
        // Another right after: held until a quarter second after the last, then due.
        let t2 = t1 + Duration::from_millis(10);
        plan.changed();
        assert!(!plan.due(t2, false, None));
        assert_eq!(plan.wake_at(t2, None, Duration::from_secs(60)), t1 + POLL);
        assert!(plan.due(t1 + POLL, false, None));
        // A flush does not wait.
        assert!(plan.due(t2, true, None));
    }

    #[test]
    fn a_backoff_holds_changes_until_the_retry() {
        let t0 = Instant::now();
        let mut plan = Schedule::new();
        plan.stepped(t0);
        let retry = t0 + Duration::from_secs(4);
        plan.changed();
        assert!(!plan.due(t0 + Duration::from_secs(1), false, Some(retry)));
        assert_eq!(
            plan.wake_at(t0 + Duration::from_secs(1), Some(retry), Duration::from_secs(60)),
            retry
        );
        assert!(plan.due(retry, false, Some(retry)));
        assert!(plan.due(t0 + Duration::from_secs(1), true, Some(retry)));
    }

    #[test]
    fn the_events_that_matter() {
        let f = |m: AddWatchFlags, n: &str| relevant(m, Some(OsStr::new(n)));
        assert!(f(AddWatchFlags::IN_CLOSE_WRITE, "dhcp4-eth0.json"));
        assert!(f(AddWatchFlags::IN_MOVED_TO, "config.yaml"));
        assert!(f(AddWatchFlags::IN_MOVED_FROM, "config.yaml"));
        assert!(f(AddWatchFlags::IN_DELETE, "kubespan.key"));
        assert!(f(AddWatchFlags::IN_CREATE | AddWatchFlags::IN_ISDIR, "sub"));
        assert!(!f(AddWatchFlags::IN_CREATE, "config.yaml"), "seen when closed");
        assert!(!f(AddWatchFlags::IN_CLOSE_WRITE, ".config.yaml.keelson-new"));
        assert!(!f(AddWatchFlags::IN_CLOSE_WRITE, "lease.json.tmp"));
        assert!(!relevant(AddWatchFlags::IN_IGNORED, None));
        assert!(relevant(AddWatchFlags::IN_Q_OVERFLOW, None));
    }

    #[test]
    fn a_write_is_noticed_at_once() {
        let dir = temp("write");
        let mut n = Notices::new(&dir, Some(Bell::new().unwrap()));
        assert!(n.watching());
        let writer = {
            let dir = dir.clone();
            #[allow(clippy::disallowed_methods)] // A test's writer.
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                std::fs::write(dir.join("dhcp4-eth0.json"), "{}").unwrap();
            })
        };
        let started = Instant::now();
        let woken = n.wait(LONG);
        let took = started.elapsed();
        writer.join().unwrap();
        assert_eq!(woken, Woken { changed: true, request: false });
        // The write came after 50 ms; settling adds 25 ms. The old poll could not be faster
        // than its 250 ms period, this must not need a period at all.
        assert!(took < Duration::from_secs(2), "noticed after {took:?}");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn what_a_snapshot_skips_does_not_wake() {
        let dir = temp("skip");
        let mut n = Notices::new(&dir, Some(Bell::new().unwrap()));
        std::fs::write(dir.join("lease.json.tmp"), "partial").unwrap();
        std::fs::write(dir.join(".hidden"), "x").unwrap();
        let woken = n.wait(Duration::from_millis(600));
        assert_eq!(woken, Woken::default());
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn files_in_a_new_subdirectory_are_noticed() {
        let dir = temp("subdir");
        std::fs::create_dir(dir.join("old")).unwrap();
        let mut n = Notices::new(&dir, Some(Bell::new().unwrap()));
        std::fs::create_dir(dir.join("new")).unwrap();
        assert!(n.wait(LONG).changed);
        std::fs::write(dir.join("new/key"), "k").unwrap();
        assert!(n.wait(LONG).changed);
        std::fs::write(dir.join("old/key"), "k").unwrap();
        assert!(n.wait(LONG).changed);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn an_outside_config_is_followed_by_name() {
        let dir = temp("outside-state");
        let image = temp("outside-image");
        let mut n = Notices::new(&dir, Some(Bell::new().unwrap()));
        n.follow(Some(&image.join("config.yaml")));
        std::fs::write(image.join("other.yaml"), "x").unwrap();
        assert_eq!(n.wait(Duration::from_millis(300)), Woken::default());
        std::fs::write(image.join("config.yaml"), "version: v1alpha1\n").unwrap();
        assert!(n.wait(LONG).changed);
        for d in [dir, image] {
            let _ = std::fs::remove_dir_all(d);
        }
    }

    #[test]
    fn a_request_wakes_at_once() {
        let dir = temp("bell");
        let bell = Bell::new().unwrap();
        let ringer = bell.ringer();
        let mut n = Notices::new(&dir, Some(bell));
        ringer.ring();
        let started = Instant::now();
        assert_eq!(n.wait(LONG), Woken { changed: false, request: true });
        assert!(started.elapsed() < Duration::from_secs(2));
        let _ = std::fs::remove_dir_all(dir);
    }
}
