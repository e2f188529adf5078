// SPDX-License-Identifier: Apache-2.0
//! `keelson config validate` and `keelson config migrate`: offline checks and rewrites of a
//! configuration file.

use std::ffi::OsString;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

/// Modes a configuration may be validated for. keelson runs on machines it boots (`metal`;
/// `cloud` checks the same); Talos's `container` mode has no keelson equivalent.
const MODES: [&str; 2] = ["metal", "cloud"];

/// Why a `config` command could not run.
#[derive(Debug, thiserror::Error)]
enum CmdError {
    #[error(transparent)]
    Args(#[from] lexopt::Error),
    #[error("not UTF-8: {0:?}")]
    NotUtf8(OsString),
    #[error("--mode {0}: keelson validates for metal or cloud")]
    Mode(String),
    #[error("usage: keelson config validate FILE [--mode metal] | keelson config migrate FILE")]
    Usage,
    #[error("{path}: {source}")]
    Read { path: String, source: net::bounded::ReadError },
    #[error("{0}")]
    Migrate(#[from] net::config::MigrateError),
    #[error("writing the output: {0}")]
    Write(#[from] std::io::Error),
}

/// `keelson config SUBCOMMAND ...`.
pub fn main(raw: Vec<OsString>) -> ExitCode {
    let result = match raw.first().and_then(|s| s.to_str()) {
        Some("confirm") => return cli::client::confirm_main(raw[1..].to_vec()),
        Some("validate") => validate(raw[1..].to_vec()),
        Some("migrate") => migrate(raw[1..].to_vec()),
        _ => Err(CmdError::Usage),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("keelson config: {e}");
            ExitCode::from(2)
        }
    }
}

/// The FILE argument and options of a subcommand.
fn args(raw: Vec<OsString>, with_mode: bool) -> Result<String, CmdError> {
    use lexopt::prelude::*;
    let mut parser = lexopt::Parser::from_args(raw);
    let mut file = None;
    while let Some(arg) = parser.next()? {
        match arg {
            Long("mode") if with_mode => {
                let mode = parser.value()?.into_string().map_err(CmdError::NotUtf8)?;
                if !MODES.contains(&mode.as_str()) {
                    return Err(CmdError::Mode(net::names::escape(&mode, 32)));
                }
            }
            Value(v) if file.is_none() => file = Some(v.into_string().map_err(CmdError::NotUtf8)?),
            other => return Err(other.unexpected().into()),
        }
    }
    file.ok_or(CmdError::Usage)
}

fn read(path: &str) -> Result<String, CmdError> {
    net::bounded::read_text(Path::new(path), net::bounded::CONFIG_LIMIT)
        .map_err(|source| CmdError::Read { path: path.to_owned(), source })
}

/// Every problem of the file, one line each; exit 1 if there is any.
fn validate(raw: Vec<OsString>) -> Result<ExitCode, CmdError> {
    let path = args(raw, true)?;
    let text = read(&path)?;
    let report = net::config::check(&text);
    let shown = net::names::escape(&path, 256);
    for w in &report.config.warnings {
        eprintln!("warning: {shown}: {w}");
    }
    for e in &report.errors {
        eprintln!("error: {shown}: {}", e.dropped_line());
    }
    if report.errors.is_empty() {
        println!("{shown}: valid");
        Ok(ExitCode::SUCCESS)
    } else {
        Ok(ExitCode::from(1))
    }
}

/// The file as typed documents, on standard output.
fn migrate(raw: Vec<OsString>) -> Result<ExitCode, CmdError> {
    let path = args(raw, false)?;
    let text = read(&path)?;
    let out = net::config::migrate(&text)?;
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(out.as_bytes())?;
    stdout.flush()?;
    Ok(ExitCode::SUCCESS)
}
