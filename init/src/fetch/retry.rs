// SPDX-License-Identifier: Apache-2.0
//! When a failed fetch is tried again, as one pure function. What may heal by itself is
//! retried with exponential backoff until the overall deadline: the network or the server not
//! there yet, a timeout, a 5xx, 408 or 429. What is the server's considered answer, or cannot
//! change without someone changing the image or the server, ends the fetch at once: any other
//! 4xx (Talos retries those too, for its whole timeout; keelson says so on the console and
//! waits in maintenance mode for `apply-config` instead), a certificate the image's roots do
//! not trust, an https to http redirect, a body too large or not a valid config.

use std::time::Duration;

/// The whole fetch gives up after this long (Talos: 3 hours).
pub const OVERALL: Duration = Duration::from_secs(3 * 3600);
/// One attempt, connection to last byte (Talos: 3 minutes).
pub const ATTEMPT: Duration = Duration::from_secs(180);
/// The first retry's delay; each failure doubles it up to [`MAX_DELAY`].
pub const FIRST_DELAY: Duration = Duration::from_secs(1);
/// The longest delay between attempts.
pub const MAX_DELAY: Duration = Duration::from_secs(30);

/// What kind of failure an attempt ended with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Name resolution, connect, reset, a timeout, a malformed or cut-off response, a TLS
    /// failure other than an untrusted certificate.
    Transport,
    /// An HTTP status other than 2xx (3xx only once the redirect limit is reached).
    Status(u16),
    /// The answer cannot be used and will not change by asking again.
    Final,
}

/// What to do after a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Try again after this long.
    Retry(Duration),
    /// Stop: the node stays in maintenance mode.
    GiveUp,
}

/// Is this failure worth another attempt?
pub fn retryable(f: Failure) -> bool {
    match f {
        Failure::Transport => true,
        Failure::Status(s) => s >= 500 || s == 408 || s == 429,
        Failure::Final => false,
    }
}

/// The delay before attempt `attempt + 1` (attempts count from 1), plus `jitter` (the caller's
/// random share of a second, so nodes that booted together spread out).
pub fn delay(attempt: u32, jitter: Duration) -> Duration {
    let doubled = FIRST_DELAY.saturating_mul(1u32 << attempt.saturating_sub(1).min(16));
    doubled.min(MAX_DELAY) + jitter.min(Duration::from_secs(1))
}

/// After attempt `attempt` failed with `f`, `elapsed` since the fetch began.
pub fn next(f: Failure, attempt: u32, elapsed: Duration, jitter: Duration) -> Next {
    if !retryable(f) {
        return Next::GiveUp;
    }
    let d = delay(attempt, jitter);
    if elapsed.saturating_add(d) >= OVERALL {
        Next::GiveUp
    } else {
        Next::Retry(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NO_JITTER: Duration = Duration::ZERO;

    #[test]
    fn backoff_doubles_to_the_cap() {
        let secs: Vec<u64> = (1..=8).map(|a| delay(a, NO_JITTER).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(delay(u32::MAX, NO_JITTER), MAX_DELAY);
        assert_eq!(delay(1, Duration::from_millis(300)), Duration::from_millis(1300));
        assert_eq!(delay(1, Duration::from_secs(9)), Duration::from_secs(2));
    }

    #[test]
    fn what_is_retried() {
        for f in [
            Failure::Transport,
            Failure::Status(500),
            Failure::Status(503),
            Failure::Status(408),
            Failure::Status(429),
        ] {
            assert_eq!(
                next(f, 3, Duration::ZERO, NO_JITTER),
                Next::Retry(Duration::from_secs(4)),
                "{f:?}"
            );
        }
        for f in [
            Failure::Status(404),
            Failure::Status(403),
            Failure::Status(400),
            Failure::Status(302),
            Failure::Final,
        ] {
            assert_eq!(next(f, 1, Duration::ZERO, NO_JITTER), Next::GiveUp, "{f:?}");
        }
    }

    #[test]
    fn the_overall_deadline_ends_retries() {
        let near = OVERALL - Duration::from_secs(10);
        assert_eq!(
            next(Failure::Transport, 2, near, NO_JITTER),
            Next::Retry(Duration::from_secs(2))
        );
        assert_eq!(next(Failure::Transport, 9, near, NO_JITTER), Next::GiveUp);
        assert_eq!(next(Failure::Transport, 1, OVERALL, NO_JITTER), Next::GiveUp);
    }
}
