// SPDX-License-Identifier: Apache-2.0
//! Mutation fuzzing of the RA DNS parser ([`crate::ra_dns`]) on the shared mutator
//! (`testkit::fuzzkit`, docs/fuzzing.md); `scripts/fuzz radns` runs it long.
//!
//! Seeds are `RTM_NEWNDUSEROPT` payloads for RAs with RDNSS and DNSSL options (and one
//! with an option keelson skips). Each mutant must parse or be refused without a panic, and
//! what parses must respect the bounds and checks PID 1 relies on: at most
//! [`MAX_SERVERS`](crate::ra_dns::MAX_SERVERS) unicast servers and
//! [`MAX_DOMAINS`](crate::ra_dns::MAX_DOMAINS) valid domains, none twice; and the per-link
//! table ([`crate::ra_resolvers`]) that turns it into a resolver spec keeps those bounds.

use std::net::Ipv6Addr;

use testkit::fuzzkit::{self, LenField, Mutator, Target, Verdict};

use crate::ra_dns::tests::{dnssl_opt, message, rdnss_opt};
use crate::ra_dns::{self, ICMPV6_ROUTER_ADVERTISEMENT, MAX_DOMAINS, MAX_SERVERS};

fn seeds() -> Vec<Vec<u8>> {
    let s1: Ipv6Addr = "2001:db8::53".parse().unwrap();
    let s2: Ipv6Addr = "fd00:6::1".parse().unwrap();
    let mut both = rdnss_opt(600, &[s1, s2]);
    both.extend(dnssl_opt(300, &["example.com", "lab.example.net"]));
    let mut skipped = vec![3, 4];
    skipped.extend([0u8; 30]);
    skipped.extend(rdnss_opt(u32::MAX, &[s1]));
    vec![
        message(2, ICMPV6_ROUTER_ADVERTISEMENT, &both),
        message(2, ICMPV6_ROUTER_ADVERTISEMENT, &skipped),
        message(7, ICMPV6_ROUTER_ADVERTISEMENT, &dnssl_opt(0, &["a.b", "c"])),
    ]
}

/// The header's options length, then each option's length byte (units of 8 bytes).
fn lengths(b: &[u8]) -> Vec<LenField> {
    let mut out = vec![LenField::le(2, 2)];
    let mut at = ra_dns::NDUSEROPT_HEADER;
    while let Some(&units) = b.get(at + 1) {
        out.push(LenField::be(at + 1, 1));
        if units == 0 {
            break;
        }
        at += usize::from(units) * 8;
    }
    out
}

fn oracle(input: &[u8]) -> Result<Verdict, String> {
    let Ok(parsed) = ra_dns::parse_message(input) else { return Ok(Verdict::Refused) };
    let Some(dns) = parsed else { return Ok(Verdict::Refused) };
    if dns.servers.len() > MAX_SERVERS || dns.domains.len() > MAX_DOMAINS {
        return Err(format!("past the bounds: {dns:?}"));
    }
    for (i, s) in dns.servers.iter().enumerate() {
        if s.value.is_unspecified() || s.value.is_multicast() || s.value.is_loopback() {
            return Err(format!("server {} kept", s.value));
        }
        if dns.servers[..i].iter().any(|o| o.value == s.value) {
            return Err(format!("server {} twice", s.value));
        }
    }
    for (i, d) in dns.domains.iter().enumerate() {
        if !base::names::is_domain(&d.value) || d.value.len() > 253 {
            return Err(format!("domain {:?} kept", d.value));
        }
        if dns.domains[..i].iter().any(|o| o.value == d.value) {
            return Err(format!("domain {:?} twice", d.value));
        }
    }
    // What reaches /etc/resolv.conf: the per-link table keeps its bounds and drops
    // link-local servers, whatever the RA, applied twice (a refresh changes nothing).
    let now = std::time::Instant::now();
    let mut table = crate::ra_resolvers::RaResolvers::new();
    table.apply(&dns, now);
    if table.apply(&dns, now).changed {
        return Err(format!("the same RA twice changed the table: {dns:?}"));
    }
    for (_, spec) in table.specs() {
        let link_local = spec.dns_servers.iter().any(|ip| match ip {
            std::net::IpAddr::V6(v6) => v6.is_unicast_link_local(),
            std::net::IpAddr::V4(_) => true,
        });
        if spec.dns_servers.len() > MAX_SERVERS
            || spec.search_domains.len() > MAX_DOMAINS
            || link_local
        {
            return Err(format!("resolver spec past its checks: {spec:?}"));
        }
    }
    Ok(Verdict::Accepted)
}

#[test]
fn fuzz_target_radns() {
    let dict: &[&[u8]] = &[&[25], &[31], &[134], &[0xc0], &[63], &[64], &[0xff; 4]];
    let stats = fuzzkit::run(
        Target {
            name: "radns",
            crate_dir: env!("CARGO_MANIFEST_DIR"),
            seeds: seeds(),
            mutator: Mutator { dict, lengths: Some(lengths), max_len: 2048 },
            default_iters: 20_000,
        },
        oracle,
    );
    assert!(stats.accepted > 0, "no mutant parsed: the seeds are not reaching the parser");
}
