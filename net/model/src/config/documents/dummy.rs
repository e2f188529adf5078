// SPDX-License-Identifier: Apache-2.0
//! `DummyLinkConfig`: a dummy link keelson creates (Talos's
//! `pkg/machinery/config/types/network/dummy.go`).

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::link_common::{check_name, legacy_link_conflict, link_document};
use super::link_names::LinkNames;
use super::{Body, Legacy, Problems, LINK_KINDS};
use crate::config::machine::TalosKey;
use crate::config::specs::Specs;
use crate::resource::{HardwareAddr, LinkType};

link_document! {
    /// `kind: DummyLinkConfig`.
    #[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct DummyLinkConfig {
        #[serde(default, rename = "apiVersion", skip_serializing)]
        pub(crate) api_version: TalosKey,
        #[serde(default, skip_serializing)]
        pub(crate) kind: TalosKey,
        /// `name`: the link to create.
        pub name: String,
        /// `hardwareAddr`: its MAC; absent lets the kernel pick one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub hardware_addr: Option<HardwareAddr>,
    }
}

impl Body for DummyLinkConfig {
    fn name(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(&self.name))
    }

    fn conflicts_with(&self) -> &'static [&'static str] {
        LINK_KINDS
    }

    fn check(&self, p: &mut Problems) {
        check_name(&self.name, true, p);
        self.common().check(p);
    }

    fn add_specs(&self, out: &mut Specs, _: &LinkNames<'_, '_>) {
        let common = self.common();
        let mut link = common.logical_link(&self.name, "dummy", LinkType::ETHER);
        link.hardware_addr = self.hardware_addr.clone();
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
