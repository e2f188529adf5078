// SPDX-License-Identifier: Apache-2.0
//! Addresses: [`AddressSpec`], [`AddressStatus`] and their ID, [`address_id`].

use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use super::layer::{ConfigLayer, LayeredSpec};
use super::nethelpers::{is_default, AddressFlags, Family, Scope};

/// An address to assign to a link.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AddressSpec {
    /// The address with its prefix length (host bits kept).
    pub address: IpNet,
    /// The link name (or alias) it belongs to.
    pub link_name: String,
    /// Address family.
    pub family: Family,
    /// Address scope.
    pub scope: Scope,
    /// Managed `IFA_F_*` flags.
    pub flags: AddressFlags,
    /// Send one gratuitous ARP after adding (IPv4 only).
    #[serde(default, skip_serializing_if = "is_default")]
    pub announce_with_arp: bool,
    /// `IFA_RT_PRIORITY`: the metric of the kernel's prefix route.
    #[serde(default, skip_serializing_if = "is_default")]
    pub priority: u32,
    /// Valid lifetime in seconds; `None` is forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_lifetime: Option<u32>,
    /// Preferred lifetime in seconds; `None` is forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_lifetime: Option<u32>,
    /// The layer this spec came from.
    pub layer: ConfigLayer,
}

impl AddressSpec {
    /// A permanent global address, the shape every config source starts from.
    pub fn new(link: &str, address: IpNet, layer: ConfigLayer) -> Self {
        Self {
            family: Family::of(&address.addr()),
            address,
            link_name: link.to_owned(),
            scope: Scope::GLOBAL,
            flags: AddressFlags::PERMANENT,
            announce_with_arp: false,
            priority: 0,
            valid_lifetime: None,
            preferred_lifetime: None,
            layer,
        }
    }

    /// The natural ID.
    pub fn id(&self) -> String {
        address_id(&self.link_name, &self.address)
    }
}

/// `<link>/<addr>/<bits>`, e.g. `eth0/10.0.0.5/24`.
pub fn address_id(link: &str, address: &IpNet) -> String {
    let mut id = super::id_text::IdText::with_capacity(link.len() + 20);
    id.push_str(link);
    id.push_ascii(b'/');
    id.push_net(address);
    id.finish()
}

/// An address as the kernel reports it. Ordered field by field, so that an operation on it
/// can be a map key without being formatted.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AddressStatus {
    /// `IFA_ADDRESS` with the prefix length.
    pub address: IpNet,
    /// `IFA_LOCAL`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<IpAddr>,
    /// `IFA_BROADCAST`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broadcast: Option<IpAddr>,
    /// `IFA_ANYCAST`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anycast: Option<IpAddr>,
    /// `IFA_MULTICAST`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multicast: Option<IpAddr>,
    /// Interface index.
    pub link_index: u32,
    /// Interface name.
    pub link_name: String,
    /// Address family.
    pub family: Family,
    /// Scope.
    pub scope: Scope,
    /// Flags (`IFA_FLAGS`).
    pub flags: AddressFlags,
    /// `IFA_RT_PRIORITY`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub priority: u32,
}

impl AddressStatus {
    /// The natural ID.
    pub fn id(&self) -> String {
        address_id(&self.link_name, &self.address)
    }
}

impl LayeredSpec for AddressSpec {
    fn natural_id(&self) -> String {
        self.id()
    }
    fn layer(&self) -> ConfigLayer {
        self.layer
    }
}
