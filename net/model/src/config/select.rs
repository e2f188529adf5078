// SPDX-License-Identifier: Apache-2.0
//! Resolving device names and `deviceSelector`s against the node's links.

use crate::resource::{LinkStatus, LinkView};

use super::network::{Device, DeviceSelector};

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

    /// The name of the matching link. When several match, the first by name wins (links are
    /// name-ordered, as Talos's ID-ordered lists are); `None` when none matches yet.
    pub fn resolve(&self, links: &LinkView) -> Option<String> {
        links.iter().find(|(_, status)| self.matches(status)).map(|(name, _)| name.to_owned())
    }
}

impl Device {
    /// The link this device configures: its `interface` resolved through names, aliases and
    /// altnames (the name itself when no link answers yet), or its selector's match.
    pub fn resolve(&self, links: &LinkView) -> Option<String> {
        match (&self.interface, &self.device_selector) {
            (Some(name), _) => Some(links.resolve(name)),
            (None, Some(selector)) => selector.resolve(links),
            (None, None) => None,
        }
    }

    /// The name to derive VLAN names from: the `interface` as written, or the selector's
    /// match (docs/talos.md: Merge names VLANs after the raw interface name).
    pub(crate) fn raw_name(&self, links: &LinkView) -> Option<String> {
        match &self.interface {
            Some(name) => Some(name.clone()),
            None => self.resolve(links),
        }
    }
}

/// Glob match with `*` (any run, possibly empty) and `?` (one character).
fn glob(pattern: &str, text: &str) -> bool {
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
