// SPDX-License-Identifier: Apache-2.0
//! Applies merged `AddressSpec`s to the kernel (docs/talos.md: Applying specs).
//!
//! Differences from Talos, on purpose:
//! - a change of flags, priority or lifetimes is applied with `RTM_NEWADDR`+`NLM_F_REPLACE`,
//!   in place; only a scope change deletes and re-adds (a DHCP renewal never drops the address);
//! - kernel addresses we did not create are never touched.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use ipnet::IpNet;

use super::apply::{self, first_error, hash_of, LinkCache, Outcome, SpecApply, SpecOps};
use crate::host::{AddressChange, AddressOp, Host, HostError, SharedHost};
use crate::resource::{
    AddressFlags, AddressSpec, AddressStatus, Family, Kind, LinkStatus, Namespace, Phase,
};
use crate::runtime::{Controller, ControllerError, Ctx, Input, Next, Output};

use super::apply::Desired;

/// What to do for a set of address specs; IDs borrow from the specs planned.
#[derive(Debug, Default, PartialEq)]
pub struct AddressPlan<'a> {
    /// Operations in order, each with the ID of the spec it serves.
    pub ops: Vec<(&'a str, AddressOp)>,
    /// Running specs whose link does not exist (yet).
    pub waiting: Vec<&'a str>,
    /// Specs that are in the kernel as wanted, or will be after `ops` (hold a finalizer).
    pub applied: Vec<&'a str>,
    /// Tearing-down specs whose kernel object is gone after `ops` (release the finalizer).
    pub released: Vec<&'a str>,
}

/// The kernel form of an address spec on link `index`.
pub fn address_to_kernel(spec: &AddressSpec, link_name: &str, index: u32) -> AddressChange {
    let ip = spec.address.addr();
    let broadcast = match spec.address {
        IpNet::V4(v4) if v4.prefix_len() < 31 => Some(IpAddr::V4(v4.broadcast())),
        _ => None,
    };
    let mut flags = spec.flags & AddressFlags::MANAGED;
    if ip.is_ipv4() {
        // NODAD, HOMEADDRESS and MNGTMPADDR mean nothing to IPv4 and the kernel does not keep
        // them: asking for them would be a difference that never settles.
        flags = flags
            & (AddressFlags::PERMANENT | AddressFlags::NOPREFIXROUTE | AddressFlags::MCAUTOJOIN);
    }
    // The kernel only reports "permanent" for addresses without a finite lifetime.
    if spec.valid_lifetime.is_some() {
        flags = AddressFlags(flags.0 & !AddressFlags::PERMANENT.0);
    }
    AddressChange {
        address: AddressStatus {
            address: spec.address,
            local: Some(ip),
            broadcast,
            anycast: None,
            multicast: None,
            link_index: index,
            link_name: link_name.to_owned(),
            family: Family::of(&ip),
            scope: spec.scope,
            flags,
            priority: spec.priority,
        },
        valid_lifetime: spec.valid_lifetime,
        preferred_lifetime: spec.preferred_lifetime,
    }
}

/// Plan address changes. `last_applied` holds the specs applied before, by ID: lifetimes
/// cannot be compared with the kernel (it reports what remains), so a lifetime change is
/// detected against what we applied last.
pub fn plan_addresses<'a>(
    desired: &[Desired<'a, AddressSpec>],
    links: &[(String, LinkStatus)],
    kernel: &[AddressStatus],
    last_applied: &BTreeMap<String, AddressSpec>,
) -> AddressPlan<'a> {
    let mut plan = AddressPlan::default();
    let by_key: HashMap<(u32, IpNet), &AddressStatus> =
        kernel.iter().map(|k| ((k.link_index, k.address), k)).collect();
    plan.ops.reserve(desired.len());
    plan.applied.reserve(desired.len());
    let mut links = LinkCache::new(links);
    for d in desired {
        let link = links.find(&d.spec.link_name);
        let existing = link.and_then(|(_, l)| by_key.get(&(l.index, d.spec.address)).copied());
        match d.phase {
            Phase::TearingDown => {
                if let Some(k) = existing {
                    plan.ops.push((d.id, AddressOp::Delete(k.clone())));
                }
                plan.released.push(d.id);
            }
            Phase::Running => {
                let Some((name, l)) = link else {
                    plan.waiting.push(d.id);
                    continue;
                };
                let want = address_to_kernel(d.spec, name, l.index);
                match existing {
                    None => plan.ops.push((d.id, AddressOp::Add(want))),
                    // A scope change, or a flag change on IPv4 (whose replace keeps the old
                    // flags), needs a new address; anything else changes in place.
                    Some(k)
                        if k.scope != want.address.scope
                            || (want.address.family == Family::Inet4
                                && (k.flags & AddressFlags::MANAGED) != want.address.flags) =>
                    {
                        plan.ops.push((d.id, AddressOp::Delete(k.clone())));
                        plan.ops.push((d.id, AddressOp::Add(want)));
                    }
                    Some(k) => {
                        let kernel_flags = k.flags & AddressFlags::MANAGED;
                        let lifetimes_changed = last_applied.get(d.id).is_some_and(|prev| {
                            (prev.valid_lifetime, prev.preferred_lifetime)
                                != (d.spec.valid_lifetime, d.spec.preferred_lifetime)
                        });
                        if kernel_flags != want.address.flags
                            || k.priority != want.address.priority
                            || lifetimes_changed
                        {
                            plan.ops.push((d.id, AddressOp::Replace(want)));
                        }
                    }
                }
                plan.applied.push(d.id);
            }
        }
    }
    plan
}

/// Addresses, to the apply loop.
#[derive(Debug)]
struct Addresses;

impl SpecOps for Addresses {
    type Spec = AddressSpec;
    type Op = AddressOp;
    const OBJECT: &'static str = "address";

    fn what(op: &AddressOp) -> (u8, &'static str) {
        match op {
            AddressOp::Add(_) => (0, "add"),
            AddressOp::Delete(_) => (1, "delete"),
            AddressOp::Replace(_) => (2, "replace"),
        }
    }

    fn value(op: &AddressOp) -> Option<u64> {
        Some(hash_of(op))
    }

    fn apply(host: &mut dyn Host, ops: &[&AddressOp]) -> Vec<Result<(), HostError>> {
        host.addresses_apply(ops)
    }
}

/// The `AddressSpec` controller.
pub struct AddressSpecController {
    host: SharedHost,
    last_applied: BTreeMap<String, AddressSpec>,
    /// Batches, the guard (addresses something else keeps deleting or changing back) and
    /// the wait log.
    apply: SpecApply<Addresses>,
}

impl std::fmt::Debug for AddressSpecController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AddressSpecController").finish_non_exhaustive()
    }
}

impl AddressSpecController {
    /// A controller applying through `host`.
    pub fn new(host: SharedHost) -> Self {
        Self { host, last_applied: BTreeMap::new(), apply: SpecApply::new() }
    }
}

impl Controller for AddressSpecController {
    fn name(&self) -> &'static str {
        "network.AddressSpecController"
    }

    fn inputs(&self) -> Vec<Input> {
        vec![
            Input::strong(Namespace::Network, Kind::AddressSpec),
            Input::weak(Namespace::Network, Kind::LinkStatus),
            Input::weak(Namespace::Network, Kind::AddressStatus),
        ]
    }

    fn outputs(&self) -> Vec<Output> {
        Vec::new()
    }

    fn reconcile(&mut self, ctx: &mut Ctx<'_>) -> Result<Next, ControllerError> {
        let (now, name) = (ctx.now(), self.name());
        let (links, kernel) = {
            let mut host = self.host.borrow_mut();
            (host.links()?, host.addresses()?)
        };
        // Planned and applied while the specs are borrowed from the store; only the IDs whose
        // finalizer changes are copied out for the writes after.
        let (desired, mut lacking) = apply::desired::<Addresses>(ctx.store(), name);
        let plan = plan_addresses(&desired, &links, &kernel, &self.last_applied);
        let mut out = Outcome::default();
        self.apply.apply(name, &self.host, now, &plan.ops, &mut out);
        self.apply.settle(name, SpecApply::<Addresses>::keys(&plan.ops), now, &mut out);
        let add = out.to_add(&plan.applied, &mut lacking);
        for id in plan.applied.iter().filter(|id| !out.failed(id)) {
            // `desired` is in ID order too.
            let spec = desired.binary_search_by(|d| d.id.cmp(id)).ok().and_then(|i| desired.get(i));
            if let Some(d) = spec {
                if self.last_applied.get(*id) != Some(d.spec) {
                    self.last_applied.insert((*id).to_owned(), d.spec.clone());
                }
            }
        }
        let release = out.to_release(&plan.released, |_| false);
        for id in release.iter() {
            self.last_applied.remove(id);
        }
        let waiting: Vec<String> = plan.waiting.iter().map(|id| (*id).to_owned()).collect();
        drop(plan);
        apply::write_finalizers(ctx, Kind::AddressSpec, &add, &release)?;
        let next = self.apply.report(ctx, &waiting);
        first_error(name, out.errors, next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::{ConfigLayer, LinkType, Scope};

    fn links() -> Vec<(String, LinkStatus)> {
        let eth0 = LinkStatus {
            index: 2,
            link_type: LinkType::ETHER,
            alias: "uplink".into(),
            ..Default::default()
        };
        vec![("eth0".into(), eth0)]
    }

    fn spec(addr: &str) -> AddressSpec {
        AddressSpec::new("eth0", addr.parse().unwrap(), ConfigLayer::Configuration)
    }

    fn running<'a>(id: &'a str, spec: &'a AddressSpec) -> Desired<'a, AddressSpec> {
        Desired { id, spec, phase: Phase::Running }
    }

    fn ops<'p>(plan: &'p AddressPlan<'_>) -> Vec<&'p AddressOp> {
        plan.ops.iter().map(|(_, op)| op).collect()
    }

    #[test]
    fn adds_missing_with_kernel_attributes() {
        let s = spec("10.0.0.5/24");
        let plan =
            plan_addresses(&[running("eth0/10.0.0.5/24", &s)], &links(), &[], &BTreeMap::new());
        let [AddressOp::Add(c)] = ops(&plan)[..] else { panic!("{plan:?}") };
        assert_eq!(c.address.link_index, 2);
        assert_eq!(c.address.broadcast, Some("10.0.0.255".parse().unwrap()));
        assert_eq!(c.address.local, Some("10.0.0.5".parse().unwrap()));
        assert_eq!(plan.applied, ["eth0/10.0.0.5/24"]);
    }

    #[test]
    fn equal_address_needs_nothing_and_alias_resolves() {
        let mut s = spec("10.0.0.5/24");
        s.link_name = "uplink".into();
        let k = address_to_kernel(&s, "eth0", 2).address;
        let plan = plan_addresses(&[running("x", &s)], &links(), &[k], &BTreeMap::new());
        assert!(plan.ops.is_empty(), "{plan:?}");
    }

    #[test]
    fn lifetime_and_flag_changes_replace_in_place() {
        let mut old = spec("10.0.0.5/24");
        old.valid_lifetime = Some(600);
        old.preferred_lifetime = Some(600);
        let k = address_to_kernel(&old, "eth0", 2).address;
        let mut renewed = old.clone();
        renewed.valid_lifetime = Some(1200);
        renewed.preferred_lifetime = Some(1200);
        let applied = BTreeMap::from([("x".to_owned(), old.clone())]);
        let plan =
            plan_addresses(&[running("x", &renewed)], &links(), std::slice::from_ref(&k), &applied);
        assert!(
            matches!(ops(&plan)[..], [AddressOp::Replace(c)] if c.valid_lifetime == Some(1200)),
            "{plan:?}"
        );
        let mut prio = old.clone();
        prio.priority = 50;
        let plan = plan_addresses(&[running("x", &prio)], &links(), &[k], &applied);
        assert!(matches!(ops(&plan)[..], [AddressOp::Replace(_)]), "{plan:?}");
        assert!(!ops(&plan).iter().any(|op| matches!(op, AddressOp::Delete(_))));
    }

    #[test]
    fn ipv4_flag_change_deletes_and_adds_and_ipv6_only_flags_are_dropped() {
        let mut s = spec("10.0.0.5/24");
        let k = address_to_kernel(&s, "eth0", 2).address;
        s.flags = AddressFlags::PERMANENT | AddressFlags::NOPREFIXROUTE;
        let plan = plan_addresses(
            &[running("x", &s)],
            &links(),
            std::slice::from_ref(&k),
            &BTreeMap::new(),
        );
        assert!(matches!(ops(&plan)[..], [AddressOp::Delete(_), AddressOp::Add(_)]), "{plan:?}");
        s.flags = AddressFlags::PERMANENT | AddressFlags::NODAD;
        let want = address_to_kernel(&s, "eth0", 2).address;
        assert_eq!(want.flags, AddressFlags::PERMANENT);
        assert!(plan_addresses(&[running("x", &s)], &links(), &[k], &BTreeMap::new())
            .ops
            .is_empty());
    }

    #[test]
    fn scope_change_deletes_and_adds() {
        let s = spec("10.0.0.5/24");
        let mut k = address_to_kernel(&s, "eth0", 2).address;
        k.scope = Scope::HOST;
        let plan = plan_addresses(&[running("x", &s)], &links(), &[k], &BTreeMap::new());
        assert!(matches!(ops(&plan)[..], [AddressOp::Delete(_), AddressOp::Add(_)]), "{plan:?}");
    }

    #[test]
    fn missing_link_waits_and_teardown_deletes_only_ours() {
        let mut s = spec("10.9.0.5/24");
        s.link_name = "eth9".into();
        let plan =
            plan_addresses(&[running("eth9/10.9.0.5/24", &s)], &links(), &[], &BTreeMap::new());
        assert_eq!((plan.ops.len(), plan.waiting.as_slice()), (0, ["eth9/10.9.0.5/24"].as_slice()));

        let ours = spec("10.0.0.5/24");
        let foreign = address_to_kernel(&spec("10.0.0.6/24"), "eth0", 2).address;
        let k = address_to_kernel(&ours, "eth0", 2).address;
        let d = Desired { id: "x", spec: &ours, phase: Phase::TearingDown };
        let plan = plan_addresses(&[d], &links(), &[k.clone(), foreign], &BTreeMap::new());
        assert_eq!(ops(&plan), [&AddressOp::Delete(k)]);
        assert_eq!(plan.released, ["x"]);
    }
}
