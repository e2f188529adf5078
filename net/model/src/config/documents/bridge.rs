// SPDX-License-Identifier: Apache-2.0
//! `BridgeConfig`: a bridge over a set of links (Talos's
//! `pkg/machinery/config/types/network/bridge.go`). An absent `stp.enabled` is off here: the
//! typed form has no default of its own and Talos's controller reads it as false (the
//! v1alpha1 form differs; docs/talos.md).

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::link_common::{check_name, check_refs, legacy_link_conflict, link_document};
use super::link_names::LinkNames;
use super::{Body, Legacy, Problems, LINK_KINDS};
use crate::config::locate::YamlPath;
use crate::config::machine::TalosKey;
use crate::config::specs::Specs;
use crate::resource::{
    BridgeMasterSpec, BridgeSlave, BridgeVlanSpec, HardwareAddr, LinkType, StpSpec,
};

/// `stp`.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BridgeStpConfig {
    /// `enabled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// `vlan`.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BridgeVlanConfig {
    /// `filtering`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filtering: Option<bool>,
}

fn is_empty<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

link_document! {
    /// `kind: BridgeConfig`.
    #[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct BridgeConfig {
        #[serde(default, rename = "apiVersion", skip_serializing)]
        pub(crate) api_version: TalosKey,
        #[serde(default, skip_serializing)]
        pub(crate) kind: TalosKey,
        /// `name`: the bridge to create.
        pub name: String,
        /// `hardwareAddr`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub hardware_addr: Option<HardwareAddr>,
        /// `links`: the ports, by name, alias or altname.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub links: Vec<String>,
        /// `stp`.
        #[serde(default, skip_serializing_if = "is_empty")]
        pub stp: BridgeStpConfig,
        /// `vlan`.
        #[serde(default, skip_serializing_if = "is_empty")]
        pub vlan: BridgeVlanConfig,
    }
}

impl Body for BridgeConfig {
    fn name(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(&self.name))
    }

    fn conflicts_with(&self) -> &'static [&'static str] {
        LINK_KINDS
    }

    fn check(&self, p: &mut Problems) {
        check_name(&self.name, true, p);
        check_refs("links", &self.links, p);
        if self.links.contains(&self.name) {
            p.error(YamlPath::keys("links"), "a bridge cannot be its own port");
        }
        self.common().check(p);
    }

    fn add_specs(&self, out: &mut Specs, links: &LinkNames<'_, '_>) {
        let common = self.common();
        let mut link = common.logical_link(&self.name, "bridge", LinkType::ETHER);
        link.hardware_addr = self.hardware_addr.clone();
        link.bridge_master = Some(BridgeMasterSpec {
            stp: StpSpec { enabled: self.stp.enabled.unwrap_or(false) },
            vlan: BridgeVlanSpec { filtering_enabled: self.vlan.filtering.unwrap_or(false) },
        });
        out.link_settings(link);
        for port in &self.links {
            let port = links.resolve(port);
            if port == self.name {
                continue;
            }
            out.member(&port, |spec| {
                spec.bridge_slave = Some(BridgeSlave { master_name: self.name.clone() });
            });
        }
        common.add_addresses_and_routes(&self.name, out);
    }

    fn legacy_conflict(&self, legacy: &Legacy<'_>) -> Option<(&'static str, String)> {
        legacy_link_conflict(&self.name, legacy)
    }

    fn configures_links(&self) -> bool {
        true
    }
}
