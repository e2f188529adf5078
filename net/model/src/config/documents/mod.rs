// SPDX-License-Identifier: Apache-2.0
//! Typed documents: the multi-document configuration Talos introduced in 1.12, where each
//! part of the network configuration is its own YAML document (`apiVersion: v1alpha1`,
//! `kind: LinkConfig`, ...) beside, or instead of, the v1alpha1 machine configuration
//! (Talos's `pkg/machinery/config/types/network`; since 1.14 also the discovery documents of
//! `types/cluster` and `KubeNodeConfig` of `types/k8s`).
//!
//! One file per kind holds its shape, its checks, and what it becomes: a kind whose content
//! the v1alpha1 shape can hold (hostname, resolvers, time, KubeSpan, static hosts, discovery,
//! the node IP) is folded into it, so every consumer reads one place; the others (links,
//! DHCP, rules, blackhole routes) are kept and add their specs at layer `configuration`.
//! Adding a kind is one file and one row of [`kinds!`].

mod blackhole_route;
mod bond;
mod bridge;
mod dhcp;
mod discovery;
mod dummy;
mod ethernet;
mod hostname;
mod kube_node;
mod kubespan;
mod layer2_vip;
mod link;
mod link_alias;
mod link_common;
mod link_names;
mod resolver;
mod routing_rule;
mod selector;
mod static_host;
mod time_sync;
mod vlan;
mod vrf;
mod wireguard;

use std::borrow::Cow;

use serde::{Serialize, Serializer};

pub use blackhole_route::BlackholeRouteConfig;
pub use bond::BondConfig;
pub use bridge::{BridgeConfig, BridgeStpConfig, BridgeVlanConfig};
pub use dhcp::{Dhcp4Config, Dhcp6Config, DhcpConfig, IdentifierKind};
pub(crate) use discovery::{extra_services, without_identity};
pub use discovery::{DiscoveryIdentityConfig, DiscoveryServiceConfig};
pub use dummy::DummyLinkConfig;
pub use ethernet::EthernetConfig;
pub use hostname::{AutoHostname, HostnameConfig};
pub use kube_node::KubeNodeConfig;
pub use kubespan::KubeSpanDocumentFilters;
pub use kubespan::{KubeSpanDocument, KubeSpanEndpointsConfig};
pub use layer2_vip::Layer2VipConfig;
pub use link::LinkConfig;
pub use link_alias::{AliasSelector, LinkAliasConfig};
pub use link_common::{CommonLink, LinkAddress, LinkRoute};
pub(crate) use link_names::LinkNames;
pub use resolver::{Nameserver, ResolverConfig, SearchDomains};
pub use routing_rule::RoutingRuleConfig;
pub use selector::{Selector, SelectorError};
pub use static_host::StaticHostConfig;
pub use time_sync::{Ntp, TimeSyncConfig};
pub use vlan::VlanConfig;
pub use vrf::VrfConfig;
pub use wireguard::{WireguardConfig, WireguardPeerConfig};

use super::locate::YamlPath;
use super::machine::MachineConfig;
use super::specs::Specs;
use crate::resource::LinkView;

/// The only `apiVersion` typed documents have.
pub const API_VERSION: &str = "v1alpha1";

/// Talos kinds keelson accepts and does not act on: each present one is a warning, so a
/// Talos configuration still loads. Any other kind is an error. The list is Talos v1.14's
/// registered kinds (`pkg/machinery/config/types/*`, `registry.Register`) that keelson does
/// not implement, and the last six are names from Talos's development branches that no
/// release has, accepted as before. docs/machine-config.md has the table.
pub const NOT_IMPLEMENTED: &[&str] = &[
    // Network settings keelson has no machinery for yet.
    "BGPInstanceConfig",
    "HCloudVIPConfig",
    "HTTPProbeConfig",
    "NetworkDefaultActionConfig",
    "NetworkRuleConfig",
    "TCPProbeConfig",
    "VethConfig",
    // Disks, volumes and storage: keelson keeps only its state partition.
    "ExistingVolumeConfig",
    "ExternalVolumeConfig",
    "FilesystemScrubConfig",
    "FilesystemTrimConfig",
    "LVMLogicalVolumeConfig",
    "LVMVolumeGroupConfig",
    "RAIDArrayConfig",
    "RawVolumeConfig",
    "SwapVolumeConfig",
    "UserVolumeConfig",
    "VolumeConfig",
    "ZswapConfig",
    // The OS around the node: installer, kernel, logs, watchdog, extensions.
    "EnvironmentConfig",
    "EtcFileConfig",
    "EventSinkConfig",
    "ExtensionServiceConfig",
    "KernelModuleConfig",
    "KmsgLogConfig",
    "OOMConfig",
    "PCIDriverRebindConfig",
    "SecurityProfileConfig",
    "SideroLinkConfig",
    "SysctlConfig",
    "SysfsConfig",
    "UdevRulesConfig",
    "UnattendedInstallConfig",
    "WatchdogTimerConfig",
    // Containers, images and registries: keelson runs no container runtime.
    "ContainerConfig",
    "CRIBaseRuntimeSpecConfig",
    "CRICustomizationConfig",
    "ImageCacheConfig",
    "ImageVerificationConfig",
    "RegistryAuthConfig",
    "RegistryMirrorConfig",
    "RegistryTLSConfig",
    "TrustedRootsConfig",
    // Kubernetes: keelson hands off to the kubelet command of `machine.kubelet`.
    "KubeAdmissionControlConfig",
    "KubeAggregatorCAConfig",
    "KubeAPIServerCAConfig",
    "KubeAPIServerConfig",
    "KubeAuditPolicyConfig",
    "KubeAuthenticationConfig",
    "KubeAuthorizerConfig",
    "KubeClusterConfig",
    "KubeControllerManagerConfig",
    "KubeCoreDNSConfig",
    "KubeCredentialProviderConfig",
    "KubeEtcdEncryptionConfig",
    "KubeExternalManifestConfig",
    "KubeFlannelCNIConfig",
    "KubeInlineManifestConfig",
    "KubeletConfig",
    "KubeNetworkConfig",
    "KubePrismConfig",
    "KubeProxyConfig",
    "KubeSchedulerConfig",
    "KubeServiceAccountConfig",
    "KubeStaticPodConfig",
    "KubeTalosAPIAccessConfig",
    // In no Talos release.
    "BGPConfig",
    "BGPPeerConfig",
    "DefaultActionConfig",
    "MACVLANConfig",
    "ProbeConfig",
    "VXLANConfig",
];

/// The kinds that configure one link each: a name may be given to only one of them
/// (Talos's `conflictingLinkKinds`).
pub const LINK_KINDS: &[&str] = &[
    "BondConfig",
    "BridgeConfig",
    "DummyLinkConfig",
    "LinkConfig",
    "VLANConfig",
    "VRFConfig",
    "WireguardConfig",
];

/// Errors and warnings of one document, each at a path in the document's own text.
#[derive(Default, Debug)]
pub(crate) struct Problems {
    pub errors: Vec<(YamlPath, String)>,
    pub warnings: Vec<(YamlPath, String)>,
}

impl Problems {
    pub(crate) fn error(&mut self, path: YamlPath, message: impl Into<String>) {
        self.errors.push((path, message.into()));
    }

    pub(crate) fn warn(&mut self, path: YamlPath, message: impl Into<String>) {
        self.warnings.push((path, message.into()));
    }
}

/// The v1alpha1 document a typed document is checked against, and its text (to tell a key
/// that is absent from one set to its default).
pub(crate) struct Legacy<'a> {
    pub cfg: &'a MachineConfig,
    pub text: &'a str,
}

impl Legacy<'_> {
    /// The line of `path` in the v1alpha1 document, when the key is there.
    pub(crate) fn line_of(&self, path: &'static str) -> Option<usize> {
        YamlPath::keys(path).locate(self.text).map(|p| p.line)
    }
}

/// What each kind says about itself. The defaults fit a document with no name, no checks
/// beyond its shape, no conflicts and no output.
pub(crate) trait Body {
    /// The `name:` of kinds that have one; two documents of one kind and name are refused.
    fn name(&self) -> Option<Cow<'_, str>> {
        None
    }

    /// Kinds that may not have a document of the same name beside this one (one link
    /// configured as two kinds).
    fn conflicts_with(&self) -> &'static [&'static str] {
        &[]
    }

    /// Checks across this document's values.
    fn check(&self, _: &mut Problems) {}

    /// What this document would set twice with the v1alpha1 document: the legacy path, and
    /// why (Talos refuses these: `V1Alpha1ConflictValidate`).
    fn legacy_conflict(&self, _: &Legacy<'_>) -> Option<(&'static str, String)> {
        None
    }

    /// Move this document's content into the v1alpha1 shape; `true` when all of it moved
    /// (the document is then not kept).
    fn fold_into(&self, _: &mut MachineConfig) -> bool {
        false
    }

    /// The specs this document adds at layer `configuration`.
    fn add_specs(&self, _: &mut Specs, _: &LinkNames<'_, '_>) {}

    /// Does it configure links, so that the defaults leave physical links alone (Talos runs
    /// no default DHCP once a link or DHCP document exists)?
    fn configures_links(&self) -> bool {
        false
    }
}

/// The `apiVersion`/`kind` header serialized ahead of a document's own fields.
#[derive(Serialize)]
struct Tagged<'a, T: Serialize> {
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    kind: &'static str,
    #[serde(flatten)]
    body: &'a T,
}

/// Declares [`Document`] and its dispatch from one list of `Variant(Type) = "Kind"` rows.
macro_rules! kinds {
    ($($variant:ident($ty:ty) = $kind:literal),* $(,)?) => {
        /// A typed document.
        #[derive(Clone, PartialEq, Debug)]
        pub enum Document {
            $(#[doc = concat!("`", $kind, "`.")] $variant($ty),)*
        }

        impl Document {
            /// Every kind keelson implements.
            pub const KINDS: &'static [&'static str] = &[$($kind),*];

            /// Its `kind`.
            pub fn kind(&self) -> &'static str {
                match self {
                    $(Self::$variant(_) => $kind,)*
                }
            }

            pub(crate) fn body(&self) -> &dyn Body {
                match self {
                    $(Self::$variant(d) => d,)*
                }
            }

            /// Deserialize `text` as a `kind` document; `None` for a kind not in the table.
            pub(crate) fn parse(kind: &str, text: &str) -> Option<Result<Self, serde_yaml::Error>> {
                match kind {
                    $($kind => Some(serde_yaml::from_str::<$ty>(text).map(Self::$variant)),)*
                    _ => None,
                }
            }
        }

        impl Serialize for Document {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match self {
                    $(Self::$variant(body) => {
                        Tagged { api_version: API_VERSION, kind: $kind, body }.serialize(s)
                    })*
                }
            }
        }
    };
}

kinds! {
    Hostname(HostnameConfig) = "HostnameConfig",
    Resolver(ResolverConfig) = "ResolverConfig",
    StaticHost(StaticHostConfig) = "StaticHostConfig",
    TimeSync(TimeSyncConfig) = "TimeSyncConfig",
    RoutingRule(RoutingRuleConfig) = "RoutingRuleConfig",
    BlackholeRoute(BlackholeRouteConfig) = "BlackholeRouteConfig",
    KubeSpan(KubeSpanDocument) = "KubeSpanConfig",
    KubeSpanEndpoints(KubeSpanEndpointsConfig) = "KubeSpanEndpointsConfig",
    Link(LinkConfig) = "LinkConfig",
    Bond(BondConfig) = "BondConfig",
    Bridge(BridgeConfig) = "BridgeConfig",
    Vlan(VlanConfig) = "VLANConfig",
    DummyLink(DummyLinkConfig) = "DummyLinkConfig",
    Vrf(VrfConfig) = "VRFConfig",
    Wireguard(WireguardConfig) = "WireguardConfig",
    LinkAlias(LinkAliasConfig) = "LinkAliasConfig",
    Dhcp4(Dhcp4Config) = "DHCPv4Config",
    Dhcp6(Dhcp6Config) = "DHCPv6Config",
    Layer2Vip(Layer2VipConfig) = "Layer2VIPConfig",
    Ethernet(EthernetConfig) = "EthernetConfig",
    DiscoveryService(DiscoveryServiceConfig) = "DiscoveryServiceConfig",
    DiscoveryIdentity(DiscoveryIdentityConfig) = "DiscoveryIdentityConfig",
    KubeNode(KubeNodeConfig) = "KubeNodeConfig",
}

impl Document {
    /// `Kind/name` (or `Kind` for kinds without a name): what must be unique in a stream.
    pub fn id(&self) -> String {
        match self.body().name() {
            Some(name) => format!("{}/{name}", self.kind()),
            None => self.kind().to_owned(),
        }
    }
}

/// A typed document and where it was in the stream.
#[derive(Clone, PartialEq, Debug)]
pub struct NetworkDocument {
    /// Its place in the stream, from 1.
    pub number: usize,
    /// The line it starts on.
    pub line: usize,
    /// The document.
    pub doc: Document,
}

impl NetworkDocument {
    /// `document 3 (LinkConfig eth0)`: how errors and warnings name it.
    pub fn label(&self) -> String {
        label(self.number, self.doc.kind(), self.doc.body().name().as_deref())
    }
}

/// `document N (Kind name)`.
pub(crate) fn label(number: usize, kind: &str, name: Option<&str>) -> String {
    let name = name.map(|n| format!(" {}", crate::names::escape(n, 32))).unwrap_or_default();
    format!("document {number} ({kind}{name})")
}

impl Serialize for NetworkDocument {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.doc.serialize(s)
    }
}

/// Every kept document's specs, in stream order, after the aliases `LinkAliasConfig`
/// documents give (any document may use them, wherever it stands).
pub(crate) fn add_specs(docs: &[NetworkDocument], out: &mut Specs, links: &LinkView) {
    let mut names = LinkNames::new(links);
    for doc in docs {
        if let Document::LinkAlias(alias) = &doc.doc {
            alias.apply(&mut names);
        }
    }
    for doc in docs {
        doc.doc.body().add_specs(out, &names);
    }
}

/// For `skip_serializing_if` on numbers where 0 means "not set".
pub(crate) fn is_zero(v: &u32) -> bool {
    *v == 0
}
