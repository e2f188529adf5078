// SPDX-License-Identifier: Apache-2.0
//! Status controllers: mirror the kernel into `*Status` resources (TB §5.1).
//!
//! They re-dump on every reconcile; netlink events only mark them dirty, so a lost event or an
//! overrun heals on the next dump. Statuses of objects that vanished are destroyed.

use std::collections::BTreeSet;

use crate::host::{HostError, SharedHost};
use crate::resource::{
    AddressStatus, Kind, LinkStatus, Namespace, RouteStatus, RoutingRuleStatus, SpecType,
};
use crate::runtime::{Controller, ControllerError, Ctx, Input, Next, Output};

/// Dumps one kind of kernel object as `(id, status)` pairs.
pub type DumpFn<S> = fn(&SharedHost) -> Result<Vec<(String, S)>, HostError>;

/// Mirrors one kind of kernel object.
pub struct StatusController<S: SpecType> {
    name: &'static str,
    host: SharedHost,
    dump: DumpFn<S>,
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
        Vec::new()
    }

    fn outputs(&self) -> Vec<Output> {
        vec![Output::exclusive(Namespace::Network, S::KIND)]
    }

    fn reconcile(&mut self, ctx: &mut Ctx<'_>) -> Result<Next, ControllerError> {
        let items = (self.dump)(&self.host)?;
        let mut seen = BTreeSet::new();
        for (id, status) in items {
            // Two kernel objects can share a natural ID (ECMP routes); the first one is shown.
            if seen.insert(id.clone()) {
                ctx.put(Namespace::Network, &id, status)?;
            } else {
                log::trace!(target: self.name, "duplicate id {id}");
            }
        }
        ctx.cleanup_untouched(Namespace::Network, S::KIND)?;
        Ok(Next::Idle)
    }
}

/// `LinkStatus`, by link name.
pub fn links(host: SharedHost) -> StatusController<LinkStatus> {
    StatusController {
        name: "network.LinkStatusController",
        host,
        dump: |h| h.borrow_mut().links(),
    }
}

/// `AddressStatus`, by `<link>/<address>/<bits>`.
pub fn addresses(host: SharedHost) -> StatusController<AddressStatus> {
    StatusController {
        name: "network.AddressStatusController",
        host,
        dump: |h| Ok(h.borrow_mut().addresses()?.into_iter().map(|a| (a.id(), a)).collect()),
    }
}

/// `RouteStatus` of every table, by route ID.
pub fn routes(host: SharedHost) -> StatusController<RouteStatus> {
    StatusController {
        name: "network.RouteStatusController",
        host,
        dump: |h| Ok(h.borrow_mut().routes()?.into_iter().map(|r| (r.id(), r)).collect()),
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
    }
}

/// Every kind the status controllers mirror, for the event loop's netlink triggers.
pub const MIRRORED: [Kind; 4] =
    [Kind::LinkStatus, Kind::AddressStatus, Kind::RouteStatus, Kind::RoutingRuleStatus];
