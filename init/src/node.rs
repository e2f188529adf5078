// SPDX-License-Identifier: Apache-2.0
//! The node: the network runtime, kubelet supervision and reaping in one event loop. `run`
//! mode and init mode (PID 1) both drive it; they differ in where files go, whether the
//! hostname is set, and what happens after the loop ends (exit, or power off).
//!
//! One iteration: reconcile (the runtime never blocks), decide what the kubelet should run,
//! arm the timer for the earliest deadline, sleep in epoll; then handle signals (stop,
//! reload, reap), netlink events (mark kind dirty), config file changes and service output.

use std::cell::RefCell;
use std::net::IpAddr;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use net::config::MachineConfig;
use net::controllers::{self, CMDLINE_ID, MACHINE_CONFIG_ID, NETWORK_STATUS_ID};
use net::host::kernel::KernelHost;
use net::host::SharedHost;
use net::netlink::Watcher;
use net::nodeaddress;
use net::operator::Operators;
use net::resource::{
    HostnameStatus, Kind, Namespace, NetworkStatus, NodeAddress, OperatorSpec, ServiceStatus,
    HOSTNAME_ID,
};
use net::runtime::Runtime;
use nix::errno::Errno;
use nix::sys::signal::Signal;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use crate::api::server::{Machine, Server};
use crate::config_watch::{ConfigWatch, Seen};
use crate::reactor::{Reactor, FIRST_USER_TOKEN};
use crate::supervisor::{RestartPolicy, Service, State, Stream};

/// The owner of the inputs the node writes.
pub const SOURCE: &str = "node";
const NETLINK_TOKEN: u64 = FIRST_USER_TOKEN;
const INOTIFY_TOKEN: u64 = FIRST_USER_TOKEN + 1;
const SERVICE_OUT_TOKEN: u64 = FIRST_USER_TOKEN + 2;
const SERVICE_ERR_TOKEN: u64 = FIRST_USER_TOKEN + 3;
/// The API listener; its connections take the tokens above it.
const API_TOKEN: u64 = FIRST_USER_TOKEN + 4;

/// How a node runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// The kernel command line.
    pub cmdline: String,
    /// The machine configuration file.
    pub config: Option<PathBuf>,
    /// Where `/etc` files go.
    pub root: PathBuf,
    /// Set the hostname.
    pub hostname: bool,
    /// Stop once settled (`run --once`).
    pub once: bool,
    /// Longest wait for services to stop at shutdown.
    pub stop_grace: Duration,
    /// Serve the local API on this Unix socket.
    pub api_socket: Option<PathBuf>,
    /// Most API connections at once.
    pub api_max_connections: usize,
    /// Where state that outlives the loop goes (DHCP leases, keys); `None` keeps nothing.
    pub state: Option<PathBuf>,
}

/// Why the loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// SIGTERM, SIGINT (ctrl-alt-del for PID 1) or SIGPWR, after services stopped.
    Stopped(Signal),
    /// `--once` and everything applied.
    Settled,
}

/// Read the config; `None` (logged) when it cannot be read.
fn read_config(path: &Path) -> Option<String> {
    match crate::config_watch::read(path) {
        Ok(t) => Some(t),
        Err(e) => {
            log::error!(target: "config", "{e}; keeping the running configuration");
            None
        }
    }
}

/// Parse and apply the config text; on any error, log it and keep what runs.
fn load_config(rt: &mut Runtime, path: &Path, text: &str) {
    match net::config::parse(text) {
        Ok(cfg) => {
            for w in &cfg.warnings {
                log::warn!(target: "config", "{}: {w}", path.display());
            }
            if cfg.debug {
                log::set_max_level(log::LevelFilter::Debug);
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

/// Read and apply the config; remember its fingerprint.
fn reload(rt: &mut Runtime, path: &Path, last: &mut Option<u64>) {
    *last = read_config(path).map(|text| {
        load_config(rt, path, &text);
        crate::config_watch::fingerprint(&text)
    });
}

/// The command the kubelet should run now, or `None` (not configured, or network not ready).
fn kubelet_command(rt: &Runtime, previous_ip: &mut Option<IpAddr>) -> Option<Vec<String>> {
    let store = rt.store();
    let cfg = store.get_spec::<MachineConfig>(Namespace::Config, MACHINE_CONFIG_ID)?;
    let kubelet = &cfg.machine.kubelet;
    if kubelet.command.is_empty() {
        return None;
    }
    let status = store.get_spec::<NetworkStatus>(Namespace::Network, NETWORK_STATUS_ID)?;
    // What the kubelet waits on in Talos: address, hostname and /etc files (docs/talos.md: Statuses
    // and readiness).
    if !(status.address_ready && status.hostname_ready && status.etc_files_ready) {
        return None;
    }
    let list = |id: &str| -> Vec<IpAddr> {
        store
            .get_spec::<NodeAddress>(Namespace::Network, id)
            .map(|n| n.addresses.iter().map(|a| a.addr()).collect())
            .unwrap_or_default()
    };
    let vips: Vec<IpAddr> = store
        .list_specs::<OperatorSpec>(Namespace::Network)
        .filter_map(|(_, o)| o.vip.as_ref().map(|v| v.ip))
        .collect();
    let subnets = kubelet.node_ip.as_ref().map(|n| n.valid_subnets.as_slice()).unwrap_or_default();
    let default = list(nodeaddress::DEFAULT).first().copied();
    let ip =
        crate::nodeip::choose(*previous_ip, default, &list(nodeaddress::CURRENT), subnets, &vips)?;
    *previous_ip = Some(ip);
    let host = store.get_spec::<HostnameStatus>(Namespace::Network, HOSTNAME_ID)?;
    let mut cmd = kubelet.command.clone();
    cmd.extend(kubelet.extra_args.iter().map(|(k, v)| format!("--{k}={v}")));
    cmd.push(format!("--node-ip={ip}"));
    cmd.push(format!("--hostname-override={}", host.hostname));
    Some(cmd)
}

fn service_status(s: &Service, command: Option<&Vec<String>>) -> ServiceStatus {
    let (state, pid) = match s.state() {
        State::Stopped => ("stopped", 0),
        State::Waiting(_) => ("waiting", 0),
        State::Running(p) => ("running", p),
        State::Stopping(p) => ("stopping", p),
    };
    ServiceStatus {
        state: state.into(),
        pid,
        starts: s.starts,
        command: command.cloned().unwrap_or_default(),
    }
}

/// Reap every exited child; tell the supervisor about its own. Returns the orphans reaped.
fn reap(kubelet: &mut Service, now: Instant) -> u32 {
    let mut orphans = 0;
    loop {
        match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, code)) => {
                if !kubelet.exited(pid, &format!("exited with status {code}"), now) {
                    orphans += 1;
                }
            }
            Ok(WaitStatus::Signaled(pid, sig, _)) => {
                if !kubelet.exited(pid, &format!("was killed by {sig}"), now) {
                    orphans += 1;
                }
            }
            Ok(WaitStatus::StillAlive) | Err(Errno::ECHILD) => return orphans,
            Ok(_) => {}
            Err(Errno::EINTR) => {}
            Err(e) => {
                log::warn!(target: "pid1", "waitpid: {e}");
                return orphans;
            }
        }
    }
}

/// Run the node until a stop signal (or, with `once`, until settled).
pub fn run(opts: &Options) -> Result<Ending, String> {
    let mut reactor = Reactor::new().map_err(|e| e.to_string())?;
    let host: SharedHost = Rc::new(RefCell::new(
        KernelHost::new(&opts.root, opts.hostname).map_err(|e| e.to_string())?,
    ));
    let mut watcher = Watcher::new().map_err(|e| e.to_string())?;
    reactor.add(watcher.as_fd(), NETLINK_TOKEN).map_err(|e| e.to_string())?;

    // PID 1 never dies: without its API it still runs the network, so a bind failure (say,
    // another node answering on the socket) is logged. `run` was asked for a socket: it
    // refuses to start without it.
    let mut api = match opts
        .api_socket
        .as_ref()
        .map(|p| Server::bind(p, &reactor, API_TOKEN, opts.api_max_connections))
    {
        Some(Ok(server)) => Some(server),
        Some(Err(e)) if std::process::id() == 1 => {
            log::error!(target: "api", "{e}; running without the API");
            None
        }
        Some(Err(e)) => return Err(e.to_string()),
        None => None,
    };

    let mut rt = Runtime::new();
    let mut operators = Operators::new(opts.state.clone());
    for c in controllers::pipeline(&host) {
        rt.register(c).map_err(|e| e.to_string())?;
    }
    for c in kubespan::kernel::controllers(&host, opts.state.clone()) {
        rt.register(c).map_err(|e| e.to_string())?;
    }
    let parsed = net::cmdline::parse(&opts.cmdline);
    for e in &parsed.errors {
        log::error!(target: "cmdline", "{e}");
    }
    for w in &parsed.warnings {
        log::warn!(target: "cmdline", "{w}");
    }
    rt.put_input(SOURCE, Namespace::Runtime, CMDLINE_ID, parsed).map_err(|e| e.to_string())?;

    // The fingerprint of the config text last read, so a watch event that changed nothing
    // (a sibling file, a touch) does not re-apply it.
    let mut config_seen: Option<u64> = None;
    let mut config_watch = match &opts.config {
        Some(path) => {
            reload(&mut rt, path, &mut config_seen);
            match ConfigWatch::new(path) {
                Ok(w) => {
                    reactor.add(w.as_fd(), INOTIFY_TOKEN).map_err(|e| e.to_string())?;
                    Some(w)
                }
                Err(e) => {
                    log::warn!(target: "config", "{e}");
                    None
                }
            }
        }
        None => None,
    };

    let mut kubelet = Service::new("kubelet", RestartPolicy::default());
    let mut node_ip = None;
    let mut desired: Option<Vec<String>> = None;
    let mut network_ready = false;
    let mut orphans_reaped = 0u64;
    let mut stopping: Option<(Signal, Instant)> = None;
    let started = Instant::now();
    let mut settled = false;

    loop {
        let now = Instant::now();
        operators.tick(&mut rt, now);
        // Always one pass: it also releases the timers that are due (that is why the timer
        // fired), then more while controllers keep marking each other dirty.
        let mut reconciles = rt.run(now).reconciles;
        while rt.has_work() {
            reconciles += rt.run(now).reconciles;
        }
        // Operators follow the merged operator specs, links and addresses, which change only
        // through reconciles; what they write goes through the pipeline in this iteration.
        let store_changed = reconciles > 0;
        if stopping.is_none()
            && (store_changed || operators.retry_due(now))
            && operators.sync(&mut rt, now)
        {
            while rt.has_work() {
                reconciles += rt.run(now).reconciles;
            }
        }
        for token in operators.take_new_tokens() {
            if let Some(fd) = operators.fd(token) {
                if let Err(e) = reactor.add(fd, token) {
                    log::warn!(target: "run", "watch operator socket: {e}");
                }
            }
        }
        if !settled && rt.controllers().iter().all(|c| c.last_error.is_none()) {
            settled = true;
            log::info!(target: "run", "settled in {} ms", started.elapsed().as_millis());
            if opts.once {
                return Ok(Ending::Settled);
            }
        } else if reconciles > 0 {
            log::debug!(target: "run", "{reconciles} reconciles");
        }

        // The console's "network ready": addresses, a default route and the /etc files. The
        // hostname is not part of it (maintenance mode has none); the kubelet waits for it too.
        let ready = rt
            .store()
            .get_spec::<NetworkStatus>(Namespace::Network, NETWORK_STATUS_ID)
            .is_some_and(|s| s.address_ready && s.connectivity_ready && s.etc_files_ready);
        if ready != network_ready {
            network_ready = ready;
            log::info!(target: "pid1", "{}", if ready { "network ready" } else { "network not ready" });
        }

        match stopping {
            Some((sig, deadline)) => {
                if kubelet.is_stopped() || now >= deadline {
                    return Ok(Ending::Stopped(sig));
                }
            }
            None => {
                let want = kubelet_command(&rt, &mut node_ip);
                if want != desired {
                    desired = want.clone();
                    kubelet.set_desired(want, now);
                }
            }
        }
        if kubelet.poll(now) {
            for (fd, stream) in kubelet.fds() {
                let token =
                    if stream == Stream::Out { SERVICE_OUT_TOKEN } else { SERVICE_ERR_TOKEN };
                if let Err(e) = reactor.add(fd, token) {
                    log::warn!(target: "pid1", "watch kubelet output: {e}");
                }
            }
        }
        let status = service_status(&kubelet, desired.as_ref());
        if desired.is_some() || kubelet.starts > 0 {
            if let Err(e) = rt.put_input(SOURCE, Namespace::Runtime, "kubelet", status) {
                log::warn!(target: "pid1", "{e}");
            }
        }

        // Every change goes to watchers once; taking them also keeps the journal from growing.
        let changes = rt.take_changes();
        if let Some(api) = &mut api {
            api.after_run(&rt, &changes, &reactor, now);
        }

        let deadline = [
            rt.poll_at(),
            kubelet.poll_at(),
            stopping.map(|(_, d)| d),
            api.as_ref().and_then(Server::poll_at),
            operators.poll_at(),
        ]
        .into_iter()
        .flatten()
        .min();
        reactor.arm(deadline, now).map_err(|e| e.to_string())?;
        let ready = reactor.wait().map_err(|e| e.to_string())?;
        let now = Instant::now();
        for sig in ready.signals {
            match sig {
                Signal::SIGTERM | Signal::SIGINT | Signal::SIGPWR if stopping.is_none() => {
                    log::info!(target: "pid1", "{sig}: stopping services ({} event loop wakeups)", reactor.wakeups);
                    kubelet.shutdown(now);
                    operators.shutdown(&mut rt, now, false);
                    stopping = Some((sig, now + opts.stop_grace));
                }
                Signal::SIGHUP => {
                    if let Some(path) = &opts.config {
                        reload(&mut rt, path, &mut config_seen);
                    }
                }
                Signal::SIGUSR1 => {
                    log::info!(target: "run", "event loop wakeups: {}", reactor.wakeups)
                }
                Signal::SIGCHLD => {
                    let n = reap(&mut kubelet, now);
                    if n > 0 {
                        orphans_reaped += u64::from(n);
                        // The first reap is news; the rest would flood the console.
                        let level = if orphans_reaped == u64::from(n) {
                            log::Level::Info
                        } else {
                            log::Level::Debug
                        };
                        log::log!(target: "pid1", level, "reaped {n} orphaned process(es), {orphans_reaped} so far");
                    }
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
                    let seen = config_watch.as_mut().map_or(Seen::Nothing, ConfigWatch::drain);
                    if let (Seen::File | Seen::Other, Some(path)) = (seen, &opts.config) {
                        if let Some(text) = read_config(path) {
                            let print = crate::config_watch::fingerprint(&text);
                            if seen == Seen::File || config_seen != Some(print) {
                                load_config(&mut rt, path, &text);
                            }
                            config_seen = Some(print);
                        } else {
                            config_seen = None;
                        }
                    }
                }
                SERVICE_OUT_TOKEN => kubelet.drain(Stream::Out),
                SERVICE_ERR_TOKEN => kubelet.drain(Stream::Err),
                t if operators.owns(t) => {
                    operators.ready(t, &mut rt, now);
                }
                t => {
                    if let Some(api) = api.as_mut().filter(|a| a.owns(t)) {
                        let machine = Machine { started, settled };
                        api.ready(t, &mut rt, machine, &reactor, now);
                    }
                }
            }
        }
    }
}
