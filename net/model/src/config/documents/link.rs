// SPDX-License-Identifier: Apache-2.0
//! `LinkConfig`: settings of a link that exists without us, a physical one (Talos's
//! `pkg/machinery/config/types/network/link.go`).

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::link_common::{check_name, legacy_link_conflict, link_document};
use super::link_names::LinkNames;
use super::{Body, Legacy, Problems, LINK_KINDS};
use crate::config::machine::TalosKey;
use crate::config::specs::Specs;

link_document! {
    /// `kind: LinkConfig`.
    #[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct LinkConfig {
        #[serde(default, rename = "apiVersion", skip_serializing)]
        pub(crate) api_version: TalosKey,
        #[serde(default, skip_serializing)]
        pub(crate) kind: TalosKey,
        /// `name`: the link, by name, alias or altname.
        pub name: String,
    }
}

impl Body for LinkConfig {
    fn name(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(&self.name))
    }

    fn conflicts_with(&self) -> &'static [&'static str] {
        LINK_KINDS
    }

    fn check(&self, p: &mut Problems) {
        check_name(&self.name, false, p);
        self.common().check(p);
    }

    fn add_specs(&self, out: &mut Specs, links: &LinkNames<'_, '_>) {
        let name = links.resolve(&self.name);
        let common = self.common();
        out.link_settings(common.link(&name));
        common.add_addresses_and_routes(&name, out);
    }

    fn legacy_conflict(&self, legacy: &Legacy<'_>) -> Option<(&'static str, String)> {
        legacy_link_conflict(&self.name, legacy)
    }

    fn configures_links(&self) -> bool {
        true
    }
}
