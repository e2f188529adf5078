// SPDX-License-Identifier: Apache-2.0
//! Node addresses and network readiness, derived from statuses (docs/talos.md: Statuses and
//! readiness). Pure.
//!
//! - Candidates: global-scope unicast addresses that are not loopback, link-local or the
//!   host DNS service address.
//! - `default`: the first candidate ordered by link name then address; sticky while it is
//!   still current, so the node IP does not move when another address appears.
//! - `current`: candidates on links that are up (oper state up or unknown; physical links also
//!   need carrier), sorted by address.
//! - `routed`: `current` minus SideroLink-style ULAs (`fdXX:…` with byte 7 = 0x03).
//! - `accumulative`: every address ever current; never shrinks.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv6Addr};

use ipnet::IpNet;

use crate::resource::{AddressStatus, LinkStatus, LinkView, NetworkStatus, NodeAddress, Scope};

/// The host DNS service address, never a node address.
const HOST_DNS_V6: Ipv6Addr =
    Ipv6Addr::new(0xfd54, 0x616c, 0x6f73, 0, 0x204f, 0x5320, 0x444e, 0x531);

/// IDs of the node address resources.
pub const DEFAULT: &str = "default";
/// See [`DEFAULT`].
pub const CURRENT: &str = "current";
/// See [`DEFAULT`].
pub const ROUTED: &str = "routed";
/// See [`DEFAULT`].
pub const ACCUMULATIVE: &str = "accumulative";

/// The four node address lists.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeAddresses {
    /// At most one address.
    pub default: Option<IpNet>,
    /// Addresses on up links.
    pub current: Vec<IpNet>,
    /// Current minus overlay ULAs.
    pub routed: Vec<IpNet>,
    /// Everything ever current.
    pub accumulative: Vec<IpNet>,
}

impl NodeAddresses {
    /// `(id, resource)` pairs to write.
    pub fn resources(&self) -> [(&'static str, NodeAddress); 4] {
        [
            (DEFAULT, NodeAddress { addresses: self.default.into_iter().collect() }),
            (CURRENT, NodeAddress { addresses: self.current.clone() }),
            (ROUTED, NodeAddress { addresses: self.routed.clone() }),
            (ACCUMULATIVE, NodeAddress { addresses: self.accumulative.clone() }),
        ]
    }
}

fn is_candidate(a: &AddressStatus) -> bool {
    let ip = a.address.addr();
    let link_local = match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
    };
    a.scope < Scope::LINK
        && !ip.is_loopback()
        && !ip.is_multicast()
        && !link_local
        && ip != IpAddr::V6(HOST_DNS_V6)
}

fn is_overlay_ula(ip: IpAddr) -> bool {
    matches!(ip, IpAddr::V6(v6) if v6.octets()[0] == 0xfd && v6.octets()[7] == 0x03)
}

/// A link counts as up when its oper state is up or unknown, or is still `down` only because
/// the kernel has not yet caught up with a link that is up with carrier; and, if physical, it
/// has carrier.
fn link_up(links: &LinkView<'_>, name: &str) -> bool {
    links.get(name).is_some_and(|l| {
        let settled = matches!(l.operational_state.as_str(), "up" | "unknown");
        (settled || oper_state_pending(l)) && (!l.physical() || l.link_state)
    })
}

/// Up with carrier, but reported `down`: the kernel sets the oper state only when its link
/// watcher runs, and that work is held back to once a second (net/core/link_watch.c). A NIC
/// whose carrier came on while it was down (virtio-net does at probe) is set up right after the
/// watcher ran for that carrier, so its `up` waits almost a second more, while the link already
/// sends: opening a device with carrier attaches its queueing discipline at once. `DORMANT`
/// and `testing` are states of their own, never this one.
fn oper_state_pending(l: &LinkStatus) -> bool {
    l.operational_state == "down" && l.link_state && l.is_up() && !l.has_flag("DORMANT")
}

fn sort_key(n: &IpNet) -> (IpAddr, u8) {
    (n.addr(), n.prefix_len())
}

/// Derive the node address lists from address and link statuses and the previous lists.
pub fn derive(
    addresses: &[&AddressStatus],
    links: &LinkView<'_>,
    previous: &NodeAddresses,
) -> NodeAddresses {
    let mut candidates: Vec<&AddressStatus> =
        addresses.iter().copied().filter(|a| is_candidate(a)).collect();
    crate::sort::by(&mut candidates, |a, b| {
        (&a.link_name, sort_key(&a.address)).cmp(&(&b.link_name, sort_key(&b.address)))
    });

    let mut current: Vec<IpNet> =
        candidates.iter().filter(|a| link_up(links, &a.link_name)).map(|a| a.address).collect();
    crate::sort::by_key(&mut current, sort_key);
    current.dedup();

    let default = match previous.default {
        Some(d) if current.contains(&d) => Some(d),
        _ => candidates.first().map(|a| a.address),
    };
    let routed = current.iter().copied().filter(|n| !is_overlay_ula(n.addr())).collect();
    let mut accumulative: BTreeSet<(IpAddr, u8)> =
        previous.accumulative.iter().map(sort_key).collect();
    accumulative.extend(current.iter().map(sort_key));
    let accumulative =
        accumulative.into_iter().filter_map(|(ip, len)| IpNet::new(ip, len).ok()).collect();
    NodeAddresses { default, current, routed, accumulative }
}

/// Network readiness from what exists (docs/talos.md: Statuses and readiness).
pub fn network_status(
    current: &[IpNet],
    has_default_route: bool,
    has_hostname: bool,
    etc_files_written: bool,
) -> NetworkStatus {
    NetworkStatus {
        address_ready: !current.is_empty(),
        connectivity_ready: has_default_route,
        hostname_ready: has_hostname,
        etc_files_ready: etc_files_written,
        waiting: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::{AddressFlags, Family, LinkType};

    fn addr(link: &str, a: &str, scope: Scope) -> AddressStatus {
        let address: IpNet = a.parse().unwrap();
        AddressStatus {
            address,
            local: None,
            broadcast: None,
            anycast: None,
            multicast: None,
            link_index: 1,
            link_name: link.into(),
            family: Family::of(&address.addr()),
            scope,
            flags: AddressFlags::PERMANENT,
            priority: 0,
        }
    }

    fn link(state: &str, carrier: bool, kind: &str) -> LinkStatus {
        LinkStatus {
            link_type: LinkType::ETHER,
            operational_state: state.into(),
            link_state: carrier,
            kind: kind.into(),
            ..Default::default()
        }
    }

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|s| s.parse().unwrap()).collect()
    }

    /// Up with carrier and only the kernel's link watcher still to run counts; down, without
    /// carrier or dormant does not.
    #[test]
    fn a_link_up_with_carrier_counts_before_the_kernel_reports_it_up() {
        let mut pending = link("down", true, "");
        pending.flags = "UP,BROADCAST,MULTICAST,LOWER_UP".into();
        let mut admin_down = pending.clone();
        admin_down.flags = "BROADCAST,MULTICAST".into();
        let mut no_carrier = pending.clone();
        no_carrier.link_state = false;
        let mut dormant = pending.clone();
        dormant.flags = "UP,BROADCAST,MULTICAST,LOWER_UP,DORMANT".into();
        let mut lower_down = pending.clone();
        lower_down.operational_state = "lowerlayerdown".into();
        let cases = [
            ("pending", &pending, true),
            ("admin-down", &admin_down, false),
            ("no-carrier", &no_carrier, false),
            ("dormant", &dormant, false),
            ("lower-down", &lower_down, false),
        ];
        for (name, l, want) in cases {
            let links = LinkView::new([(name, l)]);
            let a = addr(name, "10.0.0.5/24", Scope::GLOBAL);
            let n = derive(&[&a], &links, &NodeAddresses::default());
            assert_eq!(!n.current.is_empty(), want, "{name}");
        }
    }

    #[test]
    fn filters_and_orders() {
        let eth0 = link("up", true, "");
        let eth1 = link("down", false, "");
        let br0 = link("unknown", false, "bridge");
        let links = LinkView::new([("eth0", &eth0), ("eth1", &eth1), ("br0", &br0)]);
        let all = [
            addr("lo", "127.0.0.1/8", Scope::HOST),
            addr("eth0", "fe80::1/64", Scope::LINK),
            addr("eth0", "169.254.1.1/16", Scope::GLOBAL),
            addr("eth0", "10.0.0.5/24", Scope::GLOBAL),
            addr("eth0", "2001:db8::5/64", Scope::GLOBAL),
            addr("eth1", "10.1.0.5/24", Scope::GLOBAL),
            addr("br0", "192.168.1.1/24", Scope::GLOBAL),
            addr("br0", "fd00:1:2:4::7/64", Scope::GLOBAL),
            addr("eth0", "fd54:616c:6f73::204f:5320:444e:531/128", Scope::GLOBAL),
        ];
        let refs: Vec<&AddressStatus> = all.iter().collect();
        let n = derive(&refs, &links, &NodeAddresses::default());
        assert_eq!(
            n.default,
            Some("192.168.1.1/24".parse().unwrap()),
            "first by link name: br0 < eth0"
        );
        assert_eq!(
            n.current,
            nets(&["10.0.0.5/24", "192.168.1.1/24", "2001:db8::5/64", "fd00:1:2:4::7/64"])
        );
        assert_eq!(
            n.routed,
            nets(&["10.0.0.5/24", "192.168.1.1/24", "2001:db8::5/64", "fd00:1:2:4::7/64"])
        );
        let ula = addr("br0", "fd00:1:2:4::7/64", Scope::GLOBAL);
        let mut ula_bytes = match ula.address.addr() {
            IpAddr::V6(v6) => v6.octets(),
            IpAddr::V4(_) => unreachable!(),
        };
        ula_bytes[7] = 0x03;
        let sidero = AddressStatus {
            address: IpNet::new(Ipv6Addr::from(ula_bytes).into(), 64).unwrap(),
            ..ula
        };
        let n = derive(&[&sidero], &links, &NodeAddresses::default());
        assert_eq!(n.current.len(), 1);
        assert!(n.routed.is_empty(), "overlay ULAs are not routed");
    }

    #[test]
    fn default_is_sticky_and_accumulative_never_shrinks() {
        let eth0 = link("up", true, "");
        let eth1 = link("up", true, "");
        let links = LinkView::new([("eth0", &eth0), ("eth1", &eth1)]);
        let b = addr("eth1", "10.1.0.5/24", Scope::GLOBAL);
        let first = derive(&[&b], &links, &NodeAddresses::default());
        assert_eq!(first.default, Some("10.1.0.5/24".parse().unwrap()));
        // An address on a link that sorts earlier appears: the default stays put.
        let a = addr("eth0", "10.0.0.5/24", Scope::GLOBAL);
        let second = derive(&[&a, &b], &links, &first);
        assert_eq!(second.default, first.default);
        // The default goes away: the next candidate takes over; accumulative keeps both.
        let third = derive(&[&a], &links, &second);
        assert_eq!(third.default, Some("10.0.0.5/24".parse().unwrap()));
        assert_eq!(third.accumulative, nets(&["10.0.0.5/24", "10.1.0.5/24"]));
    }

    #[test]
    fn readiness() {
        let s = network_status(&nets(&["10.0.0.5/24"]), true, false, true);
        assert!(s.address_ready && s.connectivity_ready && !s.hostname_ready && s.etc_files_ready);
        assert!(!network_status(&[], false, true, false).address_ready);
    }
}
