// SPDX-License-Identifier: Apache-2.0
//! `keelson-operator apply | get | describe | delete`: the kinds in the store, as text.

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::command::table;
pub use crate::command::{age, CtlError, Output};
use crate::kinds::{self, Body, Kind, Manifest, Object, ObjectMeta, API_VERSION};
use crate::store::{Phase, Resource, Store};

/// Attempts at an `apply` that keeps meeting concurrent writers.
const APPLY_ATTEMPTS: usize = 5;

type Generic = Resource<Body<serde_json::Value>>;
/// Any kind, its status kept as it is stored (each kind has its own status type).
type Raw = Resource<crate::networks::kinds::Body<serde_json::Value, serde_json::Value>>;

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn encode<T: Serialize>(v: &T) -> Result<serde_json::Value, CtlError> {
    serde_json::to_value(v).map_err(|e| CtlError::Encode(e.to_string()))
}

/// Apply documents: all are validated first, then written in one transaction (all or none).
/// Returns one line per document: `talosmachine/NAME created|configured|unchanged`.
pub fn apply(store: &mut Store, text: &str) -> Result<Vec<String>, CtlError> {
    let objects = kinds::parse(text)?;
    let mut last = None;
    for _ in 0..APPLY_ATTEMPTS {
        let mut writes: Vec<Raw> = Vec::new();
        let mut lines = Vec::new();
        for o in &objects {
            let (ns, kind, meta) = (o.namespace().to_owned(), o.kind(), o.meta());
            let spec = match o {
                Object::ControlPlane(m) | Object::Worker(m) => encode(&m.spec)?,
                Object::Machine(m) => encode(&m.spec)?,
                Object::Network(m) => encode(&m.spec)?,
            };
            let name = format!("{}/{}", kind.name().to_ascii_lowercase(), meta.name);
            let current: Option<Raw> = store.get(&ns, kind.store_type(), &meta.name)?;
            let r = match current {
                Some(mut r) => {
                    let same = r.spec.spec == spec
                        && r.spec.annotations == meta.annotations
                        && r.spec.labels == meta.labels;
                    if same {
                        lines.push(format!("{name} unchanged"));
                        continue;
                    }
                    r.spec.spec = spec;
                    r.spec.annotations = meta.annotations.clone();
                    r.spec.labels = meta.labels.clone();
                    lines.push(format!("{name} configured"));
                    r
                }
                None => {
                    lines.push(format!("{name} created"));
                    Resource::new(
                        &ns,
                        kind.store_type(),
                        &meta.name,
                        crate::networks::kinds::Body {
                            annotations: meta.annotations.clone(),
                            labels: meta.labels.clone(),
                            spec,
                            status: serde_json::Value::Object(Default::default()),
                        },
                    )
                }
            };
            writes.push(r);
        }
        if writes.is_empty() {
            return Ok(lines);
        }
        match store.write_all(&mut writes) {
            Ok(()) => return Ok(lines),
            Err(e) if e.is_conflict() => last = Some(e),
            Err(e) => return Err(e.into()),
        }
    }
    Err(last.map_or_else(|| CtlError::Encode("apply: no attempt made".into()), Into::into))
}

fn field<'a>(v: &'a serde_json::Value, name: &str) -> &'a str {
    v.get(name).and_then(serde_json::Value::as_str).unwrap_or("")
}

fn manifest(kind: Kind, r: &Generic) -> Manifest<serde_json::Value> {
    Manifest {
        api_version: API_VERSION.into(),
        kind: kind.name().into(),
        metadata: ObjectMeta {
            name: r.metadata.id.clone(),
            namespace: Some(r.metadata.namespace.clone()),
            annotations: r.spec.annotations.clone(),
            labels: r.spec.labels.clone(),
            creation_timestamp: Some(r.metadata.created),
        },
        spec: r.spec.spec.clone(),
        status: serde_yaml::to_value(&r.spec.status).ok(),
    }
}

/// `get KIND [NAME]`.
pub fn get(
    store: &mut Store,
    ns: &str,
    kind: Kind,
    name: Option<&str>,
    output: Output,
) -> Result<String, CtlError> {
    if kind.is_network() {
        return crate::networks::ctl::get(store, ns, kind, name, output);
    }
    let list: Vec<Generic> = match name {
        Some(n) => match store.get(ns, kind.store_type(), n)? {
            Some(r) => vec![r],
            None => {
                return Err(CtlError::NotFound { kind: kind.name(), name: n.into(), ns: ns.into() })
            }
        },
        None => {
            let (mut l, _) = store.list::<Body<serde_json::Value>>(ns, kind.store_type())?;
            l.sort_by(|a, b| a.metadata.id.cmp(&b.metadata.id));
            l
        }
    };
    match output {
        Output::Yaml => {
            let docs: Result<Vec<String>, _> =
                list.iter().map(|r| serde_yaml::to_string(&manifest(kind, r))).collect();
            docs.map(|d| d.join("---\n")).map_err(|e| CtlError::Encode(e.to_string()))
        }
        Output::Json => {
            let items: Vec<_> = list.iter().map(|r| manifest(kind, r)).collect();
            let v = if name.is_some() && items.len() == 1 {
                serde_json::to_string_pretty(&items[0])
            } else {
                serde_json::to_string_pretty(&serde_json::json!({"kind": "List", "items": items}))
            };
            v.map(|s| s + "\n").map_err(|e| CtlError::Encode(e.to_string()))
        }
        Output::Table => {
            let now = now_secs();
            let mut rows = vec![["NAME", "STATE", "VERSION", "ENDPOINT", "AGE"].map(String::from)];
            for r in &list {
                let s = &r.spec.spec;
                let state = r.spec.status.state.map_or("", |s| s.name());
                let state = if r.metadata.phase == Phase::TearingDown {
                    format!("{state} (deleting)")
                } else {
                    state.to_owned()
                };
                rows.push([
                    r.metadata.id.clone(),
                    state,
                    field(s, "version").to_owned(),
                    field(s, "endpoint").to_owned(),
                    age(r.metadata.created, now),
                ]);
            }
            Ok(table(&rows))
        }
    }
}

/// `describe KIND NAME`: the resource, its conditions and its events.
pub fn describe(store: &mut Store, ns: &str, kind: Kind, name: &str) -> Result<String, CtlError> {
    if kind.is_network() {
        return crate::networks::ctl::describe(store, ns, kind, name);
    }
    let Some(r) = store.get::<Body<serde_json::Value>>(ns, kind.store_type(), name)? else {
        return Err(CtlError::NotFound { kind: kind.name(), name: name.into(), ns: ns.into() });
    };
    let now = now_secs();
    let st = &r.spec.status;
    let mut out = String::new();
    let _ = writeln!(out, "Name:         {}", r.metadata.id);
    let _ = writeln!(out, "Namespace:    {}", r.metadata.namespace);
    let _ = writeln!(out, "Kind:         {}", kind.name());
    let _ = writeln!(out, "State:        {}", st.state.map_or("", |s| s.name()));
    let _ = writeln!(out, "Version:      {}", field(&r.spec.spec, "version"));
    let _ = writeln!(out, "Endpoint:     {}", field(&r.spec.spec, "endpoint"));
    if !st.observed_version.is_empty() {
        let _ = writeln!(out, "Observed:     {}", st.observed_version);
    }
    if r.metadata.phase == Phase::TearingDown {
        let _ = writeln!(out, "Deleting:     waiting for {:?}", r.metadata.finalizers);
    }
    let _ = writeln!(out, "Age:          {}", age(r.metadata.created, now));
    out.push_str("Conditions:\n");
    let mut rows = vec![["  TYPE", "STATUS", "REASON", "AGE", "MESSAGE"].map(String::from)];
    for c in &st.conditions {
        rows.push([
            format!("  {}", c.kind),
            c.status.clone(),
            c.reason.clone(),
            age(c.last_transition_time, now),
            c.message.clone(),
        ]);
    }
    out.push_str(&table(&rows));
    out.push_str("Events:\n");
    let mut rows = vec![["  TYPE", "REASON", "AGE", "MESSAGE"].map(String::from)];
    for e in &st.events {
        rows.push([format!("  {}", e.kind), e.reason.clone(), age(e.time, now), e.message.clone()]);
    }
    out.push_str(&table(&rows));
    Ok(out)
}

/// `delete KIND NAME`: gone now, or (with finalizers: a machine to reset, a pool's machines)
/// deletion started and finished by the operator.
pub fn delete(store: &mut Store, ns: &str, kind: Kind, name: &str) -> Result<String, CtlError> {
    if kind == Kind::NetworkId {
        return crate::networks::ctl::delete_id(store, name);
    }
    let ns = kind.store_namespace(ns);
    let Some(r) = store.get::<serde_json::Value>(ns, kind.store_type(), name)? else {
        return Err(CtlError::NotFound { kind: kind.name(), name: name.into(), ns: ns.into() });
    };
    let what = format!("{}/{name}", kind.name().to_ascii_lowercase());
    if r.metadata.finalizers.is_empty() {
        store.destroy(ns, kind.store_type(), name, r.metadata.version, &r.metadata.owner)?;
        Ok(format!("{what} deleted"))
    } else {
        store.teardown(ns, kind.store_type(), name)?;
        Ok(format!("{what} deleting (the operator finishes: {})", r.metadata.finalizers.join(", ")))
    }
}

/// `kubeconfig NAME`: a control plane's admin kubeconfig, opened with the secrets key and
/// taken out of the node's `.tar.gz`.
pub fn kubeconfig(
    store: &mut Store,
    ns: &str,
    key: &crate::secrets::SecretsKey,
    name: &str,
) -> Result<Vec<u8>, CtlError> {
    use crate::reconcile::{kubeconfig_aad, Kubeconfig, KUBECONFIGS};
    use base64::Engine as _;
    let r = store.get::<Kubeconfig>(ns, KUBECONFIGS, name)?.ok_or_else(|| {
        CtlError::Encode(format!(
            "no kubeconfig of TalosControlPlane {name} in namespace {ns} (stored once it is Ready)"
        ))
    })?;
    let aad = kubeconfig_aad(ns, name);
    let plain = key.open_bytes(&aad, &r.spec).map_err(|e| CtlError::Encode(e.to_string()))?;
    let archive = base64::engine::general_purpose::STANDARD
        .decode(plain.trim_ascii())
        .map_err(|_| CtlError::Encode(format!("{aad}: the node's answer is not base64")))?;
    cli::kubeconfig::extract(&archive).map_err(|e| CtlError::Encode(format!("{aad}: {e}")))
}
