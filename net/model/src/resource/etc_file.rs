// SPDX-License-Identifier: Apache-2.0
//! Files the runtime wrote: [`EtcFileStatus`].

use serde::{Deserialize, Serialize};

/// A file the runtime wrote (ID: its name, e.g. `resolv.conf`).
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EtcFileStatus {
    /// Path under the root.
    pub path: String,
    /// Size in bytes of what was written.
    pub size: usize,
    /// Why the last writes failed, once readiness stopped waiting for the file.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
}
