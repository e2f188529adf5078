// SPDX-License-Identifier: Apache-2.0
//! A leader election on a key prefix, without I/O, in the queue etcd's Go `concurrency`
//! package keeps, so keelson nodes and Talos nodes (whose VIP election is the name
//! `talos:v1:vip:election:<ip>`) wait in the same line:
//!
//! - a candidate's key is `<name>/<lease ID in lowercase hex>`, bound to its lease, written
//!   only if absent (a transaction on `create_revision == 0`); its create revision is its place;
//! - the leader is the key with the lowest create revision; a candidate waits for the deletion
//!   of the key just before its own (one watch on one key, no thundering herd), then looks
//!   again;
//! - resigning deletes the key only while it is still the one this campaign created.
//!
//! Unlike the Go code, every check also reads the candidate's own key in the same
//! transaction: a candidate whose lease expired while it waited has lost, it has not won.
//!
//! The machine says what to send ([`Step::Send`]: always a transaction) or what to wait for
//! ([`Step::WatchDelete`]); the caller does the I/O and hands the answers back.

use crate::request::{self, prefix_end, range_key, Call};
use crate::wire::*;

/// What the caller does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Send this transaction and pass its answer to [`Election::answered`].
    Send(Call),
    /// Watch `key` from `start_revision` and call [`Election::predecessor_deleted`] on its
    /// DELETE (or when the watch fails: the check is simply made again).
    WatchDelete { key: Vec<u8>, start_revision: i64 },
    /// This candidate leads (its key is the oldest under the prefix).
    Elected,
    /// The campaign ended without leading.
    Lost(Lost),
}

/// Why a campaign ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Lost {
    /// The candidate's key disappeared (its lease expired or was revoked, or it was deleted).
    #[error("the candidate key is gone (lease expired or key deleted)")]
    KeyGone,
    /// An answer that does not fit the request (a server bug or a hostile server).
    #[error("unexpected answer from etcd")]
    BadAnswer,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Idle,
    Creating,
    Proclaiming,
    Checking,
    Waiting,
    Leader,
    Done,
}

/// The current leader as read from the prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leader {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    pub create_revision: i64,
    pub lease: i64,
}

/// One candidacy.
#[derive(Debug, Clone)]
pub struct Election {
    prefix: Vec<u8>,
    key: Vec<u8>,
    value: Vec<u8>,
    lease: i64,
    rev: i64,
    state: State,
    /// The leader's value as the last check read it (a waiting candidate's view of who holds).
    leader_value: Option<Vec<u8>>,
}

/// `<name>/`: the prefix all candidates of the election `name` share.
pub fn prefix(name: &[u8]) -> Vec<u8> {
    let mut p = name.to_vec();
    p.push(b'/');
    p
}

/// The candidate key of `lease` in election `name` (Go's `%x` of the int64 lease ID: a
/// sign and the magnitude, though etcd only grants positive IDs).
pub fn candidate_key(name: &[u8], lease: i64) -> Vec<u8> {
    let mut k = prefix(name);
    let sign = if lease < 0 { "-" } else { "" };
    k.extend_from_slice(format!("{sign}{:x}", lease.unsigned_abs()).as_bytes());
    k
}

/// The range that finds the leader: the oldest key under the prefix.
pub fn leader_query(name: &[u8]) -> Call {
    request::range(&oldest(&prefix(name)))
}

/// The oldest key under `prefix` (the leader).
fn oldest(prefix: &[u8]) -> RangeRequest {
    RangeRequest {
        key: prefix.to_vec(),
        range_end: prefix_end(prefix),
        limit: 1,
        sort_order: SortOrder::Ascend,
        sort_target: SortTarget::Create,
        ..Default::default()
    }
}

/// The leader in [`leader_query`]'s answer (none when nobody campaigns).
pub fn leader_of(r: &RangeResponse) -> Option<Leader> {
    r.kvs.first().map(|kv| Leader {
        key: kv.key.clone(),
        value: kv.value.clone(),
        create_revision: kv.create_revision,
        lease: kv.lease,
    })
}

/// Every candidate key of election `name`, oldest first (for [`stale_candidates`]).
pub fn candidates_query(name: &[u8]) -> Call {
    let p = prefix(name);
    request::range(&RangeRequest {
        key: p.clone(),
        range_end: prefix_end(&p),
        sort_order: SortOrder::Ascend,
        sort_target: SortTarget::Create,
        ..Default::default()
    })
}

/// Restart hygiene (as Talos's VIP operator does): keys proclaiming `value` under a lease
/// other than `lease` are an earlier life of this candidate, and would hold the queue until
/// their lease expires. One delete per key, each guarded by the key's create revision so a
/// key re-created meanwhile is left alone.
pub fn stale_candidates(r: &RangeResponse, value: &[u8], lease: i64) -> Vec<Call> {
    r.kvs
        .iter()
        .filter(|kv| kv.value == value && kv.lease != lease)
        .map(|kv| {
            request::txn(&TxnRequest {
                compare: vec![Compare::create_revision(
                    &kv.key,
                    CompareResult::Equal,
                    kv.create_revision,
                )],
                success: vec![RequestOp::DeleteRange(DeleteRangeRequest {
                    key: kv.key.clone(),
                    ..Default::default()
                })],
                failure: vec![],
            })
        })
        .collect()
}

impl Election {
    /// A candidate in election `name` with `lease` (granted and kept alive by the caller),
    /// proclaiming `value`.
    pub fn new(name: &[u8], lease: i64, value: &[u8]) -> Self {
        Self {
            prefix: prefix(name),
            key: candidate_key(name, lease),
            value: value.to_vec(),
            lease,
            rev: 0,
            state: State::Idle,
            leader_value: None,
        }
    }

    pub fn key(&self) -> &[u8] {
        &self.key
    }

    pub fn lease(&self) -> i64 {
        self.lease
    }

    /// The key's create revision (0 before the key was written).
    pub fn revision(&self) -> i64 {
        self.rev
    }

    pub fn is_leader(&self) -> bool {
        self.state == State::Leader
    }

    /// The leader's value (its hostname, for a VIP) as the last check read it: known while
    /// waiting, refreshed by every look at the predecessor at no extra request.
    pub fn leader_value(&self) -> Option<&[u8]> {
        self.leader_value.as_deref()
    }

    /// Start: write the key if absent, else read it (a second campaign on the same lease
    /// takes its old place).
    pub fn campaign(&mut self) -> Step {
        self.state = State::Creating;
        Step::Send(request::txn(&TxnRequest {
            compare: vec![Compare::create_revision(&self.key, CompareResult::Equal, 0)],
            success: vec![RequestOp::Put(self.put(&self.value))],
            failure: vec![RequestOp::Range(range_key(&self.key))],
        }))
    }

    fn put(&self, value: &[u8]) -> PutRequest {
        PutRequest {
            key: self.key.clone(),
            value: value.to_vec(),
            lease: self.lease,
            prev_kv: false,
        }
    }

    /// Write `value` as long as the key is still this campaign's. The answer's `succeeded`
    /// says whether it was.
    pub fn proclaim(&mut self, value: &[u8]) -> Call {
        self.value = value.to_vec();
        request::txn(&self.guarded(RequestOp::Put(self.put(value))))
    }

    /// Delete the key if it is still this campaign's (a stale one is left alone). The caller
    /// sends it; the campaign is over either way.
    pub fn resign(&mut self) -> Call {
        self.state = State::Done;
        let del = DeleteRangeRequest { key: self.key.clone(), ..Default::default() };
        request::txn(&self.guarded(RequestOp::DeleteRange(del)))
    }

    fn guarded(&self, op: RequestOp) -> TxnRequest {
        TxnRequest {
            compare: vec![Compare::create_revision(&self.key, CompareResult::Equal, self.rev)],
            success: vec![op],
            failure: vec![],
        }
    }

    /// One transaction reading the key just before ours, our own key and the leader (the
    /// oldest key, for [`Election::leader_value`]), all at the same revision.
    fn check(&mut self) -> Step {
        self.state = State::Checking;
        let predecessor = RangeRequest {
            key: self.prefix.clone(),
            range_end: prefix_end(&self.prefix),
            limit: 1,
            sort_order: SortOrder::Descend,
            sort_target: SortTarget::Create,
            max_create_revision: self.rev.saturating_sub(1),
            ..Default::default()
        };
        Step::Send(request::txn(&TxnRequest {
            compare: vec![],
            success: vec![
                RequestOp::Range(predecessor),
                RequestOp::Range(range_key(&self.key)),
                RequestOp::Range(oldest(&self.prefix)),
            ],
            failure: vec![],
        }))
    }

    /// The watch saw the predecessor go (or failed): look again.
    pub fn predecessor_deleted(&mut self) -> Step {
        if self.state == State::Waiting {
            self.check()
        } else {
            Step::Lost(Lost::BadAnswer)
        }
    }

    /// The answer to the last [`Step::Send`].
    pub fn answered(&mut self, r: &TxnResponse) -> Step {
        match self.state {
            State::Creating => {
                if r.succeeded {
                    self.rev = r.header.revision;
                    return self.check();
                }
                let Some(kv) = r.range(0).and_then(|r| r.kvs.first()) else {
                    // Deleted between the compare and the read? Both ran atomically, so not.
                    self.state = State::Done;
                    return Step::Lost(Lost::BadAnswer);
                };
                self.rev = kv.create_revision;
                if kv.value != self.value {
                    self.state = State::Proclaiming;
                    let value = self.value.clone();
                    return Step::Send(self.proclaim(&value));
                }
                self.check()
            }
            State::Proclaiming => {
                if r.succeeded {
                    self.check()
                } else {
                    self.state = State::Done;
                    Step::Lost(Lost::KeyGone)
                }
            }
            State::Checking => {
                let (Some(pred), Some(own)) = (r.range(0), r.range(1)) else {
                    self.state = State::Done;
                    return Step::Lost(Lost::BadAnswer);
                };
                // An etcd that answers only two ranges (not ours) leaves the leader unknown.
                self.leader_value =
                    r.range(2).and_then(|l| l.kvs.first()).map(|kv| kv.value.clone());
                if own.kvs.first().is_none_or(|kv| kv.create_revision != self.rev) {
                    self.state = State::Done;
                    return Step::Lost(Lost::KeyGone);
                }
                match pred.kvs.first() {
                    None => {
                        self.state = State::Leader;
                        Step::Elected
                    }
                    Some(kv) if kv.create_revision < self.rev => {
                        self.state = State::Waiting;
                        Step::WatchDelete {
                            key: kv.key.clone(),
                            start_revision: r.header.revision.saturating_add(1),
                        }
                    }
                    Some(_) => {
                        self.state = State::Done;
                        Step::Lost(Lost::BadAnswer)
                    }
                }
            }
            _ => Step::Lost(Lost::BadAnswer),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn_body(step: &Step) -> serde_json::Value {
        match step {
            Step::Send(c) => {
                assert_eq!(c.path, "/v3/kv/txn");
                serde_json::from_slice(&c.body).unwrap()
            }
            other => panic!("expected a txn, got {other:?}"),
        }
    }

    fn kv(key: &[u8], create: i64, value: &[u8]) -> KeyValue {
        KeyValue {
            key: key.to_vec(),
            create_revision: create,
            mod_revision: create,
            version: 1,
            value: value.to_vec(),
            lease: 0,
        }
    }

    fn ranges(revision: i64, groups: &[&[KeyValue]]) -> TxnResponse {
        TxnResponse {
            header: ResponseHeader { revision, ..Default::default() },
            succeeded: true,
            responses: groups
                .iter()
                .map(|kvs| {
                    ResponseOp::Range(RangeResponse { kvs: kvs.to_vec(), ..Default::default() })
                })
                .collect(),
        }
    }

    #[test]
    fn keys_are_the_name_a_slash_and_the_lease_in_lowercase_hex() {
        let name = b"talos:v1:vip:election:10.0.0.100";
        assert_eq!(
            candidate_key(name, 0x2040a2039e52bb27),
            b"talos:v1:vip:election:10.0.0.100/2040a2039e52bb27"
        );
        assert_eq!(candidate_key(b"e", -31), b"e/-1f");
        let q: serde_json::Value = serde_json::from_slice(&leader_query(name).body).unwrap();
        assert_eq!(q["sort_order"], "ASCEND");
        assert_eq!(q["sort_target"], "CREATE");
        assert_eq!(q["limit"], "1");
    }

    #[test]
    fn a_candidate_waits_for_its_predecessor_then_leads() {
        let mut e = Election::new(b"e", 0x10, b"node-b");
        let body = txn_body(&e.campaign());
        assert_eq!(body["compare"][0]["target"], "CREATE");
        assert_eq!(body["success"][0]["request_put"]["lease"], "16");
        // Created at revision 28.
        let created = TxnResponse {
            header: ResponseHeader { revision: 28, ..Default::default() },
            succeeded: true,
            ..Default::default()
        };
        let check = txn_body(&e.answered(&created));
        assert_eq!(check["success"][0]["request_range"]["max_create_revision"], "27");
        assert_eq!(check["success"][0]["request_range"]["sort_order"], "DESCEND");
        // Predecessor e/f at 27: watch it from the next revision.
        assert_eq!(check["success"][2]["request_range"]["sort_order"], "ASCEND");
        assert_eq!(check["success"][2]["request_range"]["limit"], "1");
        let step = e.answered(&ranges(
            30,
            &[&[kv(b"e/f", 27, b"a")], &[kv(b"e/10", 28, b"node-b")], &[kv(b"e/e", 20, b"cp-1")]],
        ));
        assert_eq!(step, Step::WatchDelete { key: b"e/f".to_vec(), start_revision: 31 });
        assert!(!e.is_leader());
        assert_eq!(e.leader_value(), Some(&b"cp-1"[..]));
        txn_body(&e.predecessor_deleted());
        assert_eq!(e.answered(&ranges(32, &[&[], &[kv(b"e/10", 28, b"node-b")]])), Step::Elected);
        assert!(e.is_leader());
        let resign = txn_body(&Step::Send(e.resign()));
        assert_eq!(resign["compare"][0]["create_revision"], "28");
        assert!(resign["success"][0]["request_delete_range"].is_object());
    }

    #[test]
    fn a_candidate_whose_key_expired_while_waiting_has_lost() {
        let mut e = Election::new(b"e", 1, b"x");
        e.campaign();
        let created = TxnResponse {
            header: ResponseHeader { revision: 5, ..Default::default() },
            succeeded: true,
            ..Default::default()
        };
        e.answered(&created);
        assert_eq!(e.answered(&ranges(9, &[&[], &[]])), Step::Lost(Lost::KeyGone));
        // Same key re-created by someone else (another create revision): not ours either.
        let mut e = Election::new(b"e", 1, b"x");
        e.campaign();
        e.answered(&created);
        assert_eq!(
            e.answered(&ranges(9, &[&[], &[kv(b"e/1", 8, b"x")]])),
            Step::Lost(Lost::KeyGone)
        );
    }

    #[test]
    fn a_second_campaign_on_the_same_lease_keeps_its_place_and_proclaims() {
        let mut e = Election::new(b"e", 1, b"new");
        e.campaign();
        let existing = TxnResponse {
            header: ResponseHeader { revision: 40, ..Default::default() },
            succeeded: false,
            responses: vec![ResponseOp::Range(RangeResponse {
                kvs: vec![kv(b"e/1", 12, b"old")],
                ..Default::default()
            })],
        };
        let proclaim = txn_body(&e.answered(&existing));
        assert_eq!(proclaim["compare"][0]["create_revision"], "12");
        assert_eq!(proclaim["success"][0]["request_put"]["value"], "bmV3");
        let ok = TxnResponse { succeeded: true, ..Default::default() };
        txn_body(&e.answered(&ok));
        assert_eq!(e.revision(), 12);
    }

    #[test]
    fn only_this_candidates_keys_under_other_leases_are_stale() {
        let mut mine = kv(b"e/1", 3, b"me");
        mine.lease = 1;
        let mut ghost = kv(b"e/2", 5, b"me");
        ghost.lease = 2;
        let mut other = kv(b"e/3", 7, b"you");
        other.lease = 3;
        let r = RangeResponse { kvs: vec![mine, ghost, other], ..Default::default() };
        let calls = stale_candidates(&r, b"me", 1);
        assert_eq!(calls.len(), 1);
        let body: serde_json::Value = serde_json::from_slice(&calls[0].body).unwrap();
        assert_eq!(body["compare"][0]["key"], "ZS8y");
        assert_eq!(body["compare"][0]["create_revision"], "5");
        assert!(body["success"][0]["request_delete_range"].is_object());
    }

    #[test]
    fn nonsense_answers_end_the_campaign_without_a_panic() {
        let mut e = Election::new(b"e", 1, b"x");
        e.campaign();
        assert_eq!(e.answered(&TxnResponse::default()), Step::Lost(Lost::BadAnswer));
        let mut e = Election::new(b"e", 1, b"x");
        e.campaign();
        let created = TxnResponse {
            header: ResponseHeader { revision: 5, ..Default::default() },
            succeeded: true,
            ..Default::default()
        };
        e.answered(&created);
        // A "predecessor" newer than us is not one.
        let r = ranges(9, &[&[kv(b"e/2", 7, b"y")], &[kv(b"e/1", 5, b"x")]]);
        assert_eq!(e.answered(&r), Step::Lost(Lost::BadAnswer));
        assert_eq!(e.predecessor_deleted(), Step::Lost(Lost::BadAnswer));
        assert_eq!(leader_of(&RangeResponse::default()), None);
    }
}
