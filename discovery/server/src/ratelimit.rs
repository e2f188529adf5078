// SPDX-License-Identifier: Apache-2.0
//! Per-source-address token buckets: each address may make `rate` calls a second on average
//! and `burst` at once. A call with no token left is refused at once (ResourceExhausted)
//! rather than parked until one is due: the single-threaded loop then holds no waiting calls,
//! and a client told to slow down backs off, as Talos's does after any failed refresh.
//!
//! Buckets (and the per-address connection caps) are keyed by [`client_key`]: an IPv4 client
//! by its address, an IPv6 client by its prefix, since one host is commonly handed a whole
//! /64 (RFC 6177) and could otherwise take a fresh bucket for every call.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Instant;

pub use base::client_key::{client_key, DEFAULT_V6_PREFIX};

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// The buckets of every address seen lately.
#[derive(Debug)]
pub struct RateLimiter {
    rate: f64,
    burst: f64,
    max_addresses: usize,
    buckets: HashMap<IpAddr, Bucket>,
}

impl RateLimiter {
    /// `rate` calls a second, `burst` at once, at most `max_addresses` addresses tracked.
    pub fn new(rate: f64, burst: u32, max_addresses: usize) -> Self {
        RateLimiter {
            rate: rate.max(0.0),
            burst: f64::from(burst.max(1)),
            max_addresses,
            buckets: HashMap::new(),
        }
    }

    /// Take one token for `ip`; false when it has none left (or, under a flood of distinct
    /// addresses, when no bucket can be made for it).
    pub fn allow(&mut self, ip: IpAddr, now: Instant) -> bool {
        if !self.buckets.contains_key(&ip) && self.buckets.len() >= self.max_addresses {
            self.gc(now);
            if self.buckets.len() >= self.max_addresses {
                return false;
            }
        }
        let (rate, burst) = (self.rate, self.burst);
        let b = self.buckets.entry(ip).or_insert(Bucket { tokens: burst, at: now });
        let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
        b.tokens = (b.tokens + elapsed * rate).min(burst);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Forget addresses whose bucket has filled up again: they are as good as new.
    pub fn gc(&mut self, now: Instant) {
        let (rate, burst) = (self.rate, self.burst);
        self.buckets.retain(|_, b| {
            b.tokens + now.saturating_duration_since(b.at).as_secs_f64() * rate < burst
        });
    }

    /// Addresses tracked.
    pub fn len(&self) -> usize {
        self.buckets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv6Addr;
    use std::time::Duration;

    #[test]
    fn burst_then_refill_per_address() {
        let mut l = RateLimiter::new(1.0, 60, 10);
        let t0 = Instant::now();
        let a: IpAddr = "1.2.3.4".parse().unwrap();
        let b: IpAddr = "5.6.7.8".parse().unwrap();
        for _ in 0..60 {
            assert!(l.allow(a, t0));
        }
        assert!(!l.allow(a, t0));
        assert!(l.allow(b, t0), "another address has its own bucket");
        assert!(l.allow(a, t0 + Duration::from_secs(1)));
        assert!(!l.allow(a, t0 + Duration::from_secs(1)));
        l.gc(t0 + Duration::from_secs(30));
        assert_eq!(l.len(), 1, "b is full again, a is not");
        l.gc(t0 + Duration::from_secs(120));
        assert!(l.is_empty());
    }

    #[test]
    fn ipv6_clients_are_keyed_by_prefix_ipv4_by_address() {
        let k = |s: &str, p: u8| client_key(s.parse().unwrap(), p);
        assert_eq!(k("2001:db8:1:2:aaaa::1", 64), k("2001:db8:1:2:ffff::9", 64));
        assert_eq!(k("2001:db8:1:2:aaaa::1", 64), "2001:db8:1:2::".parse::<IpAddr>().unwrap());
        assert_ne!(k("2001:db8:1:2::1", 64), k("2001:db8:1:3::1", 64));
        assert_eq!(k("2001:db8:1:2::1", 48), k("2001:db8:1:3::1", 48));
        assert_ne!(k("2001:db8::1", 128), k("2001:db8::2", 128));
        assert_eq!(k("2001:db8::1", 0), "::".parse::<IpAddr>().unwrap());
        assert_eq!(k("2001:db8::1", 200), k("2001:db8::1", 128));
        assert_eq!(k("192.0.2.1", 64), "192.0.2.1".parse::<IpAddr>().unwrap());
        assert_ne!(k("192.0.2.1", 64), k("192.0.2.2", 64));
        assert_eq!(k("::ffff:192.0.2.1", 64), k("192.0.2.1", 64));
    }

    #[test]
    fn one_ipv6_64_shares_one_bucket() {
        let mut l = RateLimiter::new(0.0, 60, 1000);
        let t0 = Instant::now();
        for i in 0..60u16 {
            let ip = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 7, i, i, i, 1));
            assert!(l.allow(client_key(ip, DEFAULT_V6_PREFIX), t0));
        }
        let next = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 7, 0xffff, 0, 0, 2));
        assert!(!l.allow(client_key(next, DEFAULT_V6_PREFIX), t0), "the 61st call of the /64");
        let other = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 8, 0, 0, 0, 1));
        assert!(l.allow(client_key(other, DEFAULT_V6_PREFIX), t0), "another /64");
    }

    #[test]
    fn a_flood_of_addresses_is_bounded() {
        let mut l = RateLimiter::new(15.0, 60, 2);
        let t0 = Instant::now();
        assert!(l.allow("10.0.0.1".parse().unwrap(), t0));
        assert!(l.allow("10.0.0.2".parse().unwrap(), t0));
        assert!(!l.allow("10.0.0.3".parse().unwrap(), t0));
        assert!(l.allow("10.0.0.3".parse().unwrap(), t0 + Duration::from_secs(10)));
        assert_eq!(l.len(), 1);
    }
}
