// SPDX-License-Identifier: Apache-2.0
//! Pure timer arithmetic: retransmission backoff (RFC 2131 §4.1) and the RENEWING and
//! REBINDING retransmission interval (RFC 2131 §4.4.5).

use std::time::{Duration, Instant};

/// The first retransmission delay before randomization (RFC 2131 §4.1: "4 seconds").
pub const BACKOFF_INITIAL: Duration = Duration::from_secs(4);
/// The cap of the doubling retransmission delay (RFC 2131 §4.1: "up to a maximum of 64").
pub const BACKOFF_MAX: Duration = Duration::from_secs(64);
/// The floor of the RENEWING/REBINDING retransmission interval (RFC 2131 §4.4.5).
pub const RENEW_RETRANSMIT_MIN: Duration = Duration::from_secs(60);

/// The delay before retransmission number `attempt` (0 for the first wait).
///
/// RFC 2131 §4.1: the delay starts at 4 s and doubles up to 64 s, "randomized by the value of
/// a uniform random number chosen from the range -1 to +1". `jitter` is that random number
/// scaled to `0..=2000` milliseconds (so 1000 means no jitter); the caller owns the RNG so
/// that this stays a pure function.
pub fn backoff_delay(attempt: u32, jitter_ms: u64) -> Duration {
    let base =
        BACKOFF_INITIAL.checked_mul(1u32 << attempt.min(4)).unwrap_or(BACKOFF_MAX).min(BACKOFF_MAX);
    // base - 1 s + jitter, with jitter in 0..=2 s: the ±1 s of §4.1.
    base.saturating_sub(Duration::from_secs(1)) + Duration::from_millis(jitter_ms.min(2000))
}

/// When to retransmit a REQUEST in RENEWING (towards `deadline` = T2) or REBINDING (towards
/// `deadline` = the lease expiry).
///
/// RFC 2131 §4.4.5: wait "one-half of the remaining time until T2 (in RENEWING state) and
/// one-half of the remaining lease time (in REBINDING state), down to a minimum of 60
/// seconds". The result never passes `deadline`, so the state change at T2 or expiry is not
/// delayed by a late retransmission.
pub fn renewal_retransmit_at(now: Instant, deadline: Instant) -> Instant {
    let half = deadline.saturating_duration_since(now) / 2;
    let at = now + half.max(RENEW_RETRANSMIT_MIN);
    at.min(deadline)
}

/// T1 and T2 in seconds for a lease: options 58 and 59 when they are sane, otherwise the
/// RFC 2131 §4.4.5 defaults of 0.5 and 0.875 times the lease duration.
///
/// "Sane" means `T1 < T2 < lease` (RFC 2131 §4.4.5 orders them so); a server that sends
/// anything else gets the defaults for both, since a T2 before T1 would skip RENEWING.
pub fn renewal_times(lease_time: u32, t1: Option<u32>, t2: Option<u32>) -> (u32, u32) {
    let default_t1 = lease_time / 2;
    let default_t2 = (u64::from(lease_time) * 7 / 8) as u32;
    let t1 = t1.unwrap_or(default_t1);
    let t2 = t2.unwrap_or(default_t2);
    if t1 <= t2 && t2 <= lease_time {
        (t1, t2)
    } else {
        (default_t1, default_t2)
    }
}
