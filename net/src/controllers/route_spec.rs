// SPDX-License-Identifier: Apache-2.0
//! Applies merged `RouteSpec`s to the kernel (docs/talos.md: Applying specs).
//!
//! Each desired route is first put into the kernel's canonical form (IPv6 metric 0 is 1024,
//! IPv6 scope is always global, the out link as an index), so that once applied it compares
//! equal to what the kernel reports and the controller never loops.
//! Kernel routes are matched on (family, table, destination, gateway, metric); a match with
//! different attributes is replaced (deleted, then added). Other routes are never touched.

use std::net::IpAddr;

use super::apply::Desired;
use super::apply::{self, first_error, hash_of, LinkCache, Outcome, SpecApply, SpecOps};
use crate::host::{Host, HostError, RouteOp, SharedHost};
use crate::resource::{
    Family, Kind, LinkStatus, Namespace, Phase, RouteFlags, RouteSpec, RouteStatus, RoutingTable,
    Scope,
};
use crate::runtime::{Controller, ControllerError, Ctx, Input, Next, Output};

/// What to do for a set of route specs; IDs borrow from the specs planned.
#[derive(Debug, Default, PartialEq)]
pub struct RoutePlan<'a> {
    /// Operations in order, each with the ID of the spec it serves.
    pub ops: Vec<(&'a str, RouteOp)>,
    /// Running specs whose out link does not exist (yet).
    pub waiting: Vec<&'a str>,
    /// Specs applied (or being applied by `ops`).
    pub applied: Vec<&'a str>,
    /// Tearing-down specs whose kernel routes are gone after `ops`.
    pub released: Vec<&'a str>,
}

/// The kernel's canonical form of a route spec; `out_link_index` 0 when no out link is set.
pub fn route_to_kernel(spec: &RouteSpec, out_link: Option<(&str, u32)>) -> RouteStatus {
    let mut r = kernel_form(spec, out_link.map_or(0, |(_, i)| i));
    if let Some((name, _)) = out_link {
        r.out_link_name = name.to_owned();
    }
    r
}

/// [`route_to_kernel`] without the out link's name: what comparing needs (the name is only
/// filled in for a route that is going to be added).
fn kernel_form(spec: &RouteSpec, out_link_index: u32) -> RouteStatus {
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
        out_link_index,
        out_link_name: String::new(),
        table: spec.table,
        priority,
        scope,
        kind: spec.kind,
        flags: spec.flags,
        protocol: spec.protocol,
        mtu: spec.mtu,
    }
}

/// A route's identity, the key Talos matches on: family, table, destination, gateway and
/// metric, as bytes. Equal exactly when those fields are equal, and compared with one
/// `memcmp`: no hashing and no matching on each field's variant.
type RouteKey = [u8; 44];

/// Fills a byte array front to back with fixed-size pieces: each copy has a length known at
/// compile time, so it is a few moves, not a `memcpy` call.
struct Bytes<'a>(&'a mut [u8]);

impl Bytes<'_> {
    fn put<const N: usize>(&mut self, bytes: [u8; N]) {
        let rest = std::mem::take(&mut self.0);
        if let Some((head, tail)) = rest.split_first_chunk_mut::<N>() {
            *head = bytes;
            self.0 = tail;
        }
    }
}

/// `ip` as a tag (4 or 6; 0 for none) and 16 bytes, IPv4 in the last 4.
fn ip_bytes(ip: Option<IpAddr>) -> [u8; 17] {
    let (tag, octets) = match ip {
        None => (0, [0; 16]),
        Some(IpAddr::V4(v4)) => (4, v4.to_ipv6_compatible().octets()),
        Some(IpAddr::V6(v6)) => (6, v6.octets()),
    };
    let mut out = [0; 17];
    let [t, rest @ ..] = &mut out;
    *t = tag;
    *rest = octets;
    out
}

fn key_of(r: &RouteStatus) -> RouteKey {
    let mut key = [0; 44];
    let mut w = Bytes(&mut key);
    w.put([r.family.af()]);
    w.put(r.table.0.to_be_bytes());
    // The prefix length apart from the address: 10.0.0.0/8 and 10.0.0.0/16 differ.
    w.put([r.dst.map_or(0, |d| d.prefix_len())]);
    w.put(ip_bytes(r.dst.map(|d| d.addr())));
    w.put(ip_bytes(r.gateway));
    w.put(r.priority.to_be_bytes());
    key
}

/// What the repeat guard counts of `op`: a hash of every field, fed as two byte arrays and
/// the link name rather than field by field (ten thousand routes in a large apply).
fn repeat_hash(op: &RouteOp) -> u64 {
    let (tag, r) = match op {
        RouteOp::Add(r) => (0, r),
        RouteOp::Delete(r) => (1, r),
    };
    let mut rest = [0; 33];
    let mut w = Bytes(&mut rest);
    w.put([tag, r.scope.0, r.kind.0, r.protocol.0]);
    w.put(ip_bytes(r.src));
    w.put(r.out_link_index.to_be_bytes());
    w.put(r.flags.0.to_be_bytes());
    w.put(r.mtu.to_be_bytes());
    hash_of(&(key_of(r), rest, r.out_link_name.as_str()))
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
pub fn plan_routes<'a>(
    desired: &[Desired<'a, RouteSpec>],
    links: &[(String, LinkStatus)],
    kernel: &[RouteStatus],
) -> RoutePlan<'a> {
    let mut plan = RoutePlan::default();
    // Sorted by route identity: with 10,000 routes a scan per desired route is 10^8 steps.
    // The sort is stable, so routes sharing a key stay in the kernel's order.
    let mut by_key: Vec<(RouteKey, &RouteStatus)> = kernel.iter().map(|k| (key_of(k), k)).collect();
    crate::sort::by(&mut by_key, |a, b| a.0.cmp(&b.0));
    plan.ops.reserve(desired.len());
    plan.applied.reserve(desired.len());
    let mut links = LinkCache::new(links);
    for d in desired {
        let out_link = if d.spec.out_link_name.is_empty() {
            None
        } else {
            match links.find(&d.spec.out_link_name) {
                Some((name, l)) => Some((name, l.index)),
                None if d.phase == Phase::Running => {
                    plan.waiting.push(d.id);
                    continue;
                }
                None => {
                    // The link is gone, and its routes with it.
                    plan.released.push(d.id);
                    continue;
                }
            }
        };
        let mut want = kernel_form(d.spec, out_link.map_or(0, |(_, i)| i));
        let key = key_of(&want);
        // One binary search; routes sharing a key are few, and usually there is none.
        let from = by_key.partition_point(|(k, _)| *k < key);
        let rest = by_key.get(from..).unwrap_or_default();
        let same = rest.iter().position(|(k, _)| *k != key).unwrap_or(rest.len());
        let matches = rest.get(..same).unwrap_or_default();
        match d.phase {
            Phase::TearingDown => {
                plan.ops.extend(matches.iter().map(|(_, k)| (d.id, RouteOp::Delete((*k).clone()))));
                plan.released.push(d.id);
            }
            Phase::Running => {
                if !matches.iter().any(|(_, k)| up_to_date(&want, k)) {
                    plan.ops
                        .extend(matches.iter().map(|(_, k)| (d.id, RouteOp::Delete((*k).clone()))));
                    if let Some((name, _)) = out_link {
                        want.out_link_name = name.to_owned();
                    }
                    plan.ops.push((d.id, RouteOp::Add(want)));
                }
                plan.applied.push(d.id);
            }
        }
    }
    plan
}

/// Routes, to the apply loop.
#[derive(Debug)]
struct Routes;

impl SpecOps for Routes {
    type Spec = RouteSpec;
    type Op = RouteOp;
    const OBJECT: &'static str = "route";

    fn what(op: &RouteOp) -> (u8, &'static str) {
        match op {
            RouteOp::Add(_) => (0, "add"),
            RouteOp::Delete(_) => (1, "delete"),
        }
    }

    fn value(op: &RouteOp) -> Option<u64> {
        Some(repeat_hash(op))
    }

    fn apply(host: &mut dyn Host, ops: &[&RouteOp]) -> Vec<Result<(), HostError>> {
        host.routes_apply(ops)
    }
}

/// The `RouteSpec` controller.
pub struct RouteSpecController {
    host: SharedHost,
    /// Batches, the guard (routes something else keeps deleting or adding back) and the
    /// wait log.
    apply: SpecApply<Routes>,
}

impl std::fmt::Debug for RouteSpecController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouteSpecController").finish_non_exhaustive()
    }
}

impl RouteSpecController {
    /// A controller applying through `host`.
    pub fn new(host: SharedHost) -> Self {
        Self { host, apply: SpecApply::new() }
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
        let (now, name) = (ctx.now(), self.name());
        let links = self.host.borrow_mut().links()?;
        // Planned and applied while the specs are borrowed from the store; only the IDs whose
        // finalizer changes are copied out for the writes after.
        let (desired, mut lacking) = apply::desired::<Routes>(ctx.store(), name);
        // Plans match kernel routes in the specs' own (family, table) pairs only, so only
        // those are read: the local table alone holds an entry per address of the node.
        let mut tables: Vec<(Family, RoutingTable)> =
            desired.iter().map(|d| (d.spec.family, d.spec.table)).collect();
        crate::sort::ascending(&mut tables);
        tables.dedup();
        let kernel = self.host.borrow_mut().routes_in(&tables)?;
        let plan = plan_routes(&desired, &links, &kernel);
        let mut out = Outcome::default();
        self.apply.apply(name, &self.host, now, &plan.ops, &mut out);
        self.apply.settle(name, SpecApply::<Routes>::keys(&plan.ops), now, &mut out);
        let add = out.to_add(&plan.applied, &mut lacking);
        let release = out.to_release(&plan.released, |_| false);
        let waiting: Vec<String> = plan.waiting.iter().map(|id| (*id).to_owned()).collect();
        drop(plan);
        apply::write_finalizers(ctx, Kind::RouteSpec, &add, &release)?;
        let next = self.apply.report(ctx, &waiting);
        first_error(name, out.errors, next)
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
        assert_eq!(plan.ops, [("r", RouteOp::Delete(drifted)), ("r", RouteOp::Add(ours))]);
    }

    /// The byte key is equal exactly when the fields it stands for are.
    #[test]
    fn route_key_matches_field_equality() {
        let base = route_to_kernel(&default_via("10.0.0.1"), Some(("eth0", 2)));
        let mut routes = vec![base.clone()];
        for dst in [None, Some("0.0.0.0/0"), Some("10.0.0.0/8"), Some("10.0.0.0/16"), Some("::/0")]
        {
            for gw in [None, Some("0.0.0.0"), Some("10.0.0.1"), Some("::a00:1"), Some("fe80::1")] {
                for (family, table, priority) in [
                    (Family::Inet4, RoutingTable::MAIN, 1024),
                    (Family::Inet6, RoutingTable::MAIN, 1024),
                    (Family::Inet4, RoutingTable(180), 1024),
                    (Family::Inet4, RoutingTable::MAIN, 0),
                    (Family::Inet4, RoutingTable(0x0100_00fe), 0x0100_0000),
                ] {
                    routes.push(RouteStatus {
                        family,
                        table,
                        priority,
                        dst: dst.map(|d| d.parse().unwrap()),
                        gateway: gw.map(|g| g.parse().unwrap()),
                        ..base.clone()
                    });
                }
            }
        }
        // Attributes outside the identity do not change the key.
        routes.push(RouteStatus { protocol: RouteProtocol::BOOT, mtu: 1400, ..base.clone() });
        let fields = |r: &RouteStatus| (r.family, r.table, r.dst, r.gateway, r.priority);
        for a in &routes {
            for b in &routes {
                assert_eq!(key_of(a) == key_of(b), fields(a) == fields(b), "{a:?} vs {b:?}");
            }
        }
    }

    /// The repeat guard's hash of a route operation is equal exactly when the operations
    /// are: each field changed on its own gives another hash.
    #[test]
    fn repeat_hash_matches_op_equality() {
        let base = route_to_kernel(&default_via("10.0.0.1"), Some(("eth0", 2)));
        let ip = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        let variants = [
            base.clone(),
            RouteStatus { family: Family::Inet6, ..base.clone() },
            RouteStatus { dst: Some("10.1.0.0/16".parse().unwrap()), ..base.clone() },
            RouteStatus { dst: Some("10.1.0.0/24".parse().unwrap()), ..base.clone() },
            RouteStatus { src: ip("10.0.0.5"), ..base.clone() },
            RouteStatus { src: ip("::a00:5"), ..base.clone() },
            RouteStatus { gateway: ip("10.0.0.2"), ..base.clone() },
            RouteStatus { gateway: None, ..base.clone() },
            RouteStatus { out_link_index: 3, ..base.clone() },
            RouteStatus { out_link_name: "eth1".into(), ..base.clone() },
            RouteStatus { table: RoutingTable(100), ..base.clone() },
            RouteStatus { priority: 1, ..base.clone() },
            RouteStatus { scope: Scope::LINK, ..base.clone() },
            RouteStatus { kind: crate::resource::RouteType(2), ..base.clone() },
            RouteStatus { flags: RouteFlags(4), ..base.clone() },
            RouteStatus { protocol: RouteProtocol::STATIC, ..base.clone() },
            RouteStatus { mtu: 1400, ..base.clone() },
        ];
        let ops: Vec<RouteOp> = variants
            .iter()
            .flat_map(|r| [RouteOp::Add(r.clone()), RouteOp::Delete(r.clone())])
            .collect();
        for a in &ops {
            for b in &ops {
                assert_eq!(repeat_hash(a) == repeat_hash(b), a == b, "{a:?} vs {b:?}");
            }
        }
        assert_eq!(repeat_hash(&ops[0]), repeat_hash(&ops[0].clone()));
    }

    /// The repeat guard trips on a route operation issued again and again, and names it.
    #[test]
    fn repeat_guard_trips_on_a_route_op_issued_every_time() {
        let mut g = super::super::apply::ApplyGuard::default();
        let now = std::time::Instant::now();
        let mut check = |ops: &[&RouteOp]| {
            for op in ops {
                let (name, detail) = (|| Routes::name("r", op), || format!("{op:?}"));
                let applied = super::super::apply::Applied {
                    key: Routes::key("r", op),
                    value: Routes::value(op),
                    name: &name,
                    detail: &detail,
                };
                g.applied("t", applied, now);
            }
            g.settle("t", Vec::new(), now)
        };
        let base = route_to_kernel(&default_via("10.0.0.1"), Some(("eth0", 2)));
        let a = RouteOp::Add(base.clone());
        let b = RouteOp::Add(RouteStatus { mtu: 1400, ..base });
        for i in 0..super::super::apply::REPEAT_LIMIT - 1 {
            // `b` is issued every other time: it never counts up to the limit.
            let ops = if i % 2 == 0 { vec![&a, &b] } else { vec![&a] };
            assert!(check(&ops).is_empty());
        }
        let again = a.clone();
        let errs = check(&[&again, &b]);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].op, format!("{a:?}"));
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
        assert_eq!(plan.ops, [("r", RouteOp::Delete(k))]);
        assert_eq!(plan.released, ["r"]);
    }
}
