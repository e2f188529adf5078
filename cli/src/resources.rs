// SPDX-License-Identifier: Apache-2.0
//! `get`, `get --watch` and `explain` over COSI's `cosi.resource.State` (`Get`, `List`,
//! `Watch`): a COSI resource back into keelson's shape (its namespace and type names, the
//! spec from `yaml_spec`, the provenance of a merged spec from its annotation), so tables,
//! YAML and JSON print as they always did. The conversion is pure.

use std::time::{Duration, UNIX_EPOCH};

use serde_json::{json, Map, Value};
use talos_api::cosi::{self, path, EventType};

use crate::output::Remote;
use crate::resource::{Kind, Rfc3339};
use crate::rpc::{Channel, RpcError, MAX_MESSAGE};

/// The annotation a merged spec's provenance travels in (JSON), set by the node.
pub const PROVENANCE: &str = "keelson.dev/provenance";

/// What a get, list or watch is about: keelson's names, which the node takes as COSI's.
#[derive(Debug, Clone, Copy)]
pub struct Query<'a> {
    pub kind: Kind,
    /// keelson's namespace name (`network`, `network-config`, ...).
    pub namespace: &'a str,
}

fn time(t: Option<&cosi::Timestamp>) -> Value {
    let t = t.map_or(UNIX_EPOCH, |t| {
        let secs = u64::try_from(t.seconds).unwrap_or(0);
        UNIX_EPOCH + Duration::from_secs(secs)
    });
    Value::String(Rfc3339(t).to_string())
}

/// A COSI resource of `q` as the node's own JSON shape: `metadata` (keelson's namespace and
/// type names, the version a number), `spec`, and `provenance` for a merged spec.
pub fn to_remote(r: &cosi::Resource, q: Query<'_>, node: &str) -> Remote {
    let m = r.metadata.clone().unwrap_or_default();
    let mut meta = Map::new();
    meta.insert("namespace".into(), q.namespace.into());
    meta.insert("type".into(), q.kind.type_name().into());
    meta.insert("id".into(), m.id.clone().into());
    meta.insert(
        "version".into(),
        m.version.parse::<u64>().map_or_else(|_| Value::String(m.version.clone()), Value::from),
    );
    meta.insert("owner".into(), m.owner.clone().into());
    meta.insert("phase".into(), m.phase.clone().into());
    meta.insert("created".into(), time(m.created.as_ref()));
    meta.insert("updated".into(), time(m.updated.as_ref()));
    if !m.finalizers.is_empty() {
        meta.insert("finalizers".into(), m.finalizers.clone().into());
    }
    let yaml = r.spec.as_ref().map_or("", |s| s.yaml_spec.as_str());
    // A spec that is not YAML is the node's fault: shown as its text rather than dropped.
    let spec = serde_yaml::from_str::<Value>(yaml).unwrap_or_else(|_| Value::String(yaml.into()));
    let mut resource = json!({"metadata": meta, "spec": spec});
    if let Some(p) = m.annotations.get(PROVENANCE) {
        let p = serde_json::from_str::<Value>(p).unwrap_or_else(|_| Value::String(p.clone()));
        resource["provenance"] = p;
    }
    Remote { node: node.to_owned(), resource }
}

/// What is left of a destroyed resource: its identity, in keelson's names.
pub fn tombstone(r: &cosi::Resource, q: Query<'_>, node: &str) -> Remote {
    let id = r.metadata.as_ref().map_or("", |m| m.id.as_str());
    Remote {
        node: node.to_owned(),
        resource: json!({"metadata": {"namespace": q.namespace, "type": q.kind.type_name(), "id": id}}),
    }
}

/// The node's hostname (the NODE column), or empty when it has none yet.
pub fn node_name(c: &mut Channel) -> Result<String, RpcError> {
    let req = cosi::GetRequest {
        namespace: Kind::HostnameStatus.default_namespace().to_string(),
        r#type: Kind::HostnameStatus.type_name().into(),
        id: crate::resource::HOSTNAME_ID.into(),
        options: None,
    };
    match c.unary::<_, cosi::GetResponse>(path::GET, &req) {
        Ok(r) => Ok(r
            .resource
            .and_then(|r| r.spec)
            .and_then(|s| serde_yaml::from_str::<Value>(&s.yaml_spec).ok())
            .and_then(|v| v["hostname"].as_str().map(str::to_owned))
            .unwrap_or_default()),
        Err(RpcError::Status(s)) if s.code == grpc::code::NOT_FOUND => Ok(String::new()),
        Err(e) => Err(e),
    }
}

/// One resource.
pub fn get(c: &mut Channel, q: Query<'_>, id: &str) -> Result<cosi::Resource, RpcError> {
    let req = cosi::GetRequest {
        namespace: q.namespace.into(),
        r#type: q.kind.type_name().into(),
        id: id.into(),
        options: None,
    };
    let r: cosi::GetResponse = c.unary(path::GET, &req).map_err(|e| match e {
        // keelson's words for it, as before the COSI API.
        RpcError::Status(s) if s.code == grpc::code::NOT_FOUND => RpcError::Handler(format!(
            "{} {:?} not found in namespace {}",
            q.kind,
            base::names::escape(id, 256),
            q.namespace
        )),
        e => e,
    })?;
    r.resource.ok_or_else(|| RpcError::Decode("Get: no resource in the answer".into()))
}

/// Every resource of the query, ordered by ID as the node lists them.
pub fn list(c: &mut Channel, q: Query<'_>) -> Result<Vec<cosi::Resource>, RpcError> {
    let req = cosi::ListRequest {
        namespace: q.namespace.into(),
        r#type: q.kind.type_name().into(),
        options: None,
    };
    let mut all = Vec::new();
    c.call(path::LIST, &req, MAX_MESSAGE, &mut |m: cosi::ListResponse| {
        all.extend(m.resource);
        Ok(())
    })?;
    Ok(all)
}

/// A watch event as keelson names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Created,
    Updated,
    Destroyed,
}

impl Change {
    /// `created`, `updated`, `destroyed`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Updated => "updated",
            Self::Destroyed => "destroyed",
        }
    }
}

/// Follow the query (one ID, or the whole kind: its current resources first, as created),
/// handing each change to `each` until the node ends the watch or `each` refuses.
pub fn watch(
    c: &mut Channel,
    q: Query<'_>,
    id: Option<&str>,
    each: &mut dyn FnMut(Change, &cosi::Resource) -> Result<(), String>,
) -> Result<(), RpcError> {
    let req = cosi::WatchRequest {
        namespace: q.namespace.into(),
        r#type: q.kind.type_name().into(),
        id: id.map(str::to_owned),
        options: Some(cosi::WatchOptions {
            bootstrap_contents: id.is_none(),
            ..Default::default()
        }),
        api_version: 1,
    };
    // A watch of one ID starts with its current state: DESTROYED when it does not exist,
    // which is no change to show.
    let mut first = id.is_some();
    c.call(path::WATCH, &req, MAX_MESSAGE, &mut |m: cosi::WatchResponse| {
        for e in &m.event {
            let at_start = std::mem::take(&mut first);
            let change = match EventType::try_from(e.event_type) {
                Ok(EventType::Created) => Change::Created,
                Ok(EventType::Updated) => Change::Updated,
                Ok(EventType::Destroyed) if at_start => continue,
                Ok(EventType::Destroyed) => Change::Destroyed,
                Ok(EventType::Errored) => {
                    return Err(format!(
                        "the watch ended: {}",
                        crate::output::escape_cell(e.error.as_deref().unwrap_or("error"))
                    ))
                }
                Ok(EventType::Bootstrapped | EventType::Noop) | Err(_) => continue,
            };
            if let Some(r) = &e.resource {
                each(change, r)?;
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn cosi_address(annotations: BTreeMap<String, String>) -> cosi::Resource {
        cosi::Resource {
            metadata: Some(cosi::Metadata {
                namespace: "network".into(),
                r#type: "AddressSpecs.net.talos.dev".into(),
                id: "eth0/10.0.0.2/24".into(),
                version: "3".into(),
                owner: "network.AddressMergeController".into(),
                phase: "running".into(),
                created: Some(cosi::Timestamp { seconds: 1_700_000_000, nanos: 9 }),
                updated: Some(cosi::Timestamp { seconds: 1_700_000_060, nanos: 0 }),
                finalizers: Vec::new(),
                labels: BTreeMap::new(),
                annotations,
            }),
            spec: Some(cosi::Spec {
                proto_spec: Vec::new(),
                yaml_spec: "address: 10.0.0.2/24\nlinkName: eth0\nlayer: configuration\n".into(),
            }),
        }
    }

    #[test]
    fn a_cosi_resource_comes_back_in_keelson_names_with_its_provenance() {
        let q = Query { kind: Kind::AddressSpec, namespace: "network" };
        let prov = r#"{"address":["configuration/eth0/10.0.0.2/24"]}"#;
        let r = cosi_address([(PROVENANCE.to_owned(), prov.to_owned())].into());
        let remote = to_remote(&r, q, "n1");
        let v = &remote.resource;
        assert_eq!(remote.node, "n1");
        assert_eq!(v["metadata"]["type"], Kind::AddressSpec.type_name());
        assert_eq!(v["metadata"]["namespace"], "network");
        assert_eq!(v["metadata"]["version"], 3);
        assert_eq!(v["metadata"]["created"], "2023-11-14T22:13:20Z");
        assert!(v["metadata"].get("finalizers").is_none());
        assert!(v["metadata"].get("annotations").is_none(), "annotations are not metadata");
        assert_eq!(v["spec"]["linkName"], "eth0");
        assert_eq!(v["provenance"]["address"][0], "configuration/eth0/10.0.0.2/24");
        // Without the annotation: no provenance key at all (YAML shows none).
        let plain = to_remote(&cosi_address(BTreeMap::new()), q, "");
        assert!(plain.resource.get("provenance").is_none());
        let gone = tombstone(&r, q, "n1");
        assert_eq!(gone.resource["metadata"]["id"], "eth0/10.0.0.2/24");
        assert!(gone.resource.get("spec").is_none());
    }
}
