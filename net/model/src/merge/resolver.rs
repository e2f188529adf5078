// SPDX-License-Identifier: Apache-2.0
//! Resolver merge (docs/talos.md: Merge): name servers merged per address family, search domains
//! prepended.

use std::net::IpAddr;

use super::fold::{contributors, sorted_by_id, Merged, MergedSpec, Provenance};
use crate::resource::{ConfigLayer, ResolverSpec, RESOLVER_ID};

/// A list entry with the input ID it came from, so provenance survives reordering and
/// partial replacement.
type Owned<'a, T> = Vec<(T, &'a str)>;

/// "Smart merge" of name servers across layers (docs/talos.md: Merge).
///
/// An empty list takes the new one. Otherwise the first matching case applies, as in the Talos
/// `switch`: old IPv4 servers are kept (after the new ones) if the new list has none, else old
/// IPv6 servers are kept if the new list has none, else the new list replaces. So a v6-only
/// DHCPv6 answer does not discard the v4 defaults: `[2001:db8::53, 1.1.1.1, 8.8.8.8]`.
fn smart_merge<'a>(old: Owned<'a, IpAddr>, new: Owned<'a, IpAddr>) -> Owned<'a, IpAddr> {
    if old.is_empty() {
        return new;
    }
    let has = |list: &Owned<'a, IpAddr>, v4: bool| list.iter().any(|(ip, _)| ip.is_ipv4() == v4);
    let keep_v4 = if has(&old, true) && !has(&new, true) {
        Some(true)
    } else if has(&old, false) && !has(&new, false) {
        Some(false)
    } else {
        None
    };
    match keep_v4 {
        Some(v4) => {
            let kept = old.into_iter().filter(|(ip, _)| ip.is_ipv4() == v4);
            new.into_iter().chain(kept).collect()
        }
        None => new,
    }
}

/// Talos `mergeSearchDomains`: domains of `incoming` not yet present are **prepended** in
/// their own order; existing domains keep their order behind them.
fn merge_search_domains<'a>(
    existing: Owned<'a, &'a str>,
    incoming: Owned<'a, &'a str>,
) -> Owned<'a, &'a str> {
    let mut out: Owned<'a, &'a str> = Vec::with_capacity(existing.len() + incoming.len());
    for (domain, id) in incoming {
        let known = |list: &Owned<'a, &'a str>| list.iter().any(|(d, _)| *d == domain);
        if !known(&existing) && !known(&out) {
            out.push((domain, id));
        }
    }
    out.extend(existing);
    out
}

/// Merge layered resolver specs into the singleton `resolvers` (docs/talos.md: Merge).
///
/// Inputs are ordered by layer (ID order inside a layer) and folded into a result that starts
/// empty at layer `default`:
///
/// | incoming spec            | `dnsServers`              | `searchDomains`                           |
/// |--------------------------|---------------------------|-------------------------------------------|
/// | same layer as the result | appended                  | prepend-merged                            |
/// | `configuration` layer    | replaced only if non-empty| replaced if `searchDomainsOverridden` (an empty list clears), else prepend-merged |
/// | any other layer          | smart merge by family     | prepend-merged                            |
///
/// The result's layer becomes the incoming spec's after each step. The output exists whenever
/// some input does (in Talos the default layer always provides one). `searchDomainsOverridden`
/// is set on the output when a configuration override decided the search domains.
///
/// Provenance: for each list, the inputs that still own an entry (plus the input whose
/// explicit override cleared it), in application order.
pub fn merge_resolvers(inputs: &[(&str, &ResolverSpec)]) -> Merged<ResolverSpec> {
    let mut applied = sorted_by_id(inputs);
    // Stable: inside a layer the inputs stay in ID order.
    crate::sort::by_key(&mut applied, |(_, spec)| spec.layer);
    let Some(&(last_id, last)) = applied.last() else {
        return Merged::default();
    };

    let mut layer = ConfigLayer::Default;
    let mut servers: Owned<'_, IpAddr> = Vec::new();
    let mut domains: Owned<'_, &str> = Vec::new();
    let mut overridden_by: Option<&str> = None;
    for &(id, spec) in &applied {
        let new_servers: Owned<'_, IpAddr> = spec.dns_servers.iter().map(|ip| (*ip, id)).collect();
        let new_domains: Owned<'_, &str> =
            spec.search_domains.iter().map(|d| (d.as_str(), id)).collect();
        if spec.layer == layer {
            servers.extend(new_servers);
            domains = merge_search_domains(domains, new_domains);
        } else if spec.layer == ConfigLayer::Configuration {
            if !new_servers.is_empty() {
                servers = new_servers;
            }
            if spec.search_domains_overridden {
                domains = new_domains;
                overridden_by = Some(id);
            } else {
                domains = merge_search_domains(domains, new_domains);
            }
        } else {
            servers = smart_merge(servers, new_servers);
            domains = merge_search_domains(domains, new_domains);
        }
        layer = spec.layer;
    }

    let order = || applied.iter().map(|(id, _)| *id);
    let server_owners: Vec<&str> = servers.iter().map(|(_, id)| *id).collect();
    let domain_owners: Vec<&str> = domains.iter().map(|(_, id)| *id).collect();
    let mut provenance = Provenance::default();
    provenance.set("dnsServers", contributors(order(), &server_owners, None));
    provenance.set("searchDomains", contributors(order(), &domain_owners, overridden_by));
    provenance
        .set("searchDomainsOverridden", overridden_by.iter().map(|id| (*id).to_owned()).collect());
    provenance.set("layer", vec![last_id.to_owned()]);

    let spec = ResolverSpec {
        dns_servers: servers.into_iter().map(|(ip, _)| ip).collect(),
        search_domains: domains.into_iter().map(|(d, _)| d.to_owned()).collect(),
        search_domains_overridden: overridden_by.is_some(),
        layer: last.layer,
    };
    let mut merged = Merged::default();
    merged.specs.insert(RESOLVER_ID.to_owned(), MergedSpec { spec, provenance });
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merge::test_support::{assert_fields_match, assert_order_independent};

    use ConfigLayer::*;

    fn res(layer: ConfigLayer, servers: &[&str], search: &[&str]) -> ResolverSpec {
        ResolverSpec {
            dns_servers: servers.iter().map(|s| s.parse().unwrap()).collect(),
            search_domains: search.iter().map(|s| (*s).to_owned()).collect(),
            search_domains_overridden: false,
            layer,
        }
    }

    fn overriding(servers: &[&str], search: &[&str]) -> ResolverSpec {
        ResolverSpec { search_domains_overridden: true, ..res(Configuration, servers, search) }
    }

    fn default_resolvers() -> (&'static str, ResolverSpec) {
        ("default/resolvers", res(Default, &["1.1.1.1", "8.8.8.8"], &[]))
    }

    struct Case {
        name: &'static str,
        inputs: Vec<(&'static str, ResolverSpec)>,
        servers: &'static [&'static str],
        search: &'static [&'static str],
        overridden: bool,
    }

    fn cases() -> Vec<Case> {
        vec![
            Case {
                name: "v6-only DHCPv6 keeps the v4 defaults behind it",
                inputs: vec![
                    default_resolvers(),
                    ("dhcp6/eth0/resolvers", res(Operator, &["2001:db8::53"], &[])),
                ],
                servers: &["2001:db8::53", "1.1.1.1", "8.8.8.8"],
                search: &[],
                overridden: false,
            },
            Case {
                name: "same family replaces",
                inputs: vec![
                    default_resolvers(),
                    ("dhcp4/eth0/resolvers", res(Operator, &["10.0.0.1"], &[])),
                ],
                servers: &["10.0.0.1"],
                search: &[],
                overridden: false,
            },
            Case {
                name: "v4-only list keeps old v6",
                inputs: vec![
                    ("cmdline/resolvers", res(Cmdline, &["2001:db8::1"], &[])),
                    ("platform/resolvers", res(Platform, &["10.0.0.1"], &[])),
                ],
                servers: &["10.0.0.1", "2001:db8::1"],
                search: &[],
                overridden: false,
            },
            Case {
                // Talos's switch keeps one family at most: v4 is checked first.
                name: "dual-stack old, empty new: only the old v4 survives",
                inputs: vec![
                    ("default/resolvers", res(Default, &["1.1.1.1", "2001:db8::1"], &[])),
                    ("platform/resolvers", res(Platform, &[], &[])),
                ],
                servers: &["1.1.1.1"],
                search: &[],
                overridden: false,
            },
            Case {
                name: "same layer appends",
                inputs: vec![
                    default_resolvers(),
                    ("dhcp4/eth1/resolvers", res(Operator, &["10.0.1.1"], &["b.org"])),
                    ("dhcp4/eth0/resolvers", res(Operator, &["10.0.0.1"], &["a.org"])),
                ],
                servers: &["10.0.0.1", "10.0.1.1"],
                search: &["b.org", "a.org"],
                overridden: false,
            },
            Case {
                name: "configuration replaces a non-empty list outright",
                inputs: vec![
                    default_resolvers(),
                    ("dhcp6/eth0/resolvers", res(Operator, &["2001:db8::53"], &[])),
                    ("configuration/resolvers", res(Configuration, &["9.9.9.9"], &[])),
                ],
                servers: &["9.9.9.9"],
                search: &[],
                overridden: false,
            },
            Case {
                name: "configuration with no servers keeps the lower layers'",
                inputs: vec![
                    default_resolvers(),
                    ("configuration/resolvers", res(Configuration, &[], &["corp.org"])),
                ],
                servers: &["1.1.1.1", "8.8.8.8"],
                search: &["corp.org"],
                overridden: false,
            },
            Case {
                name: "search domains: new unique ones prepended in their order",
                inputs: vec![
                    ("cmdline/resolvers", res(Cmdline, &["10.0.0.1"], &["a.org", "b.org"])),
                    (
                        "dhcp4/eth0/resolvers",
                        res(Operator, &["10.0.0.2"], &["c.org", "a.org", "d.org"]),
                    ),
                    ("configuration/resolvers", res(Configuration, &[], &["e.org"])),
                ],
                servers: &["10.0.0.2"],
                search: &["e.org", "c.org", "d.org", "a.org", "b.org"],
                overridden: false,
            },
            Case {
                name: "explicit empty search list clears",
                inputs: vec![
                    default_resolvers(),
                    ("dhcp4/eth0/resolvers", res(Operator, &[], &["dhcp.org"])),
                    ("configuration/resolvers", overriding(&[], &[])),
                ],
                servers: &["1.1.1.1", "8.8.8.8"],
                search: &[],
                overridden: true,
            },
            Case {
                name: "explicit search list replaces instead of merging",
                inputs: vec![
                    ("dhcp4/eth0/resolvers", res(Operator, &["10.0.0.1"], &["dhcp.org"])),
                    ("configuration/resolvers", overriding(&[], &["mine.org"])),
                ],
                servers: &["10.0.0.1"],
                search: &["mine.org"],
                overridden: true,
            },
        ]
    }

    #[test]
    fn table() {
        for case in cases() {
            let inputs: Vec<(&str, &ResolverSpec)> =
                case.inputs.iter().map(|(id, s)| (*id, s)).collect();
            let merged = merge_resolvers(&inputs);
            assert_eq!(merged.specs.len(), 1, "{}", case.name);
            let spec = &merged.specs[RESOLVER_ID].spec;
            let servers: Vec<String> = spec.dns_servers.iter().map(|s| s.to_string()).collect();
            assert_eq!(servers, case.servers, "{}", case.name);
            assert_eq!(spec.search_domains, case.search, "{}", case.name);
            assert_eq!(spec.search_domains_overridden, case.overridden, "{}", case.name);
            let top = inputs.iter().map(|(_, s)| s.layer).max().unwrap();
            assert_eq!(spec.layer, top, "{}", case.name);
            assert_order_independent(&inputs, merge_resolvers);
        }
    }

    #[test]
    fn no_inputs_no_output() {
        assert!(merge_resolvers(&[]).specs.is_empty());
    }

    #[test]
    fn provenance_follows_surviving_entries() {
        let (default_id, default) = default_resolvers();
        let dhcp6 = res(Operator, &["2001:db8::53"], &["v6.org"]);
        let merged = merge_resolvers(&[("dhcp6/eth0/resolvers", &dhcp6), (default_id, &default)]);
        let p = &merged.specs[RESOLVER_ID].provenance;
        assert_eq!(p.of("dnsServers"), ["default/resolvers", "dhcp6/eth0/resolvers"]);
        assert_eq!(p.of("searchDomains"), ["dhcp6/eth0/resolvers"]);
        assert_eq!(p.of("layer"), ["dhcp6/eth0/resolvers"]);
        assert!(p.of("searchDomainsOverridden").is_empty());

        // Configuration replaces the servers and explicitly clears the search domains.
        let config = overriding(&["9.9.9.9"], &[]);
        let merged = merge_resolvers(&[
            (default_id, &default),
            ("dhcp6/eth0/resolvers", &dhcp6),
            ("configuration/resolvers", &config),
        ]);
        let p = &merged.specs[RESOLVER_ID].provenance;
        assert_eq!(p.of("dnsServers"), ["configuration/resolvers"]);
        assert_eq!(p.of("searchDomains"), ["configuration/resolvers"]);
        assert_eq!(p.of("searchDomainsOverridden"), ["configuration/resolvers"]);
    }

    #[test]
    fn field_names_match_serialization() {
        assert_fields_match(
            &["dnsServers", "searchDomains", "searchDomainsOverridden", "layer"],
            &overriding(&["9.9.9.9"], &["a.org"]),
        );
    }
}
