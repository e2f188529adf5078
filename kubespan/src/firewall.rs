// SPDX-License-Identifier: Apache-2.0
//! The boundary to the nftables table (seed `001_…`): what the manager wants marked, and the
//! trait the real adapter (`crate::nft`) and the test fake implement.

use ipnet::{Ipv4Net, Ipv6Net};

/// What the firewall marks into KubeSpan: the targets and the MTU the MSS clamp is derived
/// from. Equal plans mean nothing to do.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FirewallPlan {
    /// The `inet` table to own.
    pub table: String,
    /// The KubeSpan link MTU.
    pub mtu: u32,
    /// IPv4 prefixes marked 0x40 (aggregated).
    pub targets_v4: Vec<Ipv4Net>,
    /// IPv6 prefixes marked 0x40 (aggregated).
    pub targets_v6: Vec<Ipv6Net>,
}

/// Why the firewall could not be programmed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("nftables: {0}")]
pub struct FirewallError(pub String);

/// Programs our table, and only ours.
pub trait Firewall {
    /// Make the table match `plan` (one atomic transaction).
    fn apply(&mut self, plan: &FirewallPlan) -> Result<(), FirewallError>;
    /// Delete the table; no table is not an error.
    fn remove(&mut self) -> Result<(), FirewallError>;
}

/// A firewall that records what it was asked, for controller tests.
#[derive(Debug, Default)]
pub struct FakeFirewall {
    /// The plan in force (`None`: no table).
    pub table: Option<FirewallPlan>,
    /// Every call, in order (`apply 3 v4 1 v6`, `remove`).
    pub log: Vec<String>,
}

impl Firewall for FakeFirewall {
    fn apply(&mut self, plan: &FirewallPlan) -> Result<(), FirewallError> {
        self.log.push(format!("apply {} v4 {} v6", plan.targets_v4.len(), plan.targets_v6.len()));
        self.table = Some(plan.clone());
        Ok(())
    }

    fn remove(&mut self) -> Result<(), FirewallError> {
        self.log.push("remove".into());
        self.table = None;
        Ok(())
    }
}

impl<F: Firewall + ?Sized> Firewall for std::rc::Rc<std::cell::RefCell<F>> {
    fn apply(&mut self, plan: &FirewallPlan) -> Result<(), FirewallError> {
        self.borrow_mut().apply(plan)
    }

    fn remove(&mut self) -> Result<(), FirewallError> {
        self.borrow_mut().remove()
    }
}
