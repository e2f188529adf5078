// SPDX-License-Identifier: Apache-2.0
//! When to renew a lease and when to stop trusting it, without I/O or a clock of its own (the
//! caller passes `now`). The cadence is etcd's Go client's: renew a third of the TTL after each
//! good answer; an answer with TTL 0 means the lease is gone. The local deadline is stricter
//! than the Go client's: a holder stops trusting its lease `margin` before the TTL runs out
//! since the last good renewal, so it has let go before etcd can hand the lease's keys to
//! someone else.

use std::time::{Duration, Instant};

/// Retry a failed renewal this soon (bounded by the renewal interval).
const RETRY: Duration = Duration::from_millis(500);
/// etcd's largest lease TTL (`MaxLeaseTTL`); a server claiming more is clamped, so instants
/// computed from it cannot overflow.
const MAX_TTL_SECS: i64 = 9_000_000_000;

fn ttl(secs: i64) -> Duration {
    Duration::from_secs(secs.clamp(1, MAX_TTL_SECS) as u64)
}

/// A lease's state as its holder sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseState {
    /// Renewed recently enough to be trusted.
    Alive,
    /// No good renewal within TTL − margin: may already be gone on the server.
    Expired,
    /// The server said the lease does not exist.
    Gone,
}

/// Keep-alive timing of one lease.
#[derive(Debug, Clone)]
pub struct KeepAlive {
    id: i64,
    ttl: Duration,
    margin: Duration,
    last_ok: Instant,
    next: Instant,
    gone: bool,
}

impl KeepAlive {
    /// A lease granted at `now` with `ttl_secs` (as the grant answered); trusted until
    /// `ttl − margin` after the last good renewal.
    pub fn new(id: i64, ttl_secs: i64, margin: Duration, now: Instant) -> Self {
        let ttl = ttl(ttl_secs);
        let margin = margin.min(ttl / 2);
        Self { id, ttl, margin, last_ok: now, next: now + ttl / 3, gone: false }
    }

    pub fn id(&self) -> i64 {
        self.id
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// True when a renewal should be sent now.
    pub fn due(&self, now: Instant) -> bool {
        !self.gone && now >= self.next
    }

    /// When to look again: the next renewal or the trust deadline, whichever is first.
    pub fn poll_at(&self) -> Instant {
        self.next.min(self.deadline())
    }

    /// The instant after which the lease is no longer trusted.
    pub fn deadline(&self) -> Instant {
        self.last_ok + (self.ttl - self.margin)
    }

    pub fn state(&self, now: Instant) -> LeaseState {
        if self.gone {
            LeaseState::Gone
        } else if now >= self.deadline() {
            LeaseState::Expired
        } else {
            LeaseState::Alive
        }
    }

    /// A renewal answered with `ttl_secs` (≤ 0: the lease is gone) at `now`.
    pub fn answered(&mut self, ttl_secs: i64, now: Instant) -> LeaseState {
        if ttl_secs <= 0 {
            self.gone = true;
            return LeaseState::Gone;
        }
        // Trust runs from when the request was answered, and the server's TTL may have been
        // raised to its minimum: take the answer's.
        self.ttl = ttl(ttl_secs);
        self.margin = self.margin.min(self.ttl / 2);
        self.last_ok = now;
        self.next = now + self.ttl / 3;
        LeaseState::Alive
    }

    /// A renewal failed in transport (unknown outcome): try again soon.
    pub fn failed(&mut self, now: Instant) -> LeaseState {
        self.next = now + RETRY.min(self.ttl / 3);
        self.state(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renewals_come_a_third_of_the_ttl_apart_and_trust_ends_before_the_ttl() {
        let t0 = Instant::now();
        let mut k = KeepAlive::new(7, 9, Duration::from_secs(2), t0);
        assert!(!k.due(t0));
        assert!(k.due(t0 + Duration::from_secs(3)));
        assert_eq!(k.poll_at(), t0 + Duration::from_secs(3));
        assert_eq!(k.answered(9, t0 + Duration::from_secs(3)), LeaseState::Alive);
        assert_eq!(k.poll_at(), t0 + Duration::from_secs(6));
        // No answer after that: trusted until 3 + 9 − 2 seconds.
        assert_eq!(k.failed(t0 + Duration::from_secs(6)), LeaseState::Alive);
        assert!(k.due(t0 + Duration::from_millis(6500)));
        assert_eq!(k.state(t0 + Duration::from_millis(9999)), LeaseState::Alive);
        assert_eq!(k.state(t0 + Duration::from_secs(10)), LeaseState::Expired);
        assert_eq!(k.deadline(), t0 + Duration::from_secs(10));
    }

    #[test]
    fn an_answer_without_ttl_means_the_lease_is_gone() {
        let t0 = Instant::now();
        let mut k = KeepAlive::new(7, 60, Duration::from_secs(5), t0);
        assert_eq!(k.answered(0, t0), LeaseState::Gone);
        assert!(!k.due(t0 + Duration::from_secs(100)));
        assert_eq!(k.state(t0), LeaseState::Gone);
    }

    #[test]
    fn a_server_claiming_an_endless_ttl_cannot_overflow_the_clock() {
        let t0 = Instant::now();
        let mut k = KeepAlive::new(1, i64::MAX, Duration::from_secs(1), t0);
        assert_eq!(k.answered(i64::MAX, t0), LeaseState::Alive);
        assert!(k.poll_at() > t0);
    }

    #[test]
    fn a_raised_ttl_is_taken_and_the_margin_never_eats_the_whole_ttl() {
        let t0 = Instant::now();
        let mut k = KeepAlive::new(1, 1, Duration::from_secs(30), t0);
        assert_eq!(k.deadline(), t0 + Duration::from_millis(500));
        k.answered(2, t0);
        assert_eq!(k.deadline(), t0 + Duration::from_secs(1) + Duration::from_millis(500));
    }
}
