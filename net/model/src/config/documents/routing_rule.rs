// SPDX-License-Identifier: Apache-2.0
//! `RoutingRuleConfig`: one policy routing rule, named by its priority (Talos's
//! `pkg/machinery/config/types/network/routing_rule.go` and its
//! `RoutingRuleConfigController`).

use std::borrow::Cow;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use super::{Body, LinkNames, Problems};
use crate::config::locate::YamlPath;
use crate::config::machine::TalosKey;
use crate::config::scalar::{self, Cidr, Table};
use crate::config::specs::Specs;
use crate::resource::{ConfigLayer, Family, RoutingRuleSpec, RoutingTable, RuleAction};

/// Priorities the kernel's own rules (0, 32766, 32767) and KubeSpan's rule (32500) hold.
const RESERVED_PRIORITIES: [u32; 4] = [0, 32500, 32766, 32767];

/// `kind: RoutingRuleConfig`.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RoutingRuleConfig {
    #[serde(default, rename = "apiVersion", skip_serializing)]
    pub(crate) api_version: TalosKey,
    #[serde(default, skip_serializing)]
    pub(crate) kind: TalosKey,
    /// `name`: the priority, a number (Talos names the document by it).
    pub name: String,
    /// `src`: source prefix; absent matches every source.
    #[serde(
        default,
        deserialize_with = "scalar::opt::<Cidr, _>",
        skip_serializing_if = "Option::is_none"
    )]
    pub src: Option<IpNet>,
    /// `dst`: destination prefix; absent matches every destination.
    #[serde(
        default,
        deserialize_with = "scalar::opt::<Cidr, _>",
        skip_serializing_if = "Option::is_none"
    )]
    pub dst: Option<IpNet>,
    /// `table`: the table to look up.
    #[serde(
        default,
        deserialize_with = "scalar::opt::<Table, _>",
        skip_serializing_if = "Option::is_none"
    )]
    pub table: Option<RoutingTable>,
    /// `action`: `unicast` (the default), `blackhole`, `unreachable` or `prohibit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<RuleAction>,
    /// `iifName`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub iif_name: String,
    /// `oifName`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub oif_name: String,
    /// `fwMark`.
    #[serde(default, skip_serializing_if = "super::is_zero")]
    pub fw_mark: u32,
    /// `fwMask`.
    #[serde(default, skip_serializing_if = "super::is_zero")]
    pub fw_mask: u32,
}

impl RoutingRuleConfig {
    fn priority(&self) -> Option<u32> {
        self.name.parse().ok()
    }

    fn action(&self) -> RuleAction {
        self.action.unwrap_or(RuleAction::UNICAST)
    }

    /// The families the rule is installed for: the one its prefixes name, or both when it
    /// names none (IPv6 first, as Talos emits them).
    fn families(&self) -> &'static [Family] {
        let v6 = |p: Option<IpNet>| p.is_some_and(|p| matches!(p, IpNet::V6(_)));
        if v6(self.src) || v6(self.dst) {
            &[Family::Inet6]
        } else if self.src.is_none() && self.dst.is_none() {
            &[Family::Inet6, Family::Inet4]
        } else {
            &[Family::Inet4]
        }
    }
}

impl Body for RoutingRuleConfig {
    fn name(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(&self.name))
    }

    fn check(&self, p: &mut Problems) {
        match self.priority() {
            None => p.error(YamlPath::keys("name"), "the name is the rule's priority, a number"),
            Some(prio) if RESERVED_PRIORITIES.contains(&prio) => p.error(
                YamlPath::keys("name"),
                format!("priority {prio} is reserved ({RESERVED_PRIORITIES:?})"),
            ),
            Some(_) => {}
        }
        let actions = [
            RuleAction::UNICAST,
            RuleAction::BLACKHOLE,
            RuleAction::UNREACHABLE,
            RuleAction::PROHIBIT,
        ];
        if !actions.contains(&self.action()) {
            p.error(
                YamlPath::keys("action"),
                "action is unicast, blackhole, unreachable or prohibit",
            );
        }
        if self.table.is_none() && self.action() == RuleAction::UNICAST {
            p.error(YamlPath::keys("table"), "a unicast rule needs a table");
        }
        if self.fw_mask != 0 && self.fw_mark == 0 {
            p.error(YamlPath::keys("fwMask"), "fwMask needs fwMark");
        }
        if let (Some(src), Some(dst)) = (self.src, self.dst) {
            if matches!(src, IpNet::V4(_)) != matches!(dst, IpNet::V4(_)) {
                p.error(YamlPath::keys("dst"), "src and dst are of different address families");
            }
        }
    }

    fn add_specs(&self, out: &mut Specs, _: &LinkNames<'_, '_>) {
        let Some(priority) = self.priority() else { return };
        for &family in self.families() {
            out.rule(RoutingRuleSpec {
                family,
                src: self.src,
                dst: self.dst,
                table: self.table.unwrap_or(RoutingTable::UNSPEC),
                priority,
                action: self.action(),
                iif_name: self.iif_name.clone(),
                oif_name: self.oif_name.clone(),
                fw_mark: self.fw_mark,
                fw_mask: self.fw_mask,
                layer: ConfigLayer::Configuration,
            });
        }
    }
}
