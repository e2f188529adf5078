// SPDX-License-Identifier: Apache-2.0
//! `HostnameConfig`: a static hostname, or how one is generated (Talos's
//! `pkg/machinery/config/types/network/hostname.go`).

use serde::{Deserialize, Serialize};

use super::{Body, Legacy, Problems};
use crate::config::locate::YamlPath;
use crate::config::machine::{MachineConfig, TalosKey};
use crate::config::scalar::{self, Hostname};

/// How a hostname is made up when nothing sets one (docs/talos.md: Defaults).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AutoHostname {
    /// `talos-` and the node's default address (the v1alpha1 default).
    #[default]
    Addr,
    /// `talos-xxx-yyy` from the node's identity: stable across address changes.
    Stable,
    /// None: the hostname comes from DHCP, the platform or the command line.
    Off,
}

/// `kind: HostnameConfig`.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HostnameConfig {
    #[serde(default, rename = "apiVersion", skip_serializing)]
    pub(crate) api_version: TalosKey,
    #[serde(default, skip_serializing)]
    pub(crate) kind: TalosKey,
    /// `auto`: `stable` or `off` (`addr` is the v1alpha1 default and not accepted here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto: Option<AutoHostname>,
    /// `hostname`: a static name, possibly fully qualified.
    #[serde(
        default,
        deserialize_with = "scalar::opt::<Hostname, _>",
        skip_serializing_if = "Option::is_none"
    )]
    pub hostname: Option<String>,
}

impl Body for HostnameConfig {
    fn check(&self, p: &mut Problems) {
        let root = YamlPath::default();
        match (self.auto, &self.hostname) {
            (None, None) => p.error(root, "either auto or hostname must be set"),
            (Some(AutoHostname::Addr), _) => p.error(
                root.key("auto"),
                "auto: addr is not accepted in a HostnameConfig document (stable or off)",
            ),
            (Some(AutoHostname::Stable), Some(_)) => {
                p.error(root.key("hostname"), "auto and hostname cannot be set together")
            }
            _ => {}
        }
    }

    fn legacy_conflict(&self, legacy: &Legacy<'_>) -> Option<(&'static str, String)> {
        legacy.cfg.machine.network.hostname.as_ref().map(|_| {
            ("machine.network.hostname", "the static hostname is set in both places".to_owned())
        })
    }

    fn fold_into(&self, cfg: &mut MachineConfig) -> bool {
        let network = &mut cfg.machine.network;
        network.hostname.clone_from(&self.hostname);
        // A document with only a hostname means `off` (Talos: the static name is all there is).
        network.auto_hostname = self.auto.unwrap_or(AutoHostname::Off);
        true
    }
}
