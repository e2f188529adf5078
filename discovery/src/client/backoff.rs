// SPDX-License-Identifier: Apache-2.0
//! Exponential backoff as the reference client uses it: 500 ms at first, ×1.5 per attempt,
//! ±50 % jitter, the interval capped at 60 s, never giving up.

use std::time::Duration;

const INITIAL: Duration = Duration::from_millis(500);
const MAX: Duration = Duration::from_secs(60);

#[derive(Debug)]
pub struct Backoff {
    current: Duration,
    rng: u64,
}

impl Backoff {
    pub fn new(seed: u64) -> Self {
        Self { current: INITIAL, rng: seed | 1 }
    }

    /// A uniform number in [0, 1024) (xorshift64*: jitter, not secrets).
    fn random(&mut self) -> u64 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 54
    }

    /// The next wait: the current interval ±50 %, then the interval grows. Integer
    /// microseconds: no floating point code for this in the binary.
    pub fn next_delay(&mut self) -> Duration {
        let base = self.current.as_micros() as u64;
        // base × (0.5 + r/1024), r in [0, 1024).
        let d = Duration::from_micros(base / 2 + base * self.random() / 1024);
        self.current = Duration::from_micros((base * 3 / 2).min(MAX.as_micros() as u64));
        d
    }

    pub fn reset(&mut self) {
        self.current = INITIAL;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_with_jitter_caps_and_resets() {
        let mut b = Backoff::new(42);
        let mut interval = 500_000u64;
        for _ in 0..40 {
            let d = b.next_delay().as_micros() as u64;
            assert!(d >= interval / 2 && d < interval * 3 / 2, "{d} vs {interval}");
            interval = (interval * 3 / 2).min(60_000_000);
        }
        assert_eq!(b.current, MAX);
        b.reset();
        let d = b.next_delay();
        assert!(d >= Duration::from_millis(250) && d < Duration::from_millis(750));
        // Jitter differs between draws.
        let draws: Vec<_> = (0..5).map(|_| Backoff::new(7).next_delay()).collect();
        assert!(draws.windows(2).all(|w| w[0] == w[1]));
        let mut b = Backoff::new(7);
        let (x, _) = (b.next_delay(), b.reset());
        assert_ne!(x, b.next_delay());
    }
}
