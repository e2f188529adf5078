// SPDX-License-Identifier: Apache-2.0
//! Link lookups by name for planners that ask about one link again and again.

use crate::resource::{find_link, LinkStatus};

/// [`find_link`] remembering the last name asked: ten thousand routes on one link would
/// scan the links and compare names ten thousand times.
pub(crate) struct LinkCache<'a, 's> {
    links: &'a [(String, LinkStatus)],
    last: Option<(&'s str, Option<(&'a str, &'a LinkStatus)>)>,
}

impl<'a, 's> LinkCache<'a, 's> {
    pub(crate) fn new(links: &'a [(String, LinkStatus)]) -> Self {
        Self { links, last: None }
    }

    /// The link `name` refers to (see [`find_link`]).
    pub(crate) fn find(&mut self, name: &'s str) -> Option<(&'a str, &'a LinkStatus)> {
        match self.last {
            Some((last, found)) if last == name => found,
            _ => {
                let found = find_link(self.links, name);
                self.last = Some((name, found));
                found
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cache answers as [`find_link`] does, for names, aliases, altnames and unknown
    /// names, asked once or again.
    #[test]
    fn link_cache_answers_as_find_link() {
        let link = |index, alias: &str, alt: &[&str]| LinkStatus {
            index,
            alias: alias.into(),
            alt_names: alt.iter().map(|a| (*a).to_owned()).collect(),
            ..Default::default()
        };
        let links = vec![
            ("lo".to_owned(), link(1, "", &[])),
            ("eth0".to_owned(), link(2, "uplink", &["enp1s0"])),
            ("eth1".to_owned(), link(3, "eth0", &[])),
        ];
        let mut cache = LinkCache::new(&links);
        for _ in 0..2 {
            for name in ["lo", "eth0", "uplink", "enp1s0", "eth1", "eth9", ""] {
                let got = cache.find(name).map(|(n, l)| (n, l.index));
                let want = find_link(&links, name).map(|(n, l)| (n, l.index));
                assert_eq!(got, want, "{name}");
            }
        }
    }
}
