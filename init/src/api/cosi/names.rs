// SPDX-License-Identifier: Apache-2.0
//! Talos's names for keelson's resource kinds: the COSI type, the namespace Talos keeps it
//! in, Talos's own aliases and whether Talos treats it as sensitive. Checked against
//! siderolabs/talos `pkg/machinery/resources/*` (each type's `...Type` constant and its
//! `ResourceDefinition()`). Kinds Talos does not have keep keelson's type name. Pure.

use net::resource::{Kind, Namespace};

/// How a kind appears over COSI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CosiType {
    /// The COSI type (`AddressStatuses.net.talos.dev`).
    pub type_name: &'static str,
    /// The singular name shown in tables (`AddressStatus`).
    pub display: &'static str,
    /// Talos's namespace for it (`network`; `files` for `/etc` files).
    pub namespace: &'static str,
    /// Talos's declared aliases (what `Aliases` says in its resource definition).
    pub aliases: &'static [&'static str],
    /// Talos reserves it for `os:admin` (it may hold keys or the machine config).
    pub sensitive: bool,
}

const fn t(
    type_name: &'static str,
    display: &'static str,
    namespace: &'static str,
    aliases: &'static [&'static str],
) -> CosiType {
    CosiType { type_name, display, namespace, aliases, sensitive: false }
}

const fn secret(
    type_name: &'static str,
    display: &'static str,
    namespace: &'static str,
) -> CosiType {
    CosiType { type_name, display, namespace, aliases: &[], sensitive: true }
}

/// Talos's name for `kind`. A `match`, so a new kind does not build until it has a row.
pub fn cosi_type(kind: Kind) -> CosiType {
    match kind {
        Kind::AddressSpec => t("AddressSpecs.net.talos.dev", "AddressSpec", "network", &[]),
        Kind::AddressStatus => t(
            "AddressStatuses.net.talos.dev",
            "AddressStatus",
            "network",
            &["address", "addresses"],
        ),
        Kind::RouteSpec => t("RouteSpecs.net.talos.dev", "RouteSpec", "network", &[]),
        Kind::RouteStatus => {
            t("RouteStatuses.net.talos.dev", "RouteStatus", "network", &["route", "routes"])
        }
        Kind::LinkSpec => secret("LinkSpecs.net.talos.dev", "LinkSpec", "network"),
        Kind::LinkStatus => {
            t("LinkStatuses.net.talos.dev", "LinkStatus", "network", &["link", "links"])
        }
        Kind::LinkRefresh => t("LinkRefreshes.net.talos.dev", "LinkRefresh", "network", &[]),
        Kind::ResolverSpec => t("ResolverSpecs.net.talos.dev", "ResolverSpec", "network", &[]),
        Kind::ResolverStatus => {
            t("ResolverStatuses.net.talos.dev", "ResolverStatus", "network", &["resolvers"])
        }
        Kind::HostnameSpec => t("HostnameSpecs.net.talos.dev", "HostnameSpec", "network", &[]),
        Kind::HostnameStatus => {
            t("HostnameStatuses.net.talos.dev", "HostnameStatus", "network", &["hostname"])
        }
        Kind::TimeServerSpec => {
            t("TimeServerSpecs.net.talos.dev", "TimeServerSpec", "network", &[])
        }
        Kind::TimeServerStatus => t(
            "TimeServerStatuses.net.talos.dev",
            "TimeServerStatus",
            "network",
            &["timeserver", "timeservers"],
        ),
        Kind::OperatorSpec => secret("OperatorSpecs.net.talos.dev", "OperatorSpec", "network"),
        // Talos has no operator status resource: keelson's own name.
        Kind::OperatorStatus => {
            t("OperatorStatuses.net.keelson.dev", "OperatorStatus", "network", &[])
        }
        // Talos has no VIP status resource: keelson's own name.
        Kind::VipStatus => t("VIPStatuses.net.keelson.dev", "VIPStatus", "network", &[]),
        // Talos has no tenant networks: keelson's own name.
        Kind::TenantNetworkStatus => t(
            "TenantNetworkStatuses.net.keelson.dev",
            "TenantNetworkStatus",
            "network",
            &["networks", "tenantnetworks"],
        ),
        Kind::RoutingRuleSpec => {
            t("RoutingRuleSpecs.net.talos.dev", "RoutingRuleSpec", "network", &[])
        }
        Kind::RoutingRuleStatus => t(
            "RoutingRuleStatuses.net.talos.dev",
            "RoutingRuleStatus",
            "network",
            &["routingrule", "routingrules"],
        ),
        Kind::NodeAddress => t("NodeAddresses.net.talos.dev", "NodeAddress", "network", &[]),
        Kind::NetworkStatus => t(
            "NetworkStatuses.net.talos.dev",
            "NetworkStatus",
            "network",
            &["netstatus", "netstatuses"],
        ),
        Kind::EtcFileStatus => t("EtcFileStatuses.files.talos.dev", "EtcFileStatus", "files", &[]),
        Kind::ServiceStatus => t("Services.v1alpha1.talos.dev", "Service", "runtime", &["svc"]),
        Kind::MachineStatus => {
            t("MachineStatuses.runtime.talos.dev", "MachineStatus", "runtime", &[])
        }
        Kind::TimeStatus => t("TimeStatuses.v1alpha1.talos.dev", "TimeStatus", "runtime", &[]),
        Kind::SystemInformation => t(
            "SystemInformations.hardware.talos.dev",
            "SystemInformation",
            "hardware",
            &["systeminformation"],
        ),
        // Talos keeps no parsed network command line: keelson's own name.
        Kind::Cmdline => t("Cmdlines.runtime.keelson.dev", "Cmdline", "runtime", &[]),
        Kind::MachineConfig => secret("MachineConfigs.config.talos.dev", "MachineConfig", "config"),
        Kind::KubeSpanIdentity => {
            secret("KubeSpanIdentities.kubespan.talos.dev", "KubeSpanIdentity", "kubespan")
        }
        Kind::KubeSpanPeerSpec => {
            t("KubeSpanPeerSpecs.kubespan.talos.dev", "KubeSpanPeerSpec", "kubespan", &[])
        }
        Kind::KubeSpanPeerStatus => {
            t("KubeSpanPeerStatuses.kubespan.talos.dev", "KubeSpanPeerStatus", "kubespan", &[])
        }
        Kind::NodeIdentity => t("Identities.cluster.talos.dev", "Identity", "cluster", &[]),
        Kind::Affiliate => t("Affiliates.cluster.talos.dev", "Affiliate", "cluster", &[]),
        Kind::Member => t("Members.cluster.talos.dev", "Member", "cluster", &[]),
    }
}

/// The COSI namespace a stored resource is shown in: Talos's where keelson keeps the kind in
/// its default namespace under another name (`/etc` files: `files`), else keelson's.
pub fn cosi_namespace(kind: Kind, stored: Namespace) -> &'static str {
    if stored == kind.default_namespace() {
        cosi_type(kind).namespace
    } else {
        stored.as_str()
    }
}

/// The store namespace a COSI namespace names for `kind`, if any.
pub fn store_namespace(kind: Kind, namespace: &str) -> Option<Namespace> {
    if namespace == cosi_type(kind).namespace {
        return Some(kind.default_namespace());
    }
    namespace.parse().ok()
}

/// The kind a COSI type names: Talos's type (as clients send it, in any case), keelson's own
/// full type name, or any name `keelson get` accepts.
pub fn resolve(type_name: &str) -> Option<Kind> {
    Kind::ALL
        .iter()
        .copied()
        .find(|k| cosi_type(*k).type_name.eq_ignore_ascii_case(type_name))
        .or_else(|| crate::api::aliases::resolve(type_name).ok())
}

/// Every alias COSI derives for a type plus the declared ones, lowercase, as
/// `ResourceDefinitionSpec.Fill` in cosi-project/runtime does: the singular, the plural, the
/// plural with each prefix of the suffix (`addressstatuses.net`), and the type's capitals
/// (`as`; with an `s` added when they do not end in one). Returns (aliases, all aliases).
pub fn cosi_aliases(ty: &CosiType) -> (Vec<String>, Vec<String>) {
    let (name, suffix) = ty.type_name.split_once('.').unwrap_or((ty.type_name, ""));
    let lower = name.to_ascii_lowercase();
    let mut aliases: Vec<String> = ty.aliases.iter().map(|a| (*a).to_owned()).collect();
    aliases.push(ty.display.to_ascii_lowercase());
    let mut all = vec![lower.clone()];
    let parts: Vec<&str> = suffix.split('.').collect();
    for i in 1..parts.len() {
        all.push(format!("{lower}.{}", parts[..i].join(".")));
    }
    let capitals: String = name.chars().filter(char::is_ascii_uppercase).collect();
    if capitals.len() > 1 {
        let c = capitals.to_ascii_lowercase();
        aliases.push(c.clone());
        if !capitals.ends_with('S') {
            aliases.push(format!("{c}s"));
        }
    }
    all.extend(aliases.iter().cloned());
    (aliases, all)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;

    /// English plural of a CamelCase type word (`Identity` → `Identities`).
    fn plural(word: &str) -> String {
        let bytes = word.as_bytes();
        match bytes {
            [.., b, b'y'] if !b"aeiou".contains(b) => format!("{}ies", &word[..word.len() - 1]),
            [.., b's' | b'x'] | [.., b's' | b'c', b'h'] => format!("{word}es"),
            _ => format!("{word}s"),
        }
    }

    #[test]
    fn talos_type_names_for_the_common_kinds() {
        for (kind, name, ns) in [
            (Kind::AddressStatus, "AddressStatuses.net.talos.dev", "network"),
            (Kind::AddressSpec, "AddressSpecs.net.talos.dev", "network"),
            (Kind::LinkStatus, "LinkStatuses.net.talos.dev", "network"),
            (Kind::LinkSpec, "LinkSpecs.net.talos.dev", "network"),
            (Kind::RouteStatus, "RouteStatuses.net.talos.dev", "network"),
            (Kind::RouteSpec, "RouteSpecs.net.talos.dev", "network"),
            (Kind::HostnameStatus, "HostnameStatuses.net.talos.dev", "network"),
            (Kind::ResolverStatus, "ResolverStatuses.net.talos.dev", "network"),
            (Kind::TimeServerStatus, "TimeServerStatuses.net.talos.dev", "network"),
            (Kind::NodeAddress, "NodeAddresses.net.talos.dev", "network"),
            (Kind::NetworkStatus, "NetworkStatuses.net.talos.dev", "network"),
            (Kind::EtcFileStatus, "EtcFileStatuses.files.talos.dev", "files"),
            (Kind::Member, "Members.cluster.talos.dev", "cluster"),
            (Kind::Affiliate, "Affiliates.cluster.talos.dev", "cluster"),
            (Kind::NodeIdentity, "Identities.cluster.talos.dev", "cluster"),
            (Kind::KubeSpanPeerStatus, "KubeSpanPeerStatuses.kubespan.talos.dev", "kubespan"),
            (Kind::KubeSpanIdentity, "KubeSpanIdentities.kubespan.talos.dev", "kubespan"),
            (Kind::MachineStatus, "MachineStatuses.runtime.talos.dev", "runtime"),
            (Kind::MachineConfig, "MachineConfigs.config.talos.dev", "config"),
            (Kind::ServiceStatus, "Services.v1alpha1.talos.dev", "runtime"),
            (Kind::TimeStatus, "TimeStatuses.v1alpha1.talos.dev", "runtime"),
            (Kind::SystemInformation, "SystemInformations.hardware.talos.dev", "hardware"),
        ] {
            assert_eq!(cosi_type(kind).type_name, name, "{kind}");
            assert_eq!(cosi_type(kind).namespace, ns, "{kind}");
            assert_eq!(resolve(name), Some(kind), "{name}");
            assert_eq!(resolve(&name.to_ascii_uppercase()), Some(kind), "{name}");
        }
    }

    #[test]
    fn every_type_is_unique_plural_and_well_formed() {
        let mut seen = std::collections::BTreeSet::new();
        for kind in Kind::ALL {
            let ty = cosi_type(*kind);
            assert!(seen.insert(ty.type_name.to_ascii_lowercase()), "{} twice", ty.type_name);
            let (name, suffix) = ty.type_name.split_once('.').unwrap();
            assert_eq!(name, plural(ty.display), "{kind}: the type is the display name's plural");
            assert!(suffix.ends_with(".talos.dev") || suffix.ends_with(".keelson.dev"), "{suffix}");
            // The namespace a kind is stored in maps to Talos's and back.
            let ns = cosi_namespace(*kind, kind.default_namespace());
            assert_eq!(ns, ty.namespace, "{kind}");
            assert_eq!(store_namespace(*kind, ns), Some(kind.default_namespace()), "{kind}");
            // Keelson's own names keep working.
            assert_eq!(resolve(kind.type_name()), Some(*kind), "{kind}");
            assert_eq!(resolve(kind.short_name()), Some(*kind), "{kind}");
        }
    }

    #[test]
    fn keelson_names_and_namespaces_still_resolve() {
        assert_eq!(resolve("addresses"), Some(Kind::AddressStatus));
        assert_eq!(resolve("AddressStatuses.net.keelson.dev"), Some(Kind::AddressStatus));
        assert_eq!(resolve("peers"), Some(Kind::KubeSpanPeerStatus));
        assert_eq!(resolve("nosuchthing"), None);
        // Layered specs live in network-config too; the affiliates registries report in
        // cluster-raw.
        assert_eq!(
            store_namespace(Kind::AddressSpec, "network-config"),
            Some(Namespace::NetworkConfig)
        );
        assert_eq!(cosi_namespace(Kind::Affiliate, Namespace::ClusterRaw), "cluster-raw");
        assert_eq!(store_namespace(Kind::EtcFileStatus, "network"), Some(Namespace::Network));
        assert_eq!(store_namespace(Kind::AddressStatus, "files"), None);
    }

    #[test]
    fn plurals() {
        assert_eq!(plural("Identity"), "Identities");
        assert_eq!(plural("LinkRefresh"), "LinkRefreshes");
        assert_eq!(plural("AddressStatus"), "AddressStatuses");
        assert_eq!(plural("Member"), "Members");
        assert_eq!(plural("Key"), "Keys");
    }

    #[test]
    fn aliases_follow_cosi() {
        let (aliases, all) = cosi_aliases(&cosi_type(Kind::AddressStatus));
        assert_eq!(aliases, ["address", "addresses", "addressstatus", "as"]);
        assert_eq!(
            all,
            [
                "addressstatuses",
                "addressstatuses.net",
                "addressstatuses.net.talos",
                "address",
                "addresses",
                "addressstatus",
                "as"
            ]
        );
        let (aliases, _) = cosi_aliases(&cosi_type(Kind::MachineConfig));
        assert_eq!(aliases, ["machineconfig", "mc", "mcs"]);
        let (aliases, all) = cosi_aliases(&cosi_type(Kind::Member));
        assert_eq!(aliases, ["member"]);
        assert!(all.contains(&"members".to_owned()));
    }
}
