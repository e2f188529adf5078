// SPDX-License-Identifier: Apache-2.0
//! The node's status file: what a round realised, as the document PID 1 reads into its
//! `TenantNetworkStatus` resources (`keelson get networks`). The shape is the model's
//! (`net::resource::TenantStatusFile`, version 1), so PID 1 needs none of this crate.
//! Counts are capped here as PID 1's reader caps them, so a node with too much to say writes
//! a file that is read, shortened, rather than one that is refused.

use std::collections::BTreeSet;
use std::path::Path;

use net::resource::{
    TenantNetworkStatus, TenantPeerStatus, TenantState, TenantStatusFile, MAX_MESSAGE,
    MAX_NETWORKS, MAX_PEERS, MAX_PREFIXES, STATUS_FILE_LIMIT, STATUS_FILE_VERSION,
};
use net::tenant;

use super::kinds::{parse_prefix, NetState};
use super::node::Realised;

/// Where `tenant-agent` writes unless told otherwise (PID 1 reads it there).
pub const DEFAULT_PATH: &str = "/run/keelson/tenant-networks.json";

fn state(s: NetState) -> TenantState {
    match s {
        NetState::Pending => TenantState::Pending,
        NetState::Ready => TenantState::Ready,
        NetState::Error => TenantState::Error,
    }
}

/// Prefixes as text, checked, each once, at most [`MAX_PREFIXES`].
fn prefixes<'a>(all: impl Iterator<Item = &'a String>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    all.filter_map(|p| parse_prefix(p))
        .filter(|p| seen.insert(*p))
        .take(MAX_PREFIXES)
        .map(|p| p.to_string())
        .collect()
}

/// The document for one round's networks on `node`.
pub fn document(node: &str, realised: &[Realised]) -> TenantStatusFile {
    let networks = realised
        .iter()
        .filter(|r| (1..=tenant::MAX_ID).contains(&r.spec.id))
        .take(MAX_NETWORKS)
        .map(|r| {
            let id = r.spec.id;
            let peers = r
                .report
                .peerings
                .iter()
                .take(MAX_PEERS)
                .filter(|p| p.id != id && (1..=tenant::MAX_ID).contains(&p.id))
                .map(|p| TenantPeerStatus {
                    id: p.id,
                    state: state(p.state),
                    message: r
                        .failed
                        .iter()
                        .find(|(f, _)| *f == p.id)
                        // Raw: the reader escapes what it shows.
                        .map(|(_, why)| why.chars().take(MAX_MESSAGE).collect())
                        .unwrap_or_default(),
                    prefixes: prefixes(
                        r.spec
                            .peered_prefixes
                            .iter()
                            .filter(|pp| pp.id == p.id)
                            .flat_map(|pp| pp.prefixes.iter()),
                    ),
                })
                .collect();
            TenantNetworkStatus {
                id,
                state: state(r.report.state),
                message: r.report.message.chars().take(MAX_MESSAGE).collect(),
                vrf: tenant::vrf_name(id),
                vxlan: tenant::vxlan_name(id),
                vni: id,
                table: tenant::table(id),
                vtep: r.report.vtep,
                prefixes: prefixes(r.report.prefixes.iter()),
                peers,
            }
        })
        .collect();
    TenantStatusFile { version: STATUS_FILE_VERSION, node: node.to_owned(), networks }
}

/// `doc` as JSON no larger than the reader takes ([`STATUS_FILE_LIMIT`]): the last networks
/// are left out until it fits (at the caps, peers' prefixes can add up past the limit). Also
/// returns how many were left out.
pub fn encode(doc: &TenantStatusFile) -> Result<(Vec<u8>, usize), serde_json::Error> {
    let mut doc = doc.clone();
    let mut left_out = 0;
    loop {
        let text = serde_json::to_vec(&doc)?;
        if text.len() as u64 <= STATUS_FILE_LIMIT || doc.networks.pop().is_none() {
            return Ok((text, left_out));
        }
        left_out += 1;
    }
}

/// Replace the file at `path` with `text` (a temporary renamed over it: a reader sees the old
/// document or the new one, never part of one).
pub fn write(path: &Path, text: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    base::atomic_file::write(path, text, 0o644, base::atomic_file::Durability::Nothing)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::networks::kinds::{
        ClaimRef, NodeNetworkSpec, NodeReport, PeerState, PeeredPrefixes,
    };

    #[test]
    fn a_round_as_the_node_reads_it() {
        let r = Realised {
            spec: NodeNetworkSpec {
                id: 300,
                network_ref: ClaimRef::default(),
                prefixes: vec!["10.1.0.0/16".into()],
                peered_ids: vec![301, 302],
                peered_prefixes: vec![PeeredPrefixes {
                    id: 301,
                    prefixes: vec!["10.2.0.0/16".into(), "junk".into(), "10.2.0.0/16".into()],
                }],
            },
            report: NodeReport {
                state: NetState::Ready,
                message: "peer 302: no such table".into(),
                peerings: vec![
                    PeerState { id: 301, state: NetState::Ready },
                    PeerState { id: 302, state: NetState::Error },
                ],
                vtep: Some("192.0.2.1".parse().unwrap()),
                prefixes: vec!["10.1.2.0/24".into()],
            },
            failed: vec![(302, "no such table\u{1b}".into())],
        };
        let doc = document("n1", &[r]);
        let text = serde_json::to_string(&doc).unwrap();
        // What PID 1 reads back is what was written.
        let back = net::resource::parse_status_file(&text).unwrap();
        let n = &back.networks[0];
        assert_eq!((n.vrf.as_str(), n.vxlan.as_str(), n.vni), ("tvrf300", "tvx300", 300));
        assert_eq!(n.table, tenant::table(300));
        assert_eq!(n.prefixes, ["10.1.2.0/24"]);
        assert_eq!(n.peers[0].prefixes, ["10.2.0.0/16"]);
        assert_eq!((n.peers[1].state, n.peers[1].prefixes.len()), (TenantState::Error, 0));
        assert_eq!(n.peers[1].message, "no such table\\u{1b}");
        assert_eq!(back.node, "n1");
    }

    #[test]
    fn counts_are_capped_so_the_node_reads_the_file() {
        let many: Vec<Realised> = (1..=MAX_NETWORKS as u32 + 10)
            .map(|id| Realised {
                spec: NodeNetworkSpec { id, ..Default::default() },
                report: NodeReport {
                    prefixes: (0..100).map(|i| format!("10.{}.{i}.0/24", id % 250)).collect(),
                    ..Default::default()
                },
                failed: vec![],
            })
            .collect();
        let doc = document("n1", &many);
        assert_eq!(doc.networks.len(), MAX_NETWORKS);
        assert!(doc.networks.iter().all(|n| n.prefixes.len() == MAX_PREFIXES));
        // 256 networks of 64 prefixes are more than the reader takes: the last ones go.
        let (text, left_out) = encode(&doc).unwrap();
        assert!(text.len() as u64 <= STATUS_FILE_LIMIT, "{}", text.len());
        assert!(left_out > 0);
        let back = net::resource::parse_status_file(std::str::from_utf8(&text).unwrap()).unwrap();
        assert_eq!(back.networks.len() + left_out, MAX_NETWORKS);
        assert_eq!(back.networks[0].id, 1);
        // A small document is written whole.
        let (_, left_out) = encode(&document("n1", &many[..3])).unwrap();
        assert_eq!(left_out, 0);
    }
}
