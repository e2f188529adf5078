// SPDX-License-Identifier: Apache-2.0
//! The machine configuration (placeholder: the parser lands with the config work).

use serde::Serialize;

/// A parsed, validated machine configuration (Talos v1alpha1 shape).
#[derive(Clone, PartialEq, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfig {
    /// `version`.
    pub version: String,
    /// Placeholder.
    pub warnings: Vec<String>,
}

impl MachineConfig {
    /// Placeholder.
    pub fn ignored_interfaces(&self, _links: &crate::resource::LinkView) -> Vec<String> {
        Vec::new()
    }
    /// Placeholder.
    pub fn mentioned_interfaces(&self, _links: &crate::resource::LinkView) -> Vec<String> {
        Vec::new()
    }
}

/// Placeholder.
pub fn to_specs(
    _cfg: &MachineConfig,
    _links: &crate::resource::LinkView,
) -> crate::resource::LayerSpecs {
    crate::resource::LayerSpecs::default()
}

/// Placeholder.
#[derive(Debug, thiserror::Error)]
#[error("config parsing is not built yet")]
pub struct ConfigError;

/// Placeholder.
pub fn parse(_yaml: &str) -> Result<MachineConfig, ConfigError> {
    Err(ConfigError)
}
