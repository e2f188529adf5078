// SPDX-License-Identifier: Apache-2.0
//! Status controllers: mirror the kernel into `*Status` resources (docs/talos.md: Statuses and
//! readiness).
//!
//! They re-dump on every reconcile; netlink events only mark them dirty, so a lost event or an
//! overrun heals on the next dump. Statuses of objects that vanished are destroyed.
//!
//! WireGuard handshakes and counters change without any netlink event, so while a WireGuard
//! link exists the link status controller also re-dumps every [`WIREGUARD_POLL`]; with none
//! it never wakes by itself. A WireGuard change we make ourselves is seen at once: the link
//! spec controller bumps a `LinkRefresh`, which is this controller's input.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::host::{HostError, SharedHost};
use crate::resource::{
    AddressStatus, Kind, LinkStatus, Namespace, RouteStatus, RoutingRuleStatus, SpecType,
};
use crate::runtime::{Controller, ControllerError, Ctx, Input, Next, Output};

/// Dumps one kind of kernel object as `(id, status)` pairs.
pub type DumpFn<S> = fn(&SharedHost) -> Result<Vec<(String, S)>, HostError>;

/// How often WireGuard state is re-read while a WireGuard link exists: fine enough for
/// KubeSpan's peer state (its timeouts are 15 s and more, docs/talos.md: KubeSpan).
pub const WIREGUARD_POLL: Duration = Duration::from_secs(5);

/// Which statuses change without netlink events (a predicate), and the re-read interval.
type Poll<S> = (fn(&S) -> bool, Duration);

/// Mirrors one kind of kernel object.
pub struct StatusController<S: SpecType> {
    name: &'static str,
    host: SharedHost,
    dump: DumpFn<S>,
    /// Objects whose state changes without netlink events, and how often to re-read them.
    poll: Option<Poll<S>>,
    /// Kinds whose changes say "re-read now" (a [`LinkRefresh`](crate::resource::LinkRefresh)).
    triggers: &'static [Kind],
}

impl<S: SpecType> std::fmt::Debug for StatusController<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusController").field("name", &self.name).finish_non_exhaustive()
    }
}

impl<S: SpecType> Controller for StatusController<S> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn inputs(&self) -> Vec<Input> {
        self.triggers.iter().map(|k| Input::weak(Namespace::Network, *k)).collect()
    }

    fn outputs(&self) -> Vec<Output> {
        vec![Output::exclusive(Namespace::Network, S::KIND)]
    }

    fn reconcile(&mut self, ctx: &mut Ctx<'_>) -> Result<Next, ControllerError> {
        let items = (self.dump)(&self.host)?;
        let next = match self.poll {
            Some((needs, every)) if items.iter().any(|(_, s)| needs(s)) => {
                Next::At(ctx.now() + every)
            }
            _ => Next::Idle,
        };
        let keep = firsts(&mut items.iter().map(|(id, _)| id.as_str()));
        for ((id, status), first) in items.into_iter().zip(keep) {
            if first {
                ctx.put(Namespace::Network, &id, status)?;
            } else {
                log::trace!(target: self.name, "duplicate id {id}");
            }
        }
        ctx.cleanup_untouched(Namespace::Network, S::KIND)?;
        Ok(next)
    }
}

/// Whether each ID is the first with its value: two kernel objects can share a natural ID
/// (ECMP routes), and the first one is shown. The set borrows the IDs (no copies), and the
/// function is not generic: one copy serves every status kind.
fn firsts(ids: &mut dyn Iterator<Item = &str>) -> Vec<bool> {
    let mut seen = BTreeSet::new();
    ids.map(|id| seen.insert(id)).collect()
}

/// Links, with the WireGuard state of WireGuard links. A device that cannot be read (the
/// link vanished between the dumps) keeps its link status without it, logged at debug.
fn dump_links(host: &SharedHost) -> Result<Vec<(String, LinkStatus)>, HostError> {
    let mut h = host.borrow_mut();
    let mut links = h.links()?;
    for (name, link) in links.iter_mut().filter(|(_, l)| l.kind == "wireguard") {
        match h.wireguard(name) {
            Ok(dev) => link.wireguard = Some(super::link_spec::wireguard::wireguard_status(&dev)),
            Err(e) => log::debug!(target: "network.LinkStatusController", "{e}"),
        }
    }
    Ok(links)
}

/// `LinkStatus`, by link name.
pub fn links(host: SharedHost) -> StatusController<LinkStatus> {
    StatusController {
        name: "network.LinkStatusController",
        host,
        dump: dump_links,
        poll: Some((|l| l.kind == "wireguard", WIREGUARD_POLL)),
        triggers: &[Kind::LinkRefresh],
    }
}

/// `AddressStatus`, by `<link>/<address>/<bits>`.
pub fn addresses(host: SharedHost) -> StatusController<AddressStatus> {
    StatusController {
        name: "network.AddressStatusController",
        host,
        dump: |h| Ok(h.borrow_mut().addresses()?.into_iter().map(|a| (a.id(), a)).collect()),
        poll: None,
        triggers: &[],
    }
}

/// `RouteStatus` of every table, by route ID.
pub fn routes(host: SharedHost) -> StatusController<RouteStatus> {
    StatusController {
        name: "network.RouteStatusController",
        host,
        dump: |h| Ok(h.borrow_mut().routes()?.into_iter().map(|r| (r.id(), r)).collect()),
        poll: None,
        triggers: &[],
    }
}

/// `RoutingRuleStatus`, by `<family>/<priority>` (several rules may share a priority; the
/// first is shown).
pub fn rules(host: SharedHost) -> StatusController<RoutingRuleStatus> {
    StatusController {
        name: "network.RoutingRuleStatusController",
        host,
        dump: |h| {
            Ok(h.borrow_mut()
                .rules()?
                .into_iter()
                .map(|r| (crate::resource::routing_rule_id(r.family, r.priority), r))
                .collect())
        },
        poll: None,
        triggers: &[],
    }
}

/// Every kind the status controllers mirror, for the event loop's netlink triggers.
pub const MIRRORED: [Kind; 4] =
    [Kind::LinkStatus, Kind::AddressStatus, Kind::RouteStatus, Kind::RoutingRuleStatus];
