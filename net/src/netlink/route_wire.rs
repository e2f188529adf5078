// SPDX-License-Identifier: Apache-2.0
//! Route dumps, their replies read in place: the `struct rtmsg` header and the attributes a
//! [`KernelRoute`] keeps, without building `netlink-packet-route`'s message first (a vector of
//! every attribute, metrics and cache info included, per route). Dumps of large tables are
//! read twice per change (the route spec controller and the status mirror), so this is the
//! hot half of reading routes; encoding stays with the crate. [`decode`] is pure: bytes in, a
//! route out.
//!
//! Layouts: `include/uapi/linux/rtnetlink.h` (`struct rtmsg`, `RTA_*`, `RTAX_*`, `struct
//! rtvia`). The `route` fuzz target checks that this reads every message the crate's decoder
//! accepts exactly as it does.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

use log::trace;
use netlink_packet_core::NlasIterator;
use netlink_packet_route::route::{RouteAttribute, RouteMessage};
use netlink_packet_route::RouteNetlinkMessage;

use super::error::{NlError, NlErrorKind};
use super::frame::Frame;
use super::route::{af, KernelRoute};
use super::socket::RouteSocket;
use crate::resource::nethelpers::{
    Family, RouteFlags, RouteProtocol, RouteType, RoutingTable, Scope,
};

/// `RTM_NEWROUTE`: the type of every reply to a route dump.
const RTM_NEWROUTE: u16 = 24;
/// `sizeof(struct rtmsg)`: family, dst_len, src_len, tos, table, protocol, scope, type, flags.
const RTMSG_LEN: usize = 12;

const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const RTA_PRIORITY: u16 = 6;
const RTA_PREFSRC: u16 = 7;
const RTA_METRICS: u16 = 8;
const RTA_TABLE: u16 = 15;
const RTA_VIA: u16 = 18;
const RTAX_MTU: u16 = 2;

const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;

/// A malformed reply (the kernel never sends one): the dump fails, as it would with any
/// undecodable message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Malformed(pub(crate) &'static str);

const BAD_ATTRIBUTE: &str = "an attribute's length is short or runs past the message";

fn u32_of(v: &[u8]) -> Result<u32, Malformed> {
    v.try_into()
        .map(u32::from_ne_bytes)
        .map_err(|_| Malformed("a 32-bit attribute of another size"))
}

/// An address of `family`'s size; another family keeps no address (as the crate's `Other`).
fn address(family: u8, v: &[u8]) -> Result<Option<IpAddr>, Malformed> {
    let wrong = Malformed("an address of the wrong size");
    Ok(match family {
        AF_INET => Some(IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(v).map_err(|_| wrong)?))),
        AF_INET6 => Some(IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(v).map_err(|_| wrong)?))),
        _ => None,
    })
}

/// `RTM_NEWROUTE`'s payload (after the netlink header) as a route; `Ok(None)` for a family
/// other than IPv4 and IPv6.
pub(crate) fn decode(payload: &[u8]) -> Result<Option<KernelRoute>, Malformed> {
    let (h, attrs) = payload.split_first_chunk::<RTMSG_LEN>().ok_or(Malformed("short rtmsg"))?;
    let [af, dst_len, _src_len, _tos, table, protocol, scope, kind, f0, f1, f2, f3] = *h;
    let mut r = KernelRoute {
        family: Family::Inet4,
        dst: None,
        src: None,
        gateway: None,
        oif: None,
        table: RoutingTable(u32::from(table)),
        priority: 0,
        scope: Scope(scope),
        kind: RouteType(kind),
        protocol: RouteProtocol(protocol),
        flags: RouteFlags(u32::from_ne_bytes([f0, f1, f2, f3])),
        mtu: 0,
    };
    // Every attribute is walked, as the crate does, so a malformed list fails whatever the
    // family.
    // `NlasIterator` is the crate's attribute walk (no allocation): the same length checks,
    // alignment and flag bits masked off the type.
    for nla in NlasIterator::new(attrs) {
        let nla = nla.map_err(|_| Malformed(BAD_ATTRIBUTE))?;
        let v = nla.value();
        match nla.kind() {
            RTA_DST => r.dst = address(af, v)?.and_then(|ip| IpNet::new(ip, dst_len).ok()),
            RTA_PREFSRC => r.src = address(af, v)?,
            RTA_GATEWAY => r.gateway = address(af, v)?,
            RTA_VIA => {
                let (fam, addr) = v.split_first_chunk::<2>().ok_or(Malformed("short rtvia"))?;
                // `rtvia_family` is 16 bits; the crate reads its low byte.
                let fam = u16::from_ne_bytes(*fam) as u8;
                if let Some(ip) = address(fam, addr)? {
                    r.gateway = Some(ip);
                }
            }
            RTA_OIF => r.oif = Some(u32_of(v)?),
            RTA_TABLE => r.table = RoutingTable(u32_of(v)?),
            RTA_PRIORITY => r.priority = u32_of(v)?,
            RTA_METRICS => {
                for m in NlasIterator::new(v) {
                    let m = m.map_err(|_| Malformed(BAD_ATTRIBUTE))?;
                    if m.kind() == RTAX_MTU {
                        r.mtu = u32_of(m.value())?;
                    }
                }
            }
            _ => {}
        }
    }
    r.family = match af {
        AF_INET => Family::Inet4,
        AF_INET6 => Family::Inet6,
        _ => return Ok(None),
    };
    Ok(Some(r))
}

impl RouteSocket {
    /// Dumps every IPv4 then IPv6 route in **all** tables (main, local, custom), the way
    /// `ip route show table all` does. Cached clones (`RTM_F_CLONED`) are not included.
    pub fn dump_routes(&mut self) -> Result<Vec<KernelRoute>, NlError> {
        let mut out = Vec::new();
        for family in [Family::Inet4, Family::Inet6] {
            let mut req = RouteMessage::default();
            // With NETLINK_GET_STRICT_CHK, a zero rtm_table and no RTA_TABLE means all tables;
            // the other header fields must be zero (`ip_valid_fib_dump_req`).
            req.header.address_family = af(family);
            out.extend(self.inner.dump_frames(
                "dump_routes",
                "",
                RouteNetlinkMessage::GetRoute(req),
                |f| reply("dump_routes", f),
            )?);
        }
        Ok(out)
    }

    /// Dumps the routes of one family in one table: the kernel walks only that table
    /// (`RTA_TABLE` with `NETLINK_GET_STRICT_CHK`). A table that does not exist has no routes
    /// (the kernel answers ENOENT).
    pub fn dump_routes_in(
        &mut self,
        family: Family,
        table: RoutingTable,
    ) -> Result<Vec<KernelRoute>, NlError> {
        let mut req = RouteMessage::default();
        req.header.address_family = af(family);
        req.attributes.push(RouteAttribute::Table(table.0));
        // Table 0 asks for every table; any other is what was asked for already.
        let keep = |f: &Frame<'_>| {
            Ok(reply("dump_routes", f)?.filter(|r| table.0 == 0 || r.table == table))
        };
        match self.inner.dump_frames("dump_routes", "", RouteNetlinkMessage::GetRoute(req), keep) {
            Ok(routes) => Ok(routes),
            Err(e) if e.kind() == NlErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }
}

/// A dump reply as a route, read in place; other messages are skipped.
fn reply(op: &'static str, f: &Frame<'_>) -> Result<Option<KernelRoute>, NlError> {
    if f.ty != RTM_NEWROUTE {
        return Ok(None);
    }
    let r = decode(f.payload()).map_err(|e| NlError::decode(op, "", e.0))?;
    trace!(target: "netlink", "recv seq {}: {r:?}", f.seq);
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::super::route_wire_fuzz::{payload, routes};
    use super::*;

    #[test]
    fn reads_what_the_crate_encodes() {
        for r in routes() {
            let got = decode(&payload(&r, Vec::new())).unwrap().unwrap();
            assert_eq!(got, r);
        }
    }

    /// An attribute type with `NLA_F_NESTED` set (as the kernel marks `RTA_METRICS`) is
    /// still that type.
    #[test]
    fn type_flag_bits_are_ignored() {
        let r = &routes()[0];
        let mut b = payload(r, Vec::new());
        let mut at = RTMSG_LEN;
        while let Some(h) = b.get_mut(at..at + 4) {
            let len = usize::from(u16::from_ne_bytes([h[0], h[1]]));
            let t = u16::from_ne_bytes([h[2], h[3]]) | 0x8000;
            h[2..4].copy_from_slice(&t.to_ne_bytes());
            at += len.next_multiple_of(4);
        }
        assert_eq!(decode(&b).unwrap().as_ref(), Some(r));
    }

    #[test]
    fn malformed_replies_are_errors() {
        let good = payload(&routes()[0], Vec::new());
        assert!(decode(&good[..RTMSG_LEN - 1]).is_err(), "short header");
        // The first attribute (RTA_DST) cut inside its header, then inside its value.
        assert!(decode(&good[..RTMSG_LEN + 2]).is_err());
        assert!(decode(&good[..RTMSG_LEN + 6]).is_err());
        let mut short = good.clone();
        short[RTMSG_LEN..RTMSG_LEN + 2].copy_from_slice(&2u16.to_ne_bytes());
        assert!(decode(&short).is_err(), "rta_len below its header");
        let mut wrong = good.clone();
        // RTA_DST of an IPv4 route with 3 bytes: the address is the wrong size.
        wrong[RTMSG_LEN..RTMSG_LEN + 2].copy_from_slice(&7u16.to_ne_bytes());
        assert!(decode(&wrong).is_err());
    }

    #[test]
    fn other_families_are_not_routes() {
        let mut b = payload(&routes()[0], Vec::new());
        b[0] = 7; // AF_BRIDGE
        assert_eq!(decode(&b), Ok(None));
        assert_eq!(decode(&[7; RTMSG_LEN]), Ok(None));
    }
}
