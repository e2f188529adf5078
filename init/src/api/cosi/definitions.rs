// SPDX-License-Identifier: Apache-2.0
//! The `meta` namespace: one `ResourceDefinitions.meta.cosi.dev` per type keelson serves
//! (`talosctl` lists them to turn `addresses` into `AddressStatuses.net.talos.dev` and to find
//! the default namespace), and one `Namespaces.meta.cosi.dev` per namespace. They never
//! change. The spec goes out both as protobuf (`proto_spec`: COSI clients decode definitions
//! from it) and as YAML. Pure.

use net::resource::{Kind, Namespace};
use talos_api::cosi::{self, meta};
use talos_api::Message;

use super::names::{cosi_aliases, cosi_type, CosiType};

use meta::NAMESPACE_TYPE;

/// The two types that live in `meta`.
pub fn meta_types() -> [CosiType; 2] {
    [
        CosiType {
            type_name: meta::RESOURCE_DEFINITION_TYPE,
            display: "ResourceDefinition",
            namespace: meta::NAMESPACE,
            aliases: &["api-resources"],
            sensitive: false,
        },
        CosiType {
            type_name: NAMESPACE_TYPE,
            display: "Namespace",
            namespace: meta::NAMESPACE,
            aliases: &["ns"],
            sensitive: false,
        },
    ]
}

/// Every type with the names keelson adds to COSI's: keelson's kinds in table order (with
/// the names `keelson get` accepts, so `peers` or `AddressStatuses.net.keelson.dev` resolve
/// the same way), then the `meta` types.
pub fn all_types() -> Vec<(CosiType, Vec<String>)> {
    Kind::ALL
        .iter()
        .map(|k| (cosi_type(*k), crate::api::aliases::names(*k)))
        .chain(meta_types().into_iter().map(|t| (t, Vec::new())))
        .collect()
}

fn meta_resource(ty: &str, id: String, spec: cosi::Spec) -> cosi::Resource {
    cosi::Resource {
        metadata: Some(cosi::Metadata {
            namespace: meta::NAMESPACE.to_owned(),
            r#type: ty.to_owned(),
            id,
            version: "1".to_owned(),
            owner: String::new(),
            phase: "running".to_owned(),
            ..Default::default()
        }),
        spec: Some(spec),
    }
}

/// The definition of one type; `more`: names it also answers to.
pub fn definition(ty: &CosiType, more: &[String]) -> cosi::Resource {
    let (aliases, mut all_aliases) = cosi_aliases(ty);
    for name in more {
        if !all_aliases.contains(name) && *name != ty.type_name.to_ascii_lowercase() {
            all_aliases.push(name.clone());
        }
    }
    let spec = meta::ResourceDefinitionSpec {
        resource_type: ty.type_name.to_owned(),
        display_type: ty.display.to_owned(),
        default_namespace: ty.namespace.to_owned(),
        aliases: aliases.clone(),
        all_aliases: all_aliases.clone(),
        print_columns: Vec::new(),
        sensitivity: if ty.sensitive {
            meta::Sensitivity::Sensitive as i32
        } else {
            meta::Sensitivity::NonSensitive as i32
        },
    };
    let mut yaml = serde_json::json!({
        "type": ty.type_name,
        "displayType": ty.display,
        "defaultNamespace": ty.namespace,
        "aliases": aliases,
        "allAliases": all_aliases,
        "printColumns": [],
    });
    if ty.sensitive {
        yaml["sensitivity"] = "sensitive".into();
    }
    let spec = cosi::Spec {
        proto_spec: spec.encode_to_vec(),
        yaml_spec: serde_yaml::to_string(&yaml).unwrap_or_default(),
    };
    meta_resource(meta::RESOURCE_DEFINITION_TYPE, ty.type_name.to_ascii_lowercase(), spec)
}

/// What a namespace holds, for `talosctl get namespaces`.
fn describe(ns: &str) -> &'static str {
    match ns {
        "network" => "Merged network specs and network state.",
        "network-config" => "Network specs from each config source, before the merge.",
        "config" => "The machine configuration.",
        "runtime" => "Machine and service state.",
        "kubespan" => "KubeSpan identity, peers and their state.",
        "hardware" => "What the machine is (SMBIOS).",
        "cluster" => "The node's identity, affiliates and members.",
        "cluster-raw" => "Affiliates as each registry reported them.",
        "files" => "Files written under /etc.",
        "meta" => "Resource definitions and namespaces.",
        _ => "",
    }
}

/// Every COSI namespace name keelson serves: keelson's, Talos's where it differs, `meta`.
pub fn namespace_names() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Namespace::ALL.iter().map(|n| n.as_str()).collect();
    for k in Kind::ALL {
        let ns = cosi_type(*k).namespace;
        if !out.contains(&ns) {
            out.push(ns);
        }
    }
    out.push(meta::NAMESPACE);
    net::sort::ascending(&mut out);
    out
}

/// The namespace resources.
pub fn namespaces() -> Vec<cosi::Resource> {
    namespace_names()
        .into_iter()
        .map(|ns| {
            let text = describe(ns);
            let proto = meta::NamespaceSpec { description: text.to_owned() }.encode_to_vec();
            let yaml = serde_yaml::to_string(&serde_json::json!({ "description": text }))
                .unwrap_or_default();
            meta_resource(
                NAMESPACE_TYPE,
                ns.to_owned(),
                cosi::Spec { proto_spec: proto, yaml_spec: yaml },
            )
        })
        .collect()
}

/// The resources of a `meta` type, ordered by ID; `None` for another type.
pub fn list(type_name: &str) -> Option<Vec<cosi::Resource>> {
    let mut out = if type_name.eq_ignore_ascii_case(meta::RESOURCE_DEFINITION_TYPE) {
        all_types().iter().map(|(t, more)| definition(t, more)).collect::<Vec<_>>()
    } else if type_name.eq_ignore_ascii_case(NAMESPACE_TYPE) {
        namespaces()
    } else {
        return None;
    };
    net::sort::by(&mut out, |a, b| id_of(a).cmp(id_of(b)));
    Some(out)
}

/// The ID of a resource built here.
pub fn id_of(r: &cosi::Resource) -> &str {
    r.metadata.as_ref().map(|m| m.id.as_str()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;

    fn find<'a>(list: &'a [cosi::Resource], id: &str) -> &'a cosi::Resource {
        list.iter().find(|r| id_of(r) == id).unwrap_or_else(|| panic!("{id} missing"))
    }

    #[test]
    fn talosctl_resolves_addresses_from_the_definitions() {
        let defs = list("ResourceDefinitions.meta.cosi.dev").unwrap();
        assert_eq!(defs.len(), Kind::ALL.len() + 2);
        let rd = find(&defs, "addressstatuses.net.talos.dev");
        let spec =
            meta::ResourceDefinitionSpec::decode(rd.spec.as_ref().unwrap().proto_spec.as_slice())
                .unwrap();
        assert_eq!(spec.resource_type, "AddressStatuses.net.talos.dev");
        assert_eq!(spec.default_namespace, "network");
        for alias in ["addresses", "address", "addressstatus"] {
            assert!(spec.all_aliases.iter().any(|a| a == alias), "{alias}");
        }
        let yaml = &rd.spec.as_ref().unwrap().yaml_spec;
        assert!(yaml.contains("defaultNamespace: network"), "{yaml}");
        // Each alias a status type declares names it alone.
        for a in ["address", "addresses", "routes", "links", "hostname", "svc", "netstatus"] {
            let hits = defs
                .iter()
                .filter(|d| {
                    let s = meta::ResourceDefinitionSpec::decode(
                        d.spec.as_ref().unwrap().proto_spec.as_slice(),
                    )
                    .unwrap();
                    s.all_aliases.iter().any(|x| x == a)
                })
                .count();
            assert_eq!(hits, 1, "{a}");
        }
    }

    /// What `talosctl` does: match the lowercase type or any of `all_aliases`.
    fn talosctl_matches(defs: &[cosi::Resource], name: &str) -> Vec<String> {
        defs.iter()
            .filter_map(|d| {
                let s = meta::ResourceDefinitionSpec::decode(
                    d.spec.as_ref().unwrap().proto_spec.as_slice(),
                )
                .unwrap();
                let hit = id_of(d) == name.to_ascii_lowercase()
                    || s.all_aliases.iter().any(|a| a.eq_ignore_ascii_case(name));
                hit.then_some(s.resource_type)
            })
            .collect()
    }

    #[test]
    fn every_name_keelson_get_accepts_resolves_to_one_type() {
        let defs = list("ResourceDefinitions.meta.cosi.dev").unwrap();
        for kind in Kind::ALL {
            for name in crate::api::aliases::names(*kind) {
                assert_eq!(talosctl_matches(&defs, &name), [cosi_type(*kind).type_name], "{name}");
            }
        }
        assert_eq!(talosctl_matches(&defs, "peers"), ["KubeSpanPeerStatuses.kubespan.talos.dev"]);
        assert_eq!(talosctl_matches(&defs, "rd"), ["ResourceDefinitions.meta.cosi.dev"]);
    }

    #[test]
    fn sensitive_types_say_so() {
        let defs = list("resourcedefinitions.meta.cosi.dev").unwrap();
        let mc = find(&defs, "machineconfigs.config.talos.dev");
        let spec =
            meta::ResourceDefinitionSpec::decode(mc.spec.as_ref().unwrap().proto_spec.as_slice())
                .unwrap();
        assert_eq!(spec.sensitivity, meta::Sensitivity::Sensitive as i32);
        assert!(mc.spec.as_ref().unwrap().yaml_spec.contains("sensitivity: sensitive"));
    }

    #[test]
    fn namespaces_include_talos_files_and_meta() {
        let ns = list("Namespaces.meta.cosi.dev").unwrap();
        for n in ["network", "files", "meta", "cluster-raw", "hardware"] {
            let r = find(&ns, n);
            assert!(!r.spec.as_ref().unwrap().proto_spec.is_empty(), "{n}");
        }
        assert!(list("AddressStatuses.net.talos.dev").is_none());
    }
}
