// SPDX-License-Identifier: Apache-2.0
//! The controllers: each pass reads the kinds from the store, asks the state machines
//! ([`crate::states`]) which node call each resource needs, makes it through a [`NodeApi`],
//! and writes the status back guarded by the version it read (a conflict re-reads and
//! recomputes). Pools (TalosControlPlane, TalosWorker) create, update and tear down their
//! TalosMachines, `<pool>-<address>`, the rolling gate holding version changes to
//! `maxUnavailable` at a time. Only the elected leader runs passes.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::kinds::{
    self, Body, Condition, DeletionPolicy, MachineSpec, Mode, PoolSpec, Status, MODE_ANNOTATION,
    TCP, TM, TW,
};
use crate::states::{self, Action, Call, CallError, Children, Obs, State, Step};
use crate::store::{Phase, Ref, Resource, Store, StoreError};

/// A TalosMachine with this finalizer is reset before it goes.
pub const RESET_FINALIZER: &str = "keelson.dev/reset";
/// A pool with this finalizer tears its machines down before it goes.
pub const CHILDREN_FINALIZER: &str = "keelson.dev/machines";
/// Where a control plane's admin kubeconfig is kept (ID: the control plane's name).
pub const KUBECONFIGS: &str = "Kubeconfigs.keelson.dev";
/// Attempts at writing one resource's status before the pass moves on.
const WRITE_ATTEMPTS: usize = 4;

/// Talos's machine API, as the controllers use it. Every call is bounded by the
/// implementation's timeout; `insecure` is maintenance mode (TLS without a client
/// certificate), otherwise mutual TLS.
pub trait NodeApi {
    /// `Version`: the tag the node runs (`v1.13.0`).
    fn version(&mut self, address: &str) -> Result<String, CallError>;
    /// `Disks` over the maintenance API: how many disks.
    fn disks(&mut self, address: &str) -> Result<usize, CallError>;
    /// `Version`'s boot report (keelson's `keelson_boot`: `BOOTIF=` and `keelson.image=` of
    /// a network boot), over the maintenance API when `insecure`; `None` when the node
    /// reports no boot. The default reports none (nodes that are not keelson).
    fn boot_report(
        &mut self,
        address: &str,
        insecure: bool,
    ) -> Result<Option<states::BootReport>, CallError> {
        let _ = (address, insecure);
        Ok(None)
    }
    /// `ApplyConfiguration{mode: AUTO}`. `Ok(true)`: the node closed the connection as it
    /// rebooted (counted as success, as Talos's own clients do).
    fn apply_configuration(
        &mut self,
        address: &str,
        insecure: bool,
        config: &str,
        dry_run: bool,
    ) -> Result<bool, CallError>;
    /// `ServiceInfo(name)`.
    fn service_info(&mut self, address: &str, name: &str) -> Result<states::ServiceObs, CallError>;
    fn bootstrap(&mut self, address: &str) -> Result<(), CallError>;
    /// `Kubeconfig`: the admin kubeconfig the node mints.
    fn kubeconfig(&mut self, address: &str) -> Result<String, CallError>;
    /// `Reset{graceful: false, reboot: true}`.
    fn reset(&mut self, address: &str) -> Result<(), CallError>;
    /// `Upgrade{image}`.
    fn upgrade(&mut self, address: &str, image: &str) -> Result<(), CallError>;
}

/// The installer image for a version (talos-operator's default).
pub fn installer_image(version: &str) -> String {
    format!("ghcr.io/siderolabs/installer:{version}")
}

/// A stored kubeconfig.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kubeconfig {
    pub kubeconfig: String,
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn sha256_hex(s: &str) -> String {
    Sha256::digest(s.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// A child machine's name: `<pool>-<address>`, dots and colons as dashes.
pub fn child_name(pool: &str, address: &str) -> String {
    let a: String =
        address.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
    format!("{pool}-{}", a.to_ascii_lowercase())
}

type Machine = Resource<Body<MachineSpec>>;
type Pool = Resource<Body<PoolSpec>>;

/// Apply a step to a status: state, condition with time and event, recorded facts, backoff.
/// Returns when to look again.
fn apply_step(
    status: &mut Status,
    step: &Step,
    now: u64,
    config: Option<&str>,
    want_version: &str,
    kube_version: &str,
) -> Duration {
    let mut requeue = states::RESYNC;
    if let Some(next) = step.next {
        status.state = Some(next);
    }
    for a in &step.actions {
        match a {
            Action::RecordApplied => {
                if let Some(c) = config {
                    status.config = kinds::redact(c);
                    status.config_hash = sha256_hex(c);
                }
                status.observed_version = want_version.to_owned();
            }
            Action::RecordVersion => status.observed_version = want_version.to_owned(),
            Action::RecordKubeVersion => status.observed_kube_version = kube_version.to_owned(),
            Action::Failed => {
                status.failures = status.failures.saturating_add(1);
                let b = states::backoff(status.failures);
                status.next_attempt = now + b.as_secs();
                requeue = requeue.min(b);
            }
            Action::Succeeded => {
                status.failures = 0;
                status.next_attempt = 0;
            }
            Action::Requeue(d) => requeue = requeue.min(*d),
            Action::Stop => requeue = Duration::MAX,
        }
    }
    if let Some(c) = &step.condition {
        // The same condition again (a poll that found nothing new) is not a new event.
        let same = status.conditions.iter().any(|x| {
            x.kind == c.kind
                && x.status == c.status
                && x.reason == c.reason
                && x.message == c.message
        });
        if !same {
            status.record(
                Condition {
                    kind: c.kind.into(),
                    status: c.status.into(),
                    reason: c.reason.into(),
                    message: base::names::escape(&c.message, 512),
                    last_transition_time: now,
                },
                c.warning,
            );
        }
    }
    requeue
}

/// The controllers over one store and one node client.
#[derive(Debug)]
pub struct Reconciler<N> {
    pub store: Store,
    pub node: N,
    pub namespace: String,
    /// When each resource is next due, for the version it had: a resource whose version
    /// changed (a new spec, or this reconciler's own write) is due at once.
    due: HashMap<(&'static str, String), (i64, Instant)>,
}

impl<N: NodeApi> Reconciler<N> {
    pub fn new(store: Store, node: N, namespace: &str) -> Self {
        Self { store, node, namespace: namespace.to_owned(), due: HashMap::new() }
    }

    /// `Some(wait)` when the resource is not due yet.
    fn not_due(
        &self,
        kind: &'static str,
        id: &str,
        version: i64,
        now: Instant,
    ) -> Option<Duration> {
        match self.due.get(&(kind, id.to_owned())) {
            Some((v, at)) if *v == version && *at > now => Some(*at - now),
            _ => None,
        }
    }

    fn set_due(&mut self, kind: &'static str, id: &str, version: i64, after: Duration) {
        let at = Instant::now().checked_add(after.min(Duration::from_secs(86_400)));
        if let Some(at) = at {
            self.due.insert((kind, id.to_owned()), (version, at));
        }
    }

    /// One pass over every resource; returns how soon the next pass is wanted.
    pub fn pass(&mut self) -> Result<Duration, StoreError> {
        let mut next = states::RESYNC;
        let now = Instant::now();
        let mut seen = Vec::new();
        for kind in [TCP, TW] {
            let (pools, _) = self.store.list::<Body<PoolSpec>>(&self.namespace, kind)?;
            // Pools make no node calls while they wait (their machines' states are read from
            // the store), so they are looked at every pass, their backoff aside.
            for p in pools {
                next = next.min(self.pool(kind, p)?);
            }
        }
        let (machines, _) = self.store.list::<Body<MachineSpec>>(&self.namespace, TM)?;
        for m in machines {
            let (id, v) = (m.metadata.id.clone(), m.metadata.version);
            seen.push((TM, id.clone()));
            if let Some(wait) = self.not_due(TM, &id, v, now) {
                next = next.min(wait);
                continue;
            }
            let wait = self.machine_with_retry(m)?;
            self.set_due(TM, &id, v, wait);
            next = next.min(wait);
        }
        self.due.retain(|k, _| seen.contains(k));
        Ok(next)
    }

    fn fresh<S: DeserializeOwned>(
        &mut self,
        kind: &str,
        id: &str,
    ) -> Result<Option<Resource<S>>, StoreError> {
        self.store.get(&self.namespace, kind, id)
    }

    fn machine_with_retry(&mut self, mut m: Machine) -> Result<Duration, StoreError> {
        for _ in 0..WRITE_ATTEMPTS {
            match self.machine(m.clone()) {
                Err(e) if e.is_conflict() => {
                    log::debug!("{}: {e}; reading again", m.metadata.id);
                    match self.fresh(TM, &m.metadata.id)? {
                        Some(f) => m = f,
                        None => return Ok(states::RESYNC),
                    }
                }
                other => return other,
            }
        }
        Ok(Duration::ZERO)
    }

    /// Whether the parent a machine names exists.
    fn parent_found(&mut self, s: &MachineSpec) -> Result<bool, StoreError> {
        let parent = match (&s.control_plane_ref, &s.worker_ref) {
            (Some(p), _) => Some((TCP, p)),
            (None, Some(p)) => Some((TW, p)),
            (None, None) => None,
        };
        match parent {
            None => Ok(true),
            Some((kind, id)) => Ok(self.fresh::<serde_json::Value>(kind, &id.clone())?.is_some()),
        }
    }

    /// One TalosMachine: one call, one step, one guarded write.
    fn machine(&mut self, mut m: Machine) -> Result<Duration, StoreError> {
        let before = m.clone();
        let mode = m.spec.mode();
        if mode == Mode::Disable {
            return Ok(states::RESYNC);
        }
        let now = now_secs();
        let address = m.spec.spec.endpoint.clone();
        if m.metadata.phase == Phase::TearingDown {
            return self.machine_delete(m, mode, now);
        }
        if m.spec.status.next_attempt > now {
            return Ok(Duration::from_secs(m.spec.status.next_attempt - now));
        }
        let spec = &m.spec.spec;
        let config =
            kinds::render_config(&spec.config, &spec.config_patches, &spec.additional_config);
        let parent_found = self.parent_found(&m.spec.spec)?;
        let status = &m.spec.status;
        let facts = states::MachineFacts {
            parent_found,
            pxe: spec.pxe_client_spec.is_some(),
            pxe_mac: spec
                .pxe_client_spec
                .as_ref()
                .map(|p| p.mac_address.to_ascii_lowercase().replace('-', ":"))
                .unwrap_or_default(),
            import: mode == Mode::Import,
            dry_run: mode == Mode::DryRun,
            want_version: spec.version.clone(),
            observed_version: status.observed_version.clone(),
            config_drift: config.as_ref().is_ok_and(|c| sha256_hex(c) != status.config_hash),
        };
        let state = status.state;
        let call = states::machine_call(state, &facts);
        let obs = match (&call, &config) {
            (Some(Call::Apply { .. }), Err(e)) => {
                // The configuration cannot be rendered: say so, do not call the node.
                let step = Step {
                    next: state,
                    actions: vec![Action::Failed],
                    condition: Some(states::Cond {
                        kind: "ConfigApplied",
                        status: "False",
                        reason: "ConfigInvalid",
                        message: e.clone(),
                        warning: true,
                    }),
                };
                return self.write_machine(m, &before, &step, now, None);
            }
            (Some(c), _) => self.perform(c, &address, config.as_deref().unwrap_or("")),
            (None, _) => Obs::None,
        };
        let step = states::machine_step(state, &facts, &obs);
        if step.next != state || step.condition.is_some() {
            log::info!(
                "TalosMachine {}: {} -> {}{}",
                m.metadata.id,
                state.map_or("(new)", State::name),
                step.next.map_or("(none)", State::name),
                step.condition.as_ref().map_or(String::new(), |c| format!(" ({})", c.reason))
            );
        }
        if mode == Mode::Import {
            m.spec.status.imported = true;
        }
        // Machines that will be reset when deleted carry a finalizer until then.
        let wants_finalizer = m.spec.spec.deletion_policy == DeletionPolicy::Reset
            && step.next != Some(State::Orphaned)
            && step.next.is_some();
        if wants_finalizer && !m.metadata.finalizers.iter().any(|f| f == RESET_FINALIZER) {
            m.metadata.finalizers.push(RESET_FINALIZER.into());
        }
        if step.next == Some(State::Orphaned) {
            m.metadata.finalizers.retain(|f| f != RESET_FINALIZER);
        }
        self.write_machine(m, &before, &step, now, config.ok().as_deref())
    }

    fn write_machine(
        &mut self,
        mut m: Machine,
        before: &Machine,
        step: &Step,
        now: u64,
        config: Option<&str>,
    ) -> Result<Duration, StoreError> {
        let want = m.spec.spec.version.clone();
        let requeue = apply_step(&mut m.spec.status, step, now, config, &want, "");
        if m != *before {
            self.store.update(&mut m)?;
        }
        Ok(requeue)
    }

    fn machine_delete(
        &mut self,
        mut m: Machine,
        mode: Mode,
        now: u64,
    ) -> Result<Duration, StoreError> {
        let before = m.clone();
        let needs_reset = m.metadata.finalizers.iter().any(|f| f == RESET_FINALIZER);
        if needs_reset {
            let skip = mode == Mode::DryRun
                || m.spec.spec.deletion_policy == DeletionPolicy::Preserve
                || m.spec.status.state == Some(State::Orphaned);
            if !skip {
                if m.spec.status.next_attempt > now {
                    return Ok(Duration::from_secs(m.spec.status.next_attempt - now));
                }
                if let Err(e) = self.node.reset(&m.spec.spec.endpoint) {
                    let step = Step {
                        next: m.spec.status.state,
                        actions: vec![Action::Failed],
                        condition: Some(states::Cond {
                            kind: "Deleting",
                            status: "False",
                            reason: "ResetFailed",
                            message: format!("Reset: {e:?}"),
                            warning: true,
                        }),
                    };
                    return self.write_machine(m, &before, &step, now, None);
                }
                log::info!("TalosMachine {}: reset", m.metadata.id);
            }
            m.metadata.finalizers.retain(|f| f != RESET_FINALIZER);
            self.store.update(&mut m)?;
        }
        if m.metadata.finalizers.is_empty() {
            let (ns, id, v, owner) = (
                m.metadata.namespace.clone(),
                m.metadata.id.clone(),
                m.metadata.version,
                m.metadata.owner.clone(),
            );
            match self.store.destroy(&ns, TM, &id, v, &owner) {
                Ok(()) | Err(StoreError::NotFound(_)) => log::info!("TalosMachine {id}: deleted"),
                Err(e) => return Err(e),
            }
        }
        Ok(states::RESYNC)
    }

    /// Make one node call; the answer is an observation.
    fn perform(&mut self, call: &Call, address: &str, config: &str) -> Obs {
        match call {
            Call::Boot => match self.node.boot_report(address, true) {
                Ok(Some(r)) => Obs::Booted(Ok(r)),
                Ok(None) => Obs::Disks(self.node.disks(address)),
                Err(e) => Obs::Booted(Err(e)),
            },
            Call::Apply { insecure, dry_run } => {
                Obs::Apply(self.node.apply_configuration(address, *insecure, config, *dry_run))
            }
            Call::Readiness { want_version } => {
                let kubelet = self.node.service_info(address, "kubelet");
                // A network-booted node runs the image it was served: its name is the
                // version (the installer's tag otherwise).
                let version =
                    want_version.as_ref().map(|_| match self.node.boot_report(address, false) {
                        Ok(Some(r)) if !r.image.is_empty() => Ok(r.image),
                        Ok(_) => self.node.version(address),
                        Err(e) => Err(e),
                    });
                Obs::Readiness { kubelet, version }
            }
            Call::Upgrade { version } => Obs::Upgrade(match self.node.version(address) {
                Ok(v) if &v == version => Ok(false),
                Ok(_) => self.node.upgrade(address, &installer_image(version)).map(|()| true),
                Err(e) => Err(e),
            }),
            Call::Bootstrap => Obs::Bootstrap(self.node.bootstrap(address)),
            Call::Kubeconfig => Obs::Kubeconfig(Err(CallError::Garbage("unused".into()))),
            // Talos's upgrade-k8s flow patches the machine config through COSI and applies it
            // with NO_REBOOT: not done yet, and said so.
            Call::UpgradeKubernetes { .. } => Obs::UpgradeKubernetes(Err(CallError::Status {
                code: 12,
                message: "Kubernetes upgrades are not implemented yet".into(),
            })),
        }
    }

    /// A pool's desired machines: (name, spec, annotations), the rolling gate applied.
    fn desired_children(
        &mut self,
        kind: &str,
        p: &Pool,
        existing: &BTreeMap<String, Machine>,
    ) -> Vec<(String, MachineSpec)> {
        let spec = &p.spec.spec;
        let mut out = Vec::new();
        for m in &spec.metal_spec.machines {
            let Some(address) = &m.address else { continue };
            let mut patches = spec.config_patches.clone();
            patches.extend(m.config_patches.iter().cloned());
            let mut additional = spec.additional_config.clone();
            additional.extend(m.additional_config.iter().cloned());
            let (cp, w) = if kind == TCP {
                (Some(p.metadata.id.clone()), None)
            } else {
                (None, Some(p.metadata.id.clone()))
            };
            out.push((
                child_name(&p.metadata.id, address),
                MachineSpec {
                    endpoint: address.clone(),
                    version: m.version.clone().unwrap_or_else(|| spec.version.clone()),
                    control_plane_ref: cp,
                    worker_ref: w,
                    pxe_client_spec: m.pxe_client_spec.clone(),
                    config: spec.config.clone(),
                    config_patches: patches,
                    additional_config: additional,
                    deletion_policy: spec.deletion_policy,
                },
            ));
        }
        // The rolling gate: existing machines keep their version until their turn.
        let gate: Vec<(bool, bool)> = out
            .iter()
            .map(|(name, want)| match existing.get(name) {
                Some(e) => (
                    e.spec.spec.version != want.version,
                    e.spec.status.state == Some(State::Available)
                        && e.spec.status.observed_version == e.spec.spec.version,
                ),
                None => (false, true),
            })
            .collect();
        let allowed = states::rollout(&gate, spec.rollout_strategy.max_unavailable);
        for (i, (name, want)) in out.iter_mut().enumerate() {
            if let (Some(e), Some(false)) = (existing.get(name.as_str()), allowed.get(i)) {
                want.version = e.spec.spec.version.clone();
            }
        }
        out
    }

    /// A TalosControlPlane or TalosWorker: its machines, then its own step.
    fn pool(&mut self, kind: &str, mut p: Pool) -> Result<Duration, StoreError> {
        let before = p.clone();
        let mode = p.spec.mode();
        if mode == Mode::Disable {
            return Ok(states::RESYNC);
        }
        let now = now_secs();
        let ns = self.namespace.clone();
        let me = Ref { namespace: ns.clone(), kind: kind.into(), id: p.metadata.id.clone() };
        let (all, _) = self.store.list::<Body<MachineSpec>>(&ns, TM)?;
        let existing: BTreeMap<String, Machine> = all
            .into_iter()
            .filter(|m| m.metadata.owner_refs.contains(&me))
            .map(|m| (m.metadata.id.clone(), m))
            .collect();
        if p.metadata.phase == Phase::TearingDown {
            for m in existing.values() {
                if m.metadata.phase != Phase::TearingDown {
                    self.store.teardown(&ns, TM, &m.metadata.id)?;
                }
            }
            if existing.is_empty() {
                p.metadata.finalizers.retain(|f| f != CHILDREN_FINALIZER);
                self.store.update(&mut p)?;
                if p.metadata.finalizers.is_empty() {
                    let (id, v, owner) =
                        (p.metadata.id.clone(), p.metadata.version, p.metadata.owner.clone());
                    self.store.destroy(&ns, kind, &id, v, &owner)?;
                    log::info!("{kind} {id}: deleted");
                }
                return Ok(states::RESYNC);
            }
            return Ok(Duration::from_secs(20));
        }
        let since = p.spec.status.next_attempt;
        if since > now && p.metadata.phase != Phase::TearingDown {
            return Ok(Duration::from_secs(since - now));
        }
        if kind == TW {
            let cp = p.spec.spec.control_plane_ref.clone().unwrap_or_default();
            if self.fresh::<serde_json::Value>(TCP, &cp)?.is_none() {
                let step = Step {
                    next: p.spec.status.state,
                    actions: vec![Action::Requeue(Duration::from_secs(5))],
                    condition: Some(states::Cond {
                        kind: "Ready",
                        status: "False",
                        reason: "ControlPlaneNotFound",
                        message: format!("no TalosControlPlane {cp}"),
                        warning: true,
                    }),
                };
                return self.write_pool(p, &before, &step, now);
            }
        }
        // The machines.
        let desired = self.desired_children(kind, &p, &existing);
        let mut annotations = BTreeMap::new();
        if mode != Mode::Reconcile {
            if let Some(v) = p.spec.annotations.get(MODE_ANNOTATION) {
                annotations.insert(MODE_ANNOTATION.to_owned(), v.clone());
            } else if mode == Mode::Import {
                annotations.insert(MODE_ANNOTATION.to_owned(), "import".to_owned());
            } else if mode == Mode::DryRun {
                annotations.insert(MODE_ANNOTATION.to_owned(), "dryrun".to_owned());
            }
        }
        for (name, spec) in &desired {
            match existing.get(name) {
                None => {
                    let mut m = Resource::new(
                        &ns,
                        TM,
                        name,
                        Body {
                            annotations: annotations.clone(),
                            spec: spec.clone(),
                            ..Default::default()
                        },
                    );
                    m.metadata.owner_refs.push(me.clone());
                    match self.store.create(&mut m) {
                        Ok(()) => {
                            log::info!("{kind} {}: created TalosMachine {name}", p.metadata.id)
                        }
                        Err(StoreError::AlreadyExists(_)) => {
                            log::warn!("TalosMachine {name} exists and is not {}'s", p.metadata.id)
                        }
                        Err(e) => return Err(e),
                    }
                }
                Some(e) if &e.spec.spec != spec || e.spec.annotations != annotations => {
                    let (spec, annotations) = (spec.clone(), annotations.clone());
                    self.store.modify::<Body<MachineSpec>>(&ns, TM, name, |m| {
                        m.spec.spec = spec.clone();
                        m.spec.annotations = annotations.clone();
                    })?;
                }
                Some(_) => {}
            }
        }
        for (name, m) in &existing {
            if !desired.iter().any(|(n, _)| n == name) && m.metadata.phase != Phase::TearingDown {
                log::info!("{kind} {}: TalosMachine {name} no longer listed", p.metadata.id);
                self.store.teardown(&ns, TM, name)?;
            }
        }
        if !p.metadata.finalizers.iter().any(|f| f == CHILDREN_FINALIZER) {
            p.metadata.finalizers.push(CHILDREN_FINALIZER.into());
        }
        // Its own step, on the machines' states (machineRef entries count as machines too).
        let mut children = Children {
            total: p.spec.spec.metal_spec.machines.len(),
            available: existing
                .values()
                .filter(|m| m.spec.status.state == Some(State::Available))
                .count(),
        };
        for r in p.spec.spec.metal_spec.machines.iter().filter_map(|m| m.machine_ref.clone()) {
            let m = self.fresh::<Body<MachineSpec>>(TM, &r)?;
            if m.is_some_and(|m| m.spec.status.state == Some(State::Available)) {
                children.available += 1;
            }
        }
        let state = p.spec.status.state;
        let step = if kind == TW {
            states::worker_step(state, mode == Mode::Import, &children)
        } else {
            let facts = states::ControlPlaneFacts {
                import: mode == Mode::Import,
                dry_run: mode == Mode::DryRun,
                children,
                want_kube_version: p.spec.spec.kube_version.clone(),
                observed_kube_version: p.spec.status.observed_kube_version.clone(),
            };
            let call = states::control_plane_call(state, &facts);
            let first = self.first_address(&p)?;
            let obs = match (call, first) {
                (None, _) => Obs::None,
                (Some(_), None) => Obs::None,
                (Some(Call::Kubeconfig), Some(a)) => {
                    Obs::Kubeconfig(self.node.kubeconfig(&a).and_then(|k| {
                        self.store_kubeconfig(&p.metadata.id, k)
                            .map_err(|e| CallError::Garbage(format!("storing it: {e}")))
                    }))
                }
                (Some(c), Some(a)) => self.perform(&c, &a, ""),
            };
            states::control_plane_step(state, &facts, &obs)
        };
        if step.next != state {
            log::info!(
                "{kind} {}: {} -> {}",
                p.metadata.id,
                state.map_or("(new)", State::name),
                step.next.map_or("(none)", State::name)
            );
        }
        if mode == Mode::Import {
            p.spec.status.imported = true;
        }
        self.write_pool(p, &before, &step, now)
    }

    /// The address Bootstrap and Kubeconfig go to: the first listed machine.
    fn first_address(&mut self, p: &Pool) -> Result<Option<String>, StoreError> {
        let Some(m) = p.spec.spec.metal_spec.machines.first() else { return Ok(None) };
        if let Some(a) = &m.address {
            return Ok(Some(a.clone()));
        }
        let Some(r) = &m.machine_ref else { return Ok(None) };
        Ok(self.fresh::<Body<MachineSpec>>(TM, &r.clone())?.map(|m| m.spec.spec.endpoint))
    }

    fn store_kubeconfig(&mut self, id: &str, k: String) -> Result<(), StoreError> {
        let ns = self.namespace.clone();
        match self.store.get::<Kubeconfig>(&ns, KUBECONFIGS, id)? {
            Some(mut r) => {
                if r.spec.kubeconfig != k {
                    r.spec.kubeconfig = k;
                    self.store.update(&mut r)?;
                }
                Ok(())
            }
            None => self.store.create(&mut Resource::new(
                &ns,
                KUBECONFIGS,
                id,
                Kubeconfig { kubeconfig: k },
            )),
        }
    }

    fn write_pool(
        &mut self,
        mut p: Pool,
        before: &Pool,
        step: &Step,
        now: u64,
    ) -> Result<Duration, StoreError> {
        let kube = p.spec.spec.kube_version.clone();
        let requeue = apply_step(&mut p.spec.status, step, now, None, "", &kube);
        if p != *before {
            // A conflict here is left to the next pass, which reads afresh.
            match self.store.update(&mut p) {
                Ok(()) => {}
                Err(e) if e.is_conflict() => return Ok(Duration::ZERO),
                Err(e) => return Err(e),
            }
        }
        Ok(requeue)
    }
}
