// SPDX-License-Identifier: Apache-2.0
//! `LinkAliasConfig`: a name for the link a selector picks, which the other documents may
//! use in place of the link's own (Talos's `pkg/machinery/config/types/network/link_alias.go`).
//! The selector must pick exactly one link: none yet means the alias waits for one, several
//! means it is not given (a name for "one of these" would configure a link by chance).

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::link_names::LinkNames;
use super::selector::Selector;
use super::{Body, Problems};
use crate::config::locate::YamlPath;
use crate::config::machine::TalosKey;
use crate::resource::{link_name_problem, LinkView, MAX_LINK_REF_LEN};

/// `selector`.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AliasSelector {
    /// `match`: the expression.
    #[serde(rename = "match")]
    pub expr: String,
}

/// `kind: LinkAliasConfig`.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LinkAliasConfig {
    #[serde(default, rename = "apiVersion", skip_serializing)]
    pub(crate) api_version: TalosKey,
    #[serde(default, skip_serializing)]
    pub(crate) kind: TalosKey,
    /// `name`: the alias.
    pub name: String,
    /// `selector`.
    pub selector: AliasSelector,
}

impl LinkAliasConfig {
    /// The one link the selector picks among `view`, if exactly one.
    pub(crate) fn pick<'v>(&self, view: &LinkView<'v>) -> Option<&'v str> {
        let selector = Selector::parse(&self.selector.expr).ok()?;
        let mut matches = view.iter().filter(|(_, s)| selector.matches(s)).map(|(n, _)| n);
        let first = matches.next()?;
        if matches.next().is_some() {
            log::warn!(
                "LinkAliasConfig {}: the selector matches several links; the alias is not given",
                crate::names::escape(&self.name, 32)
            );
            return None;
        }
        Some(first)
    }

    /// Record this alias in `names`.
    pub(crate) fn apply(&self, names: &mut LinkNames<'_, '_>) {
        if let Some(link) = self.pick(names.view) {
            names.alias(&self.name, link);
        }
    }
}

impl Body for LinkAliasConfig {
    fn name(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(&self.name))
    }

    fn check(&self, p: &mut Problems) {
        if self.name.is_empty() {
            p.error(YamlPath::keys("name"), "name must be specified");
        } else if let Some(problem) = link_name_problem(&self.name, MAX_LINK_REF_LEN) {
            p.error(YamlPath::keys("name"), problem);
        }
        if let Err(e) = Selector::parse(&self.selector.expr) {
            p.error(YamlPath::keys("selector").key("match"), format!("invalid selector: {e}"));
        }
    }
}
