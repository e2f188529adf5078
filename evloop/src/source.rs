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

/// The earliest of some deadlines: what the loop arms its timer for.
pub fn earliest(deadlines: impl IntoIterator<Item = Option<Instant>>) -> Option<Instant> {
    deadlines.into_iter().flatten().min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_earliest_deadline_wins_and_none_means_no_timer() {
        let t = Instant::now();
        let later = t + Duration::from_secs(1);
        assert_eq!(earliest([None, Some(later), Some(t), None]), Some(t));
        assert_eq!(earliest([None, None]), None);
        assert_eq!(earliest(std::iter::empty()), None);
    }
}
