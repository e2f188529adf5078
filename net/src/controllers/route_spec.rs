// SPDX-License-Identifier: Apache-2.0
//! Applies merged `RouteSpec`s to the kernel (docs/talos.md: Applying specs).
//!
//! Each desired route is first put into the kernel's canonical form (IPv6 metric 0 is 1024,
//! IPv6 scope is always global, the out link as an index), so that once applied it compares
//! equal to what the kernel reports and the controller never loops.
//! Kernel routes are matched on (family, table, destination, gateway, metric); a match with
//! different attributes is replaced (deleted, then added). Other routes are never touched.

use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;

use ipnet::IpNet;

use super::address_spec::Desired;
use super::spec_common::{batches, first_error, FightGuard, RepeatGuard, WaitLog};
use crate::host::{RouteOp, SharedHost};
use crate::resource::{
    find_link, Family, Kind, LinkStatus, Namespace, Phase, RouteFlags, RouteSpec, RouteStatus,
    RoutingTable, Scope,
};
use crate::runtime::{Controller, ControllerError, Ctx, Input, Next, Output};

/// What to do for a set of route specs.
#[derive(Debug, Default, PartialEq)]
pub struct RoutePlan {
    /// Operations in order, each with the ID of the spec it serves.
    pub ops: Vec<(String, RouteOp)>,
    /// Running specs whose out link does not exist (yet).
    pub waiting: Vec<String>,
    /// Specs applied (or being applied by `ops`).
    pub applied: Vec<String>,
    /// Tearing-down specs whose kernel routes are gone after `ops`.
    pub released: Vec<String>,
}

/// The kernel's canonical form of a route spec; `out_link_index` 0 when no out link is set.
pub fn route_to_kernel(spec: &RouteSpec, out_link: Option<(&str, u32)>) -> RouteStatus {
    let mut priority = spec.priority;
    let mut scope = spec.scope;
    if spec.family == Family::Inet6 {
        // The kernel stores IPv6 metric 0 as 1024 and reports every IPv6 route as global.
        if priority == 0 {
            priority = 1024;
        }
        scope = Scope::GLOBAL;
    }
    RouteStatus {
        family: spec.family,
        dst: spec.dst.map(|d| d.trunc()),
        src: spec.src,
        gateway: spec.gateway,
        out_link_index: out_link.map_or(0, |(_, i)| i),
        out_link_name: out_link.map_or_else(String::new, |(n, _)| n.to_owned()),
        table: spec.table,
        priority,
        scope,
        kind: spec.kind,
        flags: spec.flags,
        protocol: spec.protocol,
        mtu: spec.mtu,
    }
}

/// A route's identity: the key Talos matches on.
type RouteKey = (Family, RoutingTable, Option<IpNet>, Option<IpAddr>, u32);

fn key_of(r: &RouteStatus) -> RouteKey {
    (r.family, r.table, r.dst, r.gateway, r.priority)
}

/// The flags that are part of a route's identity rather than kernel bookkeeping.
const COMPARED_FLAGS: RouteFlags = RouteFlags(0x100 | 0x200 | 0x400 | 0x800);

/// Is the kernel route `k` what `want` asks for?
fn up_to_date(want: &RouteStatus, k: &RouteStatus) -> bool {
    want.scope == k.scope
        && (want.flags & COMPARED_FLAGS) == (k.flags & COMPARED_FLAGS)
        && want.protocol == k.protocol
        && (want.out_link_index == 0 || want.out_link_index == k.out_link_index)
        && (want.src.is_none() || want.src == k.src)
        && want.mtu == k.mtu
        && want.kind == k.kind
}

/// Plan route changes.
pub fn plan_routes(
    desired: &[Desired<'_, RouteSpec>],
    links: &[(String, LinkStatus)],
    kernel: &[RouteStatus],
) -> RoutePlan {
    let mut plan = RoutePlan::default();
    // Indexed by route identity: with 10,000 routes a scan per desired route is 10^8 steps.
    let mut by_key: HashMap<RouteKey, Vec<&RouteStatus>> = HashMap::new();
    for k in kernel {
        by_key.entry(key_of(k)).or_default().push(k);
    }
    for d in desired {
        let out_link = if d.spec.out_link_name.is_empty() {
            None
        } else {
            match find_link(links, &d.spec.out_link_name) {
                Some((name, l)) => Some((name, l.index)),
                None if d.phase == Phase::Running => {
                    plan.waiting.push(d.id.to_owned());
                    continue;
                }
                None => {
                    // The link is gone, and its routes with it.
                    plan.released.push(d.id.to_owned());
                    continue;
                }
            }
        };
        let want = route_to_kernel(d.spec, out_link);
        let matches: Vec<&RouteStatus> = by_key.get(&key_of(&want)).cloned().unwrap_or_default();
        match d.phase {
            Phase::TearingDown => {
                plan.ops.extend(
                    matches.into_iter().map(|k| (d.id.to_owned(), RouteOp::Delete(k.clone()))),
                );
                plan.released.push(d.id.to_owned());
            }
            Phase::Running => {
                if !matches.iter().any(|k| up_to_date(&want, k)) {
                    plan.ops.extend(
                        matches.into_iter().map(|k| (d.id.to_owned(), RouteOp::Delete(k.clone()))),
                    );
                    plan.ops.push((d.id.to_owned(), RouteOp::Add(want)));
                }
                plan.applied.push(d.id.to_owned());
            }
        }
    }
    plan
}

/// The `RouteSpec` controller.
pub struct RouteSpecController {
    host: SharedHost,
    wait_log: WaitLog,
    repeat: RepeatGuard,
    /// Routes something else keeps deleting or adding back.
    fights: FightGuard,
}

impl std::fmt::Debug for RouteSpecController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouteSpecController").finish_non_exhaustive()
    }
}

impl RouteSpecController {
    /// A controller applying through `host`.
    pub fn new(host: SharedHost) -> Self {
        Self {
            host,
            wait_log: WaitLog::default(),
            repeat: RepeatGuard::default(),
            fights: FightGuard::default(),
        }
    }
}

impl Controller for RouteSpecController {
    fn name(&self) -> &'static str {
        "network.RouteSpecController"
    }

    fn inputs(&self) -> Vec<Input> {
        vec![
            Input::strong(Namespace::Network, Kind::RouteSpec),
            Input::weak(Namespace::Network, Kind::LinkStatus),
            Input::weak(Namespace::Network, Kind::AddressStatus),
            Input::weak(Namespace::Network, Kind::RouteStatus),
        ]
    }

    fn outputs(&self) -> Vec<Output> {
        Vec::new()
    }

    fn reconcile(&mut self, ctx: &mut Ctx<'_>) -> Result<Next, ControllerError> {
        let specs: Vec<(String, RouteSpec, Phase)> = ctx
            .store()
            .list(Namespace::Network, Kind::RouteSpec)
            .filter_map(|r| {
                r.spec_as::<RouteSpec>()
                    .map(|s| (r.metadata.id.clone(), s.clone(), r.metadata.phase))
            })
            .collect();
        let desired: Vec<Desired<'_, RouteSpec>> =
            specs.iter().map(|(id, spec, phase)| Desired { id, spec, phase: *phase }).collect();
        let (links, kernel) = {
            let mut host = self.host.borrow_mut();
            (host.links()?, host.routes()?)
        };
        let plan = plan_routes(&desired, &links, &kernel);
        let (now, name) = (ctx.now(), self.name());
        let key = |id: &str, op: &RouteOp| match op {
            RouteOp::Add(_) => format!("route {id}: add"),
            RouteOp::Delete(_) => format!("route {id}: delete"),
        };
        let differing: BTreeSet<String> = plan.ops.iter().map(|(id, op)| key(id, op)).collect();
        let mut failed: BTreeSet<&str> = BTreeSet::new();
        let mut errors = Vec::new();
        let mut succeeded = Vec::new();
        for run in batches(&plan.ops) {
            let mut batch = Vec::new();
            for (id, op) in run {
                let k = key(id, op);
                if failed.contains(id.as_str()) {
                    continue;
                }
                if self.fights.held(&k, now) {
                    // Not applied: keep its bookkeeping (finalizer) as it was.
                    failed.insert(id);
                    continue;
                }
                batch.push((id, k, op));
            }
            let ops: Vec<&RouteOp> = batch.iter().map(|(_, _, op)| *op).collect();
            let results = self.host.borrow_mut().routes_apply(&ops);
            for ((id, k, op), result) in batch.into_iter().zip(results) {
                match result {
                    Ok(()) => {
                        succeeded.push(format!("{op:?}"));
                        self.fights.applied(name, &k, now);
                    }
                    Err(e) => {
                        failed.insert(id);
                        errors.push(e);
                    }
                }
            }
        }
        self.fights.settle(name, &differing, now);
        errors.extend(self.repeat.check(succeeded.into_iter()));
        for id in plan.applied.iter().filter(|id| !failed.contains(id.as_str())) {
            ctx.add_finalizer(Namespace::Network, Kind::RouteSpec, id)?;
        }
        for id in plan.released.iter().filter(|id| !failed.contains(id.as_str())) {
            ctx.remove_finalizer(Namespace::Network, Kind::RouteSpec, id)?;
        }
        self.wait_log.report(ctx, "route", &plan.waiting);
        let next = self.fights.report(ctx);
        first_error(self.name(), errors).map(|_| next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::{ConfigLayer, LinkType, RouteProtocol, RoutingTable};

    fn links() -> Vec<(String, LinkStatus)> {
        vec![(
            "eth0".into(),
            LinkStatus { index: 2, link_type: LinkType::ETHER, ..Default::default() },
        )]
    }

    fn default_via(gw: &str) -> RouteSpec {
        let mut r = RouteSpec::new(Family::Inet4, ConfigLayer::Cmdline);
        r.gateway = Some(gw.parse().unwrap());
        r.out_link_name = "eth0".into();
        r.protocol = RouteProtocol::BOOT;
        r.normalize();
        r
    }

    fn run<'a>(id: &'a str, s: &'a RouteSpec) -> Desired<'a, RouteSpec> {
        Desired { id, spec: s, phase: Phase::Running }
    }

    #[test]
    fn adds_then_converges() {
        let s = default_via("10.0.0.1");
        let plan = plan_routes(&[run("r", &s)], &links(), &[]);
        let [(_, RouteOp::Add(k))] = plan.ops.as_slice() else { panic!("{plan:?}") };
        assert_eq!((k.out_link_index, k.priority, k.table), (2, 1024, RoutingTable::MAIN));
        let plan = plan_routes(&[run("r", &s)], &links(), std::slice::from_ref(k));
        assert!(plan.ops.is_empty(), "applied route compares equal: {plan:?}");
    }

    #[test]
    fn ipv6_canonical_form_does_not_loop() {
        // Talos wanted scope link for a gateway-less IPv6 route and the kernel said global:
        // the diff never settled. Our canonical form is what the kernel reports.
        let mut s = RouteSpec::new(Family::Inet6, ConfigLayer::Configuration);
        s.dst = Some("2001:db8:1::/64".parse().unwrap());
        s.out_link_name = "eth0".into();
        s.priority = 0;
        s.normalize();
        s.scope = Scope::LINK;
        let want = route_to_kernel(&s, Some(("eth0", 2)));
        assert_eq!((want.scope, want.priority), (Scope::GLOBAL, 1024));
        let kernel_view = RouteStatus { scope: Scope::GLOBAL, priority: 1024, ..want.clone() };
        assert!(plan_routes(&[run("r", &s)], &links(), &[kernel_view]).ops.is_empty());
    }

    #[test]
    fn drifted_attributes_are_replaced_and_foreign_routes_kept() {
        let s = default_via("10.0.0.1");
        let ours = route_to_kernel(&s, Some(("eth0", 2)));
        let drifted = RouteStatus { protocol: RouteProtocol::STATIC, ..ours.clone() };
        let foreign = RouteStatus { gateway: Some("10.0.0.254".parse().unwrap()), ..ours.clone() };
        let plan = plan_routes(&[run("r", &s)], &links(), &[drifted.clone(), foreign]);
        assert_eq!(
            plan.ops,
            [("r".to_owned(), RouteOp::Delete(drifted)), ("r".to_owned(), RouteOp::Add(ours))]
        );
    }

    #[test]
    fn waits_for_link_and_tears_down() {
        let mut s = default_via("10.0.0.1");
        s.out_link_name = "eth9".into();
        let plan = plan_routes(&[run("r", &s)], &links(), &[]);
        assert_eq!(plan.waiting, ["r"]);
        let s = default_via("10.0.0.1");
        let k = route_to_kernel(&s, Some(("eth0", 2)));
        let plan = plan_routes(
            &[Desired { id: "r", spec: &s, phase: Phase::TearingDown }],
            &links(),
            std::slice::from_ref(&k),
        );
        assert_eq!(plan.ops, [("r".to_owned(), RouteOp::Delete(k))]);
        assert_eq!(plan.released, ["r"]);
    }
}
