// SPDX-License-Identifier: Apache-2.0
//! The client commands: `get`, `logs`, `apply-config`, `explain`, `machine-status`,
//! `version`, ... Each connects to the node (the local socket, or TLS: [`crate::connect`]),
//! makes its gRPC calls (Talos's machine API, COSI, keelson's `keelson.v1.NodeService`) and
//! prints the answer; with several nodes, each node's output lines are prefixed with its name.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::{json, Value};

use crate::aliases;
use crate::connect::{self, Common, Target};
use crate::machine;
use crate::output::{self, Format};
use crate::resource::Kind;
use crate::resources::{self, Change, Query};
use crate::rpc::{Channel, RpcError};
use talos_api::google::Empty;
use talos_api::keelson;
use talos_api::machine::{
    ApplyConfigurationRequest, ApplyConfigurationResponse, ApplyMode, EventsRequest, RebootResponse,
};

/// The largest config file `apply-config` reads: past the node's request limit, so the node
/// can say itself that a file is too large, yet bounded.
const CONFIG_FILE_LIMIT: u64 = 64 << 20;

/// An RPC error as the verb reports it.
fn rpc_err(e: RpcError) -> String {
    e.to_string()
}

fn text(v: OsString) -> Result<String, String> {
    v.into_string().map_err(|v| format!("not UTF-8: {v:?}"))
}

/// A verb's exit: success, or its error on stderr as `keelson CMD: ERROR` and failure.
pub(crate) fn finish(cmd: &str, r: Result<(), String>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("keelson {cmd}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Run `f` for each node: straight to stdout for one, each line prefixed with the node's
/// name for several (a node that fails does not stop the others).
pub(crate) fn each(
    common: &Common,
    f: impl Fn(&Target, &mut dyn Write) -> Result<(), String>,
) -> Result<(), String> {
    let targets = common.targets()?;
    if let [one] = targets.as_slice() {
        return f(one, &mut std::io::stdout().lock());
    }
    let mut failed = 0;
    for t in &targets {
        let mut buf = Vec::new();
        let r = f(t, &mut buf);
        let name = t.name();
        let mut text = String::new();
        for line in String::from_utf8_lossy(&buf).lines() {
            text.push_str(&format!("{name}: {line}\n"));
        }
        std::io::stdout().lock().write_all(text.as_bytes()).map_err(|e| e.to_string())?;
        if let Err(e) = r {
            eprintln!("{name}: {e}");
            failed += 1;
        }
    }
    match failed {
        0 => Ok(()),
        n => Err(format!("{n} of {} nodes failed", targets.len())),
    }
}

/// `keelson get TYPE [ID] [--namespace NS] [-o FMT] [--watch] [--socket PATH]`
pub fn get_main(raw: Vec<OsString>) -> ExitCode {
    finish("get", get(raw))
}

fn get(raw: Vec<OsString>) -> Result<(), String> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_args(raw);
    let (mut common, mut ns, mut format, mut watch) =
        (Common::default(), None, Format::Table, false);
    let mut positional = Vec::new();
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        if let Some(opt) = connect::option(&arg) {
            common.set(opt, &mut p)?;
            continue;
        }
        match arg {
            Long("namespace") => ns = Some(text(p.value().map_err(|e| e.to_string())?)?),
            Short('o') | Long("output") => {
                format = text(p.value().map_err(|e| e.to_string())?)?
                    .parse::<Format>()
                    .map_err(|e| e.to_string())?
            }
            Long("watch") | Short('w') => watch = true,
            Value(v) => positional.push(text(v)?),
            _ => return Err(arg.unexpected().to_string()),
        }
    }
    let (kind, id) = match positional.as_slice() {
        [k] => (k, None),
        [k, id] => (k, Some(id.clone())),
        _ => {
            return Err(
                "usage: keelson get TYPE [ID] [--namespace NS] [-o table|yaml|json] [--watch]"
                    .into(),
            )
        }
    };
    let kind = aliases::resolve(kind).map_err(|e| e.to_string())?;
    let namespace = ns.unwrap_or_else(|| aliases::default_namespace(kind).to_string());
    if watch {
        let targets = common.targets()?;
        let [target] = targets.as_slice() else {
            return Err("--watch follows one node".into());
        };
        return watch_one(target, kind, &namespace, id, format);
    }
    each(&common, |target, out| {
        let mut c = Channel::connect(target, false).map_err(rpc_err)?;
        // A node in maintenance mode lets its machine status be read by ID only (COSI lists
        // of `runtime` are refused there, as Talos refuses them): it has one, `machine`.
        let id = match id.as_deref() {
            None if kind == Kind::MachineStatus && target.is_insecure() => {
                Some(crate::resource::MACHINE_STATUS_ID)
            }
            id => id,
        };
        get_one(&mut c, kind, &namespace, id, format, out)
    })
}

fn watch_one(
    target: &Target,
    kind: crate::resource::Kind,
    namespace: &str,
    id: Option<String>,
    format: Format,
) -> Result<(), String> {
    let mut c = Channel::connect(target, true).map_err(rpc_err)?;
    let node = resources::node_name(&mut c).map_err(rpc_err)?;
    let q = Query { kind, namespace };
    let out = &mut std::io::stdout().lock();
    let mut header = false;
    // Seeded wide enough for typical IDs, so later rows rarely have to widen a column.
    let mut widths: Vec<usize> = output::remote_header(&[" "], kind.short_name())
        .iter()
        .enumerate()
        .map(|(i, h)| match i {
            0 => 1,
            4 => h.len().max(28),
            _ => h.len().max(8),
        })
        .collect();
    let mut show = |change: Change, r: &talos_api::cosi::Resource| -> Result<(), String> {
        let r = match change {
            Change::Destroyed => resources::tombstone(r, q, &node),
            _ => resources::to_remote(r, q, &node),
        };
        let event = change.name();
        let text = match format {
            Format::Json => format!(
                "{}\n",
                json!({"ok": true, "event": event, "node": r.node, "resource": r.resource})
            ),
            Format::Yaml => format!(
                "event: {event}\n{}---\n",
                output::remote_yaml(&r).map_err(|e| e.to_string())?
            ),
            Format::Table => {
                let mark = match change {
                    Change::Created => "+",
                    Change::Destroyed => "-",
                    Change::Updated => "*",
                };
                let mut rows = Vec::new();
                if !header {
                    header = true;
                    rows.push(output::remote_header(&[" "], kind.short_name()));
                }
                rows.push(output::remote_row(&[mark], &r));
                output::align_with(&rows, &mut widths)
            }
        };
        out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(|e| e.to_string())
    };
    resources::watch(&mut c, q, id.as_deref(), &mut show).map_err(rpc_err)
}

fn get_one(
    c: &mut Channel,
    kind: crate::resource::Kind,
    namespace: &str,
    id: Option<&str>,
    format: Format,
    mut out: &mut dyn Write,
) -> Result<(), String> {
    let node = resources::node_name(c).map_err(rpc_err)?;
    let q = Query { kind, namespace };
    let items = match id {
        Some(id) => {
            vec![resources::to_remote(&resources::get(c, q, id).map_err(rpc_err)?, q, &node)]
        }
        None => resources::list(c, q)
            .map_err(rpc_err)?
            .iter()
            .map(|r| resources::to_remote(r, q, &node))
            .collect(),
    };
    output::render_remote(&mut out, &items, format).map_err(|e| e.to_string())
}

/// `keelson logs [SERVICE] [-f] [--tail N] [NODE OPTIONS]`: a service's log; machined's
/// (the default) is the node's own log ring (gRPC `Logs`).
pub fn logs_main(raw: Vec<OsString>) -> ExitCode {
    finish("logs", logs(raw))
}

/// `logs`'s arguments: node options, follow, tail lines (-1: all), the service.
fn logs_args(raw: Vec<OsString>) -> Result<(Common, bool, i32, String), String> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_args(raw);
    let (mut common, mut follow, mut tail, mut service) =
        (Common::default(), false, -1i32, None::<String>);
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        if let Some(opt) = connect::option(&arg) {
            common.set(opt, &mut p)?;
            continue;
        }
        match arg {
            Short('f') | Long("follow") => follow = true,
            Long("tail") => {
                let v = text(p.value().map_err(|e| e.to_string())?)?;
                tail = v.parse().map_err(|_| format!("--tail {v:?}: a number of lines"))?;
            }
            Value(v) if service.is_none() => service = Some(text(v)?),
            _ => return Err(arg.unexpected().to_string()),
        }
    }
    Ok((common, follow, tail, service.unwrap_or_else(|| "machined".into())))
}

fn logs(raw: Vec<OsString>) -> Result<(), String> {
    let (common, follow, tail, service) = logs_args(raw)?;
    let run = |target: &Target, out: &mut dyn Write| {
        grpc(target, follow, out, |c, out| machine::logs(c, &service, follow, tail, out))
    };
    if follow {
        let targets = common.targets()?;
        let [target] = targets.as_slice() else {
            return Err("-f follows one node".into());
        };
        return run(target, &mut std::io::stdout().lock());
    }
    each(&common, run)
}

/// `keelson apply-config FILE [--dry-run] [--allow-partial] [--socket PATH]`
pub fn apply_main(raw: Vec<OsString>) -> ExitCode {
    finish("apply-config", apply(raw))
}

fn apply(raw: Vec<OsString>) -> Result<(), String> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_args(raw);
    let (mut common, mut dry, mut file) = (Common::default(), false, None);
    let (mut mode, mut timeout) = (None::<String>, None::<u64>);
    let mut allow_partial = false;
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        if let Some(opt) = connect::option(&arg) {
            common.set(opt, &mut p)?;
            continue;
        }
        match arg {
            Long("dry-run") => dry = true,
            Long("allow-partial") => allow_partial = true,
            Short('m') | Long("mode") => mode = Some(text(p.value().map_err(|e| e.to_string())?)?),
            Long("timeout") => {
                timeout = Some(seconds(&text(p.value().map_err(|e| e.to_string())?)?)?)
            }
            Value(v) if file.is_none() => file = Some(PathBuf::from(v)),
            _ => return Err(arg.unexpected().to_string()),
        }
    }
    let file = file.ok_or("usage: keelson apply-config FILE [--dry-run]")?;
    // Bounded and non-blocking, so a FIFO or `/dev/zero` named by mistake neither hangs nor
    // fills memory here. The bound is above the node's own request limit on purpose: a file
    // that is merely too large is sent, and the node's answer says why it is refused.
    let config = base::bounded::read_text(&file, CONFIG_FILE_LIMIT)
        .map_err(|e| format!("{}: {e}", file.display()))?;
    let mode = apply_mode(mode.as_deref(), timeout)?;
    let request = ApplyConfigurationRequest {
        data: config.into_bytes(),
        mode: mode.0 as i32,
        dry_run: dry,
        try_mode_timeout: mode.1,
    };
    each(&common, |target, out| {
        let mut c = Channel::connect(target, false).map_err(rpc_err)?;
        let reply: ApplyConfigurationResponse = if allow_partial {
            let req = keelson::ApplyConfigurationRequest {
                request: Some(request.clone()),
                allow_partial: true,
            };
            c.unary(keelson::path::APPLY_CONFIGURATION, &req)
        } else {
            c.unary(&machine::path("ApplyConfiguration"), &request)
        }
        .map_err(|e| format!("{}: {e}", file.display()))?;
        out.write_all(apply_report(&reply).as_bytes()).map_err(|e| e.to_string())
    })
}

/// `--mode` and `--timeout` as Talos's apply mode and try timeout. No mode: `auto`.
fn apply_mode(
    mode: Option<&str>,
    timeout: Option<u64>,
) -> Result<(ApplyMode, Option<talos_api::google::Duration>), String> {
    let mode = match mode.unwrap_or("auto") {
        "auto" => ApplyMode::Auto,
        "no-reboot" => ApplyMode::NoReboot,
        "reboot" => ApplyMode::Reboot,
        "staged" => ApplyMode::Staged,
        "try" => ApplyMode::Try,
        other => {
            return Err(format!(
                "unknown mode {:?} (auto, no-reboot, reboot, staged, try)",
                output::escape_cell(other)
            ))
        }
    };
    let timeout = match (mode, timeout) {
        (_, Some(0)) => return Err("--timeout: at least 1 s".into()),
        (ApplyMode::Try, Some(t)) => Some(talos_api::google::Duration {
            seconds: i64::try_from(t).map_err(|_| "--timeout: too long")?,
            nanos: 0,
        }),
        _ => None,
    };
    Ok((mode, timeout))
}

/// What the node says about an apply: its warnings (a dropped entry as `dropped:`), then the
/// node's account of it (the changes, what the mode did), every line escaped.
fn apply_report(reply: &ApplyConfigurationResponse) -> String {
    let mut text = String::new();
    for m in &reply.messages {
        for w in &m.warnings {
            let line = match w.strip_prefix("dropped: ") {
                Some(d) => format!("dropped: {}", output::escape_cell(d)),
                None => format!("warning: {}", output::escape_cell(w)),
            };
            text.push_str(&line);
            text.push('\n');
        }
        for l in m.mode_details.lines() {
            text.push_str(&output::escape_cell(l));
            text.push('\n');
        }
    }
    text
}

/// `90`, `90s`, `2m`, `1h` (Talos's `--timeout 1m`) as seconds.
fn seconds(s: &str) -> Result<u64, String> {
    let (n, unit) = match s.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let n: u64 = n.parse().map_err(|_| format!("--timeout {s:?}: a number of s, m or h"))?;
    let mul = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => return Err(format!("--timeout {s:?}: a number of s, m or h")),
    };
    n.checked_mul(mul).ok_or_else(|| format!("--timeout {s:?}: too long"))
}

/// `keelson config confirm [NODE OPTIONS]`: keep the config on trial.
pub fn confirm_main(raw: Vec<OsString>) -> ExitCode {
    finish("config confirm", confirm(raw))
}

fn confirm(raw: Vec<OsString>) -> Result<(), String> {
    let common = node_options(raw)?;
    each(&common, |target, out| {
        let mut c = Channel::connect(target, false).map_err(rpc_err)?;
        let reply: keelson::ConfirmConfigurationResponse =
            c.unary(keelson::path::CONFIRM_CONFIGURATION, &Empty {}).map_err(rpc_err)?;
        for m in &reply.messages {
            let kept = output::escape_cell(&m.kept);
            writeln!(out, "the config on trial is kept ({kept})").map_err(|e| e.to_string())?;
        }
        Ok(())
    })
}

/// `keelson explain TYPE ID [--namespace NS] [--socket PATH]`: where each field came from.
pub fn explain_main(raw: Vec<OsString>) -> ExitCode {
    finish("explain", explain(raw))
}

fn explain(raw: Vec<OsString>) -> Result<(), String> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_args(raw);
    let (mut common, mut ns) = (Common::default(), None);
    let mut positional = Vec::new();
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        if let Some(opt) = connect::option(&arg) {
            common.set(opt, &mut p)?;
            continue;
        }
        match arg {
            Long("namespace") => ns = Some(text(p.value().map_err(|e| e.to_string())?)?),
            Value(v) => positional.push(text(v)?),
            _ => return Err(arg.unexpected().to_string()),
        }
    }
    let [kind, id] = positional.as_slice() else {
        return Err("usage: keelson explain TYPE ID".into());
    };
    let kind = aliases::resolve(kind).map_err(|e| e.to_string())?;
    let namespace = ns.unwrap_or_else(|| aliases::default_namespace(kind).to_string());
    each(&common, |target, out| {
        let mut c = Channel::connect(target, false).map_err(rpc_err)?;
        let q = Query { kind, namespace: &namespace };
        let r = resources::get(&mut c, q, id).map_err(rpc_err)?;
        explain_report(&resources::to_remote(&r, q, "").resource, kind, id, out)
    })
}

fn explain_report(
    r: &Value,
    kind: crate::resource::Kind,
    id: &str,
    out: &mut dyn Write,
) -> Result<(), String> {
    let mut text = format!("{} {} (version {})\n", kind.short_name(), id, r["metadata"]["version"]);
    match r["provenance"].as_object() {
        Some(p) if !p.is_empty() => {
            for (field, sources) in p {
                let from: Vec<&str> = sources
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(serde_json::Value::as_str)
                    .collect();
                // `*` stands for the whole spec: one input set every field.
                let what = if field == "*" {
                    "every field".to_owned()
                } else {
                    let value = r["spec"].get(field).map(|v| v.to_string()).unwrap_or_default();
                    format!("{field} = {value}")
                };
                text.push_str(&format!("  {what}\n      from {}\n", from.join(", ")));
            }
        }
        _ => text.push_str(&format!(
            "  no provenance: only merged specs record one; this resource is owned by {}\n",
            r["metadata"]["owner"]
        )),
    }
    out.write_all(text.as_bytes()).map_err(|e| e.to_string())
}

/// `keelson machine-status [--socket PATH]`: keelson's status document as JSON
/// (`keelson.v1.NodeService/MachineStatus`).
pub fn status_main(raw: Vec<OsString>) -> ExitCode {
    finish("machine-status", status(raw))
}

fn status(raw: Vec<OsString>) -> Result<(), String> {
    let mut p = lexopt::Parser::from_args(raw);
    let mut common = Common::default();
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        match connect::option(&arg) {
            Some(opt) => common.set(opt, &mut p)?,
            None => return Err(arg.unexpected().to_string()),
        }
    }
    each(&common, |target, out| {
        let mut c = Channel::connect(target, false).map_err(rpc_err)?;
        let reply: keelson::MachineStatusResponse =
            c.unary(keelson::path::MACHINE_STATUS, &Empty {}).map_err(rpc_err)?;
        for m in &reply.messages {
            let v: Value = serde_json::from_str(&m.status_json)
                .map_err(|e| format!("bad answer: status_json: {e}"))?;
            let text = serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?;
            writeln!(out, "{text}").map_err(|e| e.to_string())?;
        }
        Ok(())
    })
}

/// `keelson version [--client] [NODE OPTIONS]`: the client's version, and each node's
/// (gRPC `Version`).
pub fn version_main(raw: Vec<OsString>) -> ExitCode {
    finish("version", version(raw))
}

fn version(raw: Vec<OsString>) -> Result<(), String> {
    let mut p = lexopt::Parser::from_args(raw);
    let mut common = Common::default();
    let mut client_only = false;
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        if let Some(opt) = connect::option(&arg) {
            common.set(opt, &mut p)?;
            continue;
        }
        match arg {
            lexopt::Arg::Long("client") => client_only = true,
            _ => return Err(arg.unexpected().to_string()),
        }
    }
    print!("Client:\n{}", machine::client_version());
    if client_only {
        return Ok(());
    }
    each(&common, |target, out| {
        // Only a node in maintenance mode answers a client without a certificate.
        grpc(target, false, out, |c, out| {
            machine::version(c, &target.name(), target.is_insecure(), out)
        })
    })
}

/// Connect to `target` and make `f`'s calls.
fn grpc(
    target: &Target,
    streaming: bool,
    out: &mut dyn Write,
    f: impl FnOnce(&mut Channel, &mut dyn Write) -> Result<(), RpcError>,
) -> Result<(), String> {
    Channel::connect(target, streaming).and_then(|mut c| f(&mut c, out)).map_err(rpc_err)
}

/// Parse only the node options (for verbs without options of their own).
fn node_options(raw: Vec<OsString>) -> Result<Common, String> {
    let mut p = lexopt::Parser::from_args(raw);
    let mut common = Common::default();
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        match connect::option(&arg) {
            Some(opt) => common.set(opt, &mut p)?,
            None => return Err(arg.unexpected().to_string()),
        }
    }
    Ok(common)
}

/// `keelson disks [NODE OPTIONS]`: block devices, from the node's sysfs (gRPC
/// `storage.StorageService/Disks`, talosctl's columns).
pub fn disks_main(raw: Vec<OsString>) -> ExitCode {
    finish("disks", disks(raw))
}

fn disks(raw: Vec<OsString>) -> Result<(), String> {
    let common = node_options(raw)?;
    each(&common, |target, out| grpc(target, false, out, machine::disks))
}

/// `keelson dmesg [-f] [NODE OPTIONS]`: the node's kernel ring buffer (gRPC `Dmesg`).
pub fn dmesg_main(raw: Vec<OsString>) -> ExitCode {
    finish("dmesg", dmesg(raw))
}

/// `dmesg`'s arguments: node options and follow.
fn dmesg_args(raw: Vec<OsString>) -> Result<(Common, bool), String> {
    let mut p = lexopt::Parser::from_args(raw);
    let (mut common, mut follow) = (Common::default(), false);
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        if let Some(opt) = connect::option(&arg) {
            common.set(opt, &mut p)?;
            continue;
        }
        match arg {
            lexopt::Arg::Short('f') | lexopt::Arg::Long("follow") => follow = true,
            _ => return Err(arg.unexpected().to_string()),
        }
    }
    Ok((common, follow))
}

fn dmesg(raw: Vec<OsString>) -> Result<(), String> {
    let (common, follow) = dmesg_args(raw)?;
    let run = |target: &Target, out: &mut dyn Write| {
        grpc(target, follow, out, |c, out| machine::dmesg(c, follow, out))
    };
    if follow {
        let targets = common.targets()?;
        let [target] = targets.as_slice() else {
            return Err("-f follows one node".into());
        };
        return run(target, &mut std::io::stdout().lock());
    }
    each(&common, run)
}

/// `keelson reboot|shutdown [NODE OPTIONS]`: stop the node's services, then reboot or power
/// off (`keelson run` stops instead). gRPC `Reboot` and `Shutdown`; `--mode staged` is
/// keelson's own: `keelson.v1.NodeService/StagedReboot`.
pub fn power_main(op: &'static str, raw: Vec<OsString>) -> ExitCode {
    finish(op, power(op, raw))
}

/// `reboot`'s and `shutdown`'s arguments: node options and the reboot mode.
fn power_args(op: &str, raw: Vec<OsString>) -> Result<(Common, Option<String>), String> {
    let mut p = lexopt::Parser::from_args(raw);
    let mut common = Common::default();
    let mut mode: Option<String> = None;
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        if let Some(opt) = connect::option(&arg) {
            common.set(opt, &mut p)?;
            continue;
        }
        match arg {
            lexopt::Arg::Long("mode") | lexopt::Arg::Short('m') if op == "reboot" => {
                let m = p
                    .value()
                    .map_err(|e| e.to_string())?
                    .into_string()
                    .map_err(|_| "--mode: not UTF-8")?;
                if !["default", "powercycle", "staged"].contains(&m.as_str()) {
                    return Err(format!("--mode {m:?}: default, powercycle or staged"));
                }
                mode = Some(m);
            }
            other => return Err(other.unexpected().to_string()),
        }
    }
    Ok((common, mode))
}

fn power(op: &'static str, raw: Vec<OsString>) -> Result<(), String> {
    let (common, mode) = power_args(op, raw)?;
    each(&common, |target, out| {
        grpc(target, false, out, |c, out| {
            if mode.as_deref() == Some("staged") {
                let _: RebootResponse = c.unary(keelson::path::STAGED_REBOOT, &Empty {})?;
            } else {
                machine::power(c, op, i32::from(mode.as_deref() == Some("powercycle")))?;
            }
            writeln!(out, "{op}: accepted; the node stops its services")
                .map_err(|e| RpcError::Handler(e.to_string()))
        })
    })
}

/// `keelson service [ID [start|stop|restart|status]] [NODE OPTIONS]` (also `services`): the
/// node's services as talosctl lists them, one service's events, or an action on one (gRPC
/// only: `ServiceList`, `ServiceStart`, `ServiceStop`, `ServiceRestart`).
pub fn service_main(raw: Vec<OsString>) -> ExitCode {
    finish("service", service(raw))
}

/// `service`'s arguments: node options, the service (none: all) and the action.
fn service_args(raw: Vec<OsString>) -> Result<(Common, Option<String>, String), String> {
    let (common, positional) = connect::options_and_words(raw)?;
    let (id, action) = match positional.as_slice() {
        [] => (None, "status"),
        [id] => (Some(id.clone()), "status"),
        [id, action] => (Some(id.clone()), action.as_str()),
        _ => return Err("usage: keelson service [ID [start|stop|restart|status]]".into()),
    };
    if !["start", "stop", "restart", "status"].contains(&action) {
        return Err(format!(
            "unknown service action {:?} (start, stop, restart, status)",
            output::escape_cell(action)
        ));
    }
    Ok((common, id, action.to_owned()))
}

fn service(raw: Vec<OsString>) -> Result<(), String> {
    let (common, id, action) = service_args(raw)?;
    let action = action.as_str();
    let targets = common.targets()?;
    let now = std::time::SystemTime::now();
    let mut failed = 0;
    let mut answers = Vec::new();
    let mut text = String::new();
    let mut rows = vec![vec!["NODE".to_owned(), "RESPONSE".to_owned()]];
    for t in &targets {
        let r = Channel::connect(t, false).and_then(|mut c| match (&id, action) {
            (None, _) => {
                answers.push((t.name(), machine::service_list(&mut c)?));
                Ok(())
            }
            (Some(id), "status") => {
                let list = machine::service_list(&mut c)?;
                let found =
                    list.messages.iter().flat_map(|m| m.services.iter()).find(|s| s.id == *id);
                match found {
                    Some(s) => {
                        text.push_str(&machine::service_text(&t.name(), s, now));
                        Ok(())
                    }
                    None => Err(RpcError::Handler(format!(
                        "service {:?} is not registered",
                        output::escape_cell(id)
                    ))),
                }
            }
            (Some(id), action) => {
                rows.push(vec![t.name(), machine::service_action(&mut c, action, id)?]);
                Ok(())
            }
        });
        if let Err(e) = r {
            eprintln!("{}: {e}", t.name());
            failed += 1;
        }
    }
    let out = &mut std::io::stdout().lock();
    match (&id, action) {
        (None, _) => out.write_all(machine::services_table(&answers, now).as_bytes()),
        (Some(_), "status") => out.write_all(text.as_bytes()),
        _ => out.write_all(output::align(&rows).as_bytes()),
    }
    .map_err(|e| e.to_string())?;
    match failed {
        0 => Ok(()),
        n => Err(format!("{n} of {} nodes failed", targets.len())),
    }
}

/// `events`'s arguments: node options and the history asked for (talosctl's `--tail N`
/// (-1: all kept), `--duration 10m`, `--since ID`, `--actor-id ID`).
fn events_args(raw: Vec<OsString>) -> Result<(Common, EventsRequest), String> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_args(raw);
    let (mut common, mut req) = (Common::default(), EventsRequest::default());
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        if let Some(opt) = connect::option(&arg) {
            common.set(opt, &mut p)?;
            continue;
        }
        match arg {
            Long("tail") => {
                let v = text(p.value().map_err(|e| e.to_string())?)?;
                req.tail_events =
                    v.parse().map_err(|_| format!("--tail {v:?}: a number of events"))?;
            }
            Long("duration") => {
                let secs = seconds(&text(p.value().map_err(|e| e.to_string())?)?)
                    .map_err(|e| e.replace("--timeout", "--duration"))?;
                req.tail_seconds =
                    i32::try_from(secs).map_err(|_| "--duration: too long".to_owned())?;
            }
            Long("since") => req.tail_id = text(p.value().map_err(|e| e.to_string())?)?,
            Long("actor-id") => req.with_actor_id = text(p.value().map_err(|e| e.to_string())?)?,
            _ => return Err(arg.unexpected().to_string()),
        }
    }
    Ok((common, req))
}

/// `keelson events [--tail N] [--duration D] [--since ID] [--actor-id ID] [NODE OPTIONS]`:
/// the node's runtime events as they come (gRPC `Events`), talosctl's columns.
pub fn events_main(raw: Vec<OsString>) -> ExitCode {
    finish("events", events(raw))
}

fn events(raw: Vec<OsString>) -> Result<(), String> {
    let (common, req) = events_args(raw)?;
    let targets = common.targets()?;
    let [target] = targets.as_slice() else {
        return Err("events follows one node".into());
    };
    let mut c = Channel::connect(target, true).map_err(|e| e.to_string())?;
    machine::events(&mut c, &target.name(), &req, &mut std::io::stdout().lock())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<OsString> {
        a.iter().map(OsString::from).collect()
    }

    #[test]
    fn logs_flags_as_talosctl_s() {
        let (_, follow, tail, service) = logs_args(args(&[])).unwrap();
        assert_eq!((follow, tail, service.as_str()), (false, -1, "machined"));
        let (_, follow, tail, service) =
            logs_args(args(&["kubelet", "-f", "--tail", "20", "--socket", "/s"])).unwrap();
        assert_eq!((follow, tail, service.as_str()), (true, 20, "kubelet"));
        assert!(logs_args(args(&["--tail", "many"])).unwrap_err().contains("--tail"));
        assert!(logs_args(args(&["a", "b"])).is_err());
    }

    #[test]
    fn events_flags_as_talosctl_s() {
        let (_, req) = events_args(args(&[])).unwrap();
        assert_eq!(req, EventsRequest::default());
        let (_, req) = events_args(args(&[
            "--tail",
            "-1",
            "--duration",
            "10m",
            "--since",
            "c1",
            "--actor-id",
            "a",
        ]))
        .unwrap();
        assert_eq!((req.tail_events, req.tail_seconds), (-1, 600));
        assert_eq!((req.tail_id.as_str(), req.with_actor_id.as_str()), ("c1", "a"));
        assert!(events_args(args(&["--duration", "soon"])).unwrap_err().contains("--duration"));
        assert!(events_args(args(&["--tail", "x"])).is_err());
    }

    #[test]
    fn dmesg_follows_with_f() {
        assert!(!dmesg_args(args(&[])).unwrap().1);
        assert!(dmesg_args(args(&["-f"])).unwrap().1);
        assert!(dmesg_args(args(&["--follow", "-n", "10.0.0.2"])).unwrap().1);
        assert!(dmesg_args(args(&["extra"])).is_err());
    }

    #[test]
    fn apply_modes_are_talos_s() {
        assert_eq!(apply_mode(None, None), Ok((ApplyMode::Auto, None)));
        assert_eq!(apply_mode(Some("no-reboot"), None), Ok((ApplyMode::NoReboot, None)));
        assert_eq!(apply_mode(Some("staged"), Some(5)), Ok((ApplyMode::Staged, None)));
        let t = talos_api::google::Duration { seconds: 90, nanos: 0 };
        assert_eq!(apply_mode(Some("try"), Some(90)), Ok((ApplyMode::Try, Some(t))));
        assert_eq!(apply_mode(Some("try"), None), Ok((ApplyMode::Try, None)), "the node's default");
        assert!(apply_mode(Some("try"), Some(0)).is_err());
        let e = apply_mode(Some("later\u{1b}"), None).err().unwrap_or_default();
        assert!(e.contains("unknown mode") && !e.contains('\u{1b}'), "{e}");
    }

    #[test]
    fn the_node_s_account_of_an_apply_prints_as_it_came_escaped() {
        let reply = ApplyConfigurationResponse {
            messages: vec![talos_api::machine::ApplyConfiguration {
                metadata: None,
                warnings: vec!["w1".into(), "dropped: mtu (line 6)".into()],
                mode: ApplyMode::NoReboot as i32,
                mode_details: "Applied\n+ added AddressSpec eth0/10.0.0.5/24\nkept: /x\u{1b}\n"
                    .into(),
            }],
        };
        assert_eq!(
            apply_report(&reply),
            "warning: w1\ndropped: mtu (line 6)\nApplied\n+ added AddressSpec eth0/10.0.0.5/24\nkept: /x\\u{1b}\n"
        );
    }

    #[test]
    fn reboot_modes() {
        assert_eq!(power_args("reboot", args(&[])).unwrap().1, None);
        for m in ["default", "powercycle", "staged"] {
            assert_eq!(power_args("reboot", args(&["--mode", m])).unwrap().1.as_deref(), Some(m));
        }
        assert!(power_args("reboot", args(&["--mode", "soon"]))
            .unwrap_err()
            .contains("powercycle"));
        // Shutdown has no modes.
        assert!(power_args("shutdown", args(&["--mode", "default"])).is_err());
    }

    #[test]
    fn service_arguments() {
        let (_, id, action) = service_args(args(&[])).unwrap();
        assert_eq!((id, action.as_str()), (None, "status"));
        let (_, id, action) = service_args(args(&["kubelet"])).unwrap();
        assert_eq!((id.as_deref(), action.as_str()), (Some("kubelet"), "status"));
        let (_, id, action) = service_args(args(&["kubelet", "restart", "-n", "n1"])).unwrap();
        assert_eq!((id.as_deref(), action.as_str()), (Some("kubelet"), "restart"));
        let e = service_args(args(&["kubelet", "explode\x1b"])).unwrap_err();
        assert!(e.contains("unknown service action") && !e.contains('\x1b'), "{e}");
        assert!(service_args(args(&["a", "b", "c"])).unwrap_err().starts_with("usage"));
    }
}
