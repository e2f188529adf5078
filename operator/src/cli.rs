// SPDX-License-Identifier: Apache-2.0
//! The command line: `keelson-operator serve [options]`.

use std::ffi::OsString;
use std::path::PathBuf;

pub const USAGE: &str = "\
usage: keelson-operator serve [options]

Runs the operator. Without --etcd-endpoints it starts a private etcd (the `etcd` binary on
PATH) on free ports of 127.0.0.1, its data under --data-dir, and stops it on exit.

options:
  --data-dir DIR            state directory (default: $XDG_STATE_HOME/keelson-operator,
                            else ~/.local/state/keelson-operator); the private etcd's data
                            is DIR/etcd, its log DIR/etcd.log
  --etcd-endpoints URL,...  use this etcd cluster (http://host:port or https://host:port)
  --etcd-cacert FILE        CA bundle (PEM) for https endpoints
  --etcd-cert FILE          client certificate (PEM), with --etcd-key
  --etcd-key FILE           client key (PEM)
  --prefix PREFIX           the key prefix of the operator's data (default /keelson-operator)
  --name NAME               this replica's name in the leader election, unique among live
                            replicas (default hostname/pid)
  --lease-ttl SECONDS       the leader's lease (default 10, 2 to 3600)
  -h, --help                this text

boot options (docs/pxe.md):
";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CliError {
    #[error("help")]
    Help,
    #[error("{0}")]
    Usage(String),
}

impl From<lexopt::Error> for CliError {
    fn from(e: lexopt::Error) -> Self {
        Self::Usage(e.to_string())
    }
}

/// `serve`'s options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeOptions {
    pub data_dir: Option<PathBuf>,
    pub endpoints: Vec<String>,
    pub cacert: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    pub prefix: String,
    pub name: Option<String>,
    pub lease_ttl: i64,
    pub pxe: crate::pxe::options::Options,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            data_dir: None,
            endpoints: Vec::new(),
            cacert: None,
            cert: None,
            key: None,
            prefix: "/keelson-operator".into(),
            name: None,
            lease_ttl: 10,
            pxe: crate::pxe::options::Options::default(),
        }
    }
}

/// The state directory: `$XDG_STATE_HOME/keelson-operator`, else
/// `$HOME/.local/state/keelson-operator` (the XDG base directory default).
pub fn default_data_dir() -> Option<PathBuf> {
    let from = |v: &str| std::env::var_os(v).filter(|s| !s.is_empty()).map(PathBuf::from);
    let base = from("XDG_STATE_HOME")
        .filter(|p| p.is_absolute())
        .or_else(|| from("HOME").map(|h| h.join(".local/state")))?;
    Some(base.join("keelson-operator"))
}

/// Parse the arguments after the program name.
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<ServeOptions, CliError> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_args(args);
    let mut o = ServeOptions::default();
    match p.next()? {
        Some(Value(v)) if v == "serve" => {}
        Some(Short('h') | Long("help")) => return Err(CliError::Help),
        Some(other) => return Err(other.unexpected().into()),
        None => return Err(CliError::Usage("a command is needed: serve".into())),
    }
    while let Some(arg) = p.next()? {
        match arg {
            Long("data-dir") => o.data_dir = Some(p.value()?.into()),
            Long("etcd-endpoints") => {
                let v = p.value()?.string()?;
                o.endpoints = v
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect();
                if o.endpoints.is_empty() {
                    return Err(CliError::Usage("--etcd-endpoints: no URL".into()));
                }
            }
            Long("etcd-cacert") => o.cacert = Some(p.value()?.into()),
            Long("etcd-cert") => o.cert = Some(p.value()?.into()),
            Long("etcd-key") => o.key = Some(p.value()?.into()),
            Long("prefix") => {
                let v = p.value()?.string()?;
                if !v.starts_with('/') || v.len() < 2 || v.chars().any(char::is_control) {
                    return Err(CliError::Usage("--prefix: a path like /keelson-operator".into()));
                }
                o.prefix = v.trim_end_matches('/').to_owned();
            }
            Long("name") => {
                let v = p.value()?.string()?;
                if v.is_empty() || v.len() > 253 || v.chars().any(char::is_control) {
                    return Err(CliError::Usage("--name: 1 to 253 printable characters".into()));
                }
                o.name = Some(v);
            }
            Long("lease-ttl") => {
                let v: i64 = p.value()?.parse()?;
                if !(2..=3600).contains(&v) {
                    return Err(CliError::Usage("--lease-ttl: 2 to 3600 seconds".into()));
                }
                o.lease_ttl = v;
            }
            Long(f) if crate::pxe::options::is_serve_flag(f) => {
                let f = f.to_owned();
                let v = p.value()?;
                crate::pxe::options::serve_flag(&mut o.pxe, &f, v).map_err(CliError::Usage)?;
            }
            Short('h') | Long("help") => return Err(CliError::Help),
            other => return Err(other.unexpected().into()),
        }
    }
    if o.cert.is_some() != o.key.is_some() {
        return Err(CliError::Usage("--etcd-cert and --etcd-key go together".into()));
    }
    if o.endpoints.is_empty() && (o.cacert.is_some() || o.cert.is_some()) {
        return Err(CliError::Usage(
            "--etcd-cacert/--etcd-cert/--etcd-key need --etcd-endpoints".into(),
        ));
    }
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<OsString> {
        a.iter().map(OsString::from).collect()
    }

    #[test]
    fn serve_with_and_without_an_external_cluster() {
        assert_eq!(parse(args(&["serve"])).unwrap(), ServeOptions::default());
        let o = parse(args(&[
            "serve",
            "--etcd-endpoints",
            "https://10.0.0.1:2379, https://10.0.0.2:2379",
            "--etcd-cacert",
            "ca.pem",
            "--etcd-cert",
            "c.pem",
            "--etcd-key",
            "k.pem",
            "--prefix",
            "/op/",
            "--lease-ttl",
            "15",
        ]))
        .unwrap();
        assert_eq!(o.endpoints, ["https://10.0.0.1:2379", "https://10.0.0.2:2379"]);
        assert_eq!((o.prefix.as_str(), o.lease_ttl), ("/op", 15));
    }

    #[test]
    fn bad_combinations_are_refused() {
        assert_eq!(parse(args(&["--help"])), Err(CliError::Help));
        assert!(parse(args(&[])).is_err());
        assert!(parse(args(&["run"])).is_err());
        assert!(parse(args(&["serve", "--etcd-cacert", "x"])).is_err());
        assert!(
            parse(args(&["serve", "--etcd-endpoints", "http://a:1", "--etcd-cert", "x"])).is_err()
        );
        assert!(parse(args(&["serve", "--lease-ttl", "1"])).is_err());
        assert!(parse(args(&["serve", "--prefix", "rel"])).is_err());
        assert!(parse(args(&["serve", "--etcd-endpoints", ","])).is_err());
    }
}
