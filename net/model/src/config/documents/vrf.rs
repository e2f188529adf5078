// SPDX-License-Identifier: Apache-2.0
//! `VRFConfig`: a VRF link bound to a routing table, with its member links (Talos's
//! `pkg/machinery/config/types/network/vrf.go`).

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::link_common::{check_name, check_refs, legacy_link_conflict, link_document};
use super::link_names::LinkNames;
use super::{Body, Legacy, Problems, LINK_KINDS};
use crate::config::locate::YamlPath;
use crate::config::machine::TalosKey;
use crate::config::scalar::{self, Table};
use crate::config::specs::Specs;
use crate::resource::{HardwareAddr, LinkType, RoutingTable, VrfMasterSpec, VrfSlave};

link_document! {
    /// `kind: VRFConfig`.
    #[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct VrfConfig {
        #[serde(default, rename = "apiVersion", skip_serializing)]
        pub(crate) api_version: TalosKey,
        #[serde(default, skip_serializing)]
        pub(crate) kind: TalosKey,
        /// `name`: the VRF link to create.
        pub name: String,
        /// `hardwareAddr`: its MAC; absent lets the kernel pick one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub hardware_addr: Option<HardwareAddr>,
        /// `links`: the links enslaved to it.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub links: Vec<String>,
        /// `table`: its routing table (a number, or a name such as `main`).
        #[serde(deserialize_with = "scalar::one::<Table, _>")]
        pub table: RoutingTable,
    }
}

impl Body for VrfConfig {
    fn name(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(&self.name))
    }

    fn conflicts_with(&self) -> &'static [&'static str] {
        LINK_KINDS
    }

    fn check(&self, p: &mut Problems) {
        check_name(&self.name, true, p);
        check_refs("links", &self.links, p);
        // The kernel's own tables cannot be a VRF's.
        if [RoutingTable::UNSPEC, RoutingTable::MAIN, RoutingTable::LOCAL].contains(&self.table)
            || self.table.0 == 253
        {
            p.error(
                YamlPath::keys("table"),
                "a VRF needs a table of its own (not 0, 253, 254 or 255)",
            );
        }
        self.common().check(p);
    }

    fn add_specs(&self, out: &mut Specs, links: &LinkNames<'_, '_>) {
        let common = self.common();
        let mut link = common.logical_link(&self.name, "vrf", LinkType::ETHER);
        link.hardware_addr = self.hardware_addr.clone();
        link.vrf_master = Some(VrfMasterSpec { table: self.table });
        out.link_settings(link);
        for member in &self.links {
            let member = links.resolve(member);
            out.member(&member, |spec| {
                spec.vrf_slave = Some(VrfSlave { master_name: self.name.clone() });
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
