// SPDX-License-Identifier: Apache-2.0
//! The kubelet's supervision wiring: the command it should run now (from the config and the
//! network's readiness), its health (`machine.kubelet.healthz`, probed on a helper thread),
//! what the machine's stage needs of it (healthy, its release changed), its status as a
//! resource, its output, and reaping children (its own and orphans, PID 1 being everyone's
//! parent).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

use evloop::EventSource;
use net::config::{ArgValue, HealthzTarget, MachineConfig, DEFAULT_HEALTHZ};
use net::controllers::{MACHINE_CONFIG_ID, NETWORK_STATUS_ID};
use net::nodeaddress;
use net::resource::{
    HostnameStatus, Namespace, NetworkStatus, NodeAddress, OperatorSpec, ServiceStatus, TimeStatus,
    HOSTNAME_ID, TIME_STATUS_ID,
};
use nix::errno::Errno;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use runtime::Runtime;

use super::health::Prober;
use crate::lifecycle::KubeletFacts;
use crate::machine::SOURCE;
use crate::supervisor::{RestartPolicy, Service, State, Stream};

/// The key of the kubelet's stdout (see [`evloop::EventSource`]).
pub const KEY_STDOUT: u64 = 0;
/// The key of its stderr.
pub const KEY_STDERR: u64 = 1;
/// The key of the health check's wake-up socket.
pub const KEY_HEALTH: u64 = 2;

/// The environment variable holding `machine.kubelet.image`.
pub const KUBELET_IMAGE_ENV: &str = "KUBELET_IMAGE";

/// The command the kubelet should run now, or why none (not configured, network not ready,
/// the clock not trusted yet).
fn command(
    rt: &Runtime,
    previous_ip: &mut Option<IpAddr>,
    time_released: &mut bool,
) -> Result<Vec<String>, &'static str> {
    let store = rt.store();
    let cfg = store
        .get_spec::<MachineConfig>(Namespace::Config, MACHINE_CONFIG_ID)
        .ok_or("no machine config")?;
    let kubelet = &cfg.machine.kubelet;
    if kubelet.command.is_empty() {
        return Err("not configured");
    }
    // Talos's kubelet waits for time sync (or machine.time.bootTimeout); once released it is
    // never held again, so a later loss of sync does not stop a running kubelet.
    if !*time_released {
        let time = store.get_spec::<TimeStatus>(Namespace::Runtime, TIME_STATUS_ID);
        if !time.is_none_or(TimeStatus::may_start) {
            return Err("waiting for time sync");
        }
        *time_released = true;
    }
    let waiting = "waiting for the network (address, hostname, /etc files)";
    let status =
        store.get_spec::<NetworkStatus>(Namespace::Network, NETWORK_STATUS_ID).ok_or(waiting)?;
    // What the kubelet waits on in Talos: address, hostname and /etc files (docs/talos.md: Statuses
    // and readiness).
    if !(status.address_ready && status.hostname_ready && status.etc_files_ready) {
        return Err(waiting);
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
        crate::nodeip::choose(*previous_ip, default, &list(nodeaddress::CURRENT), subnets, &vips)
            .ok_or("waiting for a node IP (machine.kubelet.nodeIP.validSubnets)")?;
    *previous_ip = Some(ip);
    let host = store.get_spec::<HostnameStatus>(Namespace::Network, HOSTNAME_ID).ok_or(waiting)?;
    // The image is the kubelet's release in Talos; keelson runs a command, which gets it in
    // its environment (a new image is a new command line, so the kubelet restarts).
    let mut cmd: Vec<String> =
        kubelet.image.iter().map(|i| format!("{KUBELET_IMAGE_ENV}={i}")).collect();
    cmd.extend(kubelet.command.iter().cloned());
    cmd.extend(kubelet.extra_args.iter().flat_map(|(k, v)| v.flags(k)));
    cmd.push(format!("--node-ip={ip}"));
    cmd.push(format!("--hostname-override={}", host.hostname));
    Ok(cmd)
}

/// What makes a kubelet change an upgrade: its configured command and flags (the node IP and
/// hostname keelson appends are not the kubelet's version).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Release {
    command: Vec<String>,
    extra_args: BTreeMap<String, ArgValue>,
    image: Option<String>,
}

/// The configured release and health endpoint, if a kubelet is configured.
fn configured(rt: &Runtime) -> Option<(Release, String)> {
    let cfg = rt.store().get_spec::<MachineConfig>(Namespace::Config, MACHINE_CONFIG_ID)?;
    let k = &cfg.machine.kubelet;
    if k.command.is_empty() {
        return None;
    }
    let url = k.healthz.clone().unwrap_or_else(|| DEFAULT_HEALTHZ.to_owned());
    let release = Release {
        command: k.command.clone(),
        extra_args: k.extra_args.clone(),
        image: k.image.clone(),
    };
    Some((release, url))
}

fn status(s: &Service, command: Option<&Vec<String>>, health: &Health) -> ServiceStatus {
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
        healthy: health.healthy,
        health_reason: if health.healthy || pid == 0 {
            String::new()
        } else {
            health.reason.clone()
        },
        last_exit: s.last_exit().unwrap_or_default().to_owned(),
        command: command.cloned().unwrap_or_default(),
    }
}

/// The first probe of a new process, this long after it started.
const FIRST_PROBE: Duration = Duration::from_millis(100);
/// Probes of a healthy process, and of one that did not become healthy in a minute.
const PROBE_STEADY: Duration = Duration::from_secs(5);

/// The time to the next probe: often while a new process starts (it is what `running` waits
/// for), then every few seconds.
fn probe_interval(healthy: bool, age: Duration) -> Duration {
    match age.as_secs() {
        _ if healthy => PROBE_STEADY,
        0..10 => Duration::from_millis(250),
        10..60 => Duration::from_secs(1),
        _ => PROBE_STEADY,
    }
}

/// The health of the running process.
#[derive(Debug, Default)]
struct Health {
    /// The start (generation) this is about.
    generation: u32,
    /// When that process started being probed.
    since: Option<Instant>,
    /// Its last probe answered 200.
    healthy: bool,
    /// Why not healthy.
    reason: String,
    /// The next probe.
    next: Option<Instant>,
    /// The release that was healthy last: a different one configured is an upgrade.
    healthy_release: Option<Release>,
}

/// The kubelet service and what the node decided for it.
pub struct Kubelet {
    service: Service,
    /// The node IP chosen last, kept while it stays valid.
    node_ip: Option<IpAddr>,
    /// The command it should run (`None`: stopped).
    desired: Option<Vec<String>>,
    /// The clock was trusted (synced, sync disabled, or the boot timeout passed) once.
    time_released: bool,
    /// Orphans reaped so far.
    orphans_reaped: u64,
    /// Why nothing is desired (`not configured`, `waiting for time sync`...).
    why_not: &'static str,
    /// The configured release and health URL.
    configured: Option<(Release, String)>,
    /// The health check and what it found.
    health: Health,
    prober: Prober,
    /// Keys of fds opened since [`EventSource::take_new_keys`] was last called.
    new_keys: Vec<u64>,
}

impl Kubelet {
    /// Not running, nothing desired yet.
    pub fn new() -> Self {
        Self {
            service: Service::new("kubelet", RestartPolicy::default()),
            node_ip: None,
            desired: None,
            time_released: false,
            orphans_reaped: 0,
            why_not: "not configured",
            configured: None,
            health: Health::default(),
            prober: Prober::default(),
            new_keys: Vec::new(),
        }
    }

    /// Follow what the runtime says it should run.
    pub fn follow(&mut self, rt: &Runtime, now: Instant) {
        self.configured = configured(rt);
        let want = match command(rt, &mut self.node_ip, &mut self.time_released) {
            Ok(cmd) => Some(cmd),
            Err(why) => {
                self.why_not = why;
                None
            }
        };
        if want != self.desired {
            self.desired = want.clone();
            self.service.set_desired(want, now);
        }
    }

    /// Start, restart or kill as due, and probe its health when due. The output pipes of a
    /// new process and the health check's wake-up socket (when its thread started) are new
    /// keys for the loop to watch.
    pub fn poll(&mut self, now: Instant) {
        if self.service.poll(now) {
            for (_, stream) in self.service.fds() {
                self.new_keys.push(if stream == Stream::Out { KEY_STDOUT } else { KEY_STDERR });
            }
        }
        if self.probe(now) && self.prober.wake_fd().is_some() {
            self.new_keys.push(KEY_HEALTH);
        }
    }

    /// Send a health probe when one is due; true when the helper thread was just started.
    fn probe(&mut self, now: Instant) -> bool {
        let h = &mut self.health;
        // Only the process of the configured command is probed: during an upgrade the old
        // one may still answer until it exits.
        let current = match (self.service.state(), self.service.running_command()) {
            (State::Running(_), Some(cmd)) => self.service.desired() == Some(cmd),
            _ => false,
        };
        if !current {
            h.healthy = false;
            h.since = None;
            h.next = None;
            h.reason = match (self.service.state(), self.service.last_exit()) {
                (State::Stopping(_), _) => "stopping the previous kubelet".into(),
                (State::Waiting(_), Some(exit)) => match self.service.backoff() {
                    Some(d) => format!(
                        "{exit}; restarting after a {d:?} backoff (start {})",
                        self.service.starts + 1
                    ),
                    None => format!("{exit}; restarting"),
                },
                (State::Waiting(_), None) => "starting".into(),
                _ => self.why_not.into(),
            };
            return false;
        }
        if h.generation != self.service.starts || h.since.is_none() {
            h.generation = self.service.starts;
            h.since = Some(now);
            h.healthy = false;
            h.reason = "started, health not checked yet".into();
            h.next = Some(now + FIRST_PROBE);
        }
        let Some((_, url)) = &self.configured else { return false };
        if self.prober.in_flight || h.next.is_none_or(|t| t > now) {
            return false;
        }
        let Ok(target) = HealthzTarget::parse(url) else {
            // Validated with the config; kept from looping if it ever is not.
            h.reason = format!("invalid health URL {url:?}");
            h.next = Some(now + PROBE_STEADY);
            return false;
        };
        let fresh = self.prober.wake_fd().is_none();
        let age = h.since.map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
        h.next = Some(now + probe_interval(h.healthy, age));
        match self.prober.send(h.generation, target) {
            Ok(()) => fresh,
            Err(e) => {
                h.reason = e;
                false
            }
        }
    }

    /// Health answers are in (the wake-up socket is readable).
    pub fn health_ready(&mut self) {
        for o in self.prober.take() {
            let h = &mut self.health;
            if o.generation != h.generation || h.since.is_none() {
                continue;
            }
            let was = h.healthy;
            h.healthy = o.result.is_ok();
            match o.result {
                Ok(()) => {
                    h.reason.clear();
                    h.healthy_release = self.configured.as_ref().map(|(r, _)| r.clone());
                    if !was {
                        log::info!(target: "pid1", "kubelet healthy (start {})", h.generation);
                    }
                }
                Err(e) => {
                    if was {
                        log::warn!(target: "pid1", "kubelet health check failed: {e}");
                    }
                    h.reason = format!("health check: {e}");
                }
            }
        }
    }

    /// What the machine's stage needs to know.
    pub fn facts(&self) -> KubeletFacts {
        let h = &self.health;
        let Some((release, _)) = &self.configured else { return KubeletFacts::default() };
        KubeletFacts {
            configured: true,
            healthy: h.healthy,
            changed: h.healthy_release.as_ref().is_some_and(|r| r != release),
            reason: if h.healthy { String::new() } else { h.reason.clone() },
        }
    }

    /// Publish its status once there is something to say.
    pub fn publish(&self, rt: &mut Runtime) {
        let status = status(&self.service, self.desired.as_ref(), &self.health);
        if self.desired.is_some() || self.service.starts > 0 {
            if let Err(e) = rt.put_input(SOURCE, Namespace::Runtime, "kubelet", status) {
                log::warn!(target: "pid1", "{e}");
            }
        }
    }

    /// Restart the kubelet now (the API's `ServiceRestart`); false when none is configured.
    pub fn restart(&mut self, now: Instant) -> bool {
        self.service.restart(now)
    }

    /// `ServiceStart` / `ServiceStop`; false when it is not configured here.
    pub fn api(&mut self, op: crate::supervisor::Op, now: Instant) -> bool {
        self.service.api(op, now)
    }

    /// Begin stopping it.
    pub fn shutdown(&mut self, now: Instant) {
        self.service.shutdown(now);
    }

    /// It has stopped.
    pub fn is_stopped(&self) -> bool {
        self.service.is_stopped()
    }

    /// When it next needs attention.
    pub fn poll_at(&self) -> Option<Instant> {
        let probe = self.health.next.filter(|_| !self.prober.in_flight);
        [self.service.poll_at(), probe].into_iter().flatten().min()
    }

    /// Forward what it wrote on `stream` to the log.
    pub fn drain(&mut self, stream: Stream) {
        self.service.drain(stream);
    }

    /// SIGCHLD: reap every exited child, telling the kubelet's service and `others` (etcd,
    /// the tenant agent) about their own; log orphans.
    pub fn reap(&mut self, others: &mut [&mut Service], now: Instant) {
        let n = reap(&mut self.service, others, now);
        if n > 0 {
            self.orphans_reaped += u64::from(n);
            // The first reap is news; the rest would flood the console.
            let level = if self.orphans_reaped == u64::from(n) {
                log::Level::Info
            } else {
                log::Level::Debug
            };
            log::log!(target: "pid1", level, "reaped {n} orphaned process(es), {} so far", self.orphans_reaped);
        }
    }
}

/// Reap every exited child; tell the supervisor about its own. Returns the orphans reaped.
fn reap(kubelet: &mut Service, others: &mut [&mut Service], now: Instant) -> u32 {
    // Whether one of the services owned `pid` (each is told until one claims it).
    let mut claim = |pid: Pid, how: &str| {
        kubelet.exited(pid, how, now) || others.iter_mut().any(|s| s.exited(pid, how, now))
    };
    let mut orphans = 0;
    loop {
        match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, code)) => {
                if !claim(pid, &format!("exited with status {code}")) {
                    orphans += 1;
                }
            }
            Ok(WaitStatus::Signaled(pid, sig, _)) => {
                if !claim(pid, &format!("was killed by {sig}")) {
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

/// The kubelet's output pipes and its health check's wake-up socket.
impl EventSource<Runtime> for Kubelet {
    fn take_new_keys(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.new_keys)
    }

    fn fd(&self, key: u64) -> Option<BorrowedFd<'_>> {
        let stream = match key {
            KEY_HEALTH => return self.prober.wake_fd(),
            KEY_STDOUT => Stream::Out,
            KEY_STDERR => Stream::Err,
            _ => return None,
        };
        self.service.fds().into_iter().find(|(_, s)| *s == stream).map(|(fd, _)| fd)
    }

    fn ready(&mut self, key: u64, _rt: &mut Runtime, _now: Instant) {
        match key {
            KEY_STDOUT => self.drain(Stream::Out),
            KEY_STDERR => self.drain(Stream::Err),
            KEY_HEALTH => self.health_ready(),
            _ => {}
        }
    }

    fn poll_at(&self) -> Option<Instant> {
        Kubelet::poll_at(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_often_while_starting_then_every_few_seconds() {
        let at = |healthy, secs| probe_interval(healthy, Duration::from_secs(secs));
        assert_eq!(at(false, 0), Duration::from_millis(250));
        assert_eq!(at(false, 9), Duration::from_millis(250));
        assert_eq!(at(false, 10), Duration::from_secs(1));
        assert_eq!(at(false, 60), PROBE_STEADY);
        assert_eq!(at(true, 0), PROBE_STEADY);
    }
}
