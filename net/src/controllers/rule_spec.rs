// SPDX-License-Identifier: Apache-2.0
//! Applies merged `RoutingRuleSpec`s (KubeSpan's `fwmark 0x40/0x60 lookup 180` and friends).
//!
//! Rules are stamped with [`RULE_PROTOCOL`]; only rules carrying it are ever replaced or
//! deleted, so rules of other software (and the kernel's 0/32766/32767) are never touched.

use std::collections::BTreeSet;

use super::address_spec::Desired;
use super::spec_common::first_error;
use crate::host::{RuleOp, SharedHost};
use crate::resource::{Kind, Namespace, Phase, RouteProtocol, RoutingRuleSpec, RoutingRuleStatus};
use crate::runtime::{Controller, ControllerError, Ctx, Input, Next, Output};

/// The protocol our rules carry (Talos uses `static` too).
pub const RULE_PROTOCOL: RouteProtocol = RouteProtocol::STATIC;

/// The kernel form of a rule spec.
pub fn rule_to_kernel(spec: &RoutingRuleSpec) -> RoutingRuleStatus {
    RoutingRuleStatus {
        family: spec.family,
        src: spec.src,
        dst: spec.dst,
        table: spec.table,
        priority: spec.priority,
        action: spec.action,
        iif_name: spec.iif_name.clone(),
        oif_name: spec.oif_name.clone(),
        fw_mark: spec.fw_mark,
        fw_mask: spec.fw_mask,
        protocol: RULE_PROTOCOL,
    }
}

/// Rule operations, each with the ID of the spec it serves, plus the IDs applied and released.
pub fn plan_rules(
    desired: &[Desired<'_, RoutingRuleSpec>],
    kernel: &[RoutingRuleStatus],
) -> (Vec<(String, RuleOp)>, Vec<String>, Vec<String>) {
    let (mut ops, mut applied, mut released) = (Vec::new(), Vec::new(), Vec::new());
    for d in desired {
        let want = rule_to_kernel(d.spec);
        let ours = |k: &&RoutingRuleStatus| {
            k.protocol == RULE_PROTOCOL && k.family == want.family && k.priority == want.priority
        };
        match d.phase {
            Phase::TearingDown => {
                ops.extend(
                    kernel
                        .iter()
                        .filter(ours)
                        .map(|k| (d.id.to_owned(), RuleOp::Delete(k.clone()))),
                );
                released.push(d.id.to_owned());
            }
            Phase::Running => {
                if !kernel.iter().filter(ours).any(|k| *k == want) {
                    ops.extend(
                        kernel
                            .iter()
                            .filter(ours)
                            .map(|k| (d.id.to_owned(), RuleOp::Delete(k.clone()))),
                    );
                    ops.push((d.id.to_owned(), RuleOp::Add(want)));
                }
                applied.push(d.id.to_owned());
            }
        }
    }
    (ops, applied, released)
}

/// The `RoutingRuleSpec` controller.
pub struct RuleSpecController {
    host: SharedHost,
}

impl std::fmt::Debug for RuleSpecController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuleSpecController").finish_non_exhaustive()
    }
}

impl RuleSpecController {
    /// A controller applying through `host`.
    pub fn new(host: SharedHost) -> Self {
        Self { host }
    }
}

impl Controller for RuleSpecController {
    fn name(&self) -> &'static str {
        "network.RoutingRuleSpecController"
    }

    fn inputs(&self) -> Vec<Input> {
        vec![
            Input::strong(Namespace::Network, Kind::RoutingRuleSpec),
            Input::weak(Namespace::Network, Kind::RoutingRuleStatus),
        ]
    }

    fn outputs(&self) -> Vec<Output> {
        Vec::new()
    }

    fn reconcile(&mut self, ctx: &mut Ctx<'_>) -> Result<Next, ControllerError> {
        let specs: Vec<(String, RoutingRuleSpec, Phase)> = ctx
            .store()
            .list(Namespace::Network, Kind::RoutingRuleSpec)
            .filter_map(|r| {
                r.spec_as::<RoutingRuleSpec>()
                    .map(|s| (r.metadata.id.clone(), s.clone(), r.metadata.phase))
            })
            .collect();
        let desired: Vec<Desired<'_, RoutingRuleSpec>> =
            specs.iter().map(|(id, spec, phase)| Desired { id, spec, phase: *phase }).collect();
        let kernel = self.host.borrow_mut().rules()?;
        let (ops, applied, released) = plan_rules(&desired, &kernel);
        let mut failed: BTreeSet<&str> = BTreeSet::new();
        let mut errors = Vec::new();
        for (id, op) in &ops {
            if let Err(e) = self.host.borrow_mut().rule(op) {
                failed.insert(id);
                errors.push(e);
            }
        }
        for id in applied.iter().filter(|id| !failed.contains(id.as_str())) {
            ctx.add_finalizer(Namespace::Network, Kind::RoutingRuleSpec, id)?;
        }
        for id in released.iter().filter(|id| !failed.contains(id.as_str())) {
            ctx.remove_finalizer(Namespace::Network, Kind::RoutingRuleSpec, id)?;
        }
        first_error(self.name(), errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::{ConfigLayer, Family, RoutingTable, RuleAction};

    fn kubespan_rule() -> RoutingRuleSpec {
        RoutingRuleSpec {
            family: Family::Inet4,
            table: RoutingTable(180),
            priority: 32500,
            action: RuleAction::UNICAST,
            fw_mark: 0x40,
            fw_mask: 0x60,
            layer: ConfigLayer::Operator,
            ..Default::default()
        }
    }

    #[test]
    fn adds_once_and_leaves_foreign_rules() {
        let spec = kubespan_rule();
        let d = [Desired { id: "inet4/32500", spec: &spec, phase: Phase::Running }];
        let (ops, applied, _) = plan_rules(&d, &[]);
        assert!(matches!(ops.as_slice(), [(_, RuleOp::Add(r))] if r.protocol == RULE_PROTOCOL));
        assert_eq!(applied, ["inet4/32500"]);
        let foreign = RoutingRuleStatus {
            protocol: RouteProtocol::BOOT,
            table: RoutingTable(99),
            ..rule_to_kernel(&spec)
        };
        let (ops, _, _) = plan_rules(&d, &[rule_to_kernel(&spec), foreign.clone()]);
        assert!(ops.is_empty());
        let (ops, _, released) = plan_rules(
            &[Desired { id: "inet4/32500", spec: &spec, phase: Phase::TearingDown }],
            &[foreign],
        );
        assert!(ops.is_empty(), "a rule at our priority without our protocol is not ours");
        assert_eq!(released, ["inet4/32500"]);
    }

    #[test]
    fn drifted_rule_is_replaced() {
        let spec = kubespan_rule();
        let old = RoutingRuleStatus { fw_mark: 0x20, ..rule_to_kernel(&spec) };
        let d = [Desired { id: "inet4/32500", spec: &spec, phase: Phase::Running }];
        let (ops, _, _) = plan_rules(&d, std::slice::from_ref(&old));
        assert_eq!(ops.len(), 2);
        assert!(matches!(&ops[0], (_, RuleOp::Delete(r)) if *r == old));
    }
}
