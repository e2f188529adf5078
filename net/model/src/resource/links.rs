// SPDX-License-Identifier: Apache-2.0
//! The one link lookup (docs/talos.md: Applying specs): a name refers to the link with exactly
//! that name, else to the first link whose alias or altname it is. [`find_link`] applies it to
//! links in the order given (the spec controllers: the kernel's dump order); [`LinkView`] is
//! the same lookup indexed over links sorted by name, for config sources that must resolve
//! names, pick "the first non-loopback link" or match device selectors.

use std::collections::BTreeMap;

use super::link::LinkStatus;
use super::nethelpers::LinkType;

/// Links by name, sorted by name (COSI lists are ID-ordered and Talos relies on it), with
/// an index of names, aliases and altnames so lookups stay cheap with thousands of links.
#[derive(Debug, Clone, Default)]
pub struct LinkView<'a> {
    links: Vec<(&'a str, &'a LinkStatus)>,
    by_name: BTreeMap<&'a str, usize>,
    by_other_name: BTreeMap<&'a str, usize>,
}

impl<'a> LinkView<'a> {
    /// A view over `(name, status)` pairs.
    pub fn new(links: impl IntoIterator<Item = (&'a str, &'a LinkStatus)>) -> Self {
        let mut links: Vec<_> = links.into_iter().collect();
        crate::sort::by(&mut links, |a, b| a.0.cmp(b.0));
        let by_name = crate::sort::into_map(links.iter().enumerate().map(|(i, (n, _))| (*n, i)));
        let mut by_other_name = BTreeMap::new();
        for (i, (_, s)) in links.iter().enumerate() {
            for n in other_names(s) {
                by_other_name.entry(n).or_insert(i);
            }
        }
        Self { links, by_name, by_other_name }
    }

    /// All links, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&'a str, &'a LinkStatus)> + '_ {
        self.links.iter().copied()
    }

    /// The status of the link with exactly this name.
    pub fn get(&self, name: &str) -> Option<&'a LinkStatus> {
        self.by_name.get(name).and_then(|&i| self.links.get(i)).map(|(_, s)| *s)
    }

    /// The real name of the link `name` refers to (by name, alias or altname); `name` itself
    /// when no link answers to it (it may appear later).
    pub fn resolve(&self, name: &str) -> String {
        self.find(name).map_or_else(|| name.to_owned(), |(n, _)| n.to_owned())
    }

    /// Does any link answer to `name`?
    pub fn exists(&self, name: &str) -> bool {
        self.find(name).is_some()
    }

    /// The link `name` refers to: by exact name first, then by alias or altname.
    pub fn find(&self, name: &str) -> Option<(&'a str, &'a LinkStatus)> {
        let i = self.by_name.get(name).or_else(|| self.by_other_name.get(name))?;
        self.links.get(*i).copied()
    }

    /// The first link by name that is not loopback (`ip=` with an empty device field).
    pub fn first_non_loopback(&self) -> Option<&'a str> {
        self.links.iter().find(|(_, s)| s.link_type != LinkType::LOOPBACK).map(|(n, _)| *n)
    }

    /// Physical links (ether, no kind), by name.
    pub fn physical(&self) -> impl Iterator<Item = (&'a str, &'a LinkStatus)> + '_ {
        self.iter().filter(|(_, s)| s.physical())
    }
}

/// The names a link answers to besides its own: its alias, when set, and its altnames.
fn other_names(s: &LinkStatus) -> impl Iterator<Item = &str> {
    std::iter::once(s.alias.as_str())
        .chain(s.alt_names.iter().map(String::as_str))
        .filter(|n| !n.is_empty())
}

/// The link `name` refers to among `links`, taken in the order given: by exact name first,
/// then the first link whose alias or altname it is.
pub fn find_link<'a>(
    links: &'a [(String, LinkStatus)],
    name: &str,
) -> Option<(&'a str, &'a LinkStatus)> {
    links
        .iter()
        .find(|(n, _)| n == name)
        .or_else(|| links.iter().find(|(_, l)| other_names(l).any(|n| n == name)))
        .map(|(n, l)| (n.as_str(), l))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_aliases_and_orders_by_name() {
        let lo = LinkStatus { link_type: LinkType::LOOPBACK, ..Default::default() };
        let eth1 =
            LinkStatus { link_type: LinkType::ETHER, alias: "uplink".into(), ..Default::default() };
        let eth0 = LinkStatus {
            link_type: LinkType::ETHER,
            alt_names: vec!["enp0s3".into()],
            ..Default::default()
        };
        let view = LinkView::new([("lo", &lo), ("eth1", &eth1), ("eth0", &eth0)]);
        assert_eq!(view.resolve("uplink"), "eth1");
        assert_eq!(view.resolve("enp0s3"), "eth0");
        assert_eq!(view.resolve("eth9"), "eth9");
        assert_eq!(view.first_non_loopback(), Some("eth0"));
        assert_eq!(view.physical().map(|(n, _)| n).collect::<Vec<_>>(), ["eth0", "eth1"]);
        assert!(view.exists("uplink") && !view.exists("eth9"));
    }

    #[test]
    fn find_link_takes_the_given_order() {
        let status = |alias: &str, alt: &[&str]| LinkStatus {
            alias: alias.into(),
            alt_names: alt.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        };
        // Kernel dump order (by index), not name order: eth9 comes first.
        let links = vec![
            ("eth9".to_owned(), status("uplink", &[])),
            ("eth0".to_owned(), status("uplink", &["enp0s3"])),
            ("uplink2".to_owned(), status("", &[])),
        ];
        assert_eq!(find_link(&links, "uplink").map(|(n, _)| n), Some("eth9"));
        assert_eq!(find_link(&links, "enp0s3").map(|(n, _)| n), Some("eth0"));
        assert_eq!(find_link(&links, "uplink2").map(|(n, _)| n), Some("uplink2"));
        // An empty alias answers to nothing, not even an empty name.
        assert_eq!(find_link(&links, ""), None);
        assert_eq!(find_link(&links, "eth5"), None);
        // The view over the same links breaks the alias tie by name.
        let view = LinkView::new(links.iter().map(|(n, s)| (n.as_str(), s)));
        assert_eq!(view.resolve("uplink"), "eth0");
    }
}
