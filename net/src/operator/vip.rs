// SPDX-License-Identifier: Apache-2.0
//! The shared-VIP operator's core: one state machine per VIP, without I/O or a clock.
//!
//! The caller (the driver) does what the machine asks ([`Action`]) against etcd and the
//! address pipeline, and hands back what happened ([`Event`]) together with the current
//! monotonic time. [`Vip::deadline`] says when to call [`Vip::tick`] next. Time is a
//! [`Duration`] since any fixed origin, so tests run on virtual time.
//!
//! The election is etcd's `concurrency` election under Talos's name
//! `talos:v1:vip:election:<ip>` with the node's hostname as value, so Talos and keelson
//! control planes queue in one line and elect one holder (Talos
//! `internal/app/machined/pkg/controllers/network/operator/vip.go`).
//!
//! What keelson adds:
//! - **A short lease and a local fence.** The holder keeps the address only while its last
//!   successful keep-alive was *sent* less than `ttl - margin` ago. etcd counts the lease from
//!   when the renewal *arrived*, which is later, so the holder always lets go before etcd can
//!   expire its key and elect the next candidate: two holders never overlap, even when the
//!   holder is cut off from etcd.
//! - **Planned handover in the safe order**: remove the address, wait until it is gone (or a
//!   bound passes), then resign and revoke, so the next candidate wins only after we let go.
//! - **Restart hygiene**, as Talos: a leader key with our hostname on a lease that is not ours
//!   (a previous boot's) is resigned before campaigning, so we do not queue behind our ghost.

use std::net::IpAddr;
use std::time::Duration;

/// The prefix Talos names its VIP elections with (`EtcdRootTalosKey` + `vip:election:`).
pub const ELECTION_PREFIX: &str = "talos:v1:vip:election:";

/// The election name of `ip`, as Talos spells it (`netip.Addr.String()`; Rust's `Display`
/// of an address gives the same text: dotted quad, RFC 5952 IPv6).
pub fn election_name(ip: IpAddr) -> String {
    format!("{ELECTION_PREFIX}{ip}")
}

/// The lease and its timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timings {
    /// Lease TTL asked from etcd (whole seconds: etcd's unit).
    pub ttl: Duration,
    /// Keep-alive period.
    pub keepalive: Duration,
    /// How long before the lease could expire at etcd the holder drops the address.
    pub margin: Duration,
    /// Pause before campaigning again after a failure or a lost leadership.
    pub retry: Duration,
    /// How long a planned handover waits for the address removal before resigning anyway.
    pub release_wait: Duration,
    /// How many times a new holder announces the address (a second apart).
    pub announcements: u32,
}

impl Default for Timings {
    /// TTL 1 s, keep-alive every 200 ms, fence 600 ms after the last good keep-alive was
    /// sent. With the etcd timings keelson passes (heartbeat 50 ms, election 500 ms), etcd's
    /// smallest lease is 1 s, and a dead holder that was also etcd's leader loses its lease
    /// about 1 s (election) + 1.5 s (TTL + election timeout, etcd's extension on a new
    /// leader) after its death; see docs/control-plane.md for the measurements.
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(1),
            keepalive: Duration::from_millis(200),
            margin: Duration::from_millis(400),
            retry: Duration::from_secs(1),
            release_wait: Duration::from_secs(2),
            announcements: 3,
        }
    }
}

/// A bad `KEELSON_VIP_TIMINGS` value.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TimingsError {
    /// Not `key=value`, or an unknown key.
    #[error("{0:?}: expected ttl=, keepalive=, margin= or announce=, or the word talos")]
    Syntax(String),
    /// A value that is not a duration (`5s`, `250ms`, `5`) or a count.
    #[error("{key}: {value:?} is not a valid value")]
    Value {
        /// The key.
        key: String,
        /// Its value.
        value: String,
    },
    /// The values do not leave a fence that fires before etcd can expire the lease.
    #[error("need ttl a whole number of seconds >= 1, 0 < margin < ttl and 0 < keepalive <= ttl - margin")]
    Unsafe,
}

impl Timings {
    /// Talos's parameters: a 60 s session (Go's `concurrency.NewSession` default, kept alive
    /// every TTL/3) and one announcement. The fence still fires 1 s before the TTL.
    pub fn talos() -> Self {
        Self {
            ttl: Duration::from_secs(60),
            keepalive: Duration::from_secs(20),
            margin: Duration::from_secs(1),
            announcements: 1,
            ..Self::default()
        }
    }

    /// The etcd client's timeout. The fence can fire only between calls, so a call that
    /// starts just before it must end well inside the margin, leaving the rest for the
    /// address's removal.
    pub fn call_timeout(&self) -> Duration {
        // No overflow whatever the margin: 5/8 of it, or half of a huge one.
        self.margin.checked_mul(5).map_or(self.margin / 2, |d| d / 8)
    }

    /// Parses `talos`, or comma-separated `ttl=1s,keepalive=200ms,margin=400ms,announce=3`
    /// (any subset; the rest keep their defaults; a bare number is seconds).
    pub fn parse(s: &str) -> Result<Self, TimingsError> {
        let mut t = Self::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            if part == "talos" {
                t = Self::talos();
                continue;
            }
            let (k, v) = part.split_once('=').ok_or_else(|| TimingsError::Syntax(part.into()))?;
            let bad = || TimingsError::Value { key: k.into(), value: v.into() };
            match k {
                "ttl" => t.ttl = parse_duration(v).ok_or_else(bad)?,
                "keepalive" => t.keepalive = parse_duration(v).ok_or_else(bad)?,
                "margin" => t.margin = parse_duration(v).ok_or_else(bad)?,
                "announce" => {
                    t.announcements =
                        v.parse().ok().filter(|n| (1..=10).contains(n)).ok_or_else(bad)?
                }
                _ => return Err(TimingsError::Syntax(part.into())),
            }
        }
        let whole = t.ttl.subsec_nanos() == 0 && t.ttl >= Duration::from_secs(1);
        let fence = t.ttl.saturating_sub(t.margin);
        if !whole
            || t.margin.is_zero()
            || fence.is_zero()
            || t.keepalive.is_zero()
            || t.keepalive > fence
        {
            return Err(TimingsError::Unsafe);
        }
        Ok(t)
    }
}

/// `250ms`, `5s` or `5` (seconds), at most an hour.
fn parse_duration(v: &str) -> Option<Duration> {
    let (num, unit_ms) = if let Some(n) = v.strip_suffix("ms") {
        (n, 1)
    } else if let Some(n) = v.strip_suffix('s') {
        (n, 1000)
    } else {
        (v, 1000)
    };
    let n: u64 = num.parse().ok()?;
    let d = Duration::from_millis(n.checked_mul(unit_ms)?);
    (d <= Duration::from_secs(3600)).then_some(d)
}

/// What the driver does next. Actions of one call run in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Read the election's current leader ([`Event::Leader`] / [`Event::Failed`]).
    QueryLeader,
    /// Delete a stale leader key of ours, guarded by its create revision
    /// ([`Event::StaleResigned`] / [`Event::Failed`]).
    ResignStale {
        /// The stale key.
        key: Vec<u8>,
        /// Its create revision (the guard).
        create_revision: i64,
    },
    /// Grant a lease of `ttl` ([`Event::LeaseGranted`] / [`Event::Failed`]).
    GrantLease {
        /// The TTL to ask for.
        ttl: Duration,
    },
    /// Campaign with `lease` ([`Event::Elected`] / [`Event::CampaignLost`]).
    Campaign {
        /// The lease the candidate key is bound to.
        lease: i64,
    },
    /// One keep-alive ([`Event::KeepAliveOk`] / [`Event::LeaseGone`] /
    /// [`Event::KeepAliveFailed`]); the driver stamps the time it sent it.
    KeepAlive {
        /// The lease to renew.
        lease: i64,
    },
    /// Put the VIP on its link.
    AddAddress,
    /// Announce the VIP (gratuitous ARP or unsolicited NA).
    Announce,
    /// Take the VIP off its link ([`Event::AddressRemoved`]).
    RemoveAddress,
    /// Resign the campaign (delete our key, guarded by its create revision).
    Resign,
    /// Revoke `lease` (deletes every key on it).
    Revoke {
        /// The lease to revoke.
        lease: i64,
    },
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Preconditions met (the local etcd is running and healthy): start campaigning.
    Start,
    /// The local etcd went away: drop everything at once.
    EtcdDown,
    /// Planned handover (shutdown, reboot, the VIP removed from the config).
    Stop,
    /// Answer to [`Action::QueryLeader`].
    Leader(Option<LeaderKey>),
    /// [`Action::ResignStale`] done (deleted or already gone).
    StaleResigned,
    /// The lease was granted.
    LeaseGranted {
        /// The lease ID.
        id: i64,
    },
    /// The campaign won.
    Elected,
    /// The campaign ended without winning (our key vanished, or a bad answer).
    CampaignLost,
    /// A keep-alive sent at `sent_at` was answered with a TTL above 0.
    KeepAliveOk {
        /// When that keep-alive was sent.
        sent_at: Duration,
    },
    /// A keep-alive failed in transport: unknown whether the lease lives.
    KeepAliveFailed,
    /// The lease is gone (a keep-alive answered with no TTL).
    LeaseGone,
    /// Someone else leads (the driver watches the leader while we hold the VIP).
    LeaderChanged,
    /// The address left the link.
    AddressRemoved,
    /// A request other than a keep-alive failed.
    Failed,
}

/// The oldest key of the election (its leader).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderKey {
    /// The key (`<name>/<lease hex>`).
    pub key: Vec<u8>,
    /// The holder's hostname.
    pub value: Vec<u8>,
    /// Its place in the queue.
    pub create_revision: i64,
    /// The lease it is bound to.
    pub lease: i64,
}

/// Where the machine is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Not started, or waiting out `retry` (until the deadline).
    Idle,
    /// Reading the leader (restart hygiene).
    Querying,
    /// Deleting our stale key.
    ResigningStale,
    /// Waiting for a lease.
    Granting,
    /// In the queue.
    Campaigning,
    /// Leading and holding the address.
    Holding,
    /// Leading on paper, but the fence fired: the address is off until a keep-alive succeeds.
    Fenced,
    /// Planned handover: the address is being removed.
    Releasing,
    /// Stopped for good (after [`Event::Stop`]).
    Stopped,
}

#[derive(Debug, Clone, Copy)]
struct Lease {
    id: i64,
    /// When the last successful keep-alive (or the grant) was sent.
    last_ok: Duration,
    /// Time the next keep-alive is due.
    next_keepalive: Duration,
    in_flight: bool,
}

/// One VIP's election.
#[derive(Debug, Clone)]
pub struct Vip {
    hostname: Vec<u8>,
    timings: Timings,
    phase: Phase,
    lease: Option<Lease>,
    /// When the grant was asked (the lease's age counts from there).
    grant_sent: Duration,
    /// Retry time in [`Phase::Idle`] after a failure (`None`: wait for [`Event::Start`]).
    retry_at: Option<Duration>,
    /// Bound of [`Phase::Releasing`].
    release_until: Duration,
    /// Was the campaign won (so a release must resign)?
    elected: bool,
}

impl Vip {
    /// A candidate named `hostname` (the value Talos proclaims).
    pub fn new(hostname: &str, timings: Timings) -> Self {
        Self {
            hostname: hostname.as_bytes().to_vec(),
            timings,
            phase: Phase::Idle,
            lease: None,
            grant_sent: Duration::ZERO,
            retry_at: None,
            release_until: Duration::ZERO,
            elected: false,
        }
    }

    /// The timings it runs with.
    pub fn timings(&self) -> Timings {
        self.timings
    }

    /// Where the machine is.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// When the last successful keep-alive (or the grant) was sent, while there is a lease.
    pub fn last_keepalive(&self) -> Option<Duration> {
        self.lease.map(|l| l.last_ok)
    }

    /// Is the address supposed to be on the link?
    pub fn holds_address(&self) -> bool {
        self.phase == Phase::Holding
    }

    /// The time [`Vip::tick`] must run next, if any.
    pub fn deadline(&self) -> Option<Duration> {
        match self.phase {
            Phase::Idle => self.retry_at,
            Phase::Releasing => Some(self.release_until),
            Phase::Stopped | Phase::Querying | Phase::ResigningStale | Phase::Granting => None,
            Phase::Campaigning | Phase::Holding | Phase::Fenced => {
                let l = self.lease?;
                let ka = if l.in_flight { None } else { Some(l.next_keepalive) };
                let fence = (self.phase == Phase::Holding).then(|| self.fence_at(&l));
                match (ka, fence) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                }
            }
        }
    }

    fn fence_at(&self, l: &Lease) -> Duration {
        l.last_ok + self.timings.ttl.saturating_sub(self.timings.margin)
    }

    /// Time passed: keep-alives due, the fence, the end of a retry pause or a release bound.
    pub fn tick(&mut self, now: Duration) -> Vec<Action> {
        let mut out = Vec::new();
        match self.phase {
            Phase::Idle => {
                if self.retry_at.is_some_and(|t| now >= t) {
                    self.retry_at = None;
                    self.phase = Phase::Querying;
                    out.push(Action::QueryLeader);
                }
            }
            Phase::Releasing => {
                if now >= self.release_until {
                    log::warn!("VIP: the address was not removed in time; resigning anyway");
                    out.extend(self.finish_release());
                }
            }
            Phase::Campaigning | Phase::Holding | Phase::Fenced => {
                let Some(l) = self.lease else { return out };
                if self.phase == Phase::Holding && now >= self.fence_at(&l) {
                    log::warn!("VIP: no successful etcd keep-alive in time; dropping the address");
                    self.phase = Phase::Fenced;
                    out.push(Action::RemoveAddress);
                }
                if !l.in_flight && now >= l.next_keepalive {
                    if let Some(l) = self.lease.as_mut() {
                        l.in_flight = true;
                    }
                    out.push(Action::KeepAlive { lease: l.id });
                }
            }
            Phase::Querying | Phase::ResigningStale | Phase::Granting | Phase::Stopped => {}
        }
        out
    }

    /// Something happened at `now`.
    pub fn handle(&mut self, now: Duration, event: Event) -> Vec<Action> {
        if self.phase == Phase::Stopped {
            return Vec::new();
        }
        match event {
            Event::Start => {
                if self.phase == Phase::Idle && self.retry_at.is_none() {
                    self.phase = Phase::Querying;
                    return vec![Action::QueryLeader];
                }
                Vec::new()
            }
            Event::EtcdDown => {
                // Nobody can renew our lease now; Talos drops the VIP at once too.
                let out = self.drop_address();
                self.reset();
                self.retry_at = None;
                out
            }
            Event::Stop => self.stop(now),
            Event::Leader(leader) => {
                if self.phase != Phase::Querying {
                    return Vec::new();
                }
                match leader {
                    Some(l) if l.value == self.hostname => {
                        // A previous boot's key (we hold no lease yet, so it cannot be ours).
                        self.phase = Phase::ResigningStale;
                        vec![Action::ResignStale { key: l.key, create_revision: l.create_revision }]
                    }
                    _ => self.grant(now),
                }
            }
            Event::StaleResigned => {
                if self.phase == Phase::ResigningStale {
                    return self.grant(now);
                }
                Vec::new()
            }
            Event::LeaseGranted { id } => {
                if self.phase != Phase::Granting {
                    // A late grant after we moved on: give it back.
                    return vec![Action::Revoke { lease: id }];
                }
                self.lease = Some(Lease {
                    id,
                    last_ok: self.grant_sent,
                    next_keepalive: now + self.timings.keepalive,
                    in_flight: false,
                });
                self.phase = Phase::Campaigning;
                vec![Action::Campaign { lease: id }]
            }
            Event::Elected => {
                if self.phase != Phase::Campaigning {
                    return Vec::new();
                }
                self.elected = true;
                let Some(l) = self.lease else { return Vec::new() };
                if now >= self.fence_at(&l) {
                    // Won, but our lease may already be dead at etcd: wait for a keep-alive.
                    self.phase = Phase::Fenced;
                    return Vec::new();
                }
                self.phase = Phase::Holding;
                vec![Action::AddAddress, Action::Announce]
            }
            Event::CampaignLost | Event::LeaderChanged | Event::LeaseGone => {
                if !matches!(self.phase, Phase::Campaigning | Phase::Holding | Phase::Fenced) {
                    return Vec::new();
                }
                self.give_up(now, event == Event::LeaseGone)
            }
            Event::KeepAliveOk { sent_at } => {
                let Some(mut l) = self.lease else { return Vec::new() };
                l.in_flight = false;
                l.last_ok = l.last_ok.max(sent_at);
                l.next_keepalive = now + self.timings.keepalive;
                self.lease = Some(l);
                if self.phase == Phase::Fenced && self.elected && now < self.fence_at(&l) {
                    // The lease lived through the gap, so our key did too and nobody else
                    // could have been elected: take the address back.
                    self.phase = Phase::Holding;
                    return vec![Action::AddAddress, Action::Announce];
                }
                Vec::new()
            }
            Event::KeepAliveFailed => {
                if let Some(l) = self.lease.as_mut() {
                    l.in_flight = false;
                    l.next_keepalive = now + self.timings.keepalive;
                }
                Vec::new()
            }
            Event::AddressRemoved => {
                if self.phase == Phase::Releasing {
                    return self.finish_release();
                }
                Vec::new()
            }
            Event::Failed => match self.phase {
                Phase::Querying | Phase::ResigningStale | Phase::Granting | Phase::Campaigning => {
                    self.give_up(now, false)
                }
                _ => Vec::new(),
            },
        }
    }

    fn grant(&mut self, now: Duration) -> Vec<Action> {
        self.phase = Phase::Granting;
        self.grant_sent = now;
        vec![Action::GrantLease { ttl: self.timings.ttl }]
    }

    fn drop_address(&self) -> Vec<Action> {
        if self.phase == Phase::Holding {
            vec![Action::RemoveAddress]
        } else {
            Vec::new()
        }
    }

    fn reset(&mut self) {
        self.phase = Phase::Idle;
        self.lease = None;
        self.elected = false;
    }

    /// Leave the queue and campaign again after `retry`: address off first, then resign and
    /// revoke (unless the lease is already gone).
    fn give_up(&mut self, now: Duration, lease_gone: bool) -> Vec<Action> {
        let mut out = self.drop_address();
        if !lease_gone {
            if self.elected {
                out.push(Action::Resign);
            }
            if let Some(l) = self.lease {
                out.push(Action::Revoke { lease: l.id });
            }
        }
        self.reset();
        self.retry_at = Some(now + self.timings.retry);
        out
    }

    fn stop(&mut self, now: Duration) -> Vec<Action> {
        match self.phase {
            Phase::Holding => {
                self.phase = Phase::Releasing;
                self.release_until = now + self.timings.release_wait;
                vec![Action::RemoveAddress]
            }
            Phase::Releasing => Vec::new(),
            _ => {
                let out = self.finish_release();
                self.phase = Phase::Stopped;
                out
            }
        }
    }

    fn finish_release(&mut self) -> Vec<Action> {
        let mut out = Vec::new();
        if self.elected {
            out.push(Action::Resign);
        }
        if let Some(l) = self.lease {
            out.push(Action::Revoke { lease: l.id });
        }
        self.reset();
        self.phase = Phase::Stopped;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Action as A;
    use Event as E;

    fn s(secs: f64) -> Duration {
        Duration::from_secs_f64(secs)
    }

    fn ghost(host: &str) -> LeaderKey {
        LeaderKey {
            key: b"talos:v1:vip:election:10.5.0.100/abc".to_vec(),
            value: host.as_bytes().to_vec(),
            create_revision: 7,
            lease: 0xabc,
        }
    }

    /// One step of a table: at time `at`, either an event or a tick, with the actions and
    /// the phase expected after it.
    enum Step {
        Ev(f64, Event, Vec<Action>, Phase),
        Tick(f64, Vec<Action>, Phase),
    }
    use Step::{Ev, Tick};

    /// The table's numbers: a 5 s lease kept alive every second, fenced 1 s before its end.
    fn five_seconds() -> Timings {
        Timings {
            ttl: s(5.0),
            keepalive: s(1.0),
            margin: s(1.0),
            retry: s(1.0),
            release_wait: s(2.0),
            announcements: 3,
        }
    }

    fn run(name: &str, steps: Vec<Step>) -> Vip {
        let mut v = Vip::new("cp-1", five_seconds());
        for (i, step) in steps.into_iter().enumerate() {
            let (got, phase, want, what) = match step {
                Ev(t, e, want, phase) => {
                    let what = format!("{e:?} at {t}");
                    (v.handle(s(t), e), phase, want, what)
                }
                Tick(t, want, phase) => (v.tick(s(t)), phase, want, format!("tick at {t}")),
            };
            assert_eq!(got, want, "{name}: step {i} ({what}): actions");
            assert_eq!(v.phase(), phase, "{name}: step {i} ({what}): phase");
        }
        v
    }

    /// Start → no stale key → lease 0x10 → campaign → elected at 0.1 s.
    fn elected() -> Vec<Step> {
        vec![
            Ev(0.0, E::Start, vec![A::QueryLeader], Phase::Querying),
            Ev(0.0, E::Leader(None), vec![A::GrantLease { ttl: s(5.0) }], Phase::Granting),
            Ev(
                0.05,
                E::LeaseGranted { id: 0x10 },
                vec![A::Campaign { lease: 0x10 }],
                Phase::Campaigning,
            ),
            Ev(0.1, E::Elected, vec![A::AddAddress, A::Announce], Phase::Holding),
        ]
    }

    fn with(mut base: Vec<Step>, more: Vec<Step>) -> Vec<Step> {
        base.extend(more);
        base
    }

    #[test]
    fn the_election_name_is_talos_s() {
        assert_eq!(
            election_name("10.5.0.100".parse().unwrap()),
            "talos:v1:vip:election:10.5.0.100"
        );
        assert_eq!(
            election_name("2001:db8::0:1".parse().unwrap()),
            "talos:v1:vip:election:2001:db8::1"
        );
    }

    #[test]
    fn transitions() {
        let cases: Vec<(&str, Vec<Step>)> = vec![
            ("campaign then hold", elected()),
            (
                "keep-alives every second keep the address",
                with(
                    elected(),
                    vec![
                        Tick(0.9, vec![], Phase::Holding),
                        Tick(1.05, vec![A::KeepAlive { lease: 0x10 }], Phase::Holding),
                        // No second keep-alive while one is in flight.
                        Tick(1.5, vec![], Phase::Holding),
                        Ev(1.06, E::KeepAliveOk { sent_at: s(1.05) }, vec![], Phase::Holding),
                        Tick(2.06, vec![A::KeepAlive { lease: 0x10 }], Phase::Holding),
                        Ev(2.07, E::KeepAliveOk { sent_at: s(2.06) }, vec![], Phase::Holding),
                        // Fence is last_ok + 4 s = 6.06; still held just before.
                        Tick(3.07, vec![A::KeepAlive { lease: 0x10 }], Phase::Holding),
                    ],
                ),
            ),
            (
                "fence: no good keep-alive for ttl - margin drops the address",
                with(
                    elected(),
                    vec![
                        Tick(1.05, vec![A::KeepAlive { lease: 0x10 }], Phase::Holding),
                        Ev(1.5, E::KeepAliveFailed, vec![], Phase::Holding),
                        Tick(2.5, vec![A::KeepAlive { lease: 0x10 }], Phase::Holding),
                        Ev(3.0, E::KeepAliveFailed, vec![], Phase::Holding),
                        // The grant was sent at 0.0: fence at 4.0.
                        Tick(3.99, vec![], Phase::Holding),
                        Tick(
                            4.0,
                            vec![A::RemoveAddress, A::KeepAlive { lease: 0x10 }],
                            Phase::Fenced,
                        ),
                        Tick(4.1, vec![], Phase::Fenced),
                        // That keep-alive is answered: the lease lived through the gap, so
                        // did our key; take the address back.
                        Ev(
                            4.2,
                            E::KeepAliveOk { sent_at: s(4.0) },
                            vec![A::AddAddress, A::Announce],
                            Phase::Holding,
                        ),
                    ],
                ),
            ),
            (
                "fenced holder whose lease is gone starts over without resigning",
                with(
                    elected(),
                    vec![
                        Tick(
                            4.0,
                            vec![A::RemoveAddress, A::KeepAlive { lease: 0x10 }],
                            Phase::Fenced,
                        ),
                        Ev(6.0, E::LeaseGone, vec![], Phase::Idle),
                        Tick(6.5, vec![], Phase::Idle),
                        Tick(7.0, vec![A::QueryLeader], Phase::Querying),
                    ],
                ),
            ),
            (
                "lease gone while holding: address off at once, no resign",
                with(elected(), vec![Ev(1.0, E::LeaseGone, vec![A::RemoveAddress], Phase::Idle)]),
            ),
            (
                "another leader observed: address off, resign, revoke, retry",
                with(
                    elected(),
                    vec![
                        Ev(
                            1.0,
                            E::LeaderChanged,
                            vec![A::RemoveAddress, A::Resign, A::Revoke { lease: 0x10 }],
                            Phase::Idle,
                        ),
                        Tick(2.0, vec![A::QueryLeader], Phase::Querying),
                    ],
                ),
            ),
            (
                "etcd down: the address goes at once",
                with(elected(), vec![Ev(1.0, E::EtcdDown, vec![A::RemoveAddress], Phase::Idle)]),
            ),
            (
                "planned handover: remove, wait for removal, then resign and revoke",
                with(
                    elected(),
                    vec![
                        Ev(1.0, E::Stop, vec![A::RemoveAddress], Phase::Releasing),
                        Ev(
                            1.02,
                            E::AddressRemoved,
                            vec![A::Resign, A::Revoke { lease: 0x10 }],
                            Phase::Stopped,
                        ),
                        Ev(1.5, E::Start, vec![], Phase::Stopped),
                    ],
                ),
            ),
            (
                "planned handover with a removal that never confirms",
                with(
                    elected(),
                    vec![
                        Ev(1.0, E::Stop, vec![A::RemoveAddress], Phase::Releasing),
                        Tick(2.9, vec![], Phase::Releasing),
                        Tick(3.0, vec![A::Resign, A::Revoke { lease: 0x10 }], Phase::Stopped),
                    ],
                ),
            ),
            (
                "stop while queued: revoke only",
                vec![
                    Ev(0.0, E::Start, vec![A::QueryLeader], Phase::Querying),
                    Ev(
                        0.0,
                        E::Leader(Some(ghost("cp-2"))),
                        vec![A::GrantLease { ttl: s(5.0) }],
                        Phase::Granting,
                    ),
                    Ev(
                        0.1,
                        E::LeaseGranted { id: 0x11 },
                        vec![A::Campaign { lease: 0x11 }],
                        Phase::Campaigning,
                    ),
                    Ev(0.5, E::Stop, vec![A::Revoke { lease: 0x11 }], Phase::Stopped),
                ],
            ),
            (
                "a rebooted former holder resigns its stale key first",
                vec![
                    Ev(0.0, E::Start, vec![A::QueryLeader], Phase::Querying),
                    Ev(
                        0.0,
                        E::Leader(Some(ghost("cp-1"))),
                        vec![A::ResignStale { key: ghost("cp-1").key, create_revision: 7 }],
                        Phase::ResigningStale,
                    ),
                    Ev(0.1, E::StaleResigned, vec![A::GrantLease { ttl: s(5.0) }], Phase::Granting),
                ],
            ),
            (
                "queued behind another node: keep-alives while waiting, then elected",
                vec![
                    Ev(0.0, E::Start, vec![A::QueryLeader], Phase::Querying),
                    Ev(
                        0.0,
                        E::Leader(Some(ghost("cp-2"))),
                        vec![A::GrantLease { ttl: s(5.0) }],
                        Phase::Granting,
                    ),
                    Ev(
                        0.0,
                        E::LeaseGranted { id: 0x12 },
                        vec![A::Campaign { lease: 0x12 }],
                        Phase::Campaigning,
                    ),
                    Tick(1.0, vec![A::KeepAlive { lease: 0x12 }], Phase::Campaigning),
                    Ev(1.0, E::KeepAliveOk { sent_at: s(1.0) }, vec![], Phase::Campaigning),
                    // No fence while not holding.
                    Tick(30.0, vec![A::KeepAlive { lease: 0x12 }], Phase::Campaigning),
                    Ev(30.0, E::KeepAliveOk { sent_at: s(30.0) }, vec![], Phase::Campaigning),
                    Ev(30.5, E::Elected, vec![A::AddAddress, A::Announce], Phase::Holding),
                ],
            ),
            (
                "elected on a lease past its fence: wait for a keep-alive before holding",
                vec![
                    Ev(0.0, E::Start, vec![A::QueryLeader], Phase::Querying),
                    Ev(0.0, E::Leader(None), vec![A::GrantLease { ttl: s(5.0) }], Phase::Granting),
                    Ev(
                        0.0,
                        E::LeaseGranted { id: 0x13 },
                        vec![A::Campaign { lease: 0x13 }],
                        Phase::Campaigning,
                    ),
                    Ev(4.5, E::Elected, vec![], Phase::Fenced),
                    Tick(4.5, vec![A::KeepAlive { lease: 0x13 }], Phase::Fenced),
                    Ev(
                        4.6,
                        E::KeepAliveOk { sent_at: s(4.5) },
                        vec![A::AddAddress, A::Announce],
                        Phase::Holding,
                    ),
                ],
            ),
            (
                "campaign lost (our key expired while queued): revoke and retry",
                vec![
                    Ev(0.0, E::Start, vec![A::QueryLeader], Phase::Querying),
                    Ev(0.0, E::Leader(None), vec![A::GrantLease { ttl: s(5.0) }], Phase::Granting),
                    Ev(
                        0.0,
                        E::LeaseGranted { id: 0x14 },
                        vec![A::Campaign { lease: 0x14 }],
                        Phase::Campaigning,
                    ),
                    Ev(0.2, E::CampaignLost, vec![A::Revoke { lease: 0x14 }], Phase::Idle),
                    Ev(0.3, E::Start, vec![], Phase::Idle),
                    Tick(1.2, vec![A::QueryLeader], Phase::Querying),
                ],
            ),
            (
                "request failures retry after a pause",
                vec![
                    Ev(0.0, E::Start, vec![A::QueryLeader], Phase::Querying),
                    Ev(0.1, E::Failed, vec![], Phase::Idle),
                    Tick(1.1, vec![A::QueryLeader], Phase::Querying),
                    Ev(1.1, E::Leader(None), vec![A::GrantLease { ttl: s(5.0) }], Phase::Granting),
                    Ev(1.2, E::Failed, vec![], Phase::Idle),
                ],
            ),
            (
                "a grant arriving after a stop is revoked",
                vec![
                    Ev(0.0, E::Start, vec![A::QueryLeader], Phase::Querying),
                    Ev(0.0, E::Leader(None), vec![A::GrantLease { ttl: s(5.0) }], Phase::Granting),
                    Ev(0.1, E::EtcdDown, vec![], Phase::Idle),
                    Ev(
                        0.2,
                        E::LeaseGranted { id: 0x15 },
                        vec![A::Revoke { lease: 0x15 }],
                        Phase::Idle,
                    ),
                ],
            ),
        ];
        for (name, steps) in cases {
            run(name, steps);
        }
    }

    #[test]
    fn the_deadline_is_the_next_keepalive_or_the_fence() {
        let mut v = run("deadline", elected());
        // Keep-alive due at 0.05 + 1.
        assert_eq!(v.deadline(), Some(s(1.05)));
        v.tick(s(1.05));
        // In flight: the fence (grant at 0 + 4 s) is what wakes us.
        assert_eq!(v.deadline(), Some(s(4.0)));
        assert!(v.holds_address());
    }

    /// Never two holders: simulate etcd's expiry of the holder's lease (counted from when a
    /// renewal arrived, which is never before it was sent) against the holder's fence, for
    /// keep-alives that stop at any point, with any one-way delay under the margin.
    #[test]
    fn the_fence_always_fires_before_etcd_can_expire_the_lease() {
        // One-way delays up to half the call timeout (a slower answer is a failed call), and
        // for the 5 s lease up to 900 ms as before.
        let cases = [
            (Timings::default(), vec![0u64, 10, 50, 100, 125]),
            (Timings::talos(), vec![0, 10, 300]),
            (five_seconds(), vec![0, 10, 300, 900]),
        ];
        for (t, delays) in cases {
            fence_before_expiry(t, &delays);
        }
    }

    fn fence_before_expiry(t: Timings, delays: &[u64]) {
        let end = t.ttl * 12;
        for stop_after in 0..20u32 {
            for &delay_ms in delays {
                let delay = Duration::from_millis(delay_ms);
                let mut v = Vip::new("cp-1", t);
                v.handle(Duration::ZERO, E::Start);
                v.handle(Duration::ZERO, E::Leader(None));
                // etcd grants on arrival.
                let mut etcd_expiry = delay + t.ttl;
                v.handle(delay * 2, E::LeaseGranted { id: 1 });
                v.handle(delay * 2, E::Elected);
                let mut now = delay * 2;
                let mut n = 0;
                let mut dropped_at = None;
                while now < end {
                    now += Duration::from_millis(10);
                    for a in v.tick(now) {
                        match a {
                            A::KeepAlive { .. } if n < stop_after => {
                                n += 1;
                                etcd_expiry = now + delay + t.ttl;
                                v.handle(now + delay * 2, E::KeepAliveOk { sent_at: now });
                            }
                            A::KeepAlive { .. } => {
                                v.handle(now, E::KeepAliveFailed);
                            }
                            A::RemoveAddress => dropped_at = dropped_at.or(Some(now)),
                            _ => {}
                        }
                    }
                    if dropped_at.is_some() {
                        break;
                    }
                }
                let dropped = dropped_at.expect("the fence fired");
                assert!(
                    dropped + t.margin <= etcd_expiry + Duration::from_millis(10),
                    "stop_after {stop_after} delay {delay_ms}: dropped at {dropped:?}, etcd expiry {etcd_expiry:?}"
                );
            }
        }
    }

    #[test]
    fn timings_parse_and_refuse_unsafe_values() {
        assert_eq!(Timings::parse(""), Ok(Timings::default()));
        assert_eq!(Timings::parse("talos"), Ok(Timings::talos()));
        let t = Timings::parse("ttl=5,keepalive=1s,margin=1000ms,announce=1").unwrap();
        assert_eq!((t.ttl, t.keepalive, t.margin, t.announcements), (s(5.0), s(1.0), s(1.0), 1));
        let t = Timings::parse("talos, announce=3").unwrap();
        assert_eq!((t.ttl, t.announcements), (s(60.0), 3));
        assert_eq!(Timings::parse("ttl=1500ms"), Err(TimingsError::Unsafe));
        assert_eq!(Timings::parse("ttl=2,margin=2"), Err(TimingsError::Unsafe));
        assert_eq!(Timings::parse("ttl=2,margin=1,keepalive=1500ms"), Err(TimingsError::Unsafe));
        assert_eq!(Timings::parse("margin=0"), Err(TimingsError::Unsafe));
        assert_eq!(Timings::parse("ttl"), Err(TimingsError::Syntax("ttl".into())));
        assert_eq!(Timings::parse("lease=5"), Err(TimingsError::Syntax("lease=5".into())));
        assert!(matches!(Timings::parse("ttl=5h"), Err(TimingsError::Value { .. })));
        assert!(matches!(
            Timings::parse("ttl=99999999999999999999"),
            Err(TimingsError::Value { .. })
        ));
        assert!(matches!(Timings::parse("announce=0"), Err(TimingsError::Value { .. })));
        // The client's timeout stays inside the margin.
        for t in [Timings::default(), Timings::talos()] {
            assert!(t.call_timeout() < t.margin);
        }
    }
}
