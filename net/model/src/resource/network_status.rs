// SPDX-License-Identifier: Apache-2.0
//! Network readiness: [`NetworkStatus`] (docs/talos.md: Statuses and readiness).

use serde::{Deserialize, Serialize};

/// The ID of the network status resource.
pub const NETWORK_STATUS_ID: &str = "status";

/// Readiness of the network (docs/talos.md: Statuses and readiness).
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkStatus {
    /// NodeAddress `current` is non-empty.
    pub address_ready: bool,
    /// A default route exists (in any table).
    pub connectivity_ready: bool,
    /// A hostname is applied.
    pub hostname_ready: bool,
    /// `/etc/hosts` and `/etc/resolv.conf` are written.
    pub etc_files_ready: bool,
    /// While the address or connectivity is not ready: what the operators say they wait on
    /// (`dhcp4/eth0: no offer`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting: Vec<String>,
}
