// SPDX-License-Identifier: Apache-2.0
//! Following the machine configuration file: read it (bounded, never blocking) and notice
//! when it changes, however it is replaced.
//!
//! Editors and `mv` replace the file rather than write it, so the directory is watched, not
//! the file. A Kubernetes ConfigMap volume (and other atomic writers) goes further:
//! `config.yaml -> ..data/config.yaml`, `..data -> ..2026_01_01...`, and an update renames a
//! new `..data` link over the old one, so no event names `config.yaml`. Any event in the
//! path's directory, or in the directory the path resolves to (re-resolved after every
//! batch), leads to a re-read; unless the event named the file itself, only content that
//! differs from the last read is applied.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};

use net::bounded::{self, CONFIG_LIMIT};
use nix::errno::Errno;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};

const FLAGS: AddWatchFlags =
    AddWatchFlags::IN_CLOSE_WRITE.union(AddWatchFlags::IN_MOVED_TO).union(AddWatchFlags::IN_CREATE);

/// Why the configuration could not be read or watched.
#[derive(Debug, thiserror::Error)]
pub enum ConfigWatchError {
    /// The file could not be read (missing, too large, not a regular file, not UTF-8).
    #[error("{}: {source}", path.display())]
    Read {
        /// The configuration file.
        path: PathBuf,
        /// Why.
        source: bounded::ReadError,
    },
    /// No inotify instance.
    #[error("inotify: {0}")]
    Inotify(Errno),
    /// The directory could not be watched.
    #[error("cannot watch {}: {errno}; SIGHUP reloads", dir.display())]
    Watch {
        /// The directory.
        dir: PathBuf,
        /// Why.
        errno: Errno,
    },
}

/// Read the configuration text: a regular file of at most [`CONFIG_LIMIT`] bytes, opened
/// without blocking (a FIFO or device in its place is refused, not waited on).
pub fn read(path: &Path) -> Result<String, ConfigWatchError> {
    bounded::read_text(path, CONFIG_LIMIT)
        .map_err(|source| ConfigWatchError::Read { path: path.to_owned(), source })
}

/// A fingerprint of the last text read, to skip re-applying what did not change.
pub fn fingerprint(text: &str) -> u64 {
    let mut h = DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

/// The directory `path` is in (`.` for a bare name).
fn parent(path: &Path) -> &Path {
    path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or_else(|| Path::new("."))
}

/// What a batch of events was about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// Nothing happened.
    Nothing,
    /// The file itself was written or replaced: re-apply it even if unchanged (as before a
    /// watch existed, saving the file applies it).
    File,
    /// Something else in the watched directories (a `..data` swap, a sibling file): re-apply
    /// only if the content changed.
    Other,
}

/// The inotify watches on the configuration's directories.
pub struct ConfigWatch {
    ino: Inotify,
    path: PathBuf,
    dir: Option<WatchDescriptor>,
    /// The directory the path resolves to, when that is another directory.
    target: Option<(PathBuf, WatchDescriptor)>,
    /// The names the file has in the watched directories: the path's own, the resolved one.
    names: Vec<std::ffi::OsString>,
}

impl ConfigWatch {
    /// Watch `path`'s directory and the one it resolves to.
    pub fn new(path: &Path) -> Result<Self, ConfigWatchError> {
        let ino = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
            .map_err(ConfigWatchError::Inotify)?;
        let dir = parent(path);
        let wd = ino
            .add_watch(dir, FLAGS)
            .map_err(|errno| ConfigWatchError::Watch { dir: dir.to_owned(), errno })?;
        let mut w = Self { ino, path: path.to_owned(), dir: Some(wd), target: None, names: vec![] };
        w.follow();
        Ok(w)
    }

    /// Move the second watch to where the path resolves now.
    fn follow(&mut self) {
        let resolved = std::fs::canonicalize(&self.path).ok();
        self.names = [Some(self.path.as_path()), resolved.as_deref()]
            .into_iter()
            .flatten()
            .filter_map(|p| p.file_name().map(ToOwned::to_owned))
            .collect();
        let dir = resolved.as_deref().map(parent).map(Path::to_owned);
        if dir.as_ref() == self.target.as_ref().map(|(d, _)| d) {
            return;
        }
        if let Some((_, wd)) = self.target.take() {
            // Fails when the directory is gone (the kernel dropped the watch): nothing to do.
            let _ = self.ino.rm_watch(wd);
        }
        let Some(dir) = dir else { return };
        match self.ino.add_watch(&dir, FLAGS) {
            // The same directory as the path's: one watch serves both.
            Ok(wd) if Some(wd) == self.dir => {}
            Ok(wd) => self.target = Some((dir, wd)),
            Err(e) => log::warn!(target: "config", "cannot watch {}: {e}", dir.display()),
        }
    }

    /// Drain the pending events and say what they were about (the caller re-reads the file).
    pub fn drain(&mut self) -> Seen {
        let mut seen = Seen::Nothing;
        loop {
            match self.ino.read_events() {
                Ok(events) if events.is_empty() => break,
                Ok(events) => {
                    let file = events.iter().any(|e| {
                        e.name.as_ref().is_some_and(|n| self.names.iter().any(|m| m == n))
                    });
                    seen = if file || seen == Seen::File { Seen::File } else { Seen::Other };
                }
                Err(Errno::EINTR) => {}
                Err(Errno::EAGAIN) => break,
                Err(e) => {
                    log::warn!(target: "config", "inotify: {e}");
                    break;
                }
            }
        }
        if seen != Seen::Nothing {
            self.follow();
        }
        seen
    }
}

impl AsFd for ConfigWatch {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.ino.as_fd()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::symlink;
    use testkit::configmap_swap as swap;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("keelson-cw-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_configmap_swap_is_seen_and_the_watch_follows() {
        let dir = scratch("swap");
        swap(&dir, "..gen1", "one");
        symlink("..data/config.yaml", dir.join("config.yaml")).unwrap();
        let path = dir.join("config.yaml");
        let mut w = ConfigWatch::new(&path).unwrap();
        assert_eq!(w.target.as_ref().map(|(d, _)| d.clone()), Some(dir.join("..gen1")));
        assert_eq!(w.drain(), Seen::Nothing);

        swap(&dir, "..gen2", "two");
        assert_eq!(w.drain(), Seen::Other);
        assert_eq!(read(&path).unwrap(), "two");
        assert_eq!(w.target.as_ref().map(|(d, _)| d.clone()), Some(dir.join("..gen2")));

        // A write through the links, into the resolved directory, is seen too.
        std::fs::write(dir.join("..gen2/config.yaml"), "three").unwrap();
        assert_eq!(w.drain(), Seen::File);
        assert_eq!(read(&path).unwrap(), "three");
    }

    #[test]
    fn a_plain_file_needs_one_watch() {
        let dir = scratch("plain");
        let path = dir.join("config.yaml");
        std::fs::write(&path, "a").unwrap();
        let mut w = ConfigWatch::new(&path).unwrap();
        assert!(w.target.is_none());
        std::fs::write(&path, "b").unwrap();
        assert_eq!(w.drain(), Seen::File);
        assert_eq!(w.drain(), Seen::Nothing);
        std::fs::write(dir.join("other"), "c").unwrap();
        assert_eq!(w.drain(), Seen::Other);
    }

    #[test]
    fn reads_are_bounded_and_never_block() {
        let dir = scratch("fifo");
        let fifo = dir.join("config.yaml");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        assert!(read(&fifo).unwrap_err().to_string().contains("not a regular file (a FIFO)"));
        assert!(read(Path::new("/dev/zero"))
            .unwrap_err()
            .to_string()
            .contains("not a regular file"));
        assert_ne!(fingerprint("a"), fingerprint("b"));
    }
}
