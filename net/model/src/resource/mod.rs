// SPDX-License-Identifier: Apache-2.0
//! The resource model: typed specs with COSI-style metadata.
//!
//! A resource is [`Metadata`] plus one [`AnySpec`] variant. Every kind is listed once in the
//! `kinds!` table below, which gives it a [`Kind`], its type name (`AddressSpecs.net.keelson.dev`)
//! and the [`SpecType`] impl that lets controllers read and write it with its own Rust type.
//!
//! Invariants kept by the store (see `crate::runtime::store`): `version` starts at 1 and grows by
//! one on every change; an equal write changes nothing; a resource with finalizers is only ever
//! torn down (phase `tearingDown`), and destroyed once the last finalizer is gone.

mod address;
mod etc_file;
mod hostname;
pub mod kubespan;
mod layer;
mod link;
mod link_kinds;
pub mod links;
pub mod nethelpers;
mod network_status;
mod node_address;
mod operator;
mod resolver;
mod route;
mod rule;
mod service;
#[cfg(test)]
mod tests;
mod timeserver;
mod wireguard;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::SystemTime;

use serde::{Serialize, Serializer};

pub use address::*;
pub use etc_file::*;
pub use hostname::*;
pub use kubespan::*;
pub use layer::*;
pub use link::*;
pub use link_kinds::*;
pub use links::LinkView;
pub use nethelpers::{
    AddressFlags, Family, HardwareAddr, LinkType, ParseNameError, RouteFlags, RouteProtocol,
    RouteType, RoutingTable, Scope,
};
pub use network_status::*;
pub use node_address::*;
pub use operator::*;
pub use resolver::*;
pub use route::*;
pub use rule::*;
pub use service::*;
pub use timeserver::*;
pub use wireguard::*;

use crate::cmdline::CmdlineNetwork;
use crate::config::MachineConfig;

/// A resource namespace.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum Namespace {
    /// Unmerged, layered specs.
    NetworkConfig,
    /// Merged specs, statuses, node addresses, operator specs.
    Network,
    /// The machine configuration and other inputs.
    Config,
    /// Machine and service state.
    Runtime,
    /// KubeSpan identity, peers and their status.
    KubeSpan,
}

impl Namespace {
    /// The name shown by the CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            Namespace::NetworkConfig => "network-config",
            Namespace::Network => "network",
            Namespace::Config => "config",
            Namespace::Runtime => "runtime",
            Namespace::KubeSpan => "kubespan",
        }
    }

    /// Every namespace, in display order.
    pub const ALL: [Namespace; 5] = [
        Namespace::NetworkConfig,
        Namespace::Network,
        Namespace::Config,
        Namespace::Runtime,
        Namespace::KubeSpan,
    ];
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Namespace {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Namespace::ALL
            .into_iter()
            .find(|n| n.as_str() == s)
            .ok_or_else(|| format!("unknown namespace {s:?}"))
    }
}

impl Serialize for Namespace {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// Lifecycle phase of a resource.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Phase {
    /// In use.
    #[default]
    Running,
    /// Going away: waiting for finalizers to be removed.
    TearingDown,
}

/// A spec type that can live in the store.
pub trait SpecType: Clone + PartialEq + fmt::Debug + Into<AnySpec> + 'static {
    /// The kind tag.
    const KIND: Kind;
    /// Borrow this type out of an [`AnySpec`], if it is one.
    fn from_any(any: &AnySpec) -> Option<&Self>;
}

macro_rules! kinds {
    ($( $(#[$m:meta])* $variant:ident($ty:ty) = $short:literal, $full:literal; )*) => {
        /// Every resource kind.
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
        pub enum Kind { $( $(#[$m])* $variant, )* }

        impl Kind {
            /// Every kind, in declaration order.
            pub const ALL: &'static [Kind] = &[$(Kind::$variant),*];

            /// The short type name shown in tables (`AddressSpec`).
            pub fn short_name(self) -> &'static str {
                match self { $( Kind::$variant => $short, )* }
            }

            /// The full type name shown in YAML (`AddressSpecs.net.keelson.dev`).
            pub fn type_name(self) -> &'static str {
                match self { $( Kind::$variant => $full, )* }
            }
        }

        /// One spec of any kind.
        #[derive(Clone, PartialEq, Debug, Serialize)]
        #[serde(untagged)]
        #[allow(clippy::large_enum_variant)]
        pub enum AnySpec { $( $(#[$m])* $variant($ty), )* }

        impl AnySpec {
            /// The kind of this spec.
            pub fn kind(&self) -> Kind {
                match self { $( AnySpec::$variant(_) => Kind::$variant, )* }
            }
        }

        $(
            impl From<$ty> for AnySpec {
                fn from(v: $ty) -> Self { AnySpec::$variant(v) }
            }
            impl SpecType for $ty {
                const KIND: Kind = Kind::$variant;
                fn from_any(any: &AnySpec) -> Option<&Self> {
                    match any { AnySpec::$variant(v) => Some(v), #[allow(unreachable_patterns)] _ => None }
                }
            }
        )*
    };
}

kinds! {
    /// Desired address.
    AddressSpec(AddressSpec) = "AddressSpec", "AddressSpecs.net.keelson.dev";
    /// Observed address.
    AddressStatus(AddressStatus) = "AddressStatus", "AddressStatuses.net.keelson.dev";
    /// Desired route.
    RouteSpec(RouteSpec) = "RouteSpec", "RouteSpecs.net.keelson.dev";
    /// Observed route.
    RouteStatus(RouteStatus) = "RouteStatus", "RouteStatuses.net.keelson.dev";
    /// Desired link.
    LinkSpec(LinkSpec) = "LinkSpec", "LinkSpecs.net.keelson.dev";
    /// Observed link.
    LinkStatus(LinkStatus) = "LinkStatus", "LinkStatuses.net.keelson.dev";
    /// Link state changed without a netlink event (WireGuard): re-read.
    LinkRefresh(LinkRefresh) = "LinkRefresh", "LinkRefreshes.net.keelson.dev";
    /// Desired resolvers.
    ResolverSpec(ResolverSpec) = "ResolverSpec", "ResolverSpecs.net.keelson.dev";
    /// Resolvers in effect.
    ResolverStatus(ResolverStatus) = "ResolverStatus", "ResolverStatuses.net.keelson.dev";
    /// Desired hostname.
    HostnameSpec(HostnameSpec) = "HostnameSpec", "HostnameSpecs.net.keelson.dev";
    /// Hostname in effect.
    HostnameStatus(HostnameStatus) = "HostnameStatus", "HostnameStatuses.net.keelson.dev";
    /// Desired time servers.
    TimeServerSpec(TimeServerSpec) = "TimeServerSpec", "TimeServerSpecs.net.keelson.dev";
    /// Time servers in effect.
    TimeServerStatus(TimeServerStatus) = "TimeServerStatus", "TimeServerStatuses.net.keelson.dev";
    /// An operator to run.
    OperatorSpec(OperatorSpec) = "OperatorSpec", "OperatorSpecs.net.keelson.dev";
    /// What an operator is doing.
    OperatorStatus(OperatorStatus) = "OperatorStatus", "OperatorStatuses.net.keelson.dev";
    /// Desired policy routing rule.
    RoutingRuleSpec(RoutingRuleSpec) = "RoutingRuleSpec", "RoutingRuleSpecs.net.keelson.dev";
    /// Observed policy routing rule.
    RoutingRuleStatus(RoutingRuleStatus) = "RoutingRuleStatus", "RoutingRuleStatuses.net.keelson.dev";
    /// Node addresses.
    NodeAddress(NodeAddress) = "NodeAddress", "NodeAddresses.net.keelson.dev";
    /// Network readiness.
    NetworkStatus(NetworkStatus) = "NetworkStatus", "NetworkStatuses.net.keelson.dev";
    /// A file written under the root (`/etc/resolv.conf`, ...).
    EtcFileStatus(EtcFileStatus) = "EtcFileStatus", "EtcFileStatuses.files.keelson.dev";
    /// A supervised service.
    ServiceStatus(ServiceStatus) = "ServiceStatus", "ServiceStatuses.runtime.keelson.dev";
    /// The parsed kernel command line.
    Cmdline(CmdlineNetwork) = "Cmdline", "Cmdlines.runtime.keelson.dev";
    /// The machine configuration.
    MachineConfig(MachineConfig) = "MachineConfig", "MachineConfigs.config.keelson.dev";
    /// The node's KubeSpan key pair and address.
    KubeSpanIdentity(KubeSpanIdentity) = "KubeSpanIdentity", "KubeSpanIdentities.kubespan.keelson.dev";
    /// A KubeSpan peer to mesh with.
    KubeSpanPeerSpec(KubeSpanPeerSpec) = "KubeSpanPeerSpec", "KubeSpanPeerSpecs.kubespan.keelson.dev";
    /// A KubeSpan peer's state.
    KubeSpanPeerStatus(KubeSpanPeerStatus) = "KubeSpanPeerStatus", "KubeSpanPeerStatuses.kubespan.keelson.dev";
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.short_name())
    }
}

impl Serialize for Kind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.type_name())
    }
}

/// COSI-style metadata.
#[derive(Clone, PartialEq, Debug, Serialize)]
pub struct Metadata {
    /// Namespace.
    pub namespace: Namespace,
    /// Kind, serialized as the full type name.
    #[serde(rename = "type")]
    pub kind: Kind,
    /// Natural (or layered) ID.
    pub id: String,
    /// Starts at 1; grows by one on each change.
    pub version: u64,
    /// The controller that owns (alone may write) it.
    pub owner: String,
    /// Running or tearing down.
    pub phase: Phase,
    /// When it was created.
    #[serde(serialize_with = "ser_time")]
    pub created: SystemTime,
    /// When it last changed.
    #[serde(serialize_with = "ser_time")]
    pub updated: SystemTime,
    /// Controllers that must release it before it can be destroyed.
    #[serde(skip_serializing_if = "BTreeSet::is_empty")]
    pub finalizers: BTreeSet<String>,
}

/// A resource: metadata plus its spec.
#[derive(Clone, PartialEq, Debug, Serialize)]
pub struct Resource {
    /// Metadata.
    pub metadata: Metadata,
    /// The spec.
    pub spec: AnySpec,
    /// For merged specs: per field, the `network-config` inputs its value came from.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub provenance: BTreeMap<String, Vec<String>>,
}

impl Resource {
    /// The spec as type `S`, if it is one.
    pub fn spec_as<S: SpecType>(&self) -> Option<&S> {
        S::from_any(&self.spec)
    }
}

fn ser_time<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&Rfc3339(*t))
}

/// Formats a `SystemTime` as `2021-06-29T20:23:18Z` (UTC, whole seconds).
#[derive(Debug, Clone, Copy)]
pub struct Rfc3339(pub SystemTime);

impl fmt::Display for Rfc3339 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.0.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let days = i64::try_from(secs / 86_400).unwrap_or(0);
        let rem = secs % 86_400;
        // Civil-from-days (H. Hinnant's algorithm), valid for the proleptic Gregorian calendar.
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + i64::from(month <= 2);
        write!(
            f,
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
            rem / 3600,
            (rem / 60) % 60,
            rem % 60
        )
    }
}

/// The specs one configuration source produces for one layer, before IDs are assigned.
///
/// Config controllers turn each entry into a `network-config` resource with the ID
/// `<layer>/<natural id>`.
#[derive(Clone, PartialEq, Debug, Default)]
pub struct LayerSpecs {
    /// Addresses.
    pub addresses: Vec<AddressSpec>,
    /// Routes.
    pub routes: Vec<RouteSpec>,
    /// Links.
    pub links: Vec<LinkSpec>,
    /// Resolvers (at most one per source, usually).
    pub resolvers: Vec<ResolverSpec>,
    /// Hostnames.
    pub hostnames: Vec<HostnameSpec>,
    /// Time servers.
    pub time_servers: Vec<TimeServerSpec>,
    /// Operators.
    pub operators: Vec<OperatorSpec>,
    /// Policy routing rules.
    pub rules: Vec<RoutingRuleSpec>,
}

impl LayerSpecs {
    /// Every spec with its natural ID and layer, in one list: what writers of a layer need.
    pub fn into_entries(self) -> Vec<(String, ConfigLayer, AnySpec)> {
        fn add<S: SpecType>(
            out: &mut Vec<(String, ConfigLayer, AnySpec)>,
            items: Vec<S>,
            key: impl Fn(&S) -> (String, ConfigLayer),
        ) {
            out.extend(items.into_iter().map(|s| {
                let (id, layer) = key(&s);
                (id, layer, s.into())
            }));
        }
        let Self { addresses, routes, links, resolvers, hostnames, time_servers, operators, rules } =
            self;
        let mut out = Vec::new();
        add(&mut out, addresses, |s| (s.id(), s.layer));
        add(&mut out, routes, |s| (s.id(), s.layer));
        add(&mut out, links, |s| (s.id(), s.layer));
        add(&mut out, resolvers, |s| (RESOLVER_ID.to_owned(), s.layer));
        add(&mut out, hostnames, |s| (HOSTNAME_ID.to_owned(), s.layer));
        add(&mut out, time_servers, |s| (TIMESERVER_ID.to_owned(), s.layer));
        add(&mut out, operators, |s| (s.id(), s.layer));
        add(&mut out, rules, |s| (s.id(), s.layer));
        out
    }
}

#[cfg(test)]
mod kind_tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn rfc3339() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_624_998_198);
        assert_eq!(Rfc3339(t).to_string(), "2021-06-29T20:23:18Z");
        assert_eq!(Rfc3339(SystemTime::UNIX_EPOCH).to_string(), "1970-01-01T00:00:00Z");
        let leap = SystemTime::UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(Rfc3339(leap).to_string(), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn spec_type_round_trip() {
        let spec = HostnameSpec {
            hostname: "a".into(),
            domainname: String::new(),
            layer: ConfigLayer::Default,
        };
        let any: AnySpec = spec.clone().into();
        assert_eq!(any.kind(), Kind::HostnameSpec);
        assert_eq!(HostnameSpec::from_any(&any), Some(&spec));
        assert_eq!(AddressSpec::from_any(&any), None);
    }
}
