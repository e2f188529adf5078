// SPDX-License-Identifier: Apache-2.0
//! A node's side of tenant networks: read every NodeNetwork, hand them to the node's
//! dataplane (the kernel's VRF and VXLAN devices; `net::tenant` plans them), and report per
//! network and per peer what was realised into the NodeNetwork's status under the node's name.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnet::IpNet;
use net::tenant::{Remote, MAX_REPORTED};

use crate::store::{Store, StoreError};

use super::kinds::{
    Body, NetState, NodeNetworkSpec, NodeNetworkStatus, NodeReport, PeerState, CLUSTER, MAX_NODES,
    NODE_NETWORKS,
};

/// What a dataplane did with one network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The network is in place, with these peers (the rest failed, with why), and this
    /// node's workload prefixes in it.
    Realised {
        prefixes: Vec<IpNet>,
        peers: Vec<u32>,
        failed: Vec<(u32, String)>,
    },
    Failed(String),
}

/// The node's dataplane: bring it to exactly `want` (networks not listed are removed), each
/// network forwarding towards `remotes[id]`, the other nodes carrying it (their VTEPs and
/// workload prefixes).
pub trait Dataplane {
    fn apply(
        &mut self,
        want: &[NodeNetworkSpec],
        remotes: &BTreeMap<u32, Vec<Remote>>,
    ) -> BTreeMap<u32, Outcome>;

    /// This node's VTEP address, reported so that the other nodes forward to it.
    fn vtep(&self) -> Option<IpAddr> {
        None
    }
}

type NodeBody = Body<NodeNetworkSpec, NodeNetworkStatus>;

/// The report for one network.
pub fn report(spec: &NodeNetworkSpec, outcome: Option<&Outcome>) -> NodeReport {
    match outcome {
        None => NodeReport {
            state: NetState::Pending,
            message: "not applied yet".into(),
            peerings: vec![],
            vtep: None,
            prefixes: vec![],
        },
        Some(Outcome::Failed(why)) => NodeReport {
            state: NetState::Error,
            message: base::names::escape(why, 300),
            peerings: spec
                .peered_ids
                .iter()
                .map(|&id| PeerState { id, state: NetState::Error })
                .collect(),
            vtep: None,
            prefixes: vec![],
        },
        Some(Outcome::Realised { prefixes, peers, failed }) => {
            let peerings = spec
                .peered_ids
                .iter()
                .map(|&id| {
                    let state = if failed.iter().any(|(f, _)| *f == id) {
                        NetState::Error
                    } else if peers.contains(&id) {
                        NetState::Ready
                    } else {
                        NetState::Pending
                    };
                    PeerState { id, state }
                })
                .collect();
            let message = failed
                .iter()
                .map(|(id, why)| format!("peer {id}: {why}"))
                .collect::<Vec<_>>()
                .join("; ");
            NodeReport {
                state: NetState::Ready,
                message: base::names::escape(&message, 300),
                peerings,
                vtep: None,
                prefixes: prefixes.iter().map(IpNet::to_string).collect(),
            }
        }
    }
}

/// What one round did with one network: the spec, this node's report, and why each failed
/// peer failed (for the node's status file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Realised {
    pub spec: NodeNetworkSpec,
    pub report: NodeReport,
    pub failed: Vec<(u32, String)>,
}

/// One round: realise every NodeNetwork and write this node's reports (only where they
/// changed). Returns how many networks this node carries.
pub fn sync(store: &mut Store, node: &str, dp: &mut dyn Dataplane) -> Result<usize, StoreError> {
    round(store, node, dp).map(|r| r.len())
}

/// [`sync`], returning what was realised per network.
pub fn round(
    store: &mut Store,
    node: &str,
    dp: &mut dyn Dataplane,
) -> Result<Vec<Realised>, StoreError> {
    let (all, _) = store.list::<NodeBody>(CLUSTER, NODE_NETWORKS)?;
    let want: Vec<NodeNetworkSpec> = all.iter().map(|r| r.spec.spec.clone()).collect();
    // The other nodes that realised a network, by the VTEP and prefixes they reported (by
    // node name: the first to report a prefix gets it; the planner takes only prefixes
    // inside the network's own).
    let remotes: BTreeMap<u32, Vec<Remote>> = all
        .iter()
        .map(|r| {
            let s = &r.spec.status;
            let nodes = s
                .nodes
                .iter()
                .filter(|(n, rep)| n.as_str() != node && rep.state == NetState::Ready)
                .filter_map(|(_, rep)| {
                    let prefixes = rep
                        .prefixes
                        .iter()
                        .take(MAX_REPORTED)
                        .filter_map(|p| super::kinds::parse_prefix(p))
                        .collect();
                    Some(Remote { vtep: rep.vtep?, prefixes })
                })
                .filter(|r| Some(r.vtep) != dp.vtep())
                .collect();
            (r.spec.spec.id, nodes)
        })
        .collect();
    let outcomes = dp.apply(&want, &remotes);
    let mut realised = Vec::with_capacity(all.len());
    for r in &all {
        let spec = &r.spec.spec;
        let mut rep = report(spec, outcomes.get(&spec.id));
        if rep.state == NetState::Ready {
            rep.vtep = dp.vtep();
        }
        let failed = match outcomes.get(&spec.id) {
            Some(Outcome::Realised { failed, .. }) => failed.clone(),
            _ => vec![],
        };
        realised.push(Realised { spec: spec.clone(), report: rep.clone(), failed });
        if r.spec.status.nodes.get(node) == Some(&rep) {
            continue;
        }
        let written = store.modify::<NodeBody>(CLUSTER, NODE_NETWORKS, &r.metadata.id, |x| {
            // Only for the spec this report is about (a new one is realised next round).
            if x.spec.spec == *spec
                && (x.spec.status.nodes.len() < MAX_NODES || x.spec.status.nodes.contains_key(node))
            {
                x.spec.status.nodes.insert(node.to_owned(), rep.clone());
            }
        });
        match written {
            Ok(_) | Err(StoreError::NotFound(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(realised)
}
