// SPDX-License-Identifier: Apache-2.0
//! Loading kernel modules off the event loop: a few loader threads take requests (module
//! names, a device's modalias, a coldplug pass over `/sys/devices`) from a channel and call
//! `finit_module` (or, for a `.ko.zst` file they decompress, `init_module`) themselves, so the
//! node loop never waits for a driver to initialise or a module to be decompressed.
//! Independent modules load in parallel; a module several requests need is loaded once, the
//! others waiting for it. A module that fails is one line and nothing else.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::CString;
use std::fs::File;
use std::path::Path;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use nix::kmod::{finit_module, init_module, ModuleInitFlags};

use super::kofile::{self, Kind};
use super::modules::{module_name, Tables};

/// How many threads load modules at once (the kernel serialises little of it; two cores).
pub const THREADS: usize = 4;
/// Bounds on the coldplug walk: sysfs is the kernel's, but a bug there must not hang PID 1.
const WALK_DEPTH: usize = 48;
const WALK_ENTRIES: usize = 200_000;
/// A `modalias` attribute is one line; the kernel's own longest are well under 1 KiB.
const MODALIAS_LIMIT: u64 = 4096;

/// What a loader thread is asked to do.
#[derive(Debug)]
pub enum Request {
    /// Load these modules (names or aliases) and what they need; `why` goes into the log.
    Names(Vec<String>, &'static str),
    /// A device asks for its driver.
    Modalias(String),
    /// Read the modalias of every device present and load their drivers.
    Coldplug,
    /// Load one module and what it needs (requests above fan out into these).
    Module(String),
    /// Like `Names`, but after the coldplug pass has queued the drivers of the devices present
    /// (feature modules: NIC drivers go first).
    AfterColdplug(Vec<String>, &'static str),
}

/// Why one module did not load.
#[derive(Debug, thiserror::Error)]
enum LoadError {
    /// The `.ko` file could not be opened.
    #[error(transparent)]
    Open(std::io::Error),
    /// A compressed module could not be read or decompressed.
    #[error(transparent)]
    File(kofile::KoError),
    /// The kernel refused it.
    #[error(transparent)]
    Init(nix::errno::Errno),
}

/// A file's load state across threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Loading,
    Done,
}

/// The shared part: tables, what has been loaded, the queue's sending side.
#[derive(Debug)]
struct Shared {
    tables: Tables,
    state: Mutex<BTreeMap<String, State>>,
    changed: Condvar,
    /// Modaliases already handled: a device that reappears needs nothing new.
    seen_aliases: Mutex<BTreeSet<String>>,
    /// Requests held until the first coldplug pass has queued its drivers; `None` once it has.
    after_coldplug: Mutex<Option<Vec<Request>>>,
}

/// The handle to the loader threads; cloning it is cheap.
#[derive(Debug, Clone)]
pub struct Loader {
    tx: Sender<Request>,
}

impl Loader {
    /// Start `threads` loader threads over `tables`.
    pub fn start(tables: Tables, threads: usize) -> Self {
        let (tx, rx) = channel();
        let shared = Arc::new(Shared {
            tables,
            state: Mutex::new(BTreeMap::new()),
            changed: Condvar::new(),
            seen_aliases: Mutex::new(BTreeSet::new()),
            after_coldplug: Mutex::new(Some(Vec::new())),
        });
        let rx = Arc::new(Mutex::new(rx));
        // spawn_worker blocks every signal in the thread: a signal meant for PID 1
        // (ctrl-alt-del's SIGINT, SIGCHLD) can only reach the loop's signalfd, never a loader
        // thread where its default action would end the process.
        for i in 0..threads.max(1) {
            let (shared, rx, tx) = (shared.clone(), rx.clone(), tx.clone());
            let spawned =
                evloop::spawn_worker(&format!("modload{i}"), move || worker(&shared, &rx, &tx));
            if let Err(e) = spawned {
                log::error!(target: "pid1", "module loader thread: {e}");
            }
        }
        Self { tx }
    }

    /// Queue a request; never blocks.
    pub fn send(&self, req: Request) {
        if self.tx.send(req).is_err() {
            log::error!(target: "pid1", "module loader: no thread left to load modules");
        }
    }
}

/// The loader threads' nice value. A driver initialises inside `init_module`, on the thread
/// that loads it, and the network waits for the NIC's driver, not for the node loop's first
/// reconciles: on a one-CPU machine the two would otherwise share the CPU evenly.
const LOADER_NICE: libc::c_int = -10;

/// Run the calling thread at [`LOADER_NICE`]; a refusal (no `CAP_SYS_NICE`) leaves it as is.
pub(super) fn run_ahead_of_the_loop() {
    // Linux keeps the nice value per thread, and `who` 0 names the calling one.
    // SAFETY: a system call on the calling thread, with no pointers.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS as _, 0, LOADER_NICE) };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        log::debug!(target: "pid1", "module loader: nice {LOADER_NICE}: {e}");
    }
}

fn worker(shared: &Shared, rx: &Mutex<Receiver<Request>>, tx: &Sender<Request>) {
    run_ahead_of_the_loop();
    loop {
        let req = {
            let rx = rx.lock().unwrap_or_else(PoisonError::into_inner);
            match rx.recv() {
                Ok(r) => r,
                Err(_) => return,
            }
        };
        // A panic in one request (there should be none) must not take the thread with it.
        let handled =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handle(shared, tx, req)));
        if handled.is_err() {
            log::error!(target: "pid1", "module loader: a request panicked; the thread goes on");
        }
    }
}

fn handle(shared: &Shared, tx: &Sender<Request>, req: Request) {
    let tables = &shared.tables;
    match req {
        Request::Names(names, why) => {
            for name in names {
                let modules = tables.resolve(&name);
                if modules.is_empty() {
                    log::warn!(
                        target: "pid1",
                        "module {} ({why}): not in modules.dep or modules.alias (built in, or not in the image)",
                        net::names::escape(&name, 80)
                    );
                }
                for m in modules {
                    let _ = tx.send(Request::Module(m));
                }
            }
        }
        Request::Modalias(alias) => {
            let fresh = shared
                .seen_aliases
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(alias.clone());
            if !fresh {
                return;
            }
            let modules = tables.aliases.lookup(&alias);
            log::debug!(target: "pid1", "modalias {}: {modules:?}", net::names::escape(&alias, 200));
            for m in modules {
                let _ = tx.send(Request::Module(m));
            }
        }
        Request::Coldplug => {
            let aliases = coldplug_aliases(Path::new("/sys/devices"));
            log::info!(target: "pid1", "coldplug: {} devices without a driver", aliases.len());
            for a in aliases {
                let _ = tx.send(Request::Modalias(a));
            }
            let held = shared.after_coldplug.lock().unwrap_or_else(PoisonError::into_inner).take();
            for req in held.unwrap_or_default() {
                let _ = tx.send(req);
            }
        }
        Request::AfterColdplug(names, why) => {
            let mut held = shared.after_coldplug.lock().unwrap_or_else(PoisonError::into_inner);
            match held.as_mut() {
                Some(list) => list.push(Request::Names(names, why)),
                None => {
                    drop(held);
                    handle(shared, tx, Request::Names(names, why));
                }
            }
        }
        Request::Module(m) => match tables.chain(&m) {
            Some(chain) => load_chain(shared, &chain),
            None => log::debug!(target: "pid1", "module {m}: not in modules.dep"),
        },
    }
}

/// Load each file of `chain` in order, each once across all threads: a file another thread
/// is loading is waited for, not loaded again.
fn load_chain(shared: &Shared, chain: &[String]) {
    let params = CString::default();
    for path in chain {
        {
            let mut state = shared.state.lock().unwrap_or_else(PoisonError::into_inner);
            loop {
                match state.get(path) {
                    Some(State::Done) => break,
                    Some(State::Loading) => {
                        state = shared.changed.wait(state).unwrap_or_else(PoisonError::into_inner);
                    }
                    None => {
                        state.insert(path.clone(), State::Loading);
                        break;
                    }
                }
            }
            if state.get(path) == Some(&State::Done) {
                continue;
            }
        }
        let name = module_name(path);
        match load_file(&shared.tables.base, path, &params) {
            Ok(()) => log::info!(target: "pid1", "module loaded: {name}"),
            Err(LoadError::Init(nix::errno::Errno::EEXIST)) => {
                log::debug!(target: "pid1", "module {name}: already loaded")
            }
            // No such device: a driver probed and found nothing it handles; not a failure.
            Err(LoadError::Init(nix::errno::Errno::ENODEV)) => {
                log::info!(target: "pid1", "module {name}: no device for it")
            }
            Err(e) => log::error!(target: "pid1", "module {name}: {e}"),
        }
        shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(path.clone(), State::Done);
        shared.changed.notify_all();
    }
}

/// What the kernel is handed for one module file.
#[derive(Debug)]
enum Image {
    /// A `.ko`, opened: `finit_module`.
    File(File),
    /// A `.ko.zst`, decompressed: `init_module`.
    Bytes(Vec<u8>),
}

/// Open (and for `.ko.zst`, decompress, bounded by [`kofile`]) one module file.
fn image(base: &Path, path: &str) -> Result<Image, LoadError> {
    let full = base.join(path);
    match kofile::kind(path).map_err(LoadError::File)? {
        Kind::Plain => File::open(full).map(Image::File).map_err(LoadError::Open),
        Kind::Zstd => kofile::read_zstd_file(&full).map(Image::Bytes).map_err(LoadError::File),
    }
}

/// Hand one module file to the kernel.
fn load_file(base: &Path, path: &str, params: &CString) -> Result<(), LoadError> {
    match image(base, path)? {
        Image::File(f) => {
            finit_module(&f, params, ModuleInitFlags::empty()).map_err(LoadError::Init)
        }
        Image::Bytes(b) => init_module(&b, params).map_err(LoadError::Init),
    }
}

/// Load `chain` on this thread (the kernel's modprobe helper, which must finish before the
/// kernel goes on). Returns whether every file loaded or was loaded already.
pub fn load_now(tables: &Tables, chain: &[String]) -> bool {
    let params = CString::default();
    let mut ok = true;
    for path in chain {
        match load_file(&tables.base, path, &params) {
            Ok(()) | Err(LoadError::Init(nix::errno::Errno::EEXIST)) => {}
            // A variant for hardware this machine lacks (crc32c_intel without SSE 4.2).
            Err(LoadError::Init(nix::errno::Errno::ENODEV)) => {}
            Err(e) => {
                ok = false;
                log::error!(target: "modprobe", "module {}: {e}", module_name(path));
            }
        }
    }
    ok
}

/// The distinct `modalias` values of devices under `root` that have no driver bound yet.
/// Symlinks are not followed (sysfs links every device many times over); depth and entry
/// count are bounded.
pub fn coldplug_aliases(root: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut stack = vec![(root.to_path_buf(), 0usize)];
    let mut entries = 0usize;
    while let Some((dir, depth)) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else { continue };
        for e in rd.flatten() {
            entries += 1;
            if entries > WALK_ENTRIES {
                log::warn!(target: "pid1", "coldplug: more than {WALK_ENTRIES} sysfs entries; the rest is left to hotplug");
                return out;
            }
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() && depth < WALK_DEPTH {
                stack.push((e.path(), depth + 1));
            } else if ft.is_file() && e.file_name() == "modalias" {
                if dir.join("driver").exists() {
                    continue;
                }
                if let Ok(text) = net::bounded::read_text(&e.path(), MODALIAS_LIMIT) {
                    let alias = text.trim();
                    if !alias.is_empty() && alias.bytes().all(|b| b.is_ascii_graphic()) {
                        out.insert(alias.to_owned());
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn plain_files_go_as_files_compressed_ones_as_their_bytes() {
        let dir = std::env::temp_dir().join(format!("keelson-loader-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("kernel/net")).unwrap();
        let module: Vec<u8> = b"\x7fELF".iter().copied().cycle().take(9000).collect();
        std::fs::write(dir.join("kernel/net/a.ko"), &module).unwrap();
        std::fs::write(
            dir.join("kernel/net/b.ko.zst"),
            kofile::tests::raw_frame(&module, Some(9000)),
        )
        .unwrap();
        std::fs::write(dir.join("kernel/net/c.ko.zst"), &module).unwrap();
        std::fs::write(dir.join("kernel/net/d.ko.xz"), &module).unwrap();

        assert!(matches!(image(&dir, "kernel/net/a.ko"), Ok(Image::File(_))));
        let got = image(&dir, "kernel/net/b.ko.zst");
        assert!(matches!(&got, Ok(Image::Bytes(b)) if *b == module), "{got:?}");
        // Not zstd inside: one error naming the header, not a load of garbage.
        let e = image(&dir, "kernel/net/c.ko.zst").unwrap_err();
        assert!(e.to_string().starts_with("zstd frame header"), "{e}");
        let e = image(&dir, "kernel/net/d.ko.xz").unwrap_err();
        assert!(e.to_string().contains("xz"), "{e}");
        assert!(matches!(image(&dir, "kernel/net/missing.ko.zst"), Err(LoadError::File(_))));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The nice value of the calling thread, from its `stat` (field 19).
    fn own_nice() -> i64 {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        let after_name = stat.rsplit_once(')').unwrap().1;
        after_name.split_whitespace().nth(16).unwrap().parse().unwrap()
    }

    /// A loader thread runs ahead of the node loop; the process's other threads keep theirs.
    #[test]
    fn a_loader_thread_runs_at_its_own_nice_value() {
        if !testkit::require_root("a_loader_thread_runs_at_its_own_nice_value") {
            return;
        }
        let before = own_nice();
        // A plain test thread: only its nice value is read, and it is no worker of PID 1's.
        #[allow(clippy::disallowed_methods)]
        let inside = std::thread::spawn(|| {
            run_ahead_of_the_loop();
            own_nice()
        })
        .join()
        .unwrap();
        assert_eq!(inside, i64::from(LOADER_NICE));
        assert_eq!(own_nice(), before, "only the calling thread changes");
    }

    #[test]
    fn coldplug_reads_unbound_devices_only_and_skips_symlinks() {
        let root = std::env::temp_dir().join(format!("keelson-coldplug-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let dev = |p: &str, alias: &str| {
            let d = root.join(p);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("modalias"), format!("{alias}\n")).unwrap();
            d
        };
        dev("pci0000:00/0000:00:03.0", "pci:v00008086d0000100Esv00001AF4sd00001100bc02sc00i00");
        dev("pci0000:00/0000:00:04.0/virtio0", "virtio:d00000001v00001AF4");
        dev("pci0000:00/0000:00:05.0", "pci:v00008086d0000100Esv00001AF4sd00001100bc02sc00i00");
        let bound = dev("pci0000:00/0000:00:01.0", "pci:v00008086d00007000sv*");
        std::fs::create_dir_all(root.join("drivers/piix")).unwrap();
        std::os::unix::fs::symlink(root.join("drivers/piix"), bound.join("driver")).unwrap();
        dev("junk", "bad\u{1b}[31m");
        // A symlink loop would never end if links were followed.
        std::os::unix::fs::symlink(&root, root.join("pci0000:00/loop")).unwrap();
        let got = coldplug_aliases(&root);
        assert_eq!(
            got.into_iter().collect::<Vec<_>>(),
            ["pci:v00008086d0000100Esv00001AF4sd00001100bc02sc00i00", "virtio:d00000001v00001AF4"]
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
