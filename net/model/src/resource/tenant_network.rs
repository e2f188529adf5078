// SPDX-License-Identifier: Apache-2.0
//! Tenant networks as this node realised them: [`TenantNetworkStatus`], one per network ID in
//! `network`, its ID the decimal network ID. Talos has no such resource: keelson's own.
//!
//! The node round (`keelson-operator tenant-agent`) is a process of its own; after each round
//! it writes what it realised into a small JSON document, the **status file**
//! ([`TenantStatusFile`], `version: 1`), which PID 1 reads into these resources. The file is
//! written by another process, so PID 1 treats it as hostile: [`parse_status_file`] checks
//! every field and names the first bad one by its path (`networks[1].peers[0].prefixes[2]`).
//! The shape lives here, in the pure model, so that both sides share it without the operator's
//! store being linked into PID 1.

use std::collections::BTreeSet;
use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The status file's only version so far.
pub const STATUS_FILE_VERSION: u64 = 1;
/// The largest status file read (bytes): 256 networks of 64 peers with 64 prefixes each would
/// not fit, but a node carries far fewer; a larger file is refused, not truncated.
pub const STATUS_FILE_LIMIT: u64 = 256 * 1024;
/// At most this many networks in one file.
pub const MAX_NETWORKS: usize = 256;
/// At most this many peers per network (the operator's cap on peerings).
pub const MAX_PEERS: usize = 64;
/// At most this many prefixes per network or peer (the operator's cap).
pub const MAX_PREFIXES: usize = 64;
/// Messages longer than this (in characters) are refused.
pub const MAX_MESSAGE: usize = 1024;
/// The widest network ID (a VXLAN VNI has 24 bits).
pub const MAX_NETWORK_ID: u32 = (1 << 24) - 1;

/// A network's or a peer's state on this node.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize, Default)]
pub enum TenantState {
    /// Not (yet) in place: the message says why.
    #[default]
    Pending,
    /// In place.
    Ready,
    /// Failed: the message says why.
    Error,
}

impl TenantState {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "Pending" => Some(Self::Pending),
            "Ready" => Some(Self::Ready),
            "Error" => Some(Self::Error),
            _ => None,
        }
    }
}

/// One peer of a network, as realised here.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct TenantPeerStatus {
    /// The peer network's ID.
    pub id: u32,
    /// Whether its routes are leaked into this network's table.
    pub state: TenantState,
    /// Why not, when not Ready.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The peer's prefixes this network reaches.
    #[serde(default)]
    pub prefixes: Vec<String>,
}

/// One tenant network as this node realised it.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct TenantNetworkStatus {
    /// The network ID (its VNI).
    pub id: u32,
    /// Whether its devices are in place.
    pub state: TenantState,
    /// Why not, or what failed for a peer.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The VRF device.
    pub vrf: String,
    /// The VXLAN device.
    pub vxlan: String,
    /// The VXLAN VNI.
    pub vni: u32,
    /// The VRF's routing table.
    pub table: u32,
    /// This node's VTEP address, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vtep: Option<IpAddr>,
    /// This node's workload prefixes in the network.
    #[serde(default)]
    pub prefixes: Vec<String>,
    /// The peered networks.
    #[serde(default)]
    pub peers: Vec<TenantPeerStatus>,
}

/// The status file: what the node round realised, written after each round.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct TenantStatusFile {
    /// [`STATUS_FILE_VERSION`].
    pub version: u64,
    /// The node name the round reports under.
    #[serde(default)]
    pub node: String,
    /// Every network the node carries.
    pub networks: Vec<TenantNetworkStatus>,
}

/// The ID of network `id`'s status: the decimal ID.
pub fn tenant_network_id(id: u32) -> String {
    id.to_string()
}

/// Why a status file was refused: the field's path and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StatusFileError {
    /// Not JSON at all.
    #[error("not JSON: {0}")]
    Syntax(String),
    /// A field is missing or wrong.
    #[error("{path}: {why}")]
    Field {
        /// Where (`networks[0].peers[1].id`).
        path: String,
        /// What is wrong (the value is quoted escaped and shortened).
        why: String,
    },
}

fn bad(path: &str, why: impl Into<String>) -> StatusFileError {
    StatusFileError::Field { path: path.to_owned(), why: why.into() }
}

/// A value for a message: escaped and short, so a hostile file cannot flood the log.
fn quote(v: &Value) -> String {
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
        other => other.to_string(),
    };
    format!("\"{}\"", base::names::escape(&text, 40))
}

fn field<'a>(
    obj: &'a Map<String, Value>,
    path: &str,
    name: &str,
) -> Result<&'a Value, StatusFileError> {
    obj.get(name).ok_or_else(|| bad(&join(path, name), "missing"))
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

fn object<'a>(v: &'a Value, path: &str) -> Result<&'a Map<String, Value>, StatusFileError> {
    v.as_object().ok_or_else(|| bad(path, format!("{} is not an object", quote(v))))
}

fn array<'a>(v: &'a Value, path: &str, max: usize) -> Result<&'a [Value], StatusFileError> {
    let a = v.as_array().ok_or_else(|| bad(path, format!("{} is not a list", quote(v))))?;
    if a.len() > max {
        return Err(bad(path, format!("{} entries, at most {max}", a.len())));
    }
    Ok(a)
}

fn optional_array<'a>(
    obj: &'a Map<String, Value>,
    path: &str,
    name: &str,
    max: usize,
) -> Result<&'a [Value], StatusFileError> {
    match obj.get(name) {
        None | Some(Value::Null) => Ok(&[]),
        Some(v) => array(v, &join(path, name), max),
    }
}

fn number(v: &Value, path: &str, min: u64, max: u64) -> Result<u64, StatusFileError> {
    match v.as_u64() {
        Some(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(bad(path, format!("{} is not a whole number from {min} to {max}", quote(v)))),
    }
}

fn network_id(v: &Value, path: &str) -> Result<u32, StatusFileError> {
    let n = number(v, path, 1, u64::from(MAX_NETWORK_ID))?;
    u32::try_from(n).map_err(|_| bad(path, "out of range"))
}

fn state(obj: &Map<String, Value>, path: &str) -> Result<TenantState, StatusFileError> {
    let v = field(obj, path, "state")?;
    v.as_str().and_then(TenantState::parse).ok_or_else(|| {
        bad(&join(path, "state"), format!("{} is not Pending, Ready or Error", quote(v)))
    })
}

fn message(obj: &Map<String, Value>, path: &str) -> Result<String, StatusFileError> {
    let path = join(path, "message");
    match obj.get("message") {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) if s.chars().count() <= MAX_MESSAGE => {
            // Control characters and the like are shown escaped, never passed to a terminal.
            Ok(base::names::escape(s, MAX_MESSAGE))
        }
        Some(Value::String(s)) => {
            Err(bad(&path, format!("{} characters, at most {MAX_MESSAGE}", s.chars().count())))
        }
        Some(v) => Err(bad(&path, format!("{} is not a string", quote(v)))),
    }
}

/// A Linux interface name: 1 to 15 bytes, no `/`, `:`, whitespace or control characters.
fn ifname(obj: &Map<String, Value>, path: &str, name: &str) -> Result<String, StatusFileError> {
    let path = join(path, name);
    let v = field(obj, "", name).map_err(|_| bad(&path, "missing"))?;
    match v.as_str() {
        Some(s)
            if !s.is_empty()
                && s.len() <= 15
                && s != "."
                && s != ".."
                && s.chars().all(|c| c.is_ascii_graphic() && c != '/' && c != ':') =>
        {
            Ok(s.to_owned())
        }
        _ => Err(bad(&path, format!("{} is not an interface name", quote(v)))),
    }
}

/// A list of CIDR prefixes without host bits, none twice.
fn prefixes(obj: &Map<String, Value>, path: &str) -> Result<Vec<String>, StatusFileError> {
    let list = optional_array(obj, path, "prefixes", MAX_PREFIXES)?;
    let mut out = Vec::with_capacity(list.len());
    let mut seen = BTreeSet::new();
    for (i, v) in list.iter().enumerate() {
        let p = format!("{}[{i}]", join(path, "prefixes"));
        let net: IpNet = v
            .as_str()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad(&p, format!("{} is not a CIDR prefix", quote(v))))?;
        if net.trunc() != net {
            return Err(bad(&p, format!("{} has host bits set", quote(v))));
        }
        if !seen.insert(net) {
            return Err(bad(&p, format!("{} is listed twice", quote(v))));
        }
        out.push(net.to_string());
    }
    Ok(out)
}

fn peer(v: &Value, path: &str) -> Result<TenantPeerStatus, StatusFileError> {
    let obj = object(v, path)?;
    Ok(TenantPeerStatus {
        id: network_id(field(obj, path, "id")?, &join(path, "id"))?,
        state: state(obj, path)?,
        message: message(obj, path)?,
        prefixes: prefixes(obj, path)?,
    })
}

fn network(v: &Value, path: &str) -> Result<TenantNetworkStatus, StatusFileError> {
    let obj = object(v, path)?;
    let id = network_id(field(obj, path, "id")?, &join(path, "id"))?;
    let vtep = match obj.get("vtep") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_str().and_then(|s| s.parse::<IpAddr>().ok()).ok_or_else(|| {
            bad(&join(path, "vtep"), format!("{} is not an IP address", quote(v)))
        })?),
    };
    let mut peers = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, p) in optional_array(obj, path, "peers", MAX_PEERS)?.iter().enumerate() {
        let pp = format!("{}[{i}]", join(path, "peers"));
        let peer = peer(p, &pp)?;
        if peer.id == id {
            return Err(bad(&join(&pp, "id"), format!("{id} is the network itself")));
        }
        if !seen.insert(peer.id) {
            return Err(bad(&join(&pp, "id"), format!("{} is listed twice", peer.id)));
        }
        peers.push(peer);
    }
    Ok(TenantNetworkStatus {
        id,
        state: state(obj, path)?,
        message: message(obj, path)?,
        vrf: ifname(obj, path, "vrf")?,
        vxlan: ifname(obj, path, "vxlan")?,
        vni: network_id(field(obj, path, "vni")?, &join(path, "vni"))?,
        table: u32::try_from(number(
            field(obj, path, "table")?,
            &join(path, "table"),
            1,
            u64::from(u32::MAX),
        )?)
        .map_err(|_| bad(&join(path, "table"), "out of range"))?,
        vtep,
        prefixes: prefixes(obj, path)?,
        peers,
    })
}

/// Check a status file: the networks it holds, each checked, or the first bad field by path.
/// Fields this version does not know are ignored (a newer writer may add some).
pub fn parse_status_file(text: &str) -> Result<TenantStatusFile, StatusFileError> {
    // serde_json refuses nesting deeper than 128 levels, and the text is bounded by the reader.
    let v: Value =
        serde_json::from_str(text).map_err(|e| StatusFileError::Syntax(e.to_string()))?;
    let obj = object(&v, "(document)")?;
    let version = field(obj, "", "version")?;
    if version.as_u64() != Some(STATUS_FILE_VERSION) {
        return Err(bad("version", format!("{} is not {STATUS_FILE_VERSION}", quote(version))));
    }
    let node = match obj.get("node") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) if !s.is_empty() && s.len() <= 253 => base::names::escape(s, 253),
        Some(v) => return Err(bad("node", format!("{} is not a node name", quote(v)))),
    };
    let mut networks = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, n) in array(field(obj, "", "networks")?, "networks", MAX_NETWORKS)?.iter().enumerate() {
        let path = format!("networks[{i}]");
        let net = network(n, &path)?;
        if !seen.insert(net.id) {
            return Err(bad(&join(&path, "id"), format!("{} is listed twice", net.id)));
        }
        networks.push(net);
    }
    Ok(TenantStatusFile { version: STATUS_FILE_VERSION, node, networks })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    const GOOD: &str = r#"{"version": 1, "node": "n1", "future": true, "networks": [
        {"id": 300, "state": "Ready", "vrf": "tvrf300", "vxlan": "tvx300", "vni": 300,
         "table": 268435756, "vtep": "192.0.2.1", "prefixes": ["10.1.2.0/24"],
         "peers": [{"id": 301, "state": "Ready", "prefixes": ["10.2.0.0/16", "fd00:2::/48"]},
                   {"id": 302, "state": "Pending", "message": "no VRF tvrf302 on this node"}]},
        {"id": 301, "state": "Error", "message": "tvrf301: \u001b[31mPermission denied",
         "vrf": "tvrf301", "vxlan": "tvx301", "vni": 301, "table": 268435757}]}"#;

    /// `GOOD` with `from` replaced by `to`: the error's text.
    fn refused(from: &str, to: &str) -> String {
        assert!(GOOD.contains(from), "{from}");
        parse_status_file(&GOOD.replacen(from, to, 1)).unwrap_err().to_string()
    }

    #[test]
    fn a_good_file_parses_and_its_messages_are_escaped() {
        let f = parse_status_file(GOOD).unwrap();
        assert_eq!((f.version, f.node.as_str(), f.networks.len()), (1, "n1", 2));
        let a = &f.networks[0];
        assert_eq!(
            (a.id, a.state, a.vrf.as_str(), a.vxlan.as_str()),
            (300, TenantState::Ready, "tvrf300", "tvx300")
        );
        assert_eq!((a.vni, a.table, a.vtep), (300, 268435756, Some("192.0.2.1".parse().unwrap())));
        assert_eq!(a.peers[0].prefixes, ["10.2.0.0/16", "fd00:2::/48"]);
        assert_eq!(
            (a.peers[1].state, a.peers[1].message.as_str()),
            (TenantState::Pending, "no VRF tvrf302 on this node")
        );
        // The escape character never reaches a terminal.
        assert!(!f.networks[1].message.contains('\u{1b}'), "{}", f.networks[1].message);
        assert!(f.networks[1].message.contains("Permission denied"));
        assert!(f.networks[1].peers.is_empty() && f.networks[1].vtep.is_none());
        // What the writer serialises reads back the same (plain messages: reading escapes).
        let mut f = f;
        f.networks[1].message = "tvrf301: Permission denied".into();
        let text = serde_json::to_string(&f).unwrap();
        assert_eq!(parse_status_file(&text).unwrap(), f);
    }

    #[test]
    fn each_bad_field_is_named_by_its_path() {
        let cases = [
            (r#""version": 1"#, r#""version": 2"#, "version: \"2\" is not 1"),
            (r#""networks": ["#, r#""networks": {"a": ["#, "not JSON"),
            (
                r#""id": 300"#,
                r#""id": 0"#,
                "networks[0].id: \"0\" is not a whole number from 1 to 16777215",
            ),
            (r#""id": 300"#, r#""id": 16777216"#, "networks[0].id:"),
            (r#""id": 300"#, r#""id": "300""#, "networks[0].id:"),
            (
                r#""id": 301, "state": "Error""#,
                r#""id": 300, "state": "Error""#,
                "networks[1].id: 300 is listed twice",
            ),
            (
                r#""state": "Ready""#,
                r#""state": "ready""#,
                "networks[0].state: \"ready\" is not Pending, Ready or Error",
            ),
            (
                r#""vrf": "tvrf300""#,
                r#""vrf": "tvrf/../../x""#,
                "networks[0].vrf: \"tvrf/../../x\" is not an interface name",
            ),
            (r#""vxlan": "tvx300""#, r#""vxlan": "a-very-long-device-name""#, "networks[0].vxlan:"),
            (r#""vxlan": "tvx300", "#, "", "networks[0].vxlan: missing"),
            (r#""table": 268435756"#, r#""table": -1"#, "networks[0].table:"),
            (
                r#""vtep": "192.0.2.1""#,
                r#""vtep": "192.0.2""#,
                "networks[0].vtep: \"192.0.2\" is not an IP address",
            ),
            (
                r#""10.1.2.0/24""#,
                r#""10.1.2.1/24""#,
                "networks[0].prefixes[0]: \"10.1.2.1/24\" has host bits set",
            ),
            (
                r#""fd00:2::/48""#,
                r#""junk""#,
                "networks[0].peers[0].prefixes[1]: \"junk\" is not a CIDR prefix",
            ),
            (
                r#""fd00:2::/48""#,
                r#""10.2.0.0/16""#,
                "networks[0].peers[0].prefixes[1]: \"10.2.0.0/16\" is listed twice",
            ),
            (r#""id": 302"#, r#""id": 301"#, "networks[0].peers[1].id: 301 is listed twice"),
            (r#""id": 302"#, r#""id": 300"#, "networks[0].peers[1].id: 300 is the network itself"),
            (r#""state": "Pending""#, r#""state": 1"#, "networks[0].peers[1].state:"),
            (
                r#""message": "no VRF tvrf302 on this node""#,
                r#""message": 7"#,
                "networks[0].peers[1].message: \"7\" is not a string",
            ),
            (r#""node": "n1""#, r#""node": """#, "node:"),
        ];
        for (from, to, want) in cases {
            let got = refused(from, to);
            assert!(got.starts_with(want), "{from} -> {to}: {got}");
        }
    }

    #[test]
    fn counts_and_lengths_are_capped() {
        let net = |id: u32| {
            format!(r#"{{"id":{id},"state":"Ready","vrf":"v","vxlan":"x","vni":{id},"table":1}}"#)
        };
        let many: Vec<String> = (1..=MAX_NETWORKS as u32 + 1).map(net).collect();
        let text = format!(r#"{{"version":1,"networks":[{}]}}"#, many.join(","));
        let e = parse_status_file(&text).unwrap_err().to_string();
        assert_eq!(e, "networks: 257 entries, at most 256");
        let fits = format!(r#"{{"version":1,"networks":[{}]}}"#, many[..MAX_NETWORKS].join(","));
        assert_eq!(parse_status_file(&fits).unwrap().networks.len(), MAX_NETWORKS);

        let prefixes: Vec<String> =
            (0..=MAX_PREFIXES).map(|i| format!("\"10.0.{i}.0/24\"")).collect();
        let e = refused(
            r#""prefixes": ["10.1.2.0/24"]"#,
            &format!(r#""prefixes": [{}]"#, prefixes.join(",")),
        );
        assert_eq!(e, "networks[0].prefixes: 65 entries, at most 64");
        let peers: Vec<String> =
            (1000..=1000 + MAX_PEERS).map(|i| format!(r#"{{"id":{i},"state":"Ready"}}"#)).collect();
        let e = refused(r#""peers": ["#, &format!(r#""peers": [{},"#, peers.join(",")));
        assert_eq!(e, "networks[0].peers: 67 entries, at most 64");
        let long = "x".repeat(MAX_MESSAGE + 1);
        let e = refused(
            r#""message": "no VRF tvrf302 on this node""#,
            &format!(r#""message": "{long}""#),
        );
        assert_eq!(e, "networks[0].peers[1].message: 1025 characters, at most 1024");
        // A long value is shown shortened in the message.
        let e = refused(r#""vrf": "tvrf300""#, &format!(r#""vrf": "{long}""#));
        assert!(e.len() < 120, "{e}");
    }
}
