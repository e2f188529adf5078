// SPDX-License-Identifier: Apache-2.0
//! The peering handshake, pure: a peering of Network A naming B is active only while B (alive,
//! with an ID) lists a peering naming A back. Active peerings become A's node layer
//! (`peeredIDs`, and per peer the prefixes B exposes over its peering to A); the nodes'
//! reports come back as each peering's state: Pending while one side is missing or no node
//! has realised it, Ready once every reporting node has, Error when one failed.

use std::collections::BTreeMap;

use super::kinds::{
    exposed, ClaimRef, NetState, NetworkSpec, NodeNetworkSpec, NodeNetworkStatus, PeerState,
    PeeredPrefixes, PeeringSpec, PeeringStatus,
};

/// What the handshake needs of one Network.
#[derive(Debug, Clone, Copy)]
pub struct View<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    /// The claimed ID (`None`: none yet).
    pub id: Option<u32>,
    /// Deletion started: it no longer peers.
    pub tearing_down: bool,
    pub spec: &'a NetworkSpec,
}

impl View<'_> {
    /// Whether `p` (one of this network's peerings) names `(ns, name)`.
    fn names(&self, p: &PeeringSpec, ns: &str, name: &str) -> bool {
        p.network_ref.namespace.as_deref().unwrap_or(self.namespace) == ns
            && p.network_ref.name == name
    }
}

/// One peering as the handshake sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Side {
    /// Both sides declared: the peer's ID and the prefixes it exposes to this network.
    Active { id: u32, prefixes: Vec<String> },
    /// Why not (yet).
    Waiting(String),
}

/// Each peering of `me`, by name, in spec order.
pub fn sides<'a>(
    me: &View<'_>,
    find: &mut dyn FnMut(&str, &str) -> Option<View<'a>>,
) -> Vec<(String, Side)> {
    let mut out = Vec::new();
    for p in &me.spec.peerings {
        let ns = p.network_ref.namespace.as_deref().unwrap_or(me.namespace);
        let name = &p.network_ref.name;
        let side = match find(ns, name) {
            _ if me.tearing_down => Side::Waiting("this Network is being deleted".into()),
            None => Side::Waiting(format!("Network {ns}/{name} does not exist")),
            Some(peer) if peer.tearing_down => {
                Side::Waiting(format!("Network {ns}/{name} is being deleted"))
            }
            Some(peer) => match (
                peer.id,
                peer.spec.peerings.iter().find(|b| peer.names(b, me.namespace, me.name)),
            ) {
                (_, None) => Side::Waiting(format!(
                    "Network {ns}/{name} has no peering naming {}/{}",
                    me.namespace, me.name
                )),
                (None, Some(_)) => Side::Waiting(format!("Network {ns}/{name} has no ID yet")),
                (Some(id), Some(_)) if Some(id) == me.id => {
                    Side::Waiting(format!("Network {ns}/{name} is this network"))
                }
                (Some(id), Some(back)) => Side::Active { id, prefixes: exposed(peer.spec, back) },
            },
        };
        out.push((p.name.clone(), side));
    }
    out
}

/// The node layer of a network with ID `id`, from its peerings' sides.
pub fn node_spec(
    id: u32,
    network_ref: ClaimRef,
    spec: &NetworkSpec,
    sides: &[(String, Side)],
) -> NodeNetworkSpec {
    let mut peers: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for (_, s) in sides {
        if let Side::Active { id, prefixes } = s {
            let e = peers.entry(*id).or_default();
            for p in prefixes {
                if !e.contains(p) {
                    e.push(p.clone());
                }
            }
        }
    }
    NodeNetworkSpec {
        id,
        network_ref,
        prefixes: spec.prefixes.clone(),
        peered_ids: peers.keys().copied().collect(),
        peered_prefixes: peers
            .into_iter()
            .filter(|(_, p)| !p.is_empty())
            .map(|(id, prefixes)| PeeredPrefixes { id, prefixes })
            .collect(),
    }
}

/// One peer's state over the nodes' reports: Error if any node failed it, Ready if every
/// reporting node has it Ready (and at least one reports), else Pending.
pub fn peer_state(status: &NodeNetworkStatus, id: u32) -> (NetState, String) {
    let mut states: Vec<(&str, NetState)> = Vec::new();
    for (node, r) in &status.nodes {
        let s = r.peerings.iter().find(|p| p.id == id).map_or(NetState::Pending, |p| p.state);
        states.push((node, s));
    }
    if let Some((node, _)) = states.iter().find(|(_, s)| *s == NetState::Error) {
        let why = status.nodes.get(*node).map_or("", |r| r.message.as_str());
        return (NetState::Error, format!("node {node}: {why}"));
    }
    if states.is_empty() {
        return (NetState::Pending, "no node has realised this network yet".into());
    }
    let pending: Vec<&str> =
        states.iter().filter(|(_, s)| *s != NetState::Ready).map(|(n, _)| *n).collect();
    if pending.is_empty() {
        (NetState::Ready, String::new())
    } else {
        (NetState::Pending, format!("not realised yet on {}", pending.join(", ")))
    }
}

/// The peerings' status: Pending (with why) while waiting for the other side, else what the
/// nodes report; the peer's prefixes shown once Ready.
pub fn statuses(
    sides: &[(String, Side)],
    nodes: Option<&NodeNetworkStatus>,
) -> Vec<(PeeringStatus, String)> {
    sides
        .iter()
        .map(|(name, side)| match side {
            Side::Waiting(why) => (
                PeeringStatus { name: name.clone(), state: NetState::Pending, prefixes: vec![] },
                why.clone(),
            ),
            Side::Active { id, prefixes } => {
                let (state, why) = nodes.map_or_else(
                    || (NetState::Pending, "the node layer is not written yet".to_owned()),
                    |n| peer_state(n, *id),
                );
                let prefixes = if state == NetState::Ready { prefixes.clone() } else { vec![] };
                (PeeringStatus { name: name.clone(), state, prefixes }, why)
            }
        })
        .collect()
}

/// A node's report for one peer: Ready when realised (convenience for agents).
pub fn ready(ids: &[u32]) -> Vec<PeerState> {
    ids.iter().map(|&id| PeerState { id, state: NetState::Ready }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::networks::kinds::{NetworkRef, NodeReport};

    fn spec(prefixes: &[&str], peers: &[(&str, Option<&str>, &str, &[&str])]) -> NetworkSpec {
        NetworkSpec {
            id: None,
            prefixes: prefixes.iter().map(|s| s.to_string()).collect(),
            peerings: peers
                .iter()
                .map(|(name, ns, target, pf)| PeeringSpec {
                    name: name.to_string(),
                    network_ref: NetworkRef {
                        namespace: ns.map(String::from),
                        name: target.to_string(),
                    },
                    prefixes: pf.iter().map(|s| s.to_string()).collect(),
                })
                .collect(),
        }
    }

    #[test]
    fn a_peering_is_active_only_when_both_sides_name_each_other() {
        let a = spec(&["10.1.0.0/16"], &[("to-b", None, "b", &[])]);
        let b_silent = spec(&["10.2.0.0/16"], &[]);
        let b_back = spec(&["10.2.0.0/16"], &[("to-a", Some("default"), "a", &["10.2.5.0/24"])]);
        let va =
            View { namespace: "default", name: "a", id: Some(300), tearing_down: false, spec: &a };
        let run = |b: &NetworkSpec, id: Option<u32>, down: bool| {
            let vb = View { namespace: "default", name: "b", id, tearing_down: down, spec: b };
            sides(&va, &mut |ns, n| (ns == "default" && n == "b").then_some(vb))
        };
        let s = run(&b_silent, Some(301), false);
        assert!(
            matches!(&s[0].1, Side::Waiting(w) if w.contains("no peering naming default/a")),
            "{s:?}"
        );
        let s = run(&b_back, None, false);
        assert!(matches!(&s[0].1, Side::Waiting(w) if w.contains("no ID")), "{s:?}");
        let s = run(&b_back, Some(301), true);
        assert!(matches!(&s[0].1, Side::Waiting(w) if w.contains("being deleted")), "{s:?}");
        let s = run(&b_back, Some(301), false);
        assert_eq!(s[0].1, Side::Active { id: 301, prefixes: vec!["10.2.5.0/24".into()] });
        let missing = sides(&va, &mut |_, _| None);
        assert!(matches!(&missing[0].1, Side::Waiting(w) if w.contains("does not exist")));
        // A peer in another namespace whose reference has no namespace names its own.
        let b_local = spec(&["10.2.0.0/16"], &[("to-a", None, "a", &[])]);
        let vb = View {
            namespace: "other",
            name: "b",
            id: Some(301),
            tearing_down: false,
            spec: &b_local,
        };
        let s = sides(&va, &mut |_, _| Some(vb));
        assert!(matches!(&s[0].1, Side::Waiting(_)), "{s:?}");
        let node = node_spec(300, ClaimRef::default(), &a, &run(&b_back, Some(301), false));
        assert_eq!(node.peered_ids, [301]);
        assert_eq!(
            node.peered_prefixes,
            [PeeredPrefixes { id: 301, prefixes: vec!["10.2.5.0/24".into()] }]
        );
    }

    #[test]
    fn peer_states_come_from_every_reporting_node() {
        let mut st = NodeNetworkStatus::default();
        assert_eq!(peer_state(&st, 5).0, NetState::Pending);
        st.nodes.insert(
            "n1".into(),
            NodeReport {
                state: NetState::Ready,
                message: String::new(),
                peerings: ready(&[5]),
                vtep: None,
                prefixes: vec![],
            },
        );
        assert_eq!(peer_state(&st, 5).0, NetState::Ready);
        st.nodes.insert("n2".into(), NodeReport::default());
        let (s, why) = peer_state(&st, 5);
        assert_eq!((s, why.as_str()), (NetState::Pending, "not realised yet on n2"));
        st.nodes.insert(
            "n2".into(),
            NodeReport {
                state: NetState::Error,
                message: "no vrf".into(),
                peerings: vec![PeerState { id: 5, state: NetState::Error }],
                vtep: None,
                prefixes: vec![],
            },
        );
        let (s, why) = peer_state(&st, 5);
        assert_eq!((s, why.as_str()), (NetState::Error, "node n2: no vrf"));
    }
}
