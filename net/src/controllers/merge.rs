// SPDX-License-Identifier: Apache-2.0
//! Merge controllers: one per spec type, each wrapping a pure fold from `crate::merge`.
//!
//! Outputs that are tearing down are not rewritten: the merge waits until the spec controller
//! releases its finalizer, destroys the old resource, and writes the new one fresh (docs/talos.md:
//! Merge).

use std::collections::{BTreeMap, BTreeSet};

use crate::merge::{self, Merged};
use crate::resource::{
    AddressSpec, HostnameSpec, LinkSpec, Namespace, OperatorSpec, ResolverSpec, RouteSpec,
    RoutingRuleSpec, SpecType, TimeServerSpec,
};
use crate::runtime::{Controller, ControllerError, Ctx, Input, Next, Output};

/// The pure merge of one spec type.
pub type MergeFn<S> = fn(&[(&str, &S)]) -> Merged<S>;

/// Folds `network-config` specs of type `S` into `network`.
pub struct MergeController<S: SpecType> {
    name: &'static str,
    merge: MergeFn<S>,
    /// Warnings already logged, so a warning is logged once per appearance, not per pass.
    logged: BTreeSet<String>,
}

impl<S: SpecType> std::fmt::Debug for MergeController<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MergeController").field("name", &self.name).finish()
    }
}

impl<S: SpecType> MergeController<S> {
    /// A merge controller named `name` using `merge`.
    pub fn new(name: &'static str, merge: MergeFn<S>) -> Self {
        Self { name, merge, logged: BTreeSet::new() }
    }
}

impl<S: SpecType> Controller for MergeController<S> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn inputs(&self) -> Vec<Input> {
        vec![
            Input::strong(Namespace::NetworkConfig, S::KIND),
            Input::destroy_ready(Namespace::Network, S::KIND),
        ]
    }

    fn outputs(&self) -> Vec<Output> {
        vec![Output::exclusive(Namespace::Network, S::KIND)]
    }

    fn reconcile(&mut self, ctx: &mut Ctx<'_>) -> Result<Next, ControllerError> {
        // The fold borrows the inputs and returns owned specs; nothing is cloned twice.
        let merged = (self.merge)(&ctx.list::<S>(Namespace::NetworkConfig));

        let warnings: BTreeSet<String> = merged.warnings.into_iter().collect();
        for w in warnings.difference(&self.logged) {
            log::warn!(target: self.name, "{w}");
        }
        self.logged = warnings;

        for (id, m) in merged.specs {
            if ctx.is_tearing_down(Namespace::Network, S::KIND, &id) {
                // Destroys it now if its finalizers are gone; the next pass writes it fresh.
                ctx.teardown(Namespace::Network, S::KIND, &id)?;
                if ctx.resource(Namespace::Network, S::KIND, &id).is_some() {
                    continue;
                }
            }
            let provenance = compact(m.provenance.fields);
            ctx.put_with_provenance(Namespace::Network, &id, m.spec, provenance)?;
        }
        ctx.cleanup_untouched(Namespace::Network, S::KIND)?;
        Ok(Next::Idle)
    }
}

/// Per-field provenance, or `{"*": inputs}` when one list of inputs decided every field (the
/// common case of a single winning spec).
fn compact(fields: BTreeMap<&'static str, Vec<String>>) -> BTreeMap<String, Vec<String>> {
    let mut lists = fields.values();
    match lists.next() {
        Some(first) if lists.all(|l| l == first) => {
            BTreeMap::from([("*".to_owned(), first.clone())])
        }
        _ => fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
    }
}

pub(super) fn addresses() -> MergeController<AddressSpec> {
    MergeController::new("network.AddressMergeController", merge::merge_addresses)
}

pub(super) fn routes() -> MergeController<RouteSpec> {
    MergeController::new("network.RouteMergeController", merge::merge_routes)
}

pub(super) fn links() -> MergeController<LinkSpec> {
    MergeController::new("network.LinkMergeController", merge::merge_links)
}

pub(super) fn resolvers() -> MergeController<ResolverSpec> {
    MergeController::new("network.ResolverMergeController", merge::merge_resolvers)
}

pub(super) fn hostnames() -> MergeController<HostnameSpec> {
    MergeController::new("network.HostnameMergeController", merge::merge_hostnames)
}

pub(super) fn time_servers() -> MergeController<TimeServerSpec> {
    MergeController::new("network.TimeServerMergeController", merge::merge_time_servers)
}

pub(super) fn operators() -> MergeController<OperatorSpec> {
    MergeController::new("network.OperatorMergeController", merge::merge_operators)
}

pub(super) fn rules() -> MergeController<RoutingRuleSpec> {
    MergeController::new("network.RoutingRuleMergeController", merge::merge_rules)
}
