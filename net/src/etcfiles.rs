// SPDX-License-Identifier: Apache-2.0
//! Rendering `/etc/resolv.conf`, `/etc/hosts` and `/etc/hostname` (docs/talos.md: Applying specs).
//! Pure: the caller decides where (under which root) the text is written. Only valid names
//! ([`crate::names`]) are written, so every line is one whole value.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::net::IpAddr;

use crate::names;
use crate::resource::{HostnameStatus, ResolverStatus};

/// The resolver reads at most this many `nameserver` lines (glibc `MAXNS`).
pub const MAX_NAMESERVERS: usize = 3;

/// A rendered file, and the values left out of it because they are not valid names.
///
/// Names are validated where they enter (command line, config, DHCP); the renderers check
/// again so that no value can ever add a line of its own, whatever a caller passes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rendered {
    /// The file's content.
    pub text: String,
    /// What was skipped, escaped and shortened for a log line.
    pub skipped: Vec<String>,
}

impl Rendered {
    fn skip(&mut self, what: &str, value: &str) {
        self.skipped.push(format!("{what} \"{}\"", names::escape(value, 80)));
    }
}

/// `nameserver` lines (at most three), then a blank line and one `search` line if any.
pub fn resolv_conf(resolvers: &ResolverStatus) -> Rendered {
    let mut out = Rendered::default();
    for ns in resolvers.dns_servers.iter().take(MAX_NAMESERVERS) {
        let _ = writeln!(out.text, "nameserver {ns}");
    }
    let mut search: Vec<&str> = Vec::new();
    for domain in &resolvers.search_domains {
        if names::is_domain(domain) {
            search.push(domain);
        } else {
            out.skip("search domain", domain);
        }
    }
    if !search.is_empty() {
        let _ = writeln!(out.text, "\nsearch {}", search.join(" "));
    }
    out
}

/// A static host entry from the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostEntry {
    /// The address.
    pub ip: IpAddr,
    /// Names for it.
    pub aliases: Vec<String>,
}

/// Whether a hostname status is fit to be written: a host label and an empty or valid domain.
fn valid_hostname(h: &HostnameStatus) -> bool {
    names::is_host_label(&h.hostname)
        && (h.domainname.is_empty() || names::is_domain(&h.domainname))
}

/// `/etc/hosts`: localhost, the node's own name on its default address, the IPv6 well-known
/// names, then configured entries grouped by IP and sorted by the IP's text (as Talos does).
/// The first column is padded to the widest address plus one space.
pub fn hosts(
    default_ip: Option<IpAddr>,
    hostname: Option<&HostnameStatus>,
    extra: &[HostEntry],
) -> Rendered {
    let mut out = Rendered::default();
    let mut rows: Vec<(String, String)> = vec![("127.0.0.1".into(), "localhost".into())];
    if let (Some(ip), Some(h)) = (default_ip, hostname) {
        if valid_hostname(h) {
            let fqdn = fqdn(h);
            let names = if fqdn == h.hostname { fqdn } else { format!("{fqdn} {}", h.hostname) };
            rows.push((ip.to_string(), names));
        } else {
            out.skip("hostname", &fqdn(h));
        }
    }
    rows.push(("::1".into(), "localhost ip6-localhost ip6-loopback".into()));
    rows.push(("ff02::1".into(), "ip6-allnodes".into()));
    rows.push(("ff02::2".into(), "ip6-allrouters".into()));
    let mut grouped: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for e in extra {
        for alias in &e.aliases {
            if names::is_domain(alias) {
                grouped.entry(e.ip.to_string()).or_default().push(alias);
            } else {
                out.skip("hosts alias", alias);
            }
        }
    }
    rows.extend(grouped.into_iter().map(|(ip, names)| (ip, names.join(" "))));
    let width = rows.iter().map(|(ip, _)| ip.len()).max().unwrap_or(0) + 1;
    for (ip, names) in &rows {
        let _ = writeln!(out.text, "{ip:<width$}{names}");
    }
    out
}

fn fqdn(h: &HostnameStatus) -> String {
    if h.domainname.is_empty() {
        h.hostname.clone()
    } else {
        format!("{}.{}", h.hostname, h.domainname)
    }
}

/// `/etc/hostname`: the fully qualified name and a newline; `None` (write nothing) for a name
/// that is not valid.
pub fn hostname(h: &HostnameStatus) -> Option<String> {
    valid_hostname(h).then(|| format!("{}\n", fqdn(h)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ips(list: &[&str]) -> Vec<IpAddr> {
        list.iter().map(|s| s.parse().unwrap()).collect()
    }

    #[test]
    fn resolv_conf_matches_talos_examples() {
        let r = ResolverStatus {
            dns_servers: ips(&["127.0.0.53"]),
            search_domains: vec!["foo.example.com".into()],
        };
        assert_eq!(resolv_conf(&r).text, "nameserver 127.0.0.53\n\nsearch foo.example.com\n");
        let r = ResolverStatus {
            dns_servers: ips(&["1.1.1.1", "2.2.2.2", "4.4.4.4", "8.8.8.8"]),
            search_domains: vec![],
        };
        assert_eq!(
            resolv_conf(&r).text,
            "nameserver 1.1.1.1\nnameserver 2.2.2.2\nnameserver 4.4.4.4\n"
        );
    }

    #[test]
    fn hosts_matches_talos_example() {
        let h = HostnameStatus { hostname: "foo".into(), domainname: "example.com".into() };
        let text = hosts(Some("33.11.22.44".parse().unwrap()), Some(&h), &[]).text;
        assert_eq!(
            text,
            "127.0.0.1   localhost\n\
             33.11.22.44 foo.example.com foo\n\
             ::1         localhost ip6-localhost ip6-loopback\n\
             ff02::1     ip6-allnodes\n\
             ff02::2     ip6-allrouters\n"
        );
    }

    #[test]
    fn hosts_extra_entries_grouped_and_sorted_by_text() {
        let extra = [
            HostEntry { ip: "10.0.0.9".parse().unwrap(), aliases: vec!["b".into()] },
            HostEntry { ip: "10.0.0.10".parse().unwrap(), aliases: vec!["a".into()] },
            HostEntry { ip: "10.0.0.9".parse().unwrap(), aliases: vec!["c".into(), "d".into()] },
        ];
        let text = hosts(None, None, &extra).text;
        let tail: Vec<&str> = text.lines().skip(4).collect();
        assert_eq!(tail, ["10.0.0.10 a", "10.0.0.9  b c d"]);
    }

    #[test]
    fn hostname_file() {
        let h = HostnameStatus { hostname: "node-1".into(), domainname: String::new() };
        assert_eq!(hostname(&h).as_deref(), Some("node-1\n"));
    }

    #[test]
    fn invalid_values_never_make_lines() {
        let r = ResolverStatus {
            dns_servers: ips(&["10.0.0.53"]),
            search_domains: vec![
                "ok.example".into(),
                "x registry.local\nnameserver 6.6.6.6".into(),
                "\u{1b}]0;pwned\u{7}".into(),
            ],
        };
        let out = resolv_conf(&r);
        assert_eq!(out.text, "nameserver 10.0.0.53\n\nsearch ok.example\n");
        assert_eq!(
            out.skipped,
            [
                "search domain \"x registry.local\\nnameserver 6.6.6.6\"",
                "search domain \"\\u{1b}]0;pwned\\u{7}\""
            ]
        );

        let h = HostnameStatus {
            hostname: "node\n10.0.0.66 registry.local".into(),
            domainname: "".into(),
        };
        let extra = [HostEntry {
            ip: "10.0.0.9".parse().unwrap(),
            aliases: vec!["good".into(), "bad\n6.6.6.6 registry.local".into()],
        }];
        let out = hosts(Some("10.0.0.2".parse().unwrap()), Some(&h), &extra);
        assert!(!out.text.contains("registry"), "{}", out.text);
        assert!(out.text.ends_with("10.0.0.9  good\n"), "{}", out.text);
        assert_eq!(out.skipped.len(), 2, "{:?}", out.skipped);
        assert_eq!(hostname(&h), None);
        let h = HostnameStatus { hostname: "node".into(), domainname: "a b".into() };
        assert_eq!(hostname(&h), None);
    }
}
