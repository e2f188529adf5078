// SPDX-License-Identifier: Apache-2.0
//! A small sans-IO DNS stub resolver: A and AAAA lookups over UDP to the node's resolvers,
//! for the few names keelson itself needs (time servers). No libc resolver exists in a static
//! musl binary that PID 1 could use without blocking, so this one runs in the event loop.
//!
//! Bounded everywhere: a reply is read only as far as its lengths allow ([`wire`]), each
//! lookup sends at most [`ATTEMPTS`] rounds, a failed name is retried after
//! [`RETRY_AFTER`], and answers are kept for their TTL clamped to [`MIN_TTL`]..[`MAX_TTL`].
//! A reply is taken only from a configured resolver's port 53 with the random ID of an
//! outstanding query and the same question.

pub mod wire;

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use wire::{DnsError, TYPE_A, TYPE_AAAA};

/// The DNS port.
pub const DNS_PORT: u16 = 53;
/// The wait before a query is sent again (to the next resolver).
pub const RETRANSMIT: Duration = Duration::from_secs(2);
/// Rounds of queries per lookup before it counts as failed.
pub const ATTEMPTS: u32 = 4;
/// When a failed lookup is tried again.
pub const RETRY_AFTER: Duration = Duration::from_secs(30);
/// Answers are kept at least this long...
pub const MIN_TTL: Duration = Duration::from_secs(60);
/// ... and at most this long.
pub const MAX_TTL: Duration = Duration::from_secs(3600);
/// Most addresses kept per name (a pool name gives several servers, not dozens).
pub const MAX_ADDRS: usize = 4;

#[derive(Clone, Debug)]
struct Query {
    qtype: u16,
    id: u16,
    done: bool,
}

#[derive(Clone, Debug)]
struct Lookup {
    queries: [Query; 2],
    attempt: u32,
    next_at: Instant,
    found: BTreeSet<IpAddr>,
    ttl: u32,
    /// The addresses in use: replaced only when a lookup completes.
    addrs: Vec<IpAddr>,
    /// Why the last lookup failed.
    error: Option<String>,
    resolving: bool,
}

/// What a lookup came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// `name` resolved to these addresses (possibly none).
    Resolved(String, Vec<IpAddr>),
    /// `name` could not be resolved.
    Failed(String, String),
}

/// The stub resolver.
#[derive(Clone, Debug, Default)]
pub struct Stub {
    servers: Vec<IpAddr>,
    lookups: BTreeMap<String, Lookup>,
    rng: u64,
}

impl Stub {
    /// A stub with no resolvers and no names yet.
    pub fn new(rng_seed: u64) -> Self {
        Self { rng: rng_seed ^ 0x2545_f491_4f6c_dd1d, ..Self::default() }
    }

    fn random(&mut self) -> u16 {
        let mut x = self.rng.max(1);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        (x >> 24) as u16
    }

    /// The resolvers to ask; a change restarts lookups that have not finished.
    pub fn set_servers(&mut self, servers: Vec<IpAddr>, now: Instant) {
        if servers != self.servers {
            self.servers = servers;
            for l in self.lookups.values_mut().filter(|l| l.resolving || l.error.is_some()) {
                l.attempt = 0;
                l.resolving = true;
                l.next_at = now;
            }
        }
    }

    /// Resolve exactly these names (already validated); others are forgotten.
    pub fn want(&mut self, names: &BTreeSet<String>, now: Instant) {
        self.lookups.retain(|n, _| names.contains(n));
        for name in names {
            if !self.lookups.contains_key(name) {
                let queries = [
                    Query { qtype: TYPE_A, id: 0, done: false },
                    Query { qtype: TYPE_AAAA, id: 0, done: false },
                ];
                let l = Lookup {
                    queries,
                    attempt: 0,
                    next_at: now,
                    found: BTreeSet::new(),
                    ttl: u32::MAX,
                    addrs: Vec::new(),
                    error: None,
                    resolving: true,
                };
                self.lookups.insert(name.clone(), l);
            }
        }
    }

    /// The addresses `name` resolved to last (empty while unknown).
    pub fn addresses(&self, name: &str) -> &[IpAddr] {
        self.lookups.get(name).map(|l| l.addrs.as_slice()).unwrap_or_default()
    }

    /// Whether `from` is one of the resolvers.
    pub fn is_server(&self, from: SocketAddr) -> bool {
        from.port() == DNS_PORT && self.servers.contains(&from.ip())
    }

    /// When a lookup needs [`Stub::on_timer`].
    pub fn poll_at(&self) -> Option<Instant> {
        if self.servers.is_empty() {
            return None;
        }
        self.lookups.values().map(|l| l.next_at).min()
    }

    /// Send what is due: the datagrams and where to; events for lookups that gave up.
    pub fn on_timer(&mut self, now: Instant) -> (Vec<(SocketAddr, Vec<u8>)>, Vec<Event>) {
        let (mut out, mut events) = (Vec::new(), Vec::new());
        if self.servers.is_empty() {
            return (out, events);
        }
        let names: Vec<String> =
            self.lookups.iter().filter(|(_, l)| l.next_at <= now).map(|(n, _)| n.clone()).collect();
        for name in names {
            let ids = [self.random(), self.random()];
            let servers = self.servers.len();
            let Some(l) = self.lookups.get_mut(&name) else { continue };
            if !l.resolving {
                // The answer expired (or the retry time came): look it up again.
                l.resolving = true;
                l.attempt = 0;
                l.found.clear();
                l.ttl = u32::MAX;
                for q in &mut l.queries {
                    q.done = false;
                }
            }
            if l.attempt >= ATTEMPTS * servers.min(3) as u32 {
                l.resolving = false;
                l.next_at = now + RETRY_AFTER;
                let why = "no resolver answered".to_owned();
                l.error = Some(why.clone());
                events.push(Event::Failed(name, why));
                continue;
            }
            let server = self.servers.get(l.attempt as usize % servers).copied();
            l.attempt += 1;
            l.next_at = now + RETRANSMIT;
            let Some(server) = server else { continue };
            for (q, id) in l.queries.iter_mut().zip(ids) {
                if !q.done {
                    q.id = id;
                    out.push((SocketAddr::new(server, DNS_PORT), wire::query(id, &name, q.qtype)));
                }
            }
        }
        (out, events)
    }

    /// A datagram from a resolver; an event when it completes a lookup.
    pub fn on_packet(&mut self, from: SocketAddr, bytes: &[u8], now: Instant) -> Option<Event> {
        if !self.is_server(from) {
            return None;
        }
        let id = wire_id(bytes)?;
        let (name, l) = self
            .lookups
            .iter_mut()
            .find(|(_, l)| l.resolving && l.queries.iter().any(|q| !q.done && q.id == id))?;
        let q = l.queries.iter_mut().find(|q| !q.done && q.id == id)?;
        match wire::parse_reply(bytes, id, name, q.qtype) {
            Ok((addrs, ttl)) => {
                q.done = true;
                if !addrs.is_empty() {
                    l.ttl = l.ttl.min(ttl);
                }
                l.found.extend(addrs);
            }
            Err(DnsError::NotOurs) => return None,
            Err(e) => {
                log::debug!(target: "dns", "{from}: {e}");
                // NXDOMAIN or a server error: this type has no answer from this server.
                q.done = true;
                if !matches!(e, DnsError::NxDomain) {
                    l.error = Some(e.to_string());
                }
            }
        }
        if l.queries.iter().any(|q| !q.done) {
            return None;
        }
        l.resolving = false;
        l.attempt = 0;
        if l.found.is_empty() {
            l.next_at = now + RETRY_AFTER;
            let why = l.error.take().unwrap_or_else(|| "no address".to_owned());
            l.error = Some(why.clone());
            return Some(Event::Failed(name.clone(), why));
        }
        let ttl = Duration::from_secs(u64::from(l.ttl)).clamp(MIN_TTL, MAX_TTL);
        l.next_at = now + ttl;
        l.error = None;
        l.addrs = l.found.iter().copied().take(MAX_ADDRS).collect();
        Some(Event::Resolved(name.clone(), l.addrs.clone()))
    }
}

fn wire_id(bytes: &[u8]) -> Option<u16> {
    Some(u16::from_be_bytes([*bytes.first()?, *bytes.get(1)?]))
}

#[cfg(test)]
mod tests {
    use super::wire::tests::reply;
    use super::*;

    fn names(n: &[&str]) -> BTreeSet<String> {
        n.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_lookup_asks_a_and_aaaa_and_completes_with_both() {
        let now = Instant::now();
        let mut s = Stub::new(1);
        s.want(&names(&["ntp.example"]), now);
        assert_eq!(s.poll_at(), None, "no resolvers, nothing to do");
        s.set_servers(vec!["192.0.2.53".parse().unwrap()], now);
        let (out, _) = s.on_timer(now);
        assert_eq!(out.len(), 2);
        let ns: SocketAddr = "192.0.2.53:53".parse().unwrap();
        assert!(out.iter().all(|(to, _)| *to == ns));
        let a = reply(&out[0].1, 0, &[(&[0xc0, 12], TYPE_A, &[192, 0, 2, 1])]);
        let aaaa = reply(&out[1].1, 0, &[]);
        // From elsewhere: ignored.
        assert_eq!(s.on_packet("192.0.2.54:53".parse().unwrap(), &a, now), None);
        assert_eq!(s.on_packet(ns, &a, now), None, "AAAA still outstanding");
        assert!(s.addresses("ntp.example").is_empty());
        let ev = s.on_packet(ns, &aaaa, now);
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        assert_eq!(ev, Some(Event::Resolved("ntp.example".into(), vec![ip])));
        assert_eq!(s.addresses("ntp.example"), [ip]);
        // A replay changes nothing; the answer is kept for its TTL (300 s).
        assert_eq!(s.on_packet(ns, &a, now), None);
        assert_eq!(s.poll_at(), Some(now + Duration::from_secs(300)));
    }

    #[test]
    fn silence_rotates_resolvers_then_fails_and_retries_later() {
        let now = Instant::now();
        let mut s = Stub::new(2);
        s.set_servers(vec!["192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap()], now);
        s.want(&names(&["ntp.example"]), now);
        let mut t = now;
        let mut to = Vec::new();
        let mut failed = None;
        for _ in 0..20 {
            let (out, ev) = s.on_timer(t);
            to.extend(out.iter().map(|(a, _)| a.ip().to_string()));
            if let Some(e) = ev.into_iter().next() {
                failed = Some(e);
                break;
            }
            t = s.poll_at().unwrap();
        }
        assert_eq!(
            failed,
            Some(Event::Failed("ntp.example".into(), "no resolver answered".into()))
        );
        assert!(to.contains(&"192.0.2.1".to_owned()) && to.contains(&"192.0.2.2".to_owned()));
        assert_eq!(to.len(), 2 * 2 * ATTEMPTS as usize);
        assert_eq!(s.poll_at(), Some(t + RETRY_AFTER));
    }

    #[test]
    fn nxdomain_fails_the_name() {
        let now = Instant::now();
        let mut s = Stub::new(3);
        s.set_servers(vec!["192.0.2.1".parse().unwrap()], now);
        s.want(&names(&["nope.example"]), now);
        let (out, _) = s.on_timer(now);
        let ns: SocketAddr = "192.0.2.1:53".parse().unwrap();
        assert_eq!(s.on_packet(ns, &reply(&out[0].1, 3, &[]), now), None);
        let ev = s.on_packet(ns, &reply(&out[1].1, 3, &[]), now);
        assert_eq!(ev, Some(Event::Failed("nope.example".into(), "no address".into())));
        s.want(&names(&[]), now);
        assert_eq!(s.poll_at(), None);
    }
}
