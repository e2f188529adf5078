// SPDX-License-Identifier: Apache-2.0
//! Joining an existing etcd cluster, the parts without I/O. Talos finds the members through
//! the Kubernetes endpoints of the API server; keelson runs no Kubernetes, so it asks the
//! host of `cluster.controlPlane.endpoint` (usually the shared VIP or a name of the control
//! planes) and the addresses of the control planes that discovery lists. The node then adds
//! itself as a learner, starts etcd with `--initial-cluster-state=existing` and the member
//! list the add returned, and promotes itself once etcd says the learner caught up.

use std::net::IpAddr;

use etcd::wire::Member;

use super::args::url;
use super::CLIENT_PORT;

/// Where to look for members, in order: the endpoint's host, then the control planes that
/// discovery knows, without this node's own addresses and without repeats.
pub fn endpoints(
    endpoint_host: Option<&str>,
    control_planes: &[IpAddr],
    own: &[IpAddr],
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if let Some(host) = endpoint_host {
        let u = match host.parse::<IpAddr>() {
            Ok(ip) if own.contains(&ip) => None,
            Ok(ip) => Some(url(ip, CLIENT_PORT)),
            Err(_) => Some(format!("https://{host}:{CLIENT_PORT}")),
        };
        out.extend(u);
    }
    for ip in control_planes {
        let u = url(*ip, CLIENT_PORT);
        if !own.contains(ip) && !ip.is_loopback() && !out.contains(&u) {
            out.push(u);
        }
    }
    out
}

/// The member that is this node: by name, or (not started yet, so unnamed) by peer URL.
pub fn find_self<'a>(members: &'a [Member], name: &str, peer_url: &str) -> Option<&'a Member> {
    members.iter().find(|m| {
        (!m.name.is_empty() && m.name == name) || m.peer_urls.iter().any(|u| u == peer_url)
    })
}

/// `--initial-cluster` after the add: every member's every peer URL, the new member under
/// this node's name (it has none yet). etcd compares this list with the cluster's, so a
/// member that has not started (no name yet) is listed too, with an empty name.
pub fn initial_cluster(members: &[Member], new_id: i64, name: &str) -> String {
    let mut parts = Vec::new();
    for m in members {
        let n = if m.id == new_id { name } else { m.name.as_str() };
        for u in &m.peer_urls {
            parts.push(format!("{n}={u}"));
        }
    }
    parts.join(",")
}

/// The other members' client URLs (where a learner's promotion is asked: a learner itself
/// serves almost no requests).
pub fn others(members: &[Member], me: i64) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for m in members.iter().filter(|m| m.id != me) {
        for u in &m.client_urls {
            if !out.contains(u) {
                out.push(u.clone());
            }
        }
    }
    out
}

/// etcd's answer to a promotion that came too early ("can only promote a learner member
/// which is in sync with leader"): retried, not an error worth a warning.
pub fn not_ready(message: &str) -> bool {
    message.contains("in sync with leader") || message.contains("not ready")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap_or_else(|e| unreachable!("{e}"))
    }

    fn member(id: i64, name: &str, peer: &str, client: &str, learner: bool) -> Member {
        Member {
            id,
            name: name.into(),
            peer_urls: vec![peer.into()],
            client_urls: if client.is_empty() { vec![] } else { vec![client.into()] },
            is_learner: learner,
        }
    }

    #[test]
    fn endpoints_come_from_the_endpoint_host_then_discovery_without_our_own() {
        let own = [ip("10.0.0.2")];
        let cps = [ip("10.0.0.1"), ip("10.0.0.2"), ip("fd00::3"), ip("127.0.0.1")];
        assert_eq!(
            endpoints(Some("10.0.0.100"), &cps, &own),
            ["https://10.0.0.100:2379", "https://10.0.0.1:2379", "https://[fd00::3]:2379"]
        );
        assert_eq!(endpoints(Some("cp.example"), &[], &own), ["https://cp.example:2379"]);
        // Our own address as the endpoint (this node holds the VIP, or is the endpoint).
        assert!(endpoints(Some("10.0.0.2"), &[], &own).is_empty());
        assert_eq!(endpoints(Some("10.0.0.1"), &[ip("10.0.0.1")], &own), ["https://10.0.0.1:2379"]);
    }

    #[test]
    fn the_new_member_gets_our_name_and_unstarted_ones_keep_theirs_empty() {
        let members = [
            member(1, "cp-1", "https://10.0.0.1:2380", "https://10.0.0.1:2379", false),
            member(7, "", "https://10.0.0.2:2380", "", true),
            member(9, "", "https://[fd00::3]:2380", "", true),
        ];
        assert_eq!(
            initial_cluster(&members, 7, "cp-2"),
            "cp-1=https://10.0.0.1:2380,cp-2=https://10.0.0.2:2380,=https://[fd00::3]:2380"
        );
        assert_eq!(others(&members, 7), ["https://10.0.0.1:2379"]);
    }

    #[test]
    fn this_node_is_found_by_name_or_by_its_peer_url() {
        let members = [
            member(1, "cp-1", "https://10.0.0.1:2380", "", false),
            member(7, "", "https://10.0.0.2:2380", "", true),
        ];
        assert_eq!(find_self(&members, "cp-2", "https://10.0.0.2:2380").map(|m| m.id), Some(7));
        assert_eq!(find_self(&members, "cp-1", "https://10.0.0.9:2380").map(|m| m.id), Some(1));
        assert!(find_self(&members, "cp-3", "https://10.0.0.3:2380").is_none());
        // An unnamed member does not match an empty name.
        assert!(find_self(&members[1..], "", "https://10.0.0.3:2380").is_none());
    }

    #[test]
    fn an_early_promotion_is_recognised() {
        assert!(not_ready(
            "etcdserver: can only promote a learner member which is in sync with leader"
        ));
        assert!(!not_ready("etcdserver: member not found"));
    }
}
