// SPDX-License-Identifier: Apache-2.0
//! The kernel's network events into the runtime: each batch marks the status kinds it
//! touched dirty (an overrun, events lost, counts as all of them); a read error re-reads
//! everything. The DNS options of Router Advertisements (RFC 8106), which the kernel passes
//! on the same socket, become operator-layer resolver specs, one per link, owned by
//! [`RA_SOURCE`] and removed when their lifetimes end or the link goes.

use std::collections::BTreeSet;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use net::netlink::Watcher;
use net::ra_dns;
use net::ra_resolvers::RaResolvers;
use net::resource::{
    layered_id, operator_output_id, ConfigLayer, Kind, LinkStatus, Namespace, RESOLVER_ID,
};
use runtime::Runtime;

use super::error::NodeError;
use crate::reactor::Reactor;

/// The owner of the resolver specs learnt from Router Advertisements.
pub const RA_SOURCE: &str = "ra";
/// A hostile link can send RAs as fast as it likes: one warning per this interval, the rest
/// counted into the next one.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// The rtnetlink multicast watcher, and the DNS that RAs gave.
pub struct Netlink {
    watcher: Watcher,
    ra: RaResolvers,
    /// IDs of the resolver specs written for RAs.
    written: BTreeSet<String>,
    /// When the last RA warning was logged, and how many were held back since.
    last_warn: Option<Instant>,
    held_back: usize,
    /// When to write the specs again: an RA came for a link the store did not know yet.
    retry_at: Option<Instant>,
}

impl Netlink {
    /// Subscribe, reported as `token`.
    pub fn watch(reactor: &Reactor, token: u64) -> Result<Self, NodeError> {
        let watcher = Watcher::new()?;
        reactor.add(watcher.as_fd(), token)?;
        Ok(Self {
            watcher,
            ra: RaResolvers::new(),
            written: BTreeSet::new(),
            last_warn: None,
            held_back: 0,
            retry_at: None,
        })
    }

    /// Read what arrived and mark what it changed.
    pub fn drain(&mut self, rt: &mut Runtime, now: Instant) {
        let drained = self.watcher.drain();
        self.take_ras(rt, now);
        match drained {
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

    /// The RAs' DNS options read by the last drain, into the table and the store.
    fn take_ras(&mut self, rt: &mut Runtime, now: Instant) {
        let (messages, mut dropped) = self.watcher.take_useropts();
        let mut refused = None;
        let mut changed = false;
        for m in messages {
            match ra_dns::parse_message(&m) {
                Ok(Some(dns)) => {
                    let applied = self.ra.apply(&dns, now);
                    changed |= applied.changed;
                    dropped += dns.dropped + applied.dropped;
                }
                Ok(None) => {}
                Err(e) => refused = Some(e),
            }
        }
        if refused.is_some() || dropped > 0 {
            self.warn(now, refused.map(|e| e.to_string()), dropped);
        }
        if changed {
            self.sync(rt, now);
        }
    }

    fn warn(&mut self, now: Instant, refused: Option<String>, dropped: usize) {
        let quiet = self.last_warn.is_some_and(|t| now.saturating_duration_since(t) < WARN_EVERY);
        if quiet {
            self.held_back += 1;
            return;
        }
        self.last_warn = Some(now);
        let before = std::mem::take(&mut self.held_back);
        let what = refused.map(|e| format!("refused an RA: {e}; ")).unwrap_or_default();
        log::warn!(
            target: "ra",
            "{what}{dropped} DNS option entries left out (bounds, link-local or invalid); {before} such RA(s) not logged before this"
        );
    }

    /// Expire, and write the table's specs (removing stale ones). A link the store does not
    /// know (yet, or any more) gets no spec, and another look a second later, until its
    /// entries' lifetimes end.
    fn sync(&mut self, rt: &mut Runtime, now: Instant) {
        self.ra.expire(now);
        let links: Vec<(u32, String)> = rt
            .store()
            .list_specs::<LinkStatus>(Namespace::Network)
            .map(|(id, l)| (l.index, id.to_owned()))
            .collect();
        let name = |ix: i32| {
            u32::try_from(ix).ok().and_then(|ix| links.iter().find(|(i, _)| *i == ix)).map(|l| &l.1)
        };
        let mut now_written = BTreeSet::new();
        self.retry_at = None;
        for (ix, spec) in self.ra.specs() {
            let Some(link) = name(ix) else {
                // Its link status comes with the next reconcile: look again in a second.
                self.retry_at = Some(now + Duration::from_secs(1));
                continue;
            };
            let id = layered_id(
                ConfigLayer::Operator,
                &operator_output_id(&format!("ra/{link}"), RESOLVER_ID),
            );
            if !self.written.contains(&id) {
                log::info!(target: "ra", "{link}: DNS from router advertisements: {:?} search {:?}", spec.dns_servers, spec.search_domains);
            }
            if let Err(e) = rt.put_input(RA_SOURCE, Namespace::NetworkConfig, &id, spec) {
                log::warn!(target: "ra", "{link}: {e}");
            }
            now_written.insert(id);
        }
        for id in self.written.difference(&now_written) {
            log::info!(target: "ra", "{id}: DNS from router advertisements withdrawn or expired");
            if let Err(e) =
                rt.remove_input(RA_SOURCE, Namespace::NetworkConfig, Kind::ResolverSpec, id)
            {
                log::warn!(target: "ra", "{id}: {e}");
            }
        }
        self.written = now_written;
    }

    /// Run the RA table's timer: entries whose lifetime ended leave.
    pub fn tick(&mut self, rt: &mut Runtime, now: Instant) {
        if self.poll_at().is_some_and(|t| t <= now) {
            self.sync(rt, now);
        }
    }

    /// When [`Netlink::tick`] has something to do.
    fn poll_at(&self) -> Option<Instant> {
        evloop::earliest([self.ra.next_expiry(), self.retry_at])
    }
}

/// One fd, watched from the start (key 0).
impl evloop::EventSource<Runtime> for Netlink {
    fn take_new_keys(&mut self) -> Vec<u64> {
        Vec::new()
    }

    fn fd(&self, key: u64) -> Option<std::os::fd::BorrowedFd<'_>> {
        (key == 0).then(|| self.watcher.as_fd())
    }

    fn ready(&mut self, _key: u64, rt: &mut Runtime, now: Instant) {
        self.drain(rt, now);
    }

    fn poll_at(&self) -> Option<Instant> {
        Netlink::poll_at(self)
    }
}
