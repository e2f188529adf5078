// SPDX-License-Identifier: Apache-2.0
//! Push: the leader follows each managed node's `MachineService.Events` stream (Talos's, which
//! keelson's nodes serve too) on a worker thread per machine, and wakes that machine's reconcile
//! when an event can change its state: the kubelet's `ServiceStateEvent`, a
//! `MachineStatusEvent` whose stage or readiness changed, the node's API coming up (in
//! maintenance mode, which serves no `Events`), a stream that opened or ended (a reboot).
//! Streams reconnect with backoff; the reconciler's poll stays the fallback while none is held.
//!
//! Wakes are coalesced per machine ([`Wakes`]): however many events arrive between two passes,
//! a machine is reconciled once, with the first reason.

use std::collections::{BTreeMap, HashMap};
use std::io::{ErrorKind, Read, Write};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cli::rpc::RpcError;
use talos_api::machine as m;
use talos_api::Message;

use crate::states::CallError;
pub use crate::watch::Watch;

/// The most streams held at once (one per machine): machines past it are polled only.
pub const MAX_STREAMS: usize = 512;
/// The first wait before reconnecting, doubled per failed attempt up to [`MAX_RETRY`].
const MIN_RETRY: Duration = Duration::from_millis(250);
/// Well under the 30 s poll: a node coming up is seen within this.
const MAX_RETRY: Duration = Duration::from_secs(4);
/// How often a blocked read looks at the stop flag.
const READ_TICK: Duration = Duration::from_secs(2);
/// A stream silent this long is opened again (a node that vanished without closing it).
const IDLE: Duration = Duration::from_secs(300);
/// The largest event taken.
const MAX_EVENT: usize = 64 << 10;

/// Machines to reconcile now, each with why: coalesced, bounded by the machines watched.
#[derive(Debug)]
pub struct Wakes {
    pending: Mutex<BTreeMap<String, String>>,
    signal: SyncSender<()>,
}

impl Wakes {
    fn new() -> (Arc<Self>, Receiver<()>) {
        let (signal, rx) = mpsc::sync_channel(1);
        (Arc::new(Self { pending: Mutex::new(BTreeMap::new()), signal }), rx)
    }

    /// Ask for `machine` to be reconciled; a wake already pending keeps its reason.
    pub fn wake(&self, machine: &str, why: String) {
        let mut p = self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        p.entry(machine.to_owned()).or_insert(why);
        drop(p);
        // Full: a signal is pending already.
        let _ = self.signal.try_send(());
    }

    fn take(&self) -> BTreeMap<String, String> {
        let mut p = self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        std::mem::take(&mut *p)
    }
}

/// How a stream attempt ended up, as far as waking goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    /// Not reachable (refused, timed out, TLS refused).
    Down(String),
    /// The API answered without a stream: a gRPC status (maintenance mode answers
    /// Unimplemented).
    Answers(i32),
    /// The stream is open.
    Open,
}

/// Why a change of link wakes the machine (`None`: no change worth a reconcile).
pub fn link_change(prev: Option<&Link>, now: &Link) -> Option<String> {
    match (prev, now) {
        (Some(p), n) if p == n => None,
        (None, Link::Down(_)) => None,
        (Some(Link::Down(_)), Link::Down(_)) => None,
        (Some(Link::Open), Link::Down(why)) => Some(format!("the event stream ended ({why})")),
        (Some(_), Link::Down(why)) => Some(format!("the node stopped answering ({why})")),
        (_, Link::Answers(12)) => Some("the node's API answers in maintenance mode".into()),
        (_, Link::Answers(code)) => {
            Some(format!("the node's API answers without events (gRPC status {code})"))
        }
        (_, Link::Open) => Some("the event stream opened".into()),
    }
}

/// What one stream remembers of the node, to tell a change from a repeat.
#[derive(Debug, Default)]
pub struct Seen {
    stage: Option<(i32, bool)>,
}

impl Seen {
    /// The reason an event wakes the machine, or `None` (not about its state, a repeat, or
    /// a type this operator does not know: ignored).
    pub fn classify(&mut self, e: &m::Event) -> Option<String> {
        let data = e.data.as_ref()?;
        // Talos's type URLs are `talos/runtime/machine.ServiceStateEvent`.
        let name = data.type_url.rsplit('/').next().unwrap_or_default();
        match name {
            "machine.ServiceStateEvent" => {
                let s = m::ServiceStateEvent::decode(data.value.as_slice()).ok()?;
                if s.service != "kubelet" {
                    return None;
                }
                let action = m::ServiceAction::try_from(s.action)
                    .map_or("Unknown", m::ServiceAction::state_name);
                let health = match &s.health {
                    Some(h) if h.healthy && !h.unknown => ", healthy",
                    Some(h) if !h.unknown => ", not healthy",
                    _ => "",
                };
                Some(format!("ServiceStateEvent kubelet {action}{health}"))
            }
            "machine.MachineStatusEvent" => {
                let s = m::MachineStatusEvent::decode(data.value.as_slice()).ok()?;
                let ready = s.status.as_ref().is_some_and(|x| x.ready);
                let now = (s.stage, ready);
                if self.stage.replace(now) == Some(now) {
                    return None;
                }
                let stage = m::MachineStage::try_from(s.stage)
                    .map_or_else(|_| format!("{}", s.stage), |x| format!("{x:?}").to_lowercase());
                Some(format!(
                    "MachineStatusEvent stage {stage}{}",
                    if ready { ", ready" } else { ", not ready" }
                ))
            }
            _ => None,
        }
    }
}

/// The next wait after an attempt: back to the shortest after an open stream, else doubled.
pub fn next_retry(prev: Duration, was_open: bool) -> Duration {
    if was_open {
        MIN_RETRY
    } else {
        prev.saturating_mul(2).clamp(MIN_RETRY, MAX_RETRY)
    }
}

/// Reads that give up waiting only when stopped or idle too long (a timeout is otherwise
/// `Interrupted`, which the channel retries).
struct StopAware {
    io: Box<dyn cli::connect::Stream>,
    stop: Arc<AtomicBool>,
    last: Instant,
}

impl Read for StopAware {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self.io.read(buf) {
            Ok(n) => {
                self.last = Instant::now();
                Ok(n)
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if self.stop.load(Ordering::Relaxed) {
                    Err(std::io::Error::new(ErrorKind::TimedOut, "stopped"))
                } else if self.last.elapsed() > IDLE {
                    Err(std::io::Error::new(ErrorKind::TimedOut, "idle"))
                } else {
                    Err(std::io::Error::new(ErrorKind::Interrupted, "waiting"))
                }
            }
            Err(e) => Err(e),
        }
    }
}

impl Write for StopAware {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.io.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.io.flush()
    }
}

struct Worker {
    watch: Watch,
    stop: Arc<AtomicBool>,
    link: Arc<Mutex<Option<Link>>>,
    opens: Arc<AtomicUsize>,
}

impl Drop for Worker {
    fn drop(&mut self) {
        // The thread is not joined: it may sit in a connect for up to its timeout; it ends
        // by itself and wakes nobody after the flag.
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// What every worker shares.
#[derive(Clone)]
struct Shared {
    port: u16,
    insecure: Arc<rustls::ClientConfig>,
    secure: Option<Arc<rustls::ClientConfig>>,
    wakes: Arc<Wakes>,
    live: Arc<AtomicUsize>,
    metrics: Option<Arc<crate::metrics::Metrics>>,
}

/// The leader's event streams, one worker per watched machine.
pub struct Push {
    shared: Shared,
    rx: Receiver<()>,
    workers: HashMap<String, Worker>,
    enabled: bool,
    capped: bool,
}

impl std::fmt::Debug for Push {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Push").field("streams", &self.workers.len()).finish_non_exhaustive()
    }
}

impl Push {
    /// Streams to `port` with these clients; `enabled: false` holds none (the poll alone).
    pub fn new(
        port: u16,
        insecure: Arc<rustls::ClientConfig>,
        secure: Option<Arc<rustls::ClientConfig>>,
        enabled: bool,
    ) -> Self {
        let (wakes, rx) = Wakes::new();
        let live = Arc::new(AtomicUsize::new(0));
        let shared = Shared { port, insecure, secure, wakes, live, metrics: None };
        Self { shared, rx, workers: HashMap::new(), enabled, capped: false }
    }

    /// Count open streams and wakes in `m`.
    pub fn with_metrics(mut self, m: Arc<crate::metrics::Metrics>) -> Self {
        self.shared.metrics = Some(m);
        self
    }

    /// Hold a stream for each machine of `want`, and none other: new machines get a worker,
    /// gone ones (deleted, or no longer led) lose theirs, a changed watch starts afresh.
    pub fn sync(&mut self, want: &BTreeMap<String, Watch>) {
        if !self.enabled {
            return;
        }
        self.workers.retain(|id, w| want.get(id) == Some(&w.watch));
        let mut capped = false;
        for (id, watch) in want {
            if self.workers.contains_key(id) {
                continue;
            }
            // Threads of dropped workers may still be winding down: they count.
            if self.workers.len() >= MAX_STREAMS
                || self.shared.live.load(Ordering::Relaxed) >= MAX_STREAMS * 2
            {
                capped = true;
                break;
            }
            match self.start(id, watch) {
                Ok(w) => {
                    self.workers.insert(id.clone(), w);
                }
                Err(e) => {
                    log::warn!("event stream of TalosMachine {id}: no thread: {e}");
                    break;
                }
            }
        }
        if capped && !self.capped {
            log::warn!(
                "more than {MAX_STREAMS} machines: the others are polled without event streams"
            );
        }
        self.capped = capped;
    }

    /// Drop every stream (leadership lost).
    pub fn clear(&mut self) {
        self.workers.clear();
    }

    /// Wait up to `timeout` for wakes; returns them (machine, why), coalesced.
    pub fn wait(&self, timeout: Duration) -> BTreeMap<String, String> {
        match self.rx.recv_timeout(timeout) {
            Ok(()) | Err(RecvTimeoutError::Disconnected) => {}
            Err(RecvTimeoutError::Timeout) => return BTreeMap::new(),
        }
        let mut w = self.shared.wakes.take();
        w.retain(|id, _| self.workers.contains_key(id));
        if let Some(m) = &self.shared.metrics {
            m.woken(w.len() as u64);
        }
        w
    }

    /// The stream of `machine` as last seen, and how often it opened.
    pub fn link(&self, machine: &str) -> Option<(Option<Link>, usize)> {
        let w = self.workers.get(machine)?;
        let l = w.link.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        Some((l, w.opens.load(Ordering::Relaxed)))
    }

    fn start(&self, id: &str, watch: &Watch) -> std::io::Result<Worker> {
        let w = Worker {
            watch: watch.clone(),
            stop: Arc::new(AtomicBool::new(false)),
            link: Arc::new(Mutex::new(None)),
            opens: Arc::new(AtomicUsize::new(0)),
        };
        let (id, watch, shared) = (id.to_owned(), watch.clone(), self.shared.clone());
        let (stop, link, opens) = (w.stop.clone(), w.link.clone(), w.opens.clone());
        shared.live.fetch_add(1, Ordering::Relaxed);
        let live = shared.live.clone();
        let spawned = evloop::spawn_worker("operator-events", move || {
            follow(&id, &watch, &shared, &stop, &link, &opens);
            shared.live.fetch_sub(1, Ordering::Relaxed);
        });
        if let Err(e) = spawned {
            live.fetch_sub(1, Ordering::Relaxed);
            return Err(e);
        }
        Ok(w)
    }
}

/// Sleep up to `d`, waking early when `stop` is set.
#[allow(clippy::disallowed_methods)] // A stream worker of the operator, not an event loop.
fn pause(d: Duration, stop: &AtomicBool) {
    let until = Instant::now() + d;
    while !stop.load(Ordering::Relaxed) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100).min(until - Instant::now()));
    }
}

/// One machine's stream: open, follow, reconnect, until stopped.
fn follow(
    id: &str,
    w: &Watch,
    sh: &Shared,
    stop: &Arc<AtomicBool>,
    link: &Mutex<Option<Link>>,
    opens: &AtomicUsize,
) {
    let mut retry = MIN_RETRY;
    let mut last: Option<Link> = None;
    // The open-streams gauge follows each worker's link into and out of Open.
    let count = |was: bool, is: bool| {
        if let (Some(m), true) = (&sh.metrics, was != is) {
            m.event_stream(if is { 1 } else { -1 });
        }
    };
    let set = |l: &Link| {
        let mut g = link.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        count(*g == Some(Link::Open), *l == Link::Open);
        *g = Some(l.clone());
    };
    let wake = |prev: Option<&Link>, now: &Link| {
        if let Some(why) = link_change(prev, now) {
            if !stop.load(Ordering::Relaxed) {
                log::debug!("TalosMachine {id}: {why}");
                sh.wakes.wake(id, why);
            }
        }
    };
    while !stop.load(Ordering::Relaxed) {
        // Maintenance mode serves no Events (Talos's nor keelson's): its answer still says the
        // API is up. A configured node needs the client certificate.
        let (tls, insecure) = match (&w.client, &sh.secure) {
            (Some(c), _) | (None, Some(c)) if w.configured => (c.clone(), false),
            _ => (sh.insecure.clone(), true),
        };
        let stop2 = stop.clone();
        let wrap = move |io| -> Box<dyn cli::connect::Stream> {
            Box::new(StopAware { io, stop: stop2, last: Instant::now() })
        };
        let mut idle = false;
        let now =
            match crate::talos::open_channel(&w.address, sh.port, tls, insecure, READ_TICK, wrap) {
                Err(CallError::Unreachable(m)) => Link::Down(m),
                Err(e) => Link::Down(format!("{e:?}")),
                Ok(mut c) => {
                    let mut seen = Seen::default();
                    let mut opened = false;
                    // The last event first: an answer that says the stream is open.
                    let req = m::EventsRequest { tail_events: 1, ..Default::default() };
                    let r = c.call(
                        &format!("/{}/Events", talos_api::machine::SERVICE),
                        &req,
                        MAX_EVENT,
                        &mut |e: m::Event| {
                            let why = seen.classify(&e);
                            if !opened {
                                opened = true;
                                opens.fetch_add(1, Ordering::Relaxed);
                                set(&Link::Open);
                                wake(last.as_ref(), &Link::Open);
                                last = Some(Link::Open);
                            } else if let Some(why) = why {
                                if !stop.load(Ordering::Relaxed) {
                                    log::debug!("TalosMachine {id}: {why}");
                                    sh.wakes.wake(id, why);
                                }
                            }
                            Ok(())
                        },
                    );
                    match r {
                        Ok(()) => Link::Down("the node ended the stream".into()),
                        Err(RpcError::Status(s)) if !opened => Link::Answers(s.code as i32),
                        Err(RpcError::Transport(m)) if m.contains("said nothing") && opened => {
                            idle = true;
                            Link::Open
                        }
                        Err(e) => Link::Down(base::names::escape(&e.to_string(), 200)),
                    }
                }
            };
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let was_open = last == Some(Link::Open);
        if !idle {
            set(&now);
            wake(last.as_ref(), &now);
            last = Some(now);
        }
        retry = next_retry(retry, was_open);
        pause(retry, stop);
    }
    let open = *link.lock().unwrap_or_else(std::sync::PoisonError::into_inner) == Some(Link::Open);
    count(open, false);
}

#[cfg(test)]
mod tests {
    use super::*;
    use talos_api::google::Any;

    fn event(name: &str, value: Vec<u8>) -> m::Event {
        m::Event {
            data: Some(Any { type_url: format!("talos/runtime/{name}"), value }),
            ..Default::default()
        }
    }

    fn kubelet(action: m::ServiceAction, healthy: bool) -> m::Event {
        let s = m::ServiceStateEvent {
            service: "kubelet".into(),
            action: action as i32,
            message: String::new(),
            health: Some(m::ServiceHealth {
                unknown: false,
                healthy,
                last_message: String::new(),
                last_change: None,
            }),
        };
        event("machine.ServiceStateEvent", s.encode_to_vec())
    }

    fn stage(stage: m::MachineStage, ready: bool) -> m::Event {
        let s = m::MachineStatusEvent {
            stage: stage as i32,
            status: Some(m::MachineStatus { ready, unmet_conditions: vec![] }),
        };
        event("machine.MachineStatusEvent", s.encode_to_vec())
    }

    #[test]
    fn events_about_the_machines_state_wake_it_and_others_do_not() {
        let mut s = Seen::default();
        assert_eq!(
            s.classify(&kubelet(m::ServiceAction::Running, true)).as_deref(),
            Some("ServiceStateEvent kubelet Running, healthy")
        );
        assert_eq!(
            s.classify(&kubelet(m::ServiceAction::Failed, false)).as_deref(),
            Some("ServiceStateEvent kubelet Failed, not healthy")
        );
        // Another service, an address, a type this operator does not know, garbage: ignored.
        let mut etcd = kubelet(m::ServiceAction::Running, true);
        let other = m::ServiceStateEvent { service: "etcd".into(), ..Default::default() };
        etcd.data = Some(Any {
            type_url: "talos/runtime/machine.ServiceStateEvent".into(),
            value: other.encode_to_vec(),
        });
        assert_eq!(s.classify(&etcd), None);
        assert_eq!(s.classify(&event("machine.AddressEvent", vec![])), None);
        assert_eq!(s.classify(&event("machine.SomethingNewEvent", vec![1, 2, 3])), None);
        assert_eq!(s.classify(&event("machine.ServiceStateEvent", vec![0xff, 0xff])), None);
        assert_eq!(s.classify(&m::Event::default()), None);
        // A stage wakes when it or readiness changes, not when repeated.
        assert_eq!(
            s.classify(&stage(m::MachineStage::Booting, false)).as_deref(),
            Some("MachineStatusEvent stage booting, not ready")
        );
        assert_eq!(s.classify(&stage(m::MachineStage::Booting, false)), None);
        assert_eq!(
            s.classify(&stage(m::MachineStage::Running, true)).as_deref(),
            Some("MachineStatusEvent stage running, ready")
        );
    }

    #[test]
    fn a_change_of_link_wakes_and_a_repeat_does_not() {
        let down = Link::Down("refused".into());
        assert_eq!(link_change(None, &down), None);
        assert_eq!(link_change(Some(&down), &Link::Down("timeout".into())), None);
        assert_eq!(
            link_change(Some(&down), &Link::Answers(12)).as_deref(),
            Some("the node's API answers in maintenance mode")
        );
        assert_eq!(link_change(Some(&Link::Answers(12)), &Link::Answers(12)), None);
        assert_eq!(
            link_change(Some(&Link::Answers(12)), &Link::Open).as_deref(),
            Some("the event stream opened")
        );
        assert_eq!(
            link_change(Some(&Link::Open), &down).as_deref(),
            Some("the event stream ended (refused)")
        );
        assert!(link_change(Some(&Link::Answers(12)), &down).is_some());
        assert!(link_change(None, &Link::Answers(16)).is_some_and(|w| w.contains("16")));
    }

    #[test]
    fn retries_back_off_and_reset_after_an_open_stream() {
        let mut d = MIN_RETRY;
        for _ in 0..10 {
            d = next_retry(d, false);
        }
        assert_eq!(d, MAX_RETRY);
        assert_eq!(next_retry(d, true), MIN_RETRY);
    }

    #[test]
    fn wakes_are_coalesced_per_machine() {
        let (w, rx) = Wakes::new();
        w.wake("a", "first".into());
        w.wake("a", "second".into());
        w.wake("b", "other".into());
        assert!(rx.try_recv().is_ok());
        assert!(rx.try_recv().is_err(), "one signal for many wakes");
        let got = w.take();
        assert_eq!(got.get("a").map(String::as_str), Some("first"));
        assert_eq!(got.len(), 2);
        assert!(w.take().is_empty());
    }
}
