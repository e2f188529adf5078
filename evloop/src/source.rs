// SPDX-License-Identifier: Apache-2.0
//! What an event source implements, once: the fds it opened (each under a key of its own),
//! what to do when one is ready, and when it must be looked at without an event.

use std::os::fd::BorrowedFd;
use std::time::Instant;

/// One source of events for the loop. `Cx` is what its readiness handling may change (the
/// node passes its runtime).
pub trait EventSource<Cx: ?Sized> {
    /// Keys of fds opened since the last call; the loop watches each (as its tag's token for
    /// the key) until the fd is closed.
    fn take_new_keys(&mut self) -> Vec<u64>;

    /// The fd behind `key`, if it is still open.
    fn fd(&self, key: u64) -> Option<BorrowedFd<'_>>;

    /// The fd behind `key` is ready. A key the source no longer knows is ignored.
    fn ready(&mut self, key: u64, cx: &mut Cx, now: Instant);

    /// When the loop must call again without an event (`None`: only on events).
    fn poll_at(&self) -> Option<Instant>;
}

/// An optional source (a config file not given, no uevents outside PID 1) is a source with no
/// fds and no deadline while absent.
impl<Cx: ?Sized, S: EventSource<Cx>> EventSource<Cx> for Option<S> {
    fn take_new_keys(&mut self) -> Vec<u64> {
        self.as_mut().map(S::take_new_keys).unwrap_or_default()
    }

    fn fd(&self, key: u64) -> Option<BorrowedFd<'_>> {
        self.as_ref().and_then(|s| s.fd(key))
    }

    fn ready(&mut self, key: u64, cx: &mut Cx, now: Instant) {
        if let Some(s) = self {
            s.ready(key, cx, now);
        }
    }

    fn poll_at(&self) -> Option<Instant> {
        self.as_ref().and_then(S::poll_at)
    }
}

/// The earliest of some deadlines: what the loop arms its timer for.
pub fn earliest(deadlines: impl IntoIterator<Item = Option<Instant>>) -> Option<Instant> {
    deadlines.into_iter().flatten().min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    struct Counter(u64, Option<Instant>);

    impl EventSource<Vec<u64>> for Counter {
        fn take_new_keys(&mut self) -> Vec<u64> {
            vec![self.0]
        }
        fn fd(&self, _key: u64) -> Option<BorrowedFd<'_>> {
            None
        }
        fn ready(&mut self, key: u64, cx: &mut Vec<u64>, _now: Instant) {
            cx.push(key);
        }
        fn poll_at(&self) -> Option<Instant> {
            self.1
        }
    }

    #[test]
    fn an_absent_source_has_no_keys_no_deadline_and_ignores_readiness() {
        let now = Instant::now();
        let mut seen = Vec::new();
        let mut absent: Option<Counter> = None;
        assert!(absent.take_new_keys().is_empty());
        assert_eq!(absent.poll_at(), None);
        absent.ready(3, &mut seen, now);
        assert!(seen.is_empty());
        let mut present = Some(Counter(7, Some(now)));
        assert_eq!(present.take_new_keys(), [7]);
        assert_eq!(present.poll_at(), Some(now));
        present.ready(7, &mut seen, now);
        assert_eq!(seen, [7]);
    }

    #[test]
    fn the_earliest_deadline_wins_and_none_means_no_timer() {
        let t = Instant::now();
        let later = t + Duration::from_secs(1);
        assert_eq!(earliest([None, Some(later), Some(t), None]), Some(t));
        assert_eq!(earliest([None, None]), None);
        assert_eq!(earliest(std::iter::empty()), None);
    }
}
