// SPDX-License-Identifier: Apache-2.0
//! [`NftPlan`]: what KubeSpan wants in nftables (docs/talos.md: KubeSpan), as plain data.
//!
//! The plan is pure: it validates its inputs, derives the MSS clamps and folds the target
//! prefixes into interval-set ranges. [`super::compile`] turns it into netlink messages and
//! [`super::apply`] sends them.

use ipnet::{Ipv4Net, Ipv6Net};

use super::interval::{ranges_v4, ranges_v6, Range};

/// Default table name (family `inet`), as Talos names it in its KubeSpan documentation.
pub const DEFAULT_TABLE: &str = "talos_kubespan";
/// Default KubeSpan link MTU (docs/talos.md: KubeSpan).
pub const DEFAULT_MTU: u32 = 1420;
/// Smallest MTU KubeSpan accepts (docs/talos.md: KubeSpan), which is also IPv6's minimum.
pub const MIN_MTU: u32 = 1280;

/// Bytes between the link MTU and the TCP payload for IPv4: 20 IP + 20 TCP + 12 option bytes
/// (the timestamp option most stacks send), docs/talos.md: KubeSpan
const CLAMP_OVERHEAD_V4: u32 = 52;
/// The same for IPv6: 40 IP + 20 TCP + 12 option bytes.
const CLAMP_OVERHEAD_V6: u32 = 72;
/// Longest table name the kernel accepts (`NFT_NAME_MAXLEN` 256, including the NUL).
const MAX_NAME: usize = 255;

/// The nftables state KubeSpan wants: one `inet` table with two chains, two interval sets and
/// the marking and MSS clamp rules.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct NftPlan {
    /// Table name (family `inet`).
    pub table: String,
    /// KubeSpan link MTU; the MSS clamps derive from it.
    pub mtu: u32,
    /// IPv4 destinations to mark into KubeSpan, in any order, overlaps allowed.
    pub targets_v4: Vec<Ipv4Net>,
    /// IPv6 destinations to mark into KubeSpan, in any order, overlaps allowed.
    pub targets_v6: Vec<Ipv6Net>,
}

impl Default for NftPlan {
    fn default() -> Self {
        Self {
            table: DEFAULT_TABLE.to_owned(),
            mtu: DEFAULT_MTU,
            targets_v4: Vec::new(),
            targets_v6: Vec::new(),
        }
    }
}

/// A plan that cannot be programmed.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The table name is empty, too long or contains a NUL byte.
    #[error("nftables table name {name:?}: must be 1 to 255 bytes without NUL")]
    TableName {
        /// The rejected name.
        name: String,
    },
    /// The MTU is below 1280 or so large that the MSS clamp would not fit in 16 bits.
    #[error("kubespan mtu {mtu}: must be between 1280 and 65587")]
    Mtu {
        /// The rejected MTU.
        mtu: u32,
    },
}

/// A validated plan in the form the compiler needs: the structure (which decides whether the
/// table must be rebuilt) and the normalised target ranges (which only need set updates).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Resolved {
    /// What the rules depend on.
    pub shape: Shape,
    /// The sets' contents.
    pub targets: Targets,
}

/// Everything about the table except the set contents. A change here rebuilds the table.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Shape {
    /// Table name.
    pub table: String,
    /// MSS clamp for IPv4 SYNs.
    pub clamp_v4: u16,
    /// MSS clamp for IPv6 SYNs.
    pub clamp_v6: u16,
}

/// The sets' contents: sorted, disjoint, non-adjacent ranges per family.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Targets {
    /// Ranges of `kubespan_targets_ipv4`.
    pub v4: Vec<Range>,
    /// Ranges of `kubespan_targets_ipv6`.
    pub v6: Vec<Range>,
}

/// MSS clamp for IPv4 at this MTU (`MTU − 52`), `None` when it does not fit.
pub fn clamp_v4(mtu: u32) -> Option<u16> {
    clamp(mtu, CLAMP_OVERHEAD_V4)
}

/// MSS clamp for IPv6 at this MTU (`MTU − 72`), `None` when it does not fit.
pub fn clamp_v6(mtu: u32) -> Option<u16> {
    clamp(mtu, CLAMP_OVERHEAD_V6)
}

fn clamp(mtu: u32, overhead: u32) -> Option<u16> {
    if mtu < MIN_MTU {
        return None;
    }
    u16::try_from(mtu.checked_sub(overhead)?).ok()
}

impl NftPlan {
    /// Validates the plan and normalises its targets.
    pub fn resolve(&self) -> Result<Resolved, PlanError> {
        if self.table.is_empty() || self.table.len() > MAX_NAME || self.table.contains('\0') {
            return Err(PlanError::TableName { name: self.table.clone() });
        }
        let (Some(clamp_v4), Some(clamp_v6)) = (clamp_v4(self.mtu), clamp_v6(self.mtu)) else {
            return Err(PlanError::Mtu { mtu: self.mtu });
        };
        Ok(Resolved {
            shape: Shape { table: self.table.clone(), clamp_v4, clamp_v6 },
            targets: Targets { v4: ranges_v4(&self.targets_v4), v6: ranges_v6(&self.targets_v6) },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clamp_arithmetic() {
        assert_eq!((clamp_v4(1420), clamp_v6(1420)), (Some(1368), Some(1348)));
        assert_eq!((clamp_v4(1280), clamp_v6(1280)), (Some(1228), Some(1208)));
        assert_eq!((clamp_v4(1500), clamp_v6(1500)), (Some(1448), Some(1428)));
        // The largest MTU whose IPv4 clamp still fits in the 16-bit MSS field.
        assert_eq!(clamp_v4(65587), Some(u16::MAX));
        assert_eq!(clamp_v4(65588), None);
        assert_eq!(clamp_v4(1279), None);
        assert_eq!(clamp_v6(0), None);
    }

    #[test]
    fn resolve_validates() {
        let ok = NftPlan {
            targets_v4: vec!["10.0.0.0/24".parse().unwrap(), "10.0.1.0/24".parse().unwrap()],
            ..NftPlan::default()
        };
        let r = ok.resolve().unwrap();
        assert_eq!(
            r.shape,
            Shape { table: "talos_kubespan".into(), clamp_v4: 1368, clamp_v6: 1348 }
        );
        assert_eq!(r.targets.v4.len(), 1);
        assert!(r.targets.v6.is_empty());

        let bad = NftPlan { mtu: 1000, ..NftPlan::default() };
        assert_eq!(bad.resolve(), Err(PlanError::Mtu { mtu: 1000 }));
        assert_eq!(
            bad.resolve().unwrap_err().to_string(),
            "kubespan mtu 1000: must be between 1280 and 65587"
        );
        for name in ["", "a\0b", &"x".repeat(256)] {
            let p = NftPlan { table: name.to_owned(), ..NftPlan::default() };
            assert!(matches!(p.resolve(), Err(PlanError::TableName { .. })), "{name:?}");
        }
        let long = NftPlan { table: "x".repeat(255), ..NftPlan::default() };
        assert!(long.resolve().is_ok());
    }
}
