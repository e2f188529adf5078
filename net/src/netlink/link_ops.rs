// SPDX-License-Identifier: Apache-2.0
//! Link changes: create ([`NewLink`]), set up/down, MTU, MAC, master, bond and bridge settings,
//! delete.

use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL};
use netlink_packet_route::link::{
    BridgeStpState, InfoBridge, InfoData, InfoKind, InfoVeth, InfoVlan, InfoVrf, LinkAttribute,
    LinkFlags, LinkInfo, LinkMessage, Prop, VlanProtocol as NlVlanProtocol,
};
use netlink_packet_route::RouteNetlinkMessage;

use super::bond;
use super::error::NlError;
use super::link::{link_message, LinkRef, IFF_UP};
use super::socket::RouteSocket;
use crate::resource::nethelpers::HardwareAddr;
use crate::resource::{BondMasterSpec, BridgeMasterSpec};

/// The kind of a logical link to create: the `Host` boundary's type, used as is, so the
/// adapter needs no translation of its own.
pub use crate::host::NewLinkKind as LinkKind;

impl LinkKind {
    /// The kernel's name for the kind (`IFLA_INFO_KIND`), as [`KernelLink::kind`] reports it.
    ///
    /// [`KernelLink::kind`]: super::KernelLink::kind
    pub fn name(&self) -> &'static str {
        match self {
            LinkKind::Dummy => "dummy",
            LinkKind::Veth { .. } => "veth",
            LinkKind::Vlan { .. } => "vlan",
            LinkKind::Bond(_) => "bond",
            LinkKind::Bridge(_) => "bridge",
            LinkKind::Wireguard => "wireguard",
            LinkKind::Vrf { .. } => "vrf",
        }
    }
}

/// A link to create with [`RouteSocket::link_create`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewLink {
    /// Interface name (at most 15 bytes).
    pub name: String,
    /// Kind and kind-specific settings.
    pub kind: LinkKind,
    /// MTU; 0 keeps the kind's default.
    pub mtu: u32,
    /// Hardware address; `None` lets the kernel pick a random one.
    pub mac: Option<HardwareAddr>,
}

impl NewLink {
    /// A link of `kind` with default MTU and MAC.
    pub fn new(name: &str, kind: LinkKind) -> Self {
        Self { name: name.to_owned(), kind, mtu: 0, mac: None }
    }
}

/// Bridge settings to send. `IFLA_BR_VLAN_FILTERING` is only sent when `vlan_filtering` says
/// so: a kernel built without `CONFIG_BRIDGE_VLAN_FILTERING` answers EOPNOTSUPP to the attribute
/// even when it asks for the default (off).
fn bridge_data(br: &BridgeMasterSpec, vlan_filtering: bool) -> InfoData {
    let stp = BridgeStpState::from(u32::from(br.stp.enabled));
    let mut attrs = vec![InfoBridge::StpState(stp)];
    if vlan_filtering {
        attrs.push(InfoBridge::VlanFiltering(br.vlan.filtering_enabled));
    }
    InfoData::Bridge(attrs)
}

impl RouteSocket {
    /// Creates a link (`RTM_NEWLINK` with `NLM_F_CREATE | NLM_F_EXCL`).
    ///
    /// Fails with [`Exists`](super::NlErrorKind::Exists) when the name is taken and
    /// [`Unsupported`](super::NlErrorKind::Unsupported) when the kind's module is missing.
    pub fn link_create(&mut self, link: &NewLink) -> Result<(), NlError> {
        let mut msg = LinkMessage::default();
        msg.attributes.push(LinkAttribute::IfName(link.name.clone()));
        if link.mtu != 0 {
            msg.attributes.push(LinkAttribute::Mtu(link.mtu));
        }
        if let Some(mac) = &link.mac {
            msg.attributes.push(LinkAttribute::Address(mac.0.clone()));
        }
        let info = match &link.kind {
            LinkKind::Dummy => vec![LinkInfo::Kind(InfoKind::Dummy)],
            // Keys, port and peers go over generic netlink once the link exists.
            LinkKind::Wireguard => vec![LinkInfo::Kind(InfoKind::Wireguard)],
            LinkKind::Veth { peer } => {
                let mut p = LinkMessage::default();
                p.attributes.push(LinkAttribute::IfName(peer.clone()));
                vec![
                    LinkInfo::Kind(InfoKind::Veth),
                    LinkInfo::Data(InfoData::Veth(InfoVeth::Peer(p))),
                ]
            }
            LinkKind::Vlan { parent, vlan } => {
                msg.attributes.push(LinkAttribute::Link(*parent));
                vec![
                    LinkInfo::Kind(InfoKind::Vlan),
                    LinkInfo::Data(InfoData::Vlan(vec![
                        InfoVlan::Id(vlan.vid),
                        InfoVlan::Protocol(NlVlanProtocol::from(vlan.protocol.0)),
                    ])),
                ]
            }
            LinkKind::Bond(b) => {
                let primary = self.primary_index(b)?;
                vec![
                    LinkInfo::Kind(InfoKind::Bond),
                    LinkInfo::Data(InfoData::Bond(bond::encode(b, primary))),
                ]
            }
            LinkKind::Bridge(br) => vec![
                LinkInfo::Kind(InfoKind::Bridge),
                LinkInfo::Data(bridge_data(br, br.vlan.filtering_enabled)),
            ],
            LinkKind::Vrf { table } => vec![
                LinkInfo::Kind(InfoKind::Vrf),
                LinkInfo::Data(InfoData::Vrf(vec![InfoVrf::TableId(*table)])),
            ],
        };
        msg.attributes.push(LinkAttribute::LinkInfo(info));
        let target = format!("{} ({})", link.name, link.kind.name());
        self.request(
            "link_create",
            &target,
            RouteNetlinkMessage::NewLink(msg),
            NLM_F_CREATE | NLM_F_EXCL,
        )?;
        Ok(())
    }

    /// Sets `IFF_UP` (or clears it), leaving the other flags alone.
    pub fn link_set_up(&mut self, index: u32, up: bool) -> Result<(), NlError> {
        let mut msg = link_message(index);
        msg.header.flags = LinkFlags::from_bits_retain(if up { IFF_UP } else { 0 });
        msg.header.change_mask = LinkFlags::from_bits_retain(IFF_UP);
        let target = format!("#{index} up={up}");
        self.request("link_set_up", &target, RouteNetlinkMessage::SetLink(msg), 0).map(drop)
    }

    /// Renames the link (`IFLA_IFNAME`); the kernel refuses while it is up.
    pub fn link_set_name(&mut self, index: u32, name: &str) -> Result<(), NlError> {
        self.set_attr("link_set_name", index, LinkAttribute::IfName(name.to_owned()))
    }

    /// Adds an alternative name (`RTM_NEWLINKPROP` with `IFLA_PROP_LIST`/`IFLA_ALT_IFNAME`).
    pub fn link_add_altname(&mut self, index: u32, altname: &str) -> Result<(), NlError> {
        let mut msg = link_message(index);
        msg.attributes.push(LinkAttribute::PropList(vec![Prop::AltIfName(altname.to_owned())]));
        let target = format!("#{index} altname {altname}");
        self.request("link_add_altname", &target, RouteNetlinkMessage::NewLinkProp(msg), 0)
            .map(drop)
    }

    /// Sets the MTU.
    pub fn link_set_mtu(&mut self, index: u32, mtu: u32) -> Result<(), NlError> {
        self.set_attr("link_set_mtu", index, LinkAttribute::Mtu(mtu))
    }

    /// Sets the hardware address.
    pub fn link_set_mac(&mut self, index: u32, mac: &HardwareAddr) -> Result<(), NlError> {
        self.set_attr("link_set_mac", index, LinkAttribute::Address(mac.0.clone()))
    }

    /// Enslaves the link to `master` (a bond, bridge or VRF index), or frees it with `None`.
    ///
    /// Talos sets the link down before changing its master (docs/talos.md: Applying specs); callers
    /// should too, as the address and route state of a port changes underneath it.
    pub fn link_set_master(&mut self, index: u32, master: Option<u32>) -> Result<(), NlError> {
        // IFLA_MASTER = 0 means "no master".
        self.set_attr("link_set_master", index, LinkAttribute::Controller(master.unwrap_or(0)))
    }

    /// Changes the settings of an existing bond (`RTM_NEWLINK` with `IFLA_LINKINFO`).
    ///
    /// The kernel refuses to change `mode` and `fail_over_mac` while the bond has slaves
    /// (ENOTEMPTY) and `mode` while it is up (EBUSY), even to the same value: set the bond down
    /// and unslave everything first (docs/talos.md: Applying specs), then call this.
    pub fn link_set_bond(&mut self, index: u32, b: &BondMasterSpec) -> Result<(), NlError> {
        let primary = self.primary_index(b)?;
        let info = vec![
            LinkInfo::Kind(InfoKind::Bond),
            LinkInfo::Data(InfoData::Bond(bond::encode(b, primary))),
        ];
        self.set_info("link_set_bond", index, info)
    }

    /// Changes STP and VLAN filtering of an existing bridge. VLAN filtering is only written
    /// when it differs from what the kernel reports (see `bridge_data`).
    pub fn link_set_bridge(&mut self, index: u32, br: &BridgeMasterSpec) -> Result<(), NlError> {
        let current = self.get_link(LinkRef::Index(index))?.and_then(|l| l.bridge);
        let vlan_changes =
            current.is_none_or(|c| c.vlan.filtering_enabled != br.vlan.filtering_enabled);
        let info =
            vec![LinkInfo::Kind(InfoKind::Bridge), LinkInfo::Data(bridge_data(br, vlan_changes))];
        self.set_info("link_set_bridge", index, info)
    }

    /// Deletes a link (a veth takes its peer with it).
    pub fn link_delete(&mut self, index: u32) -> Result<(), NlError> {
        let target = format!("#{index}");
        self.request("link_delete", &target, RouteNetlinkMessage::DelLink(link_message(index)), 0)
            .map(drop)
    }

    fn set_attr(
        &mut self,
        op: &'static str,
        index: u32,
        attr: LinkAttribute,
    ) -> Result<(), NlError> {
        let target = format!("#{index} {attr:?}");
        let mut msg = link_message(index);
        msg.attributes.push(attr);
        self.request(op, &target, RouteNetlinkMessage::SetLink(msg), 0).map(drop)
    }

    fn set_info(
        &mut self,
        op: &'static str,
        index: u32,
        info: Vec<LinkInfo>,
    ) -> Result<(), NlError> {
        let target = format!("#{index}");
        let mut msg = link_message(index);
        msg.attributes.push(LinkAttribute::LinkInfo(info));
        // RTM_SETLINK ignores IFLA_LINKINFO; only RTM_NEWLINK on an existing link reaches the
        // kind's changelink.
        self.request(op, &target, RouteNetlinkMessage::NewLink(msg), 0).map(drop)
    }

    /// Resolves the bond's primary slave name to an index; an absent primary link is NotFound.
    fn primary_index(&mut self, b: &BondMasterSpec) -> Result<Option<u32>, NlError> {
        if b.primary.is_empty() {
            return Ok(None);
        }
        match self.get_link(LinkRef::Name(&b.primary))? {
            Some(l) => Ok(Some(l.index)),
            None => Err(NlError::Kernel {
                op: "bond_primary",
                target: b.primary.clone(),
                errno: nix::errno::Errno::ENODEV,
                message: Some("bond primary link does not exist".into()),
            }),
        }
    }
}
