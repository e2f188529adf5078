// SPDX-License-Identifier: Apache-2.0
//! Applies merged `RoutingRuleSpec`s (KubeSpan's `fwmark 0x40/0x60 lookup 180` and friends).
//!
//! Rules are stamped with [`RULE_PROTOCOL`]; only rules carrying it are ever replaced or
//! deleted, so rules of other software (and the kernel's 0/32766/32767) are never touched.

use super::apply::Desired;
use super::apply::{self, first_error, hash_of, Outcome, SpecApply, SpecOps};
use crate::host::{Host, HostError, RuleOp, SharedHost};
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

/// Rules, to the apply loop.
#[derive(Debug)]
struct Rules;

impl SpecOps for Rules {
    type Spec = RoutingRuleSpec;
    type Op = RuleOp;
    const OBJECT: &'static str = "rule";

    fn what(op: &RuleOp) -> (u8, &'static str) {
        match op {
            RuleOp::Add(_) => (0, "add"),
            RuleOp::Delete(_) => (1, "delete"),
        }
    }

    fn value(op: &RuleOp) -> Option<u64> {
        // Rules are few; their text is their value.
        Some(hash_of(&format!("{op:?}")))
    }

    fn apply(host: &mut dyn Host, ops: &[&RuleOp]) -> Vec<Result<(), HostError>> {
        ops.iter().map(|op| host.rule(op)).collect()
    }
}

/// The `RoutingRuleSpec` controller.
pub struct RuleSpecController {
    host: SharedHost,
    /// The guard (rules something else keeps deleting or changing back).
    apply: SpecApply<Rules>,
}

impl std::fmt::Debug for RuleSpecController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuleSpecController").finish_non_exhaustive()
    }
}

impl RuleSpecController {
    /// A controller applying through `host`.
    pub fn new(host: SharedHost) -> Self {
        Self { host, apply: SpecApply::new() }
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
        let (now, name) = (ctx.now(), self.name());
        let kernel = self.host.borrow_mut().rules()?;
        let (desired, mut lacking) = apply::desired::<Rules>(ctx.store(), name);
        let (ops, applied, released) = plan_rules(&desired, &kernel);
        let mut out = Outcome::default();
        self.apply.apply(name, &self.host, now, &ops, &mut out);
        self.apply.settle(name, SpecApply::<Rules>::keys(&ops), now, &mut out);
        let add = out.to_add(&applied, &mut lacking);
        let release = out.to_release(&released, |_| false);
        apply::write_finalizers(ctx, Kind::RoutingRuleSpec, &add, &release)?;
        let next = self.apply.report(ctx, &[] as &[&str]);
        first_error(name, out.errors, next)
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
