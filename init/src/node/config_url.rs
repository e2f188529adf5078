// SPDX-License-Identifier: Apache-2.0
//! The config fetched by URL, driven by the node loop: wait for the network and for the
//! URL's variables, run each attempt on a thread of its own (it reports back through a socket
//! pair the loop watches, so the loop never blocks), retry by [`retry::next`], and hand the
//! loop a config text that parsed. Once a config arrives by another way (`apply-config`), the
//! fetch stops.

use std::hash::BuildHasher;

use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::time::{Duration, Instant};

use evloop::Bell;
use net::config::MachineConfig;
use net::controllers::MACHINE_CONFIG_ID;
use net::resource::{
    HostnameStatus, LinkStatus, Namespace, SystemInformation, HOSTNAME_ID, SYSTEM_INFORMATION_ID,
};
use net::runtime::Runtime;

use crate::fetch::client::{self, FetchError, Fetched};
use crate::fetch::retry::{self, Next};
use crate::fetch::url::Url;
use crate::fetch::vars::{self, SubstError, Values, Var};
use crate::fetch::{escaped_prefix, sha256_prefix};
use crate::reactor::{Reactor, ReactorError};

/// The loop's extra wait for a thread past its attempt deadline before it stops listening
/// (the thread's own socket timeouts should have ended it by then).
const WATCHDOG_GRACE: Duration = Duration::from_secs(10);

/// Where the fetch is.
#[derive(Debug)]
enum Phase {
    /// For the network and the variables; `Some` names the variables last said to be missing.
    Waiting(Option<Vec<Var>>),
    /// An attempt runs on its thread.
    Running {
        rx: Receiver<Result<Fetched, FetchError>>,
        url: Url,
        since: Instant,
        watchdog: Instant,
    },
    /// The next attempt is due then.
    Backoff(Instant),
    /// A config arrived, or the fetch gave up.
    Done,
}

/// The URL source of a node without its config yet.
#[derive(Debug)]
pub struct ConfigUrl {
    template: String,
    roots: Vec<PathBuf>,
    started: Instant,
    attempt: u32,
    phase: Phase,
    /// The loop watches it; threads ring it when they report.
    wake: Bell,
    /// Whether "waiting for the network" was said.
    said_network: bool,
}

impl ConfigUrl {
    /// Fetch `template` (variables not substituted yet), trusting `roots` for https; the
    /// reports wake the loop as `token`.
    pub fn start(
        template: &str,
        roots: Vec<PathBuf>,
        reactor: &Reactor,
        token: u64,
        now: Instant,
    ) -> Result<Self, ReactorError> {
        let sys = |errno| ReactorError::Sys { what: "config fetch socketpair", errno };
        let wake = Bell::new().map_err(|e| sys(io_errno(&e)))?;
        reactor.add(wake.as_fd(), token)?;
        Ok(Self {
            template: template.to_owned(),
            roots,
            started: now,
            attempt: 0,
            phase: Phase::Waiting(None),
            wake,
            said_network: false,
        })
    }

    /// When the loop should look again without an event.
    pub fn poll_at(&self) -> Option<Instant> {
        match &self.phase {
            Phase::Backoff(t) => Some(*t),
            Phase::Running { watchdog, .. } => Some(*watchdog),
            _ => None,
        }
    }

    /// True once nothing more will come.
    pub fn done(&self) -> bool {
        matches!(self.phase, Phase::Done)
    }

    /// Start an attempt when its time has come and the network and variables are there.
    pub fn tick(&mut self, rt: &Runtime, network_ready: bool, now: Instant) {
        if !matches!(self.phase, Phase::Done) && has_config(rt) {
            log::info!(target: "config", "a machine config was applied through the API: the fetch from URL stops");
            self.phase = Phase::Done;
            return;
        }
        match &self.phase {
            Phase::Backoff(t) if now >= *t => self.phase = Phase::Waiting(None),
            Phase::Running { watchdog, .. } if now >= *watchdog => {
                // The thread is left to end by its own timeouts; its report goes nowhere.
                let e = FetchError::Timeout((*watchdog - self.started).as_secs());
                self.failed(&e, now);
                return;
            }
            _ => {}
        }
        let Phase::Waiting(said) = &self.phase else {
            return;
        };
        if !network_ready {
            if !self.said_network {
                log::info!(target: "config", "waiting for the network before fetching the config");
                self.said_network = true;
            }
            return;
        }
        let url = match vars::substitute(&self.template, &values(rt)) {
            Ok(u) => u,
            Err(SubstError::Missing(missing)) => {
                if said.as_ref() != Some(&missing) {
                    let names: Vec<&str> = missing.iter().map(|v| v.name()).collect();
                    log::info!(target: "config", "waiting for URL variables: {}", names.join(", "));
                    self.phase = Phase::Waiting(Some(missing));
                }
                return;
            }
            Err(e @ SubstError::DotSegment(_)) => {
                log::error!(target: "config", "talos.config: {e}; not fetched; maintenance mode: the node waits for `keelson apply-config --insecure`");
                self.phase = Phase::Done;
                return;
            }
        };
        let url = match Url::parse(&url) {
            Ok(u) => u,
            Err(e) => {
                log::error!(target: "config", "talos.config: the URL after substitution: {e}; maintenance mode: the node waits for `keelson apply-config --insecure`");
                self.phase = Phase::Done;
                return;
            }
        };
        self.spawn(url, now);
    }

    fn spawn(&mut self, url: Url, now: Instant) {
        self.attempt += 1;
        log::info!(target: "config", "fetching config from {} (attempt {})", url.redacted(), self.attempt);
        let (tx, rx) = mpsc::channel();
        let deadline = now + retry::ATTEMPT;
        let (thread_url, roots) = (url.clone(), self.roots.clone());
        let ring = self.wake.ringer();
        let spawned = evloop::spawn_worker("config-fetch", move || {
            let result = client::fetch(&thread_url, &roots, deadline);
            let _ = tx.send(result);
            ring.ring();
        });
        match spawned {
            Ok(_) => {
                self.phase =
                    Phase::Running { rx, url, since: now, watchdog: deadline + WATCHDOG_GRACE };
            }
            Err(e) => self.failed(&FetchError::Io(e), now),
        }
    }

    /// The wake socket is readable: the config text when an attempt brought a valid one.
    pub fn ready(&mut self, rt: &Runtime, now: Instant) -> Option<String> {
        self.wake.drain();
        let Phase::Running { rx, url, since, .. } = &self.phase else {
            return None;
        };
        let result = match rx.try_recv() {
            Ok(r) => r,
            Err(TryRecvError::Empty) => return None,
            Err(TryRecvError::Disconnected) => Err(FetchError::Io(std::io::Error::other(
                "the fetch thread ended without an answer",
            ))),
        };
        let (url, took) = (url.clone(), now.saturating_duration_since(*since));
        match result {
            Ok(fetched) => self.fetched(rt, &url, &fetched, took),
            Err(e) => {
                self.failed(&e, now);
                None
            }
        }
    }

    /// A body arrived: a config if it parses.
    fn fetched(&mut self, rt: &Runtime, url: &Url, f: &Fetched, took: Duration) -> Option<String> {
        self.phase = Phase::Done;
        if has_config(rt) {
            log::info!(target: "config", "a machine config was applied through the API meanwhile: the fetched one is not used");
            return None;
        }
        let from = if f.url == *url {
            url.redacted()
        } else {
            format!("{} (redirected to {})", url.redacted(), f.url.redacted())
        };
        let refuse = |why: String| {
            log::error!(target: "config", "config from {from} is not a valid machine config ({} bytes, starting \"{}\"): {why}; maintenance mode: the node waits for `keelson apply-config --insecure`", f.body.len(), escaped_prefix(&f.body, 24));
        };
        let text = match String::from_utf8(f.body.clone()) {
            Ok(t) => t,
            Err(e) => {
                refuse(format!("not UTF-8 (byte {})", e.utf8_error().valid_up_to()));
                return None;
            }
        };
        if text.trim().is_empty() {
            refuse("the body is empty".into());
            return None;
        }
        // The rule of a config file: invalid entries are dropped (logged when it is loaded)
        // and the rest runs; only a config of which nothing is valid is refused.
        let report = net::config::check(&text);
        if !report.kept {
            refuse(report.errors.first().map(ToString::to_string).unwrap_or_default());
            return None;
        }
        log::info!(
            target: "config",
            "fetched config from {from}: {} bytes, sha256 {}…, in {} ms (attempt {})",
            f.body.len(),
            sha256_prefix(&f.body),
            took.as_millis(),
            self.attempt
        );
        Some(text)
    }

    /// An attempt failed: back off or give up, and say which.
    fn failed(&mut self, e: &FetchError, now: Instant) {
        let jitter = Duration::from_millis(
            std::collections::hash_map::RandomState::new().hash_one(self.attempt) % 1000,
        );
        match retry::next(
            e.failure(),
            self.attempt,
            now.saturating_duration_since(self.started),
            jitter,
        ) {
            Next::Retry(d) => {
                log::warn!(target: "config", "config fetch attempt {} failed: {e}; retrying in {} s", self.attempt, d.as_secs_f32().round());
                self.phase = Phase::Backoff(now + d);
            }
            Next::GiveUp => {
                let why =
                    if retry::retryable(e.failure()) { "gave up after 3 h" } else { "not retried" };
                log::error!(target: "config", "config fetch attempt {} failed: {e}; {why}; maintenance mode: the node waits for `keelson apply-config --insecure`", self.attempt);
                self.phase = Phase::Done;
            }
        }
    }
}

fn io_errno(e: &std::io::Error) -> nix::errno::Errno {
    nix::errno::Errno::from_raw(e.raw_os_error().unwrap_or(0))
}

fn has_config(rt: &Runtime) -> bool {
    rt.store().get_spec::<MachineConfig>(Namespace::Config, MACHINE_CONFIG_ID).is_some()
}

/// The variables' values as the store has them now.
fn values(rt: &Runtime) -> Values {
    let store = rt.store();
    let system = store.get_spec::<SystemInformation>(Namespace::Hardware, SYSTEM_INFORMATION_ID);
    // The first physical link by name, as Talos's FirstHardwareAddr.
    let mut links: Vec<(&str, &LinkStatus)> = store
        .list_specs::<LinkStatus>(Namespace::Network)
        .filter(|(_, l)| l.physical() && !l.hardware_addr.0.is_empty())
        .collect();
    net::sort::by(&mut links, |a, b| a.0.cmp(b.0));
    Values {
        uuid: system.map(|s| s.uuid.clone()).unwrap_or_default(),
        serial: system.map(|s| s.serial_number.clone()).unwrap_or_default(),
        mac: links.first().map(|(_, l)| l.hardware_addr.to_string()).unwrap_or_default(),
        hostname: store
            .get_spec::<HostnameStatus>(Namespace::Network, HOSTNAME_ID)
            .map(|h| h.hostname.clone())
            .unwrap_or_default(),
    }
}
