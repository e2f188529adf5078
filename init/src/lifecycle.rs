// SPDX-License-Identifier: Apache-2.0
//! The machine's stage and readiness as a pure function of what the node knows: the
//! [`Facts`] one loop iteration gathered, and the stage before. No I/O; the node loop
//! gathers the facts, publishes the result as the `MachineStatus` resource and logs each
//! transition on one console line.
//!
//! The stages follow what an operator watching the node infers (Talos's machine lifecycle):
//! no config is `maintenance`; the install step is `installing`; a healthy kubelet (or none
//! configured) is `running`; a changed kubelet command after it ran is `upgrading` until the
//! new one is healthy; a reboot or power off ends in `rebooting` or `shuttingDown`, which
//! nothing leaves. A kubelet that fails after it ran does not leave `running`: the machine is
//! then not ready, with the kubelet's condition unmet.

use net::resource::{MachineStage, MachineStatus, MachineStatusStatus, UnmetCondition};

/// How the node is going down, once it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Going {
    /// Reboot.
    Reboot,
    /// Power off (or exit, for `keelson run`).
    Down,
}

/// What the kubelet is doing, as far as the stage cares.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KubeletFacts {
    /// `machine.kubelet.command` is set.
    pub configured: bool,
    /// The process running is the configured one and its health endpoint answered 200.
    pub healthy: bool,
    /// The configured command or flags differ from the ones that were last healthy.
    pub changed: bool,
    /// Why it is not healthy (empty when it is).
    pub reason: String,
}

/// Everything the stage and readiness depend on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facts {
    /// A reboot or power off is under way.
    pub going: Option<Going>,
    /// The install step is preparing a disk.
    pub installing: bool,
    /// A machine config is loaded.
    pub configured: bool,
    /// The entries left out of it because they were invalid, one line each.
    pub dropped: Vec<String>,
    /// Why the network is not ready (`None`: it is).
    pub network: Option<String>,
    /// Why the clock is not trusted (`None`: it is).
    pub time: Option<String>,
    /// The kubelet.
    pub kubelet: KubeletFacts,
}

/// The stage after `prev`, given `f`.
pub fn next_stage(prev: MachineStage, f: &Facts) -> MachineStage {
    use MachineStage::*;
    match f.going {
        Some(Going::Reboot) => return Rebooting,
        Some(Going::Down) => return ShuttingDown,
        None => {}
    }
    if matches!(prev, Rebooting | ShuttingDown) {
        return prev;
    }
    if f.installing {
        return Installing;
    }
    if !f.configured {
        return Maintenance;
    }
    let k = &f.kubelet;
    if !k.configured || k.healthy {
        return Running;
    }
    match prev {
        Running | Upgrading if k.changed => Upgrading,
        // Once it ran, a failing kubelet keeps the stage (and makes the machine not ready);
        // an upgrade lasts until the new kubelet is healthy.
        Running | Upgrading => prev,
        _ => Booting,
    }
}

/// What keeps the machine from being ready, in a fixed order.
pub fn unmet(f: &Facts) -> Vec<UnmetCondition> {
    let mut out = Vec::new();
    let mut add = |name: &str, reason: &str| {
        out.push(UnmetCondition { name: name.into(), reason: reason.into() });
    };
    if !f.configured {
        add("config", "no machine config (maintenance mode)");
    } else if !f.dropped.is_empty() {
        add("config", &dropped_reason(&f.dropped));
    }
    if let Some(why) = &f.network {
        add("network", why);
    }
    if let Some(why) = &f.time {
        add("time", why);
    }
    if f.kubelet.configured && !f.kubelet.healthy {
        add("kubelet", &f.kubelet.reason);
    }
    out
}

/// The most dropped entries a `config` condition quotes; the node's log has them all.
const DROPPED_SHOWN: usize = 8;

/// `N invalid entries dropped: LINE; LINE; ... (M more in the log)`.
fn dropped_reason(lines: &[String]) -> String {
    let n = lines.len();
    let shown: Vec<&str> = lines.iter().take(DROPPED_SHOWN).map(String::as_str).collect();
    let more = match n.saturating_sub(DROPPED_SHOWN) {
        0 => String::new(),
        m => format!(" ({m} more in the log)"),
    };
    let entries = if n == 1 { "entry" } else { "entries" };
    format!("{n} invalid {entries} dropped, the rest applies: {}{more}", shown.join("; "))
}

/// The machine status after `prev`, given `f`.
pub fn status(prev: MachineStage, f: &Facts) -> MachineStatus {
    let stage = next_stage(prev, f);
    let unmet_conditions = unmet(f);
    let ready = stage == MachineStage::Running && unmet_conditions.is_empty();
    MachineStatus { stage, status: MachineStatusStatus { ready, unmet_conditions }, boot: None }
}

/// The console line of a transition: the new stage, and what is missing when not ready.
pub fn transition_line(from: Option<MachineStage>, to: &MachineStatus) -> String {
    let mut line = match from {
        Some(f) => format!("machine stage: {f} -> {}", to.stage),
        None => format!("machine stage: {}", to.stage),
    };
    if to.status.ready {
        line.push_str(" (ready)");
    } else if !to.status.unmet_conditions.is_empty() {
        let names: Vec<&str> = to.status.unmet_conditions.iter().map(|c| c.name.as_str()).collect();
        line.push_str(&format!(" (waiting for {})", names.join(", ")));
    }
    line
}

/// The console line of a change of readiness within a stage.
pub fn readiness_line(s: &MachineStatus) -> String {
    if s.status.ready {
        return "machine ready".into();
    }
    let what: Vec<String> =
        s.status.unmet_conditions.iter().map(|c| format!("{}: {}", c.name, c.reason)).collect();
    format!("machine not ready: {}", what.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use MachineStage::*;

    fn kubelet(healthy: bool, changed: bool) -> KubeletFacts {
        KubeletFacts { configured: true, healthy, changed, reason: "r".into() }
    }

    fn facts(configured: bool, k: KubeletFacts) -> Facts {
        Facts { configured, kubelet: k, ..Facts::default() }
    }

    /// Every transition the lifecycle makes, as a table: previous stage, facts, next stage.
    #[test]
    fn stage_table() {
        let none = KubeletFacts::default();
        let down = |g| Facts { going: Some(g), ..facts(true, kubelet(true, false)) };
        let installing = Facts { installing: true, ..facts(true, kubelet(false, false)) };
        let cases: Vec<(MachineStage, Facts, MachineStage)> = vec![
            // Boot: no config waits in maintenance; with one, booting until the kubelet is healthy.
            (Booting, facts(false, none.clone()), Maintenance),
            (Booting, facts(true, kubelet(false, false)), Booting),
            (Booting, facts(true, kubelet(true, false)), Running),
            (Booting, facts(true, none.clone()), Running),
            // Maintenance: a config applied there installs, then boots.
            (Maintenance, facts(false, none.clone()), Maintenance),
            (Maintenance, installing.clone(), Installing),
            (Installing, installing.clone(), Installing),
            (Installing, facts(true, kubelet(false, false)), Booting),
            (Installing, facts(true, kubelet(true, false)), Running),
            (Maintenance, facts(true, kubelet(false, false)), Booting),
            // A changed kubelet after it ran is an upgrade, until the new one is healthy.
            (Running, facts(true, kubelet(false, true)), Upgrading),
            (Upgrading, facts(true, kubelet(false, true)), Upgrading),
            (Upgrading, facts(true, kubelet(false, false)), Upgrading),
            (Upgrading, facts(true, kubelet(true, false)), Running),
            // A kubelet that fails after it ran keeps `running` (not ready).
            (Running, facts(true, kubelet(false, false)), Running),
            // Before it ever ran, a changed command is no upgrade.
            (Booting, facts(true, kubelet(false, true)), Booting),
            // The config removed: back to maintenance.
            (Running, facts(false, none.clone()), Maintenance),
            // Going down wins over everything and is never left.
            (Running, down(Going::Reboot), Rebooting),
            (Upgrading, down(Going::Down), ShuttingDown),
            (Maintenance, Facts { going: Some(Going::Down), ..Facts::default() }, ShuttingDown),
            (Rebooting, facts(true, kubelet(true, false)), Rebooting),
            (ShuttingDown, facts(false, none.clone()), ShuttingDown),
            (Installing, Facts { going: Some(Going::Reboot), ..installing }, Rebooting),
        ];
        for (prev, f, want) in cases {
            assert_eq!(next_stage(prev, &f), want, "{prev} with {f:?}");
        }
    }

    #[test]
    fn ready_only_when_running_with_nothing_unmet() {
        let mut f = facts(true, kubelet(true, false));
        let s = status(Booting, &f);
        assert_eq!((s.stage, s.status.ready), (Running, true));
        assert_eq!(transition_line(Some(Booting), &s), "machine stage: booting -> running (ready)");
        f.time = Some("not synced".into());
        f.kubelet = kubelet(false, false);
        let s = status(Running, &f);
        assert_eq!((s.stage, s.status.ready), (Running, false));
        let names: Vec<&str> = s.status.unmet_conditions.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["time", "kubelet"]);
        assert_eq!(transition_line(None, &s), "machine stage: running (waiting for time, kubelet)");
        let s = status(Booting, &facts(false, KubeletFacts::default()));
        assert_eq!((s.stage, s.status.ready), (Maintenance, false));
        assert_eq!(s.status.unmet_conditions[0].name, "config");
    }

    #[test]
    fn dropped_entries_are_an_unmet_config_condition() {
        let mut f = facts(true, KubeletFacts::default());
        f.dropped = vec!["machine.network.interfaces[1].mtu (line 8, column 14): 65536 is outside 68..65535 (dropped machine.network.interfaces[1].mtu)".into()];
        let s = status(Booting, &f);
        assert_eq!((s.stage, s.status.ready), (Running, false));
        assert_eq!(s.status.unmet_conditions.len(), 1);
        let c = &s.status.unmet_conditions[0];
        assert_eq!(c.name, "config");
        assert!(c.reason.starts_with("1 invalid entry dropped, the rest applies: machine.network.interfaces[1].mtu (line 8"), "{}", c.reason);
        f.dropped = (0..10).map(|i| format!("e{i}")).collect();
        let reason = &status(Running, &f).status.unmet_conditions[0].reason;
        assert!(reason.ends_with("e7 (2 more in the log)"), "{reason}");
    }
}
