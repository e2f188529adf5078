// SPDX-License-Identifier: Apache-2.0
//! Controllers that turn merged specs and statuses into the rest of the node's state: hostname
//! (docs/talos.md: Applying specs), resolver and time server statuses, the `/etc` files
//! (docs/talos.md: Applying specs), node addresses (docs/talos.md: Statuses and readiness) and
//! network readiness (docs/talos.md: Statuses and readiness).

use std::collections::BTreeMap;

use super::apply::first_error;
use super::ids::{HOSTNAME_FILE, MACHINE_CONFIG_ID};
use crate::config::MachineConfig;
use crate::etcfiles::{self, HostEntry};
use crate::host::{HostError, SharedHost};
use crate::nodeaddress::{self, NodeAddresses};
use crate::resource::{
    AddressStatus, EtcFileStatus, HostnameSpec, HostnameStatus, Kind, LinkStatus, LinkView,
    Namespace, NetworkStatus, NodeAddress, OperatorStatus, Phase, ResolverSpec, ResolverStatus,
    RouteStatus, TimeServerSpec, TimeServerStatus, HOSTNAME_ID, RESOLVER_ID, TIMESERVER_ID,
};
use crate::runtime::{Controller, ControllerError, Ctx, Input, Next, Output};

/// Applies the merged hostname with `sethostname`/`setdomainname` and reports it.
///
/// The hostname is what readiness waits for (as in Talos); the domain is optional. A domain
/// the kernel refuses is reported (an error, a condition) and retried with backoff, while the
/// hostname alone is applied and reported, so the node still becomes ready.
pub struct HostnameSpecController {
    host: SharedHost,
}

impl HostnameSpecController {
    /// A controller applying through `host`.
    pub fn new(host: SharedHost) -> Self {
        Self { host }
    }

    /// Apply `spec`: what is in effect afterwards, and the domain's error if it was refused.
    fn apply(&self, spec: &HostnameSpec) -> Result<(HostnameStatus, Option<HostError>), HostError> {
        let mut host = self.host.borrow_mut();
        let full =
            HostnameStatus { hostname: spec.hostname.clone(), domainname: spec.domainname.clone() };
        match host.set_hostname(&spec.hostname, &spec.domainname) {
            Ok(()) => Ok((full, None)),
            Err(e) if !spec.domainname.is_empty() => {
                // The hostname alone, with no domain rather than a stale one.
                host.set_hostname(&spec.hostname, "")?;
                let alone =
                    HostnameStatus { hostname: spec.hostname.clone(), ..Default::default() };
                Ok((alone, Some(e)))
            }
            Err(e) => Err(e),
        }
    }
}

impl std::fmt::Debug for HostnameSpecController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostnameSpecController").finish_non_exhaustive()
    }
}

impl Controller for HostnameSpecController {
    fn name(&self) -> &'static str {
        "network.HostnameSpecController"
    }

    fn inputs(&self) -> Vec<Input> {
        vec![Input::strong(Namespace::Network, Kind::HostnameSpec)]
    }

    fn outputs(&self) -> Vec<Output> {
        vec![Output::exclusive(Namespace::Network, Kind::HostnameStatus)]
    }

    fn reconcile(&mut self, ctx: &mut Ctx<'_>) -> Result<Next, ControllerError> {
        let current = ctx
            .resource(Namespace::Network, Kind::HostnameSpec, HOSTNAME_ID)
            .and_then(|r| r.spec_as::<HostnameSpec>().map(|s| (s.clone(), r.metadata.phase)));
        match current {
            Some((spec, Phase::Running)) => {
                let wanted = HostnameStatus {
                    hostname: spec.hostname.clone(),
                    domainname: spec.domainname.clone(),
                };
                let have = ctx.get::<HostnameStatus>(Namespace::Network, HOSTNAME_ID).cloned();
                if have.as_ref() == Some(&wanted) {
                    ctx.set_condition(None);
                    ctx.add_finalizer(Namespace::Network, Kind::HostnameSpec, HOSTNAME_ID)?;
                    return Ok(Next::Idle);
                }
                let (status, refused) = self.apply(&spec)?;
                if have.as_ref() != Some(&status) {
                    match &refused {
                        None => log::info!(target: self.name(), "hostname set to {}", spec.fqdn()),
                        Some(_) => log::warn!(
                            target: self.name(),
                            "hostname set to {} without its domain, which the kernel refused",
                            spec.hostname
                        ),
                    }
                }
                ctx.put(Namespace::Network, HOSTNAME_ID, status)?;
                ctx.add_finalizer(Namespace::Network, Kind::HostnameSpec, HOSTNAME_ID)?;
                ctx.set_condition(
                    refused.as_ref().map(|e| format!("domain name not applied: {e}")),
                );
                if let Some(e) = refused {
                    // The runtime logs it once and retries with backoff.
                    return Err(e.into());
                }
            }
            Some((_, Phase::TearingDown)) => {
                ctx.teardown(Namespace::Network, Kind::HostnameStatus, HOSTNAME_ID)?;
                ctx.remove_finalizer(Namespace::Network, Kind::HostnameSpec, HOSTNAME_ID)?;
            }
            None => ctx.teardown(Namespace::Network, Kind::HostnameStatus, HOSTNAME_ID)?,
        }
        Ok(Next::Idle)
    }
}

/// Copies the merged resolvers and time servers to their statuses (nothing to apply in the
/// kernel; the files and the time syncer consume the statuses).
#[derive(Debug, Default)]
pub struct CopySpecsController;

impl Controller for CopySpecsController {
    fn name(&self) -> &'static str {
        "network.ResolverTimeServerSpecController"
    }

    fn inputs(&self) -> Vec<Input> {
        vec![
            Input::strong(Namespace::Network, Kind::ResolverSpec),
            Input::strong(Namespace::Network, Kind::TimeServerSpec),
        ]
    }

    fn outputs(&self) -> Vec<Output> {
        vec![
            Output::exclusive(Namespace::Network, Kind::ResolverStatus),
            Output::exclusive(Namespace::Network, Kind::TimeServerStatus),
        ]
    }

    fn reconcile(&mut self, ctx: &mut Ctx<'_>) -> Result<Next, ControllerError> {
        if let Some(r) = ctx.get::<ResolverSpec>(Namespace::Network, RESOLVER_ID).cloned() {
            let status =
                ResolverStatus { dns_servers: r.dns_servers, search_domains: r.search_domains };
            ctx.put(Namespace::Network, RESOLVER_ID, status)?;
        }
        if let Some(t) = ctx.get::<TimeServerSpec>(Namespace::Network, TIMESERVER_ID).cloned() {
            ctx.put(
                Namespace::Network,
                TIMESERVER_ID,
                TimeServerStatus { time_servers: t.time_servers, use_nts: t.use_nts },
            )?;
        }
        ctx.cleanup_untouched(Namespace::Network, Kind::ResolverStatus)?;
        ctx.cleanup_untouched(Namespace::Network, Kind::TimeServerStatus)?;
        Ok(Next::Idle)
    }
}

/// Failed writes of one `/etc` file after which readiness stops waiting for it (the
/// runtime's backoff puts them about 4 s apart from the first); it is still retried.
pub const ETC_WRITE_ATTEMPTS: u32 = 5;

/// Writes `/etc/resolv.conf`, `/etc/hosts` and `/etc/hostname` under the host's root.
///
/// Each file is written on its own: one that fails does not stop the others. A file that
/// still fails after [`ETC_WRITE_ATTEMPTS`] gets a status carrying the error (one error
/// line), so network readiness, and the kubelet behind it, is not held forever by a file
/// system that refuses it; the write is retried with the runtime's backoff.
pub struct EtcFilesController {
    host: SharedHost,
    /// Consecutive failed writes, by file ID.
    failures: BTreeMap<&'static str, u32>,
}

impl EtcFilesController {
    /// A controller writing through `host`.
    pub fn new(host: SharedHost) -> Self {
        Self { host, failures: BTreeMap::new() }
    }
}

impl std::fmt::Debug for EtcFilesController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcFilesController").finish_non_exhaustive()
    }
}

impl EtcFilesController {
    fn write(
        &mut self,
        ctx: &mut Ctx<'_>,
        id: &'static str,
        path: &str,
        content: &str,
        errors: &mut Vec<HostError>,
    ) -> Result<(), ControllerError> {
        let result = self.host.borrow_mut().write_file(path, content, 0o644);
        match result {
            Ok(changed) => {
                if changed {
                    log::info!(target: "network.EtcFilesController", "wrote {path}");
                }
                self.failures.remove(id);
                let status = EtcFileStatus {
                    path: path.to_owned(),
                    size: content.len(),
                    error: String::new(),
                };
                ctx.put(Namespace::Network, id, status)
            }
            Err(e) => {
                let n = self.failures.entry(id).or_default();
                *n = n.saturating_add(1);
                if *n == ETC_WRITE_ATTEMPTS {
                    log::error!(
                        target: "network.EtcFilesController",
                        "{path} not written after {n} attempts; network readiness no longer waits \
                         for it (still retrying): {e}"
                    );
                }
                let given_up = *n >= ETC_WRITE_ATTEMPTS;
                errors.push(e);
                if given_up {
                    let error = errors.last().map(ToString::to_string).unwrap_or_default();
                    let status = EtcFileStatus { path: path.to_owned(), size: 0, error };
                    ctx.put(Namespace::Network, id, status)?;
                }
                Ok(())
            }
        }
    }
}

impl Controller for EtcFilesController {
    fn name(&self) -> &'static str {
        "network.EtcFilesController"
    }

    fn inputs(&self) -> Vec<Input> {
        vec![
            Input::weak(Namespace::Network, Kind::ResolverStatus),
            Input::weak(Namespace::Network, Kind::HostnameStatus),
            Input::weak(Namespace::Network, Kind::NodeAddress),
            Input::weak(Namespace::Config, Kind::MachineConfig),
        ]
    }

    fn outputs(&self) -> Vec<Output> {
        vec![Output::exclusive(Namespace::Network, Kind::EtcFileStatus)]
    }

    fn reconcile(&mut self, ctx: &mut Ctx<'_>) -> Result<Next, ControllerError> {
        let hostname = ctx.get::<HostnameStatus>(Namespace::Network, HOSTNAME_ID).cloned();
        let default_ip = ctx
            .get::<NodeAddress>(Namespace::Network, nodeaddress::DEFAULT)
            .and_then(|n| n.addresses.first().map(|a| a.addr()));
        let extra: Vec<HostEntry> = ctx
            .get::<MachineConfig>(Namespace::Config, MACHINE_CONFIG_ID)
            .map(|c| {
                c.machine
                    .network
                    .extra_host_entries
                    .iter()
                    .map(|e| HostEntry { ip: e.ip, aliases: e.aliases.clone() })
                    .collect()
            })
            .unwrap_or_default();
        let mut errors = Vec::new();
        let hosts = etcfiles::hosts(default_ip, hostname.as_ref(), &extra);
        log_skipped("/etc/hosts", &hosts.skipped);
        self.write(ctx, "hosts", "/etc/hosts", &hosts.text, &mut errors)?;
        if let Some(r) = ctx.get::<ResolverStatus>(Namespace::Network, RESOLVER_ID).cloned() {
            let resolv = etcfiles::resolv_conf(&r);
            log_skipped("/etc/resolv.conf", &resolv.skipped);
            self.write(ctx, "resolv.conf", "/etc/resolv.conf", &resolv.text, &mut errors)?;
        }
        if let Some(h) = &hostname {
            match etcfiles::hostname(h) {
                Some(text) => {
                    self.write(ctx, HOSTNAME_FILE, "/etc/hostname", &text, &mut errors)?
                }
                None => log_skipped("/etc/hostname", &["an invalid hostname".to_owned()]),
            }
        }
        first_error(self.name(), errors, Next::Idle)
    }
}

/// Values the renderers refused: validation upstream should have stopped them, so say so.
fn log_skipped(path: &str, skipped: &[String]) {
    for what in skipped {
        log::warn!(target: "network.EtcFilesController", "{path}: left out {what}: not a valid name");
    }
}

/// Derives `NodeAddress` `default`, `current`, `routed`, `accumulative`.
#[derive(Debug, Default)]
pub struct NodeAddressController;

impl Controller for NodeAddressController {
    fn name(&self) -> &'static str {
        "network.NodeAddressController"
    }

    fn inputs(&self) -> Vec<Input> {
        vec![
            Input::strong(Namespace::Network, Kind::AddressStatus),
            Input::strong(Namespace::Network, Kind::LinkStatus),
        ]
    }

    fn outputs(&self) -> Vec<Output> {
        vec![Output::exclusive(Namespace::Network, Kind::NodeAddress)]
    }

    fn reconcile(&mut self, ctx: &mut Ctx<'_>) -> Result<Next, ControllerError> {
        let list =
            |id: &str| ctx.get::<NodeAddress>(Namespace::Network, id).map(|n| n.addresses.clone());
        let previous = NodeAddresses {
            default: list(nodeaddress::DEFAULT).and_then(|v| v.first().copied()),
            accumulative: list(nodeaddress::ACCUMULATIVE).unwrap_or_default(),
            ..NodeAddresses::default()
        };
        let derived = {
            let addresses: Vec<&AddressStatus> =
                ctx.list::<AddressStatus>(Namespace::Network).into_iter().map(|(_, a)| a).collect();
            let links = LinkView::new(ctx.store().list_specs::<LinkStatus>(Namespace::Network));
            nodeaddress::derive(&addresses, &links, &previous)
        };
        for (id, resource) in derived.resources() {
            ctx.put(Namespace::Network, id, resource)?;
        }
        Ok(Next::Idle)
    }
}

/// Derives `NetworkStatus` `status`.
#[derive(Debug, Default)]
pub struct NetworkStatusController;

/// The ID of the network status resource.
pub const NETWORK_STATUS_ID: &str = "status";

impl Controller for NetworkStatusController {
    fn name(&self) -> &'static str {
        "network.StatusController"
    }

    fn inputs(&self) -> Vec<Input> {
        vec![
            Input::weak(Namespace::Network, Kind::NodeAddress),
            Input::weak(Namespace::Network, Kind::RouteStatus),
            Input::weak(Namespace::Network, Kind::HostnameStatus),
            Input::weak(Namespace::Network, Kind::EtcFileStatus),
            Input::weak(Namespace::Network, Kind::OperatorStatus),
        ]
    }

    fn outputs(&self) -> Vec<Output> {
        vec![Output::exclusive(Namespace::Network, Kind::NetworkStatus)]
    }

    fn reconcile(&mut self, ctx: &mut Ctx<'_>) -> Result<Next, ControllerError> {
        let current = ctx
            .get::<NodeAddress>(Namespace::Network, nodeaddress::CURRENT)
            .map(|n| n.addresses.clone());
        let has_default_route =
            ctx.list::<RouteStatus>(Namespace::Network).iter().any(|(_, r)| r.dst.is_none());
        let has_hostname = ctx.get::<HostnameStatus>(Namespace::Network, HOSTNAME_ID).is_some();
        let files = ["hosts", "resolv.conf"];
        let etc = files.iter().all(|f| ctx.get::<EtcFileStatus>(Namespace::Network, f).is_some());
        let mut status: NetworkStatus = nodeaddress::network_status(
            &current.unwrap_or_default(),
            has_default_route,
            has_hostname,
            etc,
        );
        if !(status.address_ready && status.connectivity_ready) {
            status.waiting = ctx
                .list::<OperatorStatus>(Namespace::Network)
                .into_iter()
                .filter(|(_, o)| o.address.is_none() && !o.reason.is_empty())
                .map(|(id, o)| format!("{id}: {}", o.reason))
                .collect();
        }
        ctx.put(Namespace::Network, NETWORK_STATUS_ID, status)?;
        Ok(Next::Idle)
    }
}
