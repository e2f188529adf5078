// SPDX-License-Identifier: Apache-2.0
//! `get` and `describe` of Network, NetworkID and NodeNetwork (`apply` and `delete` are the
//! generic ones of [`crate::ctl`]).

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::command::{age, table, CtlError, Output};
use crate::kinds::Kind;
use crate::kinds::{Manifest, ObjectMeta, API_VERSION};
use crate::store::{Phase, Resource, Store};

use super::kinds::{
    Body, NetworkIdSpec, NetworkSpec, NetworkStatus, NodeNetworkSpec, NodeNetworkStatus,
};

type Raw = Resource<Body<serde_json::Value, serde_json::Value>>;

fn manifest(kind: Kind, r: &Raw) -> Manifest<serde_json::Value> {
    let cluster = kind.store_namespace("") == super::kinds::CLUSTER;
    Manifest {
        api_version: API_VERSION.into(),
        kind: kind.name().into(),
        metadata: ObjectMeta {
            name: r.metadata.id.clone(),
            namespace: (!cluster).then(|| r.metadata.namespace.clone()),
            annotations: r.spec.annotations.clone(),
            labels: r.spec.labels.clone(),
            creation_timestamp: Some(r.metadata.created),
        },
        spec: r.spec.spec.clone(),
        status: serde_yaml::to_value(&r.spec.status).ok().filter(|v| !v.is_null()),
    }
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn typed<S: serde::de::DeserializeOwned, T: serde::de::DeserializeOwned + Default>(
    r: &Raw,
) -> (Option<S>, T) {
    let spec = serde_json::from_value(r.spec.spec.clone()).ok();
    let status = serde_json::from_value(r.spec.status.clone()).unwrap_or_default();
    (spec, status)
}

fn load(store: &mut Store, ns: &str, kind: Kind, name: Option<&str>) -> Result<Vec<Raw>, CtlError> {
    let sns = kind.store_namespace(ns);
    Ok(match name {
        Some(n) => match store.get(sns, kind.store_type(), n)? {
            Some(r) => vec![r],
            None => {
                return Err(CtlError::NotFound {
                    kind: kind.name(),
                    name: n.into(),
                    ns: sns.into(),
                })
            }
        },
        None => {
            let (mut l, _) =
                store.list::<Body<serde_json::Value, serde_json::Value>>(sns, kind.store_type())?;
            // NetworkIDs and NodeNetworks are numbers: numeric order.
            l.sort_by_key(|r| (r.metadata.id.len(), r.metadata.id.clone()));
            l
        }
    })
}

fn row(kind: Kind, r: &Raw, now: u64) -> [String; 5] {
    let deleting = if r.metadata.phase == Phase::TearingDown { " (deleting)" } else { "" };
    let name = r.metadata.id.clone();
    let a = age(r.metadata.created, now);
    match kind {
        Kind::NetworkId => {
            let (spec, _) = typed::<NetworkIdSpec, serde_json::Value>(r);
            let c = spec.map(|s| s.claim_ref).unwrap_or_default();
            [name, format!("{}/{}", c.namespace, c.name), c.uid, String::new(), a]
        }
        Kind::NodeNetwork => {
            let (spec, st) = typed::<NodeNetworkSpec, NodeNetworkStatus>(r);
            let spec = spec.unwrap_or_default();
            let peers = spec.peered_ids.iter().map(ToString::to_string).collect::<Vec<_>>();
            let ready = st.nodes.values().filter(|n| n.state.name() == "Ready").count();
            [
                name,
                format!("{}/{}", spec.network_ref.namespace, spec.network_ref.name),
                peers.join(","),
                format!("{ready}/{}", st.nodes.len()),
                a,
            ]
        }
        _ => {
            let (_, st) = typed::<NetworkSpec, NetworkStatus>(r);
            let peerings = st
                .peerings
                .iter()
                .map(|p| format!("{}:{}", p.name, p.state.name()))
                .collect::<Vec<_>>();
            [
                name,
                format!("{}{deleting}", st.state.name()),
                st.id.map(|i| i.to_string()).unwrap_or_default(),
                peerings.join(","),
                a,
            ]
        }
    }
}

fn header(kind: Kind) -> [String; 5] {
    match kind {
        Kind::NetworkId => ["ID", "CLAIMED BY", "UID", "", "AGE"],
        Kind::NodeNetwork => ["ID", "NETWORK", "PEERED IDS", "NODES READY", "AGE"],
        _ => ["NAME", "STATE", "ID", "PEERINGS", "AGE"],
    }
    .map(String::from)
}

/// `get net|nid|nn [NAME]`.
pub fn get(
    store: &mut Store,
    ns: &str,
    kind: Kind,
    name: Option<&str>,
    output: Output,
) -> Result<String, CtlError> {
    let list = load(store, ns, kind, name)?;
    let enc = |e: String| CtlError::Encode(e);
    match output {
        Output::Yaml => {
            let docs: Result<Vec<String>, _> =
                list.iter().map(|r| serde_yaml::to_string(&manifest(kind, r))).collect();
            docs.map(|d| d.join("---\n")).map_err(|e| enc(e.to_string()))
        }
        Output::Json => {
            let items: Vec<_> = list.iter().map(|r| manifest(kind, r)).collect();
            let v = match (name, items.as_slice()) {
                (Some(_), [one]) => serde_json::to_string_pretty(one),
                _ => serde_json::to_string_pretty(
                    &serde_json::json!({"kind": "List", "items": items}),
                ),
            };
            v.map(|s| s + "\n").map_err(|e| enc(e.to_string()))
        }
        Output::Table => {
            let now = now_secs();
            let mut rows = vec![header(kind)];
            rows.extend(list.iter().map(|r| row(kind, r, now)));
            Ok(table(&rows))
        }
    }
}

/// `describe net|nid|nn NAME`: the summary line, then spec and status.
pub fn describe(store: &mut Store, ns: &str, kind: Kind, name: &str) -> Result<String, CtlError> {
    let list = load(store, ns, kind, Some(name))?;
    let mut out = String::new();
    for r in &list {
        let [n, a, b, c, age] = row(kind, r, now_secs());
        let [_, ha, hb, hc, _] = header(kind);
        let _ = writeln!(out, "Name:         {n}");
        let _ = writeln!(out, "Namespace:    {}", r.metadata.namespace);
        let _ = writeln!(out, "Kind:         {}", kind.name());
        for (h, v) in [(ha, a), (hb, b), (hc, c)] {
            if !h.is_empty() {
                let _ = writeln!(out, "{:<14}{v}", format!("{}:", title(&h)));
            }
        }
        if !r.metadata.finalizers.is_empty() {
            let _ = writeln!(out, "Finalizers:   {}", r.metadata.finalizers.join(", "));
        }
        let _ = writeln!(out, "Age:          {age}");
        let m = manifest(kind, r);
        for (h, v) in [
            ("Spec", Some(m.spec.clone())),
            ("Status", m.status.as_ref().map(|s| serde_json::to_value(s).unwrap_or_default())),
        ] {
            let text = v.as_ref().and_then(|v| serde_yaml::to_string(v).ok()).unwrap_or_default();
            let _ = writeln!(out, "{h}:");
            for l in text.lines().filter(|l| *l != "{}" && *l != "null") {
                let _ = writeln!(out, "  {l}");
            }
        }
    }
    Ok(out)
}

/// `PEERED IDS` → `Peered ids`.
fn title(h: &str) -> String {
    let l = h.to_ascii_lowercase();
    let mut c = l.chars();
    c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
}

/// `delete nid ID`: the claim and its index key (the Network that held it claims an ID again
/// on the next pass: the same one when it is still free).
pub fn delete_id(store: &mut Store, name: &str) -> Result<String, CtlError> {
    if super::allocate::delete_id(store, name)? {
        Ok(format!("networkid/{name} deleted"))
    } else {
        Err(CtlError::NotFound {
            kind: Kind::NetworkId.name(),
            name: name.into(),
            ns: super::kinds::CLUSTER.into(),
        })
    }
}
