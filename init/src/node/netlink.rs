// SPDX-License-Identifier: Apache-2.0
//! The kernel's network events into the runtime: each batch marks the status kinds it
//! touched dirty (an overrun, events lost, counts as all of them); a read error re-reads
//! everything.

use std::os::fd::AsFd;

use net::netlink::Watcher;
use net::resource::Kind;
use net::runtime::Runtime;

use super::error::NodeError;
use crate::reactor::Reactor;

/// The rtnetlink multicast watcher.
pub struct Netlink(Watcher);

impl Netlink {
    /// Subscribe, reported as `token`.
    pub fn watch(reactor: &Reactor, token: u64) -> Result<Self, NodeError> {
        let watcher = Watcher::new()?;
        reactor.add(watcher.as_fd(), token)?;
        Ok(Self(watcher))
    }

    /// Read what arrived and mark what it changed.
    pub fn drain(&mut self, rt: &mut Runtime) {
        match self.0.drain() {
            // An overrun marks all four kinds changed: the lost events can only have been of
            // those, so this wakes whatever they would have woken, and not, say, the merges,
            // which read no kernel state (applying a large config overruns the socket).
            Ok(c) => {
                let kinds = [
                    (c.links, Kind::LinkStatus),
                    (c.addresses, Kind::AddressStatus),
                    (c.routes, Kind::RouteStatus),
                    (c.rules, Kind::RoutingRuleStatus),
                ];
                for (_, kind) in kinds.into_iter().filter(|(changed, _)| *changed) {
                    rt.mark_dirty(kind);
                }
            }
            Err(e) => {
                log::warn!(target: "run", "netlink watcher: {e}; re-reading everything");
                rt.mark_all_dirty();
            }
        }
    }
}

/// One fd, watched from the start (key 0).
impl evloop::EventSource<Runtime> for Netlink {
    fn take_new_keys(&mut self) -> Vec<u64> {
        Vec::new()
    }

    fn fd(&self, key: u64) -> Option<std::os::fd::BorrowedFd<'_>> {
        (key == 0).then(|| self.0.as_fd())
    }

    fn ready(&mut self, _key: u64, rt: &mut Runtime, _now: std::time::Instant) {
        self.drain(rt);
    }

    fn poll_at(&self) -> Option<std::time::Instant> {
        None
    }
}
