// SPDX-License-Identifier: Apache-2.0
//! The node's verbs that change its config, in one place the API calls once per request: apply
//! a machine config with its mode (auto, no-reboot, reboot, staged, try), validate it and diff
//! it against what runs, keep it for the next start, and what each request leaves for the loop
//! to do (a reboot, a trial to roll back, a service to restart), confirm a config on trial, a
//! staged reboot, the status document. The gRPC services (`api::rpc`) translate their requests
//! into these calls and their answers out of them; they hold no node logic of their own.

use std::path::PathBuf;
use std::time::Instant;

use net::config::MachineConfig;
use net::controllers::{self, CMDLINE_ID, MACHINE_CONFIG_ID, NETWORK_STATUS_ID};
use net::resource::{
    Kind, LinkStatus, MachineStatus, Namespace, NetworkStatus, Resource, ServiceStatus, TimeStatus,
    MACHINE_STATUS_ID, TIME_STATUS_ID,
};
use runtime::Runtime;
use serde_json::{json, Value};

use crate::api::diff::{self, Specs};
use crate::api::remote;
use crate::api::trial::{self, ApplyMode, Trial};
use crate::machine::{Machine, Power};

/// What requests leave behind for the server and the loop.
#[derive(Debug, Default)]
pub struct Effects {
    pub(crate) power: Option<Power>,
    pub(crate) trial: Option<Trial>,
    /// A supervised service to restart (its id).
    pub(crate) restart: Option<String>,
    /// A supervised service to start or stop (its id).
    pub(crate) service_op: Option<(String, crate::supervisor::Op)>,
    /// Where the node reads its config from: an applied config is written there.
    pub(crate) config_path: Option<PathBuf>,
    /// etcd's data directory and the file that keeps a bootstrap request.
    pub(crate) etcd: Option<crate::etcd::bootstrap::Paths>,
    /// `Bootstrap` was accepted: start etcd as a new cluster.
    pub(crate) bootstrap: bool,
    /// An upgrade downloading on its worker.
    pub(crate) upgrade: Option<crate::upgrade::Job>,
    /// The last upgrade loaded (or, under `keelson run`, verified): its `image` and version.
    pub(crate) upgraded: Option<(String, String)>,
    /// How long the certificates trustd signs are valid (`None`: a year).
    pub(crate) trustd_lifetime: Option<std::time::Duration>,
    /// Trust roots for an upgrade's https downloads (empty: the image's defaults).
    pub(crate) roots: Vec<PathBuf>,
    /// A graceful reset of a control plane whose etcd member count is being checked: it
    /// goes ahead when the check's thread says so ([`follow_reset`]).
    pub(crate) pending_reset: Option<(std::sync::mpsc::Receiver<()>, crate::machine::Reset)>,
    /// `EtcdLeaveCluster` under way: once its thread removed the member, etcd is stopped
    /// and kept stopped ([`follow_etcd_leave`]).
    pub(crate) etcd_left: Option<std::sync::mpsc::Receiver<()>>,
    /// The member was removed: the loop stops etcd for good (taken once).
    pub(crate) etcd_stop: bool,
}

impl Effects {
    /// Keep `text` in the config file; what to tell the client.
    pub(crate) fn keep(&self, text: &str) -> Value {
        match &self.config_path {
            Some(p) => match trial::write_back(p, text) {
                Ok(()) => {
                    log::info!(target: "api", "the applied config is kept in {}", p.display());
                    // The newest config wins: a config staged before would undo it at the
                    // next start.
                    let staged = crate::staged::path_for(p);
                    if std::fs::remove_file(&staged).is_ok() {
                        log::info!(target: "api", "{} dropped: a newer config was applied", staged.display());
                    }
                    json!(p.display().to_string())
                }
                Err(e) => {
                    log::error!(target: "api", "the applied config could not be kept: {e}");
                    json!(format!("not kept for the next start: {e}"))
                }
            },
            None => json!("not kept for the next start: the node has no config file"),
        }
    }
}

/// `Reset`: once services stopped, the loop ends and the wipe follows (PID 1: the state
/// partition's slots and the state directory; `keelson run`: its directories), then a reboot
/// or power off. Refused while an upgrade is under way or the node is already going down.
pub(crate) fn reset(effects: &mut Effects, r: crate::machine::Reset) -> Result<(), String> {
    if effects.power.is_some() {
        return Err("the node is already going down".into());
    }
    if let Some(job) = &effects.upgrade {
        return Err(format!("an upgrade from {} is under way", job.shown));
    }
    log::warn!(target: "api", "reset requested: wipe {}, then {}{}", wipe_names(r.wipe), if r.reboot { "reboot" } else { "power off" }, if r.graceful { "" } else { " (not graceful: services get 1 s)" });
    effects.power = Some(Power::Reset(r));
    Ok(())
}

/// A graceful reset whose etcd check passed goes ahead; one the check refused is dropped
/// (its caller got the refusal).
pub(crate) fn follow_reset(effects: &mut Effects) {
    let Some((rx, r)) = &effects.pending_reset else { return };
    let r = *r;
    match rx.try_recv() {
        Ok(()) => {
            effects.pending_reset = None;
            if let Err(e) = reset(effects, r) {
                log::warn!(target: "api", "reset not started: {e}");
            }
        }
        Err(std::sync::mpsc::TryRecvError::Disconnected) => effects.pending_reset = None,
        Err(std::sync::mpsc::TryRecvError::Empty) => {}
    }
}

/// etcd left the cluster through the API: the loop stops it and keeps it stopped (a removed
/// member's etcd would only exit again), as Talos stops it after its leave.
pub(crate) fn follow_etcd_leave(effects: &mut Effects) {
    let Some(rx) = &effects.etcd_left else { return };
    match rx.try_recv() {
        Ok(()) => {
            effects.etcd_left = None;
            effects.etcd_stop = true;
        }
        Err(std::sync::mpsc::TryRecvError::Disconnected) => effects.etcd_left = None,
        Err(std::sync::mpsc::TryRecvError::Empty) => {}
    }
}

fn wipe_names(w: crate::machine::Wipe) -> &'static str {
    match (w.state, w.ephemeral) {
        (true, true) => "STATE and EPHEMERAL",
        (true, false) => "STATE",
        (false, true) => "EPHEMERAL",
        (false, false) => "nothing",
    }
}

/// `Upgrade`: check the manifest URL now, download and verify on a worker; the loop boots
/// the result ([`follow_upgrade`]). Under PID 1 only: `keelson run` verifies and stops
/// there (its host's kernel is not its to replace).
pub(crate) fn upgrade(effects: &mut Effects, image: &str) -> Result<String, String> {
    // The same request again (a client that retried, an operator that looked before the node
    // went down) is answered as the first was and starts nothing.
    if let Some(job) = &effects.upgrade {
        if job.image == image {
            log::info!(target: "upgrade", "upgrade from {} requested again while it is under way: nothing new started", job.shown);
            return Ok(job.shown.clone());
        }
        return Err(format!("an upgrade from {} is under way", job.shown));
    }
    if let Some((done, version)) = &effects.upgraded {
        if done == image {
            let shown = crate::upgrade::manifest_url(image).map(|u| u.redacted())?;
            log::info!(target: "upgrade", "upgrade from {shown} requested again: it was taken already ({version}), nothing done");
            return Ok(shown);
        }
    }
    if effects.power.is_some() {
        return Err("the node is going down".into());
    }
    let url = crate::upgrade::manifest_url(image)?;
    let roots = if effects.roots.is_empty() {
        crate::fetch::client::DEFAULT_ROOTS.iter().map(PathBuf::from).collect()
    } else {
        effects.roots.clone()
    };
    let boot = std::process::id() == 1;
    let job = crate::upgrade::start(image, url, roots, boot)?;
    log::warn!(target: "upgrade", "upgrade requested: fetching the manifest {}", job.shown);
    let shown = job.shown.clone();
    effects.upgrade = Some(job);
    Ok(shown)
}

/// The upgrade's worker answered: a loaded kernel stops the node to boot it; a refusal is
/// one line and the node keeps running.
pub(crate) fn follow_upgrade(effects: &mut Effects) {
    use crate::upgrade::Outcome;
    let Some(outcome) = effects.upgrade.as_ref().and_then(crate::upgrade::Job::poll) else {
        return;
    };
    let image = effects.upgrade.take().map(|j| j.image).unwrap_or_default();
    match outcome {
        Outcome::Loaded { version } => {
            effects.upgraded = Some((image, version.clone()));
            log::warn!(target: "upgrade", "upgrade to {version} loaded: stopping services to boot it");
            if effects.power.is_none() {
                effects.power = Some(Power::Kexec);
            }
        }
        Outcome::Current { version } => {
            log::warn!(target: "upgrade", "upgrade: the manifest names {version}, which this node runs already: nothing downloaded, nothing loaded")
        }
        Outcome::Verified { version } => {
            effects.upgraded = Some((image, version.clone()));
            log::warn!(target: "upgrade", "upgrade to {version} downloaded and verified; keelson run does not replace its host's kernel: nothing loaded")
        }
        Outcome::Failed(line) => log::error!(target: "upgrade", "upgrade refused: {line}"),
    }
}

/// `config confirm`: keep the config on trial. Ok: where it is kept (or why not); Err: there
/// is none.
pub(crate) fn confirm_config(effects: &mut Effects) -> Result<Value, String> {
    let trial = effects.trial.take().ok_or("no config on trial (apply-config --mode try first)")?;
    log::info!(target: "api", "the config on trial is confirmed");
    Ok(effects.keep(&trial.text))
}

/// `reboot --mode staged`: reboot, only when a staged config waits (the next start boots into
/// it).
pub(crate) fn staged_reboot(effects: &mut Effects) -> Result<(), String> {
    let waiting =
        effects.config_path.as_deref().is_some_and(|p| crate::staged::path_for(p).is_file());
    if !waiting {
        return Err(
            "reboot --mode staged: no staged config (apply-config --mode staged first)".into()
        );
    }
    effects.power = Some(Power::Reboot);
    Ok(())
}

/// keelson's status document: stage and readiness, uptime, network readiness, the kubelet,
/// time sync, the persistent state and the controllers' last errors.
pub(crate) fn machine_status(rt: &Runtime, machine: Machine, node: &str, now: Instant) -> Value {
    let store = rt.store();
    let network = store.get_spec::<NetworkStatus>(Namespace::Network, NETWORK_STATUS_ID);
    let ready =
        network.is_some_and(|s| s.address_ready && s.connectivity_ready && s.etc_files_ready);
    let status = store.get_spec::<MachineStatus>(Namespace::Runtime, MACHINE_STATUS_ID);
    json!({
        "node": node,
        "stage": status.map(|s| s.stage),
        "ready": status.is_some_and(|s| s.status.ready),
        "unmetConditions": status.map(|s| &s.status.unmet_conditions),
        "uptimeSeconds": now.saturating_duration_since(machine.started).as_secs_f64(),
        "settled": machine.settled,
        "networkReady": ready,
        "network": network,
        "kubelet": store.get_spec::<ServiceStatus>(Namespace::Runtime, "kubelet"),
        "time": store.get_spec::<TimeStatus>(Namespace::Runtime, TIME_STATUS_ID),
        "state": crate::state::status(),
        "errors": rt.controllers().iter().filter_map(|c| c.last_error.as_ref().map(|e| format!("{}: {e}", c.name))).collect::<Vec<_>>(),
    })
}

/// The merged spec kinds an `apply-config` diff covers: the layered kinds of the kind table.
const SPEC_KINDS: &[Kind] = Kind::LAYERED;

fn merged_specs<'a>(resources: impl Iterator<Item = &'a Resource>) -> Specs {
    net::sort::into_map(
        resources
            .filter(|r| {
                r.metadata.namespace == Namespace::Network && SPEC_KINDS.contains(&r.metadata.kind)
            })
            .map(|r| {
                let key = (r.metadata.kind.short_name().to_owned(), r.metadata.id.to_string());
                (key, serde_json::to_value(&r.spec).unwrap_or(Value::Null))
            }),
    )
}

/// What the config and merge controllers make of `cfg` with the running node's command line
/// and links (what `plan` does, with the live inputs).
fn plan(live: &Runtime, cfg: &MachineConfig) -> Result<Specs, String> {
    const SOURCE: &str = "api";
    let mut rt = Runtime::new();
    let mut ours = Vec::new();
    for c in controllers::config_and_merge() {
        ours.push(c.name());
        rt.register(c).map_err(|e| e.to_string())?;
    }
    let err = |e: runtime::StoreError| e.to_string();
    let store = live.store();
    // Layers the config does not produce (DHCP and other operators) stay as they are: copy
    // them, or the diff would report their addresses and routes as removed.
    for r in store.iter().filter(|r| {
        r.metadata.namespace == Namespace::NetworkConfig && !ours.contains(&r.metadata.owner)
    }) {
        if Kind::LAYERED.contains(&r.spec.kind()) {
            let id = &*r.metadata.id;
            rt.put_input_any(SOURCE, Namespace::NetworkConfig, id, r.spec.clone()).map_err(err)?;
        }
    }
    if let Some(cmdline) =
        store.get_spec::<net::cmdline::CmdlineNetwork>(Namespace::Runtime, CMDLINE_ID)
    {
        rt.put_input(SOURCE, Namespace::Runtime, CMDLINE_ID, cmdline.clone()).map_err(err)?;
    }
    for (id, link) in store.list_specs::<LinkStatus>(Namespace::Network) {
        rt.put_input(SOURCE, Namespace::Network, id, link.clone()).map_err(err)?;
    }
    rt.put_input(SOURCE, Namespace::Config, MACHINE_CONFIG_ID, cfg.clone()).map_err(err)?;
    let now = Instant::now();
    while rt.has_work() {
        rt.run(now);
    }
    Ok(merged_specs(rt.store().iter()))
}

/// `apply_config`, then what the mode asks: a trial to roll back, a reboot.
pub(crate) fn apply_with_mode(
    rt: &mut Runtime,
    apply: Apply<'_>,
    mode: ApplyMode,
    effects: &mut Effects,
    now: Instant,
) -> Result<Value, String> {
    let Apply { text, dry_run, .. } = apply;
    if mode == ApplyMode::Staged {
        return stage(rt, apply, effects);
    }
    let trial = match mode {
        ApplyMode::Try(t) if !dry_run => {
            Some(Trial::start(rt, effects.trial.take(), t, now, text)?)
        }
        _ => None,
    };
    let mut v = apply_config(rt, apply)?;
    if dry_run {
        return Ok(v);
    }
    match (mode, trial) {
        (ApplyMode::Try(t), Some(trial)) => {
            log::warn!(target: "api", "*** config on trial for {} s: `keelson config confirm` keeps it, otherwise it is rolled back ***", t.as_secs());
            effects.trial = Some(trial);
            v["trialSeconds"] = json!(t.as_secs());
        }
        (ApplyMode::Reboot, _) => {
            effects.trial = None;
            effects.power = Some(Power::Reboot);
            v["reboot"] = json!(true);
            v["kept"] = effects.keep(text);
        }
        _ => {
            effects.trial = None;
            v["kept"] = effects.keep(text);
        }
    }
    Ok(v)
}

/// `--mode staged`: validate and diff, then keep the config beside the config file for the
/// next start, which boots into it; nothing changes now.
fn stage(rt: &mut Runtime, apply: Apply<'_>, effects: &Effects) -> Result<Value, String> {
    let Apply { text, dry_run, .. } = apply;
    let Some(config) = &effects.config_path else {
        return Err("--mode staged: the node has no config file to stage a config beside".into());
    };
    let mut v = apply_config(rt, Apply { dry_run: true, ..apply })?;
    v["dryRun"] = json!(dry_run);
    if dry_run {
        return Ok(v);
    }
    let staged = crate::staged::path_for(config);
    trial::write_back(&staged, text).map_err(|e| format!("--mode staged: {e}"))?;
    log::info!(target: "api", "a config is staged in {}: the next start boots into it", staged.display());
    v["staged"] = json!(staged.display().to_string());
    Ok(v)
}

/// An `apply-config` request's config and how to take it.
#[derive(Clone, Copy)]
pub(crate) struct Apply<'a> {
    /// The YAML text.
    pub(crate) text: &'a str,
    /// Only report the diff.
    pub(crate) dry_run: bool,
    /// `--allow-partial`: drop invalid entries and apply the rest.
    pub(crate) partial: bool,
}

/// The config an apply brings. Any invalid entry refuses it whole and the running config
/// stays (Talos's rule for applies), unless the caller allowed a partial apply: then the
/// invalid entries are dropped, each logged, and the rest applies.
pub(crate) fn load_applied(
    text: &str,
    partial: bool,
) -> Result<net::config::MachineConfig, String> {
    let report = net::config::check(text);
    if report.errors.is_empty() {
        return Ok(report.config);
    }
    if partial && report.kept {
        for line in &report.config.dropped {
            log::warn!(target: "api", "applied config: {line}");
        }
        return Ok(report.config);
    }
    // Every invalid entry, up to a bound: the answer is one line.
    const SHOWN: usize = 16;
    let mut lines: Vec<String> =
        report.errors.iter().take(SHOWN).map(ToString::to_string).collect();
    if report.errors.len() > SHOWN {
        lines.push(format!("and {} more", report.errors.len() - SHOWN));
    }
    let hint = if report.kept { "; --allow-partial applies the rest" } else { "" };
    Err(format!("invalid config: {}; nothing applied{hint}", lines.join("; ")))
}

/// Validate, diff against the live merged specs, and apply unless `dry_run`.
fn apply_config(rt: &mut Runtime, apply: Apply<'_>) -> Result<Value, String> {
    let Apply { text, dry_run, partial } = apply;
    let cfg = load_applied(text, partial)?;
    // A CA the node cannot serve with would leave it with no way in over the network.
    if let Some(ca) = &cfg.machine.ca {
        remote::check_ca(&cfg, ca).map_err(|e| format!("invalid config: machine.ca: {e}"))?;
    }
    if !dry_run {
        crate::state::check_install(&cfg).map_err(|e| {
            log::error!(target: "api", "config refused: {e}");
            format!("config refused: {e}")
        })?;
    }
    let planned = plan(rt, &cfg)?;
    let live = merged_specs(rt.store().iter());
    let changes = diff::diff(&live, &planned);
    let warnings = cfg.warnings.clone();
    let dropped = cfg.dropped.clone();
    // The same configuration again (a manager repeating a step it cannot tell was done) is
    // recognised and changes nothing: no resource is rewritten, no service restarted.
    let unchanged =
        rt.store().get_spec::<MachineConfig>(Namespace::Config, MACHINE_CONFIG_ID) == Some(&cfg);
    if !dry_run {
        if unchanged {
            log::info!(target: "api", "applied the running machine config again: nothing changes");
        } else {
            rt.put_input(crate::machine::SOURCE, Namespace::Config, MACHINE_CONFIG_ID, cfg)
                .map_err(|e| e.to_string())?;
            log::info!(target: "api", "applied a new machine config ({} resource changes)", changes.len());
        }
        crate::api::rpc::stats::config_applied(!unchanged);
    }
    Ok(
        json!({"ok": true, "dryRun": dry_run, "unchanged": unchanged, "changes": changes, "warnings": warnings, "dropped": dropped}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etcd_stops_once_a_leave_removed_the_member_and_not_after_a_refusal() {
        let mut e = Effects::default();
        let (tx, rx) = std::sync::mpsc::channel();
        e.etcd_left = Some(rx);
        follow_etcd_leave(&mut e);
        assert!(!e.etcd_stop && e.etcd_left.is_some(), "nothing yet");
        tx.send(()).unwrap_or_else(|err| unreachable!("{err}"));
        follow_etcd_leave(&mut e);
        assert!(e.etcd_stop && e.etcd_left.is_none());
        // A refused leave drops its sender: etcd keeps running.
        let mut e = Effects::default();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        e.etcd_left = Some(rx);
        drop(tx);
        follow_etcd_leave(&mut e);
        assert!(!e.etcd_stop && e.etcd_left.is_none());
    }

    /// An all-or-nothing apply of `text`.
    fn strict(text: &str, dry_run: bool) -> Apply<'_> {
        Apply { text, dry_run, partial: false }
    }

    fn config(addr: &str) -> String {
        format!(
            "version: v1alpha1\nmachine:\n  network:\n    interfaces:\n      - interface: eth0\n        addresses: [{addr}]\n"
        )
    }

    /// A runtime with only the config and merge controllers, an `eth0` and a config.
    fn live(addr: &str) -> Runtime {
        let mut rt = Runtime::new();
        for c in controllers::config_and_merge() {
            rt.register(c).unwrap_or_else(|e| unreachable!("{e}"));
        }
        let link = LinkStatus {
            index: 2,
            operational_state: "up".into(),
            link_state: true,
            hardware_addr: net::resource::nethelpers::HardwareAddr(vec![2, 0, 0, 0, 0, 2]),
            ..LinkStatus::default()
        };
        let put = |rt: &mut Runtime| -> Result<(), runtime::StoreError> {
            rt.put_input("test", Namespace::Runtime, CMDLINE_ID, net::cmdline::parse(""))?;
            rt.put_input("test", Namespace::Network, "eth0", link)?;
            let cfg = net::config::parse(&config(addr)).unwrap_or_else(|e| unreachable!("{e}"));
            rt.put_input(crate::machine::SOURCE, Namespace::Config, MACHINE_CONFIG_ID, cfg)
        };
        put(&mut rt).unwrap_or_else(|e| unreachable!("{e}"));
        while rt.has_work() {
            rt.run(Instant::now());
        }
        rt
    }

    fn ids(v: &Value, action: &str) -> Vec<String> {
        v["changes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["action"] == action)
            .map(|c| {
                format!("{} {}", c["type"].as_str().unwrap_or(""), c["id"].as_str().unwrap_or(""))
            })
            .collect()
    }

    #[test]
    fn apply_config_diffs_then_applies() {
        let mut rt = live("10.0.0.2/24");
        let same = apply_config(&mut rt, strict(&config("10.0.0.2/24"), true))
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(same["changes"], json!([]), "{same}");

        let dry = apply_config(&mut rt, strict(&config("10.0.0.3/24"), true))
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(ids(&dry, "added"), ["AddressSpec eth0/10.0.0.3/24"], "{dry}");
        assert_eq!(ids(&dry, "removed"), ["AddressSpec eth0/10.0.0.2/24"], "{dry}");
        // A dry run changes nothing.
        assert!(!rt.has_work());
        assert!(rt
            .store()
            .get(Namespace::Network, Kind::AddressSpec, "eth0/10.0.0.2/24")
            .is_some());

        let applied = apply_config(&mut rt, strict(&config("10.0.0.3/24"), false))
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(applied["changes"], dry["changes"]);
        while rt.has_work() {
            rt.run(Instant::now());
        }
        assert!(rt
            .store()
            .get(Namespace::Network, Kind::AddressSpec, "eth0/10.0.0.3/24")
            .is_some());
        assert!(rt
            .store()
            .get(Namespace::Network, Kind::AddressSpec, "eth0/10.0.0.2/24")
            .is_none());
    }

    #[test]
    fn the_running_config_applied_again_changes_nothing() {
        let mut rt = live("10.0.0.2/24");
        let before = rt
            .store()
            .get(Namespace::Config, Kind::MachineConfig, MACHINE_CONFIG_ID)
            .map(|r| r.metadata.version);
        let (_, _, counted) = crate::api::rpc::stats::snapshot();
        let again = apply_config(&mut rt, strict(&config("10.0.0.2/24"), false))
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(again["unchanged"], true, "{again}");
        assert_eq!(again["changes"], json!([]), "{again}");
        // Nothing rewritten, nothing for a controller to do.
        assert!(!rt.has_work());
        let after = rt
            .store()
            .get(Namespace::Config, Kind::MachineConfig, MACHINE_CONFIG_ID)
            .map(|r| r.metadata.version);
        assert_eq!(before, after);
        let (_, _, now) = crate::api::rpc::stats::snapshot();
        assert!(now.unchanged > counted.unchanged, "{now:?}");
        // Another one is a change.
        let other = apply_config(&mut rt, strict(&config("10.0.0.3/24"), false))
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(other["unchanged"], false, "{other}");
        assert!(rt.has_work());
    }

    #[test]
    fn apply_config_refuses_a_bad_config_with_its_line() {
        let mut rt = live("10.0.0.2/24");
        let e = apply_config(
            &mut rt,
            strict("version: v1alpha1\nmachine:\n  network:\n    interfaces: 3\n", false),
        )
        .err()
        .unwrap_or_default();
        assert!(e.contains("line"), "{e}");
        assert!(!rt.has_work());
    }

    #[test]
    fn apply_config_with_an_invalid_entry_is_refused_whole_unless_partial_is_asked() {
        let mut rt = live("10.0.0.2/24");
        let text = format!(
            "{}        mtu: 65536\n      - interface: eth1\n        addresses: [10.0.1.1/24]\n",
            config("10.0.0.3/24")
        );
        let e = apply_config(&mut rt, strict(&text, false)).err().unwrap_or_default();
        assert!(e.contains("machine.network.interfaces[0].mtu (line 7"), "{e}");
        assert!(e.contains("nothing applied; --allow-partial applies the rest"), "{e}");
        assert!(!rt.has_work(), "the running config stays");
        let v = apply_config(&mut rt, Apply { text: &text, dry_run: false, partial: true })
            .unwrap_or_else(|e| unreachable!("{e}"));
        let dropped = v["dropped"].as_array().cloned().unwrap_or_default();
        assert_eq!(dropped.len(), 1, "{v}");
        assert!(dropped[0].as_str().unwrap_or_default().contains("interfaces[0].mtu"), "{v}");
        assert!(rt.has_work(), "the rest is applied");
        let cfg =
            rt.store().get_spec::<net::config::MachineConfig>(Namespace::Config, MACHINE_CONFIG_ID);
        let addrs: Vec<String> = cfg
            .map(|c| {
                c.machine
                    .network
                    .interfaces
                    .iter()
                    .flat_map(|d| d.addresses.iter().map(ToString::to_string))
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(addrs, ["10.0.0.3/24", "10.0.1.1/24"]);
        // Nothing valid at all: refused even when partial, and no hint.
        let e = apply_config(
            &mut rt,
            Apply { text: "\u{1}\u{2}garbage", dry_run: false, partial: true },
        )
        .err()
        .unwrap_or_default();
        assert!(e.contains("not YAML") && !e.contains("--allow-partial"), "{e}");
    }
}
