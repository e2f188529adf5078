// SPDX-License-Identifier: Apache-2.0
//! The machine configuration (placeholder: the parser lands with the config work).

use serde::Serialize;

/// A parsed, validated machine configuration (Talos v1alpha1 shape).
#[derive(Clone, PartialEq, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfig {
    /// `version`.
    pub version: String,
}
