// SPDX-License-Identifier: Apache-2.0
//! What Router Advertisements said about DNS, per link, as resolver specs (RFC 8106).
//!
//! Each parsed RA ([`crate::ra_dns::RaDns`]) refreshes its link's servers and search domains:
//! an entry's lifetime restarts with every RA that carries it, a lifetime of 0 withdraws it
//! at once, `u32::MAX` keeps it for ever, and an entry no RA refreshed in time expires.
//! Several routers on one link share that link's list, which is bounded
//! ([`MAX_SERVERS`], [`MAX_DOMAINS`]); entries past the bound are dropped and counted until
//! one of the kept ones goes away. Link-local servers are dropped too: a resolver spec holds
//! no zone, and `/etc/resolv.conf` could not name the link.
//!
//! Pure: RAs and the time in, [`ResolverSpec`]s (operator layer, as DHCPv6's DNS) out.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv6Addr};
use std::time::{Duration, Instant};

use crate::ra_dns::{RaDns, Timed, MAX_DOMAINS, MAX_SERVERS};
use crate::resource::{ConfigLayer, ResolverSpec};

/// Links tracked at once: the kernel only forwards RAs from links that exist, but the table
/// must stay bounded whatever arrives.
pub const MAX_LINKS: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry<T> {
    value: T,
    /// `None`: for ever (lifetime `u32::MAX`).
    expires: Option<Instant>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct LinkDns {
    servers: Vec<Entry<Ipv6Addr>>,
    domains: Vec<Entry<String>>,
}

impl LinkDns {
    fn is_empty(&self) -> bool {
        self.servers.is_empty() && self.domains.is_empty()
    }
}

/// What one RA did to the table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Applied {
    /// The link's servers or domains changed (not only their lifetimes).
    pub changed: bool,
    /// Entries left out: past a bound, link-local, or a link past [`MAX_LINKS`].
    pub dropped: usize,
}

/// The RA-provided DNS of every link, keyed by interface index.
#[derive(Debug, Clone, Default)]
pub struct RaResolvers {
    links: BTreeMap<i32, LinkDns>,
}

/// Refresh, add or withdraw one entry. Returns (list changed, dropped).
fn upsert<T: PartialEq>(
    list: &mut Vec<Entry<T>>,
    item: &Timed<T>,
    value: T,
    now: Instant,
    cap: usize,
) -> (bool, bool) {
    let found = list.iter().position(|e| e.value == value);
    if item.lifetime == 0 {
        return match found {
            Some(i) => {
                list.remove(i);
                (true, false)
            }
            None => (false, false),
        };
    }
    let expires = (item.lifetime != u32::MAX)
        .then(|| now.checked_add(Duration::from_secs(u64::from(item.lifetime))))
        .flatten();
    match found {
        Some(i) => {
            if let Some(e) = list.get_mut(i) {
                e.expires = expires;
            }
            (false, false)
        }
        None if list.len() < cap => {
            list.push(Entry { value, expires });
            (true, false)
        }
        None => (false, true),
    }
}

impl RaResolvers {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Take in one RA's DNS options, received at `now`.
    pub fn apply(&mut self, ra: &RaDns, now: Instant) -> Applied {
        let mut out = Applied::default();
        if !self.links.contains_key(&ra.ifindex) && self.links.len() >= MAX_LINKS {
            out.dropped = ra.servers.len() + ra.domains.len();
            return out;
        }
        let link = self.links.entry(ra.ifindex).or_default();
        for s in &ra.servers {
            if s.value.is_unicast_link_local() {
                out.dropped += 1;
                continue;
            }
            let (changed, dropped) = upsert(&mut link.servers, s, s.value, now, MAX_SERVERS);
            out.changed |= changed;
            out.dropped += usize::from(dropped);
        }
        for d in &ra.domains {
            let (changed, dropped) =
                upsert(&mut link.domains, d, d.value.clone(), now, MAX_DOMAINS);
            out.changed |= changed;
            out.dropped += usize::from(dropped);
        }
        if link.is_empty() {
            self.links.remove(&ra.ifindex);
        }
        out
    }

    /// Drop what expired by `now`. Returns whether anything did.
    pub fn expire(&mut self, now: Instant) -> bool {
        let live = |e: Option<Instant>| e.is_none_or(|t| t > now);
        let mut changed = false;
        for link in self.links.values_mut() {
            let before = (link.servers.len(), link.domains.len());
            link.servers.retain(|e| live(e.expires));
            link.domains.retain(|e| live(e.expires));
            changed |= before != (link.servers.len(), link.domains.len());
        }
        self.links.retain(|_, l| !l.is_empty());
        changed
    }

    /// Nothing is known.
    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
    }

    /// When the next entry expires.
    pub fn next_expiry(&self) -> Option<Instant> {
        self.links
            .values()
            .flat_map(|l| {
                let servers = l.servers.iter().map(|e| e.expires);
                servers.chain(l.domains.iter().map(|e| e.expires))
            })
            .flatten()
            .min()
    }

    /// One operator-layer resolver spec per link with anything, by interface index.
    pub fn specs(&self) -> Vec<(i32, ResolverSpec)> {
        self.links
            .iter()
            .map(|(ix, l)| {
                let spec = ResolverSpec {
                    dns_servers: l.servers.iter().map(|e| IpAddr::V6(e.value)).collect(),
                    search_domains: l.domains.iter().map(|e| e.value.clone()).collect(),
                    search_domains_overridden: false,
                    layer: ConfigLayer::Operator,
                };
                (*ix, spec)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ra(ifindex: i32, servers: &[(&str, u32)], domains: &[(&str, u32)]) -> RaDns {
        RaDns {
            ifindex,
            servers: servers
                .iter()
                .map(|(s, l)| Timed { value: s.parse().unwrap(), lifetime: *l })
                .collect(),
            domains: domains
                .iter()
                .map(|(d, l)| Timed { value: (*d).to_owned(), lifetime: *l })
                .collect(),
            dropped: 0,
        }
    }

    fn servers(t: &RaResolvers, ix: i32) -> Vec<String> {
        let specs = t.specs();
        let spec = specs.iter().find(|(i, _)| *i == ix).map(|(_, s)| s.clone());
        spec.map(|s| s.dns_servers.iter().map(ToString::to_string).collect()).unwrap_or_default()
    }

    #[test]
    fn an_ra_becomes_an_operator_layer_spec() {
        let now = Instant::now();
        let mut t = RaResolvers::new();
        let a = t.apply(&ra(3, &[("2001:db8::53", 600)], &[("lab.example", 600)]), now);
        assert_eq!(a, Applied { changed: true, dropped: 0 });
        let specs = t.specs();
        assert_eq!(specs.len(), 1);
        let (ix, spec) = &specs[0];
        assert_eq!(*ix, 3);
        assert_eq!(spec.dns_servers, ["2001:db8::53".parse::<IpAddr>().unwrap()]);
        assert_eq!(spec.search_domains, ["lab.example"]);
        assert_eq!(spec.layer, ConfigLayer::Operator);
        assert_eq!(t.next_expiry(), Some(now + Duration::from_secs(600)));
    }

    #[test]
    fn lifetimes_expire_refresh_and_zero_withdraws() {
        let now = Instant::now();
        let mut t = RaResolvers::new();
        t.apply(&ra(3, &[("2001:db8::53", 10), ("2001:db8::54", 100)], &[("a.example", 10)]), now);
        // A new RA restarts the lifetime: not a change of the spec.
        let later = now + Duration::from_secs(8);
        let a = t.apply(&ra(3, &[("2001:db8::53", 10)], &[]), later);
        assert!(!a.changed);
        assert!(t.expire(now + Duration::from_secs(11)), "the domain expired");
        assert_eq!(servers(&t, 3), ["2001:db8::53", "2001:db8::54"]);
        assert!(t.specs()[0].1.search_domains.is_empty());
        assert!(t.expire(later + Duration::from_secs(10)));
        assert_eq!(servers(&t, 3), ["2001:db8::54"]);
        // Lifetime 0 withdraws at once; the empty link leaves the table.
        assert!(t.apply(&ra(3, &[("2001:db8::54", 0)], &[]), later).changed);
        assert!(t.specs().is_empty());
        assert_eq!(t.next_expiry(), None);
        // A withdrawal of something never seen changes nothing.
        assert!(!t.apply(&ra(3, &[("2001:db8::99", 0)], &[]), later).changed);
    }

    #[test]
    fn infinite_lifetime_never_expires() {
        let now = Instant::now();
        let mut t = RaResolvers::new();
        t.apply(&ra(2, &[("2001:db8::53", u32::MAX)], &[]), now);
        assert_eq!(t.next_expiry(), None);
        assert!(!t.expire(now + Duration::from_secs(1 << 40)));
        assert_eq!(servers(&t, 2), ["2001:db8::53"]);
    }

    #[test]
    fn bounded_per_link_and_in_links() {
        let now = Instant::now();
        let mut t = RaResolvers::new();
        // Two routers on one link: the second's servers fill up to the bound.
        let first: Vec<String> = (1..=6).map(|i| format!("2001:db8::{i}")).collect();
        let second: Vec<String> = (7..=12).map(|i| format!("2001:db8::{i}")).collect();
        fn as_ra(v: &[String]) -> Vec<(&str, u32)> {
            v.iter().map(|s| (s.as_str(), 60)).collect()
        }
        t.apply(&ra(3, &as_ra(&first), &[]), now);
        let a = t.apply(&ra(3, &as_ra(&second), &[]), now);
        assert_eq!(a.dropped, 12 - MAX_SERVERS);
        assert_eq!(servers(&t, 3).len(), MAX_SERVERS);
        // A link-local server has no zone in a resolver spec.
        assert_eq!(t.apply(&ra(4, &[("fe80::1", 60)], &[]), now).dropped, 1);
        assert!(servers(&t, 4).is_empty());
        for ix in 0..MAX_LINKS as i32 + 5 {
            t.apply(&ra(100 + ix, &[("2001:db8::53", 60)], &[]), now);
        }
        assert_eq!(t.specs().len(), MAX_LINKS);
    }
}
