// SPDX-License-Identifier: Apache-2.0
//! The boundary to the nftables table: the trait the real adapter (`crate::nft`) and the test
//! fake implement. What the manager wants is an [`NftPlan`], the one plan type from the
//! manager down to the netlink encoder.

pub use crate::nft::{NftError as FirewallError, NftPlan};

/// Programs our table, and only ours.
pub trait Firewall {
    /// Make the table match `plan` (one atomic transaction).
    fn apply(&mut self, plan: &NftPlan) -> Result<(), FirewallError>;
    /// Delete the table; no table is not an error.
    fn remove(&mut self) -> Result<(), FirewallError>;
}

/// A firewall that records what it was asked, for controller tests.
#[derive(Debug, Default)]
pub struct FakeFirewall {
    /// The plan in force (`None`: no table).
    pub table: Option<NftPlan>,
    /// Every call, in order (`apply 3 v4 1 v6`, `remove`).
    pub log: Vec<String>,
}

impl Firewall for FakeFirewall {
    fn apply(&mut self, plan: &NftPlan) -> Result<(), FirewallError> {
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
    fn apply(&mut self, plan: &NftPlan) -> Result<(), FirewallError> {
        self.borrow_mut().apply(plan)
    }

    fn remove(&mut self) -> Result<(), FirewallError> {
        self.borrow_mut().remove()
    }
}
