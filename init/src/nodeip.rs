// SPDX-License-Identifier: Apache-2.0
//! Choosing the kubelet's `--node-ip`: one stable address (Talos
//! restarted the kubelet whenever a load balancer address appeared).
//!
//! Candidates are the node's current addresses, minus virtual IPs, filtered by
//! `nodeIP.validSubnets` (applied in order: a subnet adds matches, `!subnet` removes them; a
//! list of only exclusions starts from everything). The previous choice is kept while it is
//! still a candidate; otherwise NodeAddress `default` is preferred, then the first candidate.

use std::net::IpAddr;

use net::config::CidrFilter;

pub(crate) fn allowed(ip: &IpAddr, filters: &[CidrFilter]) -> bool {
    let mut ok = filters.iter().all(|f| f.exclude);
    for f in filters {
        if f.network.contains(ip) {
            ok = !f.exclude;
        }
    }
    ok
}

/// The node IP, or `None` when no address qualifies yet.
pub fn choose(
    previous: Option<IpAddr>,
    default: Option<IpAddr>,
    current: &[IpAddr],
    valid_subnets: &[CidrFilter],
    vips: &[IpAddr],
) -> Option<IpAddr> {
    let candidate =
        |ip: &IpAddr| current.contains(ip) && !vips.contains(ip) && allowed(ip, valid_subnets);
    previous
        .filter(candidate)
        .or_else(|| default.filter(candidate))
        .or_else(|| current.iter().copied().find(|ip| candidate(ip)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap_or_else(|e| unreachable!("{e}"))
    }

    fn filter(s: &str) -> CidrFilter {
        let (exclude, net) = s.strip_prefix('!').map_or((false, s), |n| (true, n));
        CidrFilter { exclude, network: net.parse().unwrap_or_else(|e| unreachable!("{e}")) }
    }

    #[test]
    fn stable_and_never_a_vip() {
        let current = [ip("10.0.0.5"), ip("10.0.0.50"), ip("192.168.1.5")];
        assert_eq!(choose(None, Some(ip("10.0.0.5")), &current, &[], &[]), Some(ip("10.0.0.5")));
        // A new address appears and sorts first: the choice does not move.
        let more = [ip("10.0.0.1"), ip("10.0.0.5"), ip("10.0.0.50")];
        assert_eq!(
            choose(Some(ip("10.0.0.5")), Some(ip("10.0.0.1")), &more, &[], &[]),
            Some(ip("10.0.0.5"))
        );
        // The default is a VIP: skipped.
        assert_eq!(
            choose(
                None,
                Some(ip("10.0.0.50")),
                &[ip("10.0.0.50"), ip("10.0.0.5")],
                &[],
                &[ip("10.0.0.50")]
            ),
            Some(ip("10.0.0.5"))
        );
    }

    #[test]
    fn valid_subnets_in_order() {
        let current = [ip("10.0.0.3"), ip("10.0.0.5"), ip("192.168.1.5")];
        let f = [filter("10.0.0.0/8"), filter("!10.0.0.3/32")];
        assert_eq!(choose(None, Some(ip("10.0.0.3")), &current, &f, &[]), Some(ip("10.0.0.5")));
        assert_eq!(
            choose(None, None, &current, &[filter("!10.0.0.0/8")], &[]),
            Some(ip("192.168.1.5"))
        );
        assert_eq!(choose(None, None, &current, &[filter("172.16.0.0/12")], &[]), None);
    }
}
