// SPDX-License-Identifier: Apache-2.0
//! `keelson run`: the whole runtime as an ordinary process in the current network namespace.
//!
//! Files go under `--root`; the kernel is configured for real. SIGTERM/SIGINT stop the loop
//! and leave the kernel as it is, so the next `run` adopts that state without changing it.
//! The config file is re-read when it changes (inotify on its directory) or on SIGHUP; its
//! invalid entries are dropped and reported and the rest applies (docs/config.md); a new config
//! of which nothing is valid is reported and the running one kept.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::node;

/// Why `keelson run`'s arguments were refused (printed after `keelson run: `).
#[derive(Debug, thiserror::Error)]
enum ArgsError {
    /// An option the parser refused.
    #[error(transparent)]
    Args(#[from] lexopt::Error),
    /// An argument that is not UTF-8.
    #[error("not UTF-8: {0:?}")]
    NotUtf8(OsString),
    /// `--api-max-connections` is not a number.
    #[error("--api-max-connections wants a number")]
    MaxConnections,
    /// `--api-listen` is not ADDR:PORT.
    #[error("--api-listen wants ADDR:PORT ([ADDR]:PORT for IPv6), not {0:?}")]
    Listen(String),
    /// `--metrics-listen` is not ADDR:PORT.
    #[error("--metrics-listen wants ADDR:PORT ([ADDR]:PORT for IPv6), not {0:?}")]
    MetricsListen(String),
    /// `--config-url` without `--config`.
    #[error("--config-url needs --config FILE: where the fetched config is kept (an existing FILE is used instead of fetching)")]
    UrlWithoutFile,
    /// `--config-url` that is not an http(s) URL.
    #[error("--config-url: {0}")]
    Url(String),
    /// `--trustd-cert-lifetime` is not a positive number of seconds.
    #[error("--trustd-cert-lifetime wants a number of seconds above 0")]
    Lifetime,
    /// No `--root`.
    #[error("--root DIR is required (files such as /etc/resolv.conf are written under it)")]
    NoRoot,
}

#[derive(Debug)]
struct Args {
    cmdline: String,
    config: Option<PathBuf>,
    config_url: Option<String>,
    config_roots: Vec<PathBuf>,
    root: PathBuf,
    state: Option<PathBuf>,
    hostname: bool,
    once: bool,
    set_clock: bool,
    nts_ca: Option<PathBuf>,
    api_socket: Option<PathBuf>,
    api_listen: Vec<std::net::SocketAddr>,
    api_max_connections: usize,
    trustd_listen: Vec<std::net::SocketAddr>,
    trustd_cert_lifetime: Option<std::time::Duration>,
    metrics_listen: Option<std::net::SocketAddr>,
}

fn parse_args(raw: Vec<OsString>) -> Result<Args, ArgsError> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_args(raw);
    let mut a = Args {
        cmdline: String::new(),
        config: None,
        config_url: None,
        config_roots: Vec::new(),
        root: PathBuf::new(),
        state: None,
        hostname: true,
        once: false,
        set_clock: false,
        nts_ca: None,
        api_socket: None,
        api_listen: Vec::new(),
        api_max_connections: crate::api::server::MAX_CONNECTIONS,
        trustd_listen: Vec::new(),
        trustd_cert_lifetime: None,
        metrics_listen: None,
    };
    let mut root = None;
    while let Some(arg) = p.next()? {
        let value = |p: &mut lexopt::Parser| p.value();
        match arg {
            Long("cmdline") => {
                a.cmdline = value(&mut p)?.into_string().map_err(ArgsError::NotUtf8)?
            }
            Long("config") => a.config = Some(value(&mut p)?.into()),
            Long("config-url") => {
                a.config_url = Some(value(&mut p)?.into_string().map_err(ArgsError::NotUtf8)?)
            }
            Long("config-ca") => a.config_roots.push(value(&mut p)?.into()),
            Long("root") => root = Some(PathBuf::from(value(&mut p)?)),
            Long("state") => a.state = Some(value(&mut p)?.into()),
            Long("no-hostname") => a.hostname = false,
            Long("once") => a.once = true,
            Long("set-clock") => a.set_clock = true,
            Long("nts-ca") => a.nts_ca = Some(value(&mut p)?.into()),
            Long("api-socket") => a.api_socket = Some(value(&mut p)?.into()),
            Long("api-listen") => {
                let v = value(&mut p)?.into_string().map_err(ArgsError::NotUtf8)?;
                a.api_listen.push(v.parse().map_err(|_| ArgsError::Listen(v))?);
            }
            Long("trustd-listen") => {
                let v = value(&mut p)?.into_string().map_err(ArgsError::NotUtf8)?;
                a.trustd_listen.push(v.parse().map_err(|_| ArgsError::Listen(v))?);
            }
            // For tests of renewal: what trustd signs is valid this long, not a year.
            Long("trustd-cert-lifetime") => {
                let secs = value(&mut p)?.into_string().ok().and_then(|v| v.parse::<u64>().ok());
                let secs = secs.filter(|s| *s > 0).ok_or(ArgsError::Lifetime)?;
                a.trustd_cert_lifetime = Some(std::time::Duration::from_secs(secs));
            }
            Long("metrics-listen") => {
                let v = value(&mut p)?.into_string().map_err(ArgsError::NotUtf8)?;
                let addr: std::net::SocketAddr =
                    v.parse().map_err(|_| ArgsError::MetricsListen(v.clone()))?;
                if addr.port() == 0 {
                    return Err(ArgsError::MetricsListen(v));
                }
                a.metrics_listen = Some(addr);
            }
            Long("api-max-connections") => {
                a.api_max_connections = value(&mut p)?
                    .into_string()
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .ok_or(ArgsError::MaxConnections)?;
            }
            _ => return Err(arg.unexpected().into()),
        }
    }
    a.root = root.ok_or(ArgsError::NoRoot)?;
    if let Some(url) = &a.config_url {
        if a.config.is_none() {
            return Err(ArgsError::UrlWithoutFile);
        }
        match crate::fetch::origin(Some(url), None) {
            crate::fetch::Origin::Url(_) => {}
            crate::fetch::Origin::Refused(e) => return Err(ArgsError::Url(e)),
            _ => return Err(ArgsError::Url("not an http:// or https:// URL".into())),
        }
    }
    if a.config_roots.is_empty() {
        a.config_roots = crate::fetch::client::DEFAULT_ROOTS.iter().map(PathBuf::from).collect();
    }
    Ok(a)
}

pub fn main(raw: Vec<OsString>) -> ExitCode {
    let args = match parse_args(raw) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("keelson run: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(state) = &args.state {
        if let Err(e) = std::fs::create_dir_all(state) {
            eprintln!("keelson run: {}: {e}", state.display());
            return ExitCode::FAILURE;
        }
    }
    log::info!(target: "run", "running; root {}", args.root.display());
    let opts = node::Options {
        hotplug: None,
        predictable_names: false,
        cmdline: args.cmdline,
        keep_config: args.config.clone(),
        config: args.config,
        config_url: args.config_url,
        config_roots: args.config_roots,
        root: args.root,
        hostname: args.hostname,
        once: args.once,
        set_clock: args.set_clock,
        nts_ca: args.nts_ca,
        stop_grace: crate::supervisor::STOP_GRACE,
        api_socket: args.api_socket,
        api_listen: args.api_listen,
        api_max_connections: args.api_max_connections,
        trustd_listen: args.trustd_listen,
        trustd_cert_lifetime: args.trustd_cert_lifetime,
        metrics_listen: args.metrics_listen,
        state: args.state,
    };
    match node::run(&opts) {
        Ok(node::Ending::Reset(r)) => {
            reset(&opts, r);
            ExitCode::SUCCESS
        }
        Ok(ending) => {
            log::info!(target: "run", "stopped ({ending:?}); the kernel keeps its configuration");
            ExitCode::SUCCESS
        }
        Err(e) => {
            log::error!(target: "run", "{e}");
            ExitCode::FAILURE
        }
    }
}

/// A reset in `keelson run`, once services stopped: what PID 1 wipes, in this run's
/// directories (`--state`'s contents, the `--config` file and a config staged beside it, and
/// for `EPHEMERAL` etcd's data under `--root`); then the process ends as for a reboot. The
/// next `keelson run` with the same arguments starts in maintenance mode.
fn reset(opts: &node::Options, r: crate::machine::Reset) {
    let mut wiped = Vec::new();
    let fail = |what: &std::path::Path, e: std::io::Error| {
        log::error!(target: "run", "reset: {}: {e}", what.display());
    };
    if r.wipe.state {
        if let Some(dir) = &opts.state {
            match crate::state::empty_dir(dir) {
                Ok(()) => wiped.push(dir.display().to_string()),
                Err(e) => fail(dir, e),
            }
        }
        if let Some(config) = &opts.config {
            for path in [config.clone(), crate::staged::path_for(config)] {
                match std::fs::remove_file(&path) {
                    Ok(()) => wiped.push(path.display().to_string()),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => fail(&path, e),
                }
            }
        }
    }
    if r.wipe.ephemeral {
        let data = opts.root.join(crate::etcd::DATA_DIR.trim_start_matches('/'));
        match crate::state::empty_dir(&data) {
            Ok(()) => wiped.push(data.display().to_string()),
            Err(e) => fail(&data, e),
        }
    }
    let then = if r.reboot { "reboot" } else { "power off" };
    log::warn!(target: "run", "reset: wiped {}; exiting as for a {then} (the next start is in maintenance mode)", if wiped.is_empty() { "nothing".to_owned() } else { wiped.join(", ") });
}
