// SPDX-License-Identifier: Apache-2.0
//! The boundary between pure planning and the machine.
//!
//! Spec controllers observe the kernel through [`Host`] dumps (in our own status types), plan
//! with pure functions, and apply the plan as typed operations. The real implementation talks
//! rtnetlink and syscalls (`crate::netlink`, behind the adapter in `host_kernel`); tests use
//! [`fake::FakeHost`], which models just enough of the kernel to check sequencing.

use std::cell::RefCell;
use std::rc::Rc;

use crate::resource::{
    AddressStatus, BondMasterSpec, BridgeMasterSpec, Family, HardwareAddr, LinkStatus, RouteStatus,
    RoutingRuleStatus, RoutingTable, VlanSpec,
};
use crate::runtime::{ControllerError, ErrorKind};

/// A failed host operation, already categorized (errno is mapped once, in the adapter).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{op}: {message}")]
pub struct HostError {
    /// What was attempted (`add route inet4/10.0.0.1//1024`).
    pub op: String,
    /// The kernel's reason.
    pub message: String,
    /// Category.
    pub kind: HostErrorKind,
}

/// Category of a [`HostError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostErrorKind {
    /// Retry later (busy, overrun).
    Transient,
    /// The request is wrong (unreachable gateway, bad value).
    Invalid,
    /// The kernel lacks the feature (module missing).
    Unsupported,
    /// The object does not exist.
    NotFound,
    /// The object already exists.
    Exists,
}

impl From<HostError> for ControllerError {
    fn from(e: HostError) -> Self {
        let kind = match e.kind {
            HostErrorKind::Transient | HostErrorKind::NotFound | HostErrorKind::Exists => {
                ErrorKind::Transient
            }
            HostErrorKind::Invalid => ErrorKind::Invalid,
            HostErrorKind::Unsupported => ErrorKind::Unsupported,
        };
        ControllerError::Other { kind, message: e.to_string() }
    }
}

/// A logical link to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NewLinkKind {
    /// `dummy`.
    Dummy,
    /// `veth` with its peer's name.
    Veth {
        /// Peer name.
        peer: String,
    },
    /// `vlan` on a parent.
    Vlan {
        /// Parent ifindex.
        parent: u32,
        /// VLAN settings.
        vlan: VlanSpec,
    },
    /// `bond`.
    Bond(BondMasterSpec),
    /// `bridge`.
    Bridge(BridgeMasterSpec),
    /// `wireguard` (configured afterwards through [`Host::wireguard_set`]).
    Wireguard,
    /// `vrf` bound to a routing table.
    Vrf {
        /// The table.
        table: u32,
    },
}

/// A link operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkOp {
    /// Create a logical link.
    Create {
        /// Name.
        name: String,
        /// Kind and its data.
        kind: NewLinkKind,
        /// MTU, if set.
        mtu: Option<u32>,
        /// MAC, if set.
        mac: Option<HardwareAddr>,
    },
    /// Delete a link.
    Delete {
        /// Index.
        index: u32,
        /// Name (for messages).
        name: String,
    },
    /// Set administrative state.
    SetUp {
        /// Index.
        index: u32,
        /// Up or down.
        up: bool,
    },
    /// Set the MTU.
    SetMtu {
        /// Index.
        index: u32,
        /// MTU.
        mtu: u32,
    },
    /// Set the MAC.
    SetMac {
        /// Index.
        index: u32,
        /// MAC.
        mac: HardwareAddr,
    },
    /// Enslave (or release, with `None`).
    SetMaster {
        /// Index.
        index: u32,
        /// Master index.
        master: Option<u32>,
    },
    /// Change bond settings (the bond must be down with no slaves).
    SetBond {
        /// Index.
        index: u32,
        /// Settings.
        bond: BondMasterSpec,
    },
    /// Change bridge settings.
    SetBridge {
        /// Index.
        index: u32,
        /// Settings.
        bridge: BridgeMasterSpec,
    },
}

/// An address to add, replace or delete; `status` carries every attribute in kernel form.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AddressChange {
    /// The address, with `link_index` resolved.
    pub address: AddressStatus,
    /// Valid lifetime in seconds (`None`: forever).
    pub valid_lifetime: Option<u32>,
    /// Preferred lifetime in seconds (`None`: forever).
    pub preferred_lifetime: Option<u32>,
}

/// An address operation.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AddressOp {
    /// `RTM_NEWADDR` with CREATE|EXCL.
    Add(AddressChange),
    /// `RTM_NEWADDR` with CREATE|REPLACE: flags, priority and lifetimes change in place.
    Replace(AddressChange),
    /// `RTM_DELADDR`.
    Delete(AddressStatus),
}

/// A route operation; routes are in kernel form with `out_link_index` resolved.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum RouteOp {
    /// `RTM_NEWROUTE` with CREATE|EXCL.
    Add(RouteStatus),
    /// `RTM_DELROUTE`.
    Delete(RouteStatus),
}

/// A routing rule operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleOp {
    /// `RTM_NEWRULE`.
    Add(RoutingRuleStatus),
    /// `RTM_DELRULE`.
    Delete(RoutingRuleStatus),
}

/// The machine as the controllers see it.
pub trait Host {
    /// Every link, `(name, status)`.
    fn links(&mut self) -> Result<Vec<(String, LinkStatus)>, HostError>;
    /// Every address.
    fn addresses(&mut self) -> Result<Vec<AddressStatus>, HostError>;
    /// Every route, all tables.
    fn routes(&mut self) -> Result<Vec<RouteStatus>, HostError>;
    /// The routes of these (family, table) pairs only, in that order: what a controller
    /// managing routes there needs, without reading (and decoding) the rest, such as the
    /// local table's entry for every address.
    fn routes_in(
        &mut self,
        tables: &[(Family, RoutingTable)],
    ) -> Result<Vec<RouteStatus>, HostError> {
        let all = self.routes()?;
        Ok(tables
            .iter()
            .flat_map(|(family, table)| {
                all.iter().filter(move |r| r.family == *family && r.table == *table).cloned()
            })
            .collect())
    }
    /// Every routing rule.
    fn rules(&mut self) -> Result<Vec<RoutingRuleStatus>, HostError>;
    /// Apply a link operation.
    fn link(&mut self, op: &LinkOp) -> Result<(), HostError>;
    /// Apply an address operation.
    fn address(&mut self, op: &AddressOp) -> Result<(), HostError>;
    /// Apply a route operation.
    fn route(&mut self, op: &RouteOp) -> Result<(), HostError>;
    /// Apply independent address operations (no two on one object), one result each in
    /// order; the kernel adapter sends them many at a time.
    fn addresses_apply(&mut self, ops: &[&AddressOp]) -> Vec<Result<(), HostError>> {
        ops.iter().map(|op| self.address(op)).collect()
    }
    /// Apply independent route operations, one result each in order.
    fn routes_apply(&mut self, ops: &[&RouteOp]) -> Vec<Result<(), HostError>> {
        ops.iter().map(|op| self.route(op)).collect()
    }
    /// Apply a rule operation.
    fn rule(&mut self, op: &RuleOp) -> Result<(), HostError>;
    /// `sethostname` + `setdomainname`.
    fn set_hostname(&mut self, hostname: &str, domainname: &str) -> Result<(), HostError>;
    /// The WireGuard device `name` (`WG_CMD_GET_DEVICE`).
    fn wireguard(&mut self, name: &str) -> Result<WgDevice, HostError>;
    /// Change the WireGuard device `name` (`WG_CMD_SET_DEVICE`).
    fn wireguard_set(&mut self, name: &str, update: &WgUpdate) -> Result<(), HostError>;
    /// Write a file under the host's root (atomically: temp file + rename), only if its
    /// content differs. Returns whether it was written.
    fn write_file(&mut self, path: &str, content: &str, mode: u32) -> Result<bool, HostError>;
}

/// The host, shared by the controllers of one runtime (single-threaded).
pub type SharedHost = Rc<RefCell<dyn Host>>;

pub mod fake;
pub mod kernel;
pub mod sysfs_net;
mod wireguard;

pub use wireguard::{WgDevice, WgPeer, WgPeerUpdate, WgUpdate, REJECT_AFTER_TIME};
