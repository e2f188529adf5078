// SPDX-License-Identifier: Apache-2.0
//! The kubelet's supervision wiring: the command it should run now (from the config and the
//! network's readiness), its status as a resource, its output, and reaping children
//! (its own and orphans, PID 1 being everyone's parent).

use std::net::IpAddr;
use std::os::fd::BorrowedFd;
use std::time::Instant;

use net::config::MachineConfig;
use net::controllers::{MACHINE_CONFIG_ID, NETWORK_STATUS_ID};
use net::nodeaddress;
use net::resource::{
    HostnameStatus, Namespace, NetworkStatus, NodeAddress, OperatorSpec, ServiceStatus, TimeStatus,
    HOSTNAME_ID, TIME_STATUS_ID,
};
use net::runtime::Runtime;
use nix::errno::Errno;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use crate::machine::SOURCE;
use crate::supervisor::{RestartPolicy, Service, State, Stream};

/// The command the kubelet should run now, or `None` (not configured, network not ready, or
/// the clock not trusted yet).
fn command(
    rt: &Runtime,
    previous_ip: &mut Option<IpAddr>,
    time_released: &mut bool,
) -> Option<Vec<String>> {
    let store = rt.store();
    let cfg = store.get_spec::<MachineConfig>(Namespace::Config, MACHINE_CONFIG_ID)?;
    let kubelet = &cfg.machine.kubelet;
    if kubelet.command.is_empty() {
        return None;
    }
    // Talos's kubelet waits for time sync (or machine.time.bootTimeout); once released it is
    // never held again, so a later loss of sync does not stop a running kubelet.
    if !*time_released {
        let time = store.get_spec::<TimeStatus>(Namespace::Runtime, TIME_STATUS_ID);
        if !time.is_none_or(TimeStatus::may_start) {
            return None;
        }
        *time_released = true;
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

fn status(s: &Service, command: Option<&Vec<String>>) -> ServiceStatus {
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
        }
    }

    /// Follow what the runtime says it should run.
    pub fn follow(&mut self, rt: &Runtime, now: Instant) {
        let want = command(rt, &mut self.node_ip, &mut self.time_released);
        if want != self.desired {
            self.desired = want.clone();
            self.service.set_desired(want, now);
        }
    }

    /// Start, restart or kill as due; the output pipes it opened, to be watched.
    pub fn poll(&mut self, now: Instant) -> Vec<(BorrowedFd<'_>, Stream)> {
        if self.service.poll(now) {
            self.service.fds()
        } else {
            Vec::new()
        }
    }

    /// Publish its status once there is something to say.
    pub fn publish(&self, rt: &mut Runtime) {
        let status = status(&self.service, self.desired.as_ref());
        if self.desired.is_some() || self.service.starts > 0 {
            if let Err(e) = rt.put_input(SOURCE, Namespace::Runtime, "kubelet", status) {
                log::warn!(target: "pid1", "{e}");
            }
        }
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
        self.service.poll_at()
    }

    /// Forward what it wrote on `stream` to the log.
    pub fn drain(&mut self, stream: Stream) {
        self.service.drain(stream);
    }

    /// SIGCHLD: reap every exited child, telling the service about its own; log orphans.
    pub fn reap(&mut self, now: Instant) {
        let n = reap(&mut self.service, now);
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
