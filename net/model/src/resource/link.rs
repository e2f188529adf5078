// SPDX-License-Identifier: Apache-2.0
//! Links: [`LinkSpec`], [`LinkStatus`], [`LinkRefresh`], and the link name rules (IDs are link
//! names).

use serde::{Deserialize, Serialize};

use super::layer::{ConfigLayer, LayeredSpec};
use super::link_kinds::{
    BondMasterSpec, BondSlave, BridgeMasterSpec, BridgeSlave, VethSpec, VlanSpec, VrfMasterSpec,
    VrfSlave,
};
use super::nethelpers::{is_default, HardwareAddr, LinkType};
use super::wireguard::{WireguardSpec, WireguardStatus};

/// Bumped by the link spec controller after it changes link state that raises no netlink
/// event (WireGuard configuration), so the link status controller re-reads at once (Talos
/// `LinkRefresh`). ID: [`LINK_REFRESH_WIREGUARD`].
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LinkRefresh {
    /// Counts the changes.
    pub generation: u64,
}

/// The ID of the [`LinkRefresh`] bumped after WireGuard changes.
pub const LINK_REFRESH_WIREGUARD: &str = "wireguard";

/// A link to configure or create.
///
/// Merge is "a non-zero incoming value overrides" per field (docs/talos.md: Merge), so every
/// field's zero value means "not set by this layer".
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LinkSpec {
    /// Link name.
    pub name: String,
    /// Created by us (deleted when the spec goes), as opposed to a physical link.
    #[serde(default, skip_serializing_if = "is_default")]
    pub logical: bool,
    /// Administratively up.
    #[serde(default)]
    pub up: bool,
    /// MTU; 0 leaves it alone.
    #[serde(default, skip_serializing_if = "is_default")]
    pub mtu: u32,
    /// rtnetlink kind (`bond`, `vlan`, `bridge`, `dummy`, `veth`, `wireguard`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Link-layer type.
    #[serde(rename = "type", default, skip_serializing_if = "is_default")]
    pub link_type: LinkType,
    /// Parent link (VLAN).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub parent_name: String,
    /// MAC to set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware_addr: Option<HardwareAddr>,
    /// `IFF_MULTICAST`; only the lowest layer's value survives merge (a Talos quirk kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multicast: Option<bool>,
    /// Bond membership.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bond_slave: Option<BondSlave>,
    /// Bridge membership.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bridge_slave: Option<BridgeSlave>,
    /// VRF membership.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vrf_slave: Option<VrfSlave>,
    /// VLAN settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan: Option<VlanSpec>,
    /// Bond settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bond_master: Option<BondMasterSpec>,
    /// Bridge settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bridge_master: Option<BridgeMasterSpec>,
    /// VRF settings (kind `vrf`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vrf_master: Option<VrfMasterSpec>,
    /// veth settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub veth: Option<VethSpec>,
    /// WireGuard settings (kind `wireguard`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wireguard: Option<WireguardSpec>,
    /// The layer this spec came from.
    pub layer: ConfigLayer,
}

impl LinkSpec {
    /// `{name, up: true}` at a layer: the most common link spec.
    pub fn up(name: &str, layer: ConfigLayer) -> Self {
        Self { name: name.to_owned(), up: true, layer, ..Self::default() }
    }

    /// The natural ID (the link name).
    pub fn id(&self) -> String {
        self.name.clone()
    }

    /// The name of the bond, bridge or VRF this link is enslaved to, if any.
    pub fn master_name(&self) -> Option<&str> {
        self.bond_slave
            .as_ref()
            .map(|s| s.master_name.as_str())
            .or_else(|| self.bridge_slave.as_ref().map(|s| s.master_name.as_str()))
            .or_else(|| self.vrf_slave.as_ref().map(|s| s.master_name.as_str()))
    }
}

/// The longest interface name the kernel accepts (`IFNAMSIZ - 1`).
pub const MAX_LINK_NAME_LEN: usize = 15;

/// The longest alternative name (`ALTIFNAMSIZ - 1`): a reference may be one.
pub const MAX_LINK_REF_LEN: usize = 127;

/// Why `name` cannot name a link, as the kernel's `dev_valid_name` sees it: empty, `.` or
/// `..`, a `/`, `:`, blank or control character, or longer than `max_len` bytes.
pub fn link_name_problem(name: &str, max_len: usize) -> Option<String> {
    if name.is_empty() {
        return Some("empty".into());
    }
    if name == "." || name == ".." {
        return Some("not a link name ('.' and '..' are not)".into());
    }
    if let Some(c) =
        name.chars().find(|c| matches!(c, '/' | ':') || c.is_whitespace() || c.is_control())
    {
        return Some(format!("not a link name (contains {c:?})"));
    }
    if name.len() > max_len {
        return Some(format!("longer than {max_len} bytes"));
    }
    None
}

/// The name of VLAN `vid` on `parent` (docs/talos.md: Kernel command line): `<parent>.<vid>` when
/// that fits in 15 characters, otherwise the first 4 characters of the parent, 6 hex digits of
/// sha256(parent), then `.<vid>`.
pub fn vlan_link_name(parent: &str, vid: u16) -> String {
    if parent.len() + 5 <= MAX_LINK_NAME_LEN {
        return format!("{parent}.{vid}");
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(parent.as_bytes());
    let head: String = parent.chars().take(4).collect();
    format!("{head}{:02x}{:02x}{:02x}.{vid}", digest[0], digest[1], digest[2])
}

/// A link as the kernel reports it.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LinkStatus {
    /// Interface index.
    pub index: u32,
    /// Link-layer type.
    #[serde(rename = "type")]
    pub link_type: LinkType,
    /// `IFLA_LINK` (the parent of a VLAN).
    #[serde(skip_serializing_if = "is_default")]
    pub link_index: u32,
    /// Interface flags (`UP,BROADCAST,...`).
    pub flags: String,
    /// Current MAC.
    pub hardware_addr: HardwareAddr,
    /// Permanent MAC (ethtool), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permanent_addr: Option<HardwareAddr>,
    /// Broadcast address.
    pub broadcast_addr: HardwareAddr,
    /// MTU.
    pub mtu: u32,
    /// Master (bond/bridge/vrf) index.
    #[serde(skip_serializing_if = "is_default")]
    pub master_index: u32,
    /// `IFLA_OPERSTATE` name (`up`, `down`, `unknown`, ...).
    pub operational_state: String,
    /// rtnetlink kind (empty for physical links).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Slave kind (`bond`, `bridge`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub slave_kind: String,
    /// Carrier.
    pub link_state: bool,
    /// `IFLA_IFALIAS`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub alias: String,
    /// Alternative names.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub alt_names: Vec<String>,
    /// Driver (sysfs).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub driver: String,
    /// Bus path: the PCI address (`0000:00:03.0`, as ethtool's bus-info), else the device's
    /// sysfs name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub bus_path: String,
    /// PCI vendor and device ID (`8086:100E`), for PCI devices.
    #[serde(rename = "pciID", default, skip_serializing_if = "String::is_empty")]
    pub pci_id: String,
    /// VLAN settings, for VLAN links.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vlan: Option<VlanSpec>,
    /// Bond settings, for bonds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bond_master: Option<BondMasterSpec>,
    /// Bridge settings, for bridges.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bridge_master: Option<BridgeMasterSpec>,
    /// VRF table, for `kind == "vrf"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vrf_master: Option<VrfMasterSpec>,
    /// WireGuard device and peer state, for WireGuard links.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wireguard: Option<WireguardStatus>,
}

impl LinkStatus {
    /// Ethernet without a kind: a real NIC, not loopback, WireGuard, bond, VLAN, veth...
    /// (docs/talos.md: Defaults).
    pub fn physical(&self) -> bool {
        self.link_type == LinkType::ETHER && self.kind.is_empty()
    }

    /// Administratively up: `IFF_UP` is among the `flags` names.
    pub fn is_up(&self) -> bool {
        self.has_flag("UP")
    }

    /// Whether `name` (`UP`, `DORMANT`, ...) is among the `flags` names.
    pub fn has_flag(&self, name: &str) -> bool {
        self.flags.split(',').any(|f| f.trim() == name)
    }
}

impl LayeredSpec for LinkSpec {
    fn natural_id(&self) -> String {
        self.id()
    }
    fn layer(&self) -> ConfigLayer {
        self.layer
    }
}
