// SPDX-License-Identifier: Apache-2.0
//! The node's event loop: one iteration reconciles (the runtime never blocks), decides what
//! the kubelet should run, hands store changes to the API, arms the timer for the earliest
//! deadline and sleeps in epoll; then it dispatches signals (stop, reload, reap) and each
//! ready source by the [`Source`] its token was handed to.

use std::time::{Duration, Instant};

use evloop::{EventSource, Tag, Tokens};

use net::controllers::NETWORK_STATUS_ID;
use net::operator::Operators;
use net::resource::{Namespace, NetworkStatus};
use nix::sys::signal::Signal;
use runtime::Runtime;
use timesync::TimeSync;

use super::api::Api;
use super::config::ConfigInput;
use super::config_url::ConfigUrl;
use super::discovery::Discovery;
use super::etcd::Etcd;
use super::kubelet::Kubelet;
use super::lifecycle::Lifecycle;
use super::netlink::Netlink;
use crate::machine::Machine;
use crate::pid1::loader::Request;
use crate::pid1::uevent::Hotplug;
use crate::reactor::{Reactor, ReactorError};

/// The sources the node registers with the reactor. Each is handed a [`Tag`] by the loop's
/// [`Tokens`]; a source numbers its own fds under it (keys), so no numbers are picked by hand
/// and a token no source was given is ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The rtnetlink watcher.
    Netlink,
    /// The config file's inotify watch.
    Config,
    /// The kubelet's stdout and stderr, and its health check's answers.
    Kubelet,
    /// etcd's stdout and stderr, and its health check's answers.
    Etcd,
    /// The config fetch's reports.
    ConfigUrl,
    /// The discovery client's reports.
    Discovery,
    /// NTP sockets and the NTS key exchanges' bell.
    Time,
    /// DHCP and the other operators' sockets.
    Operators,
    /// The API's listeners and connections.
    Api,
    /// The metrics listener and its connections.
    Metrics,
    /// The tenant networks' status file's watch.
    Tenant,
    /// The tenant-network agent's stdout and stderr.
    TenantAgent,
}

/// The tag of every source, handed out once at start.
#[derive(Debug, Clone, Copy)]
pub struct Tags {
    /// See [`Source::Netlink`].
    pub netlink: Tag,
    /// See [`Source::Config`].
    pub config: Tag,
    /// See [`Source::Kubelet`].
    pub kubelet: Tag,
    /// See [`Source::Etcd`].
    pub etcd: Tag,
    /// See [`Source::ConfigUrl`].
    pub config_url: Tag,
    /// See [`Source::Discovery`].
    pub discovery: Tag,
    /// See [`Source::Time`].
    pub time: Tag,
    /// See [`Source::Operators`].
    pub operators: Tag,
    /// See [`Source::Api`].
    pub api: Tag,
    /// See [`Source::Metrics`].
    pub metrics: Tag,
    /// See [`Source::Tenant`].
    pub tenant: Tag,
    /// See [`Source::TenantAgent`].
    pub tenant_agent: Tag,
}

impl Tags {
    /// A tag for each source from `tokens`.
    pub fn new(tokens: &mut Tokens<Source>) -> Result<Self, evloop::Exhausted> {
        Ok(Self {
            netlink: tokens.tag(Source::Netlink)?,
            config: tokens.tag(Source::Config)?,
            kubelet: tokens.tag(Source::Kubelet)?,
            etcd: tokens.tag(Source::Etcd)?,
            config_url: tokens.tag(Source::ConfigUrl)?,
            discovery: tokens.tag(Source::Discovery)?,
            time: tokens.tag(Source::Time)?,
            operators: tokens.tag(Source::Operators)?,
            api: tokens.tag(Source::Api)?,
            metrics: tokens.tag(Source::Metrics)?,
            tenant: tokens.tag(Source::Tenant)?,
            tenant_agent: tokens.tag(Source::TenantAgent)?,
        })
    }

    /// The tag of `source`.
    pub fn of(&self, source: Source) -> Tag {
        match source {
            Source::Netlink => self.netlink,
            Source::Config => self.config,
            Source::Kubelet => self.kubelet,
            Source::Etcd => self.etcd,
            Source::ConfigUrl => self.config_url,
            Source::Discovery => self.discovery,
            Source::Time => self.time,
            Source::Operators => self.operators,
            Source::Api => self.api,
            Source::Metrics => self.metrics,
            Source::Tenant => self.tenant,
            Source::TenantAgent => self.tenant_agent,
        }
    }
}

/// Watch the fds `source` opened since the last call, as `tag`'s tokens.
fn watch_new(reactor: &Reactor, tag: Tag, name: Source, source: &mut dyn EventSource<Runtime>) {
    for key in source.take_new_keys() {
        if let Some(fd) = source.fd(key) {
            if let Err(e) = reactor.add(fd, tag.token(key)) {
                log::warn!(target: "run", "watch {name:?} fd {key}: {e}");
            }
        }
    }
}

/// Why the loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// SIGTERM, SIGINT (ctrl-alt-del for PID 1) or SIGPWR, after services stopped.
    Stopped(Signal),
    /// `--once` and everything applied.
    Settled,
    /// An API client asked for a reboot, after services stopped.
    Reboot,
    /// An API client asked for a shutdown, after services stopped.
    Shutdown,
    /// An API client asked for a reset, after services stopped: wipe, then reboot or power
    /// off.
    Reset(crate::machine::Reset),
    /// An upgrade's kernel is loaded, after services stopped: boot it.
    Kexec,
}

/// How long services get in a reset that is not graceful.
const UNGRACEFUL: Duration = Duration::from_secs(1);

/// Everything the loop drives.
pub struct EventLoop {
    /// epoll, the signalfd and the timer.
    pub reactor: Reactor,
    /// Whose each epoll token is.
    pub tokens: Tokens<Source>,
    /// Each source's tag.
    pub tags: Tags,
    /// The controllers and their store.
    pub rt: Runtime,
    /// DHCP and the other operators.
    pub operators: Operators,
    /// Kernel network events.
    pub netlink: Netlink,
    /// The local API, if served.
    pub api: Api,
    /// The config file, if given.
    pub config: Option<ConfigInput>,
    /// The config's URL, while it is fetched.
    pub config_url: Option<ConfigUrl>,
    /// Where a fetched config is kept (the node's config file).
    pub config_path: Option<std::path::PathBuf>,
    /// The kubelet.
    pub kubelet: Kubelet,
    /// etcd (control planes).
    pub etcd: Etcd,
    /// The shared VIPs' workers.
    pub vips: super::vips::Vips,
    /// etcd was told to stop (after the VIPs let go).
    pub etcd_stopping: bool,
    /// NTP.
    pub time: TimeSync,
    /// Stop once settled (`run --once`).
    pub once: bool,
    /// Longest wait for services to stop at shutdown.
    pub stop_grace: Duration,
    /// Drivers for devices that appear (PID 1).
    pub hotplug: Option<Hotplug>,
    /// The machine config version whose feature modules were last asked for.
    pub features_for: Option<u64>,
    /// The machine's stage.
    pub lifecycle: Lifecycle,
    /// The discovery service client.
    pub discovery: Discovery,
    /// The Prometheus metrics listener.
    pub metrics: super::metrics::Metrics,
    /// The tenant networks the node round realised.
    pub tenant: super::tenant_status::TenantStatus,
    /// The tenant-network agent (`machine.tenantNetworks`).
    pub tenant_agent: super::tenant_agent::TenantAgent,
}

/// What the loop keeps between iterations.
struct Progress {
    started: Instant,
    settled: bool,
    network_ready: bool,
    /// The stop signal and when to stop waiting for services.
    stopping: Option<(Signal, Instant)>,
    /// What an API client asked for, when it was the API that stopped the node.
    requested: Option<crate::machine::Power>,
}

impl EventLoop {
    /// A new machine config: ask the loader threads for the feature modules it needs, before
    /// the reconcile that creates its links, so no netlink call waits on a module load.
    fn request_feature_modules(&mut self) {
        let Some(hotplug) = &self.hotplug else { return };
        let store = self.rt.store();
        let Some(res) = store.get(
            Namespace::Config,
            net::resource::Kind::MachineConfig,
            net::controllers::MACHINE_CONFIG_ID,
        ) else {
            return;
        };
        if self.features_for == Some(res.metadata.version) {
            return;
        }
        self.features_for = Some(res.metadata.version);
        let Some(cfg) = res.spec_as::<net::config::MachineConfig>() else { return };
        let names = crate::pid1::features::for_config(cfg);
        if !names.is_empty() {
            log::info!(target: "pid1", "feature modules for the config: {}", names.join(" "));
            hotplug.loader.send(Request::AfterColdplug(names, "config"));
        }
    }

    /// Run until a stop signal, or with `once` until settled.
    pub fn run(mut self) -> Result<Ending, ReactorError> {
        let mut p = Progress {
            started: Instant::now(),
            settled: false,
            network_ready: false,
            stopping: None,
            requested: None,
        };
        loop {
            let now = Instant::now();
            self.api.before_run(&mut self.rt, now);
            // An upgrade finishes on its worker: its kexec is asked for here, not by a call.
            if let Some(what) = self.api.take_power() {
                self.power(&mut p, what, now);
            }
            self.discovery.tick(&mut self.rt, now);
            self.tenant.tick(&mut self.rt, now);
            self.netlink.tick(&mut self.rt, now);
            self.request_feature_modules();
            let reconciles = self.reconcile(&p, now);
            // What the node publishes changes only through reconciles (and a new client
            // publishes as its handle arrives, in `ready`).
            if reconciles > 0 {
                self.discovery.publish(&self.rt);
            }
            if self.settle(&mut p, reconciles) && self.once {
                return Ok(Ending::Settled);
            }
            self.note_network_ready(&mut p);
            if let Some(fetch) = &mut self.config_url {
                fetch.tick(&self.rt, p.network_ready, now);
            }
            let ending = self.supervise(&p, now);
            let going = p.stopping.map(|_| match p.requested {
                Some(what) if what.comes_back() => crate::lifecycle::Going::Reboot,
                _ => crate::lifecycle::Going::Down,
            });
            self.lifecycle.update(&mut self.rt, &self.kubelet, going);
            if let Some(ending) = ending {
                // The kubelet is stopped: make what the node keeps durable before the end.
                crate::machine::flush_state();
                log::info!(target: "pid1", "services stopped, state flushed");
                return Ok(ending);
            }
            // Every change goes to watchers once; taking them also keeps the journal from
            // growing.
            let changes = self.rt.take_changes();
            self.api.after_run(&self.rt, &changes, &self.reactor, now);
            self.metrics.follow(&self.rt, now);
            self.metrics.note_api_connections(self.api.open_connections());

            let deadline = self.watch_and_deadline(&p);
            self.reactor.arm(deadline, now)?;
            let ready = self.reactor.wait()?;
            let now = Instant::now();
            for sig in ready.signals {
                self.signal(&mut p, sig, now);
            }
            for token in ready.tokens {
                self.dispatch(&mut p, token, now);
            }
        }
    }

    /// Watch what every source opened this iteration; the earliest deadline of them all
    /// (the runtime's, the sources', the stop grace's).
    fn watch_and_deadline(&mut self, p: &Progress) -> Option<Instant> {
        let sources: [(Source, &mut dyn EventSource<Runtime>); 10] = [
            (Source::Netlink, &mut self.netlink),
            (Source::Config, &mut self.config),
            (Source::Kubelet, &mut self.kubelet),
            (Source::Etcd, &mut self.etcd),
            (Source::Discovery, &mut self.discovery),
            (Source::Time, &mut self.time),
            (Source::Operators, &mut self.operators),
            (Source::Metrics, &mut self.metrics),
            (Source::Tenant, &mut self.tenant),
            (Source::TenantAgent, &mut self.tenant_agent),
        ];
        let mut deadline = evloop::earliest([
            self.vips.poll_at(Instant::now()),
            self.rt.poll_at(),
            p.stopping.map(|(_, d)| d),
            self.api.poll_at(),
            self.config_url.as_ref().and_then(ConfigUrl::poll_at),
        ]);
        for (name, source) in sources {
            watch_new(&self.reactor, self.tags.of(name), name, source);
            deadline = evloop::earliest([deadline, source.poll_at()]);
        }
        // The metrics connections switch between waiting to read and waiting to write.
        for (key, write) in self.metrics.take_interest() {
            if let Some(fd) = self.metrics.fd(key) {
                let token = self.tags.metrics.token(key);
                if let Err(e) = self.reactor.interest(fd, token, !write, write) {
                    log::warn!(target: "metrics", "epoll interest for connection {key}: {e}");
                }
            }
        }
        deadline
    }

    /// Run the operators and the runtime until nothing is dirty; the reconciles it took.
    fn reconcile(&mut self, p: &Progress, now: Instant) -> usize {
        let (rt, operators) = (&mut self.rt, &mut self.operators);
        operators.tick(rt, now);
        // Always one pass: it also releases the timers that are due (that is why the timer
        // fired), then more while controllers keep marking each other dirty.
        let mut reconciles = rt.run(now).reconciles;
        while rt.has_work() {
            reconciles += rt.run(now).reconciles;
        }
        // Operators follow the merged operator specs, links and addresses, which change only
        // through reconciles; what they write goes through the pipeline in this iteration.
        let store_changed = reconciles > 0;
        if p.stopping.is_none()
            && (store_changed || operators.retry_due(now))
            && operators.sync(rt, now)
        {
            while rt.has_work() {
                reconciles += rt.run(now).reconciles;
            }
        }
        if self.time.tick(rt, now) {
            while rt.has_work() {
                reconciles += rt.run(now).reconciles;
            }
        }
        reconciles
    }

    /// True the first time every controller has run without error.
    fn settle(&self, p: &mut Progress, reconciles: usize) -> bool {
        if !p.settled && self.rt.controllers().iter().all(|c| c.last_error.is_none()) {
            p.settled = true;
            log::info!(target: "run", "settled in {} ms", p.started.elapsed().as_millis());
            return true;
        }
        if reconciles > 0 {
            log::debug!(target: "run", "{reconciles} reconciles");
        }
        false
    }

    /// The console's "network ready": addresses, a default route and the /etc files. The
    /// hostname is not part of it (maintenance mode has none); the kubelet waits for it too.
    fn note_network_ready(&self, p: &mut Progress) {
        let ready = self
            .rt
            .store()
            .get_spec::<NetworkStatus>(Namespace::Network, NETWORK_STATUS_ID)
            .is_some_and(|s| s.address_ready && s.connectivity_ready && s.etc_files_ready);
        if ready != p.network_ready {
            p.network_ready = ready;
            log::info!(target: "pid1", "{}", if ready { "network ready" } else { "network not ready" });
        }
    }

    /// Keep the kubelet as the runtime wants it; the ending once stopping is done.
    fn supervise(&mut self, p: &Progress, now: Instant) -> Option<Ending> {
        match p.stopping {
            Some((sig, deadline)) => {
                // The VIPs hand over while etcd still runs; a graceful reset then leaves etcd
                // (Talos's `leave etcd`); then etcd stops.
                if !self.etcd_stopping && (self.vips.is_stopped(&mut self.rt) || now >= deadline) {
                    let leaving =
                        matches!(p.requested, Some(crate::machine::Power::Reset(r)) if r.graceful);
                    if leaving {
                        self.etcd.leave(now);
                    }
                    if !leaving || self.etcd.has_left(now) || now >= deadline {
                        self.etcd.shutdown(now);
                        self.etcd_stopping = true;
                    }
                }
                let stopped = self.kubelet.is_stopped()
                    && self.etcd.is_stopped()
                    && self.tenant_agent.is_stopped();
                if stopped || now >= deadline {
                    return Some(match p.requested {
                        Some(crate::machine::Power::Reboot) => Ending::Reboot,
                        Some(crate::machine::Power::Shutdown) => Ending::Shutdown,
                        Some(crate::machine::Power::Reset(r)) => Ending::Reset(r),
                        Some(crate::machine::Power::Kexec) => Ending::Kexec,
                        None => Ending::Stopped(sig),
                    });
                }
            }
            None => {
                self.kubelet.follow(&self.rt, now);
                self.etcd.follow(&self.rt, now);
                self.tenant_agent.follow(&self.rt, now);
                let hostname = self
                    .rt
                    .store()
                    .get_spec::<net::resource::HostnameStatus>(
                        net::resource::Namespace::Network,
                        net::resource::HOSTNAME_ID,
                    )
                    .map(|h| h.hostname.clone())
                    .unwrap_or_default();
                let setup = self.etcd.vip_setup(&hostname);
                let control_plane = self.etcd.is_control_plane();
                self.vips.sync(&mut self.rt, setup, control_plane);
            }
        }
        self.kubelet.poll(now);
        self.kubelet.publish(&mut self.rt);
        self.etcd.poll(now);
        self.etcd.publish(&mut self.rt);
        self.tenant_agent.poll(now);
        self.tenant_agent.publish(&mut self.rt);
        None
    }

    fn signal(&mut self, p: &mut Progress, sig: Signal, now: Instant) {
        match sig {
            Signal::SIGTERM | Signal::SIGINT | Signal::SIGPWR if p.stopping.is_none() => {
                log::info!(target: "pid1", "{sig}: stopping services ({} event loop wakeups)", self.reactor.wakeups);
                self.kubelet.shutdown(now);
                self.tenant_agent.shutdown(now);
                self.vips.shutdown();
                self.operators.shutdown(&mut self.rt, now, false);
                p.stopping = Some((sig, now + self.stop_grace));
            }
            Signal::SIGHUP => {
                if let Some(config) = &mut self.config {
                    config.reload(&mut self.rt);
                }
            }
            Signal::SIGUSR1 => {
                log::info!(target: "run", "event loop wakeups: {}", self.reactor.wakeups)
            }
            Signal::SIGCHLD => {
                let others = &mut [self.etcd.service_mut(), self.tenant_agent.service_mut()];
                self.kubelet.reap(others, now)
            }
            _ => {}
        }
    }

    /// An API client asked to reboot or shut down: stop services as for a signal.
    fn power(&mut self, p: &mut Progress, what: crate::machine::Power, now: Instant) {
        if p.stopping.is_some() {
            return;
        }
        log::info!(target: "pid1", "{what:?} requested through the API: stopping services");
        self.kubelet.shutdown(now);
        self.tenant_agent.shutdown(now);
        self.vips.shutdown();
        self.operators.shutdown(&mut self.rt, now, false);
        // A reset that is not graceful does not wait for services (what they leave is wiped);
        // the second lets the call's answer out first.
        let grace = match what {
            crate::machine::Power::Reset(r) if !r.graceful => UNGRACEFUL.min(self.stop_grace),
            _ => self.stop_grace,
        };
        p.stopping = Some((Signal::SIGTERM, now + grace));
        p.requested = Some(what);
    }

    /// A fetch attempt reported: a valid config is kept in the config file and followed from
    /// there, exactly as a config file given at start.
    fn config_fetched(&mut self, now: Instant) {
        let Some(fetch) = &mut self.config_url else {
            return;
        };
        let text = fetch.ready(&self.rt, now);
        if fetch.done() {
            self.config_url = None;
        }
        let Some(text) = text else {
            return;
        };
        let Some(path) = self.config_path.clone() else {
            super::config::load(&mut self.rt, std::path::Path::new("fetched config"), &text);
            return;
        };
        match crate::api::trial::write_back(&path, &text) {
            Ok(()) => {
                log::info!(target: "config", "the fetched config is kept in {}", path.display());
                match ConfigInput::start(
                    &path,
                    &mut self.rt,
                    &self.reactor,
                    self.tags.config.token(0),
                ) {
                    Ok(input) => self.config = Some(input),
                    Err(e) => log::warn!(target: "config", "{e}"),
                }
            }
            Err(e) => {
                log::error!(target: "config", "the fetched config could not be kept: {e}; applied without a file");
                super::config::load(&mut self.rt, &path, &text);
            }
        }
    }

    fn dispatch(&mut self, p: &mut Progress, token: u64, now: Instant) {
        let Some((source, key)) = self.tokens.owner(token) else {
            // Nothing registers an fd without a tag; an unknown token is nobody's to handle.
            log::debug!(target: "run", "epoll token {token:#x} belongs to no source; ignored");
            return;
        };
        let ready: &mut dyn EventSource<Runtime> = match source {
            Source::Netlink => &mut self.netlink,
            Source::Config => &mut self.config,
            Source::Kubelet => &mut self.kubelet,
            Source::Etcd => &mut self.etcd,
            Source::Discovery => &mut self.discovery,
            Source::Time => &mut self.time,
            Source::Operators => &mut self.operators,
            Source::Metrics => &mut self.metrics,
            Source::Tenant => &mut self.tenant,
            Source::TenantAgent => &mut self.tenant_agent,
            // These two need more of the loop than the runtime: a fetched config is written
            // back and followed; the API reads the machine and may stop it.
            Source::ConfigUrl => return self.config_fetched(now),
            Source::Api => {
                let machine = Machine { started: p.started, settled: p.settled };
                if !self.api.ready(token, &mut self.rt, machine, &self.reactor, now) {
                    log::debug!(target: "run", "epoll token {token:#x}: no such API socket; ignored");
                }
                if let Some(what) = self.api.take_power() {
                    self.power(p, what, now);
                }
                if self.api.take_bootstrap() {
                    self.etcd.bootstrap_requested();
                }
                if self.api.take_etcd_stop() {
                    self.etcd.left_cluster();
                }
                if let Some(id) = self.api.take_restart() {
                    // A restart runs a service a `ServiceStop` held stopped, as in Talos.
                    let start = crate::supervisor::Op::Start;
                    match id.as_str() {
                        "kubelet" => drop(self.kubelet.api(start, now)),
                        "etcd" => drop(self.etcd.api(start, now)),
                        super::tenant_agent::NAME => drop(self.tenant_agent.api(start, now)),
                        _ => {}
                    }
                    if id == "kubelet" && !self.kubelet.restart(now) {
                        log::warn!(target: "run", "kubelet restart asked for, but no kubelet is configured");
                    }
                    if id == "etcd" && !self.etcd.restart(now) {
                        log::warn!(target: "run", "etcd restart asked for, but etcd is not running here");
                    }
                    if id == super::tenant_agent::NAME && !self.tenant_agent.restart(now) {
                        log::warn!(target: "run", "tenant-agent restart asked for, but it is not configured here");
                    }
                }
                if let Some((id, op)) = self.api.take_service_op() {
                    let done = match id.as_str() {
                        "kubelet" => self.kubelet.api(op, now),
                        "etcd" => self.etcd.api(op, now),
                        super::tenant_agent::NAME => self.tenant_agent.api(op, now),
                        _ => false,
                    };
                    if !done {
                        log::warn!(target: "run", "{op:?} of {id} asked for, but it is not configured here");
                    }
                }
                return;
            }
        };
        ready.ready(key, &mut self.rt, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_source_has_its_own_tag_and_the_reactors_tokens_are_nobodys() {
        let mut tokens = Tokens::new();
        let tags = Tags::new(&mut tokens).unwrap_or_else(|e| unreachable!("{e}"));
        let all = [
            (tags.netlink, Source::Netlink),
            (tags.config, Source::Config),
            (tags.kubelet, Source::Kubelet),
            (tags.etcd, Source::Etcd),
            (tags.config_url, Source::ConfigUrl),
            (tags.discovery, Source::Discovery),
            (tags.time, Source::Time),
            (tags.operators, Source::Operators),
            (tags.api, Source::Api),
            (tags.metrics, Source::Metrics),
            (tags.tenant, Source::Tenant),
            (tags.tenant_agent, Source::TenantAgent),
        ];
        for (i, (tag, source)) in all.iter().enumerate() {
            assert_eq!(tags.of(*source), *tag);
            for key in [0, 1, 40] {
                assert_eq!(tokens.owner(tag.token(key)), Some((*source, key)));
            }
            for (other, _) in &all[i + 1..] {
                assert_ne!(tag, other);
            }
        }
        for reactor_token in [crate::reactor::SIGNAL_TOKEN, crate::reactor::TIMER_TOKEN] {
            assert_eq!(tokens.owner(reactor_token), None);
        }
    }
}
