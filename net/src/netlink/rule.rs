// SPDX-License-Identifier: Apache-2.0
//! [`KernelRule`]: policy routing rules, their dump, add and delete.

use ipnet::IpNet;
use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL};
use netlink_packet_route::route::RouteProtocol as NlRouteProtocol;
use netlink_packet_route::rule::{RuleAction as NlRuleAction, RuleAttribute, RuleMessage};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};

use super::error::NlError;
use super::socket::RouteSocket;
use crate::resource::nethelpers::{Family, RouteProtocol, RoutingTable};
use crate::resource::RuleAction;

/// A policy routing rule as the kernel reports it, and as [`RouteSocket::rule_add`] takes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelRule {
    /// Address family.
    pub family: Family,
    /// Priority (`FRA_PRIORITY`); always sent, so 0 means priority 0, not "pick one".
    pub priority: u32,
    /// Table to look up (`FRA_TABLE`, wins over the 8-bit header field).
    pub table: RoutingTable,
    /// Action.
    pub action: RuleAction,
    /// Firewall mark to match (`FRA_FWMARK`); 0 with a zero mask means "any".
    pub fw_mark: u32,
    /// Mask for `fw_mark` (`FRA_FWMASK`). The kernel reports `0xffffffff` when a mark was
    /// given without a mask.
    pub fw_mask: u32,
    /// Source selector.
    pub src: Option<IpNet>,
    /// Destination selector.
    pub dst: Option<IpNet>,
    /// Input interface name (`FRA_IIFNAME`), empty for any.
    pub iif: String,
    /// Output interface name (`FRA_OIFNAME`), empty for any.
    pub oif: String,
    /// Who installed it (`FRA_PROTOCOL`, kernel 4.17+).
    pub protocol: RouteProtocol,
}

impl KernelRule {
    /// A rule looking up `table` at `priority`, matching everything, protocol `static`.
    pub fn new(family: Family, priority: u32, table: RoutingTable) -> Self {
        Self {
            family,
            priority,
            table,
            action: RuleAction::UNICAST,
            fw_mark: 0,
            fw_mask: 0,
            src: None,
            dst: None,
            iif: String::new(),
            oif: String::new(),
            protocol: RouteProtocol::STATIC,
        }
    }

    fn target(&self) -> String {
        format!("{} priority {} table {}", self.family, self.priority, self.table)
    }
}

fn af(family: Family) -> AddressFamily {
    AddressFamily::from(family.af())
}

fn encode(r: &KernelRule) -> RuleMessage {
    let mut msg = RuleMessage::default();
    msg.header.family = af(r.family);
    msg.header.dst_len = r.dst.map_or(0, |d| d.prefix_len());
    msg.header.src_len = r.src.map_or(0, |d| d.prefix_len());
    // 8-bit header table; tables above 255 only in FRA_TABLE (RT_TABLE_UNSPEC here).
    msg.header.table = u8::try_from(r.table.0).unwrap_or(0);
    msg.header.action = NlRuleAction::from(r.action.0);
    let attrs = &mut msg.attributes;
    attrs.push(RuleAttribute::Priority(r.priority));
    if r.table.0 != 0 {
        attrs.push(RuleAttribute::Table(r.table.0));
    }
    if r.fw_mark != 0 || r.fw_mask != 0 {
        attrs.push(RuleAttribute::FwMark(r.fw_mark));
    }
    if r.fw_mask != 0 {
        attrs.push(RuleAttribute::FwMask(r.fw_mask));
    }
    if let Some(src) = r.src {
        attrs.push(RuleAttribute::Source(src.addr()));
    }
    if let Some(dst) = r.dst {
        attrs.push(RuleAttribute::Destination(dst.addr()));
    }
    if !r.iif.is_empty() {
        attrs.push(RuleAttribute::Iifname(r.iif.clone()));
    }
    if !r.oif.is_empty() {
        attrs.push(RuleAttribute::Oifname(r.oif.clone()));
    }
    if r.protocol.0 != 0 {
        attrs.push(RuleAttribute::Protocol(NlRouteProtocol::from(r.protocol.0)));
    }
    msg
}

fn decode(msg: RuleMessage) -> Option<KernelRule> {
    let h = &msg.header;
    let family = match u8::from(h.family) {
        2 => Family::Inet4,
        10 => Family::Inet6,
        _ => return None,
    };
    let (src_len, dst_len) = (h.src_len, h.dst_len);
    let mut r = KernelRule::new(family, 0, RoutingTable(u32::from(h.table)));
    r.action = RuleAction(u8::from(h.action));
    r.protocol = RouteProtocol::UNSPEC;
    for attr in msg.attributes {
        match attr {
            RuleAttribute::Priority(p) => r.priority = p,
            RuleAttribute::Table(t) => r.table = RoutingTable(t),
            RuleAttribute::FwMark(m) => r.fw_mark = m,
            RuleAttribute::FwMask(m) => r.fw_mask = m,
            RuleAttribute::Source(ip) => r.src = IpNet::new(ip, src_len).ok(),
            RuleAttribute::Destination(ip) => r.dst = IpNet::new(ip, dst_len).ok(),
            RuleAttribute::Iifname(n) => r.iif = n,
            RuleAttribute::Oifname(n) => r.oif = n,
            RuleAttribute::Protocol(p) => r.protocol = RouteProtocol(u8::from(p)),
            _ => {}
        }
    }
    Some(r)
}

impl RouteSocket {
    /// Dumps all IPv4 then IPv6 rules, including the kernel's defaults (0, 32766, 32767).
    pub fn dump_rules(&mut self) -> Result<Vec<KernelRule>, NlError> {
        let mut out = Vec::new();
        for family in [Family::Inet4, Family::Inet6] {
            let mut req = RuleMessage::default();
            req.header.family = af(family);
            let replies = self.dump("dump_rules", RouteNetlinkMessage::GetRule(req))?;
            out.extend(replies.into_iter().filter_map(|m| match m {
                RouteNetlinkMessage::NewRule(r) => decode(r),
                _ => None,
            }));
        }
        Ok(out)
    }

    /// Adds a rule (`NLM_F_CREATE | NLM_F_EXCL`); [`Exists`](super::NlErrorKind::Exists)
    /// when an identical rule is present (a different rule at the same priority is allowed by
    /// the kernel).
    pub fn rule_add(&mut self, r: &KernelRule) -> Result<(), NlError> {
        let msg = RouteNetlinkMessage::NewRule(encode(r));
        self.request("rule_add", &r.target(), msg, NLM_F_CREATE | NLM_F_EXCL).map(drop)
    }

    /// Deletes the first rule matching every field given;
    /// [`NotFound`](super::NlErrorKind::NotFound) (ENOENT) if none does.
    pub fn rule_delete(&mut self, r: &KernelRule) -> Result<(), NlError> {
        let msg = RouteNetlinkMessage::DelRule(encode(r));
        self.request("rule_delete", &r.target(), msg, 0).map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode() {
        let mut r = KernelRule::new(Family::Inet6, 32500, RoutingTable(180));
        r.fw_mark = 0x20;
        r.fw_mask = 0x20;
        r.src = Some("fd00::/8".parse().unwrap());
        r.iif = "lo".into();
        assert_eq!(decode(encode(&r)).unwrap(), r);
    }
}
