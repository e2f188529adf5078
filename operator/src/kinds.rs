// SPDX-License-Identifier: Apache-2.0
//! The operator's kinds: TalosControlPlane, TalosWorker and TalosMachine, with the fields of
//! alperencelik/talos-operator's `api/v1alpha1` that apply to bare-metal machines, read from
//! YAML documents (`apiVersion`, `kind`, `metadata`, `spec`) and kept in the store as
//! [`Body`]: the annotations, the spec and the status the controllers write.
//!
//! Container mode is refused: it needs a Kubernetes StatefulSet, and there is no Kubernetes API
//! server here.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::states::State;

pub const API_VERSION: &str = "keelson.dev/v1alpha1";
/// The store's types (COSI-style plural names).
pub const TCP: &str = "TalosControlPlanes.keelson.dev";
pub const TW: &str = "TalosWorkers.keelson.dev";
pub const TM: &str = "TalosMachines.keelson.dev";
pub const DEFAULT_NAMESPACE: &str = "default";
/// The reconcile-mode annotation (talos-operator's `talos.alperen.cloud/reconcile-mode` is
/// read too).
pub const MODE_ANNOTATION: &str = "keelson.dev/reconcile-mode";
const MODE_ANNOTATION_TALOS_OPERATOR: &str = "talos.alperen.cloud/reconcile-mode";
/// The most conditions and events kept in a status (oldest dropped first).
pub const MAX_EVENTS: usize = 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    ControlPlane,
    Worker,
    Machine,
    /// Tenant networks ([`crate::networks`]).
    Network,
    NetworkId,
    NodeNetwork,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Self::ControlPlane => "TalosControlPlane",
            Self::Worker => "TalosWorker",
            Self::Machine => "TalosMachine",
            Self::Network => "Network",
            Self::NetworkId => "NetworkID",
            Self::NodeNetwork => "NodeNetwork",
        }
    }

    pub fn store_type(self) -> &'static str {
        use crate::networks::kinds as n;
        match self {
            Self::ControlPlane => TCP,
            Self::Worker => TW,
            Self::Machine => TM,
            Self::Network => n::NETWORKS,
            Self::NetworkId => n::NETWORK_IDS,
            Self::NodeNetwork => n::NODE_NETWORKS,
        }
    }

    /// The store namespace: `ns`, or the cluster's for cluster-scoped kinds.
    pub fn store_namespace(self, ns: &str) -> &str {
        match self {
            Self::NetworkId | Self::NodeNetwork => crate::networks::kinds::CLUSTER,
            _ => ns,
        }
    }

    pub fn is_network(self) -> bool {
        matches!(self, Self::Network | Self::NetworkId | Self::NodeNetwork)
    }

    /// A kind by its name or short name (`tcp`, `tw`, `tm`, `net`, `nid`, `nn`, plurals, any
    /// case).
    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "taloscontrolplane" | "taloscontrolplanes" | "tcp" => Some(Self::ControlPlane),
            "talosworker" | "talosworkers" | "tw" => Some(Self::Worker),
            "talosmachine" | "talosmachines" | "tm" => Some(Self::Machine),
            "network" | "networks" | "net" => Some(Self::Network),
            "networkid" | "networkids" | "nid" => Some(Self::NetworkId),
            "nodenetwork" | "nodenetworks" | "nn" => Some(Self::NodeNetwork),
            _ => None,
        }
    }
}

/// What the controllers do with a resource (the reconcile-mode annotation).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Mode {
    #[default]
    Reconcile,
    Disable,
    /// ApplyConfiguration with `dry_run`; Upgrade, Bootstrap and Reset skipped.
    DryRun,
    /// Adopt running machines: they become Available, the control plane Bootstrapped.
    Import,
}

impl Mode {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "reconcile" => Some(Self::Reconcile),
            "disable" => Some(Self::Disable),
            "dryrun" => Some(Self::DryRun),
            "import" => Some(Self::Import),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum DeletionPolicy {
    /// `Reset(graceful=false, reboot=true)` on delete.
    #[default]
    Reset,
    Preserve,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ClusterMode {
    #[default]
    Metal,
    Container,
    Cloud,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PxeClientSpec {
    pub mac_address: String,
    pub cpu_architecture: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel_cmdline_args: Vec<String>,
}

/// One machine of a control plane or worker pool: `address` xor `machineRef`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetalMachine {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// The name of a TalosMachine (same namespace) whose endpoint is the address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_ref: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pxe_client_spec: Option<PxeClientSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config_patches: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_config: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetalSpec {
    #[serde(default)]
    pub machines: Vec<MetalMachine>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RolloutStrategy {
    #[serde(default = "one")]
    pub max_unavailable: u32,
}

fn one() -> u32 {
    1
}

impl Default for RolloutStrategy {
    fn default() -> Self {
        Self { max_unavailable: 1 }
    }
}

/// TalosControlPlane and TalosWorker share their spec (a worker also names its control plane).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PoolSpec {
    pub version: String,
    #[serde(default)]
    pub mode: ClusterMode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<u32>,
    #[serde(default)]
    pub metal_spec: MetalSpec,
    /// The Kubernetes API endpoint (control plane; a worker takes its control plane's).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub endpoint: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kube_version: String,
    /// The worker's control plane, by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_ref: Option<String>,
    /// The machine configuration to apply (what talos-operator reads from `configRef`);
    /// generating one from a secrets bundle is not done yet.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub config: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config_patches: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_config: Vec<String>,
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
    #[serde(default)]
    pub rollout_strategy: RolloutStrategy,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MachineSpec {
    /// The node's address: the Talos API target.
    pub endpoint: String,
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_ref: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_ref: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pxe_client_spec: Option<PxeClientSpec>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub config: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config_patches: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_config: Vec<String>,
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
    /// The Kubernetes version of its kubelet (`machine.kubelet.image`): set by its pool, one
    /// `maxUnavailable` batch at a time.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kube_version: String,
}

/// The kubelet image of a Kubernetes version, as Talos names it (`machine.kubelet.image`).
pub fn kubelet_image(kube_version: &str) -> String {
    format!("ghcr.io/siderolabs/kubelet:{kube_version}")
}

/// The merge patch that sets a machine's kubelet image: applied after the configuration's own
/// patches, so what status says was applied is the version asked for.
pub fn kubelet_patch(kube_version: &str) -> String {
    format!("machine:\n  kubelet:\n    image: {}\n", kubelet_image(kube_version))
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub kind: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    pub reason: String,
    #[serde(default)]
    pub message: String,
    /// Unix seconds.
    pub last_transition_time: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventRecord {
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub kind: String,
    pub reason: String,
    #[serde(default)]
    pub message: String,
    pub time: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<State>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The configuration last applied, secrets redacted.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub config: String,
    /// sha256 of the full configuration last applied (drift detection without the secrets).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub config_hash: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub observed_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub observed_kube_version: String,
    /// A machine: the Kubernetes version whose kubelet was applied (`NO_REBOOT`) and is not
    /// healthy yet, and since when (Unix seconds): the kubelet rollout's bound runs from it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kubelet_pending: String,
    #[serde(default, skip_serializing_if = "is_zero64")]
    pub kubelet_since: u64,
    /// A pool: the spec (its sha256) a kubelet rollout failed with; another spec retries.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub failed_spec: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub imported: bool,
    /// Failed attempts in a row (backoff), and when the next may start (Unix seconds).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failures: u32,
    #[serde(default, skip_serializing_if = "is_zero64")]
    pub next_attempt: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<EventRecord>,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

fn is_zero64(v: &u64) -> bool {
    *v == 0
}

impl Status {
    /// Set a condition (its time changes only when its status does) and record an event.
    pub fn record(&mut self, c: Condition, warning: bool) {
        let time = c.last_transition_time;
        self.events.push(EventRecord {
            kind: if warning { "Warning" } else { "Normal" }.into(),
            reason: c.reason.clone(),
            message: c.message.clone(),
            time,
        });
        if self.events.len() > MAX_EVENTS {
            let drop = self.events.len() - MAX_EVENTS;
            self.events.drain(..drop);
        }
        match self.conditions.iter_mut().find(|x| x.kind == c.kind) {
            Some(x) => {
                let keep_time = x.status == c.status;
                let t = x.last_transition_time;
                *x = c;
                if keep_time {
                    x.last_transition_time = t;
                }
            }
            None => {
                self.conditions.push(c);
                if self.conditions.len() > MAX_EVENTS {
                    self.conditions.remove(0);
                }
            }
        }
    }
}

/// What the store keeps of a resource: its annotations, spec and status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Body<S> {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    pub spec: S,
    #[serde(default)]
    pub status: Status,
}

impl<S> Body<S> {
    pub fn mode(&self) -> Mode {
        self.annotations
            .get(MODE_ANNOTATION)
            .or_else(|| self.annotations.get(MODE_ANNOTATION_TALOS_OPERATOR))
            .and_then(|m| Mode::parse(m))
            .unwrap_or_default()
    }
}

/// A document's `metadata`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Written on output only (Unix seconds); ignored on input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<u64>,
}

/// One YAML document of a kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Manifest<S> {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: S,
    /// Accepted on input (a `get -o yaml` fed back) and ignored: status is the operator's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_yaml::Value>,
}

/// A parsed document, typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Object {
    ControlPlane(Manifest<PoolSpec>),
    Worker(Manifest<PoolSpec>),
    Machine(Manifest<MachineSpec>),
    Network(Manifest<crate::networks::kinds::NetworkSpec>),
}

impl Object {
    pub fn kind(&self) -> Kind {
        match self {
            Self::ControlPlane(_) => Kind::ControlPlane,
            Self::Worker(_) => Kind::Worker,
            Self::Machine(_) => Kind::Machine,
            Self::Network(_) => Kind::Network,
        }
    }

    pub fn meta(&self) -> &ObjectMeta {
        match self {
            Self::ControlPlane(m) | Self::Worker(m) => &m.metadata,
            Self::Machine(m) => &m.metadata,
            Self::Network(m) => &m.metadata,
        }
    }

    pub fn namespace(&self) -> &str {
        self.meta().namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE)
    }
}

/// A refused document: which one, where, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("document {doc} (line {line}): {path}: {message}")]
pub struct InputError {
    /// 1-based.
    pub doc: usize,
    /// 1-based line in the input.
    pub line: usize,
    /// The field path (`spec.metalSpec.machines[0].address`), or `-` when unknown.
    pub path: String,
    pub message: String,
}

/// The largest input `parse` takes (resources are at most 1 MiB each in the store).
pub const MAX_INPUT: usize = 4 << 20;

/// Split YAML text into documents at `---` lines: each with the line it starts on.
fn split_documents(text: &str) -> Vec<(usize, String)> {
    let mut docs = Vec::new();
    let mut cur = String::new();
    let mut start = 1;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_end();
        if t == "---" || t.starts_with("--- ") {
            if !cur.trim().is_empty() {
                docs.push((start, std::mem::take(&mut cur)));
            }
            cur.clear();
            start = i + 2;
            continue;
        }
        if t == "..." {
            continue;
        }
        cur.push_str(line);
        cur.push('\n');
    }
    if !cur.trim().is_empty() {
        docs.push((start, cur));
    }
    docs
}

/// The 1-based line (in the document) a field path (`spec.machines[1].address`) names, found by
/// its keys in order, list items counted at the item indentation; the deepest key found.
fn line_of(doc: &str, path: &[&str]) -> Option<usize> {
    let lines: Vec<&str> = doc.lines().collect();
    let indent = |l: &str| l.len() - l.trim_start().len();
    let mut from = 0;
    let mut found = None;
    for seg in path {
        let (key, index) = match seg.split_once('[') {
            Some((k, rest)) => (k, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (*seg, None),
        };
        let pat = format!("{key}:");
        let hit = lines
            .iter()
            .enumerate()
            .skip(from)
            .find(|(_, l)| l.trim_start().trim_start_matches("- ").starts_with(&pat));
        let Some((i, _)) = hit else { break };
        from = i;
        found = Some(i + 1);
        if let Some(n) = index {
            let items: Vec<usize> = lines
                .iter()
                .enumerate()
                .skip(i + 1)
                .take_while(|(_, l)| {
                    l.trim().is_empty()
                        || indent(l) > indent(lines[i])
                        || l.trim_start().starts_with("- ") && indent(l) == indent(lines[i])
                })
                .filter(|(_, l)| l.trim_start().starts_with("- "))
                .map(|(j, _)| j)
                .collect();
            let item_indent = items.first().map(|&j| indent(lines[j]));
            let at = items.into_iter().filter(|&j| Some(indent(lines[j])) == item_indent).nth(n);
            let Some(j) = at else { break };
            from = j;
            found = Some(j + 1);
        }
    }
    found
}

fn serde_error(doc: usize, start: usize, e: &serde_yaml::Error) -> InputError {
    let line = e.location().map_or(start, |l| start + l.line().saturating_sub(1));
    // serde_yaml says "spec.metalSpec: unknown field ..., at line 3 column 5": cut the path
    // out and drop the location (it is relative to the document).
    let text = e.to_string();
    let text = text.split(" at line ").next().unwrap_or(&text).trim_end_matches(',').to_owned();
    let (path, message) = match text.split_once(": ") {
        Some((p, m)) if !p.contains(' ') => (p.to_owned(), m.to_owned()),
        _ => ("-".to_owned(), text),
    };
    InputError { doc, line, path, message: base::names::escape(&message, 300) }
}

/// Parse and validate every document; any error refuses the whole input.
pub fn parse(text: &str) -> Result<Vec<Object>, InputError> {
    if text.len() > MAX_INPUT {
        return Err(InputError {
            doc: 0,
            line: 0,
            path: "-".into(),
            message: format!("input is {} bytes, more than {MAX_INPUT}", text.len()),
        });
    }
    let mut out = Vec::new();
    for (i, (start, doc)) in split_documents(text).into_iter().enumerate() {
        let n = i + 1;
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Head {
            #[serde(default)]
            api_version: String,
            #[serde(default)]
            kind: String,
        }
        let head: Head = serde_yaml::from_str(&doc).map_err(|e| serde_error(n, start, &e))?;
        let at = |keys: &[&str]| line_of(&doc, keys).map_or(start, |l| start + l - 1);
        if head.api_version != API_VERSION {
            return Err(InputError {
                doc: n,
                line: at(&["apiVersion"]),
                path: "apiVersion".into(),
                message: format!("must be {API_VERSION}"),
            });
        }
        let obj = match head.kind.as_str() {
            "TalosControlPlane" => Object::ControlPlane(
                serde_yaml::from_str(&doc).map_err(|e| serde_error(n, start, &e))?,
            ),
            "TalosWorker" => {
                Object::Worker(serde_yaml::from_str(&doc).map_err(|e| serde_error(n, start, &e))?)
            }
            "TalosMachine" => {
                Object::Machine(serde_yaml::from_str(&doc).map_err(|e| serde_error(n, start, &e))?)
            }
            "Network" => {
                Object::Network(serde_yaml::from_str(&doc).map_err(|e| serde_error(n, start, &e))?)
            }
            _ => {
                return Err(InputError {
                    doc: n,
                    line: at(&["kind"]),
                    path: "kind".into(),
                    message: "must be TalosControlPlane, TalosWorker, TalosMachine or Network (NetworkID and NodeNetwork are the operator's)".into(),
                })
            }
        };
        if let Err((path, message)) = validate(&obj) {
            let keys: Vec<&str> = path.split('.').filter(|s| !s.is_empty()).collect();
            return Err(InputError { doc: n, line: at(&keys), path, message });
        }
        let dup = out.iter().any(|o: &Object| {
            o.kind() == obj.kind()
                && o.meta().name == obj.meta().name
                && o.namespace() == obj.namespace()
        });
        if dup {
            return Err(InputError {
                doc: n,
                line: at(&["metadata", "name"]),
                path: "metadata.name".into(),
                message: "named twice in this input".into(),
            });
        }
        out.push(obj);
    }
    Ok(out)
}

type Invalid = (String, String);

fn bad(path: impl Into<String>, msg: impl Into<String>) -> Invalid {
    (path.into(), msg.into())
}

pub use crate::names::valid_name;

/// `vX.Y.Z` with an optional suffix (`-beta.0`).
pub fn valid_version(s: &str) -> bool {
    let Some(rest) = s.strip_prefix('v') else { return false };
    let core = rest.split(['-', '+']).next().unwrap_or("");
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.len() <= 6 && p.bytes().all(|b| b.is_ascii_digit()))
        && s.len() <= 64
        && s.bytes().all(|b| b.is_ascii_graphic())
}

fn valid_mac(s: &str) -> bool {
    let parts: Vec<&str> = s.split(':').collect();
    parts.len() == 6
        && parts.iter().all(|p| p.len() == 2 && p.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn check_yaml_texts(path: &str, texts: &[String]) -> Result<(), Invalid> {
    for (i, t) in texts.iter().enumerate() {
        match serde_yaml::from_str::<serde_yaml::Value>(t) {
            Ok(serde_yaml::Value::Mapping(_)) => {}
            Ok(_) => return Err(bad(format!("{path}[{i}]"), "must be a YAML mapping")),
            Err(e) => {
                let e = e.to_string();
                return Err(bad(format!("{path}[{i}]"), base::names::escape(&e, 200)));
            }
        }
    }
    Ok(())
}

fn check_pxe(path: &str, p: &PxeClientSpec) -> Result<(), Invalid> {
    if !valid_mac(&p.mac_address) {
        return Err(bad(format!("{path}.macAddress"), "a MAC address like 52:54:00:12:34:56"));
    }
    if !matches!(p.cpu_architecture.as_str(), "amd64" | "arm64") {
        return Err(bad(format!("{path}.cpuArchitecture"), "amd64 or arm64"));
    }
    for (i, a) in p.kernel_cmdline_args.iter().enumerate() {
        if a.is_empty() || a.len() > 1024 || a.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(bad(
                format!("{path}.kernelCmdlineArgs[{i}]"),
                "one argument, no spaces, at most 1024 bytes",
            ));
        }
    }
    Ok(())
}

fn check_address(path: &str, a: &str) -> Result<(), Invalid> {
    a.parse::<std::net::IpAddr>()
        .map(|_| ())
        .map_err(|_| bad(path, "an IP address (IPv4 or IPv6, without brackets or port)"))
}

fn check_meta(m: &ObjectMeta) -> Result<(), Invalid> {
    if !valid_name(&m.name) {
        return Err(bad(
            "metadata.name",
            "1 to 63 characters of a-z, 0-9, '-' and '.', starting and ending alphanumeric",
        ));
    }
    if let Some(ns) = &m.namespace {
        if !valid_name(ns) {
            return Err(bad("metadata.namespace", "a name like default"));
        }
    }
    for k in [MODE_ANNOTATION, MODE_ANNOTATION_TALOS_OPERATOR] {
        if let Some(v) = m.annotations.get(k) {
            if Mode::parse(v).is_none() {
                return Err(bad(
                    format!("metadata.annotations.{k}"),
                    "reconcile, disable, dryrun or import",
                ));
            }
        }
    }
    Ok(())
}

fn check_pool(kind: Kind, s: &PoolSpec) -> Result<(), Invalid> {
    match s.mode {
        ClusterMode::Metal => {}
        ClusterMode::Container => {
            return Err(bad(
                "spec.mode",
                "container mode needs a Kubernetes StatefulSet to run Talos in; keelson-operator has no Kubernetes API server: use metal",
            ))
        }
        ClusterMode::Cloud => return Err(bad("spec.mode", "cloud mode is not implemented")),
    }
    if s.replicas.is_some() {
        return Err(bad("spec.replicas", "container mode only; list metalSpec.machines"));
    }
    if !valid_version(&s.version) {
        return Err(bad("spec.version", "a Talos version like v1.13.0"));
    }
    if !s.kube_version.is_empty() && !valid_version(&s.kube_version) {
        return Err(bad("spec.kubeVersion", "a Kubernetes version like v1.35.0"));
    }
    if kind == Kind::ControlPlane {
        if s.endpoint.is_empty() || s.endpoint.len() > 512 || !s.endpoint.starts_with("https://") {
            return Err(bad("spec.endpoint", "the Kubernetes API URL, https://HOST:PORT"));
        }
        if s.control_plane_ref.is_some() {
            return Err(bad("spec.controlPlaneRef", "only a TalosWorker names its control plane"));
        }
    } else {
        match &s.control_plane_ref {
            Some(r) if valid_name(r) => {}
            Some(_) => return Err(bad("spec.controlPlaneRef", "a TalosControlPlane's name")),
            None => return Err(bad("spec.controlPlaneRef", "required: the TalosControlPlane")),
        }
    }
    if s.metal_spec.machines.is_empty() {
        return Err(bad("spec.metalSpec.machines", "at least one machine"));
    }
    if s.metal_spec.machines.len() > 256 {
        return Err(bad("spec.metalSpec.machines", "at most 256 machines"));
    }
    if s.rollout_strategy.max_unavailable == 0 {
        return Err(bad("spec.rolloutStrategy.maxUnavailable", "at least 1"));
    }
    check_yaml_texts("spec.configPatches", &s.config_patches)?;
    check_yaml_texts("spec.additionalConfig", &s.additional_config)?;
    let mut seen = Vec::new();
    for (i, m) in s.metal_spec.machines.iter().enumerate() {
        let p = format!("spec.metalSpec.machines[{i}]");
        match (&m.address, &m.machine_ref) {
            (Some(a), None) => {
                check_address(&format!("{p}.address"), a)?;
                if seen.contains(a) {
                    return Err(bad(format!("{p}.address"), "listed twice"));
                }
                seen.push(a.clone());
            }
            (None, Some(r)) if valid_name(r) => {}
            (None, Some(_)) => return Err(bad(format!("{p}.machineRef"), "a TalosMachine's name")),
            _ => return Err(bad(p, "exactly one of address and machineRef")),
        }
        if let Some(v) = &m.version {
            if !valid_version(v) {
                return Err(bad(format!("{p}.version"), "a Talos version like v1.13.0"));
            }
        }
        if let Some(x) = &m.pxe_client_spec {
            check_pxe(&format!("{p}.pxeClientSpec"), x)?;
        }
        check_yaml_texts(&format!("{p}.configPatches"), &m.config_patches)?;
        check_yaml_texts(&format!("{p}.additionalConfig"), &m.additional_config)?;
    }
    Ok(())
}

fn check_machine(s: &MachineSpec) -> Result<(), Invalid> {
    check_address("spec.endpoint", &s.endpoint)?;
    if !valid_version(&s.version) {
        return Err(bad("spec.version", "a Talos version like v1.13.0"));
    }
    if s.control_plane_ref.is_some() && s.worker_ref.is_some() {
        return Err(bad(
            "spec.workerRef",
            "a machine has one parent: controlPlaneRef or workerRef",
        ));
    }
    for (p, r) in
        [("spec.controlPlaneRef", &s.control_plane_ref), ("spec.workerRef", &s.worker_ref)]
    {
        if r.as_deref().is_some_and(|r| !valid_name(r)) {
            return Err(bad(p, "a name"));
        }
    }
    if let Some(x) = &s.pxe_client_spec {
        check_pxe("spec.pxeClientSpec", x)?;
    }
    if !s.kube_version.is_empty() && !valid_version(&s.kube_version) {
        return Err(bad("spec.kubeVersion", "a Kubernetes version like v1.35.0"));
    }
    check_yaml_texts("spec.configPatches", &s.config_patches)?;
    check_yaml_texts("spec.additionalConfig", &s.additional_config)?;
    Ok(())
}

/// Validate a parsed document: `Err((field path, why))`.
pub fn validate(o: &Object) -> Result<(), Invalid> {
    check_meta(o.meta())?;
    match o {
        Object::ControlPlane(m) => check_pool(Kind::ControlPlane, &m.spec),
        Object::Worker(m) => check_pool(Kind::Worker, &m.spec),
        Object::Machine(m) => check_machine(&m.spec),
        Object::Network(m) => crate::networks::kinds::check_named_network(
            m.metadata.namespace.as_deref(),
            &m.metadata.name,
            &m.spec,
        ),
    }
}

/// Secret-bearing keys of a Talos machine configuration (certificate keys, tokens,
/// encryption secrets): their values are replaced in what status shows.
fn is_secret_key(k: &str) -> bool {
    let k = k.to_ascii_lowercase();
    k == "key"
        || k.contains("token")
        || k.contains("secret")
        || k.contains("password")
        || k.ends_with("privatekey")
}

fn redact_value(v: &mut serde_yaml::Value) {
    match v {
        serde_yaml::Value::Mapping(m) => {
            for (k, v) in m.iter_mut() {
                if k.as_str().is_some_and(is_secret_key) && !v.is_mapping() && !v.is_sequence() {
                    *v = serde_yaml::Value::String("REDACTED".into());
                } else {
                    redact_value(v);
                }
            }
        }
        serde_yaml::Value::Sequence(s) => s.iter_mut().for_each(redact_value),
        serde_yaml::Value::Tagged(t) => redact_value(&mut t.value),
        _ => {}
    }
}

/// A configuration (YAML documents) with its secrets replaced by `REDACTED`; a document that is
/// not YAML is left out entirely rather than shown.
pub fn redact(config: &str) -> String {
    let mut out = Vec::new();
    for (_, doc) in split_documents(config) {
        match serde_yaml::from_str::<serde_yaml::Value>(&doc) {
            Ok(mut v) => {
                redact_value(&mut v);
                out.push(serde_yaml::to_string(&v).unwrap_or_default());
            }
            Err(_) => out.push("# (not YAML: left out)\n".into()),
        }
    }
    out.join("---\n")
}

/// RFC 7386 JSON merge patch on YAML values (how `configPatches` change the main document).
fn merge(target: &mut serde_yaml::Value, patch: &serde_yaml::Value) {
    match (target, patch) {
        (serde_yaml::Value::Mapping(t), serde_yaml::Value::Mapping(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else if let Some(tv) = t.get_mut(k) {
                    merge(tv, v);
                } else {
                    t.insert(k.clone(), v.clone());
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}

/// The configuration to apply: `base`'s first document with `patches` merged in (RFC 7386),
/// its other documents, then `additional` documents appended.
pub fn render_config(
    base: &str,
    patches: &[String],
    additional: &[String],
) -> Result<String, String> {
    let docs = split_documents(base);
    let mut out = Vec::new();
    for (i, (_, doc)) in docs.iter().enumerate() {
        if i == 0 && !patches.is_empty() {
            let mut v: serde_yaml::Value =
                serde_yaml::from_str(doc).map_err(|e| format!("config: {e}"))?;
            for (j, p) in patches.iter().enumerate() {
                let p: serde_yaml::Value =
                    serde_yaml::from_str(p).map_err(|e| format!("configPatches[{j}]: {e}"))?;
                merge(&mut v, &p);
            }
            out.push(serde_yaml::to_string(&v).map_err(|e| e.to_string())?);
        } else {
            out.push(doc.clone());
        }
    }
    for a in additional {
        out.push(if a.ends_with('\n') { a.clone() } else { format!("{a}\n") });
    }
    Ok(out.join("---\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TCP_DOC: &str = "\
apiVersion: keelson.dev/v1alpha1
kind: TalosControlPlane
metadata:
  name: cp
spec:
  version: v1.13.0
  endpoint: https://10.0.0.10:6443
  kubeVersion: v1.35.0
  config: |
    machine:
      type: controlplane
  metalSpec:
    machines:
      - address: 10.0.0.11
        pxeClientSpec:
          macAddress: 52:54:00:00:00:11
          cpuArchitecture: amd64
      - address: 10.0.0.12
";

    #[test]
    fn a_kube_version_becomes_the_kubelet_image_after_the_patches() {
        let base = "version: v1alpha1\nmachine:\n  type: worker\n  kubelet:\n    image: old\n";
        let mine = "machine:\n  kubelet:\n    image: mine\n    command: [/k]\n".to_owned();
        let out = render_config(base, &[mine, kubelet_patch("v1.36.0")], &[]).unwrap();
        let v: serde_yaml::Value = serde_yaml::from_str(&out).unwrap();
        assert_eq!(
            v["machine"]["kubelet"]["image"].as_str(),
            Some("ghcr.io/siderolabs/kubelet:v1.36.0")
        );
        assert_eq!(v["machine"]["kubelet"]["command"][0].as_str(), Some("/k"));
        let doc = "apiVersion: keelson.dev/v1alpha1\nkind: TalosMachine\nmetadata:\n  name: m\nspec:\n  endpoint: 10.0.0.5\n  version: v1.13.0\n  kubeVersion: 1.36\n";
        let e = parse(doc).unwrap_err();
        assert_eq!((e.path.as_str(), e.line), ("spec.kubeVersion", 8), "{e}");
    }

    #[test]
    fn documents_parse_into_kinds() {
        let text = format!(
            "{TCP_DOC}---\napiVersion: keelson.dev/v1alpha1\nkind: TalosMachine\nmetadata:\n  name: m1\n  annotations:\n    keelson.dev/reconcile-mode: dryrun\nspec:\n  endpoint: 10.0.0.20\n  version: v1.13.0\n"
        );
        let objs = parse(&text).unwrap();
        assert_eq!(objs.len(), 2);
        let Object::ControlPlane(cp) = &objs[0] else { panic!("{:?}", objs[0]) };
        assert_eq!(cp.spec.metal_spec.machines.len(), 2);
        assert_eq!(cp.spec.rollout_strategy.max_unavailable, 1);
        assert_eq!(cp.spec.deletion_policy, DeletionPolicy::Reset);
        assert_eq!(objs[1].kind(), Kind::Machine);
        let body =
            Body { annotations: objs[1].meta().annotations.clone(), ..Body::<()>::default() };
        assert_eq!(body.mode(), Mode::DryRun);
    }

    #[test]
    fn bad_documents_are_refused_with_document_path_and_line() {
        let cases: &[(&str, &str, &str, usize)] = &[
            ("  version: v1.13.0", "  version: 1.13", "spec.version", 6),
            (
                "      - address: 10.0.0.12",
                "      - address: 10.0.0.999",
                "spec.metalSpec.machines[1].address",
                18,
            ),
            (
                "          macAddress: 52:54:00:00:00:11",
                "          macAddress: nope",
                "spec.metalSpec.machines[0].pxeClientSpec.macAddress",
                16,
            ),
            ("  kubeVersion: v1.35.0", "  kubeVersion: v1.35.0\n  mode: container", "spec.mode", 9),
            ("  kubeVersion: v1.35.0", "  kubeVersion: v1.35.0\n  colour: red", "spec", 9),
            ("  name: cp", "  name: CP_1", "metadata.name", 4),
        ];
        for (from, to, path, line) in cases {
            let doc = TCP_DOC.replace(from, to);
            let text = format!("apiVersion: keelson.dev/v1alpha1\nkind: TalosMachine\nmetadata:\n  name: ok\nspec:\n  endpoint: 10.0.0.1\n  version: v1.13.0\n---\n{doc}");
            let e = parse(&text).unwrap_err();
            assert_eq!(e.doc, 2, "{e}");
            assert_eq!(&e.path, path, "{e}");
            assert_eq!(e.line, line + 8, "{e}");
        }
        let e = parse(
            &TCP_DOC.replace("  kubeVersion: v1.35.0", "  kubeVersion: v1.35.0\n  mode: container"),
        )
        .unwrap_err();
        assert!(e.message.contains("StatefulSet"), "{e}");
        let e = parse("apiVersion: keelson.dev/v1alpha1\nkind: Pod\n").unwrap_err();
        assert_eq!((e.doc, e.line, e.path.as_str()), (1, 2, "kind"));
        let e = parse(&format!("{TCP_DOC}---\n{TCP_DOC}")).unwrap_err();
        assert_eq!((e.doc, e.path.as_str()), (2, "metadata.name"));
        assert!(parse("[1, 2").is_err());
    }

    #[test]
    fn round_trips_through_yaml() {
        let objs = parse(TCP_DOC).unwrap();
        let Object::ControlPlane(cp) = &objs[0] else { panic!() };
        let again = serde_yaml::to_string(cp).unwrap();
        assert_eq!(parse(&again).unwrap(), objs);
    }

    #[test]
    fn secrets_are_redacted_and_patches_merge() {
        let cfg = "machine:\n  token: abc.def\n  ca:\n    crt: PUBLIC\n    key: PRIVATE\ncluster:\n  secretboxEncryptionSecret: s3cret\n  network:\n    dnsDomain: cluster.local\n";
        let r = redact(cfg);
        assert!(!r.contains("abc.def") && !r.contains("PRIVATE") && !r.contains("s3cret"), "{r}");
        assert!(r.contains("PUBLIC") && r.contains("cluster.local"), "{r}");
        let out = render_config(
            cfg,
            &["machine:\n  install:\n    disk: /dev/vda\n  token: null\n".into()],
            &["apiVersion: v1alpha1\nkind: HostnameConfig\nhostname: n1".into()],
        )
        .unwrap();
        let docs: Vec<serde_yaml::Value> =
            out.split("---\n").map(|d| serde_yaml::from_str(d).unwrap()).collect();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0]["machine"]["install"]["disk"], "/dev/vda");
        assert!(docs[0]["machine"].get("token").is_none());
        assert_eq!(docs[0]["machine"]["ca"]["crt"], "PUBLIC");
        assert_eq!(docs[1]["hostname"], "n1");
    }
}
