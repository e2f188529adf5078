// SPDX-License-Identifier: Apache-2.0
//! The command line: `keelson-operator serve | apply | get | describe | delete [options]`.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::ctl::Output;
use crate::kinds::Kind;

pub const USAGE: &str = "\
usage: keelson-operator serve [options]
       keelson-operator apply -f FILE [options]        (FILE may be -: standard input)
       keelson-operator get KIND [NAME] [-o yaml|json] [options]
       keelson-operator describe KIND NAME [options]
       keelson-operator delete KIND NAME [options]
       keelson-operator kubeconfig NAME [PATH] [options]

KIND: tcp, tw, tm (TalosControlPlane, TalosWorker, TalosMachine); net (Network);
nid (NetworkID) and nn (NodeNetwork), both cluster-scoped (docs/tenant-networks.md).

serve runs the operator. Without --etcd-endpoints it starts a private etcd (the `etcd` binary on
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
  -n, --namespace NS        the namespace (default: default); serve reconciles this one
  --talos-port PORT         the nodes' Talos API port (default 50000)
  --poll-interval SECONDS   how often a waiting machine's node is asked again (default 30,
                            1 to 3600); settled ones every twice that (at least 60)
  --no-push                 follow no node's Events stream: the poll alone moves machines
  --talos-ca FILE           the CA of configured nodes (PEM), with --talos-cert and
  --talos-cert FILE         --talos-key: the client certificate (an os:admin one) for the
  --talos-key FILE          calls after maintenance mode
  --min-vni ID, --max-vni ID  the network IDs allocated (default 200 to 16777215)
  --metrics-listen ADDR:PORT  Prometheus metrics at http://ADDR:PORT/metrics
  --kubelet-timeout SECONDS how long a kubelet rolled to a new kubeVersion has to become
                            healthy before the rollout fails (default 300, 1 to 86400)
  --secrets-key FILE        the key sealing the cluster secrets it generates (32 bytes;
                            default DIR/secrets.key, made when absent)

kubeconfig prints a Ready TalosControlPlane's admin kubeconfig, or writes it to PATH (mode
0600); it opens it with --secrets-key (default DIR/secrets.key, never made by this command).

apply, get, describe, delete and kubeconfig talk to the etcd of --etcd-endpoints, else to the private etcd
of a running `serve` with the same --data-dir.
  -h, --help                this text

image and machine: the boot images and machines of network boot (keelson-operator image --help).
tenant-agent: a node's side of tenant networks (keelson-operator tenant-agent --help).
boot options of serve (docs/pxe.md):
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
    pub namespace: String,
    /// The nodes' Talos API port.
    pub talos_port: u16,
    /// The CA of configured nodes and a client certificate and key for them (PEM files).
    pub talos_tls: Option<(PathBuf, PathBuf, PathBuf)>,
    /// Network boot (docs/pxe.md).
    pub pxe: crate::pxe::options::Options,
    /// Tenant network IDs: `--min-vni`, `--max-vni`.
    pub vni: crate::networks::allocate::Range,
    /// The key sealing generated cluster secrets (default `DIR/secrets.key`).
    pub secrets_key: Option<PathBuf>,
    /// Where `GET /metrics` is served (docs/operator.md).
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// A rolled kubelet's bound (`--kubelet-timeout`).
    pub kubelet_timeout: std::time::Duration,
    /// How often a waiting machine is polled (`--poll-interval`).
    pub poll_interval: std::time::Duration,
    /// Follow the nodes' `Events` streams (`--no-push` turns it off).
    pub push: bool,
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
            namespace: crate::kinds::DEFAULT_NAMESPACE.into(),
            talos_port: crate::talos::PORT,
            talos_tls: None,
            pxe: crate::pxe::options::Options::default(),
            vni: crate::networks::allocate::Range::default(),
            secrets_key: None,
            metrics_listen: None,
            kubelet_timeout: crate::reconcile::KUBELET_BOUND,
            poll_interval: crate::states::POLL,
            push: true,
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

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verb {
    Serve,
    Apply { file: PathBuf },
    Get { kind: Kind, name: Option<String>, output: Output },
    Describe { kind: Kind, name: String },
    Delete { kind: Kind, name: String },
    Kubeconfig { name: String, path: Option<PathBuf> },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    pub verb: Verb,
    pub options: ServeOptions,
}

fn kind_arg(v: Option<String>) -> Result<Kind, CliError> {
    let v =
        v.ok_or_else(|| CliError::Usage("a kind is needed: tcp, tw, tm, net, nid or nn".into()))?;
    Kind::parse(&v).ok_or_else(|| {
        CliError::Usage(format!(
            "unknown kind {v:?}: tcp (TalosControlPlane), tw (TalosWorker), tm (TalosMachine), net (Network), nid (NetworkID) or nn (NodeNetwork)"
        ))
    })
}

/// Parse the arguments after the program name.
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Command, CliError> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_args(args);
    let mut o = ServeOptions::default();
    let verb = match p.next()? {
        Some(Value(v)) => v.string()?,
        Some(Short('h') | Long("help")) => return Err(CliError::Help),
        Some(other) => return Err(other.unexpected().into()),
        None => {
            return Err(CliError::Usage(
                "a command is needed: serve, apply, get, describe, delete, kubeconfig".into(),
            ))
        }
    };
    if !["serve", "apply", "get", "describe", "delete", "kubeconfig"].contains(&verb.as_str()) {
        return Err(CliError::Usage(format!("unknown command {verb:?}")));
    }
    let mut positional: Vec<String> = Vec::new();
    let mut file = None;
    let mut output = Output::Table;
    let mut talos: [Option<PathBuf>; 3] = [None, None, None];
    let (mut min_vni, mut max_vni) = (o.vni.min(), o.vni.max());
    while let Some(arg) = p.next()? {
        match arg {
            Short('f') | Long("filename") if verb == "apply" => {
                file = Some(PathBuf::from(p.value()?))
            }
            Short('o') | Long("output") if verb == "get" => {
                output = match p.value()?.string()?.as_str() {
                    "yaml" => Output::Yaml,
                    "json" => Output::Json,
                    "wide" | "table" => Output::Table,
                    other => return Err(CliError::Usage(format!("-o {other:?}: yaml or json"))),
                }
            }
            Long("talos-port") if verb == "serve" => o.talos_port = p.value()?.parse()?,
            Long("kubelet-timeout") if verb == "serve" => {
                let secs: u64 = p.value()?.parse()?;
                if !(1..=86_400).contains(&secs) {
                    return Err(CliError::Usage("--kubelet-timeout: 1 to 86400 seconds".into()));
                }
                o.kubelet_timeout = std::time::Duration::from_secs(secs);
            }
            Long("poll-interval") if verb == "serve" => {
                let v: u64 = p.value()?.parse()?;
                if !(1..=3600).contains(&v) {
                    return Err(CliError::Usage("--poll-interval: 1 to 3600 seconds".into()));
                }
                o.poll_interval = std::time::Duration::from_secs(v);
            }
            Long("no-push") if verb == "serve" => o.push = false,
            Long("min-vni") if verb == "serve" => min_vni = p.value()?.parse()?,
            Long("max-vni") if verb == "serve" => max_vni = p.value()?.parse()?,
            Long("talos-ca") if verb == "serve" => talos[0] = Some(PathBuf::from(p.value()?)),
            Long("talos-cert") if verb == "serve" => talos[1] = Some(PathBuf::from(p.value()?)),
            Long("talos-key") if verb == "serve" => talos[2] = Some(PathBuf::from(p.value()?)),
            Long(f) if verb == "serve" && crate::pxe::options::is_serve_flag(f) => {
                let f = f.to_owned();
                let v = p.value()?;
                crate::pxe::options::serve_flag(&mut o.pxe, &f, v).map_err(CliError::Usage)?;
            }
            Short('n') | Long("namespace") => {
                let v = p.value()?.string()?;
                if !crate::kinds::valid_name(&v) {
                    return Err(CliError::Usage("--namespace: a name like default".into()));
                }
                o.namespace = v;
            }
            Value(v) if verb != "serve" && positional.len() < 2 => positional.push(v.string()?),
            Long("data-dir") => o.data_dir = Some(p.value()?.into()),
            Long("secrets-key") => o.secrets_key = Some(p.value()?.into()),
            Long("metrics-listen") => {
                let v = p.value()?.string()?;
                o.metrics_listen = Some(v.parse().map_err(|_| {
                    CliError::Usage(
                        "--metrics-listen: an address and port like 127.0.0.1:9810".into(),
                    )
                })?);
            }
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
            Short('h') | Long("help") => return Err(CliError::Help),
            other => return Err(other.unexpected().into()),
        }
    }
    o.vni = crate::networks::allocate::Range::new(min_vni, max_vni)
        .map_err(|e| CliError::Usage(e.to_string()))?;
    match talos {
        [Some(ca), Some(cert), Some(key)] => o.talos_tls = Some((ca, cert, key)),
        [None, None, None] => {}
        _ => {
            return Err(CliError::Usage(
                "--talos-ca, --talos-cert and --talos-key go together".into(),
            ))
        }
    }
    let mut pos = positional.into_iter();
    let verb = match verb.as_str() {
        "serve" => Verb::Serve,
        "apply" => {
            let file = file.ok_or_else(|| CliError::Usage("apply needs -f FILE".into()))?;
            if pos.next().is_some() {
                return Err(CliError::Usage("apply takes -f FILE only".into()));
            }
            Verb::Apply { file }
        }
        "get" => Verb::Get { kind: kind_arg(pos.next())?, name: pos.next(), output },
        "kubeconfig" => {
            let name = pos
                .next()
                .ok_or_else(|| CliError::Usage("kubeconfig needs a control plane's name".into()))?;
            Verb::Kubeconfig { name, path: pos.next().map(PathBuf::from) }
        }
        v => {
            let kind = kind_arg(pos.next())?;
            let name = pos.next().ok_or_else(|| CliError::Usage(format!("{v} needs a name")))?;
            if v == "describe" {
                Verb::Describe { kind, name }
            } else {
                Verb::Delete { kind, name }
            }
        }
    };
    if o.cert.is_some() != o.key.is_some() {
        return Err(CliError::Usage("--etcd-cert and --etcd-key go together".into()));
    }
    if o.endpoints.is_empty() && (o.cacert.is_some() || o.cert.is_some()) {
        return Err(CliError::Usage(
            "--etcd-cacert/--etcd-cert/--etcd-key need --etcd-endpoints".into(),
        ));
    }
    Ok(Command { verb, options: o })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<OsString> {
        a.iter().map(OsString::from).collect()
    }

    #[test]
    fn serve_with_and_without_an_external_cluster() {
        assert_eq!(parse(args(&["serve"])).unwrap().options, ServeOptions::default());
        assert_eq!(parse(args(&["serve"])).unwrap().verb, Verb::Serve);
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
        .unwrap()
        .options;
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
        assert!(parse(args(&["serve", "--poll-interval", "0"])).is_err());
        assert!(parse(args(&["serve", "--poll-interval", "3601"])).is_err());
        let o = parse(args(&["serve", "--poll-interval", "120", "--no-push"])).unwrap().options;
        assert_eq!((o.poll_interval.as_secs(), o.push), (120, false));
        let o = parse(args(&["serve"])).unwrap().options;
        assert_eq!((o.poll_interval.as_secs(), o.push), (30, true));
        assert!(parse(args(&["serve", "--prefix", "rel"])).is_err());
        assert!(parse(args(&["serve", "--etcd-endpoints", ","])).is_err());
        assert!(parse(args(&["serve", "--min-vni", "300", "--max-vni", "299"])).is_err());
        assert!(parse(args(&["serve", "--max-vni", "16777216"])).is_err());
        let o = parse(args(&["serve", "--min-vni", "1000", "--max-vni", "1255"])).unwrap().options;
        assert_eq!((o.vni.min(), o.vni.max()), (1000, 1255));
        for bad in ["0", "86401", "5m", "-1"] {
            assert!(parse(args(&["serve", "--kubelet-timeout", bad])).is_err(), "{bad}");
        }
        assert!(parse(args(&["get", "tm", "--kubelet-timeout", "5"])).is_err());
        let o = parse(args(&["serve", "--kubelet-timeout", "45"])).unwrap().options;
        assert_eq!(o.kubelet_timeout, std::time::Duration::from_secs(45));
    }

    #[test]
    fn resource_commands() {
        let c = parse(args(&["apply", "-f", "x.yaml", "-n", "lab"])).unwrap();
        assert_eq!(c.verb, Verb::Apply { file: "x.yaml".into() });
        assert_eq!(c.options.namespace, "lab");
        let c = parse(args(&["get", "tm", "m1", "-o", "yaml"])).unwrap();
        assert_eq!(
            c.verb,
            Verb::Get { kind: Kind::Machine, name: Some("m1".into()), output: Output::Yaml }
        );
        let c = parse(args(&["get", "TalosControlPlanes"])).unwrap();
        assert_eq!(
            c.verb,
            Verb::Get { kind: Kind::ControlPlane, name: None, output: Output::Table }
        );
        let c = parse(args(&["kubeconfig", "cp", "/tmp/kc"])).unwrap();
        assert_eq!(c.verb, Verb::Kubeconfig { name: "cp".into(), path: Some("/tmp/kc".into()) });
        let c = parse(args(&["kubeconfig", "cp", "--secrets-key", "/k"])).unwrap();
        assert_eq!(c.verb, Verb::Kubeconfig { name: "cp".into(), path: None });
        assert_eq!(c.options.secrets_key, Some("/k".into()));
        assert!(matches!(parse(args(&["kubeconfig"])), Err(CliError::Usage(_))));
        let c = parse(args(&["delete", "tw", "w"])).unwrap();
        assert_eq!(c.verb, Verb::Delete { kind: Kind::Worker, name: "w".into() });
        assert!(parse(args(&["apply"])).is_err());
        assert!(parse(args(&["get", "pods"])).is_err());
        let c = parse(args(&["get", "nid"])).unwrap();
        assert_eq!(c.verb, Verb::Get { kind: Kind::NetworkId, name: None, output: Output::Table });
        let c = parse(args(&["delete", "Network", "a"])).unwrap();
        assert_eq!(c.verb, Verb::Delete { kind: Kind::Network, name: "a".into() });
        assert!(parse(args(&["get", "tm", "-o", "xml"])).is_err());
        assert!(parse(args(&["describe", "tm"])).is_err());
        assert!(parse(args(&["get", "tm", "a", "b", "c"])).is_err());
        assert!(parse(args(&["serve", "stray"])).is_err());
        assert!(parse(args(&["serve", "--talos-ca", "ca.pem"])).is_err());
        let c = parse(args(&["serve", "--talos-ca", "a", "--talos-cert", "b", "--talos-key", "c"]))
            .unwrap();
        assert_eq!(c.options.talos_tls, Some(("a".into(), "b".into(), "c".into())));
    }
}
