// SPDX-License-Identifier: Apache-2.0
//! The blocking side of leases and elections: a [`Session`] is a lease kept alive by a thread
//! of its own (timing from [`crate::lease::KeepAlive`]), and [`campaign`] runs an
//! [`Election`] to the end over a [`Client`], watching its predecessor's key between checks.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::client::{Client, ClientError};
use crate::election::{self, Election, Leader, Lost, Step};
use crate::lease::{KeepAlive, LeaseState};
use crate::wire::{EventType, RangeResponse, TxnResponse, WatchCreateRequest};

/// How long the keep-alive thread and a waiting campaign sleep between looks at their stop
/// flag.
const TICK: Duration = Duration::from_millis(100);
/// A waiting candidate re-reads its predecessor this often even when the watch is silent (a
/// stopped etcd keeps a watch open and says nothing).
const RECHECK: Duration = Duration::from_secs(5);

/// Why a campaign ended without leading.
#[derive(Debug, thiserror::Error)]
pub enum CampaignError {
    #[error("campaign lost: {0}")]
    Lost(#[from] Lost),
    #[error("the session's lease is no longer trusted ({0:?})")]
    LeaseLost(LeaseState),
    #[error("stopped")]
    Stopped,
    #[error("{0}")]
    Client(#[from] ClientError),
}

/// A lease and the thread renewing it.
#[derive(Debug)]
pub struct Session {
    id: i64,
    ttl: i64,
    keep: Arc<Mutex<KeepAlive>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Session {
    /// Grant a lease of `ttl_secs` and keep it alive; it is trusted until `margin` before its
    /// TTL runs out since the last good renewal.
    pub fn grant(client: &Client, ttl_secs: i64, margin: Duration) -> Result<Self, ClientError> {
        let mut client = client.clone();
        let granted = client.lease_grant(ttl_secs)?;
        let keep =
            Arc::new(Mutex::new(KeepAlive::new(granted.id, granted.ttl, margin, Instant::now())));
        let stop = Arc::new(AtomicBool::new(false));
        let (k, s) = (keep.clone(), stop.clone());
        let thread = evloop::spawn_worker("etcd-keepalive", move || keep_alive(client, &k, &s))?;
        Ok(Self { id: granted.id, ttl: granted.ttl, keep, stop, thread: Some(thread) })
    }

    pub fn id(&self) -> i64 {
        self.id
    }

    /// The TTL etcd granted, in seconds.
    pub fn ttl(&self) -> i64 {
        self.ttl
    }

    pub fn state(&self) -> LeaseState {
        self.keep.lock().map_or(LeaseState::Expired, |k| k.state(Instant::now()))
    }

    pub fn alive(&self) -> bool {
        self.state() == LeaseState::Alive
    }

    /// Stop renewing, leaving the lease to expire on its own (what a crashed holder does).
    pub fn abandon(mut self) {
        self.halt();
    }

    /// Stop renewing and revoke the lease: every key bound to it goes at once.
    pub fn close(mut self, client: &mut Client) -> Result<(), ClientError> {
        self.halt();
        client.lease_revoke(self.id).map(|_| ())
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.halt();
    }
}

#[allow(clippy::disallowed_methods)] // A worker of the blocking driver, never the event loop.
fn keep_alive(mut client: Client, keep: &Mutex<KeepAlive>, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        let (due, id, wait) = match keep.lock() {
            Ok(k) => {
                let now = Instant::now();
                if k.state(now) == LeaseState::Gone {
                    return;
                }
                (k.due(now), k.id(), k.poll_at().saturating_duration_since(now))
            }
            Err(_) => return,
        };
        if !due {
            std::thread::sleep(wait.min(TICK));
            continue;
        }
        let answer = client.lease_keep_alive(id);
        let Ok(mut k) = keep.lock() else { return };
        let now = Instant::now();
        match answer {
            Ok(ttl) => {
                if k.answered(ttl, now) == LeaseState::Gone {
                    log::warn!("etcd lease {id:x} is gone");
                    return;
                }
            }
            Err(e) => {
                log::debug!("etcd lease {id:x}: keep-alive failed: {e}");
                k.failed(now);
            }
        }
    }
}

/// Campaign in election `name` with `session`'s lease until this candidate leads. Ends early
/// when `stop` is set, the lease is no longer trusted, or the candidacy is lost.
pub fn campaign(
    client: &mut Client,
    session: &Session,
    name: &[u8],
    value: &[u8],
    stop: &AtomicBool,
) -> Result<Election, CampaignError> {
    let mut e = Election::new(name, session.id(), value);
    let mut step = e.campaign();
    loop {
        if stop.load(Ordering::Relaxed) {
            return Err(CampaignError::Stopped);
        }
        if !session.alive() {
            return Err(CampaignError::LeaseLost(session.state()));
        }
        step = match step {
            Step::Send(call) => {
                let r: TxnResponse = client.call("txn", &call)?;
                e.answered(&r)
            }
            Step::WatchDelete { key, start_revision } => {
                wait_deleted(client, session, &key, start_revision, stop)?;
                e.predecessor_deleted()
            }
            Step::Elected => return Ok(e),
            Step::Lost(l) => return Err(l.into()),
        };
    }
}

/// Wait until `key` is deleted (from `start_revision`), the recheck interval passes, or the
/// watch fails; all three mean "look again".
fn wait_deleted(
    client: &mut Client,
    session: &Session,
    key: &[u8],
    start_revision: i64,
    stop: &AtomicBool,
) -> Result<(), CampaignError> {
    let req = WatchCreateRequest { key: key.to_vec(), start_revision, ..Default::default() };
    let mut w = match client.watch(&req) {
        Ok(w) => w,
        Err(ClientError::Compacted(_)) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    let until = Instant::now() + RECHECK;
    while Instant::now() < until {
        if stop.load(Ordering::Relaxed) {
            return Err(CampaignError::Stopped);
        }
        if !session.alive() {
            return Err(CampaignError::LeaseLost(session.state()));
        }
        match w.next(TICK) {
            Ok(Some(r)) => {
                if r.events.iter().any(|ev| ev.kind == EventType::Delete && ev.kv.key == key) {
                    return Ok(());
                }
            }
            Ok(None) => {}
            Err(e) => {
                log::debug!("etcd election watch ended: {e}");
                return Ok(());
            }
        }
    }
    Ok(())
}

/// Resign: delete this campaign's key if it is still its own.
pub fn resign(client: &mut Client, e: &mut Election) -> Result<bool, ClientError> {
    let r: TxnResponse = client.call("txn", &e.resign())?;
    Ok(r.succeeded)
}

/// Delete this candidate's keys from earlier lives (same `value`, another lease) so it does
/// not queue behind itself; how many went.
pub fn clear_stale(
    client: &mut Client,
    name: &[u8],
    value: &[u8],
    lease: i64,
) -> Result<usize, ClientError> {
    let r: RangeResponse = client.call("range", &election::candidates_query(name))?;
    let mut cleared = 0;
    for call in election::stale_candidates(&r, value, lease) {
        let t: TxnResponse = client.call("txn", &call)?;
        cleared += usize::from(t.succeeded);
    }
    Ok(cleared)
}

/// Who leads election `name` now.
pub fn leader(client: &mut Client, name: &[u8]) -> Result<Option<Leader>, ClientError> {
    let r: RangeResponse = client.call("range", &election::leader_query(name))?;
    Ok(election::leader_of(&r))
}

/// Watch election `name` until its leader (key, value or create revision) differs from
/// `known`, or `wait` passes; returns the leader then (`None`: nobody campaigns). One range,
/// then a watch on the prefix from the revision read, so no change between the two is missed.
pub fn observe(
    client: &mut Client,
    name: &[u8],
    known: Option<&Leader>,
    wait: Duration,
) -> Result<Option<Leader>, ClientError> {
    let until = Instant::now() + wait;
    loop {
        let r: RangeResponse = client.call("range", &election::leader_query(name))?;
        let now = election::leader_of(&r);
        if now.as_ref() != known || Instant::now() >= until {
            return Ok(now);
        }
        let p = election::prefix(name);
        let req = WatchCreateRequest {
            range_end: crate::request::prefix_end(&p),
            key: p,
            start_revision: r.header.revision.saturating_add(1),
            ..Default::default()
        };
        let mut w = client.watch(&req)?;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match w.next(left) {
                Ok(Some(r)) if !r.events.is_empty() => break,
                Ok(Some(_)) => {}
                Ok(None) => break,
                // Compacted or ended: read again.
                Err(_) => break,
            }
        }
    }
}
