// SPDX-License-Identifier: Apache-2.0
//! The node's state on disk: what outlives a reboot or a power cut.
//!
//! keelson runs from RAM. What it must remember (the applied config and a staged one, DHCP
//! leases, the KubeSpan key, the node identity) lives in its state directory, a tmpfs; with
//! a state disk, that directory is also kept in the state partition. At boot the state
//! thread finds the partition ([`gpt`]: by type GUID and label), reads the newest complete
//! state ([`slots`]: two slots, generations and checksums) and writes its files into the
//! directory before the node loop starts; from then on it writes the directory back as a new
//! generation whenever it changed. A config that names `machine.install` on a node without
//! a state disk makes the thread prepare that disk first ([`select`], [`disk`]).
//!
//! All disk I/O happens on that thread: PID 1's loop never waits for a disk. What the loop
//! and the API may know, they read from [`status`] (no I/O). docs/state.md has the layout
//! and the crash-safety argument.

pub mod crc32;
pub mod disk;
mod error;
mod files;
pub mod gpt;
pub mod identity;
mod notice;
pub mod select;
pub mod slots;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use serde::Serialize;
use sha2::Digest;

use self::disk::{Disk, StatePartition};
pub use self::error::StateError;
use self::files::write_file;
use self::notice::{Notices, Schedule, Woken};
use self::select::DiskInfo;
use self::slots::Files;
use net::random::random;

/// The config file in the state directory.
pub const CONFIG_FILE: &str = "config.yaml";
/// Where the machine ID goes.
const MACHINE_ID: &str = "/etc/machine-id";
/// The longest wait between two comparisons of the state directory with what was last
/// written, when nothing was noticed: a change notice may be missed (a writer that keeps its
/// file open; a subdirectory that could not be watched).
const FALLBACK: Duration = Duration::from_secs(60);
/// The longest wait for storage controllers to show their disks at boot.
const DISK_WAIT: Duration = Duration::from_secs(5);
/// Backoff after a failed write, doubled up to the maximum.
const RETRY_MIN: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(60);

/// Where the node's state lives, for `machinestatus` and the lifecycle.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StateStatus {
    /// `ram` (nothing survives a reboot) or `disk`; empty when the node keeps no state
    /// (`keelson run`).
    pub medium: String,
    /// The state disk (`vda`), when on disk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk: Option<String>,
    /// The newest generation written or read.
    pub generation: u64,
    /// An install is being written now.
    pub installing: bool,
    /// The install finished during this boot.
    pub installed: bool,
    /// The last install or write failure, cleared by the next success.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The node's identity (Talos's NodeID form).
    pub node_id: String,
    /// How long the last state write took, fsyncs included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_write_ms: Option<f64>,
    /// The disks found at boot.
    pub disks: Vec<DiskInfo>,
}

static STATUS: Mutex<StateStatus> = Mutex::new(StateStatus {
    medium: String::new(),
    disk: None,
    generation: 0,
    installing: false,
    installed: false,
    error: None,
    node_id: String::new(),
    last_write_ms: None,
    disks: Vec::new(),
});
static REQUESTS: OnceLock<Mutex<Requests>> = OnceLock::new();

/// The node's way to the state thread: a request on the channel, then a ring of its bell.
struct Requests {
    tx: Sender<Request>,
    ring: Option<evloop::Ringer>,
}

impl Requests {
    fn send(&self, r: Request) -> bool {
        let sent = self.tx.send(r).is_ok();
        if let Some(ring) = &self.ring {
            ring.ring();
        }
        sent
    }
}

/// The state as last known (a copy; no I/O).
pub fn status() -> StateStatus {
    STATUS.lock().unwrap_or_else(PoisonError::into_inner).clone()
}

fn update(f: impl FnOnce(&mut StateStatus)) {
    f(&mut STATUS.lock().unwrap_or_else(PoisonError::into_inner));
}

/// What the node may ask of the state thread.
enum Request {
    /// Write what changed now, then answer.
    Flush(Sender<()>),
    /// The node reads its config from this file outside the state directory (the image's):
    /// keep it as `config.yaml` too.
    ConfigSource(PathBuf),
    /// A reset: zero the state partition's slots, empty the state directory, and write
    /// nothing more during this boot; then answer.
    Wipe(Sender<Result<(), String>>),
}

/// May a config run on this node, as far as its `machine.install` goes? The one decision
/// every way a config arrives goes through: `apply-config`, and the node loop loading its
/// config file (from the image, `talos.config=URL`, `talos.config.inline=`, the state disk),
/// so a config one of them refuses is refused by all, and the node stays in maintenance.
/// Decided from the disks found at boot: no I/O.
pub fn check_install(cfg: &net::config::MachineConfig) -> Result<(), String> {
    install_allowed(&status(), cfg)
}

/// [`check_install`] on a given status. On a node keeping its state in RAM, a config naming
/// a disk that does not exist or already has a partition table (without `wipe`) is refused;
/// on a node with a state disk (or no state thread, `keelson run`) `machine.install` is not
/// acted on, so nothing is refused.
pub fn install_allowed(st: &StateStatus, cfg: &net::config::MachineConfig) -> Result<(), String> {
    if st.medium != "ram" {
        return Ok(());
    }
    match &cfg.machine.install {
        Some(i) if i.disk.is_some() || i.disk_selector.is_some() => {
            select::target(i, &st.disks).map(|_| ()).map_err(|e| e.to_string())
        }
        _ => Ok(()),
    }
}

/// Write what changed to the state disk now; wait at most `timeout` (shutdown, reboot).
pub fn flush(timeout: Duration) {
    let Some(tx) = REQUESTS.get() else { return };
    let (done, wait) = mpsc::channel();
    let sent = tx.lock().unwrap_or_else(PoisonError::into_inner).send(Request::Flush(done));
    if sent && wait.recv_timeout(timeout).is_err() {
        log::warn!(target: "state", "the state was not flushed within {} s", timeout.as_secs());
    }
}

/// Wipe the node's state for a reset: the state partition's two slots are zeroed whole and
/// the state directory emptied; the state thread writes nothing more during this boot, so
/// the next boot finds no config, no identity, no keys. Waits at most `timeout`.
pub fn wipe(timeout: Duration) -> Result<(), String> {
    let Some(tx) = REQUESTS.get() else {
        return Err("no state thread".into());
    };
    let (done, wait) = mpsc::channel();
    if !tx.lock().unwrap_or_else(PoisonError::into_inner).send(Request::Wipe(done)) {
        return Err("the state thread is gone".into());
    }
    wait.recv_timeout(timeout).unwrap_or_else(|_| {
        Err(format!("the state thread did not wipe within {} s", timeout.as_secs()))
    })
}

/// Remove everything in `dir` (the directory itself stays).
pub fn empty_dir(dir: &Path) -> std::io::Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for e in entries {
        let e = e?;
        let path = e.path();
        if e.file_type()?.is_dir() {
            std::fs::remove_dir_all(&path)?;
        } else {
            std::fs::remove_file(&path)?;
        }
    }
    Ok(())
}

/// Whether a driver for a device's modalias can be loaded (the image ships a module for it).
pub type CanLoad = Box<dyn Fn(&str) -> bool + Send>;

/// Keep the config the node reads from `path` (outside the state directory) on the disk too.
pub fn follow_config(path: PathBuf) {
    if let Some(tx) = REQUESTS.get() {
        let _ = tx.lock().unwrap_or_else(PoisonError::into_inner).send(Request::ConfigSource(path));
    }
}

/// Start the state thread for `dir`: it finds the state disk, puts the stored files into
/// `dir`, establishes the node identity, then keeps the disk in step. Waits (at most a few
/// seconds) for that first part; returns the stored config's path, if the state has one.
/// The disks are waited for while a storage device shows no disk and `can_load` says its
/// driver is in the image.
pub fn start(dir: &Path, can_load: CanLoad) -> Option<PathBuf> {
    let (ready_tx, ready) = mpsc::channel();
    let (tx, requests) = mpsc::channel();
    let bell = evloop::Bell::new()
        .inspect_err(|e| log::warn!(target: "state", "no bell for the state thread: {e}; requests are looked for every {} ms", notice::POLL.as_millis()))
        .ok();
    let _ =
        REQUESTS.set(Mutex::new(Requests { tx, ring: bell.as_ref().map(evloop::Bell::ringer) }));
    update(|s| s.medium = "ram".into());
    let thread_dir = dir.to_owned();
    // spawn_worker blocks every signal in the thread: a signal meant for PID 1 (ctrl-alt-del's
    // SIGINT) reaches the loop's signalfd, never this thread, where its default action would
    // end the process.
    let spawned = evloop::spawn_worker("state", move || {
        Keeper::boot(thread_dir, &can_load, &ready_tx).run(&requests, bell)
    });
    if let Err(e) = spawned {
        log::error!(target: "state", "cannot start the state thread: {e}; state is kept in RAM only");
        return None;
    }
    match ready.recv_timeout(DISK_WAIT + Duration::from_secs(5)) {
        Ok(stored) => stored,
        Err(_) => {
            log::error!(target: "state", "the state disk did not answer in time; booting without the stored state");
            None
        }
    }
}

/// The state thread's own data.
struct Keeper {
    dir: PathBuf,
    /// A config outside `dir` (the image's) kept as `config.yaml` too.
    config_source: Option<PathBuf>,
    store: Option<Store>,
    /// The last install refusal logged (so it is logged once per config).
    refused: Option<String>,
    /// The config text last parsed, and whether it parsed.
    seen_config: Option<Vec<u8>>,
    config_ok: bool,
    /// The config text last looked at for `machine.install` (without a state disk).
    install_checked: Option<Vec<u8>>,
    retry: Duration,
    next_try: Option<Instant>,
    /// A reset wiped the state: nothing is written again during this boot.
    wiped: bool,
}

/// The open state partition and what it holds.
struct Store {
    disk: String,
    medium: StatePartition,
    current: Option<(usize, u64)>,
    last: Files,
}

impl Keeper {
    fn boot(dir: PathBuf, can_load: &CanLoad, ready: &Sender<Option<PathBuf>>) -> Self {
        let mut k = Self {
            dir,
            config_source: None,
            store: None,
            refused: None,
            seen_config: None,
            config_ok: false,
            install_checked: None,
            retry: RETRY_MIN,
            next_try: None,
            wiped: false,
        };
        let disks = wait_for_disks(Instant::now() + DISK_WAIT, can_load);
        let mut stored_config = None;
        if let Some(d) = disks.iter().find(|d| d.state) {
            match k.open_store(&d.name) {
                Ok(files) => {
                    if files.contains_key(CONFIG_FILE) {
                        stored_config = Some(k.dir.join(CONFIG_FILE));
                    }
                }
                Err(e) => {
                    log::error!(target: "state", "/dev/{}: {e}; state is kept in RAM", d.name);
                    update(|s| s.error = Some(e.to_string()));
                }
            }
        } else {
            log::info!(target: "state", "no state partition on {} disk(s): state is kept in RAM until a config names machine.install", disks.len());
        }
        update(|s| s.disks = disks);
        let _ = ready.send(stored_config);
        // After the node loop is let go: a new identity waits for the kernel's random pool,
        // which can take a second or two early in a boot.
        match identity::establish(&k.dir, Path::new(MACHINE_ID)) {
            Ok((id, new)) => {
                log::info!(target: "state", "node identity {}: {id}", if new { "created" } else { "kept" });
                update(|s| s.node_id = id);
            }
            Err(e) => log::error!(target: "state", "node identity: {e}"),
        }
        k
    }

    /// Open the state partition on `name`, read the newest state into the directory.
    fn open_store(&mut self, name: &str) -> Result<Files, StateError> {
        let mut medium = disk::open_state(Path::new("/dev"), Path::new("/sys/block"), name)?;
        let loaded = slots::load(&mut medium)?;
        let (current, files) = match loaded {
            Some(l) => {
                let names: Vec<&str> = l.files.keys().map(String::as_str).collect();
                // Which config this boot got, for whoever compares boots.
                let config = l.files.get(CONFIG_FILE).map_or_else(
                    || "no config".to_owned(),
                    |c| format!("config sha256 {}", &hex(&sha2::Sha256::digest(c))[..16]),
                );
                log::info!(target: "state", "state read from /dev/{name}: generation {} (slot {}), {config}; {} files: {}", l.generation, ["A", "B"][l.slot], names.len(), names.join(", "));
                (Some((l.slot, l.generation)), l.files)
            }
            None => {
                log::info!(target: "state", "state partition on /dev/{name} is empty");
                (None, Files::new())
            }
        };
        let last = files.clone();
        materialise(&self.dir, &files)?;
        let generation = current.map_or(0, |c| c.1);
        update(|s| {
            s.medium = "disk".into();
            s.disk = Some(name.to_owned());
            s.generation = generation;
        });
        self.store = Some(Store { disk: name.to_owned(), medium, current, last });
        Ok(files)
    }

    /// Compare whenever a change is noticed, a request asks for it, a failed write is due
    /// again, or [`FALLBACK`] passed; otherwise wait ([`notice`]).
    fn run(mut self, requests: &Receiver<Request>, bell: Option<evloop::Bell>) {
        // Watched before the first comparison: a file written before the watch existed is
        // seen by that comparison, one written after by the watch.
        let mut notices = Notices::new(&self.dir, bell);
        if notices.watching() {
            log::debug!(target: "state", "watching {} for changes", self.dir.display());
        }
        let mut plan = Schedule::new();
        loop {
            let mut flushes = Vec::new();
            loop {
                match requests.try_recv() {
                    Ok(Request::Flush(done)) => flushes.push(done),
                    Ok(Request::Wipe(done)) => {
                        let _ = done.send(self.wipe());
                    }
                    Ok(Request::ConfigSource(path)) => {
                        self.config_source = (path != self.dir.join(CONFIG_FILE)).then_some(path);
                        notices.follow(self.config_source.as_deref());
                        plan.changed();
                    }
                    Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
                }
            }
            let now = Instant::now();
            if plan.due(now, !flushes.is_empty(), self.next_try) {
                self.step();
                plan.stepped(now);
            }
            for done in flushes {
                let _ = done.send(());
            }
            let wake = plan.wake_at(now, self.next_try, FALLBACK);
            let woken = notices.wait(wake.saturating_duration_since(Instant::now()));
            // Nothing noticed for the whole wait (the fallback, a retry, the end of the gap
            // after the last write): look anyway.
            if woken.changed || woken == Woken::default() {
                plan.changed();
            }
        }
    }

    /// Zero the slots, empty the directory, and stop writing.
    fn wipe(&mut self) -> Result<(), String> {
        self.wiped = true;
        let mut result = Ok(());
        if let Some(store) = &mut self.store {
            match slots::erase(&mut store.medium) {
                Ok(()) => {
                    log::warn!(target: "state", "reset: the state partition on /dev/{} is wiped ({} MiB zeroed)", store.disk, (2 * slots::SLOT_BYTES) >> 20);
                    store.current = None;
                    store.last = Files::new();
                    update(|s| s.generation = 0);
                }
                Err(e) => result = Err(format!("/dev/{}: {e}", store.disk)),
            }
        }
        if let Err(e) = empty_dir(&self.dir) {
            let line = format!("{}: {e}", self.dir.display());
            result = Err(match result {
                Ok(()) => line,
                Err(disk) => format!("{disk}; {line}"),
            });
        }
        result
    }

    /// One comparison: write a changed state, or install when a config asks for it.
    fn step(&mut self) {
        if self.wiped {
            return;
        }
        let mut files = snapshot(&self.dir, self.config_source.as_deref());
        // A changed config of which nothing is valid (broken) is not what the node runs: the
        // last good one stays. One with some invalid entries runs without them, so it is
        // kept. Parsed only when it changed.
        let before = self.store.as_ref().and_then(|s| s.last.get(CONFIG_FILE));
        let config = files.get(CONFIG_FILE);
        if config != before && config != self.seen_config.as_ref() {
            self.seen_config = config.cloned();
            self.config_ok = config.is_some_and(|t| runs(t));
        }
        if config.is_some() && config != before && !self.config_ok {
            match before {
                Some(b) => files.insert(CONFIG_FILE.into(), b.clone()),
                None => files.remove(CONFIG_FILE),
            };
        }
        let result = match &mut self.store {
            Some(store) if store.last != files => write(store, files),
            Some(_) => Ok(()),
            None => self.maybe_install(files),
        };
        match result {
            Ok(()) => {
                self.retry = RETRY_MIN;
                self.next_try = None;
            }
            Err(e) => {
                // An install that failed is tried again with the same config.
                self.install_checked = None;
                log::error!(target: "state", "{e}; trying again in {} s", self.retry.as_secs());
                update(|s| s.error = Some(e.to_string()));
                self.next_try = Some(Instant::now() + self.retry);
                self.retry = (self.retry * 2).min(RETRY_MAX);
            }
        }
    }

    /// Without a state disk: prepare the disk the config names, then write the state there.
    fn maybe_install(&mut self, files: Files) -> Result<(), StateError> {
        let text = files.get(CONFIG_FILE);
        if text == self.install_checked.as_ref() {
            return Ok(());
        }
        self.install_checked = text.cloned();
        let Some(cfg) = text.and_then(|t| parse_config(t)) else {
            return Ok(());
        };
        let Some(install) =
            cfg.machine.install.filter(|i| i.disk.is_some() || i.disk_selector.is_some())
        else {
            return Ok(());
        };
        // Look again: the disks may have changed since boot.
        let disks = disk::inventory(Path::new("/dev"), Path::new("/sys/block"));
        let target = match select::target(&install, &disks) {
            Ok(d) => d.clone(),
            Err(e) => {
                let line = e.to_string();
                if self.refused.as_ref() != Some(&line) {
                    log::error!(target: "state", "install refused: {line}");
                    self.refused = Some(line.clone());
                    update(|s| s.error = Some(line));
                }
                return Ok(());
            }
        };
        log::info!(target: "state", "installing: a GPT with the state partition on /dev/{} ({} MiB{})", target.name, target.size >> 20, if install.wipe { ", wiped" } else { "" });
        update(|s| s.installing = true);
        crate::machine::set_installing(true);
        let done = install_on(&target.name, install.wipe);
        crate::machine::set_installing(false);
        update(|s| s.installing = false);
        done?;
        self.open_store(&target.name)?;
        log::info!(target: "state", "installed: state partition on /dev/{} ({} MiB at 1 MiB); the state is kept on disk from now on", target.name, gpt::STATE_BYTES >> 20);
        update(|s| {
            s.installed = true;
            s.error = None;
            s.disks = disk::inventory(Path::new("/dev"), Path::new("/sys/block"));
        });
        let files = snapshot(&self.dir, self.config_source.as_deref());
        match &mut self.store {
            Some(store) => write(store, files),
            None => Ok(()),
        }
    }
}

fn install_on(name: &str, wipe: bool) -> Result<(), StateError> {
    let d = Disk::open(Path::new("/dev"), Path::new("/sys/block"), name, true)?;
    let disk_guid = gpt::Guid::random(random::<16>()?);
    let part_guid = gpt::Guid::random(random::<16>()?);
    d.install(wipe, disk_guid, part_guid)?;
    Ok(())
}

/// Write `files` as the next generation.
fn write(store: &mut Store, files: Files) -> Result<(), StateError> {
    let started = Instant::now();
    let next = slots::store(&mut store.medium, store.current, &files)?;
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    let changed: Vec<&str> = files
        .iter()
        .filter(|(n, d)| store.last.get(*n) != Some(*d))
        .map(|(n, _)| n.as_str())
        .chain(store.last.keys().filter(|n| !files.contains_key(*n)).map(String::as_str))
        .collect();
    log::info!(target: "state", "state generation {} written to /dev/{} (slot {}, {ms:.1} ms): {}", next.1, store.disk, ["A", "B"][next.0], changed.join(", "));
    store.current = Some(next);
    store.last = files;
    update(|s| {
        s.generation = next.1;
        s.last_write_ms = Some(ms);
        s.error = None;
    });
    Ok(())
}

/// The node runs this config text, if only in part (docs/config.md).
fn runs(text: &[u8]) -> bool {
    std::str::from_utf8(text).is_ok_and(|t| net::config::check(t).kept)
}

/// A config's text parsed, if it is valid as a whole: a disk is prepared only for a config
/// with no entry dropped.
fn parse_config(text: &[u8]) -> Option<net::config::MachineConfig> {
    std::str::from_utf8(text).ok().and_then(|t| net::config::parse(t).ok())
}

/// The files of `dir` (two levels deep) and the config from outside it, bounded.
fn snapshot(dir: &Path, config_source: Option<&Path>) -> Files {
    let mut files = BTreeMap::new();
    let mut total = 0u64;
    let mut add = |name: String, path: &Path, files: &mut Files| {
        let Ok(data) = net::bounded::read_file(path, slots::MAX_PAYLOAD - total) else { return };
        total += data.len() as u64 + name.len() as u64 + 6;
        files.insert(name, data);
    };
    let mut visit = |sub: &str, files: &mut Files| -> Vec<String> {
        let mut subdirs = Vec::new();
        let Ok(entries) = std::fs::read_dir(dir.join(sub)) else { return subdirs };
        let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
        net::sort::by_key(&mut entries, std::fs::DirEntry::file_name);
        for e in entries.into_iter().take(slots::MAX_FILES) {
            let Ok(name) = e.file_name().into_string() else { continue };
            if name.starts_with('.') || name.ends_with(".tmp") {
                continue;
            }
            let rel = if sub.is_empty() { name } else { format!("{sub}/{name}") };
            match e.file_type() {
                Ok(t) if t.is_dir() && sub.is_empty() => subdirs.push(rel),
                Ok(t)
                    if t.is_file() && slots::valid_name(&rel) && files.len() < slots::MAX_FILES =>
                {
                    add(rel, &e.path(), files)
                }
                _ => {}
            }
        }
        subdirs
    };
    for sub in visit("", &mut files) {
        visit(&sub, &mut files);
    }
    if let Some(src) = config_source {
        if let Ok(data) = net::bounded::read_file(src, slots::MAX_PAYLOAD) {
            files.insert(CONFIG_FILE.into(), data);
        }
    }
    files
}

/// Write the stored files into `dir` (mode 0600).
fn materialise(dir: &Path, files: &Files) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for (name, data) in files {
        write_file(&dir.join(name), data)?;
    }
    Ok(())
}

/// The disks once no storage device is still waiting for a driver the image has (or the
/// deadline passed, or a state partition is found).
fn wait_for_disks(deadline: Instant, can_load: &CanLoad) -> Vec<DiskInfo> {
    loop {
        let disks = disk::inventory(Path::new("/dev"), Path::new("/sys/block"));
        if disks.iter().any(|d| d.state) || !storage_pending(can_load) || Instant::now() >= deadline
        {
            return disks;
        }
        #[allow(clippy::disallowed_methods)] // The state thread waits for disks, not the loop.
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Is a storage controller (PCI class 01) or a virtio block device, for which the image has
/// a driver, still without a disk? Unbound, or bound but with no block device under it yet
/// (the driver link appears when probing starts, the disk at its end). A controller no module
/// drives (the IDE controller of QEMU's default machine) is not waited for; one with a driver
/// and no disk at all is waited for until the deadline.
fn storage_pending(can_load: &CanLoad) -> bool {
    let disks: Vec<PathBuf> = disk::names(Path::new("/sys/block"))
        .iter()
        .filter_map(|n| std::fs::canonicalize(Path::new("/sys/block").join(n)).ok())
        .collect();
    let waiting = |dir: &Path, attr: &str, want: &dyn Fn(&str) -> bool| {
        std::fs::read_dir(dir).into_iter().flatten().filter_map(Result::ok).any(|e| {
            let read = |name: &str| {
                net::bounded::read_text(&e.path().join(name), 4096).unwrap_or_default()
            };
            let has_disk = std::fs::canonicalize(e.path())
                .is_ok_and(|dev| disks.iter().any(|d| d.starts_with(&dev)));
            want(read(attr).trim()) && !has_disk && can_load(read("modalias").trim())
        })
    };
    waiting(Path::new("/sys/bus/pci/devices"), "class", &|c| c.starts_with("0x01"))
        || waiting(Path::new("/sys/bus/virtio/devices"), "device", &|d| d == "0x0002")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("keelson-state-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn snapshot_takes_the_state_files_and_the_outside_config() {
        let dir = temp("snap");
        std::fs::write(dir.join("dhcp4-eth0.json"), "{}").unwrap();
        std::fs::write(dir.join(".config.yaml.keelson-new"), "partial").unwrap();
        std::fs::write(dir.join("dhcp4-eth0.json.tmp"), "partial").unwrap();
        // What a write cut short by a crash leaves: never taken as a state file.
        let torn = net::atomic_file::tmp_path(&dir.join("node-identity.yaml"));
        std::fs::write(torn, "partial").unwrap();
        std::fs::create_dir_all(dir.join("sub/deeper")).unwrap();
        std::fs::write(dir.join("sub/key"), "k").unwrap();
        std::fs::write(dir.join("sub/deeper/x"), "too deep").unwrap();
        std::fs::write(dir.join("bad name"), "x").unwrap();
        let outside = temp("snap-config").join("image.yaml");
        std::fs::write(&outside, "version: v1alpha1\n").unwrap();
        let files = snapshot(&dir, Some(&outside));
        let names: Vec<&str> = files.keys().map(String::as_str).collect();
        assert_eq!(names, ["config.yaml", "dhcp4-eth0.json", "sub/key"]);
        assert_eq!(files["config.yaml"], b"version: v1alpha1\n");

        let back = temp("materialise");
        materialise(&back, &files).unwrap();
        assert_eq!(std::fs::read(back.join("sub/key")).unwrap(), b"k");
        assert_eq!(snapshot(&back, None), files);
        for d in [dir, back] {
            let _ = std::fs::remove_dir_all(d);
        }
    }

    #[test]
    fn an_install_on_a_partitioned_disk_is_refused_only_in_ram() {
        let cfg = |wipe: bool| {
            let text = format!(
                "version: v1alpha1\nmachine:\n  install:\n    disk: /dev/vda\n    wipe: {wipe}\n"
            );
            net::config::parse(&text).unwrap()
        };
        let vda = DiskInfo { name: "vda".into(), table: "gpt".into(), ..DiskInfo::default() };
        let mut st =
            StateStatus { medium: "ram".into(), disks: vec![vda], ..StateStatus::default() };
        let e = install_allowed(&st, &cfg(false)).unwrap_err();
        assert!(e.contains("/dev/vda already has a partition table (gpt)"), "{e}");
        assert!(install_allowed(&st, &cfg(true)).is_ok());
        let plain = net::config::parse("version: v1alpha1\n").unwrap();
        assert!(install_allowed(&st, &plain).is_ok());
        st.medium = "disk".into();
        assert!(install_allowed(&st, &cfg(false)).is_ok());
    }

    #[test]
    fn without_a_state_disk_nothing_is_refused() {
        let cfg =
            net::config::parse("version: v1alpha1\nmachine:\n  install:\n    disk: /dev/nope\n")
                .unwrap();
        // `keelson run`: no state thread, medium empty.
        assert_eq!(status().medium, "");
        assert!(check_install(&cfg).is_ok());
    }
}
