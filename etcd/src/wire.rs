// SPDX-License-Identifier: Apache-2.0
//! etcd's v3 messages as the HTTP/JSON gateway writes them (proto field names, `bytes` as
//! padded standard base64, 64-bit integers as decimal strings, zero values left out). Every
//! response field has a default, because the gateway omits zeros, `false` and empty lists.
//! Requests are serialised from these types only: the gateway silently ignores unknown
//! fields, so a misspelt `range_end` would turn a prefix operation into a single-key one.

use serde::{Deserialize, Serialize};

/// `bytes` fields: standard base64 with padding (the 3.4 gateway refuses anything else).
pub mod b64 {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(v))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        STANDARD.decode(s.as_bytes()).map_err(serde::de::Error::custom)
    }
}

/// A list of `bytes` (TimeToLive's `keys`).
pub mod b64_list {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer};

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Vec<u8>>, D::Error> {
        let list = Vec::<String>::deserialize(d)?;
        list.iter().map(|s| STANDARD.decode(s).map_err(serde::de::Error::custom)).collect()
    }
}

/// int64/uint64 fields: sent as decimal strings (exact in every JSON reader), read from a
/// string or a number.
pub mod int {
    use serde::de::{self, Visitor};
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &i64, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(v)
    }

    struct V;

    impl Visitor<'_> for V {
        type Value = i64;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a 64-bit integer as a string or a number")
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<i64, E> {
            Ok(v)
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<i64, E> {
            // uint64 fields (cluster and member IDs) above i64::MAX keep their bits.
            Ok(v as i64)
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<i64, E> {
            if let Ok(n) = v.parse::<i64>() {
                return Ok(n);
            }
            v.parse::<u64>().map(|n| n as i64).map_err(|_| E::custom("not a decimal integer"))
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
        d.deserialize_any(V)
    }
}

/// uint64 fields (member IDs) held as `i64` with their bits: sent as the unsigned decimal the
/// gateway's parser expects (a negative string is refused), read as [`int`] reads them.
pub mod uint {
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &i64, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&(*v as u64))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
        crate::wire::int::deserialize(d)
    }
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

fn is_false(v: &bool) -> bool {
    !*v
}

/// Every response's header.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct ResponseHeader {
    #[serde(with = "int")]
    pub cluster_id: i64,
    #[serde(with = "int")]
    pub member_id: i64,
    #[serde(with = "int")]
    pub revision: i64,
    #[serde(with = "int")]
    pub raft_term: i64,
}

/// A key and its metadata (`mvccpb.KeyValue`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct KeyValue {
    #[serde(with = "b64")]
    pub key: Vec<u8>,
    #[serde(with = "int")]
    pub create_revision: i64,
    #[serde(with = "int")]
    pub mod_revision: i64,
    /// Writes since creation: 1 after the create, 0 for a key that does not exist.
    #[serde(with = "int")]
    pub version: i64,
    #[serde(with = "b64")]
    pub value: Vec<u8>,
    #[serde(with = "int")]
    pub lease: i64,
}

/// `RangeRequest.sort_order`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum SortOrder {
    #[default]
    None,
    Ascend,
    Descend,
}

/// `RangeRequest.sort_target`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum SortTarget {
    #[default]
    Key,
    Version,
    Create,
    Mod,
    Value,
}

impl SortOrder {
    fn is_none(&self) -> bool {
        *self == Self::None
    }
}

impl SortTarget {
    fn is_key(&self) -> bool {
        *self == Self::Key
    }
}

/// `/v3/kv/range`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RangeRequest {
    #[serde(with = "b64")]
    pub key: Vec<u8>,
    #[serde(with = "b64", skip_serializing_if = "Vec::is_empty")]
    pub range_end: Vec<u8>,
    #[serde(with = "int", skip_serializing_if = "is_zero")]
    pub limit: i64,
    /// Read at this revision (0: the newest).
    #[serde(with = "int", skip_serializing_if = "is_zero")]
    pub revision: i64,
    #[serde(skip_serializing_if = "SortOrder::is_none")]
    pub sort_order: SortOrder,
    #[serde(skip_serializing_if = "SortTarget::is_key")]
    pub sort_target: SortTarget,
    #[serde(skip_serializing_if = "is_false")]
    pub serializable: bool,
    #[serde(skip_serializing_if = "is_false")]
    pub keys_only: bool,
    #[serde(skip_serializing_if = "is_false")]
    pub count_only: bool,
    #[serde(with = "int", skip_serializing_if = "is_zero")]
    pub max_create_revision: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct RangeResponse {
    pub header: ResponseHeader,
    pub kvs: Vec<KeyValue>,
    pub more: bool,
    #[serde(with = "int")]
    pub count: i64,
}

/// `/v3/kv/put`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PutRequest {
    #[serde(with = "b64")]
    pub key: Vec<u8>,
    #[serde(with = "b64")]
    pub value: Vec<u8>,
    #[serde(with = "int", skip_serializing_if = "is_zero")]
    pub lease: i64,
    #[serde(skip_serializing_if = "is_false")]
    pub prev_kv: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct PutResponse {
    pub header: ResponseHeader,
    pub prev_kv: Option<KeyValue>,
}

/// `/v3/kv/deleterange`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DeleteRangeRequest {
    #[serde(with = "b64")]
    pub key: Vec<u8>,
    #[serde(with = "b64", skip_serializing_if = "Vec::is_empty")]
    pub range_end: Vec<u8>,
    #[serde(skip_serializing_if = "is_false")]
    pub prev_kv: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct DeleteRangeResponse {
    pub header: ResponseHeader,
    #[serde(with = "int")]
    pub deleted: i64,
    pub prev_kvs: Vec<KeyValue>,
}

/// What a [`Compare`] looks at; the field holding the operand goes with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompareTarget {
    Version(i64),
    CreateRevision(i64),
    ModRevision(i64),
    Value(Vec<u8>),
    Lease(i64),
}

/// `Compare.result`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CompareResult {
    Equal,
    Greater,
    Less,
    NotEqual,
}

/// One guard of a transaction. A missing key compares as all zeros (so `Version == 0` and
/// `CreateRevision == 0` hold for it) and never equals a `Value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compare {
    pub key: Vec<u8>,
    pub result: CompareResult,
    pub target: CompareTarget,
}

impl Serialize for Compare {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use base64::Engine as _;
        use serde::ser::SerializeMap as _;
        let b64 = |v: &[u8]| base64::engine::general_purpose::STANDARD.encode(v);
        let mut m = s.serialize_map(Some(4))?;
        m.serialize_entry("key", &b64(&self.key))?;
        m.serialize_entry("result", &self.result)?;
        match &self.target {
            CompareTarget::Version(v) => {
                m.serialize_entry("target", "VERSION")?;
                m.serialize_entry("version", &v.to_string())?;
            }
            CompareTarget::CreateRevision(v) => {
                m.serialize_entry("target", "CREATE")?;
                m.serialize_entry("create_revision", &v.to_string())?;
            }
            CompareTarget::ModRevision(v) => {
                m.serialize_entry("target", "MOD")?;
                m.serialize_entry("mod_revision", &v.to_string())?;
            }
            CompareTarget::Value(v) => {
                m.serialize_entry("target", "VALUE")?;
                m.serialize_entry("value", &b64(v))?;
            }
            CompareTarget::Lease(v) => {
                m.serialize_entry("target", "LEASE")?;
                m.serialize_entry("lease", &v.to_string())?;
            }
        }
        m.end()
    }
}

impl Compare {
    pub fn version(key: &[u8], result: CompareResult, v: i64) -> Self {
        Self { key: key.to_vec(), result, target: CompareTarget::Version(v) }
    }

    pub fn create_revision(key: &[u8], result: CompareResult, v: i64) -> Self {
        Self { key: key.to_vec(), result, target: CompareTarget::CreateRevision(v) }
    }

    pub fn mod_revision(key: &[u8], result: CompareResult, v: i64) -> Self {
        Self { key: key.to_vec(), result, target: CompareTarget::ModRevision(v) }
    }

    pub fn value(key: &[u8], result: CompareResult, v: &[u8]) -> Self {
        Self { key: key.to_vec(), result, target: CompareTarget::Value(v.to_vec()) }
    }
}

/// One operation of a transaction branch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum RequestOp {
    #[serde(rename = "request_range")]
    Range(RangeRequest),
    #[serde(rename = "request_put")]
    Put(PutRequest),
    #[serde(rename = "request_delete_range")]
    DeleteRange(DeleteRangeRequest),
    #[serde(rename = "request_txn")]
    Txn(TxnRequest),
}

/// `/v3/kv/txn`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TxnRequest {
    pub compare: Vec<Compare>,
    pub success: Vec<RequestOp>,
    pub failure: Vec<RequestOp>,
}

/// One result of the branch that ran, in the order of its operations.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub enum ResponseOp {
    #[serde(rename = "response_range")]
    Range(RangeResponse),
    #[serde(rename = "response_put")]
    Put(PutResponse),
    #[serde(rename = "response_delete_range")]
    DeleteRange(DeleteRangeResponse),
    #[serde(rename = "response_txn")]
    Txn(TxnResponse),
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct TxnResponse {
    pub header: ResponseHeader,
    /// Absent (false) when a compare failed and the failure branch ran.
    pub succeeded: bool,
    pub responses: Vec<ResponseOp>,
}

impl TxnResponse {
    /// The `i`th result, when it is a range.
    pub fn range(&self, i: usize) -> Option<&RangeResponse> {
        match self.responses.get(i) {
            Some(ResponseOp::Range(r)) => Some(r),
            _ => None,
        }
    }
}

/// `/v3/lease/grant`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LeaseGrantRequest {
    #[serde(rename = "TTL", with = "int")]
    pub ttl: i64,
    #[serde(rename = "ID", with = "int", skip_serializing_if = "is_zero")]
    pub id: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct LeaseGrantResponse {
    pub header: ResponseHeader,
    #[serde(rename = "ID", with = "int")]
    pub id: i64,
    #[serde(rename = "TTL", with = "int")]
    pub ttl: i64,
    pub error: String,
}

/// `/v3/lease/keepalive` and `/v3/lease/revoke` take just the ID.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LeaseId {
    #[serde(rename = "ID", with = "int")]
    pub id: i64,
}

/// One keep-alive answer. TTL 0 (left out) means the lease is gone: the server answers an
/// unknown lease with 200 and no TTL, not with an error.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct LeaseKeepAliveResponse {
    pub header: ResponseHeader,
    #[serde(rename = "ID", with = "int")]
    pub id: i64,
    #[serde(rename = "TTL", with = "int")]
    pub ttl: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct LeaseRevokeResponse {
    pub header: ResponseHeader,
}

/// `/v3/lease/timetolive`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LeaseTimeToLiveRequest {
    #[serde(rename = "ID", with = "int")]
    pub id: i64,
    #[serde(skip_serializing_if = "is_false")]
    pub keys: bool,
}

/// TTL -1 for a lease that does not exist.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct LeaseTimeToLiveResponse {
    pub header: ResponseHeader,
    #[serde(rename = "ID", with = "int")]
    pub id: i64,
    #[serde(rename = "TTL", with = "int")]
    pub ttl: i64,
    #[serde(rename = "grantedTTL", with = "int")]
    pub granted_ttl: i64,
    #[serde(with = "b64_list")]
    pub keys: Vec<Vec<u8>>,
}

/// `WatchCreateRequest.filters`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum WatchFilter {
    NoPut,
    NoDelete,
}

/// `/v3/watch`, one `create_request`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WatchCreateRequest {
    #[serde(with = "b64")]
    pub key: Vec<u8>,
    #[serde(with = "b64", skip_serializing_if = "Vec::is_empty")]
    pub range_end: Vec<u8>,
    /// Inclusive; 0 means "from now".
    #[serde(with = "int", skip_serializing_if = "is_zero")]
    pub start_revision: i64,
    #[serde(skip_serializing_if = "is_false")]
    pub progress_notify: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub filters: Vec<WatchFilter>,
    #[serde(skip_serializing_if = "is_false")]
    pub prev_kv: bool,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct WatchRequest<'a> {
    pub create_request: &'a WatchCreateRequest,
}

/// `Event.type`: PUT is the zero value, so a PUT event has no `type`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum EventType {
    #[default]
    Put,
    Delete,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Event {
    #[serde(rename = "type")]
    pub kind: EventType,
    /// For a DELETE only the key and the deletion's revision (`mod_revision`).
    pub kv: KeyValue,
    pub prev_kv: Option<KeyValue>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct WatchResponse {
    pub header: ResponseHeader,
    #[serde(with = "int")]
    pub watch_id: i64,
    pub created: bool,
    pub canceled: bool,
    /// Set with `canceled` when the start revision was compacted away.
    #[serde(with = "int")]
    pub compact_revision: i64,
    pub cancel_reason: String,
    pub events: Vec<Event>,
}

/// `/v3/maintenance/status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct StatusResponse {
    pub header: ResponseHeader,
    pub version: String,
    #[serde(rename = "dbSize", with = "int")]
    pub db_size: i64,
    #[serde(with = "int")]
    pub leader: i64,
    #[serde(rename = "raftIndex", with = "int")]
    pub raft_index: i64,
    #[serde(rename = "raftTerm", with = "int")]
    pub raft_term: i64,
    pub errors: Vec<String>,
    /// etcd 3.4 on.
    #[serde(rename = "dbSizeInUse", with = "int")]
    pub db_size_in_use: i64,
    #[serde(rename = "raftAppliedIndex", with = "int")]
    pub raft_applied_index: i64,
    #[serde(rename = "isLearner")]
    pub is_learner: bool,
}

/// `/v3/maintenance/transfer-leadership` (sent to the leader).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MoveLeaderRequest {
    #[serde(rename = "targetID", with = "uint")]
    pub target_id: i64,
}

/// The answer to a leadership transfer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct MoveLeaderResponse {
    pub header: ResponseHeader,
}

/// `/v3/kv/compaction`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CompactionRequest {
    #[serde(with = "int")]
    pub revision: i64,
    #[serde(skip_serializing_if = "is_false")]
    pub physical: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct HeaderOnly {
    pub header: ResponseHeader,
}

/// `GET /health`: `"true"` on 3.4, with a `reason` from 3.5.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Health {
    pub health: String,
    pub reason: String,
}

/// One cluster member (`etcdserverpb.Member`). A member added but not started yet has no
/// name and no client URLs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Member {
    #[serde(rename = "ID", with = "uint")]
    pub id: i64,
    pub name: String,
    #[serde(rename = "peerURLs")]
    pub peer_urls: Vec<String>,
    #[serde(rename = "clientURLs")]
    pub client_urls: Vec<String>,
    #[serde(rename = "isLearner")]
    pub is_learner: bool,
}

/// `/v3/cluster/member/list`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct MemberListResponse {
    pub header: ResponseHeader,
    pub members: Vec<Member>,
}

/// `/v3/cluster/member/add`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MemberAddRequest {
    #[serde(rename = "peerURLs")]
    pub peer_urls: Vec<String>,
    #[serde(rename = "isLearner", skip_serializing_if = "is_false")]
    pub is_learner: bool,
}

/// The answer to an add: the new member and the whole list (the new one included).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct MemberAddResponse {
    pub header: ResponseHeader,
    pub member: Member,
    pub members: Vec<Member>,
}

/// `/v3/cluster/member/remove` and `/v3/cluster/member/promote`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MemberIdRequest {
    #[serde(rename = "ID", with = "uint")]
    pub id: i64,
}
