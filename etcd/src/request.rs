// SPDX-License-Identifier: Apache-2.0
//! What to send for each operation: a gateway path and a JSON body, built only from the typed
//! messages in [`crate::wire`]. A [`Call`] knows whether its answer is one message or a
//! stream of frames; [`crate::http::post`] puts it on the wire.

use serde::Serialize;

use crate::wire::*;

/// One request to the gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub path: &'static str,
    pub body: Vec<u8>,
    /// True when the answer is a stream of `{"result":…}` frames (watch, keep-alive).
    pub streaming: bool,
}

impl Call {
    fn unary<T: Serialize>(path: &'static str, msg: &T) -> Self {
        Self { path, body: to_json(msg), streaming: false }
    }

    fn stream<T: Serialize>(path: &'static str, msg: &T) -> Self {
        Self { path, body: to_json(msg), streaming: true }
    }

    /// The HTTP/1.1 request for `host` (the `Host` header: `address:port`).
    pub fn to_http(&self, host: &str) -> Vec<u8> {
        crate::http::post(host, self.path, &self.body)
    }
}

/// The messages here are plain structs of strings, numbers and lists, which serde_json always
/// serialises; the fallback only keeps this path free of a panic.
fn to_json<T: Serialize>(msg: &T) -> Vec<u8> {
    serde_json::to_vec(msg).unwrap_or_else(|_| b"{}".to_vec())
}

/// The end of the range holding every key that starts with `prefix` (etcd's `getPrefix`):
/// the prefix with its last byte below 0xff incremented and the rest cut off; `\0` ("every
/// key from here on") when there is no such byte.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

pub fn range(r: &RangeRequest) -> Call {
    Call::unary("/v3/kv/range", r)
}

/// Every key under `prefix`, in key order.
pub fn range_prefix(prefix: &[u8], revision: i64) -> RangeRequest {
    RangeRequest {
        key: prefix.to_vec(),
        range_end: prefix_end(prefix),
        revision,
        ..Default::default()
    }
}

/// One key.
pub fn range_key(key: &[u8]) -> RangeRequest {
    RangeRequest { key: key.to_vec(), ..Default::default() }
}

pub fn put(r: &PutRequest) -> Call {
    Call::unary("/v3/kv/put", r)
}

pub fn delete_range(r: &DeleteRangeRequest) -> Call {
    Call::unary("/v3/kv/deleterange", r)
}

pub fn txn(r: &TxnRequest) -> Call {
    Call::unary("/v3/kv/txn", r)
}

pub fn compact(revision: i64) -> Call {
    Call::unary("/v3/kv/compaction", &CompactionRequest { revision, physical: true })
}

pub fn lease_grant(ttl_secs: i64, id: i64) -> Call {
    Call::unary("/v3/lease/grant", &LeaseGrantRequest { ttl: ttl_secs, id })
}

/// One renewal: one object in, one frame out (the gateway answers once the body is in).
pub fn lease_keep_alive(id: i64) -> Call {
    Call::stream("/v3/lease/keepalive", &LeaseId { id })
}

pub fn lease_revoke(id: i64) -> Call {
    Call::unary("/v3/lease/revoke", &LeaseId { id })
}

pub fn lease_time_to_live(id: i64, keys: bool) -> Call {
    Call::unary("/v3/lease/timetolive", &LeaseTimeToLiveRequest { id, keys })
}

/// One watch on a connection of its own (over HTTP/1.1 a watch cannot be added to or
/// cancelled on a running stream; closing the connection cancels it).
pub fn watch(w: &WatchCreateRequest) -> Call {
    Call::stream("/v3/watch", &WatchRequest { create_request: w })
}

pub fn status() -> Call {
    Call { path: "/v3/maintenance/status", body: b"{}".to_vec(), streaming: false }
}

pub fn member_list() -> Call {
    Call { path: "/v3/cluster/member/list", body: b"{}".to_vec(), streaming: false }
}

pub fn member_add(peer_urls: &[String], is_learner: bool) -> Call {
    Call::unary(
        "/v3/cluster/member/add",
        &MemberAddRequest { peer_urls: peer_urls.to_vec(), is_learner },
    )
}

pub fn member_remove(id: i64) -> Call {
    Call::unary("/v3/cluster/member/remove", &MemberIdRequest { id })
}

/// Hand raft leadership to member `target` (only the leader accepts it).
pub fn move_leader(target: i64) -> Call {
    Call::unary("/v3/maintenance/transfer-leadership", &MoveLeaderRequest { target_id: target })
}

pub fn member_promote(id: i64) -> Call {
    Call::unary("/v3/cluster/member/promote", &MemberIdRequest { id })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(c: &Call) -> serde_json::Value {
        serde_json::from_slice(&c.body).unwrap()
    }

    #[test]
    fn member_calls_send_ids_unsigned_and_learners_flagged() {
        let add = member_add(&["https://10.0.0.2:2380".to_owned()], true);
        assert_eq!(add.path, "/v3/cluster/member/add");
        assert_eq!(
            json(&add),
            serde_json::json!({"peerURLs": ["https://10.0.0.2:2380"], "isLearner": true})
        );
        // A member ID above i64::MAX is kept in an i64 by its bits and goes out unsigned.
        let id = 0xf1e2_d3c4_b5a6_9788_u64 as i64;
        assert_eq!(json(&member_promote(id)), serde_json::json!({"ID": "17429726349691885448"}));
        assert_eq!(member_remove(5).path, "/v3/cluster/member/remove");
    }

    #[test]
    fn prefix_ends_as_etcd_computes_them() {
        assert_eq!(prefix_end(b"/net/networkids/"), b"/net/networkids0");
        assert_eq!(
            prefix_end(b"talos:v1:vip:election:10.0.0.100/"),
            b"talos:v1:vip:election:10.0.0.1000"
        );
        assert_eq!(prefix_end(b"ab\xff"), b"ac");
        assert_eq!(prefix_end(b"\xff\xff"), b"\0");
        assert_eq!(prefix_end(b""), b"\0");
    }

    #[test]
    fn requests_use_proto_names_padded_base64_and_string_integers() {
        let r = RangeRequest {
            sort_order: SortOrder::Descend,
            sort_target: SortTarget::Create,
            limit: 1,
            max_create_revision: 27,
            ..range_prefix(b"e/", 0)
        };
        assert_eq!(
            json(&range(&r)),
            serde_json::json!({"key":"ZS8=","range_end":"ZTA=","limit":"1","sort_order":"DESCEND","sort_target":"CREATE","max_create_revision":"27"})
        );
        assert_eq!(json(&range(&range_key(b"x"))), serde_json::json!({"key":"eA=="}));
        let t = TxnRequest {
            compare: vec![Compare::create_revision(b"/n/5", CompareResult::Equal, 0)],
            success: vec![RequestOp::Put(PutRequest {
                key: b"/n/5".to_vec(),
                value: b"node-a".to_vec(),
                lease: 12,
                ..Default::default()
            })],
            failure: vec![RequestOp::Range(range_key(b"/n/5"))],
        };
        assert_eq!(
            json(&txn(&t)),
            serde_json::json!({
                "compare":[{"key":"L24vNQ==","result":"EQUAL","target":"CREATE","create_revision":"0"}],
                "success":[{"request_put":{"key":"L24vNQ==","value":"bm9kZS1h","lease":"12"}}],
                "failure":[{"request_range":{"key":"L24vNQ=="}}]
            })
        );
        let c = Compare::version(b"k", CompareResult::NotEqual, 3);
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            serde_json::json!({"key":"aw==","result":"NOT_EQUAL","target":"VERSION","version":"3"})
        );
        let w = WatchCreateRequest {
            key: b"k".to_vec(),
            start_revision: 9,
            filters: vec![WatchFilter::NoPut],
            ..Default::default()
        };
        let c = watch(&w);
        assert!(c.streaming);
        assert_eq!(
            json(&c),
            serde_json::json!({"create_request":{"key":"aw==","start_revision":"9","filters":["NOPUT"]}})
        );
        assert_eq!(json(&lease_grant(10, 0)), serde_json::json!({"TTL":"10"}));
        assert_eq!(json(&lease_keep_alive(-5)), serde_json::json!({"ID":"-5"}));
    }
}
