// SPDX-License-Identifier: Apache-2.0
//! Supervised services: [`ServiceStatus`].

use serde::{Deserialize, Serialize};

use super::nethelpers::is_default;

/// A supervised service (ID: its name, e.g. `kubelet`).
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceStatus {
    /// `stopped`, `waiting`, `running`, `stopping`.
    pub state: String,
    /// Process ID while running.
    #[serde(default, skip_serializing_if = "is_default")]
    pub pid: i32,
    /// Starts so far.
    pub starts: u32,
    /// The command line it runs (or will run).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
}
