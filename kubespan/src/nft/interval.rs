// SPDX-License-Identifier: Apache-2.0
//! Prefix lists folded into the disjoint, sorted, non-adjacent ranges an nftables interval set
//! accepts (the kernel rejects overlapping intervals with `EEXIST`).
//!
//! Addresses are handled as `u128` with the family's width (32 or 128 bits), so one piece of
//! arithmetic serves both families. A range is inclusive at both ends, which keeps the top of
//! the address space (`255.255.255.255`, `ffff:…:ffff`) representable without overflow; the
//! exclusive end the kernel wants is derived when encoding, and is absent when the range runs
//! to the top.

use std::net::{Ipv4Addr, Ipv6Addr};

use ipnet::{Ipv4Net, Ipv6Net};

/// An inclusive address range `first..=last` of one family.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Range {
    /// First address in the range.
    pub first: u128,
    /// Last address in the range (inclusive).
    pub last: u128,
}

/// An address family's width, for the arithmetic and the key encoding.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Width {
    /// IPv4: 32 bits, 4-byte keys.
    V4,
    /// IPv6: 128 bits, 16-byte keys.
    V6,
}

impl Width {
    /// Number of address bits.
    pub fn bits(self) -> u32 {
        match self {
            Width::V4 => 32,
            Width::V6 => 128,
        }
    }

    /// The highest address of the family.
    pub fn max(self) -> u128 {
        match self {
            Width::V4 => u128::from(u32::MAX),
            Width::V6 => u128::MAX,
        }
    }

    /// The address in network byte order, as the set key expects it.
    pub fn key(self, addr: u128) -> Vec<u8> {
        match self {
            Width::V4 => (addr as u32).to_be_bytes().to_vec(),
            Width::V6 => addr.to_be_bytes().to_vec(),
        }
    }
}

impl Range {
    /// The range covered by a prefix of `len` bits starting at `addr` (host bits ignored).
    fn of_prefix(addr: u128, len: u8, width: Width) -> Self {
        let bits = width.bits();
        let host_bits = bits.saturating_sub(u32::from(len));
        // `checked_shl` is None for a shift by 128 (a /0 IPv6 prefix): every bit is a host bit.
        let host_mask = 1u128.checked_shl(host_bits).map_or(u128::MAX, |v| v - 1) & width.max();
        let first = addr & !host_mask & width.max();
        Range { first, last: first | host_mask }
    }

    /// The exclusive end the kernel stores as an interval-end element, or `None` when the
    /// range runs to the top of the address space (the kernel then needs no end element).
    pub fn end(&self, width: Width) -> Option<u128> {
        (self.last < width.max()).then(|| self.last + 1)
    }
}

/// Sorts and merges ranges: overlapping and adjacent ones become one.
fn merge(mut ranges: Vec<Range>) -> Vec<Range> {
    net::sort::ascending(&mut ranges);
    let mut out: Vec<Range> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match out.last_mut() {
            // Adjacent (`last + 1 == first`) merges too; `saturating_add` keeps a range that
            // already reaches the top from overflowing (everything after it is inside it).
            Some(prev) if r.first <= prev.last.saturating_add(1) => {
                prev.last = prev.last.max(r.last);
            }
            _ => out.push(r),
        }
    }
    out
}

/// IPv4 prefixes as sorted, disjoint, non-adjacent ranges.
pub fn ranges_v4(prefixes: &[Ipv4Net]) -> Vec<Range> {
    merge(
        prefixes
            .iter()
            .map(|p| Range::of_prefix(u128::from(u32::from(p.addr())), p.prefix_len(), Width::V4))
            .collect(),
    )
}

/// IPv6 prefixes as sorted, disjoint, non-adjacent ranges.
pub fn ranges_v6(prefixes: &[Ipv6Net]) -> Vec<Range> {
    merge(
        prefixes
            .iter()
            .map(|p| Range::of_prefix(u128::from(p.addr()), p.prefix_len(), Width::V6))
            .collect(),
    )
}

/// Renders a range as `nft` reads it: the address alone, a prefix when the range is exactly
/// one (`10.0.0.0/8`), else `first-last`.
pub fn display(r: &Range, width: Width) -> String {
    let show = |a: u128| match width {
        Width::V4 => Ipv4Addr::from(a as u32).to_string(),
        Width::V6 => Ipv6Addr::from(a).to_string(),
    };
    if r.first == r.last {
        return show(r.first);
    }
    // A prefix: the host part is all ones at the end and all zeros at the start.
    let host = r.last - r.first;
    if host & host.wrapping_add(1) == 0 && r.first & host == 0 {
        let len = width.bits() - (128 - host.leading_zeros());
        return format!("{}/{len}", show(r.first));
    }
    format!("{}-{}", show(r.first), show(r.last))
}

/// The ranges in `a` that are not in `b`, both sorted (as [`ranges_v4`] returns them). Ranges
/// are compared whole: a range that grew is one removal plus one addition.
pub fn difference(a: &[Range], b: &[Range]) -> Vec<Range> {
    let mut out = Vec::new();
    let mut j = 0;
    for r in a {
        while b.get(j).is_some_and(|x| x < r) {
            j += 1;
        }
        if b.get(j) != Some(r) {
            out.push(*r);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(list: &[&str]) -> Vec<String> {
        let p: Vec<Ipv4Net> = list.iter().map(|s| s.parse().unwrap()).collect();
        ranges_v4(&p).iter().map(|r| display(r, Width::V4)).collect()
    }

    fn v6(list: &[&str]) -> Vec<String> {
        let p: Vec<Ipv6Net> = list.iter().map(|s| s.parse().unwrap()).collect();
        ranges_v6(&p).iter().map(|r| display(r, Width::V6)).collect()
    }

    #[test]
    fn merges_overlapping_and_adjacent() {
        assert_eq!(
            v4(&["10.0.1.0/24", "10.0.0.0/24", "10.0.0.128/25", "10.0.3.0/24", "192.168.0.1/32"]),
            ["10.0.0.0/23", "10.0.3.0/24", "192.168.0.1"]
        );
        // A prefix inside an earlier, larger one disappears; host bits are ignored.
        assert_eq!(v4(&["10.1.2.3/8", "10.200.0.0/16"]), ["10.0.0.0/8"]);
        assert_eq!(v4(&["10.0.1.0/24", "10.0.2.0/24"]), ["10.0.1.0-10.0.2.255"]);
        // Duplicates collapse; an empty list stays empty.
        assert_eq!(v4(&["1.2.3.4/32", "1.2.3.4/32"]), ["1.2.3.4"]);
        assert!(v4(&[]).is_empty());
    }

    #[test]
    fn edges_of_the_address_space() {
        assert_eq!(v4(&["0.0.0.0/0", "10.0.0.0/8"]), ["0.0.0.0/0"]);
        assert_eq!(v6(&["::/0"]), ["::/0"]);
        assert_eq!(v4(&["255.255.255.255/32", "255.255.255.254/32"]), ["255.255.255.254/31"]);
        assert_eq!(v6(&["::/128", "::1/128", "fd00::/8"]), ["::/127", "fd00::/8"]);
        // Adjacent at the top of the space: 128.0.0.0/1 after 0.0.0.0/1 is one range.
        assert_eq!(v4(&["128.0.0.0/1", "0.0.0.0/1"]), ["0.0.0.0/0"]);
        assert_eq!(v4(&["10.0.0.1/32", "10.0.0.2/32"]), ["10.0.0.1-10.0.0.2"]);

        let top: Vec<Ipv4Net> = vec!["255.255.255.0/24".parse().unwrap()];
        let r = ranges_v4(&top);
        assert_eq!(r[0].end(Width::V4), None);
        let low: Vec<Ipv4Net> = vec!["10.0.0.0/8".parse().unwrap()];
        assert_eq!(ranges_v4(&low)[0].end(Width::V4), Some(0x0b00_0000));
        let all6: Vec<Ipv6Net> = vec!["::/0".parse().unwrap()];
        assert_eq!(ranges_v6(&all6)[0].end(Width::V6), None);
    }

    #[test]
    fn keys_are_network_order() {
        assert_eq!(Width::V4.key(0x0a00_0001), [10, 0, 0, 1]);
        let k = Width::V6.key(u128::from("fd00::1".parse::<Ipv6Addr>().unwrap()));
        assert_eq!(k[0], 0xfd);
        assert_eq!(k[15], 1);
    }

    #[test]
    fn difference_is_whole_ranges() {
        let old = ranges_v4(&["10.0.0.0/24".parse().unwrap(), "10.0.4.0/24".parse().unwrap()]);
        let new = ranges_v4(&["10.0.0.0/23".parse().unwrap(), "10.0.4.0/24".parse().unwrap()]);
        let shown =
            |rs: Vec<Range>| -> Vec<String> { rs.iter().map(|r| display(r, Width::V4)).collect() };
        assert_eq!(shown(difference(&old, &new)), ["10.0.0.0/24"]);
        assert_eq!(shown(difference(&new, &old)), ["10.0.0.0/23"]);
        assert!(difference(&new, &new).is_empty());
    }
}
