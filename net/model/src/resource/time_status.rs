// SPDX-License-Identifier: Apache-2.0
//! Time sync state: [`TimeStatus`], a singleton ([`TIME_STATUS_ID`]) in `runtime`, as Talos
//! has it (`talosctl get timestatus`: `synced`, `epoch`, `syncDisabled`), with keelson's
//! measurements beside.

use serde::{Deserialize, Serialize};

use super::nethelpers::is_default;

/// The ID of the time status (Talos's `node`).
pub const TIME_STATUS_ID: &str = "node";

/// Whether the clock is synced, and what the NTP client measured.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TimeStatus {
    /// The clock is synchronised to a selected server (measuring only: it is within the step
    /// threshold of it).
    pub synced: bool,
    /// Clock steps so far (Talos bumps its epoch when the clock jumps).
    pub epoch: u32,
    /// `machine.time.disabled`.
    pub sync_disabled: bool,
    /// keelson: `adjust` (the clock is stepped and slewed) or `measure` (only observed).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mode: String,
    /// keelson: the selected server.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub server: String,
    /// keelson: server clock minus local clock at the last update, in nanoseconds.
    #[serde(default, skip_serializing_if = "is_default")]
    pub offset_ns: i64,
    /// keelson: the selected server's round trip, in nanoseconds.
    #[serde(default, skip_serializing_if = "is_default")]
    pub round_trip_ns: i64,
    /// keelson: the selected server's stratum.
    #[serde(default, skip_serializing_if = "is_default")]
    pub stratum: u8,
    /// keelson: the last clock update, RFC 3339.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_sync: String,
    /// keelson: why not synced (`no servers`, `unreachable`, `rejected as falsetickers...`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// keelson: servers the last selection rejected.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub falsetickers: Vec<String>,
    /// keelson: the servers in use (addresses; names that could not be used are left out).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub servers: Vec<String>,
    /// keelson: the selected server's replies are authenticated with NTS (RFC 8915).
    #[serde(default, rename = "nts", skip_serializing_if = "is_default")]
    pub nts: bool,
    /// keelson: NTS servers not in use and why (`name: reason`): a failed key exchange (a
    /// refused certificate, a refusal, no answer) or replies that fail authentication.
    #[serde(default, rename = "ntsErrors", skip_serializing_if = "Vec::is_empty")]
    pub nts_errors: Vec<String>,
    /// keelson: `machine.time.bootTimeout` passed unsynced; what waited on the clock started.
    #[serde(default, skip_serializing_if = "is_default")]
    pub boot_timeout_passed: bool,
}

impl TimeStatus {
    /// What waits on trusted time (the kubelet) may start: synced, sync disabled, or the boot
    /// timeout passed.
    pub fn may_start(&self) -> bool {
        self.synced || self.sync_disabled || self.boot_timeout_passed
    }
}
