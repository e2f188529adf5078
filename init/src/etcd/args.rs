// SPDX-License-Identifier: Apache-2.0
//! etcd's command line on a keelson control plane: mutual TLS on both ports with the
//! certificates keelson issued from the etcd CA, the advertised address chosen from the
//! node's addresses, and the user's `cluster.etcd.extraArgs` last (so they win, as in Talos).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;

use super::{CLIENT_PORT, METRICS_PORT, PEER_PORT};

/// How this member starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    /// `Bootstrap` was called: a new cluster of this member alone.
    New,
    /// The data directory already holds a member: etcd reads the cluster from it.
    Existing,
    /// This node was just added (as a learner) to a running cluster: its members, as
    /// `--initial-cluster` wants them.
    Join(String),
}

/// What the command line is made of.
#[derive(Debug, Clone)]
pub struct Plan<'a> {
    /// The member name (the hostname, as Talos names members).
    pub name: &'a str,
    /// The address peers and clients are told to use.
    pub advertised: IpAddr,
    /// Addresses to listen on for peers; empty: all.
    pub listen: &'a [IpAddr],
    /// The data directory.
    pub data_dir: &'a Path,
    /// Where `ca.crt`, `peer.crt`/`peer.key` and `server.crt`/`server.key` are.
    pub pki_dir: &'a Path,
    pub start: &'a Start,
    /// `cluster.etcd.extraArgs`.
    pub extra_args: &'a BTreeMap<String, String>,
}

/// `https://<ip>:<port>` (brackets around IPv6).
pub fn url(ip: IpAddr, port: u16) -> String {
    match ip {
        IpAddr::V4(v4) => format!("https://{v4}:{port}"),
        IpAddr::V6(v6) => format!("https://[{v6}]:{port}"),
    }
}

/// etcd's `--heartbeat-interval` (ms).
pub const HEARTBEAT_MS: u32 = 50;
/// etcd's `--election-timeout` (ms): ten heartbeats, as etcd's defaults.
pub const ELECTION_TIMEOUT_MS: u32 = 500;

/// Flags keelson sets that `extraArgs` must not replace (they carry its TLS and identity).
pub const RESERVED: [&str; 9] = [
    "name",
    "data-dir",
    "cert-file",
    "key-file",
    "trusted-ca-file",
    "peer-cert-file",
    "peer-key-file",
    "peer-trusted-ca-file",
    "initial-cluster-state",
];

/// The etcd command, `etcd` (found on `PATH`) first.
pub fn command(plan: &Plan<'_>) -> Vec<String> {
    let pki = |f: &str| plan.pki_dir.join(f).display().to_string();
    let listen_peer = if plan.listen.is_empty() {
        "https://[::]:2380".to_owned()
    } else {
        plan.listen.iter().map(|ip| url(*ip, PEER_PORT)).collect::<Vec<_>>().join(",")
    };
    let mut flags: BTreeMap<String, String> = BTreeMap::new();
    let mut set = |k: &str, v: String| {
        flags.insert(k.to_owned(), v);
    };
    set("name", plan.name.to_owned());
    set("data-dir", plan.data_dir.display().to_string());
    // Clients on every address (the node's own tools use loopback), peers as configured.
    set("listen-client-urls", format!("https://[::]:{CLIENT_PORT}"));
    set("advertise-client-urls", url(plan.advertised, CLIENT_PORT));
    set("listen-peer-urls", listen_peer);
    set("initial-advertise-peer-urls", url(plan.advertised, PEER_PORT));
    set("listen-metrics-urls", format!("http://127.0.0.1:{METRICS_PORT}"));
    set("cert-file", pki("server.crt"));
    set("key-file", pki("server.key"));
    set("trusted-ca-file", pki("ca.crt"));
    set("client-cert-auth", "true".into());
    set("peer-cert-file", pki("peer.crt"));
    set("peer-key-file", pki("peer.key"));
    set("peer-trusted-ca-file", pki("ca.crt"));
    set("peer-client-cert-auth", "true".into());
    // Raft timings for a fast VIP failover (docs/control-plane.md): a dead leader is replaced
    // within 0.5 to 1 s, and etcd's smallest lease becomes 1 s (3/2 election timeout, rounded
    // up). etcd's defaults are 100 and 1000. `extraArgs` may set them back.
    set("heartbeat-interval", HEARTBEAT_MS.to_string());
    set("election-timeout", ELECTION_TIMEOUT_MS.to_string());
    // A member that comes back from a partition with a raised term asks first (raft's
    // pre-vote) instead of forcing an election that deposes a working leader; etcd 3.5
    // defaults to it, 3.4 (the oldest etcd keelson runs) does not.
    set("pre-vote", "true".into());
    // Talos's fixed settings that every supported etcd knows.
    set("experimental-initial-corrupt-check", "true".into());
    set("experimental-watch-progress-notify-interval", "5s".into());
    match plan.start {
        Start::New => {
            set("initial-cluster-state", "new".into());
            set("initial-cluster", format!("{}={}", plan.name, url(plan.advertised, PEER_PORT)));
        }
        Start::Existing => {
            set("initial-cluster-state", "existing".into());
        }
        Start::Join(members) => {
            set("initial-cluster-state", "existing".into());
            set("initial-cluster", members.clone());
        }
    }
    for (k, v) in plan.extra_args {
        if RESERVED.contains(&k.as_str()) {
            log::warn!(target: "etcd", "cluster.etcd.extraArgs.{k}: set by keelson; ignored");
            continue;
        }
        flags.insert(k.clone(), v.clone());
    }
    let mut cmd = vec!["etcd".to_owned()];
    cmd.extend(flags.into_iter().map(|(k, v)| format!("--{k}={v}")));
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap_or_else(|e| unreachable!("{e}"))
    }

    fn flag<'a>(cmd: &'a [String], name: &str) -> Option<&'a str> {
        let prefix = format!("--{name}=");
        cmd.iter().find_map(|a| a.strip_prefix(prefix.as_str()))
    }

    #[test]
    fn a_bootstrapped_member_starts_a_new_cluster_of_itself_with_mutual_tls() {
        let extra = BTreeMap::from([
            ("election-timeout".to_owned(), "5000".to_owned()),
            ("data-dir".to_owned(), "/tmp/elsewhere".to_owned()),
        ]);
        let plan = Plan {
            name: "cp-1",
            advertised: ip("10.5.0.2"),
            listen: &[],
            data_dir: Path::new("/var/lib/etcd"),
            pki_dir: Path::new("/system/secrets/etcd"),
            start: &Start::New,
            extra_args: &extra,
        };
        let cmd = command(&plan);
        assert_eq!(cmd[0], "etcd");
        assert_eq!(flag(&cmd, "initial-cluster-state"), Some("new"));
        assert_eq!(flag(&cmd, "initial-cluster"), Some("cp-1=https://10.5.0.2:2380"));
        assert_eq!(flag(&cmd, "advertise-client-urls"), Some("https://10.5.0.2:2379"));
        assert_eq!(flag(&cmd, "client-cert-auth"), Some("true"));
        assert_eq!(flag(&cmd, "peer-client-cert-auth"), Some("true"));
        assert_eq!(flag(&cmd, "trusted-ca-file"), Some("/system/secrets/etcd/ca.crt"));
        assert_eq!(flag(&cmd, "listen-metrics-urls"), Some("http://127.0.0.1:2381"));
        assert_eq!(flag(&cmd, "election-timeout"), Some("5000"));
        // keelson's own flags are not the user's to replace.
        assert_eq!(flag(&cmd, "data-dir"), Some("/var/lib/etcd"));
    }

    #[test]
    fn an_existing_member_reads_its_cluster_from_the_data_directory() {
        let none = BTreeMap::new();
        let listen: [IpAddr; 2] = [ip("10.5.0.2"), ip("fd00::2")];
        let plan = Plan {
            name: "cp-1",
            advertised: ip("fd00::2"),
            listen: &listen,
            data_dir: Path::new("/var/lib/etcd"),
            pki_dir: Path::new("/p"),
            start: &Start::Existing,
            extra_args: &none,
        };
        let cmd = command(&plan);
        assert_eq!(flag(&cmd, "initial-cluster-state"), Some("existing"));
        assert_eq!(flag(&cmd, "initial-cluster"), None);
        // keelson's raft timings, which the VIP's 1 s lease relies on.
        assert_eq!(flag(&cmd, "heartbeat-interval"), Some("50"));
        assert_eq!(flag(&cmd, "election-timeout"), Some("500"));
        assert_eq!(flag(&cmd, "pre-vote"), Some("true"));
        assert_eq!(flag(&cmd, "initial-advertise-peer-urls"), Some("https://[fd00::2]:2380"));
        assert_eq!(
            flag(&cmd, "listen-peer-urls"),
            Some("https://10.5.0.2:2380,https://[fd00::2]:2380")
        );
    }

    #[test]
    fn a_joining_member_names_the_cluster_it_joins() {
        let none = BTreeMap::new();
        let start = Start::Join("cp-1=https://10.5.0.1:2380,cp-2=https://10.5.0.2:2380".into());
        let plan = Plan {
            name: "cp-2",
            advertised: ip("10.5.0.2"),
            listen: &[],
            data_dir: Path::new("/var/lib/etcd"),
            pki_dir: Path::new("/p"),
            start: &start,
            extra_args: &none,
        };
        let cmd = command(&plan);
        assert_eq!(flag(&cmd, "initial-cluster-state"), Some("existing"));
        assert_eq!(
            flag(&cmd, "initial-cluster"),
            Some("cp-1=https://10.5.0.1:2380,cp-2=https://10.5.0.2:2380")
        );
    }
}
