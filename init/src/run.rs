// SPDX-License-Identifier: Apache-2.0
//! `keelson run`: the whole runtime as an ordinary process in the current network namespace.
//!
//! Files go under `--root`; the kernel is configured for real. SIGTERM/SIGINT stop the loop
//! and leave the kernel as it is, so the next `run` adopts that state without changing it.
//! The config file is re-read when it changes (inotify on its directory) or on SIGHUP; a bad
//! new config is reported and the running one kept.

use std::cell::RefCell;
use std::ffi::OsString;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;
use std::time::Instant;

use net::controllers::{self, CMDLINE_ID, MACHINE_CONFIG_ID};
use net::host::kernel::KernelHost;
use net::host::SharedHost;
use net::netlink::Watcher;
use net::resource::{Kind, Namespace};
use net::runtime::Runtime;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use nix::sys::signal::Signal;

use crate::reactor::{Reactor, FIRST_USER_TOKEN};

/// The owner of the inputs `run` writes.
const SOURCE: &str = "run";
const NETLINK_TOKEN: u64 = FIRST_USER_TOKEN;
const INOTIFY_TOKEN: u64 = FIRST_USER_TOKEN + 1;

#[derive(Debug)]
struct Args {
    cmdline: String,
    config: Option<PathBuf>,
    root: PathBuf,
    state: Option<PathBuf>,
    hostname: bool,
    once: bool,
}

fn parse_args(raw: Vec<OsString>) -> Result<Args, String> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_args(raw);
    let mut a = Args {
        cmdline: String::new(),
        config: None,
        root: PathBuf::new(),
        state: None,
        hostname: true,
        once: false,
    };
    let mut root = None;
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        let value = |p: &mut lexopt::Parser| p.value().map_err(|e| e.to_string());
        match arg {
            Long("cmdline") => {
                a.cmdline =
                    value(&mut p)?.into_string().map_err(|v| format!("not UTF-8: {v:?}"))?;
            }
            Long("config") => a.config = Some(value(&mut p)?.into()),
            Long("root") => root = Some(PathBuf::from(value(&mut p)?)),
            Long("state") => a.state = Some(value(&mut p)?.into()),
            Long("no-hostname") => a.hostname = false,
            Long("once") => a.once = true,
            _ => return Err(arg.unexpected().to_string()),
        }
    }
    a.root =
        root.ok_or("--root DIR is required (files such as /etc/resolv.conf are written under it)")?;
    Ok(a)
}

pub fn main(raw: Vec<OsString>) -> ExitCode {
    let args = match parse_args(raw) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("keelson run: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log::error!(target: "run", "{e}");
            ExitCode::FAILURE
        }
    }
}

/// Read and parse the config; on any error, log it and keep what runs.
fn load_config(rt: &mut Runtime, path: &Path) {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            log::error!(target: "config", "{}: {e}; keeping the running configuration", path.display());
            return;
        }
    };
    match net::config::parse(&text) {
        Ok(cfg) => {
            for w in &cfg.warnings {
                log::warn!(target: "config", "{}: {w}", path.display());
            }
            match rt.put_input(SOURCE, Namespace::Config, MACHINE_CONFIG_ID, cfg) {
                Ok(()) => log::info!(target: "config", "loaded {}", path.display()),
                Err(e) => log::error!(target: "config", "{e}"),
            }
        }
        Err(e) => {
            log::error!(target: "config", "{}: {e}; keeping the running configuration", path.display())
        }
    }
}

fn run(args: &Args) -> Result<(), String> {
    let mut reactor = Reactor::new().map_err(|e| e.to_string())?;
    let host: SharedHost = Rc::new(RefCell::new(
        KernelHost::new(&args.root, args.hostname).map_err(|e| e.to_string())?,
    ));
    let mut watcher = Watcher::new().map_err(|e| e.to_string())?;
    reactor.add(watcher.as_fd(), NETLINK_TOKEN).map_err(|e| e.to_string())?;
    if let Some(state) = &args.state {
        std::fs::create_dir_all(state).map_err(|e| format!("{}: {e}", state.display()))?;
    }

    let mut rt = Runtime::new();
    for c in controllers::pipeline(&host) {
        rt.register(c).map_err(|e| e.to_string())?;
    }
    let parsed = net::cmdline::parse(&args.cmdline);
    for e in &parsed.errors {
        log::error!(target: "cmdline", "{e}");
    }
    for w in &parsed.warnings {
        log::warn!(target: "cmdline", "{w}");
    }
    rt.put_input(SOURCE, Namespace::Runtime, CMDLINE_ID, parsed).map_err(|e| e.to_string())?;

    // Watch the config's directory: editors and `mv` replace the file rather than write it.
    let inotify = match &args.config {
        Some(path) => {
            load_config(&mut rt, path);
            let dir = path
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or_else(|| Path::new("."));
            let ino = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
                .map_err(|e| e.to_string())?;
            let flags = AddWatchFlags::IN_CLOSE_WRITE
                | AddWatchFlags::IN_MOVED_TO
                | AddWatchFlags::IN_CREATE;
            ino.add_watch(dir, flags).map_err(|e| format!("watch {}: {e}", dir.display()))?;
            reactor.add(ino.as_fd(), INOTIFY_TOKEN).map_err(|e| e.to_string())?;
            Some(ino)
        }
        None => None,
    };
    let config_name = args.config.as_ref().and_then(|p| p.file_name().map(|n| n.to_owned()));
    log::info!(target: "run", "running; root {}", args.root.display());

    let started = Instant::now();
    let mut settled = false;
    loop {
        let now = Instant::now();
        // Always one pass: it also releases the timers that are due (that is why the timer
        // fired), then more while controllers keep marking each other dirty.
        let mut reconciles = rt.run(now).reconciles;
        while rt.has_work() {
            reconciles += rt.run(now).reconciles;
        }
        if !settled && rt.controllers().iter().all(|c| c.last_error.is_none()) {
            settled = true;
            log::info!(target: "run", "settled in {} ms", started.elapsed().as_millis());
            if args.once {
                return Ok(());
            }
        } else if reconciles > 0 {
            log::debug!(target: "run", "{reconciles} reconciles");
        }
        reactor.arm(rt.poll_at(), now).map_err(|e| e.to_string())?;
        let ready = reactor.wait().map_err(|e| e.to_string())?;
        for sig in ready.signals {
            match sig {
                Signal::SIGTERM | Signal::SIGINT => {
                    log::info!(target: "run", "{sig}: stopping; the kernel keeps its configuration ({} wakeups)", reactor.wakeups);
                    return Ok(());
                }
                Signal::SIGHUP => {
                    if let Some(path) = &args.config {
                        load_config(&mut rt, path);
                    }
                }
                Signal::SIGUSR1 => {
                    log::info!(target: "run", "event loop wakeups: {}", reactor.wakeups)
                }
                _ => {}
            }
        }
        for token in ready.tokens {
            match token {
                NETLINK_TOKEN => match watcher.drain() {
                    Ok(c) if c.overrun => rt.mark_all_dirty(),
                    Ok(c) => {
                        let kinds = [
                            (c.links, Kind::LinkStatus),
                            (c.addresses, Kind::AddressStatus),
                            (c.routes, Kind::RouteStatus),
                            (c.rules, Kind::RoutingRuleStatus),
                        ];
                        for (_, kind) in kinds.into_iter().filter(|(changed, _)| *changed) {
                            rt.mark_dirty(kind);
                        }
                    }
                    Err(e) => {
                        log::warn!(target: "run", "netlink watcher: {e}; re-reading everything");
                        rt.mark_all_dirty();
                    }
                },
                INOTIFY_TOKEN => {
                    let ours =
                        inotify.as_ref().and_then(|i| i.read_events().ok()).is_some_and(|events| {
                            events.iter().any(|e| e.name.as_deref() == config_name.as_deref())
                        });
                    if let (true, Some(path)) = (ours, &args.config) {
                        load_config(&mut rt, path);
                    }
                }
                _ => {}
            }
        }
    }
}
