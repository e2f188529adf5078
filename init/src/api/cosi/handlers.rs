// SPDX-License-Identifier: Apache-2.0
//! `Get`, `List` and the refused writes, and who may read what. Talos's rules
//! (siderolabs/talos `internal/app/resources/access.go`): writes are refused; an unknown type
//! or namespace is `PermissionDenied`; a sensitive type (keys, the machine config) needs
//! `os:admin`. A node in maintenance serves only the network, hardware and `meta`
//! namespaces, and nothing sensitive. A missing resource is `NotFound`, as COSI says it.

use grpc::call::Status;
use net::resource::{Kind, Namespace};
use runtime::Store;
use talos_api::cosi::{self, meta};
use talos_api::Message;

use super::names::{cosi_type, resolve, store_namespace, CosiType};
use super::{code, convert, definitions, shown, status};
use crate::api::transport::Access;

/// What a request names: resources of one kind in one store namespace, or a `meta` type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Resources in the store.
    Store {
        /// Their kind.
        kind: Kind,
        /// Where the store keeps them.
        namespace: Namespace,
        /// The namespace as the client named it (Talos's).
        cosi_namespace: String,
    },
    /// Resource definitions or namespaces (`meta`).
    Meta {
        /// Its canonical type.
        type_name: &'static str,
        /// The namespace the client named: only `meta` holds anything.
        namespace: String,
    },
}

impl Target {
    /// The type's description.
    pub fn cosi_type(&self) -> CosiType {
        match self {
            Target::Store { kind, .. } => cosi_type(*kind),
            Target::Meta { type_name, .. } => {
                let [definition, namespace] = definitions::meta_types();
                if *type_name == namespace.type_name {
                    namespace
                } else {
                    definition
                }
            }
        }
    }
}

/// Resolve `(namespace, type)` from a request. An empty namespace means the type's default.
pub fn target(namespace: &str, type_name: &str) -> Result<Target, Status> {
    if let Some(t) =
        definitions::meta_types().into_iter().find(|t| t.type_name.eq_ignore_ascii_case(type_name))
    {
        let namespace = if namespace.is_empty() { meta::NAMESPACE } else { namespace };
        return Ok(Target::Meta { type_name: t.type_name, namespace: namespace.to_owned() });
    }
    let Some(kind) = resolve(type_name) else {
        return Err(status(
            code::PERMISSION_DENIED,
            format!("resource type \"{}\" is not supported", shown(type_name)),
        ));
    };
    let cosi_namespace =
        if namespace.is_empty() { cosi_type(kind).namespace } else { namespace }.to_owned();
    match store_namespace(kind, &cosi_namespace) {
        Some(ns) => Ok(Target::Store { kind, namespace: ns, cosi_namespace }),
        None => Err(status(
            code::PERMISSION_DENIED,
            format!("namespace \"{}\" is not supported", shown(namespace)),
        )),
    }
}

/// May a client with `access` read `target`?
pub fn may_read(access: Access, target: &Target) -> Result<(), Status> {
    let ty = target.cosi_type();
    let sensitive = || {
        status(
            code::PERMISSION_DENIED,
            format!("not authorized: {} is sensitive (os:admin only)", ty.type_name),
        )
    };
    match access {
        Access::Admin => Ok(()),
        Access::Operator | Access::Reader if ty.sensitive => Err(sensitive()),
        Access::Operator | Access::Reader => Ok(()),
        Access::Maintenance => {
            let ns = match target {
                Target::Store { cosi_namespace, .. } => cosi_namespace.as_str(),
                Target::Meta { namespace, .. } => namespace.as_str(),
            };
            if !matches!(ns, "network" | "network-config" | "hardware" | "meta") {
                Err(status(
                    code::PERMISSION_DENIED,
                    "not available in maintenance mode: only network, hardware and meta resources can be read",
                ))
            } else if ty.sensitive {
                Err(sensitive())
            } else {
                Ok(())
            }
        }
        Access::Pending | Access::Revoked | Access::Trustd => {
            Err(status(code::PERMISSION_DENIED, "not authenticated"))
        }
    }
}

/// `TYPE in NAMESPACE`, for messages.
pub fn describe(target: &Target) -> String {
    match target {
        Target::Store { kind, cosi_namespace, .. } => {
            format!("{} in {}", cosi_type(*kind).type_name, shown(cosi_namespace))
        }
        Target::Meta { type_name, namespace } => format!("{type_name} in {}", shown(namespace)),
    }
}

/// Writes are refused, as Talos refuses them over its API.
pub fn refuse_write() -> Status {
    status(code::PERMISSION_DENIED, "write access is not allowed")
}

/// The resources `target` names, ordered by ID.
pub fn resources(store: &Store, target: &Target) -> Vec<cosi::Resource> {
    match target {
        Target::Store { kind, namespace, .. } => {
            store.list(*namespace, *kind).map(convert::resource).collect()
        }
        Target::Meta { type_name, namespace } if namespace == meta::NAMESPACE => {
            definitions::list(type_name).unwrap_or_default()
        }
        Target::Meta { .. } => Vec::new(),
    }
}

/// One resource by ID.
pub fn one(store: &Store, target: &Target, id: &str) -> Option<cosi::Resource> {
    match target {
        Target::Store { kind, namespace, .. } => {
            store.get(*namespace, *kind, id).map(convert::resource)
        }
        Target::Meta { .. } => {
            resources(store, target).into_iter().find(|r| definitions::id_of(r) == id)
        }
    }
}

/// `Get`.
pub fn get(
    store: &Store,
    access: Access,
    req: &cosi::GetRequest,
) -> Result<cosi::GetResponse, Status> {
    let target = target(&req.namespace, &req.r#type)?;
    // keelson's one exception to maintenance's namespaces: the machine status, by ID (its
    // stage says `maintenance`; `keelson get machinestatus --insecure`). Lists and watches of
    // `runtime` stay refused, as Talos refuses them.
    let machine_status = matches!(target, Target::Store { kind: Kind::MachineStatus, .. });
    if !(access == Access::Maintenance && machine_status) {
        may_read(access, &target)?;
    }
    match one(store, &target, &req.id) {
        Some(r) => Ok(cosi::GetResponse { resource: Some(r) }),
        None => Err(status(
            code::NOT_FOUND,
            format!(
                "resource {}({}/{}) doesn't exist",
                target.cosi_type().type_name,
                shown(&req.namespace),
                shown(&req.id)
            ),
        )),
    }
}

/// Does a label query admit a resource? keelson's resources carry no labels: a term holds
/// when it asks for a label to be absent (or is inverted), never otherwise.
pub fn labels_admit(queries: &[cosi::LabelQuery]) -> bool {
    const NOT_EXISTS: i32 = 2;
    queries.iter().all(|q| q.terms.iter().all(|t| (t.op == NOT_EXISTS) != t.invert))
}

/// The ID query is a regular expression; keelson has no regex engine.
pub(super) fn check_id_query(q: Option<&cosi::IdQuery>) -> Result<(), Status> {
    match q {
        Some(q) if !q.regexp.is_empty() => {
            Err(status(code::UNIMPLEMENTED, "ID queries (regular expressions) are not supported"))
        }
        _ => Ok(()),
    }
}

/// `List`: one reply per resource, made as the client takes them (a kind with ten thousand
/// routes is not encoded all at once).
#[derive(Debug)]
pub struct ListFeed {
    target: Target,
    /// IDs still to send (store kinds): each is read when its turn comes.
    ids: std::collections::VecDeque<String>,
    /// Resources still to send (`meta`, built up front: a few dozen).
    built: std::collections::VecDeque<cosi::Resource>,
}

impl ListFeed {
    /// Check the request and take the IDs to send.
    pub fn start(store: &Store, access: Access, req: &cosi::ListRequest) -> Result<Self, Status> {
        let target = target(&req.namespace, &req.r#type)?;
        may_read(access, &target)?;
        let opts = req.options.clone().unwrap_or_default();
        check_id_query(opts.id_query.as_ref())?;
        let mut feed = ListFeed { target, ids: Default::default(), built: Default::default() };
        if !labels_admit(&opts.label_query) {
            return Ok(feed);
        }
        match &feed.target {
            Target::Store { kind, namespace, .. } => {
                feed.ids =
                    store.list(*namespace, *kind).map(|r| r.metadata.id.to_string()).collect();
            }
            Target::Meta { .. } => feed.built = resources(store, &feed.target).into(),
        }
        Ok(feed)
    }

    /// Replies are left to send.
    pub fn has_more(&self) -> bool {
        !self.ids.is_empty() || !self.built.is_empty()
    }

    /// Append encoded replies, about `room` bytes (at least one when any is left); true once
    /// everything was sent. A resource gone since the start is skipped.
    pub fn fill(&mut self, store: &Store, room: usize, out: &mut Vec<Vec<u8>>) -> bool {
        let mut used = 0;
        while used < room || out.is_empty() {
            let next = if let Some(r) = self.built.pop_front() {
                r
            } else if let Some(id) = self.ids.pop_front() {
                match one(store, &self.target, &id) {
                    Some(r) => r,
                    None => continue,
                }
            } else {
                return true;
            };
            let msg = cosi::ListResponse { resource: Some(next) }.encode_to_vec();
            used += msg.len();
            out.push(msg);
        }
        self.ids.is_empty() && self.built.is_empty()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;
    use net::config::MachineConfig;
    use net::resource::{HostnameStatus, HOSTNAME_ID};

    fn store() -> runtime::Runtime {
        let mut rt = runtime::Runtime::new();
        rt.put_input(
            "test",
            Namespace::Network,
            HOSTNAME_ID,
            HostnameStatus { hostname: "n1".into(), domainname: String::new() },
        )
        .unwrap();
        rt.put_input("test", Namespace::Config, "v1alpha1", MachineConfig::default()).unwrap();
        rt
    }

    fn get_req(ns: &str, ty: &str, id: &str) -> cosi::GetRequest {
        cosi::GetRequest { namespace: ns.into(), r#type: ty.into(), id: id.into(), options: None }
    }

    #[test]
    fn get_finds_by_talos_type_and_says_not_found_otherwise() {
        let rt = store();
        let reply = get(
            rt.store(),
            Access::Reader,
            &get_req("network", "HostnameStatuses.net.talos.dev", HOSTNAME_ID),
        )
        .unwrap();
        let md = reply.resource.unwrap().metadata.unwrap();
        assert_eq!(md.r#type, "HostnameStatuses.net.talos.dev");
        assert_eq!(md.id, HOSTNAME_ID);
        let e = get(
            rt.store(),
            Access::Reader,
            &get_req("network", "HostnameStatuses.net.talos.dev", "\u{1b}nope"),
        )
        .unwrap_err();
        assert_eq!(e.code, code::NOT_FOUND);
        assert!(!e.message.contains('\u{1b}'), "{}", e.message);
        // An empty namespace is the type's default.
        assert!(get(rt.store(), Access::Reader, &get_req("", "hostname", HOSTNAME_ID)).is_ok());
    }

    #[test]
    fn unknown_types_and_namespaces_are_refused_as_talos_does() {
        let rt = store();
        let e =
            get(rt.store(), Access::Admin, &get_req("network", "Bogus.x.dev", "a")).unwrap_err();
        assert_eq!(e.code, code::PERMISSION_DENIED);
        assert!(e.message.contains("not supported"), "{}", e.message);
        let e = get(rt.store(), Access::Admin, &get_req("nowhere", "addresses", "a")).unwrap_err();
        assert_eq!(e.code, code::PERMISSION_DENIED);
        assert_eq!(refuse_write().code, code::PERMISSION_DENIED);
    }

    #[test]
    fn sensitive_types_need_admin() {
        let rt = store();
        let req = get_req("config", "MachineConfigs.config.talos.dev", "v1alpha1");
        assert!(get(rt.store(), Access::Admin, &req).is_ok());
        for a in [Access::Reader, Access::Operator, Access::Maintenance, Access::Pending] {
            assert_eq!(
                get(rt.store(), a, &req).unwrap_err().code,
                code::PERMISSION_DENIED,
                "{a:?}"
            );
        }
    }

    #[test]
    fn maintenance_reads_network_hardware_and_meta_only() {
        let ok = |ns: &str, ty: &str| may_read(Access::Maintenance, &target(ns, ty).unwrap());
        assert!(ok("network", "AddressStatuses.net.talos.dev").is_ok());
        assert!(ok("network-config", "AddressSpecs.net.talos.dev").is_ok());
        assert!(ok("hardware", "SystemInformations.hardware.talos.dev").is_ok());
        assert!(ok("meta", "ResourceDefinitions.meta.cosi.dev").is_ok());
        assert!(ok("runtime", "MachineStatuses.runtime.talos.dev").is_err());
        assert!(ok("cluster", "Members.cluster.talos.dev").is_err());
        assert!(ok("network", "LinkSpecs.net.talos.dev").is_err());
    }

    #[test]
    fn maintenance_gets_the_machine_status_by_id_but_lists_no_runtime() {
        let mut rt = store();
        let status = net::resource::MachineStatus::default();
        rt.put_input("test", Namespace::Runtime, net::resource::MACHINE_STATUS_ID, status).unwrap();
        let ty = "MachineStatuses.runtime.talos.dev";
        let req = get_req("runtime", ty, net::resource::MACHINE_STATUS_ID);
        assert!(get(rt.store(), Access::Maintenance, &req).is_ok());
        let list =
            cosi::ListRequest { namespace: "runtime".into(), r#type: ty.into(), options: None };
        let e = ListFeed::start(rt.store(), Access::Maintenance, &list).err().map(|s| s.code);
        assert_eq!(e, Some(code::PERMISSION_DENIED));
        let other = get_req("runtime", "Services.v1alpha1.talos.dev", "kubelet");
        let e = get(rt.store(), Access::Maintenance, &other).err().map(|s| s.code);
        assert_eq!(e, Some(code::PERMISSION_DENIED));
    }

    /// Every reply of a list, taken a message at a time.
    fn all(
        store: &Store,
        access: Access,
        req: &cosi::ListRequest,
    ) -> Result<Vec<cosi::ListResponse>, Status> {
        let mut feed = ListFeed::start(store, access, req)?;
        let mut out = Vec::new();
        loop {
            let mut batch = Vec::new();
            let done = feed.fill(store, 0, &mut batch);
            assert!(batch.len() <= 1);
            out.extend(batch.iter().map(|m| cosi::ListResponse::decode(m.as_slice()).unwrap()));
            if done {
                return Ok(out);
            }
        }
    }

    #[test]
    fn a_long_list_goes_out_as_the_client_takes_it() {
        let mut rt = store();
        for i in 0..100 {
            rt.put_input(
                "test",
                Namespace::Network,
                &format!("h{i:03}"),
                HostnameStatus::default(),
            )
            .unwrap();
        }
        let req = cosi::ListRequest {
            namespace: "network".into(),
            r#type: "HostnameStatuses.net.talos.dev".into(),
            options: None,
        };
        let mut feed = ListFeed::start(rt.store(), Access::Reader, &req).unwrap();
        let mut out = Vec::new();
        assert!(!feed.fill(rt.store(), 1000, &mut out));
        let taken: usize = out.iter().map(Vec::len).sum();
        assert!(out.len() < 101 && taken < 1000 + 200, "{} messages, {taken} bytes", out.len());
        assert!(feed.fill(rt.store(), usize::MAX, &mut out));
        assert_eq!(out.len(), 101);
    }

    #[test]
    fn list_sends_one_reply_per_resource() {
        let rt = store();
        let req = cosi::ListRequest {
            namespace: "network".into(),
            r#type: "HostnameStatuses.net.talos.dev".into(),
            options: None,
        };
        let replies = all(rt.store(), Access::Reader, &req).unwrap();
        assert_eq!(replies.len(), 1);
        let defs = cosi::ListRequest {
            namespace: "meta".into(),
            r#type: "ResourceDefinitions.meta.cosi.dev".into(),
            options: None,
        };
        assert_eq!(all(rt.store(), Access::Maintenance, &defs).unwrap().len(), Kind::ALL.len() + 2);
        // A label that must exist matches nothing: keelson's resources have no labels.
        let labelled = cosi::ListRequest {
            options: Some(cosi::ListOptions {
                label_query: vec![cosi::LabelQuery {
                    terms: vec![cosi::LabelTerm { key: "k".into(), ..Default::default() }],
                }],
                id_query: None,
            }),
            ..req.clone()
        };
        assert!(all(rt.store(), Access::Reader, &labelled).unwrap().is_empty());
        let regexp = cosi::ListRequest {
            options: Some(cosi::ListOptions {
                label_query: vec![],
                id_query: Some(cosi::IdQuery { regexp: ".*".into() }),
            }),
            ..req
        };
        assert_eq!(all(rt.store(), Access::Reader, &regexp).unwrap_err().code, code::UNIMPLEMENTED);
    }

    #[test]
    fn get_a_definition_by_its_lowercase_type() {
        let rt = store();
        let r = get(
            rt.store(),
            Access::Reader,
            &get_req("meta", "ResourceDefinitions.meta.cosi.dev", "addressstatuses.net.talos.dev"),
        )
        .unwrap();
        assert!(r.resource.is_some());
    }
}
