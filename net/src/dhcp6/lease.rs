// SPDX-License-Identifier: Apache-2.0
//! The lease a DHCPv6 exchange yields, and its translation into operator-layer specs
//! (docs/talos.md: DHCPv6).

use std::net::{IpAddr, Ipv6Addr};
use std::time::{Duration, Instant};

use ipnet::{IpNet, Ipv6Net};
use serde::{Deserialize, Serialize};

use crate::names;
use crate::resource::{
    AddressSpec, ConfigLayer, HostnameSpec, LayerSpecs, ResolverSpec, TimeServerSpec,
};

/// RFC 8415 §7.7: `0xffffffff` is infinity for lifetimes, T1 and T2.
pub const INFINITY: u32 = u32::MAX;

/// A bound DHCPv6 lease: one IA_NA address and the configuration options of the REPLY.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lease6 {
    /// The IA_NA address (IAADDR).
    pub address: Ipv6Addr,
    /// The IAID of the IA_NA it came in.
    pub iaid: u32,
    /// The server's DUID (option 2): RENEW names it (RFC 8415 §18.2.4).
    pub server_id: Vec<u8>,
    /// IAADDR preferred lifetime, seconds.
    pub preferred_lifetime: u32,
    /// IAADDR valid lifetime, seconds: the lease ends there.
    pub valid_lifetime: u32,
    /// T1 in seconds (IA_NA, or 0.5 × preferred when the server leaves it to us).
    pub t1: u32,
    /// T2 in seconds (IA_NA, or 0.8 × preferred).
    pub t2: u32,
    /// Option 23 (RFC 3646).
    #[serde(default)]
    pub dns: Vec<Ipv6Addr>,
    /// Option 24 (RFC 3646), without trailing dots.
    #[serde(default)]
    pub search: Vec<String>,
    /// Option 56 server addresses and FQDNs (RFC 5908), then option 31 SNTP servers (RFC
    /// 4075) not already listed.
    #[serde(default)]
    pub ntp: Vec<String>,
    /// Option 39 (RFC 4704), only kept when the client did not send its own name.
    #[serde(default)]
    pub fqdn: Option<String>,
    /// When the exchange that produced the lease started: lifetimes run from there (RFC 8415
    /// §18.2.10.1). Monotonic time does not survive a reboot, so it is not persisted.
    #[serde(skip)]
    pub acquired_at: Option<Instant>,
}

impl Lease6 {
    fn at(&self, secs: u32) -> Option<Instant> {
        if secs == INFINITY {
            return None;
        }
        self.acquired_at?.checked_add(Duration::from_secs(u64::from(secs)))
    }

    /// When RENEW starts; `None` when infinite.
    pub fn t1_at(&self) -> Option<Instant> {
        self.at(self.t1)
    }

    /// When REBIND starts.
    pub fn t2_at(&self) -> Option<Instant> {
        self.at(self.t2)
    }

    /// When the valid lifetime ends and the address must go.
    pub fn expires_at(&self) -> Option<Instant> {
        self.at(self.valid_lifetime)
    }

    fn remaining(&self, secs: u32, now: Instant) -> Option<u32> {
        if secs == INFINITY {
            return None;
        }
        match self.at(secs) {
            Some(end) => Some(
                u32::try_from(end.saturating_duration_since(now).as_secs()).unwrap_or(INFINITY - 1),
            ),
            None => Some(secs),
        }
    }
}

/// Translate a lease into specs at the operator layer (docs/talos.md: DHCPv6), as a pure function.
///
/// * The address is a `/128` as Talos does: on-link prefixes come from router advertisements
///   (`accept_ra=2`), not from DHCPv6, which carries no prefix length. No routes.
/// * Its valid and preferred lifetimes are what is left of the lease at `now`, so a renewal
///   that keeps the address only changes lifetimes (replaced in place by the address
///   controller, never deleted and re-added), and the kernel drops the address by itself if
///   keelson ever fails to.
/// * DNS servers and the search list become one resolver spec, NTP servers one time-server
///   spec, and the FQDN a hostname spec (first label, rest as domain).
pub fn lease_to_specs(lease: &Lease6, link: &str, now: Instant) -> LayerSpecs {
    let layer = ConfigLayer::Operator;
    let mut specs = LayerSpecs::default();

    let mut address = AddressSpec::new(link, IpNet::V6(Ipv6Net::from(lease.address)), layer);
    address.valid_lifetime = lease.remaining(lease.valid_lifetime, now);
    // RFC 8415 §21.6 discards preferred > valid, so the min only guards a hand-made lease.
    address.preferred_lifetime =
        lease.remaining(lease.preferred_lifetime.min(lease.valid_lifetime), now);
    specs.addresses.push(address);

    // Names from the server go to /etc and the kernel: only valid ones (RFC 1123), each
    // refusal logged once with the value escaped; the rest of the lease applies.
    let search: Vec<String> = lease
        .search
        .iter()
        .filter_map(|d| match names::check_domain(d) {
            Ok(d) => Some(d.to_owned()),
            Err(err) => {
                log::warn!(
                    "dhcp6 on {link}: ignoring domain (option 24) \"{}\": {err}",
                    names::escape(d, 80)
                );
                None
            }
        })
        .collect();
    if !lease.dns.is_empty() || !search.is_empty() {
        specs.resolvers.push(ResolverSpec {
            dns_servers: lease.dns.iter().map(|ip| IpAddr::V6(*ip)).collect(),
            search_domains: search,
            search_domains_overridden: false,
            layer,
        });
    }

    if !lease.ntp.is_empty() {
        specs.time_servers.push(TimeServerSpec {
            time_servers: lease.ntp.clone(),
            use_nts: false,
            layer,
        });
    }

    if let Some(name) = &lease.fqdn {
        match HostnameSpec::parse_fqdn(name, layer) {
            Ok(spec) => specs.hostnames.push(spec),
            Err(err) => log::warn!(
                "dhcp6 on {link}: ignoring FQDN (option 39) \"{}\": {err}",
                names::escape(name, 80)
            ),
        }
    }

    specs
}
