// SPDX-License-Identifier: Apache-2.0
//! Peer state and endpoint rotation (docs/talos.md: KubeSpan), sans-IO: the caller passes the time
//! and what WireGuard reports, and gets the peer's state and, when it is time, an endpoint to set.
//!
//! ```text
//!  T0 = last endpoint change            T0 + endpoint timeout          T0 + down interval
//!  |------------- unknown ---------------|----------- down ---------------|-- down --
//!  |<- handshake after T0: up from then on, until it is down interval old ->|
//! ```
//!
//! A peer that is `down` (or was never pointed anywhere) gets the next endpoint of its list,
//! wrapping around. Where keelson differs from Talos, on purpose:
//! * the per-endpoint timeout is configurable in seconds (default 10 s, Talos's 15 s is the
//!   ceiling) and the engine asks to be woken exactly when it expires, instead of waiting for
//!   a 30 s tick, so a dead first endpoint costs one timeout, not up to 45 s;
//! * the endpoint that last worked is remembered: when the list changes and the one in use is
//!   gone, rotation resumes there instead of at the top of the list;
//! * a working endpoint found in the kernel at start (keelson restarted over a live tunnel) is
//!   adopted, not replaced by the first of the list.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use net::host::REJECT_AFTER_TIME;
use net::resource::PeerState;

/// How long a handshake keeps a peer up: REJECT_AFTER_TIME (180 s) + REKEY_TIMEOUT (5 s) +
/// REKEY_ATTEMPT_TIME (90 s), as Talos (docs/talos.md: KubeSpan).
pub const PEER_DOWN_INTERVAL: Duration = Duration::from_secs(275);

/// How long an endpoint on trial waits for a handshake before the engine asks for another
/// initiation; the wait doubles after each one asked (0.5 s, 1 s, 2 s, ...). Half a second is
/// many round trips on any path a mesh spans, and a slower one gets the longer waits after. WireGuard itself
/// retransmits only every 5 s (REKEY_TIMEOUT), so when both nodes' first initiations are lost
/// (each reached the other before it knew us, or left before the route to the endpoint
/// existed), the tunnel would wait that long. Doubling keeps a slow path (a reply taking
/// longer than the wait is dropped by the re-created peer) from being retried forever.
pub const HANDSHAKE_RETRY_FIRST: Duration = Duration::from_millis(500);

/// How soon after an endpoint's trial begins, or an initiation is asked for again, WireGuard
/// is read once more: a handshake takes a round trip, and the cadence while on trial (a
/// second) would report the peer `up` up to a second after its tunnel was.
pub const HANDSHAKE_CHECK: Duration = Duration::from_millis(250);

/// The spread of [`Rotation::with_retry_jitter`]: WireGuard's own jitter on its retransmissions
/// (REKEY_TIMEOUT_JITTER_MAX_JIFFIES, a third of a second).
pub const HANDSHAKE_RETRY_JITTER_MAX: Duration = Duration::from_millis(333);

/// A retry jitter for the peer with this public key, below [`HANDSHAKE_RETRY_JITTER_MAX`]: the
/// two ends of a tunnel derive theirs from different keys, so their retries do not stay in
/// step.
pub fn retry_jitter(public_key: &str) -> Duration {
    // FNV-1a: any spread will do, it only has to differ between the two keys.
    let h = public_key
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    let max = u64::try_from(HANDSHAKE_RETRY_JITTER_MAX.as_millis()).unwrap_or(333);
    Duration::from_millis(h % max)
}

/// The engine's timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// How long a new endpoint gets to complete a handshake.
    pub endpoint_timeout: Duration,
    /// How old the last handshake may be for the peer to count as up.
    pub down_interval: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            endpoint_timeout: net::config::KUBESPAN_DEFAULT_ENDPOINT_TIMEOUT,
            down_interval: PEER_DOWN_INTERVAL,
        }
    }
}

/// What WireGuard says about the peer now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Observation {
    /// The endpoint it uses (after roaming, possibly one we never set).
    pub endpoint: Option<SocketAddr>,
    /// How long ago the last handshake completed; `None` if never.
    pub handshake_age: Option<Duration>,
}

/// The engine's answer to one observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// The peer's state.
    pub state: PeerState,
    /// Point WireGuard at this endpoint now.
    pub set_endpoint: Option<SocketAddr>,
    /// Ask WireGuard for a handshake initiation now (the endpoint on trial had none answered).
    pub retry_handshake: bool,
}

/// One peer's rotation state.
#[derive(Debug, Clone, Default)]
pub struct Rotation {
    timing: Timing,
    /// The endpoint in use or on trial (Talos's LastUsedEndpoint): the one we last set, or
    /// the one WireGuard roamed to since.
    last_used: Option<SocketAddr>,
    /// When it changed (Talos's LastEndpointChange, T0).
    last_change: Option<Instant>,
    /// The last endpoint with a handshake.
    last_good: Option<SocketAddr>,
    /// When the last handshake happened, as of the last observation.
    handshake_at: Option<Instant>,
    state: PeerState,
    /// When to ask for the next initiation while the endpoint on trial has no handshake.
    retry_at: Option<Instant>,
    /// How long after that the one after.
    retry_gap: Duration,
    /// The trial (its `last_change`) that schedule belongs to.
    retry_for: Option<Instant>,
    /// Added to every wait: two nodes whose trials began together would otherwise retry
    /// together, and two initiations that cross each other both fail (each side answers the
    /// other's, which replaces its own handshake, so neither answer is accepted).
    retry_jitter: Duration,
    /// How many initiations were asked for (the counter the WireGuard spec carries).
    retries: u32,
    /// When to look again soon after a trial began or an initiation was asked for
    /// ([`HANDSHAKE_CHECK`]).
    check_at: Option<Instant>,
}

impl Rotation {
    /// A peer seen for the first time.
    pub fn new(timing: Timing) -> Self {
        Self { timing, ..Self::default() }
    }

    /// The same, with `jitter` added to each handshake retry's wait ([`retry_jitter`]).
    pub fn with_retry_jitter(mut self, jitter: Duration) -> Self {
        self.retry_jitter = jitter;
        self
    }

    /// Change the timing (a config reload); the state is kept.
    pub fn set_timing(&mut self, timing: Timing) {
        self.timing = timing;
    }

    /// The state after the last [`Rotation::handle`].
    pub fn state(&self) -> PeerState {
        self.state
    }

    /// The endpoint last set, if any.
    pub fn last_used(&self) -> Option<SocketAddr> {
        self.last_used
    }

    /// The endpoint that last had a handshake, if any.
    pub fn last_good(&self) -> Option<SocketAddr> {
        self.last_good
    }

    /// How many handshake initiations were asked for so far.
    pub fn retries(&self) -> u32 {
        self.retries
    }

    /// When the last endpoint change happened.
    pub fn last_change(&self) -> Option<Instant> {
        self.last_change
    }

    /// Take in what WireGuard reports at `now` for a peer with these `endpoints`.
    pub fn handle(&mut self, now: Instant, endpoints: &[SocketAddr], obs: &Observation) -> Step {
        self.handshake_at = obs.handshake_age.and_then(|age| now.checked_sub(age));
        let recent = obs.handshake_age.is_some_and(|age| age < self.timing.down_interval);
        if let Some(e) = obs.endpoint.filter(|e| self.last_used != Some(*e)) {
            self.last_used = Some(e);
            // A live tunnel found at start (our restart, or a peer that connected first) is
            // adopted as it is.
            if !(recent && self.last_change.is_none()) {
                // WireGuard roamed: the peer reached us from `e`, perhaps with a handshake
                // still under way (the responder's handshake only counts once the
                // initiator's first packet arrives). That path gets a trial of its own
                // instead of being replaced by the next endpoint of the list.
                self.last_change = Some(now);
            }
        }
        // A session younger than REJECT_AFTER_TIME is live: the peer is up whatever the
        // bookkeeping says, and its endpoint (perhaps one WireGuard roamed to) is never
        // replaced. Rotation itself never meets one: it only moves peers that are down.
        let live = obs.handshake_age.is_some_and(|age| age < REJECT_AFTER_TIME);
        self.state = if live { PeerState::Up } else { self.compute_state(now, obs) };
        if self.state == PeerState::Up {
            self.last_good = obs.endpoint.or(self.last_good);
        }
        let mut set_endpoint = None;
        if !live && (self.state == PeerState::Down || self.last_used.is_none()) {
            if let Some(next) = self.next_endpoint(endpoints, obs.endpoint) {
                self.last_used = Some(next);
                self.last_change = Some(now);
                self.state = PeerState::Unknown;
                set_endpoint = Some(next);
            }
        }
        let retry_handshake = self.retry(now, live);
        if set_endpoint.is_some() || retry_handshake {
            self.check_at = Some(now + HANDSHAKE_CHECK);
        } else if self.check_at.is_some_and(|at| at <= now) || self.state != PeerState::Unknown {
            self.check_at = None;
        }
        Step { state: self.state, set_endpoint, retry_handshake }
    }

    /// Whether to ask for another initiation now: the endpoint on trial has had no handshake
    /// for the current wait. A new trial (an endpoint set, or a roam) restarts the schedule.
    fn retry(&mut self, now: Instant, live: bool) -> bool {
        let on_trial = !live && self.state == PeerState::Unknown && self.last_used.is_some();
        if !on_trial {
            self.retry_at = None;
            return false;
        }
        let Some(at) = self.retry_at.filter(|_| self.retry_for == self.last_change) else {
            let since = self.last_change.unwrap_or(now);
            self.retry_for = self.last_change;
            self.retry_gap = HANDSHAKE_RETRY_FIRST;
            self.retry_at = Some(since + HANDSHAKE_RETRY_FIRST + self.retry_jitter);
            return false;
        };
        if now < at {
            return false;
        }
        self.retries = self.retries.wrapping_add(1).max(1);
        self.retry_gap = self.retry_gap.saturating_mul(2);
        self.retry_at = Some(now + self.retry_gap + self.retry_jitter);
        true
    }

    fn compute_state(&self, now: Instant, obs: &Observation) -> PeerState {
        let since_change = self.last_change.map(|t0| now.saturating_duration_since(t0));
        let after_change = match (since_change, obs.handshake_age) {
            (Some(since), Some(age)) => age < since,
            (None, Some(_)) => true,
            (_, None) => false,
        };
        let state = match since_change {
            Some(since) if since < self.timing.endpoint_timeout => {
                if after_change {
                    PeerState::Up
                } else {
                    PeerState::Unknown
                }
            }
            Some(since) if since < self.timing.down_interval => {
                if after_change {
                    PeerState::Up
                } else {
                    PeerState::Down
                }
            }
            _ => {
                if obs.handshake_age.is_some_and(|age| age < self.timing.down_interval) {
                    PeerState::Up
                } else {
                    PeerState::Down
                }
            }
        };
        if state == PeerState::Down && self.last_used.is_none() {
            PeerState::Unknown
        } else {
            state
        }
    }

    /// The endpoint to try next, or `None` to leave things as they are.
    fn next_endpoint(
        &self,
        endpoints: &[SocketAddr],
        wg_endpoint: Option<SocketAddr>,
    ) -> Option<SocketAddr> {
        let first = *endpoints.first()?;
        if let [only] = endpoints {
            if self.last_used == Some(*only) && wg_endpoint == Some(*only) {
                return None;
            }
        }
        let position = self.last_used.and_then(|u| endpoints.iter().position(|e| *e == u));
        match position {
            Some(i) => endpoints.get(i + 1).copied().or(Some(first)),
            // Nothing set yet, or the list no longer has it: resume where it last worked.
            None => self.last_good.filter(|g| endpoints.contains(g)).or(Some(first)),
        }
    }

    /// When the state can change with no new handshake: the endpoint timeout of a pending
    /// endpoint, or the moment the last handshake grows too old.
    pub fn poll_at(&self) -> Option<Instant> {
        match self.state {
            PeerState::Unknown => {
                let timeout = self.last_change.map(|t0| t0 + self.timing.endpoint_timeout);
                [timeout, self.retry_at, self.check_at].into_iter().flatten().min()
            }
            PeerState::Up => self.handshake_at.map(|h| h + self.timing.down_interval),
            PeerState::Down => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(i: u8) -> SocketAddr {
        SocketAddr::from(([192, 0, 2, i], 51820))
    }

    const TIMING: Timing = Timing {
        endpoint_timeout: Duration::from_secs(10),
        down_interval: Duration::from_secs(275),
    };

    /// One row: at `t` seconds, the last handshake `hs` seconds ago (None: never), WireGuard's
    /// endpoint → expected state and endpoint set.
    type Row = (u64, Option<u64>, Option<u8>, PeerState, Option<u8>);

    fn run(endpoints: &[SocketAddr], rows: &[Row]) -> Rotation {
        let start = Instant::now();
        let mut r = Rotation::new(TIMING);
        for (i, (t, hs, wg, state, set)) in rows.iter().enumerate() {
            let obs =
                Observation { endpoint: wg.map(ep), handshake_age: hs.map(Duration::from_secs) };
            let step = r.handle(start + Duration::from_secs(*t), endpoints, &obs);
            assert_eq!(
                (step.state, step.set_endpoint),
                (*state, set.map(ep)),
                "row {i}: t={t} hs={hs:?} wg={wg:?}"
            );
        }
        r
    }

    use PeerState::{Down, Unknown, Up};

    #[test]
    fn dead_first_endpoint_rotates_after_the_timeout() {
        let eps = [ep(1), ep(2), ep(3)];
        run(
            &eps,
            &[
                (0, None, None, Unknown, Some(1)),
                (5, None, Some(1), Unknown, None),
                (9, None, Some(1), Unknown, None),
                (10, None, Some(1), Unknown, Some(2)),
                (13, Some(1), Some(2), Up, None),
                (100, Some(30), Some(2), Up, None),
                // Still within T0 + 275 s of the change and a handshake after it: up.
                (280, Some(266), Some(2), Up, None),
                // 275 s since the change, the handshake is too old: down → next endpoint.
                (300, Some(287), Some(2), Unknown, Some(3)),
                (310, Some(297), Some(3), Unknown, Some(1)),
                (311, Some(0), Some(1), Up, None),
            ],
        );
    }

    #[test]
    fn single_endpoint_and_empty_list() {
        // A single endpoint that never answers: down after the timeout, and left alone.
        run(
            &[ep(1)],
            &[
                (0, None, None, Unknown, Some(1)),
                (9, None, Some(1), Unknown, None),
                (10, None, Some(1), Down, None),
                (500, None, Some(1), Down, None),
                (501, Some(0), Some(1), Up, None),
            ],
        );
        // No endpoints at all: nothing to do, never down.
        run(&[], &[(0, None, None, Unknown, None), (400, None, None, Unknown, None)]);
    }

    #[test]
    fn a_handshake_before_the_change_does_not_count() {
        run(
            &[ep(1), ep(2)],
            &[
                (0, None, None, Unknown, Some(1)),
                (1, Some(0), Some(1), Up, None),
                // Silent for 275 s after the change: down, the next endpoint is tried.
                (276, Some(275), Some(1), Unknown, Some(2)),
                // The old handshake predates the change: still on trial, then down again.
                (280, Some(279), Some(2), Unknown, None),
                (286, Some(285), Some(2), Unknown, Some(1)),
            ],
        );
    }

    #[test]
    fn a_roam_before_the_handshake_completes_gets_a_trial() {
        // A single dead endpoint; the peer's initiation arrives from 9 after our trial ran out.
        // WireGuard roams at once but the handshake completes only with the peer's next packet.
        let r = run(
            &[ep(1)],
            &[
                (0, None, None, Unknown, Some(1)),
                (10, None, Some(1), Down, None),
                (12, None, Some(9), Unknown, None),
                (13, Some(0), Some(9), Up, None),
            ],
        );
        assert_eq!(r.last_used(), Some(ep(9)));
        // A roam that never completes a handshake: after its trial, the list again.
        run(
            &[ep(1), ep(2)],
            &[
                (0, None, None, Unknown, Some(1)),
                (3, None, Some(9), Unknown, None),
                (13, None, Some(9), Unknown, Some(1)),
            ],
        );
    }

    #[test]
    fn a_live_session_is_never_re_pointed() {
        // Pointed at a dead endpoint; the peer reaches us and WireGuard roams to it (9).
        let r = run(
            &[ep(1)],
            &[
                (0, None, None, Unknown, Some(1)),
                (3, Some(1), Some(9), Up, None),
                // An observation that contradicts the bookkeeping (the handshake reads as older
                // than our change, as after a clock step): a session this young is live.
                (40, Some(60), Some(9), Up, None),
                (200, Some(179), Some(9), Up, None),
            ],
        );
        assert_eq!(r.last_used(), Some(ep(9)));
    }

    #[test]
    fn a_live_tunnel_is_adopted_at_start() {
        let r = run(
            &[ep(1), ep(2)],
            &[(0, Some(20), Some(2), Up, None), (400, Some(20), Some(2), Up, None)],
        );
        assert_eq!(r.last_used(), Some(ep(2)));
    }

    #[test]
    fn roaming_is_kept_and_last_good_remembered() {
        let start = Instant::now();
        let mut r = Rotation::new(TIMING);
        let eps = [ep(1), ep(2), ep(3)];
        let at = |s| start + Duration::from_secs(s);
        r.handle(at(0), &eps, &Observation::default());
        r.handle(at(10), &eps, &Observation { endpoint: Some(ep(1)), handshake_age: None });
        let s = r.handle(
            at(12),
            &eps,
            &Observation { endpoint: Some(ep(2)), handshake_age: Some(Duration::from_secs(1)) },
        );
        assert_eq!(s.state, Up);
        assert_eq!(r.last_good(), Some(ep(2)));
        // The list changes and drops the endpoint in use while the peer is down: rotation
        // resumes at the one that last worked, not at the top.
        let mut r2 = Rotation::new(TIMING);
        r2.last_good = Some(ep(3));
        r2.last_used = Some(ep(7));
        r2.last_change = Some(at(0));
        let s =
            r2.handle(at(20), &eps, &Observation { endpoint: Some(ep(7)), handshake_age: None });
        assert_eq!((s.state, s.set_endpoint), (Unknown, Some(ep(3))));
    }

    #[test]
    fn an_unanswered_trial_asks_for_initiations_at_doubling_waits() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let eps = [ep(1), ep(2)];
        let mut r = Rotation::new(TIMING);
        let waiting = Observation { endpoint: Some(ep(1)), handshake_age: None };
        let s = r.handle(at(0), &eps, &Observation::default());
        assert_eq!((s.set_endpoint, s.retry_handshake, r.retries()), (Some(ep(1)), false, 0));
        // Polled every half second: a retry at 0.5 s, 1.5 s, 3.5 s and 7.5 s after the
        // endpoint was set.
        let asked: Vec<u64> = (1..20)
            .map(|i| i * 500)
            .filter(|t| r.handle(at(*t), &eps, &waiting).retry_handshake)
            .collect();
        // 10 s in, the timeout moves the peer on to the next endpoint, a trial of its own.
        assert_eq!(asked, [500, 1500, 3500, 7500]);
        assert_eq!(r.retries(), 4);
        let s = r.handle(at(10_000), &eps, &waiting);
        assert_eq!((s.set_endpoint, s.retry_handshake), (Some(ep(2)), false));
        let moved = Observation { endpoint: Some(ep(2)), handshake_age: None };
        assert!(!r.handle(at(10_250), &eps, &moved).retry_handshake);
        assert!(r.handle(at(10_500), &eps, &moved).retry_handshake);
        assert_eq!(r.retries(), 5);
        // A handshake ends it: up, and nothing more asked.
        let up = Observation { endpoint: Some(ep(2)), handshake_age: Some(Duration::ZERO) };
        let s = r.handle(at(11_500), &eps, &up);
        assert_eq!((s.state, s.retry_handshake), (Up, false));
        assert!(!r.handle(at(20_000), &eps, &up).retry_handshake);
        // With a jitter, every wait is that much longer.
        let mut j = Rotation::new(TIMING).with_retry_jitter(Duration::from_millis(200));
        j.handle(at(0), &eps, &Observation::default());
        let asked: Vec<u64> = (1..90)
            .map(|i| i * 100)
            .filter(|t| j.handle(at(*t), &eps, &waiting).retry_handshake)
            .collect();
        assert_eq!(asked, [700, 1900, 4100, 8300]);
        // The two ends of a tunnel get different jitters, each under WireGuard's third of a second.
        let (a, b) = (retry_jitter("node-a-public-key="), retry_jitter("node-b-public-key="));
        assert!(a != b && a < HANDSHAKE_RETRY_JITTER_MAX && b < HANDSHAKE_RETRY_JITTER_MAX);
        // A peer without endpoints is never asked to initiate (it has nowhere to send).
        let mut none = Rotation::new(TIMING);
        assert!((0..20)
            .all(|i| !none.handle(at(i * 500), &[], &Observation::default()).retry_handshake));
    }

    #[test]
    fn wakes_at_its_deadlines() {
        let start = Instant::now();
        let mut r = Rotation::new(TIMING);
        r.handle(start, &[ep(1), ep(2)], &Observation::default());
        // A trial that just began is looked at again after a round trip's allowance.
        assert_eq!(r.poll_at(), Some(start + HANDSHAKE_CHECK));
        let waiting = Observation { endpoint: Some(ep(1)), handshake_age: None };
        r.handle(start + HANDSHAKE_CHECK, &[ep(1), ep(2)], &waiting);
        // Then the first handshake retry comes before the endpoint timeout.
        assert_eq!(r.poll_at(), Some(start + HANDSHAKE_RETRY_FIRST));
        // Each retry is checked on the same way; past them (0.5 s, then 1 s, 2 s and 4 s
        // later), the endpoint timeout is the deadline.
        for t in [500, 1500, 3500, 7500] {
            let now = start + Duration::from_millis(t);
            let step = r.handle(now, &[ep(1), ep(2)], &waiting);
            assert!(step.retry_handshake, "t={t}");
            assert_eq!(r.poll_at(), Some(now + HANDSHAKE_CHECK), "t={t}");
            r.handle(now + HANDSHAKE_CHECK, &[ep(1), ep(2)], &waiting);
        }
        assert_eq!(r.poll_at(), Some(start + Duration::from_secs(10)));
        let now = start + Duration::from_secs(4);
        r.handle(
            now,
            &[ep(1), ep(2)],
            &Observation { endpoint: Some(ep(1)), handshake_age: Some(Duration::from_secs(1)) },
        );
        assert_eq!(r.state(), Up);
        assert_eq!(r.poll_at(), Some(start + Duration::from_secs(3 + 275)));
    }
}
