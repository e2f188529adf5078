// SPDX-License-Identifier: Apache-2.0
//! The client commands: `get`, `logs`, `apply-config`, `explain`, `machine-status`. Each
//! connects to the socket, sends one request line and prints the answer.

use std::ffi::OsString;
use std::io::{BufReader, ErrorKind, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use serde_json::{json, Value};

use super::aliases;
use crate::output::{self, Format, Remote};

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
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Client {
    fn connect(path: &PathBuf, streaming: bool) -> Result<Self, String> {
        let s = UnixStream::connect(path).map_err(|e| {
            format!(
                "cannot connect to the API socket {}: {e} (is the node running? --socket PATH)",
                path.display()
            )
        })?;
        if !streaming {
            s.set_read_timeout(Some(TIMEOUT)).map_err(|e| e.to_string())?;
        }
        s.set_write_timeout(Some(TIMEOUT)).map_err(|e| e.to_string())?;
        let writer = s.try_clone().map_err(|e| e.to_string())?;
        Ok(Self { reader: BufReader::new(s), writer })
    }

    fn send(&mut self, req: &Value) -> Result<(), String> {
        self.send_line(&line(req))
    }

    /// Send a request serialized by [`line`].
    fn send_line(&mut self, line: &str) -> Result<(), String> {
        match self.writer.write_all(line.as_bytes()) {
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
            net::bounded::read_line(&mut self.reader, &mut line, MAX_ANSWER).map_err(
                |e| match e {
                    net::bounded::ReadError::LineTooLong { limit } => format!(
                        "answer line longer than {limit} bytes: not a keelson API or a broken node"
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
    let (mut socket, mut ns, mut format, mut watch) =
        (PathBuf::from(super::DEFAULT_SOCKET), None, Format::Table, false);
    let mut positional = Vec::new();
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        match arg {
            Long("socket") => socket = p.value().map_err(|e| e.to_string())?.into(),
            Long("namespace") | Short('n') => {
                ns = Some(text(p.value().map_err(|e| e.to_string())?)?)
            }
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
    let mut c = Client::connect(&socket, watch)?;
    let out = &mut std::io::stdout().lock();
    if watch {
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
    output::render_remote(out, &items, format).map_err(|e| e.to_string())
}

/// `keelson logs [-f] [--socket PATH]`
pub fn logs_main(raw: Vec<OsString>) -> ExitCode {
    finish("logs", logs(raw))
}

fn logs(raw: Vec<OsString>) -> Result<(), String> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_args(raw);
    let (mut socket, mut follow) = (PathBuf::from(super::DEFAULT_SOCKET), false);
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        match arg {
            Long("socket") => socket = p.value().map_err(|e| e.to_string())?.into(),
            Short('f') | Long("follow") => follow = true,
            _ => return Err(arg.unexpected().to_string()),
        }
    }
    let mut c = Client::connect(&socket, follow)?;
    c.send(&json!({"op": "logs", "follow": follow}))?;
    let out = &mut std::io::stdout().lock();
    loop {
        let v = c.recv()?;
        for l in v["lines"].as_array().into_iter().flatten() {
            writeln!(out, "{}", l.as_str().unwrap_or_default()).map_err(|e| e.to_string())?;
        }
        out.flush().map_err(|e| e.to_string())?;
        if !follow {
            return Ok(());
        }
    }
}

/// `keelson apply-config FILE [--dry-run] [--socket PATH]`
pub fn apply_main(raw: Vec<OsString>) -> ExitCode {
    finish("apply-config", apply(raw))
}

fn apply(raw: Vec<OsString>) -> Result<(), String> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_args(raw);
    let (mut socket, mut dry, mut file) = (PathBuf::from(super::DEFAULT_SOCKET), false, None);
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        match arg {
            Long("socket") => socket = p.value().map_err(|e| e.to_string())?.into(),
            Long("dry-run") => dry = true,
            Value(v) if file.is_none() => file = Some(PathBuf::from(v)),
            _ => return Err(arg.unexpected().to_string()),
        }
    }
    let file = file.ok_or("usage: keelson apply-config FILE [--dry-run]")?;
    // Bounded and non-blocking, so a FIFO or `/dev/zero` named by mistake neither hangs nor
    // fills memory here. The bound is above the node's own request limit on purpose: a file
    // that is merely too large is sent, and the node's answer says why it is refused.
    let config = net::bounded::read_text(&file, CONFIG_FILE_LIMIT)
        .map_err(|e| format!("{}: {e}", file.display()))?;
    let request = line(&json!({"op": "apply-config", "config": config, "dryRun": dry}));
    drop(config);
    let mut c = Client::connect(&socket, false)?;
    c.send_line(&request)?;
    let v = c.recv().map_err(|e| format!("{}: {e}", file.display()))?;
    let out = &mut std::io::stdout().lock();
    let mut text = String::new();
    for w in v["warnings"].as_array().into_iter().flatten() {
        text.push_str(&format!("warning: {}\n", w.as_str().unwrap_or_default()));
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
    text.push_str(&match (changes.is_empty(), dry) {
        (true, _) => "no changes to network resources\n".to_owned(),
        (false, true) => {
            format!("{} resource(s) would change (dry run: nothing applied)\n", changes.len())
        }
        (false, false) => format!("{} resource(s) changing: applied\n", changes.len()),
    });
    out.write_all(text.as_bytes()).map_err(|e| e.to_string())
}

/// `keelson explain TYPE ID [--namespace NS] [--socket PATH]`: where each field came from.
pub fn explain_main(raw: Vec<OsString>) -> ExitCode {
    finish("explain", explain(raw))
}

fn explain(raw: Vec<OsString>) -> Result<(), String> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_args(raw);
    let (mut socket, mut ns) = (PathBuf::from(super::DEFAULT_SOCKET), None);
    let mut positional = Vec::new();
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        match arg {
            Long("socket") => socket = p.value().map_err(|e| e.to_string())?.into(),
            Long("namespace") | Short('n') => {
                ns = Some(text(p.value().map_err(|e| e.to_string())?)?)
            }
            Value(v) => positional.push(text(v)?),
            _ => return Err(arg.unexpected().to_string()),
        }
    }
    let [kind, id] = positional.as_slice() else {
        return Err("usage: keelson explain TYPE ID".into());
    };
    let kind = aliases::resolve(kind).map_err(|e| e.to_string())?;
    let namespace = ns.unwrap_or_else(|| aliases::default_namespace(kind).to_string());
    let mut c = Client::connect(&socket, false)?;
    c.send(&json!({"op": "get", "type": kind.short_name(), "namespace": namespace, "id": id}))?;
    let v = c.recv()?;
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
    std::io::stdout().lock().write_all(text.as_bytes()).map_err(|e| e.to_string())
}

/// `keelson machine-status [--socket PATH]`: the raw status as JSON.
pub fn status_main(raw: Vec<OsString>) -> ExitCode {
    finish("machine-status", status(raw))
}

fn status(raw: Vec<OsString>) -> Result<(), String> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_args(raw);
    let mut socket = PathBuf::from(super::DEFAULT_SOCKET);
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        match arg {
            Long("socket") => socket = p.value().map_err(|e| e.to_string())?.into(),
            _ => return Err(arg.unexpected().to_string()),
        }
    }
    let mut c = Client::connect(&socket, false)?;
    c.send(&json!({"op": "machine-status"}))?;
    let v = c.recv()?;
    let text = serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?;
    println!("{text}");
    Ok(())
}
