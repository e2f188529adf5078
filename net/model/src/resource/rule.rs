// SPDX-License-Identifier: Apache-2.0
//! Policy routing rules: [`RoutingRuleSpec`], [`RoutingRuleStatus`] and their ID,
//! [`routing_rule_id`].

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use super::layer::{ConfigLayer, LayeredSpec};
use super::nethelpers::{
    is_default, named_number, serde_via_str, Family, RouteProtocol, RoutingTable,
};

named_number!(
    /// `FR_ACT_*` rule action.
    RuleAction(u8), "rule action", {
        /// Look up a table (`FR_ACT_TO_TBL`).
        UNICAST = 1 => "unicast",
        /// Jump to another rule.
        GOTO = 2 => "goto",
        /// No operation.
        NOP = 3 => "nop",
        /// Drop silently.
        BLACKHOLE = 6 => "blackhole",
        /// ENETUNREACH.
        UNREACHABLE = 7 => "unreachable",
        /// EACCES.
        PROHIBIT = 8 => "prohibit",
    }
);

/// A policy routing rule.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RoutingRuleSpec {
    /// Address family.
    pub family: Family,
    /// Source selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<IpNet>,
    /// Destination selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<IpNet>,
    /// Table to look up.
    pub table: RoutingTable,
    /// Priority (unique per family: it is the natural ID).
    pub priority: u32,
    /// Action.
    pub action: RuleAction,
    /// Input interface.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub iif_name: String,
    /// Output interface.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub oif_name: String,
    /// Firewall mark.
    #[serde(default, skip_serializing_if = "is_default")]
    pub fw_mark: u32,
    /// Firewall mark mask.
    #[serde(default, skip_serializing_if = "is_default")]
    pub fw_mask: u32,
    /// The layer this spec came from.
    pub layer: ConfigLayer,
}

impl RoutingRuleSpec {
    /// The natural ID.
    pub fn id(&self) -> String {
        routing_rule_id(self.family, self.priority)
    }
}

/// `<family>/<priority %05d>`, e.g. `inet4/32500`.
pub fn routing_rule_id(family: Family, priority: u32) -> String {
    format!("{family}/{priority:05}")
}

/// A rule as the kernel reports it.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoutingRuleStatus {
    /// Address family.
    pub family: Family,
    /// Source selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<IpNet>,
    /// Destination selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<IpNet>,
    /// Table.
    pub table: RoutingTable,
    /// Priority.
    pub priority: u32,
    /// Action.
    pub action: RuleAction,
    /// Input interface.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub iif_name: String,
    /// Output interface.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub oif_name: String,
    /// Firewall mark.
    #[serde(default, skip_serializing_if = "is_default")]
    pub fw_mark: u32,
    /// Firewall mark mask.
    #[serde(default, skip_serializing_if = "is_default")]
    pub fw_mask: u32,
    /// Protocol (we only touch rules carrying ours).
    pub protocol: RouteProtocol,
}

impl LayeredSpec for RoutingRuleSpec {
    fn natural_id(&self) -> String {
        self.id()
    }
    fn layer(&self) -> ConfigLayer {
        self.layer
    }
}
