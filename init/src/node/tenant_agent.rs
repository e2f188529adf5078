// SPDX-License-Identifier: Apache-2.0
//! The tenant-network agent (`keelson-operator tenant-agent`) as a supervised service: it
//! runs when the config has `machine.tenantNetworks` and the node has an address (and its
//! hostname, when that is the agent's node name). Its command line is built from the config
//! by [`command`] (pure); a config change restarts it only when that line changes. It has no
//! health endpoint: a running process counts as healthy. Its status is the `tenant-agent`
//! service, gone again once the key is removed and the process has stopped.

use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

use evloop::EventSource;
use net::config::{MachineConfig, TenantNetworksConfig};
use net::controllers::{MACHINE_CONFIG_ID, NETWORK_STATUS_ID};
use net::resource::{HostnameStatus, Kind, Namespace, NetworkStatus, ServiceStatus, HOSTNAME_ID};
use runtime::Runtime;

use crate::machine::SOURCE;
use crate::supervisor::{Op, RestartPolicy, Service, State, Stream};

/// The service's name (its `ServiceStatus` ID, what `keelson service` shows).
pub const NAME: &str = "tenant-agent";

/// The key of its stdout (see [`evloop::EventSource`]).
pub const KEY_STDOUT: u64 = 0;
/// The key of its stderr.
pub const KEY_STDERR: u64 = 1;

/// The agent's command line: `AGENT tenant-agent --node NAME ...` with the flags its
/// config sets, writing its status where this node reads it.
pub fn command(cfg: &TenantNetworksConfig, hostname: &str, status_file: &Path) -> Vec<String> {
    let mut cmd = vec![cfg.agent.clone(), "tenant-agent".into()];
    let mut flag = |name: &str, value: String| {
        cmd.push(format!("--{name}"));
        cmd.push(value);
    };
    flag("node", cfg.node.clone().unwrap_or_else(|| hostname.to_owned()));
    flag("status-file", status_file.display().to_string());
    flag("etcd-endpoints", cfg.etcd_endpoints.join(","));
    let files = [("etcd-cacert", &cfg.etcd_ca), ("etcd-cert", &cfg.etcd_cert)];
    for (name, value) in files.into_iter().chain([("etcd-key", &cfg.etcd_key)]) {
        if let Some(v) = value {
            flag(name, v.clone());
        }
    }
    if let Some(p) = &cfg.prefix {
        flag("prefix", p.clone());
    }
    if let Some(ip) = cfg.vtep_local {
        flag("vtep-local", ip.to_string());
    }
    if let Some(port) = cfg.vxlan_port {
        flag("vxlan-port", port.to_string());
    }
    cmd
}

/// What the agent waits for before it starts.
const WAITING: &str = "waiting for the network (an address, and the hostname unless node is set)";

/// The command it should run now, or why none; `Ok(None)` when it is not configured.
fn wanted(rt: &Runtime, status_file: &Path) -> Result<Option<Vec<String>>, &'static str> {
    let store = rt.store();
    let Some(cfg) = store.get_spec::<MachineConfig>(Namespace::Config, MACHINE_CONFIG_ID) else {
        return Ok(None);
    };
    let Some(tenant) = &cfg.machine.tenant_networks else { return Ok(None) };
    let status =
        store.get_spec::<NetworkStatus>(Namespace::Network, NETWORK_STATUS_ID).ok_or(WAITING)?;
    if !status.address_ready {
        return Err(WAITING);
    }
    let hostname = match &tenant.node {
        Some(_) => String::new(),
        None if status.hostname_ready => store
            .get_spec::<HostnameStatus>(Namespace::Network, HOSTNAME_ID)
            .map(|h| h.hostname.clone())
            .filter(|h| !h.is_empty())
            .ok_or(WAITING)?,
        None => return Err(WAITING),
    };
    Ok(Some(command(tenant, &hostname, status_file)))
}

/// The tenant-network agent's service.
pub struct TenantAgent {
    service: Service,
    /// Where the agent writes its status (the file `tenant_status` watches).
    status_file: PathBuf,
    /// The key is in the config.
    configured: bool,
    desired: Option<Vec<String>>,
    why_not: &'static str,
    /// Its `ServiceStatus` is in the store.
    published: bool,
    new_keys: Vec<u64>,
}

impl TenantAgent {
    /// Not running; the agent writes its status to `status_file`.
    pub fn new(status_file: PathBuf) -> Self {
        Self {
            service: Service::new(NAME, RestartPolicy::default()),
            status_file,
            configured: false,
            desired: None,
            why_not: "not configured",
            published: false,
            new_keys: Vec::new(),
        }
    }

    /// Follow the config and the network.
    pub fn follow(&mut self, rt: &Runtime, now: Instant) {
        let want = match wanted(rt, &self.status_file) {
            Ok(want) => {
                self.configured = want.is_some();
                self.why_not = "not configured";
                want
            }
            Err(why) => {
                self.configured = true;
                self.why_not = why;
                None
            }
        };
        if want != self.desired {
            self.desired = want.clone();
            self.service.set_desired(want, now);
        }
    }

    /// Start or stop as due; a new process's pipes are new keys.
    pub fn poll(&mut self, now: Instant) {
        if self.service.poll(now) {
            for (_, stream) in self.service.fds() {
                self.new_keys.push(if stream == Stream::Out { KEY_STDOUT } else { KEY_STDERR });
            }
        }
    }

    /// Publish its status while configured or running; remove it once neither.
    pub fn publish(&mut self, rt: &mut Runtime) {
        let (state, pid) = match self.service.state() {
            State::Stopped => ("stopped", 0),
            State::Waiting(_) => ("waiting", 0),
            State::Running(p) => ("running", p),
            State::Stopping(p) => ("stopping", p),
        };
        if !self.configured && state == "stopped" {
            if std::mem::take(&mut self.published) {
                let removed =
                    rt.remove_input(SOURCE, Namespace::Runtime, Kind::ServiceStatus, NAME);
                if let Err(e) = removed {
                    log::warn!(target: "pid1", "{e}");
                }
            }
            return;
        }
        let status = ServiceStatus {
            state: state.into(),
            pid,
            starts: self.service.starts,
            healthy: pid != 0 && state == "running",
            health_reason: if pid == 0 { self.why_not.into() } else { String::new() },
            last_exit: self.service.last_exit().unwrap_or_default().to_owned(),
            command: self.desired.clone().unwrap_or_default(),
        };
        match rt.put_input(SOURCE, Namespace::Runtime, NAME, status) {
            Ok(()) => self.published = true,
            Err(e) => log::warn!(target: "pid1", "{e}"),
        }
    }

    /// `ServiceRestart`; false when it is not running or waiting.
    pub fn restart(&mut self, now: Instant) -> bool {
        self.service.restart(now)
    }

    /// `ServiceStart` / `ServiceStop`.
    pub fn api(&mut self, op: Op, now: Instant) -> bool {
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

    /// Its service, for reaping.
    pub fn service_mut(&mut self) -> &mut Service {
        &mut self.service
    }
}

/// The agent's output pipes.
impl EventSource<Runtime> for TenantAgent {
    fn take_new_keys(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.new_keys)
    }

    fn fd(&self, key: u64) -> Option<BorrowedFd<'_>> {
        let stream = match key {
            KEY_STDOUT => Stream::Out,
            KEY_STDERR => Stream::Err,
            _ => return None,
        };
        self.service.fds().into_iter().find(|(_, s)| *s == stream).map(|(fd, _)| fd)
    }

    fn ready(&mut self, key: u64, _rt: &mut Runtime, _now: Instant) {
        match key {
            KEY_STDOUT => self.service.drain(Stream::Out),
            KEY_STDERR => self.service.drain(Stream::Err),
            _ => {}
        }
    }

    fn poll_at(&self) -> Option<Instant> {
        self.service.poll_at()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(yaml: &str) -> TenantNetworksConfig {
        let text = format!("version: v1alpha1\nmachine:\n  tenantNetworks:\n{yaml}");
        let parsed = net::config::parse(&text).unwrap_or_else(|e| unreachable!("{e}"));
        parsed.machine.tenant_networks.unwrap_or_else(|| unreachable!("no tenantNetworks"))
    }

    #[test]
    fn the_least_config_runs_the_default_agent_under_the_hostname() {
        let c = cfg("    etcdEndpoints: [\"http://10.0.0.1:2379\", \"http://10.0.0.2:2379\"]\n");
        let cmd = command(&c, "w1", Path::new("/run/keelson/tenant-networks.json"));
        assert_eq!(
            cmd,
            [
                "/usr/bin/keelson-operator",
                "tenant-agent",
                "--node",
                "w1",
                "--status-file",
                "/run/keelson/tenant-networks.json",
                "--etcd-endpoints",
                "http://10.0.0.1:2379,http://10.0.0.2:2379",
            ]
        );
    }

    #[test]
    fn every_field_becomes_its_flag_and_a_configured_node_wins_over_the_hostname() {
        let c = cfg("    agent: /opt/bin/keelson-operator
    etcdEndpoints: [\"https://op:2379\"]
    etcdCa: /etc/op/ca.crt
    etcdCert: /etc/op/node.crt
    etcdKey: /etc/op/node.key
    prefix: /tenants
    node: rack1-w1
    vtepLocal: 2001:db8::1
    vxlanPort: 4790
");
        let cmd = command(&c, "ignored", Path::new("/r/t.json"));
        let want =
            "/opt/bin/keelson-operator tenant-agent --node rack1-w1 --status-file /r/t.json \
                    --etcd-endpoints https://op:2379 --etcd-cacert /etc/op/ca.crt \
                    --etcd-cert /etc/op/node.crt --etcd-key /etc/op/node.key --prefix /tenants \
                    --vtep-local 2001:db8::1 --vxlan-port 4790";
        assert_eq!(cmd.join(" "), want);
    }

    #[test]
    fn the_same_config_gives_the_same_command_and_a_changed_field_a_different_one() {
        let a = cfg("    etcdEndpoints: [\"http://10.0.0.1:2379\"]\n");
        let path = Path::new("/s.json");
        assert_eq!(command(&a, "w1", path), command(&a.clone(), "w1", path));
        let b = cfg("    etcdEndpoints: [\"http://10.0.0.1:2379\"]\n    vxlanPort: 4790\n");
        assert_ne!(command(&a, "w1", path), command(&b, "w1", path));
        // The hostname matters only when no node is configured.
        assert_ne!(command(&a, "w1", path), command(&a, "w2", path));
        let named = cfg("    etcdEndpoints: [\"http://10.0.0.1:2379\"]\n    node: n\n");
        assert_eq!(command(&named, "w1", path), command(&named, "w2", path));
    }
}
