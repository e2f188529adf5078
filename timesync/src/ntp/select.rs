// SPDX-License-Identifier: Apache-2.0
//! Sample filtering per server and server selection across servers.
//!
//! * Per server ([`SampleFilter`]): the last [`FILTER_LEN`] samples are kept and the one with
//!   the smallest round-trip delay is used, as RFC 5905 §10's clock filter does: queueing
//!   delay only ever adds error, so the quickest exchange is the most trustworthy.
//! * Across servers ([`select`]): every server's best sample gives a correctness interval,
//!   `offset ± root distance`. Marzullo's algorithm (the core of RFC 5905 §11.2.1's
//!   intersection algorithm) finds the largest set of intervals sharing a common point. When
//!   that set holds a strict majority of the candidates its members are the truechimers;
//!   everyone else is a falseticker and is not used. Without a strict majority nothing is
//!   selected (two servers that disagree cannot be told apart). Among the truechimers the
//!   lowest stratum wins, then the smallest root distance (RFC 5905 §11.2.3 orders by
//!   stratum and distance too); its offset disciplines the clock.

use std::collections::VecDeque;

/// Samples kept per server (RFC 5905 §10: eight stages).
pub const FILTER_LEN: usize = 8;
/// The least root distance a sample gets, so intervals of nearby servers overlap despite
/// sub-millisecond jitter (RFC 5905 §11.2 MINDISP, 10 ms, on the delay term).
pub const MIN_DISTANCE_NS: i64 = 10_000_000 / 2;

/// One measurement of one server.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Sample {
    /// Server clock minus local clock.
    pub offset_ns: i64,
    /// Round trip, without the server's processing time.
    pub delay_ns: i64,
    /// Half the server's root delay plus its root dispersion: its own error to the reference.
    pub server_error_ns: i64,
    /// The server's stratum.
    pub stratum: u8,
    /// A number unique per sample, so the clock is never corrected twice from one sample.
    pub seq: u64,
}

impl Sample {
    /// The maximum error of this sample: half the round trip (at least [`MIN_DISTANCE_NS`])
    /// plus the server's own error (RFC 5905 §11.2's root distance, without the jitter term).
    pub fn root_distance_ns(&self) -> i64 {
        (self.delay_ns / 2).max(MIN_DISTANCE_NS).saturating_add(self.server_error_ns)
    }
}

/// The last samples of one server.
#[derive(Clone, Debug, Default)]
pub struct SampleFilter {
    samples: VecDeque<Sample>,
}

impl SampleFilter {
    /// Add a sample, dropping the oldest beyond [`FILTER_LEN`].
    pub fn push(&mut self, s: Sample) {
        if self.samples.len() >= FILTER_LEN {
            self.samples.pop_front();
        }
        self.samples.push_back(s);
    }

    /// The sample with the smallest delay (the newest among equals).
    pub fn best(&self) -> Option<&Sample> {
        self.samples.iter().rev().min_by_key(|s| s.delay_ns)
    }

    /// Root-mean-square distance of the other samples' offsets from the best one's: how much
    /// this server's measurements scatter (RFC 5905 §10's jitter).
    pub fn jitter_ns(&self) -> i64 {
        let Some(best) = self.best() else { return 0 };
        let n = self.samples.len().saturating_sub(1);
        if n == 0 {
            return 0;
        }
        let sum: f64 = self
            .samples
            .iter()
            .map(|s| {
                let d = (s.offset_ns - best.offset_ns) as f64;
                d * d
            })
            .sum();
        (sum / n as f64).sqrt() as i64
    }

    /// Samples held.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// No samples.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Forget every sample (after a clock step they measure a clock that no longer exists).
    pub fn clear(&mut self) {
        self.samples.clear();
    }
}

/// A server that has a usable sample.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Candidate {
    /// The caller's index of the server.
    pub index: usize,
    /// Its best sample.
    pub sample: Sample,
}

/// What [`select`] decided.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Selection {
    /// A majority agrees: the chosen server, and the candidates outside the majority.
    Selected {
        /// Index of the server whose offset is used.
        peer: usize,
        /// Indexes of the falsetickers.
        falsetickers: Vec<usize>,
    },
    /// No strict majority of the candidates agrees.
    NoMajority,
    /// No candidates.
    Empty,
}

/// Pick the server to follow among `candidates` (see the module docs).
pub fn select(candidates: &[Candidate]) -> Selection {
    if candidates.is_empty() {
        return Selection::Empty;
    }
    let interval = |c: &Candidate| {
        let d = c.sample.root_distance_ns();
        (c.sample.offset_ns.saturating_sub(d), c.sample.offset_ns.saturating_add(d))
    };
    // Endpoints sorted by value; at equal values a lower edge comes first, so intervals that
    // only touch count as overlapping.
    let mut edges: Vec<(i64, i8)> = candidates
        .iter()
        .flat_map(|c| {
            let (lo, hi) = interval(c);
            [(lo, -1i8), (hi, 1i8)]
        })
        .collect();
    model::sort::ascending(&mut edges);
    let (mut depth, mut best, mut at) = (0i64, 0i64, 0i64);
    for (value, kind) in &edges {
        depth -= i64::from(*kind);
        if depth > best {
            best = depth;
            at = *value;
        }
    }
    let n = candidates.len() as i64;
    if best * 2 <= n {
        return Selection::NoMajority;
    }
    let (truechimers, falsetickers): (Vec<&Candidate>, Vec<&Candidate>) =
        candidates.iter().partition(|c| {
            let (lo, hi) = interval(c);
            lo <= at && at <= hi
        });
    let peer = truechimers
        .iter()
        .min_by_key(|c| (c.sample.stratum, c.sample.root_distance_ns(), c.index))
        .map(|c| c.index);
    match peer {
        Some(peer) => Selection::Selected {
            peer,
            falsetickers: falsetickers.iter().map(|c| c.index).collect(),
        },
        None => Selection::NoMajority,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    fn sample(offset_ms: i64, delay_ms: i64, seq: u64) -> Sample {
        Sample {
            offset_ns: offset_ms * MS,
            delay_ns: delay_ms * MS,
            server_error_ns: 0,
            stratum: 2,
            seq,
        }
    }

    fn cand(index: usize, offset_ms: i64) -> Candidate {
        Candidate { index, sample: sample(offset_ms, 2, index as u64) }
    }

    #[test]
    fn the_filter_keeps_eight_and_picks_the_smallest_delay() {
        let mut f = SampleFilter::default();
        assert_eq!(f.best(), None);
        // A congested exchange (delay 80 ms) measures a skewed offset; the quick one wins.
        f.push(sample(40, 80, 1));
        f.push(sample(3, 4, 2));
        f.push(sample(20, 30, 3));
        assert_eq!(f.best().map(|s| s.seq), Some(2));
        assert!(f.jitter_ns() > 10 * MS);
        for i in 0..FILTER_LEN as u64 {
            f.push(sample(5, 10, 10 + i));
        }
        // The quick sample has aged out; among equal delays the newest is used.
        assert_eq!(f.len(), FILTER_LEN);
        assert_eq!(f.best().map(|s| s.seq), Some(17));
        assert_eq!(f.jitter_ns(), 0);
        f.clear();
        assert!(f.is_empty());
    }

    #[test]
    fn one_server_an_hour_off_among_three_is_a_falseticker() {
        let hour = 3_600_000;
        let got = select(&[cand(0, 2), cand(1, hour), cand(2, -1)]);
        assert_eq!(got, Selection::Selected { peer: 0, falsetickers: vec![1] });
    }

    #[test]
    fn two_servers_that_disagree_give_no_majority() {
        assert_eq!(select(&[cand(0, 0), cand(1, 3_600_000)]), Selection::NoMajority);
        assert_eq!(select(&[]), Selection::Empty);
        // Two against two: no strict majority either.
        assert_eq!(
            select(&[cand(0, 0), cand(1, 1), cand(2, 900), cand(3, 901)]),
            Selection::NoMajority
        );
    }

    #[test]
    fn a_single_server_is_its_own_majority() {
        assert_eq!(select(&[cand(7, 123)]), Selection::Selected { peer: 7, falsetickers: vec![] });
    }

    #[test]
    fn truechimers_are_ordered_by_stratum_then_distance() {
        let mut a = cand(0, 1);
        a.sample.stratum = 3;
        let mut b = cand(1, 2);
        b.sample.delay_ns = 30 * MS;
        let c = cand(2, 0);
        // b and c share stratum 2; c is closer.
        assert_eq!(select(&[a, b, c]), Selection::Selected { peer: 2, falsetickers: vec![] });
    }

    #[test]
    fn intervals_use_the_server_error_and_a_floor() {
        let s = Sample { offset_ns: 0, delay_ns: 0, server_error_ns: 3 * MS, stratum: 1, seq: 0 };
        assert_eq!(s.root_distance_ns(), MIN_DISTANCE_NS + 3 * MS);
        // 9 ms apart with 5 ms floors each: overlapping, both truechimers.
        let got = select(&[cand(0, 0), cand(1, 9), cand(2, 100)]);
        assert_eq!(got, Selection::Selected { peer: 0, falsetickers: vec![2] });
    }
}
