// SPDX-License-Identifier: Apache-2.0
//! Package `cosi.resource` (`proto/resource.proto`, `proto/state.proto`) and
//! `cosi.resource.meta` (`proto/meta.proto`): COSI's state service, which `talosctl get`
//! calls, and the resource definitions clients read to resolve type names.

use std::collections::BTreeMap;

/// The service name in HTTP/2 paths.
pub const SERVICE: &str = "cosi.resource.State";

/// The paths of the service's methods.
pub mod path {
    pub const GET: &str = "/cosi.resource.State/Get";
    pub const LIST: &str = "/cosi.resource.State/List";
    pub const CREATE: &str = "/cosi.resource.State/Create";
    pub const UPDATE: &str = "/cosi.resource.State/Update";
    pub const DESTROY: &str = "/cosi.resource.State/Destroy";
    pub const WATCH: &str = "/cosi.resource.State/Watch";
}

/// `google.protobuf.Timestamp`.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct Timestamp {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

/// A resource's identity and bookkeeping.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Metadata {
    #[prost(string, tag = "1")]
    pub namespace: String,
    #[prost(string, tag = "2")]
    pub r#type: String,
    #[prost(string, tag = "3")]
    pub id: String,
    /// Decimal.
    #[prost(string, tag = "4")]
    pub version: String,
    #[prost(string, tag = "5")]
    pub owner: String,
    /// `running` or `tearingDown`.
    #[prost(string, tag = "6")]
    pub phase: String,
    #[prost(message, optional, tag = "7")]
    pub created: Option<Timestamp>,
    #[prost(message, optional, tag = "8")]
    pub updated: Option<Timestamp>,
    #[prost(string, repeated, tag = "9")]
    pub finalizers: Vec<String>,
    #[prost(btree_map = "string, string", tag = "10")]
    pub labels: BTreeMap<String, String>,
    #[prost(btree_map = "string, string", tag = "11")]
    pub annotations: BTreeMap<String, String>,
}

/// A resource's content.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Spec {
    #[prost(bytes = "vec", tag = "1")]
    pub proto_spec: Vec<u8>,
    #[prost(string, tag = "2")]
    pub yaml_spec: String,
}

/// Metadata and spec.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Resource {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<Metadata>,
    #[prost(message, optional, tag = "2")]
    pub spec: Option<Spec>,
}

/// One condition on a label.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LabelTerm {
    #[prost(string, tag = "1")]
    pub key: String,
    /// `LabelTerm.Operation`: EXISTS 0, EQUAL 1, NOT_EXISTS 2, IN 3, LT 4, LTE 5,
    /// LT_NUMERIC 6, LTE_NUMERIC 7.
    #[prost(int32, tag = "2")]
    pub op: i32,
    #[prost(string, repeated, tag = "3")]
    pub value: Vec<String>,
    #[prost(bool, tag = "5")]
    pub invert: bool,
}

/// Terms, all of which must hold.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LabelQuery {
    #[prost(message, repeated, tag = "1")]
    pub terms: Vec<LabelTerm>,
}

/// Resources whose ID matches a regular expression.
#[derive(Clone, PartialEq, prost::Message)]
pub struct IdQuery {
    #[prost(string, tag = "1")]
    pub regexp: String,
}

/// What happened to a resource, as a watch reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum EventType {
    Created = 0,
    Updated = 1,
    Destroyed = 2,
    Bootstrapped = 3,
    Errored = 4,
    Noop = 5,
}

/// One watch event.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Event {
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
    #[prost(enumeration = "EventType", tag = "2")]
    pub event_type: i32,
    #[prost(message, optional, tag = "3")]
    pub old: Option<Resource>,
    #[prost(string, optional, tag = "4")]
    pub error: Option<String>,
    #[prost(bytes = "vec", optional, tag = "5")]
    pub bookmark: Option<Vec<u8>>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetRequest {
    #[prost(string, tag = "1")]
    pub namespace: String,
    #[prost(string, tag = "2")]
    pub r#type: String,
    #[prost(string, tag = "3")]
    pub id: String,
    #[prost(message, optional, tag = "4")]
    pub options: Option<GetOptions>,
}

#[derive(Clone, Copy, PartialEq, prost::Message)]
pub struct GetOptions {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetResponse {
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ListRequest {
    #[prost(string, tag = "1")]
    pub namespace: String,
    #[prost(string, tag = "2")]
    pub r#type: String,
    #[prost(message, optional, tag = "3")]
    pub options: Option<ListOptions>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ListOptions {
    #[prost(message, repeated, tag = "1")]
    pub label_query: Vec<LabelQuery>,
    #[prost(message, optional, tag = "2")]
    pub id_query: Option<IdQuery>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ListResponse {
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct CreateRequest {
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
    #[prost(message, optional, tag = "2")]
    pub options: Option<CreateOptions>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct CreateOptions {
    #[prost(string, tag = "1")]
    pub owner: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct CreateResponse {
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct UpdateRequest {
    #[prost(message, optional, tag = "2")]
    pub new_resource: Option<Resource>,
    #[prost(message, optional, tag = "3")]
    pub options: Option<UpdateOptions>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct UpdateOptions {
    #[prost(string, tag = "1")]
    pub owner: String,
    #[prost(string, optional, tag = "2")]
    pub expected_phase: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct UpdateResponse {
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct DestroyRequest {
    #[prost(string, tag = "1")]
    pub namespace: String,
    #[prost(string, tag = "2")]
    pub r#type: String,
    #[prost(string, tag = "3")]
    pub id: String,
    #[prost(message, optional, tag = "4")]
    pub options: Option<DestroyOptions>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct DestroyOptions {
    #[prost(string, tag = "1")]
    pub owner: String,
}

#[derive(Clone, Copy, PartialEq, prost::Message)]
pub struct DestroyResponse {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct WatchRequest {
    #[prost(string, tag = "1")]
    pub namespace: String,
    #[prost(string, tag = "2")]
    pub r#type: String,
    /// Set: one resource; unset: the whole kind.
    #[prost(string, optional, tag = "3")]
    pub id: Option<String>,
    #[prost(message, optional, tag = "4")]
    pub options: Option<WatchOptions>,
    /// 1 and up: the client understands BOOTSTRAPPED and ERRORED events.
    #[prost(int32, tag = "5")]
    pub api_version: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct WatchOptions {
    #[prost(bool, tag = "1")]
    pub bootstrap_contents: bool,
    #[prost(int32, tag = "2")]
    pub tail_events: i32,
    #[prost(message, repeated, tag = "3")]
    pub label_query: Vec<LabelQuery>,
    #[prost(message, optional, tag = "4")]
    pub id_query: Option<IdQuery>,
    #[prost(bool, tag = "5")]
    pub aggregated: bool,
    #[prost(bytes = "vec", optional, tag = "6")]
    pub start_from_bookmark: Option<Vec<u8>>,
    #[prost(bool, tag = "7")]
    pub bootstrap_bookmark: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct WatchResponse {
    /// Empty in the first message of a watch (the watch is in place).
    #[prost(message, repeated, tag = "1")]
    pub event: Vec<Event>,
}

/// Package `cosi.resource.meta`.
pub mod meta {
    /// The type of resource definitions.
    pub const RESOURCE_DEFINITION_TYPE: &str = "ResourceDefinitions.meta.cosi.dev";
    /// The type of namespaces.
    pub const NAMESPACE_TYPE: &str = "Namespaces.meta.cosi.dev";
    /// The namespace resource definitions and namespaces live in.
    pub const NAMESPACE: &str = "meta";

    /// How secret a type's resources are.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
    #[repr(i32)]
    pub enum Sensitivity {
        NonSensitive = 0,
        Sensitive = 1,
    }

    /// A column `talosctl get` prints for a type.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct PrintColumn {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(string, tag = "2")]
        pub json_path: String,
    }

    /// A namespace's spec.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct NamespaceSpec {
        #[prost(string, tag = "1")]
        pub description: String,
    }

    /// One resource type: its names, default namespace and sensitivity.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ResourceDefinitionSpec {
        #[prost(string, tag = "1")]
        pub resource_type: String,
        #[prost(string, tag = "2")]
        pub display_type: String,
        #[prost(string, tag = "3")]
        pub default_namespace: String,
        #[prost(string, repeated, tag = "4")]
        pub aliases: Vec<String>,
        #[prost(string, repeated, tag = "5")]
        pub all_aliases: Vec<String>,
        #[prost(message, repeated, tag = "6")]
        pub print_columns: Vec<PrintColumn>,
        #[prost(enumeration = "Sensitivity", tag = "7")]
        pub sensitivity: i32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn metadata_fields_carry_cosi_numbers() {
        let md = Metadata {
            namespace: "n".into(),
            r#type: "t".into(),
            id: "i".into(),
            version: "3".into(),
            owner: "o".into(),
            phase: "running".into(),
            created: Some(Timestamp { seconds: 1, nanos: 0 }),
            updated: None,
            finalizers: vec!["f".into()],
            labels: BTreeMap::from([("k".into(), "v".into())]),
            annotations: BTreeMap::new(),
        };
        let b = md.encode_to_vec();
        // namespace(1) "n", type(2) "t", id(3) "i", version(4) "3", owner(5) "o"
        assert_eq!(&b[..15], b"\x0a\x01n\x12\x01t\x1a\x01i\x22\x013\x2a\x01o");
        // phase(6), created(7) { seconds(1) 1 }, finalizers(9), labels(10) { key(1) value(2) }
        assert_eq!(&b[15..24], b"\x32\x07running");
        assert_eq!(&b[24..28], b"\x3a\x02\x08\x01");
        assert_eq!(&b[28..31], b"\x4a\x01f");
        assert_eq!(&b[31..], b"\x52\x06\x0a\x01k\x12\x01v");
        assert_eq!(Metadata::decode(b.as_slice()).ok(), Some(md));
    }

    #[test]
    fn a_watch_request_with_tail_events_and_an_id_decodes() {
        // namespace(1) "network", type(2) "T", id(3) "", options(4) { tail_events(2) 5 },
        // api_version(5) 1: an empty ID is still an ID (a watch of one resource).
        let b = b"\x0a\x07network\x12\x01T\x1a\x00\x22\x02\x10\x05\x28\x01";
        let req = WatchRequest::decode(&b[..]).unwrap();
        assert_eq!(req.namespace, "network");
        assert_eq!(req.id.as_deref(), Some(""));
        assert_eq!(req.options.map(|o| o.tail_events), Some(5));
        assert_eq!(req.api_version, 1);
    }

    #[test]
    fn an_event_carries_its_type_and_error() {
        let ev = Event {
            resource: None,
            event_type: EventType::Errored as i32,
            old: None,
            error: Some("x".into()),
            bookmark: None,
        };
        let reply = WatchResponse { event: vec![ev] };
        let b = reply.encode_to_vec();
        // event(1) { event_type(2) 4, error(4) "x" }
        assert_eq!(b, b"\x0a\x05\x10\x04\x22\x01x");
        // The first message of a watch is empty.
        assert!(WatchResponse::default().encode_to_vec().is_empty());
    }

    #[test]
    fn a_resource_definition_spec_round_trips() {
        let spec = meta::ResourceDefinitionSpec {
            resource_type: "AddressStatuses.net.talos.dev".into(),
            display_type: "AddressStatus".into(),
            default_namespace: "network".into(),
            aliases: vec!["address".into()],
            all_aliases: vec!["address".into(), "addressstatuses".into()],
            print_columns: vec![],
            sensitivity: meta::Sensitivity::Sensitive as i32,
        };
        let b = spec.encode_to_vec();
        assert_eq!(&b[..3], b"\x0a\x1dA");
        assert_eq!(b.last(), Some(&1)); // sensitivity(7) = 1 comes last
        assert_eq!(meta::ResourceDefinitionSpec::decode(b.as_slice()).ok(), Some(spec));
    }
}
