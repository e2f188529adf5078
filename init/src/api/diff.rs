// SPDX-License-Identifier: Apache-2.0
//! The difference between two sets of merged specs, per resource and per top-level field.
//! Pure: inputs are specs already serialized to JSON.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

/// Specs keyed by (type, ID).
pub type Specs = BTreeMap<(String, String), Value>;

/// What happens to one resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// It will appear.
    Added,
    /// Its spec will change.
    Changed,
    /// It will go away.
    Removed,
}

/// One field of a changed spec.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldChange {
    /// Field name.
    pub field: String,
    /// Value before (null when absent).
    pub before: Value,
    /// Value after (null when absent).
    pub after: Value,
}

/// One resource in the diff.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    /// Added, changed or removed.
    pub action: Action,
    /// Short type name.
    #[serde(rename = "type")]
    pub kind: String,
    /// ID.
    pub id: String,
    /// For `changed`: the fields that differ.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<FieldChange>,
}

fn fields(before: &Value, after: &Value) -> Vec<FieldChange> {
    match (before.as_object(), after.as_object()) {
        (Some(b), Some(a)) => {
            let mut keys: Vec<&String> = b.keys().chain(a.keys()).collect();
            net::sort::ascending(&mut keys);
            keys.dedup();
            keys.into_iter()
                .filter(|k| b.get(*k) != a.get(*k))
                .map(|k| FieldChange {
                    field: k.clone(),
                    before: b.get(k).cloned().unwrap_or(Value::Null),
                    after: a.get(k).cloned().unwrap_or(Value::Null),
                })
                .collect()
        }
        _ => {
            vec![FieldChange { field: String::new(), before: before.clone(), after: after.clone() }]
        }
    }
}

/// Every resource that differs between `before` and `after`, in key order.
pub fn diff(before: &Specs, after: &Specs) -> Vec<Entry> {
    let mut keys: Vec<&(String, String)> = before.keys().chain(after.keys()).collect();
    net::sort::ascending(&mut keys);
    keys.dedup();
    keys.into_iter()
        .filter_map(|key| {
            let (kind, id) = (key.0.clone(), key.1.clone());
            match (before.get(key), after.get(key)) {
                (None, Some(_)) => Some(Entry { action: Action::Added, kind, id, fields: vec![] }),
                (Some(_), None) => {
                    Some(Entry { action: Action::Removed, kind, id, fields: vec![] })
                }
                (Some(b), Some(a)) if a != b => {
                    Some(Entry { action: Action::Changed, kind, id, fields: fields(b, a) })
                }
                _ => None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn specs(items: &[(&str, &str, Value)]) -> Specs {
        items.iter().map(|(k, i, v)| (((*k).into(), (*i).into()), v.clone())).collect()
    }

    #[test]
    fn added_changed_removed() {
        let before = specs(&[
            ("AddressSpec", "eth0/10.0.0.1/24", json!({"address": "10.0.0.1/24"})),
            ("RouteSpec", "inet4//50", json!({"gateway": "10.0.0.254", "priority": 50})),
            ("HostnameSpec", "hostname", json!({"hostname": "a"})),
        ]);
        let after = specs(&[
            ("AddressSpec", "eth0/10.0.0.2/24", json!({"address": "10.0.0.2/24"})),
            ("RouteSpec", "inet4//50", json!({"gateway": "10.0.0.1", "priority": 50})),
            ("HostnameSpec", "hostname", json!({"hostname": "a"})),
        ]);
        let d = diff(&before, &after);
        let short: Vec<(Action, &str)> = d.iter().map(|e| (e.action, e.id.as_str())).collect();
        assert_eq!(
            short,
            [
                (Action::Removed, "eth0/10.0.0.1/24"),
                (Action::Added, "eth0/10.0.0.2/24"),
                (Action::Changed, "inet4//50")
            ]
        );
        assert_eq!(
            d[2].fields,
            [FieldChange {
                field: "gateway".into(),
                before: json!("10.0.0.254"),
                after: json!("10.0.0.1")
            }]
        );
        assert!(diff(&before, &before).is_empty());
    }
}
