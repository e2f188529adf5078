// SPDX-License-Identifier: Apache-2.0
//! The machine configuration as the node's input: loaded at start, re-read on SIGHUP and
//! when the watch sees the file (or what it resolves to) change. Invalid entries are dropped
//! and logged, the rest applies; a config that cannot be read, or of which nothing is valid,
//! is logged and the running one kept.

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use net::config::MachineConfig;
use net::controllers::MACHINE_CONFIG_ID;
use net::resource::Namespace;
use net::runtime::Runtime;

use crate::config_watch::{self, ConfigWatch, Seen};
use crate::machine::SOURCE;
use crate::reactor::{Reactor, ReactorError};

/// Read the config; `None` (logged) when it cannot be read.
fn read(path: &Path) -> Option<String> {
    match config_watch::read(path) {
        Ok(t) => Some(t),
        Err(e) => {
            log::error!(target: "config", "{e}; keeping the running configuration");
            None
        }
    }
}

/// Parse and apply the config text. An invalid entry is dropped and logged, and the rest
/// applies (the dropped entries show in `machinestatus`); a config of which nothing is valid
/// is logged and the running one kept. A config whose `machine.install` is refused is not
/// applied, exactly as `apply-config` refuses it: without a running config the node stays in
/// maintenance mode.
pub fn load(rt: &mut Runtime, path: &Path, text: &str) {
    let report = net::config::check(text);
    match report.kept.then_some(report.config) {
        Some(cfg) => {
            if let Err(e) = crate::state::check_install(&cfg) {
                let running =
                    rt.store().get_spec::<MachineConfig>(Namespace::Config, MACHINE_CONFIG_ID);
                let then = if running.is_some() {
                    "keeping the running configuration"
                } else {
                    "maintenance mode: the node waits for `keelson apply-config --insecure`"
                };
                log::error!(target: "config", "{}: config refused: {e}; {then}", path.display());
                return;
            }
            for line in &cfg.dropped {
                log::error!(target: "config", "{}: {line}", path.display());
            }
            for w in &cfg.warnings {
                log::warn!(target: "config", "{}: {w}", path.display());
            }
            let dropped = cfg.dropped.len();
            if cfg.debug {
                log::set_max_level(log::LevelFilter::Debug);
            }
            match rt.put_input(SOURCE, Namespace::Config, MACHINE_CONFIG_ID, cfg) {
                Ok(()) if dropped > 0 => {
                    log::warn!(target: "config", "loaded {} without its {dropped} invalid entries (machinestatus: config)", path.display())
                }
                Ok(()) => log::info!(target: "config", "loaded {}", path.display()),
                Err(e) => log::error!(target: "config", "{e}"),
            }
        }
        None => {
            for e in &report.errors {
                log::error!(target: "config", "{}: {e}; keeping the running configuration", path.display());
            }
        }
    }
}

/// The config file the node follows, if it was given one.
pub struct ConfigInput {
    path: PathBuf,
    watch: Option<ConfigWatch>,
    /// The fingerprint of the config text last read, so a watch event that changed nothing
    /// (a sibling file, a touch) does not re-apply it.
    seen: Option<u64>,
}

impl ConfigInput {
    /// Load `path` and watch it, its watch reported as `token`. Without a watch (inotify
    /// refused), SIGHUP still reloads.
    pub fn start(
        path: &Path,
        rt: &mut Runtime,
        reactor: &Reactor,
        token: u64,
    ) -> Result<Self, ReactorError> {
        let mut input = Self { path: path.to_owned(), watch: None, seen: None };
        input.reload(rt);
        match ConfigWatch::new(path) {
            Ok(w) => {
                reactor.add(w.as_fd(), token)?;
                input.watch = Some(w);
            }
            Err(e) => log::warn!(target: "config", "{e}"),
        }
        Ok(input)
    }

    /// Read and apply the config; remember its fingerprint (SIGHUP).
    pub fn reload(&mut self, rt: &mut Runtime) {
        self.seen = read(&self.path).map(|text| {
            load(rt, &self.path, &text);
            config_watch::fingerprint(&text)
        });
    }

    /// The watch is readable: re-apply when the file itself was written, or when something
    /// else in its directories changed its content.
    pub fn changed(&mut self, rt: &mut Runtime) {
        let seen = self.watch.as_mut().map_or(Seen::Nothing, ConfigWatch::drain);
        if !matches!(seen, Seen::File | Seen::Other) {
            return;
        }
        if let Some(text) = read(&self.path) {
            let print = config_watch::fingerprint(&text);
            if seen == Seen::File || self.seen != Some(print) {
                load(rt, &self.path, &text);
            }
            self.seen = Some(print);
        } else {
            self.seen = None;
        }
    }
}

/// The inotify watch, watched from the start (key 0) when there is one.
impl evloop::EventSource<Runtime> for ConfigInput {
    fn take_new_keys(&mut self) -> Vec<u64> {
        Vec::new()
    }

    fn fd(&self, key: u64) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.watch.as_ref().filter(|_| key == 0).map(AsFd::as_fd)
    }

    fn ready(&mut self, _key: u64, rt: &mut Runtime, _now: std::time::Instant) {
        self.changed(rt);
    }

    fn poll_at(&self) -> Option<std::time::Instant> {
        None
    }
}
