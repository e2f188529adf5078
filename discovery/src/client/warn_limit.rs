// SPDX-License-Identifier: Apache-2.0
//! Repeated warnings of one kind, rate-limited: the first few of an interval are said, the
//! rest only counted and said as one summary when the interval ends. A hostile or broken
//! service can send thousands of records the client cannot open in every message; the log
//! gets a handful of lines a minute, with the count.

use std::time::{Duration, Instant};

/// One kind of warning's limiter.
#[derive(Debug, Clone)]
pub struct WarnLimit {
    interval: Duration,
    burst: u32,
    /// When the current interval started, and how many were said and held back in it.
    open: Option<Instant>,
    said: u32,
    held: u64,
}

impl WarnLimit {
    /// At most `burst` warnings per `interval`.
    pub fn new(interval: Duration, burst: u32) -> Self {
        WarnLimit { interval, burst, open: None, said: 0, held: 0 }
    }

    /// Whether to say a warning now; one not said is counted for the summary.
    pub fn allow(&mut self, now: Instant) -> bool {
        match self.open {
            Some(start) if now < start + self.interval => {
                if self.said < self.burst {
                    self.said += 1;
                    true
                } else {
                    self.held += 1;
                    false
                }
            }
            _ => {
                // A new interval (a summary still due is taken by `summary` first).
                self.open = Some(now);
                self.said = 1;
                true
            }
        }
    }

    /// Once the interval is over: how many were held back in it, if any (then reset).
    pub fn summary(&mut self, now: Instant) -> Option<u64> {
        let start = self.open?;
        if now < start + self.interval {
            return None;
        }
        self.open = None;
        self.said = 0;
        (self.held > 0).then(|| std::mem::take(&mut self.held))
    }

    /// When a summary falls due, if one will.
    pub fn due(&self) -> Option<Instant> {
        self.open.filter(|_| self.held > 0).map(|start| start + self.interval)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_counted_then_one_summary() {
        let t0 = Instant::now();
        let mut w = WarnLimit::new(Duration::from_secs(60), 2);
        let said = (0..1000).filter(|_| w.allow(t0)).count();
        assert_eq!(said, 2);
        assert_eq!(w.summary(t0 + Duration::from_secs(59)), None);
        assert_eq!(w.due(), Some(t0 + Duration::from_secs(60)));
        assert_eq!(w.summary(t0 + Duration::from_secs(60)), Some(998));
        assert_eq!(w.summary(t0 + Duration::from_secs(61)), None, "said once");
        // A new interval starts with the next warning.
        assert!(w.allow(t0 + Duration::from_secs(70)));
        assert!(w.allow(t0 + Duration::from_secs(70)));
        assert!(!w.allow(t0 + Duration::from_secs(71)));
        assert_eq!(w.summary(t0 + Duration::from_secs(130)), Some(1));
        // Nothing held back: no summary.
        assert!(w.allow(t0 + Duration::from_secs(200)));
        assert_eq!(w.due(), None);
        assert_eq!(w.summary(t0 + Duration::from_secs(300)), None);
    }
}
