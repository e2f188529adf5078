// SPDX-License-Identifier: Apache-2.0
//! Type names the CLI and the API accept, as in `talosctl get`: the short type name in any
//! case (`AddressStatus`, `addressstatus`), its plural (`addressstatuses`), the full type name
//! (`AddressStatuses.net.keelson.dev`), and for a status type also the bare name in singular
//! and plural (`address`, `addresses`). Pure: no I/O.

use crate::resource::{Kind, Namespace};

/// An unknown type name; the message lists the names that are known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown type \"{name}\"; known types: {known}")]
pub struct UnknownType {
    /// What was asked for, escaped and cut to [`SHOWN_NAME`] characters: it goes back to the
    /// client and into the log, and a request may carry a megabyte of it.
    pub name: String,
    /// The canonical names, comma-separated.
    pub known: String,
}

/// How much of an unknown type name an answer repeats.
const SHOWN_NAME: usize = 64;

/// English plural of a lowercase type word (`address` → `addresses`, `status` → `statuses`).
fn plural(word: &str) -> String {
    if word.ends_with('s') || word.ends_with('x') {
        format!("{word}es")
    } else {
        format!("{word}s")
    }
}

/// Every name `kind` answers to, lowercase.
pub fn names(kind: Kind) -> Vec<String> {
    let short = kind.short_name().to_ascii_lowercase();
    let mut out = vec![plural(&short), kind.type_name().to_ascii_lowercase(), short.clone()];
    if let Some(bare) = short.strip_suffix("status") {
        // A name another kind lists as its own alias is that kind's: `networks` is the
        // tenant networks (`TenantNetworkStatus`), not `NetworkStatus`'s derived plural.
        let claimed =
            |n: &str| Kind::ALL.iter().any(|k| *k != kind && k.extra_aliases().contains(&n));
        if !bare.is_empty() {
            out.extend([bare.to_owned(), plural(bare)].into_iter().filter(|n| !claimed(n)));
        }
    }
    // Spellings that do not follow the rules above: irregular plurals and Talos's own short
    // names (`peers`), listed in the kind table.
    out.extend(kind.extra_aliases().iter().map(|a| (*a).to_owned()));
    out
}

/// Resolve a type name the user typed.
pub fn resolve(name: &str) -> Result<Kind, UnknownType> {
    let lower = name.to_ascii_lowercase();
    Kind::ALL.iter().copied().find(|k| names(*k).contains(&lower)).ok_or_else(|| UnknownType {
        name: base::names::escape(name, SHOWN_NAME),
        known: Kind::ALL.iter().map(|k| k.short_name()).collect::<Vec<_>>().join(", "),
    })
}

/// The namespace a kind lives in when none is given: merged specs and statuses in `network`,
/// services and the command line in `runtime`, the machine config in `config`.
pub fn default_namespace(kind: Kind) -> Namespace {
    kind.default_namespace()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(name: &str) -> Kind {
        resolve(name).unwrap_or_else(|e| unreachable!("{e}"))
    }

    #[test]
    fn seed_aliases() {
        for n in ["addresses", "address", "addressstatus", "AddressStatus", "addressstatuses"] {
            assert_eq!(ok(n), Kind::AddressStatus, "{n}");
        }
        assert_eq!(ok("AddressStatuses.net.keelson.dev"), Kind::AddressStatus);
        assert_eq!(ok("addressspecs"), Kind::AddressSpec);
        assert_eq!(ok("addressspec"), Kind::AddressSpec);
        assert_eq!(ok("routes"), Kind::RouteStatus);
        assert_eq!(ok("links"), Kind::LinkStatus);
        assert_eq!(ok("resolvers"), Kind::ResolverStatus);
        assert_eq!(ok("hostname"), Kind::HostnameStatus);
        assert_eq!(ok("hostnamespec"), Kind::HostnameSpec);
        assert_eq!(ok("timeservers"), Kind::TimeServerStatus);
        assert_eq!(ok("nodeaddresses"), Kind::NodeAddress);
        assert_eq!(ok("networkstatus"), Kind::NetworkStatus);
        assert_eq!(ok("network"), Kind::NetworkStatus);
        for n in ["networks", "tenantnetworks", "tenantnetwork", "tenantnetworkstatus"] {
            assert_eq!(ok(n), Kind::TenantNetworkStatus, "{n}");
        }
        assert_eq!(ok("operatorspecs"), Kind::OperatorSpec);
        assert_eq!(ok("routingrules"), Kind::RoutingRuleStatus);
        assert_eq!(ok("etcfiles"), Kind::EtcFileStatus);
        assert_eq!(ok("services"), Kind::ServiceStatus);
        assert_eq!(ok("kubespanidentity"), Kind::KubeSpanIdentity);
        assert_eq!(ok("kubespanidentities"), Kind::KubeSpanIdentity);
        assert_eq!(ok("kubespanpeerstatuses"), Kind::KubeSpanPeerStatus);
        assert_eq!(ok("peers"), Kind::KubeSpanPeerStatus);
        assert_eq!(ok("kubespanpeerspecs"), Kind::KubeSpanPeerSpec);
        assert_eq!(default_namespace(Kind::KubeSpanPeerStatus), Namespace::KubeSpan);
        assert_eq!(default_namespace(Kind::ServiceStatus), Namespace::Runtime);
        assert_eq!(default_namespace(Kind::AddressStatus), Namespace::Network);
    }

    #[test]
    fn aliases_are_unambiguous() {
        for a in Kind::ALL {
            for b in Kind::ALL.iter().filter(|b| *b != a) {
                for n in names(*a) {
                    assert!(!names(*b).contains(&n), "{n} names {a} and {b}");
                }
            }
        }
    }

    #[test]
    fn an_unknown_name_is_repeated_escaped_and_short() {
        let long = format!("\u{1b}[2J{}", "x".repeat(1 << 20));
        let e = resolve(&long).err().unwrap_or_else(|| unreachable!()).to_string();
        assert!(!e.contains('\u{1b}'), "{e}");
        assert!(e.contains("\\u{1b}[2J"), "{e}");
        assert!(e.len() < 1024, "{} bytes", e.len());
    }

    #[test]
    fn unknown_lists_known() {
        let e = resolve("bogus").err().unwrap_or_else(|| unreachable!());
        assert!(e.to_string().contains("AddressStatus"), "{e}");
    }
}
