// SPDX-License-Identifier: Apache-2.0
//! Node addresses: [`NodeAddress`] (docs/talos.md: Statuses and readiness).

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

/// A list of node addresses (`default`, `current`, `routed`, `accumulative`; docs/talos.md:
/// Statuses and readiness).
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeAddress {
    /// Addresses with prefix lengths.
    pub addresses: Vec<IpNet>,
}
