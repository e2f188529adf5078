// SPDX-License-Identifier: Apache-2.0
//! `keelson-operator tenant-agent --node NAME`: a node's side of tenant networks as a process
//! on the node. It reads every NodeNetwork from the operator's etcd, realises them with the
//! kernel's VRF and VXLAN devices (`net::tenant`), and writes its report under its node name
//! ([`super::node::sync`]); then again every `--interval`.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use net::netlink::RouteSocket;
use net::tenant::{self, kernel, Peer, Remote, TenantNetwork, Underlay};

use super::kinds::{parse_prefix, NodeNetworkSpec};
use super::node::{self, Dataplane, Outcome, Realised};
use super::status_file;
use crate::cli::ServeOptions;
use crate::key::Layout;
use crate::store::Store;

pub const USAGE: &str = "\
usage: keelson-operator tenant-agent --node NAME [--vtep-local ADDR] [--vxlan-port PORT]
                                     [--interval SECONDS] [--once] [--status-file PATH]
                                     [etcd options]

Realises every NodeNetwork on this machine (a VRF and a VXLAN device per network, peer
prefixes leaked between VRF tables) and reports under NAME. After each round it writes what
it realised to --status-file (default /run/keelson/tenant-networks.json, where a keelson node
reads it for `keelson get networks`; an empty PATH writes none). etcd options are serve's
(--data-dir, --etcd-endpoints, --etcd-cacert, --etcd-cert, --etcd-key, --prefix).
";

/// The kernel as a [`Dataplane`].
#[derive(Debug)]
pub struct Kernel {
    sock: RouteSocket,
    underlay: Underlay,
}

impl Kernel {
    /// Over a route socket (of the namespace it was opened in).
    pub fn new(sock: RouteSocket, underlay: Underlay) -> Self {
        Self { sock, underlay }
    }
}

/// The node layer in the planner's terms (prefixes that do not parse are left out: the
/// controller wrote them checked).
pub fn tenant_networks(
    want: &[NodeNetworkSpec],
    remotes: &BTreeMap<u32, Vec<Remote>>,
) -> Vec<TenantNetwork> {
    want.iter()
        .filter(|w| (1..=tenant::MAX_ID).contains(&w.id))
        .map(|w| TenantNetwork {
            id: w.id,
            peers: w
                .peered_ids
                .iter()
                .map(|&id| Peer {
                    id,
                    prefixes: w
                        .peered_prefixes
                        .iter()
                        .filter(|p| p.id == id)
                        .flat_map(|p| p.prefixes.iter().filter_map(|s| parse_prefix(s)))
                        .collect(),
                })
                .collect(),
            prefixes: w.prefixes.iter().filter_map(|s| parse_prefix(s)).collect(),
            remotes: remotes.get(&w.id).cloned().unwrap_or_default(),
        })
        .collect()
}

impl Dataplane for Kernel {
    fn apply(
        &mut self,
        want: &[NodeNetworkSpec],
        remotes: &BTreeMap<u32, Vec<Remote>>,
    ) -> BTreeMap<u32, Outcome> {
        let nets = tenant_networks(want, remotes);
        match kernel::sync(&mut self.sock, &nets, &self.underlay) {
            Ok(m) => m
                .into_iter()
                .map(|(id, o)| {
                    let o = match o {
                        kernel::Outcome::Realised { prefixes, peers, failed } => {
                            Outcome::Realised { prefixes, peers, failed }
                        }
                        kernel::Outcome::Failed(e) => Outcome::Failed(e),
                    };
                    (id, o)
                })
                .collect(),
            Err(e) => nets.iter().map(|n| (n.id, Outcome::Failed(e.to_string()))).collect(),
        }
    }

    fn vtep(&self) -> Option<IpAddr> {
        self.underlay.local
    }
}

#[derive(Debug, Default)]
struct Args {
    etcd: ServeOptions,
    node: Option<String>,
    underlay: Underlay,
    interval: u64,
    once: bool,
    /// Where to write what each round realised (`None`: nowhere).
    status_file: Option<PathBuf>,
}

fn parse(args: Vec<OsString>) -> Result<Args, String> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_args(args);
    let mut a = Args {
        interval: 5,
        status_file: Some(PathBuf::from(status_file::DEFAULT_PATH)),
        ..Default::default()
    };
    let e = |e: lexopt::Error| e.to_string();
    let mut etcd_argv: Vec<OsString> = vec!["serve".into()];
    while let Some(arg) = p.next().map_err(e)? {
        match arg {
            Long("node") => {
                let v = p.value().map_err(e)?.string().map_err(e)?;
                if v.is_empty() || v.len() > 253 || v.chars().any(|c| c.is_control()) {
                    return Err("--node: 1 to 253 printable characters".into());
                }
                a.node = Some(v);
            }
            Long("vtep-local") => {
                let v: IpAddr = p.value().map_err(e)?.parse().map_err(e)?;
                a.underlay.local = Some(v);
            }
            Long("vxlan-port") => a.underlay.port = p.value().map_err(e)?.parse().map_err(e)?,
            Long("interval") => {
                a.interval = p.value().map_err(e)?.parse().map_err(e)?;
                if !(1..=3600).contains(&a.interval) {
                    return Err("--interval: 1 to 3600 seconds".into());
                }
            }
            Long("once") => a.once = true,
            Long("status-file") => {
                let v = PathBuf::from(p.value().map_err(e)?);
                a.status_file = (!v.as_os_str().is_empty()).then_some(v);
            }
            Long("help") | Short('h') => return Err(String::new()),
            Long(
                f @ ("data-dir" | "etcd-endpoints" | "etcd-cacert" | "etcd-cert" | "etcd-key"
                | "prefix"),
            ) => {
                etcd_argv.push(format!("--{f}").into());
                etcd_argv.push(p.value().map_err(e)?);
            }
            other => return Err(other.unexpected().to_string()),
        }
    }
    // serve's own parser checks the etcd flags.
    a.etcd = crate::cli::parse(etcd_argv).map_err(|e| e.to_string())?.options;
    if a.node.is_none() {
        return Err("--node NAME is needed".into());
    }
    Ok(a)
}

/// The command; `args` are those after `tenant-agent`.
#[allow(clippy::disallowed_methods)] // Its own process's main thread, not an event loop.
pub fn main(args: Vec<OsString>) -> ExitCode {
    let a = match parse(args) {
        Ok(a) => a,
        Err(e) if e.is_empty() => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("keelson-operator tenant-agent: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let node = a.node.clone().unwrap_or_default();
    let client = match crate::serve::client(&a.etcd) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("keelson-operator tenant-agent: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut store = Store::new(client, Layout::new(&a.etcd.prefix, a.etcd.prefix.as_bytes()));
    let sock = match RouteSocket::new() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("keelson-operator tenant-agent: rtnetlink: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut dp = Kernel::new(sock, a.underlay.clone());
    let mut last_write_error = None;
    // What the file holds: an unchanged round is not written again (each write wakes the
    // node that watches the file).
    let mut written: Option<Vec<u8>> = None;
    loop {
        match node::round(&mut store, &node, &mut dp) {
            Ok(r) => {
                log::debug!("tenant networks: {} on this node", r.len());
                if let Some(path) = &a.status_file {
                    let e = write_status(path, &node, &r, &mut written).err();
                    // A file that cannot be written is said once, not every round.
                    if e.is_some() && e != last_write_error {
                        log::warn!(
                            "tenant networks: status file {}: {}",
                            path.display(),
                            e.as_deref().unwrap_or_default()
                        );
                    }
                    last_write_error = e;
                }
            }
            Err(e) if a.once => {
                eprintln!("keelson-operator tenant-agent: {e}");
                return ExitCode::FAILURE;
            }
            Err(e) => log::warn!("tenant networks: {e}"),
        }
        if a.once {
            return ExitCode::SUCCESS;
        }
        std::thread::sleep(Duration::from_secs(a.interval));
    }
}

/// Write one round's status file, unless `written` already holds it and the file is there.
fn write_status(
    path: &std::path::Path,
    node: &str,
    r: &[Realised],
    written: &mut Option<Vec<u8>>,
) -> Result<(), String> {
    let (text, left_out) =
        status_file::encode(&status_file::document(node, r)).map_err(|e| e.to_string())?;
    if written.as_ref() == Some(&text) && path.is_file() {
        return Ok(());
    }
    if left_out > 0 {
        log::warn!(
            "tenant networks: status file {}: {left_out} networks left out (size limit)",
            path.display()
        );
    }
    *written = None;
    status_file::write(path, &text).map_err(|e| e.to_string())?;
    *written = Some(text);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::networks::kinds::{ClaimRef, PeeredPrefixes};

    #[test]
    fn options_and_the_node_layer_in_planner_terms() {
        let args = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        let a =
            parse(args(&["--node", "n1", "--vtep-local", "192.0.2.1", "--prefix", "/op"])).unwrap();
        assert_eq!((a.node.as_deref(), a.etcd.prefix.as_str()), (Some("n1"), "/op"));
        assert_eq!(a.underlay.local, Some("192.0.2.1".parse().unwrap()));
        assert!(parse(args(&["--vtep-local", "192.0.2.1"])).is_err());
        assert!(parse(args(&["--node", "n1", "--interval", "0"])).is_err());
        assert!(parse(args(&["--node", "n1", "--vtep-local", "nope"])).is_err());
        assert_eq!(
            parse(args(&["--node", "n1"])).unwrap().status_file.as_deref(),
            Some(std::path::Path::new("/run/keelson/tenant-networks.json"))
        );
        assert_eq!(parse(args(&["--node", "n1", "--status-file", ""])).unwrap().status_file, None);
        let a = parse(args(&["--node", "n1", "--status-file", "/tmp/x.json"])).unwrap();
        assert_eq!(a.status_file.as_deref(), Some(std::path::Path::new("/tmp/x.json")));
        let want = [NodeNetworkSpec {
            id: 300,
            network_ref: ClaimRef::default(),
            prefixes: vec![],
            peered_ids: vec![301, 302],
            peered_prefixes: vec![PeeredPrefixes {
                id: 301,
                prefixes: vec!["10.2.0.0/16".into(), "junk".into()],
            }],
        }];
        let nets = tenant_networks(&want, &BTreeMap::new());
        assert_eq!(nets[0].peers.len(), 2);
        assert_eq!(nets[0].peers[0].prefixes, ["10.2.0.0/16".parse::<ipnet::IpNet>().unwrap()]);
        assert!(nets[0].peers[1].prefixes.is_empty());
    }
}
