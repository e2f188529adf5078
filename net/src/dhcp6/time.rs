// SPDX-License-Identifier: Apache-2.0
//! Pure timer arithmetic: the RFC 8415 §15 retransmission algorithm with the per-message
//! parameters of §7.6, and the T1/T2 defaults of §18.2.4.

use std::time::Duration;

/// RFC 8415 §7.6 retransmission parameters of one message type.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Retransmission {
    /// IRT: the initial retransmission time.
    pub initial: Duration,
    /// MRT: the cap of the retransmission time; `None` is no cap.
    pub max_rt: Option<Duration>,
    /// MRC: how many transmissions at most; `None` is no limit.
    pub max_count: Option<u32>,
}

/// SOL_TIMEOUT / SOL_MAX_RT: SOLICIT retransmits forever, capped at an hour.
pub const SOLICIT: Retransmission = Retransmission {
    initial: Duration::from_secs(1),
    max_rt: Some(Duration::from_secs(3600)),
    max_count: None,
};
/// REQ_TIMEOUT / REQ_MAX_RT / REQ_MAX_RC.
pub const REQUEST: Retransmission = Retransmission {
    initial: Duration::from_secs(1),
    max_rt: Some(Duration::from_secs(30)),
    max_count: Some(10),
};
/// REN_TIMEOUT / REN_MAX_RT; the MRD is the time left until T2.
pub const RENEW: Retransmission = Retransmission {
    initial: Duration::from_secs(10),
    max_rt: Some(Duration::from_secs(600)),
    max_count: None,
};
/// REB_TIMEOUT / REB_MAX_RT; the MRD is the time left until the valid lifetime ends.
pub const REBIND: Retransmission = Retransmission {
    initial: Duration::from_secs(10),
    max_rt: Some(Duration::from_secs(600)),
    max_count: None,
};

/// `RAND` of RFC 8415 §15 in thousandths: `0..=200` maps to -0.1..=+0.1.
/// `base · (900 + permille) / 1000`: `permille` 0..=200 is `base · (1 + RAND)`, and
/// 1000..=1200 is `base · (2 + RAND)`. In milliseconds, to stay exact and cheap.
fn scale(base: Duration, permille: u64) -> Duration {
    let ms = u64::try_from(base.as_millis()).unwrap_or(u64::MAX);
    Duration::from_millis(ms.saturating_mul(900 + permille) / 1000)
}

/// The retransmission time (RT) after `previous` (`None` for the first transmission).
///
/// RFC 8415 §15: `RT = IRT + RAND*IRT` first, then `RT = 2*RTprev + RAND*RTprev`, and when
/// that passes MRT, `RT = MRT + RAND*MRT`. `jitter_permille` is RAND scaled to `0..=200`
/// (100 = no jitter); the caller owns the RNG so that this stays pure. For SOLICIT the first
/// RT "MUST be ... strictly greater than IRT", so `solicit_first` folds RAND into (0, +0.1].
pub fn next_rt(
    params: &Retransmission,
    previous: Option<Duration>,
    jitter_permille: u64,
    solicit_first: bool,
) -> Duration {
    let jitter = jitter_permille.min(200);
    let jitter = if solicit_first && previous.is_none() { 101 + jitter * 99 / 200 } else { jitter };
    let rt = match previous {
        None => scale(params.initial, jitter),
        // 2·RTprev + RAND·RTprev = RTprev · (1.9 ..= 2.1).
        Some(prev) => scale(prev, jitter + 1000),
    };
    match params.max_rt {
        Some(mrt) if rt > mrt => scale(mrt, jitter),
        _ => rt,
    }
}

/// T1 and T2 in seconds for an IA_NA whose address has `preferred` seconds.
///
/// RFC 8415 §21.4: T1/T2 of 0 leave the choice to the client, which §18.2.4 recommends as
/// 0.5 and 0.8 times the shortest preferred lifetime. Values past the preferred lifetime are
/// clamped to it (a renewal after the address is deprecated helps nobody). Infinity
/// (`u32::MAX`) stays infinity. The caller has already discarded an IA with T1 > T2 > 0.
pub fn renewal_times(t1: u32, t2: u32, preferred: u32) -> (u32, u32) {
    if preferred == u32::MAX && t1 == 0 && t2 == 0 {
        return (u32::MAX, u32::MAX);
    }
    let default_t1 = preferred / 2;
    let default_t2 = u32::try_from(u64::from(preferred) * 4 / 5).unwrap_or(u32::MAX);
    let t1 = if t1 == 0 { default_t1 } else { t1.min(preferred) };
    let t2 = if t2 == 0 { default_t2.max(t1) } else { t2.min(preferred).max(t1) };
    (t1, t2)
}
