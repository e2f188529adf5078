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
    /// Its health check answered for the running process (Talos's `healthy`).
    #[serde(default, skip_serializing_if = "is_default")]
    pub healthy: bool,
    /// keelson: why the last health check failed, or the running process is not checked yet.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub health_reason: String,
    /// keelson: how the last process ended (`exited with status 3 after 1.2s`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_exit: String,
    /// The command line it runs (or will run).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
}
