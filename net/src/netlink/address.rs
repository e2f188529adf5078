// SPDX-License-Identifier: Apache-2.0
//! [`KernelAddress`]: interface addresses, their dump, add, in-place replace and delete.

use std::net::{IpAddr, Ipv4Addr};

use ipnet::IpNet;
use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL, NLM_F_REPLACE};
use netlink_packet_route::address::{
    AddressAttribute, AddressFlags as NlAddressFlags, AddressHeaderFlags, AddressMessage,
    AddressScope, CacheInfo,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};

use super::error::NlError;
use super::pipeline::BatchRequest;
use super::socket::RouteSocket;
use crate::resource::nethelpers::{AddressFlags, Family, Scope};

/// Lifetime value meaning "forever" (`INFINITY_LIFE_TIME`).
pub const FOREVER: u32 = u32::MAX;

/// An interface address as the kernel reports it, and as [`RouteSocket::address_add`] takes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelAddress {
    /// Interface index.
    pub index: u32,
    /// Address family.
    pub family: Family,
    /// Prefix length.
    pub prefix_len: u8,
    /// `IFA_ADDRESS`: the address, or the peer on point-to-point links.
    pub address: IpAddr,
    /// `IFA_LOCAL` when reported. On add, `None` sends `IFA_LOCAL = address`.
    pub local: Option<IpAddr>,
    /// `IFA_BROADCAST` (IPv4). On add, `None` computes it for prefixes shorter than /31.
    pub broadcast: Option<Ipv4Addr>,
    /// Scope.
    pub scope: Scope,
    /// Header flags OR `IFA_FLAGS`. On add only the [`AddressFlags::MANAGED`] bits and
    /// `optimistic` are sent; the kernel owns the rest (`permanent` follows `valid_lft`).
    pub flags: AddressFlags,
    /// `IFA_RT_PRIORITY`: metric of the prefix route (0: kernel default).
    pub priority: u32,
    /// Valid lifetime in seconds (`IFA_CACHEINFO`); [`FOREVER`] is `u32::MAX`.
    pub valid_lft: u32,
    /// Preferred lifetime in seconds; [`FOREVER`] is `u32::MAX`.
    pub preferred_lft: u32,
}

impl KernelAddress {
    /// A permanent address on link `index` with global scope and no flags.
    pub fn new(index: u32, net: IpNet) -> Self {
        let address = net.addr();
        Self {
            index,
            family: Family::of(&address),
            prefix_len: net.prefix_len(),
            address,
            local: None,
            broadcast: None,
            scope: Scope::GLOBAL,
            flags: AddressFlags::default(),
            priority: 0,
            valid_lft: FOREVER,
            preferred_lft: FOREVER,
        }
    }

    /// The address with its prefix length (`IFA_LOCAL` when present, as `ip addr` shows it).
    pub fn net(&self) -> IpNet {
        let ip = self.local.unwrap_or(self.address);
        // The kernel never reports a prefix longer than the family allows; fall back to the
        // host prefix rather than panic if it ever does.
        IpNet::new(ip, self.prefix_len).unwrap_or_else(|_| IpNet::from(ip))
    }

    fn target(&self) -> String {
        self.to_string()
    }
}

/// An address as errors name it (`10.0.0.5/24 dev #2`).
impl std::fmt::Display for KernelAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let a = self;
        write!(f, "{}/{} dev #{}", a.local.unwrap_or(a.address), a.prefix_len, a.index)
    }
}

fn af(family: Family) -> AddressFamily {
    AddressFamily::from(family.af())
}

/// The IPv4 broadcast Talos and `ip addr add ... brd +` compute: host bits set. /31 and /32
/// have none (RFC 3021).
fn default_broadcast(ip: IpAddr, prefix_len: u8) -> Option<Ipv4Addr> {
    match ip {
        IpAddr::V4(v4) if prefix_len < 31 => {
            let host = u32::MAX >> prefix_len;
            Some(Ipv4Addr::from(u32::from(v4) | host))
        }
        _ => None,
    }
}

fn header(a: &KernelAddress) -> AddressMessage {
    let mut msg = AddressMessage::default();
    msg.header.family = af(a.family);
    msg.header.prefix_len = a.prefix_len;
    msg.header.index = a.index;
    msg.header.scope = AddressScope::from(a.scope.0);
    msg
}

fn encode(a: &KernelAddress) -> AddressMessage {
    let mut msg = header(a);
    let flags = a.flags.0 & (AddressFlags::MANAGED.0 | AddressFlags::OPTIMISTIC.0);
    // ifa_flags in the header is 8 bits; IFA_FLAGS (kernel 3.14+) carries all of them and wins.
    msg.header.flags = AddressHeaderFlags::from_bits_retain((flags & 0xff) as u8);
    msg.attributes.push(AddressAttribute::Local(a.local.unwrap_or(a.address)));
    msg.attributes.push(AddressAttribute::Address(a.address));
    if let Some(b) = a.broadcast.or_else(|| default_broadcast(a.address, a.prefix_len)) {
        msg.attributes.push(AddressAttribute::Broadcast(b));
    }
    msg.attributes.push(AddressAttribute::Flags(NlAddressFlags::from_bits_retain(flags)));
    if a.priority != 0 {
        msg.attributes.push(AddressAttribute::RoutePriority(a.priority));
    }
    if a.valid_lft != FOREVER || a.preferred_lft != FOREVER {
        let mut ci = CacheInfo::default();
        ci.ifa_preferred = a.preferred_lft;
        ci.ifa_valid = a.valid_lft;
        msg.attributes.push(AddressAttribute::CacheInfo(ci));
    }
    msg
}

fn decode(msg: AddressMessage) -> Option<KernelAddress> {
    let family = match u8::from(msg.header.family) {
        2 => Family::Inet4,
        10 => Family::Inet6,
        _ => return None,
    };
    let mut flags = u32::from(msg.header.flags.bits());
    let (mut address, mut local, mut broadcast) = (None, None, None);
    let (mut priority, mut valid_lft, mut preferred_lft) = (0, FOREVER, FOREVER);
    for attr in msg.attributes {
        match attr {
            AddressAttribute::Address(a) => address = Some(a),
            AddressAttribute::Local(a) => local = Some(a),
            AddressAttribute::Broadcast(b) => broadcast = Some(b),
            AddressAttribute::Flags(f) => flags |= f.bits(),
            AddressAttribute::RoutePriority(p) => priority = p,
            AddressAttribute::CacheInfo(c) => {
                valid_lft = c.ifa_valid;
                preferred_lft = c.ifa_preferred;
            }
            _ => {}
        }
    }
    Some(KernelAddress {
        index: msg.header.index,
        family,
        prefix_len: msg.header.prefix_len,
        address: address.or(local)?,
        local,
        broadcast,
        scope: Scope(u8::from(msg.header.scope)),
        flags: AddressFlags(flags),
        priority,
        valid_lft,
        preferred_lft,
    })
}

impl RouteSocket {
    /// Dumps all IPv4 then all IPv6 addresses of every link.
    pub fn dump_addresses(&mut self) -> Result<Vec<KernelAddress>, NlError> {
        let mut out = Vec::new();
        for family in [Family::Inet4, Family::Inet6] {
            let mut req = AddressMessage::default();
            req.header.family = af(family);
            out.extend(self.inner.dump_into(
                "dump_addresses",
                "",
                RouteNetlinkMessage::GetAddress(req),
                |m| match m {
                    RouteNetlinkMessage::NewAddress(a) => decode(a),
                    _ => None,
                },
            )?);
        }
        Ok(out)
    }

    /// Adds an address (`NLM_F_CREATE | NLM_F_EXCL`); [`Exists`](super::NlErrorKind::Exists)
    /// if the link already has it.
    pub fn address_add(&mut self, a: &KernelAddress) -> Result<(), NlError> {
        let msg = RouteNetlinkMessage::NewAddress(encode(a));
        self.request("address_add", &a.target(), msg, NLM_F_CREATE | NLM_F_EXCL).map(drop)
    }

    /// Adds the address or updates it **in place** (`NLM_F_CREATE | NLM_F_REPLACE`): lifetimes
    /// and `priority` change without the address ever being removed, so connections survive a
    /// DHCP renewal and no `RTM_DELADDR` is sent.
    ///
    /// Kernel quirk: IPv4 replace updates lifetimes and priority but keeps the existing flags
    /// (`inet_rtm_newaddr`), while IPv6 also updates `nodad`, `noprefixroute`,
    /// `mngtmpaddr` (`inet6_addr_modify`). A flag change on IPv4 needs delete and add.
    pub fn address_replace(&mut self, a: &KernelAddress) -> Result<(), NlError> {
        let msg = RouteNetlinkMessage::NewAddress(encode(a));
        self.request("address_replace", &a.target(), msg, NLM_F_CREATE | NLM_F_REPLACE).map(drop)
    }

    /// Address changes, many per datagram: one result per change, as [`Self::address_add`],
    /// [`Self::address_replace`] and [`Self::address_delete`] would give.
    pub fn address_batch(&mut self, changes: &[AddressChangeKind]) -> Vec<Result<(), NlError>> {
        let requests: Vec<BatchRequest<'_, RouteNetlinkMessage>> = changes
            .iter()
            .map(|change| match change {
                AddressChangeKind::Add(a) => BatchRequest {
                    op: "address_add",
                    target: a,
                    msg: RouteNetlinkMessage::NewAddress(encode(a)),
                    flags: NLM_F_CREATE | NLM_F_EXCL,
                },
                AddressChangeKind::Replace(a) => BatchRequest {
                    op: "address_replace",
                    target: a,
                    msg: RouteNetlinkMessage::NewAddress(encode(a)),
                    flags: NLM_F_CREATE | NLM_F_REPLACE,
                },
                AddressChangeKind::Delete(a) => BatchRequest {
                    op: "address_delete",
                    target: a,
                    msg: RouteNetlinkMessage::DelAddress(delete_message(a)),
                    flags: 0,
                },
            })
            .collect();
        self.batch(&requests)
    }

    /// Deletes the address matching link, prefix length and local address.
    pub fn address_delete(&mut self, a: &KernelAddress) -> Result<(), NlError> {
        let msg = delete_message(a);
        self.request("address_delete", &a.target(), RouteNetlinkMessage::DelAddress(msg), 0)
            .map(drop)
    }
}

/// What `RTM_DELADDR` needs to match one address.
fn delete_message(a: &KernelAddress) -> AddressMessage {
    let mut msg = header(a);
    msg.attributes.push(AddressAttribute::Local(a.local.unwrap_or(a.address)));
    msg.attributes.push(AddressAttribute::Address(a.address));
    msg
}

/// One change of [`RouteSocket::address_batch`].
#[derive(Debug, Clone)]
pub enum AddressChangeKind {
    /// `RTM_NEWADDR` with CREATE|EXCL.
    Add(KernelAddress),
    /// `RTM_NEWADDR` with CREATE|REPLACE.
    Replace(KernelAddress),
    /// `RTM_DELADDR`.
    Delete(KernelAddress),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_only_below_31() {
        let ip: IpAddr = "192.168.1.10".parse().unwrap();
        assert_eq!(default_broadcast(ip, 24), Some("192.168.1.255".parse().unwrap()));
        assert_eq!(default_broadcast(ip, 0), Some(Ipv4Addr::BROADCAST));
        assert_eq!(default_broadcast(ip, 31), None);
        assert_eq!(default_broadcast("fd00::1".parse().unwrap(), 64), None);
    }

    #[test]
    fn encode_decode() {
        let mut a = KernelAddress::new(3, "10.0.0.1/24".parse().unwrap());
        a.flags = AddressFlags::NODAD | AddressFlags::NOPREFIXROUTE | AddressFlags::SECONDARY;
        a.priority = 50;
        a.valid_lft = 300;
        a.preferred_lft = 200;
        let back = decode(encode(&a)).unwrap();
        assert_eq!(back.local, Some(a.address));
        assert_eq!(back.broadcast, Some("10.0.0.255".parse().unwrap()));
        // SECONDARY is kernel-owned and not sent.
        assert_eq!(back.flags, AddressFlags::NODAD | AddressFlags::NOPREFIXROUTE);
        assert_eq!((back.priority, back.valid_lft, back.preferred_lft), (50, 300, 200));
        assert_eq!(back.net().to_string(), "10.0.0.1/24");
    }
}
