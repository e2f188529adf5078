// SPDX-License-Identifier: Apache-2.0
//! [`KernelLink`]: a link as the kernel reports it, decoded from `RTM_NEWLINK`, and the link
//! dumps and lookups.

use netlink_packet_route::link::{
    InfoBridge, InfoData, InfoVlan, InfoVrf, LinkAttribute, LinkExtentMask, LinkInfo, LinkMessage,
    Prop,
};
use netlink_packet_route::RouteNetlinkMessage;

use super::bond;
use super::error::NlError;
use super::socket::RouteSocket;
use crate::resource::nethelpers::{HardwareAddr, LinkType};
use crate::resource::{
    BondMasterSpec, BridgeMasterSpec, BridgeVlanSpec, StpSpec, VlanProtocol, VlanSpec,
};

/// `IFF_UP`.
pub(crate) const IFF_UP: u32 = 0x1;

/// A link as the kernel reports it.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct KernelLink {
    /// Interface index.
    pub index: u32,
    /// Interface name (`IFLA_IFNAME`).
    pub name: String,
    /// `IFLA_INFO_KIND` (`"veth"`, `"bond"`, ...); empty for physical links and loopback.
    pub kind: String,
    /// `IFLA_INFO_SLAVE_KIND` when enslaved (`"bond"`, `"bridge"`), else empty.
    pub slave_kind: String,
    /// Link-layer type (`ARPHRD_*`).
    pub link_type: LinkType,
    /// `IFF_*` flags from the header.
    pub flags: u32,
    /// Administratively up (`IFF_UP`).
    pub up: bool,
    /// MTU.
    pub mtu: u32,
    /// Current hardware address (`IFLA_ADDRESS`); empty when the link has none.
    pub mac: HardwareAddr,
    /// Link-layer broadcast address (`IFLA_BROADCAST`).
    pub broadcast: HardwareAddr,
    /// Permanent hardware address (`IFLA_PERM_ADDRESS`, kernel 5.6+), when the driver has one.
    pub perm_mac: Option<HardwareAddr>,
    /// Index of the master (bond, bridge, VRF) this link is enslaved to (`IFLA_MASTER`).
    pub master: Option<u32>,
    /// `IFLA_LINK`: the parent of a VLAN, the peer of a veth (possibly in another namespace).
    pub parent: Option<u32>,
    /// RFC 2863 operational state in lower case: `up`, `down`, `unknown`, `lowerlayerdown`,
    /// `dormant`, `testing`, `notpresent` (or the number for states newer than this code).
    pub operstate: String,
    /// Carrier present (`IFLA_CARRIER`).
    pub carrier: bool,
    /// `IFLA_IFALIAS`, empty when unset.
    pub alias: String,
    /// Alternative names (`IFLA_PROP_LIST`/`IFLA_ALT_IFNAME`).
    pub alt_names: Vec<String>,
    /// VLAN id and protocol, for `kind == "vlan"`.
    pub vlan: Option<VlanSpec>,
    /// Bond settings, for `kind == "bond"`. `primary` holds the primary slave's *name*, resolved
    /// from the kernel's `IFLA_BOND_PRIMARY` index; it is empty when there is none.
    pub bond: Option<BondMasterSpec>,
    /// Bridge STP and VLAN filtering, for `kind == "bridge"`.
    pub bridge: Option<BridgeMasterSpec>,
    /// The routing table, for `kind == "vrf"`.
    pub vrf_table: Option<u32>,
}

/// How to address a link in a lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkRef<'a> {
    /// By interface index.
    Index(u32),
    /// By exact name (`IFLA_IFNAME`; the kernel does not match alternative names here).
    Name(&'a str),
}

impl std::fmt::Display for LinkRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LinkRef::Index(i) => write!(f, "link #{i}"),
            LinkRef::Name(n) => write!(f, "link {n}"),
        }
    }
}

/// `IF_OPER_*` names as `ip link` prints them, lower-cased (RFC 2863 order).
const OPERSTATES: [&str; 7] =
    ["unknown", "notpresent", "down", "lowerlayerdown", "testing", "dormant", "up"];

/// Decodes one link message. The bond primary comes back as an index, to be resolved to a name
/// by the caller (it needs the other links).
pub(crate) fn decode_link(msg: LinkMessage) -> (KernelLink, Option<u32>) {
    let h = &msg.header;
    let flags = h.flags.bits();
    let mut link = KernelLink {
        index: h.index,
        link_type: LinkType(u16::from(h.link_layer_type)),
        flags,
        up: flags & IFF_UP != 0,
        operstate: OPERSTATES[0].to_owned(),
        ..KernelLink::default()
    };
    let mut primary = None;
    for attr in msg.attributes {
        match attr {
            LinkAttribute::IfName(n) => link.name = n,
            LinkAttribute::Mtu(m) => link.mtu = m,
            LinkAttribute::Address(a) => link.mac = HardwareAddr(a),
            LinkAttribute::Broadcast(a) => link.broadcast = HardwareAddr(a),
            LinkAttribute::PermAddress(a) => link.perm_mac = Some(HardwareAddr(a)),
            LinkAttribute::Controller(m) if m != 0 => link.master = Some(m),
            LinkAttribute::Link(p) if p != 0 => link.parent = Some(p),
            LinkAttribute::OperState(s) => {
                let n = u8::from(s);
                link.operstate = OPERSTATES
                    .get(usize::from(n))
                    .map_or_else(|| n.to_string(), |s| (*s).to_owned());
            }
            LinkAttribute::Carrier(c) => link.carrier = c != 0,
            LinkAttribute::IfAlias(a) => link.alias = a,
            LinkAttribute::PropList(props) => {
                link.alt_names.extend(props.into_iter().filter_map(|p| match p {
                    Prop::AltIfName(n) => Some(n),
                    _ => None,
                }))
            }
            LinkAttribute::LinkInfo(infos) => decode_info(&mut link, &mut primary, infos),
            _ => {}
        }
    }
    (link, primary)
}

fn decode_info(link: &mut KernelLink, primary: &mut Option<u32>, infos: Vec<LinkInfo>) {
    for info in infos {
        match info {
            LinkInfo::Kind(k) => link.kind = k.to_string(),
            LinkInfo::PortKind(k) => link.slave_kind = k.to_string(),
            LinkInfo::Data(InfoData::Vlan(attrs)) => {
                let mut vlan = VlanSpec { vid: 0, protocol: VlanProtocol::DOT1Q };
                for a in attrs {
                    match a {
                        InfoVlan::Id(id) => vlan.vid = id,
                        InfoVlan::Protocol(p) => vlan.protocol = VlanProtocol(u16::from(p)),
                        _ => {}
                    }
                }
                link.vlan = Some(vlan);
            }
            LinkInfo::Data(InfoData::Bond(attrs)) => {
                let (spec, prim) = bond::decode(attrs);
                link.bond = Some(spec);
                *primary = prim;
            }
            LinkInfo::Data(InfoData::Bridge(attrs)) => {
                let mut br = BridgeMasterSpec::default();
                for a in attrs {
                    match a {
                        InfoBridge::StpState(s) => br.stp = StpSpec { enabled: u32::from(s) != 0 },
                        InfoBridge::VlanFiltering(v) => {
                            br.vlan = BridgeVlanSpec { filtering_enabled: v }
                        }
                        _ => {}
                    }
                }
                link.bridge = Some(br);
            }
            LinkInfo::Data(InfoData::Vrf(attrs)) => {
                link.vrf_table = attrs.iter().find_map(|a| match a {
                    InfoVrf::TableId(t) => Some(*t),
                    _ => None,
                });
            }
            _ => {}
        }
    }
}

/// A link request header carrying only the index.
pub(crate) fn link_message(index: u32) -> LinkMessage {
    let mut msg = LinkMessage::default();
    msg.header.index = index;
    msg
}

impl RouteSocket {
    /// Dumps every link in the namespace, in the kernel's (index) order.
    pub fn dump_links(&mut self) -> Result<Vec<KernelLink>, NlError> {
        let mut req = LinkMessage::default();
        // Statistics are 200+ bytes per link that nobody here reads.
        req.attributes.push(LinkAttribute::ExtMask(vec![LinkExtentMask::SkipStats]));
        let replies = self.dump("dump_links", RouteNetlinkMessage::GetLink(req))?;
        let decoded: Vec<_> = replies
            .into_iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewLink(l) => Some(decode_link(l)),
                _ => None,
            })
            .collect();
        let names: Vec<(u32, String)> =
            decoded.iter().map(|(l, _)| (l.index, l.name.clone())).collect();
        Ok(decoded
            .into_iter()
            .map(|(mut link, primary)| {
                if let (Some(bond), Some(p)) = (link.bond.as_mut(), primary) {
                    if let Some((_, n)) = names.iter().find(|(i, _)| *i == p) {
                        bond.primary = n.clone();
                    }
                }
                link
            })
            .collect())
    }

    /// Looks one link up by index or name. `Ok(None)` when it does not exist.
    pub fn get_link(&mut self, link: LinkRef<'_>) -> Result<Option<KernelLink>, NlError> {
        let mut req = LinkMessage::default();
        match link {
            LinkRef::Index(i) => req.header.index = i,
            LinkRef::Name(n) => req.attributes.push(LinkAttribute::IfName(n.to_owned())),
        }
        req.attributes.push(LinkAttribute::ExtMask(vec![LinkExtentMask::SkipStats]));
        let target = link.to_string();
        let replies = match self.request("get_link", &target, RouteNetlinkMessage::GetLink(req), 0)
        {
            Ok(r) => r,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e),
        };
        let Some((mut found, primary)) = replies.into_iter().find_map(|m| match m {
            RouteNetlinkMessage::NewLink(l) => Some(decode_link(l)),
            _ => None,
        }) else {
            return Err(NlError::decode("get_link", target, "no RTM_NEWLINK in the reply"));
        };
        if let (Some(p), true) = (primary, found.bond.is_some()) {
            let name = self.get_link(LinkRef::Index(p))?.map(|l| l.name).unwrap_or_default();
            if let Some(b) = found.bond.as_mut() {
                b.primary = name;
            }
        }
        Ok(Some(found))
    }

    /// Looks a link up by exact name (not alias, not altname). `Ok(None)` when absent.
    pub fn get_link_by_name(&mut self, name: &str) -> Result<Option<KernelLink>, NlError> {
        self.get_link(LinkRef::Name(name))
    }
}
