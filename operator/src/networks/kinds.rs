// SPDX-License-Identifier: Apache-2.0
//! The tenant network kinds, after IronCore's three layers (ironcore `Network`, ironcore-net
//! `NetworkID`, metalnet `Network`):
//!
//! - `Network` (namespaced, written by `apply`): an optional requested `id`, the network's own
//!   `prefixes`, and `peerings` naming other Networks with the prefixes exposed to each.
//!   Its status (the controller's) carries the claimed ID, the claim's UID, a state and the
//!   state of each peering.
//! - `NetworkID` (cluster-scoped, named by the decimal ID): the claim, `claimRef` naming the
//!   Network by namespace, name and UID.
//! - `NodeNetwork` (cluster-scoped, named by the decimal ID): what nodes realise, the ID, the
//!   peers' IDs and the peers' prefixes this network may reach; nodes report per-peer state.
//!
//! A resource UID is the etcd `create_revision` of the Network's key: etcd assigns it, it
//! never repeats for a re-created Network of the same name, and nobody can write it.

use std::collections::BTreeMap;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use crate::names::valid_name;
use crate::store::Resource;

pub const NETWORKS: &str = "Networks.keelson.dev";
pub const NETWORK_IDS: &str = "NetworkIDs.keelson.dev";
pub const NODE_NETWORKS: &str = "NodeNetworks.keelson.dev";
/// The store namespace of cluster-scoped kinds: not a valid user namespace (`_` is refused by
/// [`valid_name`]), so it never meets a user's.
pub const CLUSTER: &str = "_cluster";
/// The VNI space (24 bits); 0 is not a network.
pub const MAX_ID: u32 = (1 << 24) - 1;
/// Bounds on lists in a spec (a resource stays far below the store's 1 MiB).
pub const MAX_PREFIXES: usize = 64;
pub const MAX_PEERINGS: usize = 64;
/// Per-node entries kept in a NodeNetwork's status.
pub const MAX_NODES: usize = 1024;

/// A Network's or a peering's state (IronCore's three).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum NetState {
    #[default]
    Pending,
    Ready,
    Error,
}

impl NetState {
    pub fn name(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Ready => "Ready",
            Self::Error => "Error",
        }
    }
}

/// A Network, by namespace and name (the namespace defaults to the referrer's).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetworkRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PeeringSpec {
    pub name: String,
    pub network_ref: NetworkRef,
    /// This network's prefixes the peer may reach (each inside one of `spec.prefixes`);
    /// empty: all of `spec.prefixes`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prefixes: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetworkSpec {
    /// A requested ID; without one the controller picks a free one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u32>,
    /// The network's own address ranges (CIDR).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prefixes: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peerings: Vec<PeeringSpec>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PeeringStatus {
    pub name: String,
    pub state: NetState,
    /// The peer's prefixes this network reaches (only when Ready).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prefixes: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkStatus {
    #[serde(default)]
    pub state: NetState,
    /// Why (an Error, or what a Pending waits for).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The claimed ID (its NetworkID names this Network with [`Self::uid`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u32>,
    /// The UID the claim was made with.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peerings: Vec<PeeringStatus>,
}

/// Who claims an ID.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetworkIdSpec {
    pub claim_ref: ClaimRef,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PeeredPrefixes {
    pub id: u32,
    pub prefixes: Vec<String>,
}

/// What a node realises for one network.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeNetworkSpec {
    pub id: u32,
    /// The Network this realises.
    pub network_ref: ClaimRef,
    /// The network's own prefixes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prefixes: Vec<String>,
    /// Active peerings only (both sides declared), sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peered_ids: Vec<u32>,
    /// The peers' prefixes this network may reach, one entry per peered ID.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peered_prefixes: Vec<PeeredPrefixes>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PeerState {
    pub id: u32,
    pub state: NetState,
}

/// What one node reports for a NodeNetwork.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeReport {
    pub state: NetState,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peerings: Vec<PeerState>,
    /// The node's VTEP address: the other nodes carrying the network forward to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vtep: Option<std::net::IpAddr>,
    /// The node's workload prefixes in the network (connected in its VRF, inside the
    /// network's own): the other nodes route them to it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prefixes: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeNetworkStatus {
    /// By node name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub nodes: BTreeMap<String, NodeReport>,
}

/// How these kinds are kept: as the Talos kinds ([`crate::kinds::Body`]), annotations and
/// labels, spec and status, with a status type of their own.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Body<S, T> {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    pub spec: S,
    #[serde(default)]
    pub status: T,
}

pub type Stored<S, T> = Resource<Body<S, T>>;
pub type Network = Stored<NetworkSpec, NetworkStatus>;
pub type NetworkId = Stored<NetworkIdSpec, serde_json::Value>;
pub type NodeNetwork = Stored<NodeNetworkSpec, NodeNetworkStatus>;

/// A network's UID: its key's etcd create revision.
pub fn uid(n: &Network) -> String {
    n.metadata.create_revision.to_string()
}

/// A NetworkID's name.
pub fn encode_id(id: u32) -> String {
    id.to_string()
}

/// A NetworkID's name back to the ID: decimal, no sign, no leading zero, 1..=2^24-1.
pub fn parse_id(s: &str) -> Option<u32> {
    if s.is_empty() || s.len() > 8 || s.starts_with('0') || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok().filter(|v| (1..=MAX_ID).contains(v))
}

/// A CIDR prefix with no host bits set.
pub fn parse_prefix(s: &str) -> Option<IpNet> {
    let n: IpNet = s.parse().ok()?;
    (n.trunc() == n).then_some(n)
}

/// Whether `inner` lies wholly inside `outer` (address and length: the containment metalnet's
/// address-only check does not make).
pub fn within(inner: &IpNet, outer: &IpNet) -> bool {
    outer.contains(inner)
}

type Invalid = (String, String);

fn bad(path: impl Into<String>, msg: impl Into<String>) -> Invalid {
    (path.into(), msg.into())
}

fn check_prefixes(path: &str, list: &[String]) -> Result<Vec<IpNet>, Invalid> {
    if list.len() > MAX_PREFIXES {
        return Err(bad(path, format!("at most {MAX_PREFIXES} prefixes")));
    }
    let mut out: Vec<IpNet> = Vec::new();
    for (i, p) in list.iter().enumerate() {
        let Some(n) = parse_prefix(p) else {
            return Err(bad(
                format!("{path}[{i}]"),
                "a CIDR prefix without host bits, like 10.1.0.0/16 or fd00:1::/64",
            ));
        };
        if out.contains(&n) {
            return Err(bad(format!("{path}[{i}]"), "listed twice"));
        }
        // Overlapping prefixes would make the routes (and the exposed sets) ambiguous.
        if let Some(j) = out.iter().position(|o| within(&n, o) || within(o, &n)) {
            return Err(bad(format!("{path}[{i}]"), format!("overlaps {path}[{j}]")));
        }
        out.push(n);
    }
    Ok(out)
}

/// Validate a Network's spec: `Err((field path, why))`.
pub fn check_network(s: &NetworkSpec) -> Result<(), Invalid> {
    if let Some(id) = s.id {
        if !(1..=MAX_ID).contains(&id) {
            return Err(bad("spec.id", format!("1 to {MAX_ID} (a 24-bit VNI)")));
        }
    }
    let own = check_prefixes("spec.prefixes", &s.prefixes)?;
    if s.peerings.len() > MAX_PEERINGS {
        return Err(bad("spec.peerings", format!("at most {MAX_PEERINGS} peerings")));
    }
    let mut names: Vec<&str> = Vec::new();
    let mut targets: Vec<(Option<&str>, &str)> = Vec::new();
    for (i, p) in s.peerings.iter().enumerate() {
        let at = format!("spec.peerings[{i}]");
        if !valid_name(&p.name) {
            return Err(bad(format!("{at}.name"), "a name like to-backend"));
        }
        if names.contains(&p.name.as_str()) {
            return Err(bad(format!("{at}.name"), "two peerings with one name"));
        }
        names.push(&p.name);
        if !valid_name(&p.network_ref.name) {
            return Err(bad(format!("{at}.networkRef.name"), "a Network's name"));
        }
        if p.network_ref.namespace.as_deref().is_some_and(|n| !valid_name(n)) {
            return Err(bad(format!("{at}.networkRef.namespace"), "a namespace like default"));
        }
        let target = (p.network_ref.namespace.as_deref(), p.network_ref.name.as_str());
        if targets.contains(&target) {
            return Err(bad(format!("{at}.networkRef"), "another peering names this Network"));
        }
        targets.push(target);
        let mine = check_prefixes(&format!("{at}.prefixes"), &p.prefixes)?;
        for (j, m) in mine.iter().enumerate() {
            if !own.iter().any(|o| within(m, o)) {
                return Err(bad(
                    format!("{at}.prefixes[{j}]"),
                    "not inside any of spec.prefixes (a peering exposes this network's own addresses)",
                ));
            }
        }
    }
    Ok(())
}

/// Validate a Network with its name: [`check_network`], and no peering naming the Network
/// itself (`namespace` is the document's, `None` when it names none).
pub fn check_named_network(
    namespace: Option<&str>,
    name: &str,
    s: &NetworkSpec,
) -> Result<(), Invalid> {
    check_network(s)?;
    for (i, p) in s.peerings.iter().enumerate() {
        let same_ns = match (p.network_ref.namespace.as_deref(), namespace) {
            (None, _) => true,
            (Some(r), Some(n)) => r == n,
            (Some(_), None) => false,
        };
        if same_ns && p.network_ref.name == name {
            return Err(bad(
                format!("spec.peerings[{i}].networkRef"),
                "names this Network itself (a network reaches its own prefixes already)",
            ));
        }
    }
    Ok(())
}

/// The prefixes a Network exposes over one of its peerings: the peering's (those inside the
/// network's own; the rest are dropped), or all of its own when the peering lists none.
pub fn exposed(spec: &NetworkSpec, peering: &PeeringSpec) -> Vec<String> {
    let own: Vec<IpNet> = spec.prefixes.iter().filter_map(|p| parse_prefix(p)).collect();
    if peering.prefixes.is_empty() {
        return own.iter().map(ToString::to_string).collect();
    }
    peering
        .prefixes
        .iter()
        .filter_map(|p| parse_prefix(p))
        .filter(|p| own.iter().any(|o| within(p, o)))
        .map(|p| p.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peering(name: &str, target: &str, prefixes: &[&str]) -> PeeringSpec {
        PeeringSpec {
            name: name.into(),
            network_ref: NetworkRef { namespace: None, name: target.into() },
            prefixes: prefixes.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn ids_are_decimal_names_in_the_vni_space() {
        assert_eq!(parse_id("200"), Some(200));
        assert_eq!(parse_id(&encode_id(MAX_ID)), Some(MAX_ID));
        for bad in ["", "0", "0200", "-1", "+5", "16777216", "1e3", "99999999999"] {
            assert_eq!(parse_id(bad), None, "{bad}");
        }
    }

    #[test]
    fn specs_are_checked_with_field_paths() {
        let ok = NetworkSpec {
            id: Some(300),
            prefixes: vec!["10.1.0.0/16".into(), "fd00:1::/64".into()],
            peerings: vec![peering("to-b", "b", &["10.1.2.0/24"])],
        };
        assert_eq!(check_network(&ok), Ok(()));
        let cases: Vec<(NetworkSpec, &str)> = vec![
            (NetworkSpec { id: Some(0), ..ok.clone() }, "spec.id"),
            (NetworkSpec { id: Some(MAX_ID + 1), ..ok.clone() }, "spec.id"),
            (
                NetworkSpec { prefixes: vec!["10.1.0.1/16".into()], ..ok.clone() },
                "spec.prefixes[0]",
            ),
            (
                NetworkSpec {
                    prefixes: vec!["10.1.0.0/16".into(), "10.1.0.0/16".into()],
                    ..ok.clone()
                },
                "spec.prefixes[1]",
            ),
            (
                NetworkSpec {
                    peerings: vec![peering("to-b", "b", &["10.2.0.0/24"])],
                    ..ok.clone()
                },
                "spec.peerings[0].prefixes[0]",
            ),
            (
                NetworkSpec { peerings: vec![peering("to-b", "b", &["10.0.0.0/8"])], ..ok.clone() },
                "spec.peerings[0].prefixes[0]",
            ),
            (
                NetworkSpec {
                    peerings: vec![peering("x", "b", &[]), peering("x", "c", &[])],
                    ..ok.clone()
                },
                "spec.peerings[1].name",
            ),
            (
                NetworkSpec {
                    peerings: vec![peering("x", "b", &[]), peering("y", "b", &[])],
                    ..ok.clone()
                },
                "spec.peerings[1].networkRef",
            ),
            (
                NetworkSpec { peerings: vec![peering("x", "B_", &[])], ..ok.clone() },
                "spec.peerings[0].networkRef.name",
            ),
            (
                NetworkSpec {
                    prefixes: vec!["10.1.0.0/16".into(), "10.1.2.0/24".into()],
                    ..ok.clone()
                },
                "spec.prefixes[1]",
            ),
            (
                NetworkSpec {
                    prefixes: vec!["10.1.2.0/24".into(), "10.0.0.0/8".into()],
                    peerings: vec![],
                    ..ok.clone()
                },
                "spec.prefixes[1]",
            ),
            (
                NetworkSpec {
                    peerings: vec![peering("to-b", "b", &["10.1.0.0/24", "10.1.0.128/25"])],
                    ..ok.clone()
                },
                "spec.peerings[0].prefixes[1]",
            ),
            (
                NetworkSpec { prefixes: vec!["10.1.0.0/33".into()], ..ok.clone() },
                "spec.prefixes[0]",
            ),
            (NetworkSpec { prefixes: vec!["10.1.0.0".into()], ..ok.clone() }, "spec.prefixes[0]"),
        ];
        for (spec, path) in cases {
            assert_eq!(check_network(&spec).map_err(|e| e.0), Err(path.to_owned()), "{spec:?}");
        }
    }

    #[test]
    fn a_peering_to_itself_is_refused() {
        let spec = |ns: Option<&str>| NetworkSpec {
            prefixes: vec!["10.1.0.0/16".into()],
            peerings: vec![
                peering("to-b", "b", &[]),
                PeeringSpec {
                    name: "me".into(),
                    network_ref: NetworkRef { namespace: ns.map(Into::into), name: "a".into() },
                    prefixes: vec![],
                },
            ],
            ..Default::default()
        };
        let path = Err("spec.peerings[1].networkRef".to_owned());
        assert_eq!(check_named_network(None, "a", &spec(None)).map_err(|e| e.0), path);
        assert_eq!(check_named_network(Some("t"), "a", &spec(Some("t"))).map_err(|e| e.0), path);
        // The same name in another namespace is another Network.
        assert_eq!(check_named_network(Some("t"), "a", &spec(Some("u"))), Ok(()));
        assert_eq!(check_named_network(None, "c", &spec(None)), Ok(()));
    }

    #[test]
    fn network_documents_parse_with_line_and_path() {
        let doc = "apiVersion: keelson.dev/v1alpha1\nkind: Network\nmetadata:\n  name: a\nspec:\n  prefixes:\n    - 10.1.0.0/16\n  peerings:\n    - name: to-b\n      networkRef:\n        name: b\n      prefixes:\n        - 10.1.2.0/24\n";
        let objs = crate::kinds::parse(doc).unwrap();
        assert_eq!(objs[0].kind(), crate::kinds::Kind::Network);
        let e = crate::kinds::parse(&doc.replace("10.1.2.0/24", "10.7.2.0/24")).unwrap_err();
        assert_eq!((e.path.as_str(), e.line), ("spec.peerings[0].prefixes[0]", 13), "{e}");
        let e =
            crate::kinds::parse(&doc.replace("        name: b", "        name: b\n        uid: x"))
                .unwrap_err();
        assert!(e.path.starts_with("spec.peerings"), "{e}");
        let e = crate::kinds::parse(&doc.replace("kind: Network", "kind: NetworkID")).unwrap_err();
        assert!(e.message.contains("the operator's"), "{e}");
    }

    #[test]
    fn containment_checks_the_length_too() {
        let p = |s: &str| parse_prefix(s).unwrap();
        assert!(within(&p("10.1.2.0/24"), &p("10.1.0.0/16")));
        assert!(within(&p("10.1.0.0/16"), &p("10.1.0.0/16")));
        // The address is inside, the prefix is not: metalnet's check would take it.
        assert!(!within(&p("10.0.0.0/8"), &p("10.0.0.0/16")));
        assert!(!within(&p("fd00::/64"), &p("10.0.0.0/8")));
    }

    #[test]
    fn exposed_prefixes_default_to_all_and_are_filtered() {
        let spec = NetworkSpec {
            prefixes: vec!["10.1.0.0/16".into()],
            peerings: vec![],
            ..Default::default()
        };
        assert_eq!(exposed(&spec, &peering("p", "b", &[])), ["10.1.0.0/16"]);
        // A stored spec from before a prefix was narrowed: what is outside is dropped.
        assert_eq!(
            exposed(&spec, &peering("p", "b", &["10.1.3.0/24", "10.9.0.0/24"])),
            ["10.1.3.0/24"]
        );
    }

    /// A small deterministic generator (no dependency): random prefix sets, and the exposed
    /// set is always inside the network's own prefixes.
    #[test]
    fn exposed_prefixes_never_leave_the_networks_own() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut rand_prefix = |max_len: u64| {
            let len = (next() % (max_len + 1)) as u8;
            let addr = std::net::Ipv4Addr::from((next() & 0xffff_ffff) as u32);
            IpNet::V4(ipnet::Ipv4Net::new(addr, len).unwrap().trunc())
        };
        for _ in 0..500 {
            let own: Vec<String> = (0..3).map(|_| rand_prefix(12).to_string()).collect();
            let asked: Vec<String> = (0..6).map(|_| rand_prefix(32).to_string()).collect();
            let spec = NetworkSpec { prefixes: own.clone(), ..Default::default() };
            let p = PeeringSpec { prefixes: asked.clone(), ..peering("p", "b", &[]) };
            for e in exposed(&spec, &p) {
                let e = parse_prefix(&e).unwrap();
                assert!(own.iter().any(|o| within(&e, &parse_prefix(o).unwrap())), "{e} {own:?}");
                assert!(asked.contains(&e.to_string()));
            }
        }
    }
}
