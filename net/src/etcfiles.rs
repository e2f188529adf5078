// SPDX-License-Identifier: Apache-2.0
//! Rendering `/etc/resolv.conf`, `/etc/hosts` and `/etc/hostname` (TB §4.5). Pure: the
//! caller decides where (under which root) the text is written.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::net::IpAddr;

use crate::resource::{HostnameStatus, ResolverStatus};

/// The resolver reads at most this many `nameserver` lines (glibc `MAXNS`).
pub const MAX_NAMESERVERS: usize = 3;

/// `nameserver` lines (at most three), then a blank line and one `search` line if any.
pub fn resolv_conf(resolvers: &ResolverStatus) -> String {
    let mut out = String::new();
    for ns in resolvers.dns_servers.iter().take(MAX_NAMESERVERS) {
        let _ = writeln!(out, "nameserver {ns}");
    }
    if !resolvers.search_domains.is_empty() {
        let _ = writeln!(out, "\nsearch {}", resolvers.search_domains.join(" "));
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

/// `/etc/hosts`: localhost, the node's own name on its default address, the IPv6 well-known
/// names, then configured entries grouped by IP and sorted by the IP's text (as Talos does).
/// The first column is padded to the widest address plus one space.
pub fn hosts(
    default_ip: Option<IpAddr>,
    hostname: Option<&HostnameStatus>,
    extra: &[HostEntry],
) -> String {
    let mut rows: Vec<(String, String)> = vec![("127.0.0.1".into(), "localhost".into())];
    if let (Some(ip), Some(h)) = (default_ip, hostname) {
        let fqdn = if h.domainname.is_empty() {
            h.hostname.clone()
        } else {
            format!("{}.{}", h.hostname, h.domainname)
        };
        let names = if fqdn == h.hostname { fqdn } else { format!("{fqdn} {}", h.hostname) };
        rows.push((ip.to_string(), names));
    }
    rows.push(("::1".into(), "localhost ip6-localhost ip6-loopback".into()));
    rows.push(("ff02::1".into(), "ip6-allnodes".into()));
    rows.push(("ff02::2".into(), "ip6-allrouters".into()));
    let mut grouped: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for e in extra {
        grouped.entry(e.ip.to_string()).or_default().extend(e.aliases.iter().map(String::as_str));
    }
    rows.extend(grouped.into_iter().map(|(ip, names)| (ip, names.join(" "))));
    let width = rows.iter().map(|(ip, _)| ip.len()).max().unwrap_or(0) + 1;
    rows.iter().fold(String::new(), |mut out, (ip, names)| {
        let _ = writeln!(out, "{ip:<width$}{names}");
        out
    })
}

/// `/etc/hostname`: the fully qualified name and a newline.
pub fn hostname(h: &HostnameStatus) -> String {
    if h.domainname.is_empty() {
        format!("{}\n", h.hostname)
    } else {
        format!("{}.{}\n", h.hostname, h.domainname)
    }
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
        assert_eq!(resolv_conf(&r), "nameserver 127.0.0.53\n\nsearch foo.example.com\n");
        let r = ResolverStatus {
            dns_servers: ips(&["1.1.1.1", "2.2.2.2", "4.4.4.4", "8.8.8.8"]),
            search_domains: vec![],
        };
        assert_eq!(resolv_conf(&r), "nameserver 1.1.1.1\nnameserver 2.2.2.2\nnameserver 4.4.4.4\n");
    }

    #[test]
    fn hosts_matches_talos_example() {
        let h = HostnameStatus { hostname: "foo".into(), domainname: "example.com".into() };
        let text = hosts(Some("33.11.22.44".parse().unwrap()), Some(&h), &[]);
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
        let text = hosts(None, None, &extra);
        let tail: Vec<&str> = text.lines().skip(4).collect();
        assert_eq!(tail, ["10.0.0.10 a", "10.0.0.9  b c d"]);
    }

    #[test]
    fn hostname_file() {
        let h = HostnameStatus { hostname: "node-1".into(), domainname: String::new() };
        assert_eq!(hostname(&h), "node-1\n");
    }
}
