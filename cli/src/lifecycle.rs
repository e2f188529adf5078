// SPDX-License-Identifier: Apache-2.0
//! `keelson reset` and `keelson upgrade`: Talos's `Reset` and `Upgrade` with talosctl's flags
//! (those keelson honours) and its output. Both are gRPC only: a node without them is older
//! than these verbs. Each node answers on its own; one that refuses does not stop the others.

use std::ffi::OsString;
use std::process::ExitCode;

use talos_api::machine::{
    ResetPartitionSpec, ResetRequest, ResetResponse, ResetWipeMode, UpgradeRequest, UpgradeResponse,
};

use crate::client::{each, finish};
use crate::connect::{self, Common};
use crate::machine::path;
use crate::rpc::Channel;

/// `reset`'s arguments beyond the node options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResetArgs {
    pub graceful: bool,
    pub reboot: bool,
    pub labels: Vec<String>,
    pub user_disks: Vec<String>,
    pub mode: ResetWipeMode,
}

impl Default for ResetArgs {
    fn default() -> Self {
        // talosctl's defaults: graceful, power off, everything.
        Self {
            graceful: true,
            reboot: false,
            labels: Vec::new(),
            user_disks: Vec::new(),
            mode: ResetWipeMode::All,
        }
    }
}

impl ResetArgs {
    /// The request talosctl sends for these flags.
    pub fn request(&self) -> ResetRequest {
        ResetRequest {
            graceful: self.graceful,
            reboot: self.reboot,
            system_partitions_to_wipe: self
                .labels
                .iter()
                .map(|l| ResetPartitionSpec { label: l.clone(), wipe: true })
                .collect(),
            user_disks_to_wipe: self.user_disks.clone(),
            mode: self.mode as i32,
        }
    }
}

/// `true`/`false` of a `--flag=VALUE` (a bare `--flag` is true, as with talosctl).
fn boolean(name: &str, v: Option<OsString>) -> Result<bool, String> {
    match v.as_ref().and_then(|v| v.to_str()) {
        None if v.is_none() => Ok(true),
        Some("true") => Ok(true),
        Some("false") => Ok(false),
        _ => Err(format!("--{name}: true or false")),
    }
}

fn text(name: &str, p: &mut lexopt::Parser) -> Result<String, String> {
    p.value().map_err(|e| e.to_string())?.into_string().map_err(|_| format!("--{name}: not UTF-8"))
}

/// Parse `reset`'s arguments.
pub fn reset_args(raw: Vec<OsString>) -> Result<(Common, ResetArgs), String> {
    let mut p = lexopt::Parser::from_args(raw);
    let mut common = Common::default();
    let mut a = ResetArgs::default();
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        if let Some(opt) = connect::option(&arg) {
            common.set(opt, &mut p)?;
            continue;
        }
        match arg {
            lexopt::Arg::Long("graceful") => a.graceful = boolean("graceful", p.optional_value())?,
            lexopt::Arg::Long("reboot") => a.reboot = boolean("reboot", p.optional_value())?,
            lexopt::Arg::Long("system-labels-to-wipe") => {
                let v = text("system-labels-to-wipe", &mut p)?;
                a.labels.extend(v.split(',').filter(|l| !l.is_empty()).map(str::to_owned));
            }
            lexopt::Arg::Long("user-disks-to-wipe") => {
                let v = text("user-disks-to-wipe", &mut p)?;
                a.user_disks.extend(v.split(',').filter(|l| !l.is_empty()).map(str::to_owned));
            }
            lexopt::Arg::Long("wipe-mode") => {
                a.mode = match text("wipe-mode", &mut p)?.as_str() {
                    "all" => ResetWipeMode::All,
                    "system-disk" => ResetWipeMode::SystemDisk,
                    "user-disks" => ResetWipeMode::UserDisks,
                    other => {
                        return Err(format!(
                            "--wipe-mode {other:?}: all, system-disk or user-disks"
                        ))
                    }
                };
            }
            lexopt::Arg::Long("wait") => {
                if boolean("wait", p.optional_value())? {
                    return Err(
                        "--wait: keelson does not follow the reset's events; use --wait=false"
                            .into(),
                    );
                }
            }
            other => return Err(other.unexpected().to_string()),
        }
    }
    Ok((common, a))
}

/// `keelson reset [--graceful=true|false] [--reboot] [--system-labels-to-wipe LABEL,...]
/// [--user-disks-to-wipe DISK,...] [--wipe-mode all|system-disk|user-disks] [NODE OPTIONS]`.
pub fn reset_main(raw: Vec<OsString>) -> ExitCode {
    finish("reset", reset(raw))
}

fn reset(raw: Vec<OsString>) -> Result<(), String> {
    let (common, a) = reset_args(raw)?;
    let req = a.request();
    let then = if a.reboot { "reboots" } else { "powers off" };
    each(&common, |target, out| {
        let mut c = Channel::connect(target, false).map_err(|e| e.to_string())?;
        let _: ResetResponse = c.unary(&path("Reset"), &req).map_err(|e| e.to_string())?;
        writeln!(out, "reset: accepted; the node stops its services, wipes its state and {then}")
            .map_err(|e| e.to_string())
    })
}

/// `upgrade`'s arguments beyond the node options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpgradeArgs {
    pub image: String,
    pub stage: bool,
    pub force: bool,
    pub preserve: bool,
    /// `--reboot-mode powercycle` (the node refuses it: it upgrades by kexec only).
    pub powercycle: bool,
}

/// Parse `upgrade`'s arguments.
pub fn upgrade_args(raw: Vec<OsString>) -> Result<(Common, UpgradeArgs), String> {
    let mut p = lexopt::Parser::from_args(raw);
    let mut common = Common::default();
    let mut a = UpgradeArgs::default();
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        if let Some(opt) = connect::option(&arg) {
            common.set(opt, &mut p)?;
            continue;
        }
        match arg {
            lexopt::Arg::Long("image") => a.image = text("image", &mut p)?,
            lexopt::Arg::Long("stage") | lexopt::Arg::Short('s') => a.stage = true,
            lexopt::Arg::Long("force") | lexopt::Arg::Short('f') => a.force = true,
            lexopt::Arg::Long("preserve") | lexopt::Arg::Short('p') => a.preserve = true,
            lexopt::Arg::Long("reboot-mode") => {
                a.powercycle = match text("reboot-mode", &mut p)?.as_str() {
                    "default" => false,
                    "powercycle" => true,
                    other => return Err(format!("--reboot-mode {other:?}: default or powercycle")),
                };
            }
            lexopt::Arg::Long("wait") => {
                if boolean("wait", p.optional_value())? {
                    return Err("--wait: keelson does not follow the upgrade's events; use --wait=false and `keelson version`".into());
                }
            }
            other => return Err(other.unexpected().to_string()),
        }
    }
    if a.image.is_empty() {
        return Err(
            "--image URL is required: the https:// URL of an upgrade manifest (docs/upgrade.md)"
                .into(),
        );
    }
    Ok((common, a))
}

/// `keelson upgrade --image URL [--stage] [--force] [--preserve] [--reboot-mode MODE]
/// [NODE OPTIONS]`: talosctl's
/// table, NODE ACK STARTED.
pub fn upgrade_main(raw: Vec<OsString>) -> ExitCode {
    finish("upgrade", upgrade(raw))
}

fn upgrade(raw: Vec<OsString>) -> Result<(), String> {
    let (common, a) = upgrade_args(raw)?;
    let req = UpgradeRequest {
        image: a.image.clone(),
        preserve: a.preserve,
        stage: a.stage,
        force: a.force,
        reboot_mode: i32::from(a.powercycle),
    };
    let targets = common.targets()?;
    let mut rows = vec![vec!["NODE".to_owned(), "ACK".to_owned(), "STARTED".to_owned()]];
    let mut failed = Vec::new();
    for t in &targets {
        let answer = Channel::connect(t, false).and_then(|mut c| {
            let r: UpgradeResponse = c.unary(&path("Upgrade"), &req)?;
            Ok(r)
        });
        match answer {
            Ok(r) => {
                let started = crate::output::escape_cell(&now_utc());
                for m in &r.messages {
                    rows.push(vec![t.name(), crate::output::escape_cell(&m.ack), started.clone()]);
                }
            }
            Err(e) => failed.push(format!("{}: {e}", t.name())),
        }
    }
    if rows.len() > 1 {
        print!("{}", crate::output::align(&rows));
    }
    if failed.is_empty() {
        return Ok(());
    }
    for f in &failed {
        eprintln!("{f}");
    }
    Err(format!("{} of {} nodes failed", failed.len(), targets.len()))
}

/// Now as talosctl prints a time (UTC, RFC 3339).
fn now_utc() -> String {
    rfc3339(std::time::SystemTime::now())
}

/// A time as `YYYY-MM-DDTHH:MM:SSZ`, the resources' own formatting.
fn rfc3339(t: std::time::SystemTime) -> String {
    crate::resource::Rfc3339(t).to_string()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn args(a: &[&str]) -> Vec<OsString> {
        a.iter().map(OsString::from).collect()
    }

    #[test]
    fn reset_flags_as_talosctl_sends_them() {
        let (_, a) = reset_args(args(&[])).unwrap();
        assert_eq!(a, ResetArgs::default());
        let r = a.request();
        assert!(r.graceful && !r.reboot && r.system_partitions_to_wipe.is_empty());
        let (_, a) = reset_args(args(&[
            "--graceful=false",
            "--reboot",
            "--system-labels-to-wipe",
            "STATE",
            "--system-labels-to-wipe=EPHEMERAL",
            "--wait=false",
        ]))
        .unwrap();
        let r = a.request();
        assert!(!r.graceful && r.reboot);
        let labels: Vec<(&str, bool)> =
            r.system_partitions_to_wipe.iter().map(|s| (s.label.as_str(), s.wipe)).collect();
        assert_eq!(labels, [("STATE", true), ("EPHEMERAL", true)]);
        assert!(reset_args(args(&["--graceful=maybe"])).is_err());
        assert!(reset_args(args(&["--wait"])).is_err());
        let (_, a) = reset_args(args(&["--wipe-mode", "system-disk"])).unwrap();
        assert_eq!(a.request().mode, ResetWipeMode::SystemDisk as i32);
    }

    #[test]
    fn times_as_rfc3339() {
        let at = |s| std::time::UNIX_EPOCH + std::time::Duration::from_secs(s);
        assert_eq!(rfc3339(at(0)), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(at(951_782_400)), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(at(1_798_761_599)), "2026-12-31T23:59:59Z");
    }

    #[test]
    fn upgrade_needs_an_image() {
        assert!(upgrade_args(args(&[])).unwrap_err().contains("--image URL is required"));
        let (_, a) = upgrade_args(args(&["--image", "https://h/m.json", "--stage"])).unwrap();
        assert_eq!(a.image, "https://h/m.json");
        assert!(a.stage && !a.force && !a.powercycle);
        let (_, a) =
            upgrade_args(args(&["--image=https://h/m", "--reboot-mode", "powercycle"])).unwrap();
        assert!(a.powercycle);
        assert!(upgrade_args(args(&["--image=https://h/m", "--reboot-mode", "soon"])).is_err());
    }
}
