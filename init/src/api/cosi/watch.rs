// SPDX-License-Identifier: Apache-2.0
//! `Watch`, as cosi-project/runtime's state server answers it: an empty first message (the
//! watch is in place); then, for a watch of a kind, every resource as CREATED and one
//! BOOTSTRAPPED when `bootstrap_contents` is set, or the last `tail_events` events; for a
//! watch of one ID, its current state (CREATED, or DESTROYED when it does not exist) or its
//! last `tail_events` events; then each change as it happens. Clients below `api_version` 1
//! get no BOOTSTRAPPED or ERRORED events.
//!
//! Changes are kept as COSI keeps them: a ring per kind ([`History`]) that every watch of the
//! kind reads from its own position, so nothing is buffered per watcher. A ring holds the
//! last [`RING_PER_KIND`] changes (identity only: the resource is read from the store when
//! the event is sent); a watcher that falls further behind than that
//! gets one ERRORED event and its stream ends (`ResourceExhausted`), as a COSI watcher gets
//! "buffer overrun". A client that does not read at all is the server's to drop (its HTTP/2
//! window stays full); nothing waits for it here but its position.

use std::collections::{BTreeMap, VecDeque};

use grpc::call::Status;
use net::resource::{Kind, Namespace};
use runtime::{Change, ChangeKind, Store};
use talos_api::cosi::{self, EventType};
use talos_api::Message;

use super::handlers::{self, check_id_query, labels_admit, may_read, Target};
use super::{code, convert, status};
use crate::api::transport::Access;

/// Changes kept per kind: how far a watcher may fall behind, and the most `tail_events`
/// replays. An entry is an ID and a few words.
pub const RING_PER_KIND: usize = 8192;

/// One change in a ring.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    /// Shared with the store's key: a large apply journals a change per object.
    id: std::sync::Arc<str>,
    what: EventType,
}

/// The changes of one kind in one namespace.
#[derive(Debug, Default)]
struct Ring {
    entries: VecDeque<Entry>,
    /// The sequence number the next change gets (the number of changes ever recorded).
    next: u64,
}

impl Ring {
    /// The sequence number of the oldest entry kept.
    fn first(&self) -> u64 {
        self.next - self.entries.len() as u64
    }
}

/// The recent changes of every kind, fed from the runtime's changes after each loop
/// iteration.
#[derive(Debug, Default)]
pub struct History {
    rings: BTreeMap<(Namespace, Kind), Ring>,
}

/// What a change is to a watcher.
fn what(ch: ChangeKind) -> EventType {
    match ch {
        ChangeKind::Created => EventType::Created,
        ChangeKind::Updated | ChangeKind::TearingDown | ChangeKind::Finalizers => {
            EventType::Updated
        }
        ChangeKind::Destroyed => EventType::Destroyed,
    }
}

impl History {
    /// Record one loop iteration's changes.
    pub fn record(&mut self, changes: &[Change]) {
        for ch in changes {
            let ring = self.rings.entry((ch.namespace, ch.kind)).or_default();
            if ring.entries.len() == RING_PER_KIND {
                ring.entries.pop_front();
            }
            ring.entries.push_back(Entry { id: ch.id.clone(), what: what(ch.what) });
            ring.next += 1;
        }
    }

    /// The sequence number the next change of a kind gets: where a new watch starts.
    fn next(&self, ns: Namespace, kind: Kind) -> u64 {
        self.rings.get(&(ns, kind)).map_or(0, |r| r.next)
    }

    /// Where to start so that the last `n` changes (of `id`, when given) are replayed.
    fn tail_start(&self, ns: Namespace, kind: Kind, id: Option<&str>, n: usize) -> u64 {
        let Some(ring) = self.rings.get(&(ns, kind)) else { return 0 };
        let mut at = ring.next;
        let mut found = 0;
        for e in ring.entries.iter().rev() {
            if found == n {
                break;
            }
            at -= 1;
            if id.is_none_or(|id| *e.id == *id) {
                found += 1;
            }
        }
        at
    }

    /// The entries from sequence number `from` on, or `Err` when some were dropped.
    fn since(
        &self,
        ns: Namespace,
        kind: Kind,
        from: u64,
    ) -> Result<impl Iterator<Item = (u64, &Entry)>, ()> {
        let Some(ring) = self.rings.get(&(ns, kind)) else {
            return Ok(None.into_iter().flatten());
        };
        if from < ring.first() {
            return Err(());
        }
        let skip = usize::try_from(from - ring.first()).unwrap_or(usize::MAX);
        Ok(Some(ring.entries.iter().skip(skip).zip(from..).map(|(e, s)| (s, e)))
            .into_iter()
            .flatten())
    }
}

fn event(what: EventType, resource: Option<cosi::Resource>) -> cosi::Event {
    cosi::Event { resource, event_type: what as i32, old: None, error: None, bookmark: None }
}

/// One open watch: where it is, and what it has still to send.
#[derive(Debug)]
pub struct WatchFeed {
    target: Target,
    id: Option<String>,
    /// Several events go in one message.
    aggregated: bool,
    /// The client knows BOOTSTRAPPED and ERRORED.
    api_version: i32,
    /// The label query admits keelson's (unlabelled) resources.
    admitted: bool,
    /// Events to send before the changes: the empty first message is `None`.
    opening: VecDeque<Option<cosi::Event>>,
    /// IDs to send as CREATED (bootstrap), each read when its turn comes; then BOOTSTRAPPED.
    bootstrap: VecDeque<String>,
    bootstrapped: bool,
    /// The next change of the ring to send.
    cursor: u64,
    /// The last fill stopped for room with changes left in the ring.
    backlog: bool,
    /// The stream is over.
    ended: bool,
}

/// Whether a watch goes on.
#[derive(Debug, PartialEq, Eq)]
pub enum Flow {
    More,
    Done(Status),
}

impl WatchFeed {
    /// Check the request and place the watch.
    pub fn start(
        store: &Store,
        history: &History,
        access: Access,
        req: &cosi::WatchRequest,
    ) -> Result<Self, Status> {
        let target = handlers::target(&req.namespace, &req.r#type)?;
        may_read(access, &target)?;
        let opts = req.options.clone().unwrap_or_default();
        check_id_query(opts.id_query.as_ref())?;
        if opts.start_from_bookmark.is_some() {
            return Err(status(code::UNIMPLEMENTED, "bookmarks are not supported"));
        }
        let tail = usize::try_from(opts.tail_events).unwrap_or(0).min(RING_PER_KIND);
        if req.id.is_some() && opts.bootstrap_contents {
            return Err(status(
                code::UNIMPLEMENTED,
                "bootstrap contents is not implemented for resource watch",
            ));
        }
        if req.id.is_some() && !opts.label_query.is_empty() {
            return Err(status(
                code::UNIMPLEMENTED,
                "label query is not implemented for resource watch",
            ));
        }
        if opts.bootstrap_contents && tail > 0 {
            return Err(status(
                code::INVALID_ARGUMENT,
                "cannot use bootstrap contents with tail events",
            ));
        }
        let mut feed = WatchFeed {
            target,
            id: req.id.clone(),
            aggregated: opts.aggregated,
            api_version: req.api_version,
            admitted: labels_admit(&opts.label_query),
            opening: VecDeque::from([None]),
            bootstrap: VecDeque::new(),
            bootstrapped: !opts.bootstrap_contents,
            cursor: 0,
            backlog: false,
            ended: false,
        };
        if let Target::Store { kind, namespace, .. } = &feed.target {
            feed.cursor = if tail > 0 {
                history.tail_start(*namespace, *kind, feed.id.as_deref(), tail)
            } else {
                history.next(*namespace, *kind)
            };
        }
        if let (Some(id), 0) = (&feed.id, tail) {
            let now = handlers::one(store, &feed.target, id);
            let initial = match now {
                Some(r) => event(EventType::Created, Some(r)),
                None => event(EventType::Destroyed, Some(feed.tombstone(id))),
            };
            feed.opening.push_back(Some(initial));
        }
        if opts.bootstrap_contents && feed.admitted {
            match &feed.target {
                Target::Store { kind, namespace, .. } => {
                    feed.bootstrap =
                        store.list(*namespace, *kind).map(|r| r.metadata.id.to_string()).collect();
                }
                Target::Meta { .. } => feed.opening.extend(
                    handlers::resources(store, &feed.target)
                        .into_iter()
                        .map(|r| Some(event(EventType::Created, Some(r)))),
                ),
            }
        }
        Ok(feed)
    }

    fn tombstone(&self, id: &str) -> cosi::Resource {
        match &self.target {
            Target::Store { kind, cosi_namespace, .. } => {
                convert::tombstone(*kind, cosi_namespace, id)
            }
            Target::Meta { type_name, namespace } => cosi::Resource {
                metadata: Some(cosi::Metadata {
                    namespace: namespace.clone(),
                    r#type: (*type_name).to_owned(),
                    id: id.to_owned(),
                    phase: "running".to_owned(),
                    ..Default::default()
                }),
                spec: None,
            },
        }
    }

    /// It has messages to send now (its opening, its bootstrap, changes it had no room for).
    pub fn has_more(&self) -> bool {
        !self.ended
            && (!self.opening.is_empty()
                || !self.bootstrap.is_empty()
                || !self.bootstrapped
                || self.backlog)
    }

    /// The kind whose changes this watch follows (none for `meta`, which never changes).
    pub fn kind(&self) -> Option<Kind> {
        match &self.target {
            Target::Store { kind, .. } => Some(*kind),
            Target::Meta { .. } => None,
        }
    }

    /// The event a ring entry stands for, read from the store now; `None` when it has
    /// nothing to say (not this watch's ID, or created or updated and gone since: its
    /// DESTROYED follows).
    fn change(&self, store: &Store, e: &Entry) -> Option<cosi::Event> {
        if !self.admitted || self.id.as_ref().is_some_and(|id| **id != *e.id) {
            return None;
        }
        let Target::Store { kind, namespace, .. } = &self.target else { return None };
        if e.what == EventType::Destroyed {
            return Some(event(EventType::Destroyed, Some(self.tombstone(&e.id))));
        }
        store.get(*namespace, *kind, &e.id).map(|r| event(e.what, Some(convert::resource(r))))
    }

    /// Append the next messages, about `room` bytes (at least one when there is any).
    pub fn fill(
        &mut self,
        store: &Store,
        history: &History,
        room: usize,
        out: &mut Vec<Vec<u8>>,
    ) -> Flow {
        if self.ended {
            return Flow::More;
        }
        let mut events: Vec<cosi::Event> = Vec::new();
        let mut used = 0;
        let full = |used: usize, out: &Vec<Vec<u8>>, events: &Vec<cosi::Event>| {
            used >= room && !(out.is_empty() && events.is_empty())
        };
        while let Some(first) = self.opening.pop_front() {
            match first {
                // The empty first message goes alone.
                None => out.push(cosi::WatchResponse::default().encode_to_vec()),
                Some(ev) => {
                    used += ev.encoded_len();
                    events.push(ev);
                }
            }
            if full(used, out, &events) {
                self.emit(events, out);
                return Flow::More;
            }
        }
        while !full(used, out, &events) {
            let Some(id) = self.bootstrap.pop_front() else { break };
            if let Some(r) = handlers::one(store, &self.target, &id) {
                let ev = event(EventType::Created, Some(r));
                used += ev.encoded_len();
                events.push(ev);
            }
        }
        if !self.bootstrap.is_empty() {
            self.emit(events, out);
            return Flow::More;
        }
        if !self.bootstrapped {
            self.bootstrapped = true;
            events.push(event(EventType::Bootstrapped, Some(self.tombstone(""))));
        }
        if let Target::Store { kind, namespace, .. } = &self.target {
            let (kind, namespace) = (*kind, *namespace);
            let entries = match history.since(namespace, kind, self.cursor) {
                Ok(entries) => entries,
                Err(()) => {
                    self.ended = true;
                    let why = format!(
                        "buffer overrun: the watch fell more than {RING_PER_KIND} changes of {} behind",
                        handlers::describe(&self.target)
                    );
                    // The server's side of a watcher that does not keep up (or does not read).
                    log::warn!(target: "api", "COSI: ending a watch that fell behind ({why})");
                    let mut err = event(EventType::Errored, None);
                    err.error = Some(why.clone());
                    events.push(err);
                    self.emit(events, out);
                    return Flow::Done(status(code::RESOURCE_EXHAUSTED, why));
                }
            };
            self.backlog = false;
            for (seq, e) in entries {
                if full(used, out, &events) {
                    self.backlog = true;
                    break;
                }
                self.cursor = seq + 1;
                if let Some(ev) = self.change(store, e) {
                    used += ev.encoded_len();
                    events.push(ev);
                }
            }
        }
        self.emit(events, out);
        Flow::More
    }

    /// Events into messages: one each, or all in one when aggregated; without the event
    /// types an old client does not know.
    fn emit(&self, mut events: Vec<cosi::Event>, out: &mut Vec<Vec<u8>>) {
        if self.api_version < 1 {
            events.retain(|e| {
                e.event_type != EventType::Bootstrapped as i32
                    && e.event_type != EventType::Errored as i32
            });
        }
        if events.is_empty() {
            return;
        }
        if self.aggregated {
            out.push(cosi::WatchResponse { event: events }.encode_to_vec());
            return;
        }
        out.extend(
            events.into_iter().map(|e| cosi::WatchResponse { event: vec![e] }.encode_to_vec()),
        );
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;
    use net::resource::{HostnameStatus, HOSTNAME_ID};
    use runtime::Runtime;

    fn hostname(name: &str) -> HostnameStatus {
        HostnameStatus { hostname: name.into(), domainname: String::new() }
    }

    fn req(id: Option<&str>, bootstrap: bool, tail: i32) -> cosi::WatchRequest {
        cosi::WatchRequest {
            namespace: "network".into(),
            r#type: "HostnameStatuses.net.talos.dev".into(),
            id: id.map(str::to_owned),
            options: Some(cosi::WatchOptions {
                bootstrap_contents: bootstrap,
                tail_events: tail,
                ..Default::default()
            }),
            api_version: 1,
        }
    }

    const C: i32 = EventType::Created as i32;
    const U: i32 = EventType::Updated as i32;
    const D: i32 = EventType::Destroyed as i32;
    const B: i32 = EventType::Bootstrapped as i32;
    const E: i32 = EventType::Errored as i32;

    struct Node {
        rt: Runtime,
        history: History,
    }

    impl Node {
        fn new() -> Self {
            Node { rt: Runtime::new(), history: History::default() }
        }

        /// Put, and feed the history as the server does after each loop iteration.
        fn put(&mut self, id: &str, name: &str) {
            self.rt.put_input("test", Namespace::Network, id, hostname(name)).unwrap();
            self.end_iteration();
        }

        fn end_iteration(&mut self) {
            let changes = self.rt.take_changes();
            self.history.record(&changes);
        }

        fn watch(&self, r: &cosi::WatchRequest) -> WatchFeed {
            WatchFeed::start(self.rt.store(), &self.history, Access::Reader, r).unwrap()
        }

        /// Everything the watch has now, as event types per message.
        fn take(&self, w: &mut WatchFeed) -> Vec<Vec<i32>> {
            self.take_msgs(w)
                .iter()
                .map(|m| m.event.iter().map(|e| e.event_type).collect())
                .collect()
        }

        fn take_msgs(&self, w: &mut WatchFeed) -> Vec<cosi::WatchResponse> {
            let mut out = Vec::new();
            assert_eq!(w.fill(self.rt.store(), &self.history, usize::MAX, &mut out), Flow::More);
            out.iter().map(|m| cosi::WatchResponse::decode(m.as_slice()).unwrap()).collect()
        }
    }

    #[test]
    fn bootstrap_then_changes() {
        let mut n = Node::new();
        n.put(HOSTNAME_ID, "a");
        let mut w = n.watch(&req(None, true, 0));
        let first = n.take_msgs(&mut w);
        let types: Vec<Vec<i32>> =
            first.iter().map(|m| m.event.iter().map(|e| e.event_type).collect()).collect();
        assert_eq!(types, [vec![], vec![C], vec![B]]);
        // BOOTSTRAPPED names the kind, no resource.
        let b = first[2].event[0].resource.as_ref().unwrap().metadata.as_ref().unwrap();
        assert_eq!((b.r#type.as_str(), b.id.as_str()), ("HostnameStatuses.net.talos.dev", ""));
        assert!(n.take(&mut w).is_empty());
        n.put(HOSTNAME_ID, "b");
        let msgs = n.take_msgs(&mut w);
        assert_eq!(msgs.len(), 1);
        assert_eq!(msgs[0].event[0].event_type, U);
        let yaml = &msgs[0].event[0].resource.as_ref().unwrap().spec.as_ref().unwrap().yaml_spec;
        assert!(yaml.contains("hostname: b"), "{yaml}");
        n.put("other", "c");
        assert_eq!(n.take(&mut w), [vec![C]]);
    }

    #[test]
    fn a_watch_without_bootstrap_sees_changes_only() {
        let mut n = Node::new();
        n.put("a", "a");
        let mut w = n.watch(&req(None, false, 0));
        assert_eq!(n.take(&mut w), [Vec::<i32>::new()]);
        n.put("b", "b");
        assert_eq!(n.take(&mut w), [vec![C]]);
    }

    #[test]
    fn an_id_watch_starts_with_its_state_and_sees_only_its_id() {
        let mut n = Node::new();
        let mut w = n.watch(&req(Some("x"), false, 0));
        assert_eq!(n.take(&mut w), [vec![], vec![D]]);
        n.put("y", "other");
        assert!(n.take(&mut w).is_empty());
        n.put("x", "mine");
        assert_eq!(n.take(&mut w), [vec![C]]);
        let e =
            WatchFeed::start(n.rt.store(), &n.history, Access::Reader, &req(Some("x"), true, 0));
        assert_eq!(e.unwrap_err().code, code::UNIMPLEMENTED);
    }

    #[test]
    fn tail_events_replay_the_last_changes() {
        let mut n = Node::new();
        for i in 0..10 {
            n.put("h", &format!("n{i}"));
        }
        n.put("other", "x");
        let mut w = n.watch(&req(None, false, 3));
        assert_eq!(n.take(&mut w), [vec![], vec![U], vec![U], vec![C]]);
        let mut one = n.watch(&req(Some("h"), false, 2));
        assert_eq!(n.take(&mut one), [vec![], vec![U], vec![U]]);
        let mut all = n.watch(&req(None, false, 1000));
        assert_eq!(n.take(&mut all).len(), 1 + 11);
        let e = WatchFeed::start(n.rt.store(), &n.history, Access::Reader, &req(None, true, 2));
        assert_eq!(e.unwrap_err().code, code::INVALID_ARGUMENT);
    }

    #[test]
    fn a_watcher_that_falls_a_ring_behind_gets_errored_and_ends() {
        let mut n = Node::new();
        let mut w = n.watch(&req(None, false, 0));
        assert_eq!(n.take(&mut w), [Vec::<i32>::new()]);
        for i in 0..=RING_PER_KIND {
            n.rt.put_input("test", Namespace::Network, &format!("h{i}"), hostname("x")).unwrap();
        }
        n.end_iteration();
        let mut out = Vec::new();
        match w.fill(n.rt.store(), &n.history, usize::MAX, &mut out) {
            Flow::Done(s) => assert_eq!(s.code, code::RESOURCE_EXHAUSTED),
            Flow::More => panic!("an overrun watch goes on"),
        }
        let last = cosi::WatchResponse::decode(out.last().unwrap().as_slice()).unwrap();
        assert_eq!(last.event[0].event_type, E);
        assert!(last.event[0].error.as_deref().unwrap().contains("buffer overrun"));
        // A watcher that kept up is fine.
        let mut fresh = n.watch(&req(None, false, 0));
        n.put("h0", "y");
        assert_eq!(n.take(&mut fresh), [vec![], vec![U]]);
    }

    #[test]
    fn a_watch_takes_about_room_bytes_at_a_time() {
        let mut n = Node::new();
        for i in 0..200 {
            n.rt.put_input("test", Namespace::Network, &format!("h{i:03}"), hostname("x")).unwrap();
        }
        n.end_iteration();
        let mut w = n.watch(&req(None, true, 0));
        let mut total = 0;
        let mut rounds = 0;
        loop {
            let more = w.has_more();
            let mut out = Vec::new();
            assert_eq!(w.fill(n.rt.store(), &n.history, 2000, &mut out), Flow::More);
            // It says it has more exactly when it has.
            assert_eq!(more, !out.is_empty(), "round {rounds}");
            if out.is_empty() {
                break;
            }
            let bytes: usize = out.iter().map(Vec::len).sum();
            assert!(bytes < 2000 + 1000, "{bytes}");
            total += out.len();
            rounds += 1;
        }
        assert_eq!(total, 1 + 200 + 1);
        assert!(rounds > 5, "{rounds}");
        // Changes beyond the room are a backlog, asked for again without a new change.
        for i in 0..200 {
            n.rt.put_input("test", Namespace::Network, &format!("h{i:03}"), hostname("y")).unwrap();
        }
        n.end_iteration();
        let mut out = Vec::new();
        w.fill(n.rt.store(), &n.history, 2000, &mut out);
        assert!(w.has_more());
        w.fill(n.rt.store(), &n.history, usize::MAX, &mut out);
        assert!(!w.has_more());
        assert_eq!(out.len(), 200);
    }

    #[test]
    fn old_clients_get_no_bootstrapped_and_aggregated_watches_batch() {
        let mut n = Node::new();
        n.put("a", "a");
        let mut old = req(None, true, 0);
        old.api_version = 0;
        let mut w = n.watch(&old);
        assert_eq!(n.take(&mut w), [vec![], vec![C]]);
        let mut agg = req(None, true, 0);
        agg.options.as_mut().unwrap().aggregated = true;
        let mut w = n.watch(&agg);
        assert_eq!(n.take(&mut w), [vec![], vec![C, B]]);
        n.rt.put_input("test", Namespace::Network, "b", hostname("b")).unwrap();
        n.rt.put_input("test", Namespace::Network, "c", hostname("c")).unwrap();
        n.end_iteration();
        assert_eq!(n.take(&mut w), [vec![C, C]]);
    }

    #[test]
    fn a_watch_of_definitions_bootstraps_and_never_changes() {
        let n = Node::new();
        let r = cosi::WatchRequest {
            namespace: "meta".into(),
            r#type: "ResourceDefinitions.meta.cosi.dev".into(),
            id: None,
            options: Some(cosi::WatchOptions { bootstrap_contents: true, ..Default::default() }),
            api_version: 1,
        };
        let mut w = WatchFeed::start(n.rt.store(), &n.history, Access::Maintenance, &r).unwrap();
        assert_eq!(n.take(&mut w).len(), 1 + Kind::ALL.len() + 2 + 1);
        assert_eq!(w.kind(), None);
    }

    #[test]
    fn sensitive_watches_need_admin() {
        let n = Node::new();
        let r = cosi::WatchRequest {
            namespace: "kubespan".into(),
            r#type: "KubeSpanIdentities.kubespan.talos.dev".into(),
            ..Default::default()
        };
        let e = WatchFeed::start(n.rt.store(), &n.history, Access::Reader, &r).unwrap_err();
        assert_eq!(e.code, code::PERMISSION_DENIED);
        assert!(WatchFeed::start(n.rt.store(), &n.history, Access::Admin, &r).is_ok());
    }
}
