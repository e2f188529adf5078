// SPDX-License-Identifier: Apache-2.0
//! etcd on a control-plane node, supervised like the kubelet: it runs when the config says
//! `machine.type: controlplane` and carries `cluster.etcd.ca` (with its key), the network is
//! ready, and either its data directory holds a member, `Bootstrap` was called, or it joined
//! a running cluster as a learner (`etcd_join`, promoted once in sync). Its peer
//! and client certificates are issued here from the etcd CA for the node's hostname and
//! addresses, and issued again when those change (etcd is then restarted with them). Its
//! health is etcd's own `/health`, read on loopback.

use std::net::IpAddr;
use std::os::fd::BorrowedFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use evloop::EventSource;
use net::config::{HealthzTarget, MachineConfig, MachineType};
use net::controllers::{MACHINE_CONFIG_ID, NETWORK_STATUS_ID};
use net::nodeaddress;
use net::resource::{
    Affiliate, HostnameStatus, Namespace, NetworkStatus, NodeAddress, OperatorSpec, ServiceStatus,
    HOSTNAME_ID,
};
use runtime::Runtime;

use super::etcd_join::{self, Identity, Report};
use super::health::Prober;
use crate::api::identity::{Ca, Sans};
use crate::etcd::args::{self, Plan, Start};
use crate::etcd::{data_dir_empty, join, BOOTSTRAP_MARK, METRICS_PORT, PEER_PORT};
use crate::machine::SOURCE;
use crate::supervisor::{RestartPolicy, Service, State, Stream};

/// Keys of etcd's stdout, stderr and health wake-up socket.
pub const KEY_STDOUT: u64 = 0;
/// See [`KEY_STDOUT`].
pub const KEY_STDERR: u64 = 1;
/// See [`KEY_STDOUT`].
pub const KEY_HEALTH: u64 = 2;

const PROBE_STARTING: Duration = Duration::from_millis(500);
const PROBE_STEADY: Duration = Duration::from_secs(5);
/// How often the loop reads the membership workers' reports.
const REPORTS: Duration = Duration::from_millis(250);
/// The longest a graceful reset waits for this node to leave etcd before it goes on.
pub const LEAVE_LIMIT: Duration = Duration::from_secs(8);
/// How often the loop looks at the leave step.
const LEAVE_CHECK: Duration = Duration::from_millis(100);

/// Where etcd's files go.
#[derive(Debug, Clone)]
pub struct Paths {
    /// The data directory (`/var/lib/etcd` under PID 1).
    pub data: PathBuf,
    /// Its CA, certificates and keys.
    pub pki: PathBuf,
    /// The state directory, where the bootstrap request is kept (`None`: not kept).
    pub state: Option<PathBuf>,
}

/// The etcd service.
pub struct Etcd {
    service: Service,
    paths: Paths,
    desired: Option<Vec<String>>,
    why_not: String,
    /// What the certificates on disk were issued for: CA text, hostname, addresses.
    issued: Option<(String, String, Vec<IpAddr>)>,
    /// `Bootstrap` was accepted (or its mark was found at start).
    bootstrap: bool,
    /// Certificates were issued again under a running etcd, which reads them only at start.
    reissued: bool,
    /// The config makes this node a control plane (only then is etcd listed).
    control_plane: bool,
    healthy: bool,
    /// This process was healthy once (the VIPs keep campaigning through a missed probe, as
    /// Talos's step down only when the etcd service goes).
    healthy_once: bool,
    health_reason: String,
    next_probe: Option<Instant>,
    generation: u32,
    prober: Prober,
    new_keys: Vec<u64>,
    /// Adding this node to a running cluster, while that is under way.
    joining: Option<etcd_join::Worker>,
    /// Added as a learner in this run: the `--initial-cluster` etcd starts with (kept once
    /// etcd wrote its data, as `new` is, so that write does not restart it).
    joined: Option<String>,
    /// Promoting this (non-bootstrap) member, while etcd runs and it is not known to vote.
    promoting: Option<etcd_join::Worker>,
    voting: bool,
    membership: String,
    /// Who this node is to the cluster, as last worked out.
    identity: Option<Identity>,
    next_reports: Option<Instant>,
    /// A graceful reset's `leave etcd` step, while under way.
    leaving: Option<etcd_join::Leaving>,
    /// This node left the cluster through `EtcdLeaveCluster`: etcd stays stopped (and is
    /// neither joined nor bootstrapped again) until the node restarts.
    left: bool,
    /// Its bound (set once the step began).
    leave_until: Option<Instant>,
    next_leave_check: Option<Instant>,
}

impl Etcd {
    /// Nothing desired yet; a bootstrap request kept from before is picked up.
    pub fn new(paths: Paths) -> Self {
        let bootstrap = paths.state.as_ref().is_some_and(|s| s.join(BOOTSTRAP_MARK).exists());
        Self {
            service: Service::new("etcd", RestartPolicy::default()),
            paths,
            desired: None,
            why_not: "not a control plane".into(),
            issued: None,
            bootstrap,
            reissued: false,
            control_plane: false,
            healthy: false,
            healthy_once: false,
            health_reason: String::new(),
            next_probe: None,
            generation: 0,
            prober: Prober::default(),
            new_keys: Vec::new(),
            joining: None,
            joined: None,
            promoting: None,
            voting: false,
            membership: String::new(),
            identity: None,
            next_reports: None,
            leaving: None,
            leave_until: None,
            next_leave_check: None,
            left: false,
        }
    }

    /// `EtcdLeaveCluster` removed this node's member: stop etcd and keep it stopped, as
    /// Talos does; the call's thread wipes the data directory once etcd is gone, so the
    /// node joins again as a new member when it restarts.
    pub fn left_cluster(&mut self) {
        log::warn!(target: "etcd", "this node left the etcd cluster: etcd stops and stays stopped until the node restarts");
        self.left = true;
        self.bootstrap = false;
        self.joined = None;
        self.joining = None;
        self.promoting = None;
    }

    /// `Bootstrap` passed its checks (and its request is kept): start a new cluster.
    pub fn bootstrap_requested(&mut self) {
        if self.joined.is_some() {
            log::warn!(target: "etcd", "Bootstrap after this node joined the running cluster: it stays a member of that cluster");
        }
        self.bootstrap = true;
    }

    /// Follow the config and the network.
    pub fn follow(&mut self, rt: &Runtime, now: Instant) {
        self.read_reports();
        let want = match self.command(rt) {
            Ok(cmd) => Some(cmd),
            Err(why) => {
                self.why_not = why;
                None
            }
        };
        if want != self.desired {
            self.desired = want.clone();
            self.service.set_desired(want, now);
        } else if std::mem::take(&mut self.reissued) && self.service.restart(now) {
            log::info!(target: "etcd", "restarting etcd with its new certificates");
        }
    }

    fn command(&mut self, rt: &Runtime) -> Result<Vec<String>, String> {
        self.control_plane = false;
        let store = rt.store();
        let cfg = store
            .get_spec::<MachineConfig>(Namespace::Config, MACHINE_CONFIG_ID)
            .ok_or("no machine config")?;
        self.control_plane = cfg.machine.machine_type == Some(MachineType::ControlPlane);
        if !self.control_plane {
            return Err("not a control plane".into());
        }
        if self.left {
            return Err("this node left the etcd cluster (EtcdLeaveCluster); etcd starts again \
                        when the node restarts"
                .into());
        }
        let etcd = cfg.cluster.as_ref().and_then(|c| c.etcd.as_ref());
        let Some(ca) = etcd.and_then(|e| e.ca.as_ref()) else {
            return Err("no cluster.etcd.ca".into());
        };
        let Some(ca_key) = ca.key.as_deref() else {
            return Err("cluster.etcd.ca has no key: the node cannot issue its certificates".into());
        };
        let waiting = "waiting for the network (address, hostname, /etc files)";
        let status = store
            .get_spec::<NetworkStatus>(Namespace::Network, NETWORK_STATUS_ID)
            .ok_or(waiting)?;
        if !(status.address_ready && status.hostname_ready) {
            return Err(waiting.into());
        }
        let host =
            store.get_spec::<HostnameStatus>(Namespace::Network, HOSTNAME_ID).ok_or(waiting)?;
        let hostname = host.hostname.clone();
        let addresses: Vec<IpAddr> = store
            .get_spec::<NodeAddress>(Namespace::Network, nodeaddress::CURRENT)
            .map(|n| n.addresses.iter().map(|a| a.addr()).collect())
            .unwrap_or_default();
        let etcd = etcd.cloned().unwrap_or_default();
        // A shared VIP moves between nodes: never a member's address (as in Talos).
        let vips: Vec<IpAddr> = store
            .list_specs::<OperatorSpec>(Namespace::Network)
            .filter_map(|(_, o)| o.vip.as_ref().map(|v| v.ip))
            .collect();
        let in_subnets = |ip: &IpAddr, filters: &[net::config::CidrFilter]| {
            !vips.contains(ip) && crate::nodeip::allowed(ip, filters)
        };
        let advertised = addresses
            .iter()
            .find(|ip| !ip.is_loopback() && in_subnets(ip, &etcd.advertised_subnets))
            .copied()
            .ok_or("waiting for an address in cluster.etcd.advertisedSubnets")?;
        let listen: Vec<IpAddr> = if etcd.listen_subnets.is_empty() {
            Vec::new()
        } else {
            addresses.iter().filter(|ip| in_subnets(ip, &etcd.listen_subnets)).copied().collect()
        };
        // The configured VIPs are in the certificates whoever holds them (clients and joining
        // members reach the cluster through them); a VIP coming or going is no reason to
        // issue them again and restart etcd.
        let sans: Vec<IpAddr> =
            addresses.iter().filter(|ip| !vips.contains(ip)).chain(vips.iter()).copied().collect();
        self.certificates(&ca.crt, ca_key, &hostname, &sans)?;
        // Where other members are: the control-plane endpoint's host, then the control
        // planes that discovery lists (Talos asks Kubernetes, which keelson does not run).
        let endpoint_host = cfg
            .cluster
            .as_ref()
            .and_then(|c| c.control_plane.as_ref())
            .and_then(|p| p.endpoint_host());
        let control_planes: Vec<IpAddr> = store
            .list_specs::<Affiliate>(Namespace::Cluster)
            .filter(|(_, a)| a.machine_type == "controlplane")
            .flat_map(|(_, a)| a.addresses.iter().copied())
            .collect();
        let mut endpoints = join::endpoints(endpoint_host.as_deref(), &control_planes, &addresses);
        let identity = Identity {
            name: hostname.clone(),
            peer_url: args::url(advertised, PEER_PORT),
            endpoints: endpoints.clone(),
            ca: self.paths.pki.join("ca.crt"),
            cert: self.paths.pki.join("peer.crt"),
            key: self.paths.pki.join("peer.key"),
        };
        // The promotion also asks the local member (a voter answers the list itself).
        endpoints.push(args::url(IpAddr::from([127, 0, 0, 1]), crate::etcd::CLIENT_PORT));
        self.identity = Some(Identity { endpoints, ..identity.clone() });
        // A bootstrapped member keeps `new` for good, and a joined one its member list:
        // etcd ignores both once its WAL exists, and switching to a bare `existing` the moment
        // etcd writes its first file would restart it.
        // A member already added to a running cluster stays in it, even if `Bootstrap` came
        // meanwhile (its data directory was still empty, so the call was accepted).
        let start = if let Some(members) = &self.joined {
            Start::Join(members.clone())
        } else if self.bootstrap {
            Start::New
        } else if !data_dir_empty(&self.paths.data) {
            Start::Existing
        } else {
            return Err(self.join(identity));
        };
        self.joining = None;
        let plan = Plan {
            name: &hostname,
            advertised,
            listen: &listen,
            data_dir: &self.paths.data,
            pki_dir: &self.paths.pki,
            start: &start,
            extra_args: &etcd.extra_args,
        };
        Ok(args::command(&plan))
    }

    /// An empty member that was not bootstrapped: join the running cluster (its worker, made
    /// again when who this node is or where it looks changes). The service's reason.
    fn join(&mut self, identity: Identity) -> String {
        if identity.endpoints.is_empty() {
            self.joining = None;
            return "waiting for Bootstrap, or for cluster.controlPlane.endpoint or a discovered \
                    control plane to join"
                .into();
        }
        if self.joining.as_ref().is_none_or(|w| w.id != identity) {
            log::info!(target: "etcd", "joining the etcd cluster at {}", identity.endpoints.join(", "));
            self.membership = "looking for the members".into();
            self.joining = match etcd_join::join(identity) {
                Ok(w) => Some(w),
                Err(e) => {
                    self.membership = e;
                    None
                }
            };
        }
        format!("joining the cluster: {}", self.membership)
    }

    fn read_reports(&mut self) {
        let reports: Vec<Report> = [self.joining.as_ref(), self.promoting.as_ref()]
            .into_iter()
            .flatten()
            .flat_map(|w| w.reports().collect::<Vec<_>>())
            .collect();
        for r in reports {
            match r {
                Report::Status(s) => self.membership = s,
                Report::Joined(members) => {
                    self.joined = Some(members);
                    self.joining = None;
                    self.membership = "added as a learner".into();
                }
                Report::Voting => {
                    self.voting = true;
                    self.promoting = None;
                    self.membership.clear();
                }
            }
        }
    }

    /// Issue the peer and server certificates when the CA, the hostname or the addresses
    /// changed. The names go into the command's inputs, so a change restarts etcd.
    fn certificates(
        &mut self,
        ca_b64: &str,
        key_b64: &str,
        hostname: &str,
        addresses: &[IpAddr],
    ) -> Result<(), String> {
        let mut sans_addrs: Vec<IpAddr> = addresses.to_vec();
        sans_addrs.extend(
            ["127.0.0.1".parse::<IpAddr>().ok(), "::1".parse::<IpAddr>().ok()]
                .into_iter()
                .flatten(),
        );
        sans_addrs.sort();
        sans_addrs.dedup();
        let key = (ca_b64.to_owned(), hostname.to_owned(), sans_addrs.clone());
        if self.issued.as_ref() == Some(&key) {
            return Ok(());
        }
        let crt = crate::api::remote::decode(ca_b64, "cluster.etcd.ca.crt")?;
        let ca_key = crate::api::remote::decode(key_b64, "cluster.etcd.ca.key")?;
        let ca = Ca::from_pem(&crt, &ca_key).map_err(|e| format!("cluster.etcd.ca: {e}"))?;
        let sans = Sans { hostname: Some(hostname.to_owned()), addresses: sans_addrs };
        let peer = ca.issue_peer(&sans).map_err(|e| e.to_string())?;
        let server = ca.issue_peer(&sans).map_err(|e| e.to_string())?;
        std::fs::create_dir_all(&self.paths.pki)
            .map_err(|e| format!("{}: {e}", self.paths.pki.display()))?;
        for (name, text) in [
            ("ca.crt", crt.as_str()),
            ("peer.crt", peer.cert_pem.as_str()),
            ("peer.key", peer.key_pem.as_str()),
            ("server.crt", server.cert_pem.as_str()),
            ("server.key", server.key_pem.as_str()),
        ] {
            let path = self.paths.pki.join(name);
            crate::api::trial::write_back(&path, text)
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
        log::info!(target: "etcd", "certificates issued for {hostname} and {} address(es)", key.2.len());
        self.reissued = self.issued.is_some();
        self.issued = Some(key);
        Ok(())
    }

    /// Start, restart or stop as due; probe health.
    pub fn poll(&mut self, now: Instant) {
        if self.service.poll(now) {
            for (_, stream) in self.service.fds() {
                self.new_keys.push(if stream == Stream::Out { KEY_STDOUT } else { KEY_STDERR });
            }
        }
        let running = matches!(self.service.state(), State::Running(_));
        let joined = self.joined.is_some() || !self.bootstrap;
        if running && joined && !self.voting && self.promoting.is_none() {
            if let Some(id) = self.identity.clone() {
                match etcd_join::promote(id) {
                    Ok(w) => self.promoting = Some(w),
                    Err(e) => self.membership = e,
                }
            }
        } else if !running {
            self.promoting = None;
        }
        let busy = self.joining.is_some() || self.promoting.is_some();
        self.next_reports = busy.then(|| now + REPORTS);
        if !running {
            self.healthy = false;
            self.next_probe = None;
            return;
        }
        if self.generation != self.service.starts {
            self.generation = self.service.starts;
            self.healthy = false;
            self.healthy_once = false;
            self.health_reason = "started, health not checked yet".into();
            self.next_probe = Some(now + PROBE_STARTING);
        }
        if self.prober.in_flight || self.next_probe.is_none_or(|t| t > now) {
            return;
        }
        let url = format!("http://127.0.0.1:{METRICS_PORT}/health");
        let Ok(target) = HealthzTarget::parse(&url) else { return };
        let fresh = self.prober.wake_fd().is_none();
        self.next_probe = Some(now + if self.healthy { PROBE_STEADY } else { PROBE_STARTING });
        match self.prober.send(self.generation, target) {
            Ok(()) if fresh => self.new_keys.push(KEY_HEALTH),
            Ok(()) => {}
            Err(e) => self.health_reason = e,
        }
    }

    fn health_ready(&mut self) {
        for o in self.prober.take() {
            if o.generation != self.generation {
                continue;
            }
            let was = self.healthy;
            self.healthy = o.result.is_ok();
            self.healthy_once |= self.healthy;
            match o.result {
                Ok(()) => {
                    self.health_reason.clear();
                    if !was {
                        log::info!(target: "etcd", "etcd healthy (start {})", self.generation);
                    }
                }
                Err(e) => self.health_reason = format!("health check: {e}"),
            }
        }
    }

    /// Publish its status once it is configured for this node.
    pub fn publish(&self, rt: &mut Runtime) {
        // A node that is not a control plane has no etcd to list.
        if !self.control_plane && self.desired.is_none() && self.service.starts == 0 {
            return;
        }
        let (state, pid) = match self.service.state() {
            State::Stopped => ("stopped", 0),
            State::Waiting(_) => ("waiting", 0),
            State::Running(p) => ("running", p),
            State::Stopping(p) => ("stopping", p),
        };
        let status = ServiceStatus {
            state: state.into(),
            pid,
            starts: self.service.starts,
            healthy: self.healthy,
            health_reason: if self.healthy {
                String::new()
            } else if pid == 0 {
                self.why_not.clone()
            } else if self.promoting.is_some() && !self.membership.is_empty() {
                format!("{} ({})", self.health_reason, self.membership)
            } else {
                self.health_reason.clone()
            },
            last_exit: self.service.last_exit().unwrap_or_default().to_owned(),
            command: self.desired.clone().unwrap_or_default(),
        };
        if let Err(e) = rt.put_input(SOURCE, Namespace::Runtime, "etcd", status) {
            log::warn!(target: "etcd", "{e}");
        }
    }

    /// What the VIP workers need: from etcd's first healthy probe until its process ends.
    pub fn vip_setup<'a>(&self, hostname: &'a str) -> Option<super::vips::Setup<'a>> {
        (self.healthy_once && matches!(self.service.state(), State::Running(_))).then(|| {
            super::vips::Setup {
                hostname,
                ca: self.paths.pki.join("ca.crt"),
                cert: self.paths.pki.join("peer.crt"),
                key: self.paths.pki.join("peer.key"),
            }
        })
    }

    /// The config makes this node a control plane.
    pub fn is_control_plane(&self) -> bool {
        self.control_plane
    }

    /// `ServiceRestart etcd`.
    pub fn restart(&mut self, now: Instant) -> bool {
        self.service.restart(now)
    }

    /// `ServiceStart` / `ServiceStop`; false when it is not configured here.
    pub fn api(&mut self, op: crate::supervisor::Op, now: Instant) -> bool {
        self.service.api(op, now)
    }

    /// A graceful reset: remove this node's member before etcd stops (Talos's `leave etcd`),
    /// on a worker; [`Etcd::has_left`] says when to go on. Nothing to do when etcd is not
    /// running here.
    pub fn leave(&mut self, now: Instant) {
        if self.leave_until.is_some() {
            return;
        }
        self.leave_until = Some(now + LEAVE_LIMIT);
        self.joining = None;
        self.promoting = None;
        if !self.control_plane || !matches!(self.service.state(), State::Running(_)) {
            return;
        }
        let Some(id) = self.identity.clone() else { return };
        match etcd_join::leave(id) {
            Ok(l) => {
                self.leaving = Some(l);
                self.next_leave_check = Some(now + LEAVE_CHECK);
            }
            Err(e) => log::warn!(target: "etcd", "leave etcd: {e}; the reset goes on without it"),
        }
    }

    /// The leave step ended, or ran past [`LEAVE_LIMIT`] (then one line says so).
    pub fn has_left(&mut self, now: Instant) -> bool {
        let Some(l) = &self.leaving else { return true };
        if l.is_done() {
            self.leaving = None;
            self.next_leave_check = None;
            return true;
        }
        if self.leave_until.is_some_and(|t| now >= t) {
            log::warn!(target: "etcd", "leave etcd: no answer within {} s (etcd unreachable?); the reset goes on", LEAVE_LIMIT.as_secs());
            self.leaving = None;
            self.next_leave_check = None;
            return true;
        }
        self.next_leave_check = Some(now + LEAVE_CHECK);
        false
    }

    /// Begin stopping it.
    pub fn shutdown(&mut self, now: Instant) {
        self.service.shutdown(now);
    }

    /// It has stopped.
    pub fn is_stopped(&self) -> bool {
        self.service.is_stopped()
    }

    /// Its service, for the reaper.
    pub fn service_mut(&mut self) -> &mut Service {
        &mut self.service
    }
}

impl std::fmt::Debug for Etcd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Etcd").field("state", &self.service.state()).finish()
    }
}

impl EventSource<Runtime> for Etcd {
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
            KEY_STDOUT => self.service.drain(Stream::Out),
            KEY_STDERR => self.service.drain(Stream::Err),
            KEY_HEALTH => self.health_ready(),
            _ => {}
        }
    }

    fn poll_at(&self) -> Option<Instant> {
        let probe = self.next_probe.filter(|_| !self.prober.in_flight);
        [self.service.poll_at(), probe, self.next_reports, self.next_leave_check]
            .into_iter()
            .flatten()
            .min()
    }
}
