// SPDX-License-Identifier: Apache-2.0
//! `StaticHostConfig`: one `/etc/hosts` entry, named by its address (Talos's
//! `pkg/machinery/config/types/network/static_host.go`).

use std::borrow::Cow;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::{Body, Problems};
use crate::config::locate::YamlPath;
use crate::config::machine::{MachineConfig, TalosKey};
use crate::config::network::ExtraHost;
use crate::config::scalar::{self, Domain, Ip};

/// `kind: StaticHostConfig`.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StaticHostConfig {
    #[serde(default, rename = "apiVersion", skip_serializing)]
    pub(crate) api_version: TalosKey,
    #[serde(default, skip_serializing)]
    pub(crate) kind: TalosKey,
    /// `name`: the address the names map to.
    #[serde(deserialize_with = "scalar::one::<Ip, _>")]
    pub name: IpAddr,
    /// `hostnames`: names for it.
    #[serde(default, deserialize_with = "scalar::list::<Domain, _>")]
    pub hostnames: Vec<String>,
}

impl Body for StaticHostConfig {
    fn name(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Owned(self.name.to_string()))
    }

    fn check(&self, p: &mut Problems) {
        if self.hostnames.is_empty() {
            p.error(YamlPath::keys("hostnames"), "at least one hostname is required");
        }
    }

    fn fold_into(&self, cfg: &mut MachineConfig) -> bool {
        // Talos lists the v1alpha1 entries first, then the documents' (container.go).
        cfg.machine
            .network
            .extra_host_entries
            .push(ExtraHost { ip: self.name, aliases: self.hostnames.clone() });
        true
    }
}
