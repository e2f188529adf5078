// SPDX-License-Identifier: Apache-2.0
//! What per-client limits are kept per: an IPv4 address as it is, an IPv6 address cut to a
//! prefix, since one host is commonly handed a whole /64 (RFC 6177) and could otherwise be a
//! new client for every address it picks.

use std::net::{IpAddr, Ipv6Addr};

/// The IPv6 prefix length clients are keyed by unless configured.
pub const DEFAULT_V6_PREFIX: u8 = 64;

/// An IPv4 address (IPv4-mapped IPv6 included) as is; an IPv6 address cut to its first
/// `v6_prefix` bits (at most 128).
pub fn client_key(ip: IpAddr, v6_prefix: u8) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => {
            let bits = u32::from(v6_prefix.min(128));
            let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask))
        }
    }
}
