// SPDX-License-Identifier: Apache-2.0
//! How link documents find the links they name: by name, the kernel's alias or an altname
//! (as everywhere in keelson), and first by the aliases `LinkAliasConfig` documents give.

use std::collections::BTreeMap;

use crate::resource::LinkView;

/// The node's links and the aliases the configuration gives them.
pub(crate) struct LinkNames<'a, 'v> {
    pub view: &'a LinkView<'v>,
    aliases: BTreeMap<String, String>,
}

impl<'a, 'v> LinkNames<'a, 'v> {
    /// Links as the kernel shows them, with no configured alias.
    pub(crate) fn new(view: &'a LinkView<'v>) -> Self {
        Self { view, aliases: BTreeMap::new() }
    }

    /// Give `alias` to the link `name`; an alias already given is kept (the first document
    /// wins, as Talos's controller keeps a link's first alias).
    pub(crate) fn alias(&mut self, alias: &str, name: &str) {
        self.aliases.entry(alias.to_owned()).or_insert_with(|| name.to_owned());
    }

    /// The real name of the link `name` refers to; `name` itself when none answers yet.
    pub(crate) fn resolve(&self, name: &str) -> String {
        match self.aliases.get(name) {
            Some(real) => real.clone(),
            None => self.view.resolve(name),
        }
    }
}
