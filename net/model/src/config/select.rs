// SPDX-License-Identifier: Apache-2.0
//! Resolving device names and `deviceSelector`s against the node's links.

use crate::resource::{LinkStatus, LinkView};

use super::network::{Bond, Device, DeviceSelector};

impl DeviceSelector {
    /// Does `link` match every field this selector gives? MAC and bus path fields are
    /// globs (`*` any run, `?` one character); MACs compare case-insensitively.
    pub fn matches(&self, link: &LinkStatus) -> bool {
        let mac = |pattern: &Option<String>, addr: Option<String>| match pattern {
            None => true,
            Some(p) => addr.is_some_and(|a| glob(p, &a)),
        };
        mac(&self.hardware_addr, Some(link.hardware_addr.to_string()))
            && mac(&self.permanent_addr, link.permanent_addr.as_ref().map(ToString::to_string))
            && self.driver.as_ref().is_none_or(|d| *d == link.driver)
            && self
                .bus_path
                .as_ref()
                .is_none_or(|p| !link.bus_path.is_empty() && glob(p, &link.bus_path))
            && self.physical.is_none_or(|p| p == link.physical())
            && self.pci_id.as_ref().is_none_or(|p| {
                !link.pci_id.is_empty()
                    && glob(&p.to_ascii_uppercase(), &link.pci_id.to_ascii_uppercase())
            })
    }

    /// The names of every matching link, in name order (Talos's device selector applies the
    /// device to each link it matches: `network/device_config.go`). Empty when none matches
    /// yet.
    pub fn matching(&self, links: &LinkView) -> Vec<String> {
        links.iter().filter(|(_, status)| self.matches(status)).map(|(n, _)| n.to_owned()).collect()
    }
}

/// One link a device configures: its resolved name, and the name its VLANs are named after.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Target {
    /// The link's name (an `interface` resolved through names, aliases and altnames).
    pub(crate) name: String,
    /// The `interface` as written, or the selector's match (docs/talos.md: Merge names VLANs
    /// after the raw interface name).
    pub(crate) raw: String,
}

impl Device {
    /// The links this device configures: its `interface` resolved through names, aliases
    /// and altnames (the name itself when no link answers yet), or every link its selector
    /// matches (none yet: nothing).
    pub fn resolve_all(&self, links: &LinkView) -> Vec<String> {
        self.targets(links).into_iter().map(|t| t.name).collect()
    }

    pub(crate) fn targets(&self, links: &LinkView) -> Vec<Target> {
        match (&self.interface, &self.device_selector) {
            (Some(name), _) => vec![Target { name: links.resolve(name), raw: name.clone() }],
            (None, Some(selector)) => selector
                .matching(links)
                .into_iter()
                .map(|name| Target { raw: name.clone(), name })
                .collect(),
            (None, None) => Vec::new(),
        }
    }
}

impl Bond {
    /// Members in enslaving order: `interfaces` (resolved), then every link each selector
    /// matches, never the bond `name` itself (a bond takes its first member's MAC, so a MAC
    /// selector would match it too: Talos filters it out the same way). A link listed twice
    /// joins once, at its first place.
    pub fn members(&self, name: &str, links: &LinkView) -> Vec<String> {
        let mut seen = std::collections::BTreeSet::new();
        let mut out: Vec<String> = Vec::new();
        let named = self.interfaces.iter().map(|n| links.resolve(n));
        let selected = self
            .device_selectors
            .iter()
            .flat_map(|s| s.matching(links))
            .filter(|member| member != name);
        for member in named.chain(selected) {
            if seen.insert(member.clone()) {
                out.push(member);
            }
        }
        out
    }
}

/// Glob match with `*` (any run, possibly empty) and `?` (one character).
pub(crate) fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    // Backtrack point: the last `*` and the text position it currently absorbs up to.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi].eq_ignore_ascii_case(&t[ti])) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn globs() {
        assert!(glob("00:1a:*", "00:1a:2b:3c:4d:5e"));
        assert!(glob("*:5e", "00:1a:2b:3c:4d:5e"));
        assert!(glob("00:1?:*:5E", "00:1a:2b:3c:4d:5e"));
        assert!(glob("*", ""));
        assert!(!glob("00:1b:*", "00:1a:2b:3c:4d:5e"));
        assert!(!glob("00:1a", "00:1a:2b"));
        assert!(glob("0000:00:0*", "0000:00:03.0"));
    }
}
