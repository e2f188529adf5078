// SPDX-License-Identifier: Apache-2.0
//! The client commands: `get`, `logs`, `apply-config`, `explain`, `machine-status`,
//! `version`. Each connects to the node (the local socket, or TLS: [`crate::connect`]), sends
//! one request line and prints the answer; with several nodes, each node's output lines are
//! prefixed with its name.

use std::ffi::OsString;
use std::io::{BufReader, ErrorKind, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use serde_json::{json, Value};

use crate::aliases;
use crate::connect::{self, Common, Stream, Target};
use crate::machine;
use crate::output::{self, Format, Remote};
use crate::rpc::{Channel, RpcError};
use talos_api::machine::EventsRequest;

/// How long a one-shot request may take.
const TIMEOUT: Duration = Duration::from_secs(30);
/// The largest config file `apply-config` reads: past the node's request limit, so the node
/// can say itself that a file is too large, yet bounded.
const CONFIG_FILE_LIMIT: u64 = 64 << 20;
/// Longest answer line read. A `list` of 10,000 routes is about 6 MiB; a peer sending more
/// than this without a newline is not a keelson node, or a broken one.
pub const MAX_ANSWER: usize = 64 << 20;

/// A request as its line. A big one (`apply-config`) is serialized before connecting: the
/// node closes a connection that stays silent too long.
fn line(req: &Value) -> String {
    let mut line = req.to_string();
    line.push('\n');
    line
}

const CLOSED: &str = "the node closed the connection";

/// A connection to the API.
struct Client {
    reader: BufReader<Box<dyn Stream>>,
}

impl Client {
    fn connect(target: &Target, streaming: bool) -> Result<Self, String> {
        let s = connect::open(target, (!streaming).then_some(TIMEOUT), TIMEOUT)?;
        Ok(Self { reader: BufReader::new(s) })
    }

    fn send(&mut self, req: &Value) -> Result<(), String> {
        self.send_line(&line(req))
    }

    /// Send a request serialized by [`line`].
    fn send_line(&mut self, line: &str) -> Result<(), String> {
        let w = self.reader.get_mut();
        match w.write_all(line.as_bytes()).and_then(|()| w.flush()) {
            Ok(()) => Ok(()),
            // The node stopped reading and closed (a request over its limit, say): its answer
            // says why, and is worth more than "broken pipe".
            Err(e) if matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset) => {
                match self.recv() {
                    Err(answer) if answer != CLOSED => Err(answer),
                    _ => Err(format!("send: {e}")),
                }
            }
            Err(e) => Err(format!("send: {e}")),
        }
    }

    /// The next response line; an `ok: false` one becomes its error.
    fn recv(&mut self) -> Result<Value, String> {
        let mut line = Vec::new();
        let n =
            base::bounded::read_line(&mut self.reader, &mut line, MAX_ANSWER).map_err(
                |e| match e {
                    base::bounded::ReadError::LineTooLong { limit } => format!(
                        "answer line longer than {limit} bytes: not a keelson API or a broken node"
                    ),
                    // TLS 1.3 says no to a client certificate after the client's handshake is
                    // done: the refusal arrives as an alert on the first read.
                    e if e.to_string().contains("alert") => format!(
                        "the node refused this client at the TLS handshake ({e}): a client certificate from the node's CA is needed (--keelsonconfig), --insecure only reaches a node in maintenance mode"
                    ),
                    e => format!("receive: {e}"),
                },
            )?;
        if n == 0 {
            return Err(CLOSED.into());
        }
        let v: Value = serde_json::from_slice(&line).map_err(|e| format!("bad response: {e}"))?;
        if v["ok"] != json!(true) {
            return Err(v["error"].as_str().unwrap_or("request failed").to_owned());
        }
        Ok(v)
    }
}

fn text(v: OsString) -> Result<String, String> {
    v.into_string().map_err(|v| format!("not UTF-8: {v:?}"))
}

fn finish(cmd: &str, r: Result<(), String>) -> ExitCode {
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
fn each(
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

fn remote(v: &Value) -> Remote {
    Remote {
        node: v["node"].as_str().unwrap_or_default().to_owned(),
        resource: v["resource"].clone(),
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
        let mut c = Client::connect(target, false)?;
        get_one(&mut c, kind, &namespace, id.as_deref(), format, out)
    })
}

fn watch_one(
    target: &Target,
    kind: crate::resource::Kind,
    namespace: &str,
    id: Option<String>,
    format: Format,
) -> Result<(), String> {
    let mut c = Client::connect(target, true)?;
    let out = &mut std::io::stdout().lock();
    {
        c.send(
            &json!({"op": "watch", "type": kind.short_name(), "namespace": namespace, "id": id}),
        )?;
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
        loop {
            let v = c.recv()?;
            let event = v["event"].as_str().unwrap_or_default();
            if event == "bootstrapped" {
                continue;
            }
            let r = remote(&v);
            let text = match format {
                Format::Json => format!("{v}\n"),
                Format::Yaml => format!(
                    "event: {event}\n{}---\n",
                    output::remote_yaml(&r).map_err(|e| e.to_string())?
                ),
                Format::Table => {
                    let mark = match event {
                        "created" => "+",
                        "destroyed" => "-",
                        _ => "*",
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
            out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(|e| e.to_string())?;
        }
    }
}

fn get_one(
    c: &mut Client,
    kind: crate::resource::Kind,
    namespace: &str,
    id: Option<&str>,
    format: Format,
    mut out: &mut dyn Write,
) -> Result<(), String> {
    let items = match &id {
        Some(id) => {
            c.send(
                &json!({"op": "get", "type": kind.short_name(), "namespace": namespace, "id": id}),
            )?;
            vec![remote(&c.recv()?)]
        }
        None => {
            c.send(&json!({"op": "list", "type": kind.short_name(), "namespace": namespace}))?;
            let v = c.recv()?;
            let node = v["node"].clone();
            v["resources"]
                .as_array()
                .map(|a| a.iter().map(|r| remote(&json!({"node": node, "resource": r}))).collect())
                .unwrap_or_default()
        }
    };
    output::render_remote(&mut out, &items, format).map_err(|e| e.to_string())
}

/// `keelson logs [SERVICE] [-f] [--tail N] [NODE OPTIONS]`: a service's log; machined's
/// (the default) is the node's own log ring. gRPC `Logs`; JSON lines for a node without it
/// (machined's only).
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
        grpc_first(
            target,
            follow,
            out,
            |c, out| machine::logs(c, &service, follow, tail, out),
            |out| {
                if service != "machined" {
                    return Err(format!(
                        "this node has no gRPC Logs: only machined's log is served (not {:?})",
                        output::escape_cell(&service)
                    ));
                }
                logs_one(target, follow, out)
            },
        )
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

fn logs_one(target: &Target, follow: bool, out: &mut dyn Write) -> Result<(), String> {
    let mut c = Client::connect(target, follow)?;
    c.send(&json!({"op": "logs", "follow": follow}))?;
    loop {
        let v = c.recv()?;
        for l in v["lines"].as_array().into_iter().flatten() {
            // The node's log carries text from the network (DHCP options, peer names).
            writeln!(out, "{}", output::escape_cell(l.as_str().unwrap_or_default()))
                .map_err(|e| e.to_string())?;
        }
        out.flush().map_err(|e| e.to_string())?;
        if !follow {
            return Ok(());
        }
    }
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
    let request = line(&json!({
        "op": "apply-config", "config": config, "dryRun": dry, "mode": mode, "timeoutSeconds": timeout,
        "allowPartial": allow_partial,
    }));
    drop(config);
    each(&common, |target, out| {
        let mut c = Client::connect(target, false)?;
        c.send_line(&request)?;
        let v = c.recv().map_err(|e| format!("{}: {e}", file.display()))?;
        apply_report(&v, dry, out)
    })
}

fn apply_report(v: &Value, dry: bool, out: &mut dyn Write) -> Result<(), String> {
    let mut text = String::new();
    for w in v["warnings"].as_array().into_iter().flatten() {
        text.push_str(&format!("warning: {}\n", w.as_str().unwrap_or_default()));
    }
    for d in v["dropped"].as_array().into_iter().flatten() {
        text.push_str(&format!("dropped: {}\n", d.as_str().unwrap_or_default()));
    }
    let changes = v["changes"].as_array().cloned().unwrap_or_default();
    for ch in &changes {
        let action = ch["action"].as_str().unwrap_or_default();
        let mark = match action {
            "added" => "+",
            "removed" => "-",
            _ => "~",
        };
        text.push_str(&format!(
            "{mark} {action} {} {}\n",
            ch["type"].as_str().unwrap_or_default(),
            ch["id"].as_str().unwrap_or_default()
        ));
        for f in ch["fields"].as_array().into_iter().flatten() {
            text.push_str(&format!(
                "    {}: {} -> {}\n",
                f["field"].as_str().unwrap_or_default(),
                f["before"],
                f["after"]
            ));
        }
    }
    let staged = v["staged"].as_str();
    text.push_str(&match (changes.is_empty(), dry) {
        (true, _) => "no changes to network resources\n".to_owned(),
        (false, false) if staged.is_some() => {
            format!("{} resource(s) will change at the next start (staged)\n", changes.len())
        }
        (false, true) => {
            format!("{} resource(s) would change (dry run: nothing applied)\n", changes.len())
        }
        (false, false) => format!("{} resource(s) changing: applied\n", changes.len()),
    });
    if let Some(t) = v["trialSeconds"].as_u64() {
        text.push_str(&format!(
            "on trial for {t} s: `keelson config confirm` keeps it, otherwise the node rolls back\n"
        ));
    }
    if let Some(path) = staged {
        text.push_str(&format!(
            "staged: {} (the next start boots into it)\n",
            output::escape_cell(path)
        ));
    }
    if let Some(kept) = v["kept"].as_str() {
        text.push_str(&format!("kept: {}\n", output::escape_cell(kept)));
    }
    if v["reboot"] == json!(true) {
        text.push_str("the node reboots now\n");
    }
    out.write_all(text.as_bytes()).map_err(|e| e.to_string())
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
        let mut c = Client::connect(target, false)?;
        c.send(&json!({"op": "confirm-config"}))?;
        let v = c.recv()?;
        let kept = output::escape_cell(v["kept"].as_str().unwrap_or_default());
        writeln!(out, "the config on trial is kept ({kept})").map_err(|e| e.to_string())
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
        let mut c = Client::connect(target, false)?;
        c.send(&json!({"op": "get", "type": kind.short_name(), "namespace": namespace, "id": id}))?;
        explain_report(&c.recv()?, kind, id, out)
    })
}

fn explain_report(
    v: &Value,
    kind: crate::resource::Kind,
    id: &str,
    out: &mut dyn Write,
) -> Result<(), String> {
    let r = &v["resource"];
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

/// `keelson machine-status [--socket PATH]`: the raw status as JSON.
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
        let mut c = Client::connect(target, false)?;
        c.send(&json!({"op": "machine-status"}))?;
        let v = c.recv()?;
        let text = serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?;
        writeln!(out, "{text}").map_err(|e| e.to_string())
    })
}

/// `keelson version [--client] [NODE OPTIONS]`: the client's version, and each node's
/// (gRPC `Version`; a node without it answers over JSON lines).
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
        grpc_first(
            target,
            false,
            out,
            // Only a node in maintenance mode answers a client without a certificate.
            |c, out| machine::version(c, &target.name(), target.is_insecure(), out),
            |out| {
                let mut c = Client::connect(target, false)?;
                c.send(&json!({"op": "version"}))?;
                let v = c.recv()?;
                let mode = if v["maintenance"] == json!(true) { " (maintenance mode)" } else { "" };
                writeln!(
                    out,
                    "Server:\n\tkeelson {}{mode}",
                    output::escape_cell(v["version"].as_str().unwrap_or_default())
                )
                .map_err(|e| e.to_string())
            },
        )
    })
}

/// Call over gRPC; when the node does not serve the call there (a node from before the gRPC
/// API, or a method it does not have yet), over JSON lines instead.
fn grpc_first(
    target: &Target,
    streaming: bool,
    out: &mut dyn Write,
    grpc: impl FnOnce(&mut Channel, &mut dyn Write) -> Result<(), RpcError>,
    json_lines: impl FnOnce(&mut dyn Write) -> Result<(), String>,
) -> Result<(), String> {
    match Channel::connect(target, streaming).and_then(|mut c| grpc(&mut c, out)) {
        Ok(()) => Ok(()),
        Err(e) if e.not_served() => {
            log::debug!("{}: {e}; over JSON lines", target.name());
            json_lines(out)
        }
        Err(e) => Err(e.to_string()),
    }
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
/// `storage.StorageService/Disks`, talosctl's columns; JSON lines for a node without it).
pub fn disks_main(raw: Vec<OsString>) -> ExitCode {
    finish("disks", disks(raw))
}

fn disks(raw: Vec<OsString>) -> Result<(), String> {
    let common = node_options(raw)?;
    each(&common, |target, out| {
        grpc_first(target, false, out, machine::disks, |out| disks_json_lines(target, out))
    })
}

fn disks_json_lines(target: &Target, out: &mut dyn Write) -> Result<(), String> {
    let mut c = Client::connect(target, false)?;
    c.send(&json!({"op": "disks"}))?;
    let v = c.recv()?;
    let cell = |d: &Value, k: &str| output::escape_cell(d[k].as_str().unwrap_or("-"));
    let mut rows =
        vec![["DEV", "MODEL", "SERIAL", "WWID", "SIZE", "ROTATIONAL", "TRANSPORT", "RO"]
            .map(String::from)
            .to_vec()];
    for d in v["disks"].as_array().into_iter().flatten() {
        rows.push(vec![
            format!("/dev/{}", cell(d, "name")),
            cell(d, "model"),
            cell(d, "serial"),
            cell(d, "wwid"),
            human_size(d["size"].as_u64().unwrap_or(0)),
            d["rotational"].as_bool().unwrap_or(false).to_string(),
            cell(d, "transport"),
            d["readOnly"].as_bool().unwrap_or(false).to_string(),
        ]);
    }
    out.write_all(output::align(&rows).as_bytes()).map_err(|e| e.to_string())
}

fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1000.0 && unit + 1 < UNITS.len() {
        v /= 1000.0;
        unit += 1;
    }
    let name = UNITS.get(unit).copied().unwrap_or("B");
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {name}")
    }
}

/// `keelson dmesg [-f] [NODE OPTIONS]`: the node's kernel ring buffer (gRPC `Dmesg`;
/// JSON lines, without `-f`, for a node without it).
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
        grpc_first(
            target,
            follow,
            out,
            |c, out| machine::dmesg(c, follow, out),
            |out| {
                if follow {
                    return Err("this node cannot follow its kernel log (no gRPC Dmesg)".into());
                }
                let mut c = Client::connect(target, false)?;
                c.send(&json!({"op": "dmesg"}))?;
                let v = c.recv()?;
                let mut text = String::new();
                for l in v["lines"].as_array().into_iter().flatten() {
                    text.push_str(&output::escape_cell(l.as_str().unwrap_or_default()));
                    text.push('\n');
                }
                out.write_all(text.as_bytes()).map_err(|e| e.to_string())
            },
        )
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
/// keelson's own and goes over JSON lines.
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
    let json_lines = |target: &Target, out: &mut dyn Write| -> Result<(), String> {
        if mode.as_deref() == Some("powercycle") {
            return Err("this node has no gRPC Reboot: --mode powercycle needs it".into());
        }
        let mut c = Client::connect(target, false)?;
        let mut request = json!({"op": op});
        if let Some(m) = &mode {
            request["mode"] = json!(m);
        }
        c.send(&request)?;
        c.recv()?;
        writeln!(out, "{op}: accepted; the node stops its services").map_err(|e| e.to_string())
    };
    each(&common, |target, out| {
        if mode.as_deref() == Some("staged") {
            return json_lines(target, out);
        }
        let grpc_mode = i32::from(mode.as_deref() == Some("powercycle"));
        grpc_first(
            target,
            false,
            out,
            |c, out| {
                machine::power(c, op, grpc_mode)?;
                writeln!(out, "{op}: accepted; the node stops its services")
                    .map_err(|e| RpcError::Handler(e.to_string()))
            },
            |out| json_lines(target, out),
        )
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
    let mut p = lexopt::Parser::from_args(raw);
    let mut common = Common::default();
    let mut positional = Vec::new();
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        if let Some(opt) = connect::option(&arg) {
            common.set(opt, &mut p)?;
            continue;
        }
        match arg {
            lexopt::Arg::Value(v) => positional.push(text(v)?),
            _ => return Err(arg.unexpected().to_string()),
        }
    }
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
