// SPDX-License-Identifier: Apache-2.0
//! `Watch`, as cosi-project/runtime's state server answers it: an empty first message (the
//! watch is in place); then, for a watch of a kind, every resource as CREATED and one
//! BOOTSTRAPPED when `bootstrap_contents` is set, or the last `tail_events` events; for a
//! watch of one ID, its current state (CREATED, or DESTROYED when it does not exist) or its
//! last `tail_events` events; then each change as it happens. Clients below `api_version` 1
//! get no BOOTSTRAPPED or ERRORED events.
//!
//! Past events come from [`History`]: the last [`HISTORY_PER_KIND`] events of each kind (and
//! at most [`HISTORY_BYTES_PER_KIND`] bytes of them), so `tail_events` asks for at most that
//! many. Like the JSON API's watch, an event carries the resource as it is when the loop
//! iteration that changed it ends. How much a watcher may leave unread is the server's bound:
//! this module only makes the messages.

use std::collections::{BTreeMap, VecDeque};

use grpc::call::Status;
use net::resource::{Kind, Namespace};
use runtime::{Change, ChangeKind, Store};
use talos_api::cosi::{self, EventType};
use talos_api::Message;

use super::handlers::{self, check_id_query, labels_admit, may_read, Target};
use super::names::cosi_namespace;
use super::{code, convert, status};
use crate::api::transport::Access;

/// Events kept per kind for `tail_events`.
pub const HISTORY_PER_KIND: usize = 32;
/// Encoded bytes kept per kind (a machine config can be large): older events go first.
pub const HISTORY_BYTES_PER_KIND: usize = 1 << 20;

/// One past event.
#[derive(Clone, Debug, PartialEq)]
struct Past {
    id: String,
    event: cosi::Event,
    bytes: usize,
}

/// The last events of each kind, fed from the runtime's changes.
#[derive(Debug, Default)]
pub struct History {
    kinds: BTreeMap<(Namespace, Kind), VecDeque<Past>>,
}

impl History {
    /// Record the changes of one loop iteration. Only the last [`HISTORY_PER_KIND`] changes
    /// of each kind are converted: a burst of ten thousand routes costs a pass over the
    /// changes, not ten thousand encodings.
    pub fn record(&mut self, store: &Store, changes: &[Change]) {
        let mut counts: BTreeMap<(Namespace, Kind), usize> = BTreeMap::new();
        let mut keep = vec![false; changes.len()];
        for (i, ch) in changes.iter().enumerate().rev() {
            let n = counts.entry((ch.namespace, ch.kind)).or_default();
            if *n < HISTORY_PER_KIND {
                *n += 1;
                if let Some(k) = keep.get_mut(i) {
                    *k = true;
                }
            }
        }
        for (ch, _) in changes.iter().zip(keep).filter(|(_, k)| *k) {
            let event = event_for(store, ch);
            let bytes = event.encoded_len();
            let list = self.kinds.entry((ch.namespace, ch.kind)).or_default();
            list.push_back(Past { id: ch.id.clone(), event, bytes });
            let mut total: usize = list.iter().map(|p| p.bytes).sum();
            while list.len() > HISTORY_PER_KIND
                || (total > HISTORY_BYTES_PER_KIND && list.len() > 1)
            {
                match list.pop_front() {
                    Some(p) => total -= p.bytes,
                    None => break,
                }
            }
        }
    }

    /// The last `n` events of a kind (of one ID when given), oldest first.
    fn tail(&self, ns: Namespace, kind: Kind, id: Option<&str>, n: usize) -> Vec<cosi::Event> {
        let Some(list) = self.kinds.get(&(ns, kind)) else { return Vec::new() };
        let mut out: Vec<cosi::Event> = list
            .iter()
            .rev()
            .filter(|p| id.is_none_or(|id| p.id == id))
            .take(n)
            .map(|p| p.event.clone())
            .collect();
        out.reverse();
        out
    }
}

/// A store change as an event. The resource is read now, so several changes of one
/// resource in one loop iteration all show its latest version; one that is gone by now is
/// DESTROYED with only its identity.
pub fn event_for(store: &Store, ch: &Change) -> cosi::Event {
    let what = match ch.what {
        ChangeKind::Created => EventType::Created,
        ChangeKind::Updated | ChangeKind::TearingDown | ChangeKind::Finalizers => {
            EventType::Updated
        }
        ChangeKind::Destroyed => EventType::Destroyed,
    };
    let now = store.get(ch.namespace, ch.kind, &ch.id).filter(|_| what != EventType::Destroyed);
    match now {
        Some(r) => event(what, convert::resource(r)),
        None => event(
            EventType::Destroyed,
            convert::tombstone(ch.kind, cosi_namespace(ch.kind, ch.namespace), &ch.id),
        ),
    }
}

fn event(what: EventType, resource: cosi::Resource) -> cosi::Event {
    cosi::Event {
        resource: Some(resource),
        event_type: what as i32,
        old: None,
        error: None,
        bookmark: None,
    }
}

/// One open watch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Watch {
    target: Target,
    id: Option<String>,
    /// Several events of one loop iteration go in one message.
    aggregated: bool,
    /// The client knows BOOTSTRAPPED and ERRORED.
    api_version: i32,
    /// The label query admits keelson's (unlabelled) resources.
    admitted: bool,
}

impl Watch {
    /// Start a watch: the watch and its first messages.
    pub fn start(
        store: &Store,
        history: &History,
        access: Access,
        req: &cosi::WatchRequest,
    ) -> Result<(Watch, Vec<cosi::WatchResponse>), Status> {
        let target = handlers::target(&req.namespace, &req.r#type)?;
        may_read(access, &target)?;
        let opts = req.options.clone().unwrap_or_default();
        check_id_query(opts.id_query.as_ref())?;
        if opts.start_from_bookmark.is_some() {
            return Err(status(code::UNIMPLEMENTED, "bookmarks are not supported"));
        }
        let tail = usize::try_from(opts.tail_events).unwrap_or(0).min(HISTORY_PER_KIND);
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
        let watch = Watch {
            target,
            id: req.id.clone(),
            aggregated: opts.aggregated,
            api_version: req.api_version,
            admitted: labels_admit(&opts.label_query),
        };
        let mut first = Vec::new();
        if tail > 0 {
            if let Target::Store { kind, namespace, .. } = &watch.target {
                first = history.tail(*namespace, *kind, watch.id.as_deref(), tail);
            }
            first.retain(|_| watch.admitted);
        } else if let Some(id) = &watch.id {
            first.push(match handlers::one(store, &watch.target, id) {
                Some(r) => event(EventType::Created, r),
                None => event(EventType::Destroyed, watch.tombstone(id)),
            });
        } else if opts.bootstrap_contents {
            if watch.admitted {
                first = handlers::resources(store, &watch.target)
                    .into_iter()
                    .map(|r| event(EventType::Created, r))
                    .collect();
            }
            first.push(event(EventType::Bootstrapped, watch.tombstone("")));
        }
        // The first message is empty: the watch is in place.
        let mut out = vec![cosi::WatchResponse::default()];
        out.extend(watch.messages(first));
        Ok((watch, out))
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

    /// The kind whose changes this watch follows (none for `meta`, which never changes).
    pub fn kind(&self) -> Option<Kind> {
        match &self.target {
            Target::Store { kind, .. } => Some(*kind),
            Target::Meta { .. } => None,
        }
    }

    /// Does a change concern this watch?
    fn matches(&self, ch: &Change) -> bool {
        match &self.target {
            Target::Store { kind, namespace, .. } => {
                self.admitted
                    && ch.kind == *kind
                    && ch.namespace == *namespace
                    && self.id.as_ref().is_none_or(|id| *id == ch.id)
            }
            Target::Meta { .. } => false,
        }
    }

    /// The messages for one loop iteration's changes.
    pub fn on_changes(&self, store: &Store, changes: &[Change]) -> Vec<cosi::WatchResponse> {
        let events = changes.iter().filter(|c| self.matches(c)).map(|c| event_for(store, c));
        self.messages(events.collect())
    }

    /// The message that ends a watch with an error (for clients that understand it).
    pub fn errored(&self, why: &str) -> Option<cosi::WatchResponse> {
        let ev = cosi::Event {
            resource: None,
            event_type: EventType::Errored as i32,
            old: None,
            error: Some(why.to_owned()),
            bookmark: None,
        };
        self.messages(vec![ev]).pop()
    }

    /// Events into messages: one each, or all in one when aggregated; without the event
    /// types an old client does not know.
    fn messages(&self, mut events: Vec<cosi::Event>) -> Vec<cosi::WatchResponse> {
        if self.api_version < 1 {
            events.retain(|e| {
                e.event_type != EventType::Bootstrapped as i32
                    && e.event_type != EventType::Errored as i32
            });
        }
        if events.is_empty() {
            return Vec::new();
        }
        if self.aggregated {
            return vec![cosi::WatchResponse { event: events }];
        }
        events.into_iter().map(|e| cosi::WatchResponse { event: vec![e] }).collect()
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

    fn types(msgs: &[cosi::WatchResponse]) -> Vec<Vec<i32>> {
        msgs.iter().map(|m| m.event.iter().map(|e| e.event_type).collect()).collect()
    }

    const C: i32 = EventType::Created as i32;
    const U: i32 = EventType::Updated as i32;
    const D: i32 = EventType::Destroyed as i32;
    const B: i32 = EventType::Bootstrapped as i32;

    /// Put, run, and feed the history as the server does after each loop iteration.
    fn put(rt: &mut Runtime, history: &mut History, id: &str, name: &str) -> Vec<Change> {
        rt.put_input("test", Namespace::Network, id, hostname(name)).unwrap();
        let changes = rt.take_changes();
        history.record(rt.store(), &changes);
        changes
    }

    #[test]
    fn bootstrap_then_changes() {
        let mut rt = Runtime::new();
        let mut history = History::default();
        put(&mut rt, &mut history, HOSTNAME_ID, "a");
        let (w, first) =
            Watch::start(rt.store(), &history, Access::Reader, &req(None, true, 0)).unwrap();
        assert_eq!(types(&first), [vec![], vec![C], vec![B]]);
        // BOOTSTRAPPED names the kind, no resource.
        let b = first[2].event[0].resource.as_ref().unwrap().metadata.as_ref().unwrap();
        assert_eq!((b.r#type.as_str(), b.id.as_str()), ("HostnameStatuses.net.talos.dev", ""));
        let changes = put(&mut rt, &mut history, HOSTNAME_ID, "b");
        let msgs = w.on_changes(rt.store(), &changes);
        assert_eq!(types(&msgs), [vec![U]]);
        let yaml = &msgs[0].event[0].resource.as_ref().unwrap().spec.as_ref().unwrap().yaml_spec;
        assert!(yaml.contains("hostname: b"), "{yaml}");
        let other = put(&mut rt, &mut history, "other", "c");
        assert_eq!(types(&w.on_changes(rt.store(), &other)), [vec![C]]);
    }

    #[test]
    fn an_id_watch_starts_with_its_state_and_sees_only_its_id() {
        let mut rt = Runtime::new();
        let mut history = History::default();
        let (w, first) =
            Watch::start(rt.store(), &history, Access::Reader, &req(Some("x"), false, 0)).unwrap();
        assert_eq!(types(&first), [vec![], vec![D]]);
        let changes = put(&mut rt, &mut history, "y", "other");
        assert!(w.on_changes(rt.store(), &changes).is_empty());
        let changes = put(&mut rt, &mut history, "x", "mine");
        assert_eq!(types(&w.on_changes(rt.store(), &changes)), [vec![C]]);
        let e = Watch::start(rt.store(), &history, Access::Reader, &req(Some("x"), true, 0));
        assert_eq!(e.unwrap_err().code, code::UNIMPLEMENTED);
    }

    #[test]
    fn tail_events_replay_the_last_events_and_no_more_than_kept() {
        let mut rt = Runtime::new();
        let mut history = History::default();
        for i in 0..(HISTORY_PER_KIND + 10) {
            put(&mut rt, &mut history, "h", &format!("n{i}"));
        }
        let (_, first) =
            Watch::start(rt.store(), &history, Access::Reader, &req(None, false, 3)).unwrap();
        assert_eq!(types(&first), [vec![], vec![U], vec![U], vec![U]]);
        let (_, all) =
            Watch::start(rt.store(), &history, Access::Reader, &req(None, false, 1000)).unwrap();
        assert_eq!(all.len(), 1 + HISTORY_PER_KIND);
        let e = Watch::start(rt.store(), &history, Access::Reader, &req(None, true, 2));
        assert_eq!(e.unwrap_err().code, code::INVALID_ARGUMENT);
    }

    #[test]
    fn a_burst_is_kept_to_its_last_events() {
        let mut rt = Runtime::new();
        let mut history = History::default();
        for i in 0..100 {
            rt.put_input("test", Namespace::Network, &format!("h{i:03}"), hostname("x")).unwrap();
        }
        let changes = rt.take_changes();
        assert_eq!(changes.len(), 100);
        history.record(rt.store(), &changes);
        let kept = history.tail(Namespace::Network, Kind::HostnameStatus, None, usize::MAX);
        assert_eq!(kept.len(), HISTORY_PER_KIND);
        let last = kept.last().unwrap().resource.as_ref().unwrap().metadata.as_ref().unwrap();
        assert_eq!(last.id, "h099");
    }

    #[test]
    fn old_clients_get_no_bootstrapped_and_aggregated_watches_batch() {
        let mut rt = Runtime::new();
        let mut history = History::default();
        put(&mut rt, &mut history, "a", "a");
        let mut old = req(None, true, 0);
        old.api_version = 0;
        let (_, first) = Watch::start(rt.store(), &history, Access::Reader, &old).unwrap();
        assert_eq!(types(&first), [vec![], vec![C]]);
        let mut agg = req(None, true, 0);
        agg.options.as_mut().unwrap().aggregated = true;
        let (w, first) = Watch::start(rt.store(), &history, Access::Reader, &agg).unwrap();
        assert_eq!(types(&first), [vec![], vec![C, B]]);
        rt.put_input("test", Namespace::Network, "b", hostname("b")).unwrap();
        rt.put_input("test", Namespace::Network, "c", hostname("c")).unwrap();
        let changes = rt.take_changes();
        assert_eq!(types(&w.on_changes(rt.store(), &changes)), [vec![C, C]]);
        assert!(w.errored("overrun").is_some());
    }

    #[test]
    fn a_watch_of_definitions_bootstraps_and_never_changes() {
        let rt = Runtime::new();
        let history = History::default();
        let r = cosi::WatchRequest {
            namespace: "meta".into(),
            r#type: "ResourceDefinitions.meta.cosi.dev".into(),
            id: None,
            options: Some(cosi::WatchOptions { bootstrap_contents: true, ..Default::default() }),
            api_version: 1,
        };
        let (w, first) = Watch::start(rt.store(), &history, Access::Maintenance, &r).unwrap();
        assert_eq!(first.len(), 1 + Kind::ALL.len() + 2 + 1);
        assert_eq!(w.kind(), None);
    }

    #[test]
    fn sensitive_watches_need_admin() {
        let rt = Runtime::new();
        let history = History::default();
        let r = cosi::WatchRequest {
            namespace: "kubespan".into(),
            r#type: "KubeSpanIdentities.kubespan.talos.dev".into(),
            ..Default::default()
        };
        let e = Watch::start(rt.store(), &history, Access::Reader, &r).unwrap_err();
        assert_eq!(e.code, code::PERMISSION_DENIED);
        assert!(Watch::start(rt.store(), &history, Access::Admin, &r).is_ok());
    }
}
