// SPDX-License-Identifier: Apache-2.0
//! `keelson plan`: run the config and merge controllers against declared links, with no
//! kernel, and print every resource of `network-config` and `network`. This is the user's
//! dry run: "what will my node do with this command line and config?"
//!
//! Exit code: 0 when everything parsed, 1 when an entry or the config was rejected (the rest
//! is still planned and printed, as the node would run it: docs/config.md), 2 for usage
//! errors.

use std::ffi::OsString;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use net::controllers::{self, CMDLINE_ID, MACHINE_CONFIG_ID};
use net::resource::nethelpers::{HardwareAddr, LinkType};
use net::resource::{LinkStatus, Namespace, Resource};
use runtime::Runtime;

use cli::output::{self, Format};

/// The owner of the inputs `plan` writes.
const SOURCE: &str = "plan";

/// Why `keelson plan` could not plan (each is printed after `keelson plan: `).
#[derive(Debug, thiserror::Error)]
enum PlanError {
    /// An option the parser refused.
    #[error(transparent)]
    Args(#[from] lexopt::Error),
    /// An argument that is not UTF-8.
    #[error("not UTF-8: {0:?}")]
    NotUtf8(OsString),
    /// `-o` names no format.
    #[error(transparent)]
    Format(#[from] output::UnknownFormat),
    /// A `--link` that does not parse.
    #[error("--link {spec:?}: {why}")]
    Link {
        /// The argument.
        spec: String,
        /// What is wrong with it.
        why: LinkError,
    },
    /// The config file could not be read.
    #[error("read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: net::bounded::ReadError,
    },
    /// A controller could not be registered.
    #[error(transparent)]
    Runtime(#[from] runtime::RuntimeError),
    /// An input could not be written.
    #[error(transparent)]
    Store(#[from] runtime::StoreError),
    /// The plan could not be printed.
    #[error(transparent)]
    Output(#[from] output::OutputError),
    /// Standard output could not be flushed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// What is wrong with a `--link` argument.
#[derive(Debug, thiserror::Error)]
enum LinkError {
    #[error("empty name")]
    EmptyName,
    #[error("name longer than 15 characters")]
    NameTooLong,
    #[error("expected key=value, got {0:?}")]
    NotKeyValue(String),
    #[error(transparent)]
    Mac(net::resource::nethelpers::ParseNameError),
    #[error("unknown kind {0:?}")]
    UnknownKind(String),
    #[error("unknown key {0:?} (want mac, kind or alias)")]
    UnknownKey(String),
}

#[derive(Debug)]
struct Args {
    cmdline: String,
    config: Option<String>,
    links: Vec<(String, LinkStatus)>,
    format: Format,
}

fn parse_args(raw: Vec<OsString>) -> Result<Args, PlanError> {
    use lexopt::prelude::*;
    let mut parser = lexopt::Parser::from_args(raw);
    let mut args =
        Args { cmdline: String::new(), config: None, links: Vec::new(), format: Format::Table };
    let text = |v: OsString| v.into_string().map_err(PlanError::NotUtf8);
    while let Some(arg) = parser.next()? {
        match arg {
            Long("cmdline") => args.cmdline = text(parser.value()?)?,
            Long("config") => args.config = Some(text(parser.value()?)?),
            Long("link") => {
                let spec = text(parser.value()?)?;
                let index = u32::try_from(args.links.len() + 2).unwrap_or(u32::MAX);
                let link = parse_link(&spec, index).map_err(|why| PlanError::Link { spec, why })?;
                args.links.push(link);
            }
            Short('o') | Long("output") => {
                args.format = text(parser.value()?)?.parse::<Format>()?
            }
            _ => return Err(arg.unexpected().into()),
        }
    }
    Ok(args)
}

/// `NAME[,mac=MAC][,kind=KIND][,alias=ALIAS]` → a link status as the kernel would report it.
/// `kind` is an rtnetlink kind (`bond`, `vlan`, `bridge`, `dummy`, `veth`, `wireguard`) or
/// `physical` (the default); physical links get a locally administered MAC if none is given.
fn parse_link(spec: &str, index: u32) -> Result<(String, LinkStatus), LinkError> {
    let mut parts = spec.split(',');
    let name = parts.next().filter(|n| !n.is_empty()).ok_or(LinkError::EmptyName)?;
    if name.len() > net::resource::MAX_LINK_NAME_LEN {
        return Err(LinkError::NameTooLong);
    }
    let idx = index.to_be_bytes();
    let mut status = LinkStatus {
        index,
        link_type: LinkType::ETHER,
        hardware_addr: HardwareAddr(vec![0x02, 0x00, idx[0], idx[1], idx[2], idx[3]]),
        mtu: 1500,
        operational_state: "up".into(),
        link_state: true,
        ..LinkStatus::default()
    };
    for part in parts {
        let (key, value) =
            part.split_once('=').ok_or_else(|| LinkError::NotKeyValue(part.to_owned()))?;
        match key {
            "mac" => status.hardware_addr = value.parse().map_err(LinkError::Mac)?,
            "alias" => status.alias = value.to_owned(),
            "kind" => match value {
                "physical" => status.kind.clear(),
                "wireguard" => {
                    status.kind = value.to_owned();
                    status.link_type = LinkType::NONE;
                }
                "bond" | "vlan" | "bridge" | "dummy" | "veth" | "vrf" => {
                    status.kind = value.to_owned()
                }
                _ => return Err(LinkError::UnknownKind(value.to_owned())),
            },
            _ => return Err(LinkError::UnknownKey(key.to_owned())),
        }
    }
    Ok((name.to_owned(), status))
}

fn loopback() -> LinkStatus {
    LinkStatus {
        index: 1,
        link_type: LinkType::LOOPBACK,
        hardware_addr: HardwareAddr(vec![0; 6]),
        mtu: 65536,
        operational_state: "unknown".into(),
        link_state: true,
        ..LinkStatus::default()
    }
}

pub fn main(raw: Vec<OsString>) -> ExitCode {
    let args = match parse_args(raw) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("keelson plan: {e}");
            return ExitCode::from(2);
        }
    };
    match plan(&args) {
        Ok(rejected) => ExitCode::from(u8::from(rejected)),
        Err(e) => {
            eprintln!("keelson plan: {e}");
            ExitCode::from(2)
        }
    }
}

/// Plan and print; returns whether any input was rejected.
fn plan(args: &Args) -> Result<bool, PlanError> {
    let mut rejected = false;
    let mut rt = Runtime::new();
    // Nobody watches a plan: keep no journal of its changes.
    rt.journal_only(Some(Vec::new()));
    for ctrl in controllers::config_and_merge() {
        rt.register(ctrl)?;
    }

    let parsed = net::cmdline::parse(&args.cmdline);
    for e in &parsed.errors {
        eprintln!("error: {e}");
        rejected = true;
    }
    for w in &parsed.warnings {
        eprintln!("warning: {w}");
    }
    rt.put_input(SOURCE, Namespace::Runtime, CMDLINE_ID, parsed)?;

    if let Some(path) = &args.config {
        let text = net::bounded::read_text(Path::new(path), net::bounded::CONFIG_LIMIT)
            .map_err(|source| PlanError::Read { path: path.clone(), source })?;
        // One rule with the node: an invalid entry is dropped and named, the rest planned.
        let report = net::config::check(&text);
        let shown = net::names::escape(path, 256);
        for w in &report.config.warnings {
            eprintln!("warning: {shown}: {w}");
        }
        for e in &report.errors {
            match report.kept {
                true => eprintln!("error: {shown}: {}", e.dropped_line()),
                false => eprintln!("error: {shown}: {e}; planning without it"),
            }
            rejected = true;
        }
        if report.kept {
            rt.put_input(SOURCE, Namespace::Config, MACHINE_CONFIG_ID, report.config)?;
        }
    }

    rt.put_input(SOURCE, Namespace::Network, "lo", loopback())?;
    for (name, status) in &args.links {
        rt.put_input(SOURCE, Namespace::Network, name, status.clone())?;
    }

    let now = Instant::now();
    while rt.has_work() {
        rt.run(now);
    }
    for c in rt.controllers() {
        if let Some(e) = c.last_error {
            eprintln!("error: {}: {e}", c.name);
            rejected = true;
        }
    }

    let shown: Vec<&Resource> = rt
        .store()
        .iter()
        .filter(|r| matches!(r.metadata.namespace, Namespace::NetworkConfig | Namespace::Network))
        .filter(|r| r.metadata.owner != SOURCE)
        .collect();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    output::render(&mut out, &shown, args.format)?;
    out.flush()?;
    drop(shown);
    // The process exits next and the kernel takes the memory back at once; freeing a large
    // plan's store object by object would cost about a tenth of its run.
    std::mem::forget(rt);
    Ok(rejected)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_args() {
        let (name, s) = parse_link("eth0", 2).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(name, "eth0");
        assert!(s.physical());
        assert_eq!(s.hardware_addr.to_string(), "02:00:00:00:00:02");
        let (_, s) = parse_link("bond0,kind=bond,mac=aa:bb:cc:dd:ee:ff,alias=up", 3)
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert!(!s.physical());
        assert_eq!((s.kind.as_str(), s.alias.as_str()), ("bond", "up"));
        assert_eq!(s.hardware_addr.to_string(), "aa:bb:cc:dd:ee:ff");
        assert!(parse_link("eth0,kind=nope", 2).is_err());
        assert!(parse_link("eth0,speed=10", 2).is_err());
        assert!(parse_link(",mac=aa:bb:cc:dd:ee:ff", 2).is_err());
        assert!(parse_link("averyveryverylongname", 2).is_err());
        // The message as the user sees it after `keelson plan: `.
        let spec = "eth0,kind=nope".to_owned();
        let why = parse_link(&spec, 2).err().unwrap_or(LinkError::EmptyName);
        assert_eq!(
            PlanError::Link { spec, why }.to_string(),
            r#"--link "eth0,kind=nope": unknown kind "nope""#
        );
        let spec = "eth0,speed".to_owned();
        let why = parse_link(&spec, 2).err().unwrap_or(LinkError::EmptyName);
        assert_eq!(
            PlanError::Link { spec, why }.to_string(),
            r#"--link "eth0,speed": expected key=value, got "speed""#
        );
    }
}
