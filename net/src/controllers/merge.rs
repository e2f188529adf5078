// SPDX-License-Identifier: Apache-2.0
//! Merge controllers: one per spec type, each wrapping a pure fold from `crate::merge`.
//!
//! Outputs that are tearing down are not rewritten: the merge waits until the spec controller
//! releases its finalizer, destroys the old resource, and writes the new one fresh (docs/talos.md:
//! Merge).

use std::collections::BTreeSet;

use crate::kinds::{visit_layered, LayeredKindVisitor};
use crate::resource::{LayeredSpec, Namespace, SpecType};
use crate::runtime::{Controller, ControllerError, Ctx, Input, Next, Output};

use crate::kinds::MergeFn;

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

        // One walk instead of a lookup per output: outputs are seldom tearing down.
        let tearing = ctx.any_tearing_down(Namespace::Network, S::KIND);
        for (id, m) in merged.specs {
            if tearing && ctx.is_tearing_down(Namespace::Network, S::KIND, &id) {
                // Destroys it now if its finalizers are gone; the next pass writes it fresh.
                ctx.teardown(Namespace::Network, S::KIND, &id)?;
                if ctx.resource(Namespace::Network, S::KIND, &id).is_some() {
                    continue;
                }
            }
            let provenance = m.provenance.compacted();
            ctx.put_with_provenance(Namespace::Network, &id, m.spec, provenance)?;
        }
        ctx.cleanup_untouched(Namespace::Network, S::KIND)?;
        Ok(Next::Idle)
    }
}

/// One merge controller per layered kind of the kind table, in table order.
pub(super) fn all() -> Vec<Box<dyn Controller>> {
    struct Register(Vec<Box<dyn Controller>>);
    impl LayeredKindVisitor for Register {
        fn visit<S: SpecType + LayeredSpec>(&mut self, merge: MergeFn<S>, name: &'static str) {
            self.0.push(Box::new(MergeController::new(name, merge)));
        }
    }
    let mut register = Register(Vec::new());
    visit_layered(&mut register);
    register.0
}
