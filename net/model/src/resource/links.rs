// SPDX-License-Identifier: Apache-2.0
//! The one link lookup (docs/talos.md: Applying specs): a name refers to the link with exactly
//! that name, else to the first link whose alias or altname it is. [`find_link`] applies it to
//! links in the order given (the spec controllers: the kernel's dump order); [`LinkView`] is
//! the same lookup indexed over links sorted by name, for config sources that must resolve
//! names, pick "the first non-loopback link" or match device selectors. [`LinkIdentities`] is
//! the part of the links those config sources read, the key of their derivations.

use std::collections::BTreeMap;

use super::link::LinkStatus;
use super::nethelpers::{HardwareAddr, LinkType};

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

/// The links as the configuration layers see them: each link's status reduced to what names,
/// `deviceSelector`s and link-alias selectors read ([`identity`]), by name. A layer derived
/// through [`LinkIdentities::view`] is a function of this value, so a controller that kept the
/// value of its last write may skip the next derivation while the value compares equal: a
/// link going up or down, gaining a carrier or changing flags derives nothing again.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkIdentities(Vec<(String, LinkStatus)>);

impl LinkIdentities {
    /// The identities of `links`.
    pub fn new<'a>(links: impl IntoIterator<Item = (&'a str, &'a LinkStatus)>) -> Self {
        let mut links: Vec<_> =
            links.into_iter().map(|(n, s)| (n.to_owned(), identity(s))).collect();
        crate::sort::by(&mut links, |a, b| a.0.cmp(&b.0));
        Self(links)
    }

    /// A view for deriving a layer: only the identity fields are set.
    pub fn view(&self) -> LinkView<'_> {
        LinkView::new(self.0.iter().map(|(n, s)| (n.as_str(), s)))
    }

    /// What a controller keeps to tell whether the identities changed: a SHA-256 over every
    /// name and identity, instead of a copy of each link's, which on a node with ten thousand
    /// links is megabytes per controller. The fields go in through `Hash`, whose encoding is
    /// unambiguous (strings end with a byte UTF-8 never has, lists and addresses start with
    /// their length), so equal digests mean equal identities.
    pub fn digest(&self) -> LinkDigest {
        use sha2::Digest;
        use std::hash::{Hash, Hasher};
        struct Feed(sha2::Sha256);
        impl Hasher for Feed {
            fn write(&mut self, bytes: &[u8]) {
                self.0.update(bytes);
            }
            fn finish(&self) -> u64 {
                0
            }
        }
        let mut feed = Feed(sha2::Sha256::new());
        for (name, status) in &self.0 {
            name.hash(&mut feed);
            identity_fields(status).hash(&mut feed);
        }
        LinkDigest(feed.0.finalize().into())
    }
}

/// The digest of [`LinkIdentities`]: equal digests mean equal identities.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkDigest([u8; 32]);

/// `status` with only the fields the configuration layers read; every other field is at its
/// default, so a layer cannot come to depend on it without it being listed here.
///
/// Kept: the fields of [`crate::config::DeviceSelector`] (MACs, driver, bus path, PCI ID,
/// `physical`, which is type and kind), those a `LinkAliasConfig` selector may read (the same,
/// plus alias, altnames, MTU), and alias and altnames, which names resolve through.
/// Dropped: what changes as the link runs or is configured (index, flags, operational state,
/// carrier, master, slave kind, broadcast address, parent index) and the kind-specific
/// settings, which no layer reads. MTU is kept although the configuration may set it (a
/// selector may read it): a link whose MTU changes is derived once more. The destructuring
/// in `identity_fields` names every field: a field added to [`LinkStatus`] does not compile
/// there until it is sorted into one of these.
pub fn identity(status: &LinkStatus) -> LinkStatus {
    let IdentityFields {
        link_type,
        hardware_addr,
        permanent_addr,
        mtu,
        kind,
        alias,
        alt_names,
        driver,
        bus_path,
        pci_id,
    } = identity_fields(status);
    LinkStatus {
        link_type,
        hardware_addr: hardware_addr.clone(),
        permanent_addr: permanent_addr.cloned(),
        mtu,
        kind: kind.to_owned(),
        alias: alias.to_owned(),
        alt_names: alt_names.to_vec(),
        driver: driver.to_owned(),
        bus_path: bus_path.to_owned(),
        pci_id: pci_id.to_owned(),
        ..LinkStatus::default()
    }
}

/// The fields [`identity`] keeps, borrowed: what the digest reads.
#[derive(Hash)]
struct IdentityFields<'a> {
    link_type: LinkType,
    hardware_addr: &'a HardwareAddr,
    permanent_addr: Option<&'a HardwareAddr>,
    mtu: u32,
    kind: &'a str,
    alias: &'a str,
    alt_names: &'a [String],
    driver: &'a str,
    bus_path: &'a str,
    pci_id: &'a str,
}

fn identity_fields(status: &LinkStatus) -> IdentityFields<'_> {
    let LinkStatus {
        index: _,
        link_type,
        link_index: _,
        flags: _,
        hardware_addr,
        permanent_addr,
        broadcast_addr: _,
        mtu,
        master_index: _,
        operational_state: _,
        kind,
        slave_kind: _,
        link_state: _,
        alias,
        alt_names,
        driver,
        bus_path,
        pci_id,
        vlan: _,
        bond_master: _,
        bridge_master: _,
        vrf_master: _,
        wireguard: _,
    } = status;
    IdentityFields {
        link_type: *link_type,
        hardware_addr,
        permanent_addr: permanent_addr.as_ref(),
        mtu: *mtu,
        kind,
        alias,
        alt_names,
        driver,
        bus_path,
        pci_id,
    }
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

    #[test]
    fn identities_ignore_what_changes_as_links_run() {
        let down = LinkStatus {
            index: 3,
            link_type: LinkType::ETHER,
            flags: "BROADCAST,MULTICAST".into(),
            hardware_addr: "02:00:00:00:00:01".parse().unwrap(),
            mtu: 1500,
            operational_state: "down".into(),
            driver: "virtio_net".into(),
            bus_path: "0000:00:03.0".into(),
            ..Default::default()
        };
        let up = LinkStatus {
            index: 7,
            link_index: 2,
            flags: "UP,BROADCAST,RUNNING,MULTICAST,LOWER_UP".into(),
            broadcast_addr: "ff:ff:ff:ff:ff:ff".parse().unwrap(),
            master_index: 9,
            operational_state: "up".into(),
            slave_kind: "bond".into(),
            link_state: true,
            ..down.clone()
        };
        let of = |s: &LinkStatus| LinkIdentities::new([("eth0", s)]);
        assert_eq!(of(&down), of(&up));
        assert_eq!(of(&down).digest(), of(&up).digest());

        let changed: [(&str, LinkStatus); 11] = [
            ("alias", LinkStatus { alias: "uplink".into(), ..down.clone() }),
            ("altname", LinkStatus { alt_names: vec!["enp0s3".into()], ..down.clone() }),
            (
                "mac",
                LinkStatus { hardware_addr: "02:00:00:00:00:02".parse().unwrap(), ..down.clone() },
            ),
            (
                "permanent mac",
                LinkStatus {
                    permanent_addr: Some("02:00:00:00:00:01".parse().unwrap()),
                    ..down.clone()
                },
            ),
            ("driver", LinkStatus { driver: "igb".into(), ..down.clone() }),
            ("mtu", LinkStatus { mtu: 9000, ..down.clone() }),
            ("bus path", LinkStatus { bus_path: "0000:00:04.0".into(), ..down.clone() }),
            ("pci id", LinkStatus { pci_id: "8086:100E".into(), ..down.clone() }),
            ("kind", LinkStatus { kind: "bond".into(), ..down.clone() }),
            ("type", LinkStatus { link_type: LinkType::LOOPBACK, ..down.clone() }),
            ("name", down.clone()),
        ];
        for (what, status) in &changed {
            let name = if *what == "name" { "eth1" } else { "eth0" };
            let other = LinkIdentities::new([(name, status)]);
            assert_ne!(of(&down), other, "{what}");
            assert_ne!(of(&down).digest(), other.digest(), "{what}");
        }
        // A link appearing or going away changes them too.
        let two = LinkIdentities::new([("eth0", &down), ("eth1", &down)]);
        assert_ne!(of(&down), two);
        assert_ne!(of(&down).digest(), two.digest());
        assert_ne!(of(&down), LinkIdentities::default());
        assert_ne!(of(&down).digest(), LinkIdentities::default().digest());
    }

    #[test]
    fn identities_resolve_like_the_statuses() {
        let eth0 = LinkStatus {
            link_type: LinkType::ETHER,
            alt_names: vec!["enp0s3".into()],
            operational_state: "up".into(),
            ..Default::default()
        };
        let eth1 =
            LinkStatus { link_type: LinkType::ETHER, alias: "uplink".into(), ..Default::default() };
        let lo =
            LinkStatus { link_type: LinkType::LOOPBACK, flags: "UP".into(), ..Default::default() };
        let ids = LinkIdentities::new([("lo", &lo), ("eth1", &eth1), ("eth0", &eth0)]);
        let view = ids.view();
        assert_eq!(view.resolve("uplink"), "eth1");
        assert_eq!(view.resolve("enp0s3"), "eth0");
        assert_eq!(view.first_non_loopback(), Some("eth0"));
        assert_eq!(view.physical().map(|(n, _)| n).collect::<Vec<_>>(), ["eth0", "eth1"]);
        // Nothing volatile gets through.
        assert!(view.iter().all(|(_, s)| s.flags.is_empty() && s.operational_state.is_empty()));
    }
}
