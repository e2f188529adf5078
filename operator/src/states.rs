// SPDX-License-Identifier: Apache-2.0
//! The kinds' state machines, without I/O: for each state, the one node call to make
//! ([`machine_call`], [`control_plane_call`]), and from the state, what is known and what that
//! call answered, the next state, the follow-up actions and the condition that says why
//! ([`machine_step`], [`control_plane_step`], [`worker_step`]). The states and their names
//! are alperencelik/talos-operator's (`api/v1alpha1/common.go`).

use std::time::Duration;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum State {
    Booting,
    Pending,
    Installing,
    Available,
    Upgrading,
    Orphaned,
    Bootstrapped,
    Ready,
    UpgradingKubernetes,
    KubernetesUpgradeFailed,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            Self::Booting => "Booting",
            Self::Pending => "Pending",
            Self::Installing => "Installing",
            Self::Available => "Available",
            Self::Upgrading => "Upgrading",
            Self::Orphaned => "Orphaned",
            Self::Bootstrapped => "Bootstrapped",
            Self::Ready => "Ready",
            Self::UpgradingKubernetes => "UpgradingKubernetes",
            Self::KubernetesUpgradeFailed => "KubernetesUpgradeFailed",
        }
    }
}

/// How often a waiting state looks again (talos-operator polls every 30 s).
pub const POLL: Duration = Duration::from_secs(30);
/// A settled resource is looked at again after this long.
pub const RESYNC: Duration = Duration::from_secs(60);

/// Why a node call did not give an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// No answer in time.
    Timeout,
    /// Connection refused, reset, TLS failure: the node is not (yet) serving.
    Unreachable(String),
    /// An answer that is not what the call returns.
    Garbage(String),
    /// A gRPC status other than OK.
    Status { code: i32, message: String },
}

impl CallError {
    fn reason(&self) -> &'static str {
        match self {
            Self::Timeout => "NodeTimeout",
            Self::Unreachable(_) => "NodeUnreachable",
            Self::Garbage(_) => "NodeAnsweredGarbage",
            Self::Status { .. } => "NodeRefused",
        }
    }

    fn message(&self) -> String {
        match self {
            Self::Timeout => "no answer in time".into(),
            Self::Unreachable(m) | Self::Garbage(m) => m.clone(),
            Self::Status { code, message } => format!("gRPC status {code}: {message}"),
        }
    }
}

/// gRPC's ALREADY_EXISTS.
pub const ALREADY_EXISTS: i32 = 6;

/// What a node says of its network boot: the NIC the firmware booted from and the image.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BootReport {
    /// `aa:bb:cc:dd:ee:ff`, or empty.
    pub mac: String,
    /// The image (version) name, or empty.
    pub image: String,
}

/// A service's state as ServiceInfo reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceObs {
    pub state: String,
    pub healthy: bool,
}

/// The node calls a state asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// `Version` over the maintenance API (TLS without a client certificate): the boot the
    /// node reports (`BOOTIF=`, `keelson.image=` of a network boot); when it reports none (not
    /// a network boot, or not keelson), `Disks` there instead.
    Boot,
    /// `ApplyConfiguration{mode: AUTO}`; `insecure` in maintenance mode.
    Apply {
        insecure: bool,
        dry_run: bool,
    },
    /// `ServiceInfo("kubelet")`, and `Version` when a version is awaited.
    Readiness {
        want_version: Option<String>,
    },
    /// `Version`, then `Upgrade` unless already there; for a node that reports a network
    /// boot, its boot report, then `Reboot` into the image the boot service now serves.
    Upgrade {
        version: String,
    },
    Bootstrap,
    Kubeconfig,
    /// `ApplyConfiguration{mode: NO_REBOOT}` (mutual TLS) of the configuration re-rendered
    /// with the kubelet of Kubernetes `version`: the node restarts its kubelet, no reboot.
    ApplyKubelet {
        version: String,
    },
}

/// What a call answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Obs {
    /// No call was made.
    None,
    Disks(Result<usize, CallError>),
    /// The node's boot report (an error is `Version`'s).
    Booted(Result<BootReport, CallError>),
    /// `Ok(true)`: the node closed the connection as it rebooted into the install, which
    /// counts as success.
    Apply(Result<bool, CallError>),
    Readiness {
        kubelet: Result<ServiceObs, CallError>,
        version: Option<Result<String, CallError>>,
    },
    /// `Ok(true)`: an upgrade started; `Ok(false)`: the node already runs the version.
    Upgrade(Result<bool, CallError>),
    Bootstrap(Result<(), CallError>),
    Kubeconfig(Result<(), CallError>),
    ApplyKubelet(Result<(), CallError>),
}

/// What to do besides moving to the next state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Record the configuration (hash) and version just applied.
    RecordApplied,
    /// Record the version the node runs.
    RecordVersion,
    RecordKubeVersion,
    /// A machine: record the kubelet version just applied as pending, from now (the bound of
    /// its rollout runs from here); clear it once healthy.
    StartKubelet,
    ClearKubelet,
    /// A pool: record the spec a kubelet rollout failed with / forget it.
    RecordFailedSpec,
    ClearFailedSpec,
    /// Count a failure (backoff) / clear the count.
    Failed,
    Succeeded,
    /// Look again after this long.
    Requeue(Duration),
    /// Stop reconciling this resource.
    Stop,
}

/// A condition to set (type, status, reason, message); its time is the reconciler's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cond {
    pub kind: &'static str,
    pub status: &'static str,
    pub reason: &'static str,
    pub message: String,
    pub warning: bool,
}

fn cond(kind: &'static str, status: &'static str, reason: &'static str, msg: &str) -> Cond {
    Cond { kind, status, reason, message: msg.to_owned(), warning: false }
}

fn warn(kind: &'static str, reason: &'static str, message: String) -> Cond {
    Cond { kind, status: "False", reason, message, warning: true }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub next: Option<State>,
    pub actions: Vec<Action>,
    /// `None`: nothing new to say (no condition, no event).
    pub condition: Option<Cond>,
}

fn stay(state: Option<State>, c: Option<Cond>, after: Duration) -> Step {
    Step { next: state, actions: vec![Action::Requeue(after)], condition: c }
}

fn failed(state: Option<State>, kind: &'static str, what: &str, e: &CallError) -> Step {
    Step {
        next: state,
        actions: vec![Action::Failed],
        condition: Some(warn(kind, e.reason(), format!("{what}: {}", e.message()))),
    }
}

fn go(next: State, mut actions: Vec<Action>, c: Cond) -> Step {
    actions.push(Action::Succeeded);
    actions.push(Action::Requeue(Duration::ZERO));
    Step { next: Some(next), actions, condition: Some(c) }
}

/// What a TalosMachine's step knows besides the node's answers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MachineFacts {
    /// The parent named by controlPlaneRef/workerRef exists (true when none is named).
    pub parent_found: bool,
    pub pxe: bool,
    /// `pxeClientSpec.macAddress`, lowercase `aa:bb:…` (empty without one).
    pub pxe_mac: String,
    pub import: bool,
    pub dry_run: bool,
    /// The version asked for, and the one last applied or seen.
    pub want_version: String,
    pub observed_version: String,
    /// The rendered configuration differs from the one last applied.
    pub config_drift: bool,
    /// The Kubernetes version its spec asks of its kubelet, and the one last seen healthy.
    pub want_kube_version: String,
    pub observed_kube_version: String,
    /// A kubelet applied and not healthy yet: its version, and the time left of the bound
    /// (zero: overdue).
    pub kubelet_pending: String,
    pub kubelet_left: Duration,
    /// The bound itself (for messages).
    pub kubelet_bound: Duration,
}

impl MachineFacts {
    fn kube_drift(&self) -> bool {
        !self.want_kube_version.is_empty() && self.want_kube_version != self.observed_kube_version
    }
}

/// The call a TalosMachine in `state` makes.
pub fn machine_call(state: Option<State>, f: &MachineFacts) -> Option<Call> {
    if !f.parent_found {
        return None;
    }
    let kubelet = || Call::ApplyKubelet { version: f.want_kube_version.clone() };
    match state {
        None if f.import || f.pxe => None,
        None | Some(State::Pending) => Some(Call::Apply { insecure: true, dry_run: f.dry_run }),
        Some(State::Booting) => Some(Call::Boot),
        Some(State::Installing) => Some(Call::Readiness { want_version: None }),
        // A kubelet rollout: the spec changed while it waited (a fix) applies again; else
        // wait for it to be healthy.
        Some(State::Upgrading) if !f.kubelet_pending.is_empty() && f.config_drift => {
            Some(kubelet())
        }
        Some(State::Upgrading) if !f.kubelet_pending.is_empty() => {
            Some(Call::Readiness { want_version: None })
        }
        Some(State::Upgrading) => {
            Some(Call::Readiness { want_version: Some(f.want_version.clone()) })
        }
        // An adopted machine is left as it is (import).
        Some(State::Available) if f.import => None,
        Some(State::Available) if f.want_version != f.observed_version && !f.dry_run => {
            Some(Call::Upgrade { version: f.want_version.clone() })
        }
        Some(State::Available) if f.kube_drift() && !f.dry_run => Some(kubelet()),
        Some(State::Available) if f.config_drift => {
            Some(Call::Apply { insecure: false, dry_run: f.dry_run })
        }
        _ => None,
    }
}

/// A TalosMachine's transition.
pub fn machine_step(state: Option<State>, f: &MachineFacts, obs: &Obs) -> Step {
    if !f.parent_found {
        if state == Some(State::Orphaned) {
            return Step { next: state, actions: vec![Action::Stop], condition: None };
        }
        return Step {
            next: Some(State::Orphaned),
            actions: vec![Action::Stop],
            condition: Some(warn(
                "Ready",
                "ParentNotFound",
                "the parent cannot be resolved".into(),
            )),
        };
    }
    match (state, obs) {
        (Some(State::Orphaned), _) => {
            Step { next: state, actions: vec![Action::Stop], condition: None }
        }
        (None, Obs::None) if f.import => go(
            State::Available,
            vec![Action::RecordVersion, Action::RecordKubeVersion],
            cond("Ready", "True", "Imported", "adopted a running machine"),
        ),
        (None, Obs::None) if f.pxe => go(
            State::Booting,
            vec![],
            cond("Ready", "False", "WaitingForBoot", "waiting for the maintenance API to answer"),
        ),
        (Some(State::Booting), Obs::Disks(Ok(n))) => go(
            State::Pending,
            vec![],
            cond(
                "Ready",
                "False",
                "NodeAnswered",
                &format!("maintenance API answered Disks ({n} disks)"),
            ),
        ),
        (Some(State::Booting), Obs::Booted(Ok(r))) if !r.mac.is_empty() && r.mac != f.pxe_mac => {
            stay(
                state,
                Some(warn(
                    "Ready",
                    "WrongMachine",
                    format!(
                        "the node at this endpoint booted from {}, not {}",
                        r.mac,
                        if f.pxe_mac.is_empty() { "a PXE client" } else { &f.pxe_mac }
                    ),
                )),
                POLL,
            )
        }
        (Some(State::Booting), Obs::Booted(Ok(r))) => {
            let image = if r.image.is_empty() { "no image name" } else { &r.image };
            let mac = if r.mac.is_empty() { "an unnamed NIC" } else { &r.mac };
            // The version is recorded only when the node runs the one asked for.
            let actions =
                if r.image == f.want_version { vec![Action::RecordVersion] } else { vec![] };
            go(
                State::Pending,
                actions,
                cond(
                    "Ready",
                    "False",
                    "BootReported",
                    &format!("node booted from {mac} ({image})"),
                ),
            )
        }
        (Some(State::Booting), Obs::Booted(Err(e))) => stay(
            state,
            Some(Cond {
                warning: false,
                ..warn("Ready", "WaitingForBoot", format!("Version: {}", e.message()))
            }),
            POLL,
        ),
        (Some(State::Booting), Obs::Disks(Err(e))) => stay(
            state,
            Some(Cond {
                warning: false,
                ..warn("Ready", "WaitingForBoot", format!("Disks: {}", e.message()))
            }),
            POLL,
        ),
        (None | Some(State::Pending | State::Available), Obs::Apply(Ok(closed))) => {
            if f.dry_run {
                return stay(
                    state,
                    Some(cond(
                        "ConfigApplied",
                        "Unknown",
                        "DryRun",
                        "ApplyConfiguration dry run accepted",
                    )),
                    RESYNC,
                );
            }
            let msg = if *closed {
                "configuration applied; the node closed the connection to reboot"
            } else {
                "configuration applied"
            };
            go(
                State::Installing,
                vec![Action::RecordApplied],
                cond("ConfigApplied", "True", "Applied", msg),
            )
        }
        (None | Some(State::Pending | State::Available), Obs::Apply(Err(e))) => {
            failed(state, "ConfigApplied", "ApplyConfiguration", e)
        }
        (Some(State::Available | State::Upgrading), Obs::ApplyKubelet(Ok(()))) => go(
            State::Upgrading,
            vec![Action::RecordApplied, Action::StartKubelet],
            cond(
                "Ready",
                "False",
                "KubeletUpgrading",
                &format!(
                    "kubelet {} applied without a reboot; waiting for it to be healthy",
                    f.want_kube_version
                ),
            ),
        ),
        (Some(State::Available | State::Upgrading), Obs::ApplyKubelet(Err(e))) => {
            failed(state, "Ready", "ApplyConfiguration (kubelet)", e)
        }
        (Some(State::Upgrading), Obs::Readiness { kubelet, version: None })
            if !f.kubelet_pending.is_empty() =>
        {
            kubelet_step(state, f, kubelet)
        }
        (Some(State::Installing | State::Upgrading), Obs::Readiness { kubelet, version }) => {
            match (kubelet, version) {
                (Err(e), _) | (_, Some(Err(e))) => failed(state, "Ready", "ServiceInfo/Version", e),
                (Ok(_), Some(Ok(v))) if *v != f.want_version => stay(
                    state,
                    Some(cond(
                        "Ready",
                        "False",
                        "VersionPending",
                        &format!("node runs {v}, waiting for {}", f.want_version),
                    )),
                    POLL,
                ),
                (Ok(k), _) if k.state == "Running" && k.healthy => {
                    let mut a = vec![Action::RecordKubeVersion];
                    if version.is_some() {
                        a.push(Action::RecordVersion);
                    }
                    go(
                        State::Available,
                        a,
                        cond("Ready", "True", "KubeletRunning", "kubelet is running and healthy"),
                    )
                }
                (Ok(k), _) => stay(
                    state,
                    Some(cond(
                        "Ready",
                        "False",
                        "KubeletNotReady",
                        &format!(
                            "kubelet is {}{}",
                            k.state,
                            if k.healthy { "" } else { ", not healthy" }
                        ),
                    )),
                    POLL,
                ),
            }
        }
        (Some(State::Available), Obs::Upgrade(Ok(true))) => go(
            State::Upgrading,
            vec![Action::RecordApplied],
            cond("Ready", "False", "Upgrading", &format!("upgrading to {}", f.want_version)),
        ),
        (Some(State::Available), Obs::Upgrade(Ok(false))) => Step {
            next: state,
            actions: vec![
                Action::RecordVersion,
                Action::Succeeded,
                Action::Requeue(Duration::ZERO),
            ],
            condition: Some(cond(
                "Ready",
                "True",
                "VersionCurrent",
                &format!("node already runs {}", f.want_version),
            )),
        },
        (Some(State::Available), Obs::Upgrade(Err(e))) => failed(state, "Ready", "Upgrade", e),
        (Some(State::Available), Obs::None) => stay(state, None, RESYNC),
        // A call that does not belong to this state (the state changed under us): look again.
        (s, _) => stay(s, None, Duration::ZERO),
    }
}

/// Children's states, as a pool sees them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Children {
    pub total: usize,
    pub available: usize,
}

impl Children {
    pub fn all_available(&self) -> bool {
        self.total > 0 && self.available == self.total
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ControlPlaneFacts {
    pub import: bool,
    pub dry_run: bool,
    pub children: Children,
    pub want_kube_version: String,
    pub observed_kube_version: String,
}

/// The call a TalosControlPlane in `state` makes.
pub fn control_plane_call(state: Option<State>, f: &ControlPlaneFacts) -> Option<Call> {
    match state {
        Some(State::Available) if f.children.all_available() && !f.dry_run => Some(Call::Bootstrap),
        Some(State::Bootstrapped) => Some(Call::Kubeconfig),
        _ => None,
    }
}

/// A TalosControlPlane's transition.
pub fn control_plane_step(state: Option<State>, f: &ControlPlaneFacts, obs: &Obs) -> Step {
    let c = &f.children;
    match (state, obs) {
        (None, Obs::None) if f.import => go(
            State::Bootstrapped,
            vec![Action::RecordKubeVersion],
            cond("Bootstrapped", "True", "Imported", "adopted a running cluster"),
        ),
        (None, Obs::None) => go(
            State::Pending,
            vec![],
            cond("Available", "False", "ConfigReady", "machines created; waiting for them"),
        ),
        (Some(State::Pending), Obs::None) if c.all_available() => go(
            State::Available,
            vec![],
            cond(
                "Available",
                "True",
                "MachinesAvailable",
                &format!("{} of {} machines available", c.available, c.total),
            ),
        ),
        (Some(State::Pending), Obs::None) => stay(
            state,
            Some(cond(
                "Available",
                "False",
                "MachinesNotAvailable",
                &format!("{} of {} machines available", c.available, c.total),
            )),
            POLL,
        ),
        (Some(State::Available), Obs::Bootstrap(Ok(()))) => go(
            State::Bootstrapped,
            vec![],
            cond("Bootstrapped", "True", "Bootstrapped", "etcd bootstrapped on the first machine"),
        ),
        // Someone bootstrapped already (a lost status): that is what was wanted.
        (
            Some(State::Available),
            Obs::Bootstrap(Err(CallError::Status { code: ALREADY_EXISTS, .. })),
        ) => go(
            State::Bootstrapped,
            vec![],
            cond(
                "Bootstrapped",
                "True",
                "AlreadyBootstrapped",
                "the node says etcd is bootstrapped already",
            ),
        ),
        (Some(State::Available), Obs::Bootstrap(Err(e))) => {
            failed(state, "Bootstrapped", "Bootstrap", e)
        }
        (Some(State::Available), Obs::None) => stay(state, None, POLL),
        (Some(State::Bootstrapped | State::Ready), Obs::Kubeconfig(Ok(()))) => {
            let mut a = vec![];
            if state == Some(State::Bootstrapped) && f.observed_kube_version.is_empty() {
                a.push(Action::RecordKubeVersion);
            }
            go(
                State::Ready,
                a,
                cond("Ready", "True", "KubeconfigWritten", "admin kubeconfig stored"),
            )
        }
        (Some(State::Bootstrapped), Obs::Kubeconfig(Err(e))) => {
            failed(state, "Ready", "Kubeconfig", e)
        }
        (s, _) => stay(s, None, RESYNC),
    }
}

/// A TalosWorker's transition (no node calls of its own).
pub fn worker_step(state: Option<State>, import: bool, c: &Children) -> Step {
    match state {
        None if import => go(
            State::Ready,
            vec![Action::RecordKubeVersion],
            cond("Ready", "True", "Imported", "adopted running workers"),
        ),
        None => go(
            State::Pending,
            vec![],
            cond("Ready", "False", "ConfigReady", "machines created; waiting for them"),
        ),
        Some(State::Pending) if c.all_available() => go(
            State::Ready,
            vec![],
            cond(
                "Ready",
                "True",
                "MachinesAvailable",
                &format!("{} of {} machines available", c.available, c.total),
            ),
        ),
        Some(State::Pending) => stay(state, None, POLL),
        Some(State::Ready) if !c.all_available() => stay(
            state,
            Some(warn(
                "MachinesAvailable",
                "MachinesNotAvailable",
                format!("{} of {} machines available", c.available, c.total),
            )),
            POLL,
        ),
        s => stay(s, None, RESYNC),
    }
}

/// A machine's kubelet applied and awaited: healthy ends it; past the bound it is a failure
/// its pool reports (the machine keeps looking, and a spec change applies again).
fn kubelet_step(state: Option<State>, f: &MachineFacts, k: &Result<ServiceObs, CallError>) -> Step {
    let v = &f.kubelet_pending;
    match k {
        Ok(k) if k.state == "Running" && k.healthy => go(
            State::Available,
            vec![Action::RecordKubeVersion, Action::ClearKubelet],
            cond("Ready", "True", "KubeletRunning", &format!("kubelet {v} is running and healthy")),
        ),
        _ if f.kubelet_left.is_zero() => {
            let why = match k {
                Ok(k) => format!(
                    "kubelet is {}{}",
                    k.state,
                    if k.healthy { "" } else { ", not healthy" }
                ),
                Err(e) => format!("ServiceInfo: {}", e.message()),
            };
            stay(
                state,
                Some(warn(
                    "Ready",
                    KUBELET_UPGRADE_FAILED,
                    format!(
                        "kubelet {v} not healthy within {:?} of its apply: {why}",
                        f.kubelet_bound
                    ),
                )),
                POLL,
            )
        }
        Err(e) => failed(state, "Ready", "ServiceInfo", e),
        Ok(k) => stay(
            state,
            Some(cond(
                "Ready",
                "False",
                "KubeletNotReady",
                &format!(
                    "kubelet {v} is {}{}",
                    k.state,
                    if k.healthy { "" } else { ", not healthy" }
                ),
            )),
            KUBELET_POLL.min(f.kubelet_left),
        ),
    }
}

/// How often a rolled kubelet is looked at until healthy: a restart takes seconds, and the
/// next machine of the rollout waits for it (ServiceList is one cheap call).
pub const KUBELET_POLL: Duration = Duration::from_secs(5);

/// The reason a machine's kubelet rollout failed with.
pub const KUBELET_UPGRADE_FAILED: &str = "KubeletUpgradeFailed";

/// What a pool's kubelet rollout knows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KubeFacts {
    pub import: bool,
    pub dry_run: bool,
    /// The Kubernetes version asked for (a worker without one: its control plane's), and the
    /// one its machines last all ran.
    pub want: String,
    pub observed: String,
    pub total: usize,
    /// Machines Available with a healthy kubelet of `want`.
    pub at_want: usize,
    /// The first machine whose kubelet failed (`TalosMachine NAME: why`).
    pub failed: Option<String>,
    /// The spec differs from the one the last rollout failed with.
    pub spec_changed: bool,
    /// A worker waits for its control plane's rollout (kubelets are never newer than the
    /// API server: Kubernetes's version skew policy).
    pub blocked: bool,
}

/// A pool's kubelet rollout: `Some` step for the states it owns (Ready with a new
/// `kubeVersion`, UpgradingKubernetes, KubernetesUpgradeFailed), `None` otherwise. The
/// machines themselves are rolled by the gate ([`kube_rollout`]) and their own steps.
pub fn kube_step(state: Option<State>, f: &KubeFacts) -> Option<Step> {
    let drift = !f.want.is_empty() && f.want != f.observed;
    match state {
        Some(State::Ready) if drift && !f.import && !f.dry_run && !f.blocked => Some(go(
            State::UpgradingKubernetes,
            vec![],
            cond(
                "KubernetesUpgrade",
                "Unknown",
                "Started",
                &format!("rolling the kubelets to {}", f.want),
            ),
        )),
        Some(State::UpgradingKubernetes) => Some(match &f.failed {
            Some(why) => Step {
                next: Some(State::KubernetesUpgradeFailed),
                actions: vec![Action::RecordFailedSpec, Action::Requeue(RESYNC)],
                condition: Some(warn("KubernetesUpgrade", "KubernetesUpgradeFailed", why.clone())),
            },
            None if f.total > 0 && f.at_want == f.total => go(
                State::Ready,
                vec![Action::RecordKubeVersion],
                cond(
                    "KubernetesUpgrade",
                    "True",
                    "KubernetesUpgradeSucceeded",
                    &format!("{} of {} kubelets at {}", f.at_want, f.total, f.want),
                ),
            ),
            None => stay(
                state,
                Some(cond(
                    "KubernetesUpgrade",
                    "Unknown",
                    "Rolling",
                    &format!("{} of {} kubelets at {}", f.at_want, f.total, f.want),
                )),
                POLL,
            ),
        }),
        // An edit of the spec (a fix, another version) tries again.
        Some(State::KubernetesUpgradeFailed) if f.spec_changed => Some(go(
            State::UpgradingKubernetes,
            vec![Action::ClearFailedSpec],
            cond(
                "KubernetesUpgrade",
                "Unknown",
                "Retrying",
                &format!("the spec changed: rolling the kubelets to {}", f.want),
            ),
        )),
        Some(State::KubernetesUpgradeFailed) => Some(stay(state, None, RESYNC)),
        _ => None,
    }
}

/// The kubelet gate: for each machine (`needs_bump`: its kubeVersion is not the pool's;
/// `settled`: Available with a healthy kubelet of its kubeVersion), whether to give it the
/// new version now. A machine that is not settled is down already and may take it (a fix
/// reaches the machine that failed); settled ones only while fewer than `max_unavailable`
/// are not.
pub fn kube_rollout(children: &[(bool, bool)], max_unavailable: u32) -> Vec<bool> {
    let unsettled = children.iter().filter(|(_, settled)| !settled).count();
    let mut budget = (max_unavailable as usize).saturating_sub(unsettled);
    children
        .iter()
        .map(|(needs_bump, settled)| match (needs_bump, settled) {
            (false, _) => false,
            (true, false) => true,
            (true, true) if budget > 0 => {
                budget -= 1;
                true
            }
            (true, true) => false,
        })
        .collect()
}

/// The rolling gate: for each child (`needs_bump`: its version is not the pool's; `settled`:
/// Available at the version its spec asks), whether to give it the new version now. At most
/// `max_unavailable` children are unsettled at a time.
pub fn rollout(children: &[(bool, bool)], max_unavailable: u32) -> Vec<bool> {
    let unsettled = children.iter().filter(|(_, settled)| !settled).count();
    let mut budget = (max_unavailable as usize).saturating_sub(unsettled);
    children
        .iter()
        .map(|(needs_bump, settled)| {
            if *needs_bump && *settled && budget > 0 {
                budget -= 1;
                true
            } else {
                false
            }
        })
        .collect()
}

/// Backoff after `failures` failed attempts in a row: 5 s doubling, at most 5 min.
pub fn backoff(failures: u32) -> Duration {
    Duration::from_secs(5u64.saturating_mul(1 << failures.saturating_sub(1).min(6)).min(300))
}

#[cfg(test)]
mod tests {
    use super::*;
    use State::*;

    fn facts() -> MachineFacts {
        MachineFacts {
            parent_found: true,
            want_version: "v1.13.0".into(),
            observed_version: "v1.13.0".into(),
            ..Default::default()
        }
    }

    fn kubelet(state: &str, healthy: bool) -> Result<ServiceObs, CallError> {
        Ok(ServiceObs { state: state.into(), healthy })
    }

    /// (state, facts, observation, the call the state makes, next state, reason)
    type Row<F> = (Option<State>, F, Obs, Option<Call>, Option<State>, &'static str);

    fn reason(s: &Step) -> &'static str {
        s.condition.as_ref().map_or("-", |c| c.reason)
    }

    #[test]
    fn machine_transitions() {
        let pxe = MachineFacts { pxe: true, pxe_mac: "52:54:00:a1:b2:c3".into(), ..facts() };
        let booted = |mac: &str, image: &str| {
            Obs::Booted(Ok(BootReport { mac: mac.into(), image: image.into() }))
        };
        let import = MachineFacts { import: true, ..facts() };
        let orphan = MachineFacts { parent_found: false, ..facts() };
        let newer = MachineFacts { want_version: "v1.14.0".into(), ..facts() };
        let drift = MachineFacts { config_drift: true, ..facts() };
        let dry = MachineFacts { dry_run: true, ..facts() };
        let base = facts();
        let down = || Err(CallError::Unreachable("connection refused".into()));
        let ready = |v: Option<&str>| Obs::Readiness {
            kubelet: kubelet("Running", true),
            version: v.map(|v| Ok(v.to_owned())),
        };
        // (state, facts, observation, call expected for the state, next state, reason)
        let table: Vec<Row<&MachineFacts>> = vec![
            (None, &pxe, Obs::None, None, Some(Booting), "WaitingForBoot"),
            // The node reports the NIC it booted from: this machine's MAC.
            (
                Some(Booting),
                &pxe,
                booted("52:54:00:a1:b2:c3", "v1.13.0"),
                Some(Call::Boot),
                Some(Pending),
                "BootReported",
            ),
            // Another machine answers at the endpoint: not this one, keep waiting.
            (
                Some(Booting),
                &pxe,
                booted("52:54:00:00:00:09", "v1.13.0"),
                Some(Call::Boot),
                Some(Booting),
                "WrongMachine",
            ),
            // A report without a MAC (an image name only) is a boot too.
            (
                Some(Booting),
                &pxe,
                booted("", "v1.13.0"),
                Some(Call::Boot),
                Some(Pending),
                "BootReported",
            ),
            (
                Some(Booting),
                &pxe,
                Obs::Booted(Err(CallError::Unreachable("connection refused".into()))),
                Some(Call::Boot),
                Some(Booting),
                "WaitingForBoot",
            ),
            (
                Some(Booting),
                &pxe,
                Obs::Disks(Ok(2)),
                Some(Call::Boot),
                Some(Pending),
                "NodeAnswered",
            ),
            (
                Some(Booting),
                &pxe,
                Obs::Disks(down()),
                Some(Call::Boot),
                Some(Booting),
                "WaitingForBoot",
            ),
            (
                Some(Booting),
                &pxe,
                Obs::Disks(Err(CallError::Timeout)),
                Some(Call::Boot),
                Some(Booting),
                "WaitingForBoot",
            ),
            (
                Some(Pending),
                &pxe,
                Obs::Apply(Ok(false)),
                Some(Call::Apply { insecure: true, dry_run: false }),
                Some(Installing),
                "Applied",
            ),
            // The node closing the connection to reboot into the install is success.
            (
                Some(Pending),
                &pxe,
                Obs::Apply(Ok(true)),
                Some(Call::Apply { insecure: true, dry_run: false }),
                Some(Installing),
                "Applied",
            ),
            (
                Some(Pending),
                &pxe,
                Obs::Apply(Err(CallError::Garbage("not a reply".into()))),
                Some(Call::Apply { insecure: true, dry_run: false }),
                Some(Pending),
                "NodeAnsweredGarbage",
            ),
            (
                Some(Pending),
                &pxe,
                Obs::Apply(Err(CallError::Status { code: 3, message: "bad config".into() })),
                Some(Call::Apply { insecure: true, dry_run: false }),
                Some(Pending),
                "NodeRefused",
            ),
            // Without PXE, the first apply goes straight from no state.
            (
                None,
                &base,
                Obs::Apply(Ok(false)),
                Some(Call::Apply { insecure: true, dry_run: false }),
                Some(Installing),
                "Applied",
            ),
            (
                None,
                &dry,
                Obs::Apply(Ok(false)),
                Some(Call::Apply { insecure: true, dry_run: true }),
                None,
                "DryRun",
            ),
            (None, &import, Obs::None, None, Some(Available), "Imported"),
            (
                Some(Installing),
                &base,
                ready(None),
                Some(Call::Readiness { want_version: None }),
                Some(Available),
                "KubeletRunning",
            ),
            // Running is not enough: it must be healthy too.
            (
                Some(Installing),
                &base,
                Obs::Readiness { kubelet: kubelet("Running", false), version: None },
                Some(Call::Readiness { want_version: None }),
                Some(Installing),
                "KubeletNotReady",
            ),
            (
                Some(Installing),
                &base,
                Obs::Readiness { kubelet: kubelet("Waiting", false), version: None },
                Some(Call::Readiness { want_version: None }),
                Some(Installing),
                "KubeletNotReady",
            ),
            (
                Some(Installing),
                &base,
                Obs::Readiness { kubelet: Err(CallError::Timeout), version: None },
                Some(Call::Readiness { want_version: None }),
                Some(Installing),
                "NodeTimeout",
            ),
            (Some(Available), &base, Obs::None, None, Some(Available), "-"),
            (
                Some(Available),
                &newer,
                Obs::Upgrade(Ok(true)),
                Some(Call::Upgrade { version: "v1.14.0".into() }),
                Some(Upgrading),
                "Upgrading",
            ),
            (
                Some(Available),
                &newer,
                Obs::Upgrade(Ok(false)),
                Some(Call::Upgrade { version: "v1.14.0".into() }),
                Some(Available),
                "VersionCurrent",
            ),
            (
                Some(Available),
                &newer,
                Obs::Upgrade(Err(CallError::Unreachable("refused".into()))),
                Some(Call::Upgrade { version: "v1.14.0".into() }),
                Some(Available),
                "NodeUnreachable",
            ),
            (
                Some(Available),
                &drift,
                Obs::Apply(Ok(false)),
                Some(Call::Apply { insecure: false, dry_run: false }),
                Some(Installing),
                "Applied",
            ),
            // Upgrading ends only when the node runs the new version and kubelet is healthy.
            (
                Some(Upgrading),
                &newer,
                ready(Some("v1.13.0")),
                Some(Call::Readiness { want_version: Some("v1.14.0".into()) }),
                Some(Upgrading),
                "VersionPending",
            ),
            (
                Some(Upgrading),
                &newer,
                ready(Some("v1.14.0")),
                Some(Call::Readiness { want_version: Some("v1.14.0".into()) }),
                Some(Available),
                "KubeletRunning",
            ),
            (Some(Available), &orphan, Obs::None, None, Some(Orphaned), "ParentNotFound"),
            (None, &orphan, Obs::None, None, Some(Orphaned), "ParentNotFound"),
            (Some(Orphaned), &orphan, Obs::None, None, Some(Orphaned), "-"),
        ];
        for (i, (state, f, obs, call, next, why)) in table.into_iter().enumerate() {
            assert_eq!(machine_call(state, f), call, "row {i}: call");
            let s = machine_step(state, f, &obs);
            assert_eq!(s.next, next, "row {i}: {s:?}");
            assert_eq!(reason(&s), why, "row {i}: {s:?}");
        }
    }

    #[test]
    fn a_boot_report_records_the_version_only_when_it_is_the_one_asked_for() {
        let pxe = MachineFacts { pxe: true, pxe_mac: "52:54:00:a1:b2:c3".into(), ..facts() };
        let report = |image: &str| {
            Obs::Booted(Ok(BootReport { mac: "52:54:00:a1:b2:c3".into(), image: image.into() }))
        };
        let s = machine_step(Some(Booting), &pxe, &report("v1.13.0"));
        assert!(s.actions.contains(&Action::RecordVersion), "{s:?}");
        let c = s.condition.unwrap();
        assert_eq!(c.message, "node booted from 52:54:00:a1:b2:c3 (v1.13.0)");
        let s = machine_step(Some(Booting), &pxe, &report("v1.12.0"));
        assert!(!s.actions.contains(&Action::RecordVersion), "{s:?}");
        let s = machine_step(
            Some(Booting),
            &pxe,
            &Obs::Booted(Ok(BootReport { mac: "52:54:00:00:00:09".into(), image: String::new() })),
        );
        let c = s.condition.unwrap();
        assert!(c.warning);
        assert_eq!(
            c.message,
            "the node at this endpoint booted from 52:54:00:00:00:09, not 52:54:00:a1:b2:c3"
        );
    }

    #[test]
    fn machine_actions() {
        let s = machine_step(Some(Pending), &facts(), &Obs::Apply(Ok(true)));
        assert!(
            s.actions.contains(&Action::RecordApplied) && s.actions.contains(&Action::Succeeded)
        );
        let s = machine_step(Some(Booting), &facts(), &Obs::Disks(Err(CallError::Timeout)));
        assert_eq!(s.actions, [Action::Requeue(POLL)]);
        let s = machine_step(Some(Pending), &facts(), &Obs::Apply(Err(CallError::Timeout)));
        assert_eq!(s.actions, [Action::Failed]);
        assert!(s.condition.unwrap().warning);
        let s = machine_step(None, &MachineFacts { parent_found: false, ..facts() }, &Obs::None);
        assert_eq!(s.actions, [Action::Stop]);
    }

    #[test]
    fn control_plane_transitions() {
        let f = |available, import, want: &str, seen: &str| ControlPlaneFacts {
            import,
            dry_run: false,
            children: Children { total: 3, available },
            want_kube_version: want.into(),
            observed_kube_version: seen.into(),
        };
        let k = "v1.35.0";
        let up = "v1.36.0";
        let exists = CallError::Status {
            code: ALREADY_EXISTS,
            message: "etcd data directory is not empty".into(),
        };
        let table: Vec<Row<ControlPlaneFacts>> = vec![
            (None, f(0, false, k, ""), Obs::None, None, Some(Pending), "ConfigReady"),
            (None, f(3, true, k, ""), Obs::None, None, Some(Bootstrapped), "Imported"),
            (
                Some(Pending),
                f(2, false, k, ""),
                Obs::None,
                None,
                Some(Pending),
                "MachinesNotAvailable",
            ),
            (
                Some(Pending),
                f(3, false, k, ""),
                Obs::None,
                None,
                Some(Available),
                "MachinesAvailable",
            ),
            (
                Some(Available),
                f(3, false, k, ""),
                Obs::Bootstrap(Ok(())),
                Some(Call::Bootstrap),
                Some(Bootstrapped),
                "Bootstrapped",
            ),
            (
                Some(Available),
                f(3, false, k, ""),
                Obs::Bootstrap(Err(exists)),
                Some(Call::Bootstrap),
                Some(Bootstrapped),
                "AlreadyBootstrapped",
            ),
            (
                Some(Available),
                f(3, false, k, ""),
                Obs::Bootstrap(Err(CallError::Timeout)),
                Some(Call::Bootstrap),
                Some(Available),
                "NodeTimeout",
            ),
            (Some(Available), f(2, false, k, ""), Obs::None, None, Some(Available), "-"),
            (
                Some(Bootstrapped),
                f(3, false, k, ""),
                Obs::Kubeconfig(Ok(())),
                Some(Call::Kubeconfig),
                Some(Ready),
                "KubeconfigWritten",
            ),
            (
                Some(Bootstrapped),
                f(3, false, k, ""),
                Obs::Kubeconfig(Err(CallError::Timeout)),
                Some(Call::Kubeconfig),
                Some(Bootstrapped),
                "NodeTimeout",
            ),
            (Some(Ready), f(3, false, k, k), Obs::None, None, Some(Ready), "-"),
            // A new kubeVersion is the pool's kubelet rollout ([`kube_step`]), no call here.
            (Some(Ready), f(3, false, up, k), Obs::None, None, Some(Ready), "-"),
        ];
        for (i, (state, f, obs, call, next, why)) in table.into_iter().enumerate() {
            assert_eq!(control_plane_call(state, &f), call, "row {i}: call");
            let s = control_plane_step(state, &f, &obs);
            assert_eq!(s.next, next, "row {i}: {s:?}");
            assert_eq!(reason(&s), why, "row {i}: {s:?}");
        }
    }

    #[test]
    fn kubelet_rollout_of_a_pool() {
        let f = |want: &str, seen: &str, at_want, failed: Option<&str>| KubeFacts {
            want: want.into(),
            observed: seen.into(),
            total: 3,
            at_want,
            failed: failed.map(str::to_owned),
            ..Default::default()
        };
        let next = |state, f: &KubeFacts| kube_step(state, f).map(|s| (s.next, reason(&s)));
        let (k, up) = ("v1.35.0", "v1.36.0");
        // Nothing to roll: the other steps decide.
        assert_eq!(next(Some(Ready), &f(k, k, 3, None)), None);
        assert_eq!(next(Some(Ready), &f("", k, 3, None)), None);
        assert_eq!(next(Some(Pending), &f(up, k, 0, None)), None);
        assert_eq!(
            next(Some(Ready), &f(up, k, 0, None)),
            Some((Some(UpgradingKubernetes), "Started"))
        );
        // Import, dry run and a worker waiting for its control plane do not start one.
        for g in [
            KubeFacts { import: true, ..f(up, k, 0, None) },
            KubeFacts { dry_run: true, ..f(up, k, 0, None) },
            KubeFacts { blocked: true, ..f(up, k, 0, None) },
        ] {
            assert_eq!(next(Some(Ready), &g), None, "{g:?}");
        }
        assert_eq!(
            next(Some(UpgradingKubernetes), &f(up, k, 1, None)),
            Some((Some(UpgradingKubernetes), "Rolling"))
        );
        let done = kube_step(Some(UpgradingKubernetes), &f(up, k, 3, None)).unwrap();
        assert_eq!((done.next, reason(&done)), (Some(Ready), "KubernetesUpgradeSucceeded"));
        assert!(done.actions.contains(&Action::RecordKubeVersion));
        let failed = f(up, k, 1, Some("TalosMachine w-1: kubelet v1.36.0 not healthy"));
        let s = kube_step(Some(UpgradingKubernetes), &failed).unwrap();
        assert_eq!(
            (s.next, reason(&s)),
            (Some(KubernetesUpgradeFailed), "KubernetesUpgradeFailed")
        );
        assert!(s.actions.contains(&Action::RecordFailedSpec), "{s:?}");
        let c = s.condition.unwrap();
        assert!(c.warning && c.message.contains("TalosMachine w-1"), "{c:?}");
        // Failed stays failed until the spec changes; then it rolls again.
        assert_eq!(
            next(Some(KubernetesUpgradeFailed), &failed),
            Some((Some(KubernetesUpgradeFailed), "-"))
        );
        let edited = KubeFacts { spec_changed: true, ..failed };
        assert_eq!(
            next(Some(KubernetesUpgradeFailed), &edited),
            Some((Some(UpgradingKubernetes), "Retrying"))
        );
    }

    #[test]
    fn kubelet_rollout_of_a_machine() {
        let bound = Duration::from_secs(300);
        let rolled = MachineFacts {
            want_kube_version: "v1.36.0".into(),
            observed_kube_version: "v1.35.0".into(),
            config_drift: true,
            kubelet_bound: bound,
            ..facts()
        };
        let call = Call::ApplyKubelet { version: "v1.36.0".into() };
        assert_eq!(machine_call(Some(Available), &rolled), Some(call.clone()));
        // Import leaves an adopted machine alone; a Talos version change goes first.
        assert_eq!(
            machine_call(Some(Available), &MachineFacts { import: true, ..rolled.clone() }),
            None
        );
        let both = MachineFacts { want_version: "v1.14.0".into(), ..rolled.clone() };
        assert_eq!(
            machine_call(Some(Available), &both),
            Some(Call::Upgrade { version: "v1.14.0".into() })
        );
        let s = machine_step(Some(Available), &rolled, &Obs::ApplyKubelet(Ok(())));
        assert_eq!((s.next, reason(&s)), (Some(Upgrading), "KubeletUpgrading"));
        assert!(
            s.actions.contains(&Action::StartKubelet) && s.actions.contains(&Action::RecordApplied)
        );
        let s = machine_step(Some(Available), &rolled, &Obs::ApplyKubelet(Err(CallError::Timeout)));
        assert_eq!((s.next, reason(&s)), (Some(Available), "NodeTimeout"));
        // Waiting: only ServiceInfo, no Version; the applied configuration is current.
        let waiting = MachineFacts {
            kubelet_pending: "v1.36.0".into(),
            kubelet_left: Duration::from_secs(10),
            config_drift: false,
            ..rolled.clone()
        };
        assert_eq!(
            machine_call(Some(Upgrading), &waiting),
            Some(Call::Readiness { want_version: None })
        );
        let obs = |state: &str, healthy| Obs::Readiness {
            kubelet: kubelet(state, healthy),
            version: None,
        };
        let s = machine_step(Some(Upgrading), &waiting, &obs("Running", true));
        assert_eq!((s.next, reason(&s)), (Some(Available), "KubeletRunning"));
        assert!(
            s.actions.contains(&Action::RecordKubeVersion)
                && s.actions.contains(&Action::ClearKubelet)
        );
        let s = machine_step(Some(Upgrading), &waiting, &obs("Running", false));
        assert_eq!((s.next, reason(&s)), (Some(Upgrading), "KubeletNotReady"));
        // The next look is soon (a restart takes seconds), and no later than the bound.
        assert!(s.actions.contains(&Action::Requeue(KUBELET_POLL)), "{s:?}");
        let close = MachineFacts { kubelet_left: Duration::from_secs(2), ..waiting.clone() };
        let s = machine_step(Some(Upgrading), &close, &obs("Running", false));
        assert!(s.actions.contains(&Action::Requeue(Duration::from_secs(2))), "{s:?}");
        let overdue = MachineFacts { kubelet_left: Duration::ZERO, ..waiting.clone() };
        let s = machine_step(Some(Upgrading), &overdue, &obs("Waiting", false));
        assert_eq!((s.next, reason(&s)), (Some(Upgrading), KUBELET_UPGRADE_FAILED));
        assert_eq!(
            s.condition.unwrap().message,
            "kubelet v1.36.0 not healthy within 300s of its apply: kubelet is Waiting, not healthy"
        );
        // Healthy after all, even late: done.
        let s = machine_step(Some(Upgrading), &overdue, &obs("Running", true));
        assert_eq!(s.next, Some(Available));
        // The spec changed while it waited (a fix): applied again.
        let fixed = MachineFacts { config_drift: true, ..overdue };
        assert_eq!(machine_call(Some(Upgrading), &fixed), Some(call));
        let s = machine_step(Some(Upgrading), &fixed, &Obs::ApplyKubelet(Ok(())));
        assert_eq!((s.next, reason(&s)), (Some(Upgrading), "KubeletUpgrading"));
    }

    #[test]
    fn kubelet_gate_keeps_max_unavailable_and_lets_a_failed_machine_take_a_fix() {
        let settled = (true, true);
        assert_eq!(kube_rollout(&[settled, settled, settled], 1), [true, false, false]);
        assert_eq!(kube_rollout(&[settled, settled, settled], 2), [true, true, false]);
        // One rolling already: the others wait; it takes a new version itself.
        assert_eq!(kube_rollout(&[(false, false), settled], 1), [false, false]);
        assert_eq!(kube_rollout(&[(true, false), settled], 1), [true, false]);
        assert_eq!(kube_rollout(&[(false, true), settled], 1), [false, true]);
    }

    #[test]
    fn worker_transitions() {
        let all = Children { total: 2, available: 2 };
        let some = Children { total: 2, available: 1 };
        assert_eq!(worker_step(None, false, &some).next, Some(Pending));
        assert_eq!(worker_step(None, true, &some).next, Some(Ready));
        assert_eq!(worker_step(Some(Pending), false, &some).next, Some(Pending));
        let s = worker_step(Some(Pending), false, &all);
        assert_eq!((s.next, reason(&s)), (Some(Ready), "MachinesAvailable"));
        let s = worker_step(Some(Ready), false, &some);
        assert_eq!((s.next, reason(&s)), (Some(Ready), "MachinesNotAvailable"));
        assert_eq!(worker_step(Some(Pending), false, &Children::default()).next, Some(Pending));
    }

    #[test]
    fn rollout_keeps_max_unavailable() {
        // Three settled machines wanting a new version, one at a time.
        assert_eq!(rollout(&[(true, true), (true, true), (true, true)], 1), [true, false, false]);
        assert_eq!(rollout(&[(true, true), (true, true), (true, true)], 2), [true, true, false]);
        // One already upgrading: nothing more.
        assert_eq!(
            rollout(&[(false, false), (true, true), (true, true)], 1),
            [false, false, false]
        );
        assert_eq!(rollout(&[(false, true), (true, true)], 1), [false, true]);
    }

    #[test]
    fn backoff_doubles_to_a_ceiling() {
        assert_eq!(backoff(1), Duration::from_secs(5));
        assert_eq!(backoff(2), Duration::from_secs(10));
        assert_eq!(backoff(40), Duration::from_secs(300));
    }
}
