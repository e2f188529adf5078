// SPDX-License-Identifier: Apache-2.0
//! Connection slots per class, so that no kind of client can lock out another that matters
//! more. The table holds at most `N` connections (`run --api-max-connections`, default 256),
//! split as:
//! - **handshakes**: TLS connections whose handshake is not done (their role is not known
//!   yet) have a pool of their own, at most `N/8` (32), so that readers holding every other
//!   slot never stop a new client from getting as far as showing its certificate;
//! - **local reserve**: `N/16` (16) slots that no TLS connection may take: root's socket
//!   always gets in;
//! - **admin reserve**: `N/16` (16) slots that only `os:admin` (and the local socket) may
//!   take: readers, operators and maintenance clients share at most `N - N/8 - 2*N/16`
//!   (192) slots.
//!
//! Each reserve is at least 1. When a connection does not fit, the oldest idle connection
//! (no stream open, no answer waiting) of a class whose limit is reached makes room (as
//! before: a new client always gets an answer); a reader only ever makes room by closing
//! another reader or a handshake, never an admin's or the local socket's connection.
//!
//! When the handshake pool is full, the handshake closed is the oldest of the [`Source`]
//! (an IPv4 address, or an IPv6 /64) that holds the most: a client that floods the pool from
//! one address or one /64 only ever closes its own handshakes, never an admin's.

use std::net::IpAddr;
use std::time::Instant;

use base::client_key::{client_key, DEFAULT_V6_PREFIX};

/// Where a TLS connection comes from, as the handshake pool counts it: an IPv4 address
/// (IPv4-mapped IPv6 included), or the /64 of an IPv6 address, as the discovery server keys
/// its limits ([`base::client_key`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Source(IpAddr);

impl Source {
    /// The source of a peer address.
    pub fn of(ip: IpAddr) -> Self {
        Self(client_key(ip, DEFAULT_V6_PREFIX))
    }
}

/// Which pending handshake to close when their pool is full: of the source holding the most
/// (a connection of unknown source counts as a source of its own), the oldest. `pending`:
/// (key, source, accepted) of every handshake that may be closed.
pub fn handshake_victim<K: Copy>(pending: &[(K, Option<Source>, Instant)]) -> Option<K> {
    // At most `N/8` handshakes (32 by default): counting pairs is cheaper than a map.
    let held = |source: Option<Source>| match source {
        Some(s) => pending.iter().filter(|p| p.1 == Some(s)).count(),
        None => 1,
    };
    pending
        .iter()
        .map(|p| (held(p.1), p))
        .max_by(|(a, p), (b, q)| a.cmp(b).then(q.2.cmp(&p.2)))
        .map(|(_, p)| p.0)
}

/// What a connection counts as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// The local socket (root).
    Local,
    /// A TLS connection whose handshake is not done.
    Handshake,
    /// A TLS client with `os:admin`.
    Admin,
    /// Any other TLS client: `os:operator`, `os:reader`, maintenance.
    Other,
}

const ANY: &[Class] = &[Class::Handshake, Class::Other, Class::Admin, Class::Local];
const HANDSHAKES: &[Class] = &[Class::Handshake];
const UNTRUSTED: &[Class] = &[Class::Handshake, Class::Other];
const OTHERS: &[Class] = &[Class::Other];
const REMOTE_ROLES: &[Class] = &[Class::Other, Class::Admin];

/// The limits for a table of `total` connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// All connections.
    pub total: usize,
    /// TLS connections still in their handshake.
    pub handshakes: usize,
    /// Slots only the local socket may take.
    pub local_reserve: usize,
    /// Slots only the local socket and `os:admin` may take.
    pub admin_reserve: usize,
}

impl Limits {
    /// The split of a table of `total` connections.
    pub fn new(total: usize) -> Self {
        Self {
            total,
            handshakes: (total / 8).max(1),
            local_reserve: (total / 16).max(1),
            admin_reserve: (total / 16).max(1),
        }
    }

    /// Most TLS connections of every class together.
    fn remote(&self) -> usize {
        self.total.saturating_sub(self.local_reserve)
    }

    /// Most readers, operators and maintenance clients.
    fn others(&self) -> usize {
        self.remote().saturating_sub(self.admin_reserve + self.handshakes)
    }
}

/// How many connections of each class are open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// [`Class::Local`].
    pub local: usize,
    /// [`Class::Handshake`].
    pub handshake: usize,
    /// [`Class::Admin`].
    pub admin: usize,
    /// [`Class::Other`].
    pub other: usize,
}

impl Counts {
    /// Count one more of `class`.
    pub fn add(&mut self, class: Class) {
        *self.of(class) += 1;
    }

    fn of(&mut self, class: Class) -> &mut usize {
        match class {
            Class::Local => &mut self.local,
            Class::Handshake => &mut self.handshake,
            Class::Admin => &mut self.admin,
            Class::Other => &mut self.other,
        }
    }

    fn remote(&self) -> usize {
        self.handshake + self.admin + self.other
    }

    fn total(&self) -> usize {
        self.local + self.remote()
    }
}

/// Is there a slot for one more connection of `class` (the counts without it)? Err: the
/// classes one of whose idle connections, closed, would make room (none: refused).
pub fn fits(limits: &Limits, counts: &Counts, class: Class) -> Result<(), &'static [Class]> {
    let total = counts.total() < limits.total;
    let remote = counts.remote() < limits.remote();
    match class {
        Class::Local if total => Ok(()),
        Class::Local => Err(ANY),
        Class::Handshake if counts.handshake >= limits.handshakes => Err(HANDSHAKES),
        Class::Handshake if remote && total => Ok(()),
        Class::Handshake => Err(UNTRUSTED),
        Class::Other if counts.other >= limits.others() => Err(OTHERS),
        Class::Other | Class::Admin if remote && total => Ok(()),
        Class::Other => Err(OTHERS),
        Class::Admin => Err(REMOTE_ROLES),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_from_one_source_closes_its_own_handshakes() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + std::time::Duration::from_secs(s);
        let admin = Some(Source::of("192.0.2.1".parse().unwrap_or_else(|_| unreachable!())));
        let flood = |host: u16| {
            let ip = format!("2001:db8:0:1::{host:x}");
            Some(Source::of(ip.parse().unwrap_or_else(|_| unreachable!())))
        };
        // The admin's handshake is the oldest; 31 from one /64, each from its own address.
        let mut pending = vec![(0usize, admin, at(0))];
        pending.extend((1..32).map(|i| (i, flood(i as u16), at(i as u64))));
        assert_eq!(handshake_victim(&pending), Some(1), "the flood's oldest goes first");
        // With the flood gone, the oldest of equals goes.
        let two = [(7usize, admin, at(5)), (8, flood(1), at(3))];
        assert_eq!(handshake_victim(&two), Some(8));
        assert_eq!(handshake_victim::<usize>(&[]), None);
    }

    #[test]
    fn sources_are_ipv4_addresses_and_ipv6_64s() {
        let s = |ip: &str| Source::of(ip.parse().unwrap_or_else(|_| unreachable!()));
        assert_eq!(s("2001:db8::1"), s("2001:db8::ffff:1"));
        assert_ne!(s("2001:db8::1"), s("2001:db8:0:1::1"));
        assert_ne!(s("192.0.2.1"), s("192.0.2.2"));
        assert_eq!(s("::ffff:192.0.2.1"), s("192.0.2.1"));
    }

    #[test]
    fn the_default_split() {
        let l = Limits::new(256);
        assert_eq!((l.handshakes, l.local_reserve, l.admin_reserve, l.others()), (32, 16, 16, 192));
        let tiny = Limits::new(4);
        assert_eq!((tiny.handshakes, tiny.local_reserve, tiny.admin_reserve), (1, 1, 1));
    }

    /// Fill the table with readers as far as they may go, then see who still gets in.
    #[test]
    fn readers_never_take_the_admins_or_the_local_sockets_slots() {
        let l = Limits::new(256);
        let mut c = Counts::default();
        while fits(&l, &c, Class::Other).is_ok() {
            c.add(Class::Other);
        }
        assert_eq!(c.other, 192);
        // More readers: only another reader can make room.
        assert_eq!(fits(&l, &c, Class::Other), Err(OTHERS));
        // An admin's handshake starts, and the admin then has a slot.
        assert_eq!(fits(&l, &c, Class::Handshake), Ok(()));
        assert_eq!(fits(&l, &c, Class::Admin), Ok(()));
        c.add(Class::Admin);
        // Handshakes keep their whole pool.
        for _ in 0..32 {
            assert_eq!(fits(&l, &c, Class::Handshake), Ok(()));
            c.add(Class::Handshake);
        }
        assert_eq!(fits(&l, &c, Class::Handshake), Err(HANDSHAKES));
        // The local socket gets in whatever TLS clients hold.
        for _ in 0..16 {
            assert_eq!(fits(&l, &c, Class::Local), Ok(()));
            c.add(Class::Local);
        }
    }

    #[test]
    fn admins_fill_what_readers_leave_then_make_room_among_themselves() {
        let l = Limits::new(16);
        let mut c = Counts { admin: 15, ..Counts::default() };
        assert_eq!(fits(&l, &c, Class::Admin), Err(REMOTE_ROLES));
        assert_eq!(fits(&l, &c, Class::Other), Err(OTHERS));
        assert_eq!(fits(&l, &c, Class::Local), Ok(()));
        c.add(Class::Local);
        assert_eq!(fits(&l, &c, Class::Local), Err(ANY));
    }
}
