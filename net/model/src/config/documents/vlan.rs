// SPDX-License-Identifier: Apache-2.0
//! `VLANConfig`: a VLAN link on a parent link (Talos's
//! `pkg/machinery/config/types/network/vlan.go`). Unlike the v1alpha1 form, the document
//! names the VLAN link itself.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::link_common::{check_name, legacy_link_conflict, link_document};
use super::link_names::LinkNames;
use super::{Body, Legacy, Problems, LINK_KINDS};
use crate::config::locate::YamlPath;
use crate::config::machine::TalosKey;
use crate::config::specs::Specs;
use crate::resource::{link_name_problem, LinkType, VlanProtocol, VlanSpec, MAX_LINK_REF_LEN};

link_document! {
    /// `kind: VLANConfig`.
    #[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct VlanConfig {
        #[serde(default, rename = "apiVersion", skip_serializing)]
        pub(crate) api_version: TalosKey,
        #[serde(default, skip_serializing)]
        pub(crate) kind: TalosKey,
        /// `name`: the VLAN link to create.
        pub name: String,
        /// `vlanID`: 1..4094.
        #[serde(rename = "vlanID")]
        pub vlan_id: u16,
        /// `vlanMode`: `802.1q` (the default) or `802.1ad`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub vlan_mode: Option<VlanProtocol>,
        /// `parent`: the link it is on, by name, alias or altname.
        pub parent: String,
    }
}

impl Body for VlanConfig {
    fn name(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(&self.name))
    }

    fn conflicts_with(&self) -> &'static [&'static str] {
        LINK_KINDS
    }

    fn check(&self, p: &mut Problems) {
        check_name(&self.name, true, p);
        if !(1..=4094).contains(&self.vlan_id) {
            p.error(YamlPath::keys("vlanID"), "vlanID must be between 1 and 4094");
        }
        let modes = [VlanProtocol::DOT1Q, VlanProtocol::DOT1AD];
        if self.vlan_mode.is_some_and(|m| !modes.contains(&m)) {
            p.error(YamlPath::keys("vlanMode"), "vlanMode is 802.1q or 802.1ad");
        }
        if self.parent.is_empty() {
            p.error(YamlPath::keys("parent"), "parent must be specified");
        }
        if let Some(problem) = link_name_problem(&self.parent, MAX_LINK_REF_LEN) {
            p.error(YamlPath::keys("parent"), problem);
        }
        self.common().check(p);
    }

    fn add_specs(&self, out: &mut Specs, links: &LinkNames<'_, '_>) {
        let common = self.common();
        let mut link = common.logical_link(&self.name, "vlan", LinkType::ETHER);
        link.parent_name = links.resolve(&self.parent);
        link.vlan = Some(VlanSpec {
            vid: self.vlan_id,
            protocol: self.vlan_mode.unwrap_or(VlanProtocol::DOT1Q),
        });
        out.link_settings(link);
        common.add_addresses_and_routes(&self.name, out);
    }

    fn legacy_conflict(&self, legacy: &Legacy<'_>) -> Option<(&'static str, String)> {
        legacy_link_conflict(&self.name, legacy)
    }

    fn configures_links(&self) -> bool {
        true
    }
}
