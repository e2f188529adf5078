// SPDX-License-Identifier: Apache-2.0
//! The machine configuration: a strict parser for the Talos v1alpha1 YAML shape and its
//! translation into layer-`configuration` specs ([`to_specs`], docs/talos.md: Merge).
//!
//! # Contract
//!
//! * [`check`] reads a YAML stream (one v1alpha1 document, typed documents, or both; see
//!   `documents`), drops each invalid entry at the narrowest unit that holds it (the field,
//!   else the list item; `prune`) and keeps the rest, with one [`ConfigError`] per drop naming
//!   the document, YAML path, line and column, and what was dropped (docs/config.md).
//! * [`parse`] is the all-or-nothing reading: the configuration, or the first problem.
//! * Unknown keys are errors at every depth, except a fixed list of Talos keys keelson has
//!   no use for (PKI, install, etcd, Kubernetes control plane...). Those are
//!   accepted, their content is ignored, and each present one adds a line to
//!   [`MachineConfig::warnings`]. Keys under `machine.network` are never ignored.
//! * Typed values (IPs, CIDRs, MAC globs, kernel names, durations, VLAN IDs, the KubeSpan
//!   MTU) are checked while parsing, so their errors carry serde_yaml's exact position.
//!   Checks across values (`interface` xor `deviceSelector`, bond xor bridge) run after
//!   parsing and locate their path in the text.
//!
//! # What keelson adds to or changes in Talos's shape
//!
//! * `machine.kubelet.command`: the kubelet command line keelson hands off to (Talos runs
//!   kubelet from an image instead; `machine.kubelet.image` reaches the command as
//!   `KUBELET_IMAGE`, and a new image restarts it), and
//!   `machine.kubelet.healthz`: the `http://` endpoint whose 200 says it is healthy.
//! * `machine.metrics.listen`: where the node serves Prometheus metrics (off when absent).
//! * `machine.tenantNetworks`: the tenant-network agent PID 1 runs (off when absent).
//! * `routes[].table` on legacy device and VLAN routes: a number or `main`, `local`,
//!   `default` (Talos has it only in the newer multi-document config).
//! * `machine.time.bootTimeout` is a Go-style duration string (`90s`, `2m`, `1h30m`).
//! * `dhcpOptions.duidv6` becomes the DHCPv6 operator's DUID.
//! * `bond.useCarrier: false` is honoured (bond defaults would otherwise force it on).
//! * Stricter than Talos: bond and other kernel names must be names (`802.3ad`, not `4`);
//!   VLAN addresses must be CIDRs (Talos logs and skips them); a device needs exactly one of
//!   `interface` and `deviceSelector`; the hostname is validated at parse time.
//! * `machine.network.kubespan.peers`, `privateKey` and `endpointTimeout`: peers known in
//!   advance, a configured WireGuard key, and how long each endpoint gets (1 s to 15 s).
//!   `harvestExtraEndpoints` acts through the discovery service (a warning when it is off).
//! * Legacy devices follow Talos (docs/talos.md: Legacy `machine.network`): a selector
//!   configures every link it matches, entries for one link merge, a bridge runs STP unless
//!   told not to, and `cidr`, `bridgePort`, `dummy` and `wireguard` are implemented. keelson
//!   accepts `interfaces` with `deviceSelectors` in one bond, and `arpIPTarget`, which Talos
//!   refuses.
//! * Not accepted: vendor VIPs (`equinixMetal`, `hcloud`); `bond.adActorSystem` is refused
//!   as Talos refuses it.

mod args;
mod bounds;
mod documents;
mod error;
#[cfg(test)]
mod fuzz;
mod healthz;
mod known;
mod locate;
mod machine;
mod migrate;
mod migrate_links;
mod network;
mod positions;
mod prune;
mod scalar;
mod select;
mod specs;
mod stream;
mod tree;
mod validate;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_documents;
#[cfg(test)]
mod tests_hostile;
#[cfg(test)]
mod tests_legacy;
#[cfg(test)]
mod tests_links;
#[cfg(test)]
mod tests_onepass;
#[cfg(test)]
mod tests_partial;
#[cfg(test)]
mod tests_specs;
#[cfg(test)]
mod tests_talos_kinds;

pub use args::ArgValue;
pub use documents::{
    AliasSelector, AutoHostname, BondConfig, BridgeConfig, BridgeStpConfig, BridgeVlanConfig,
    CommonLink, Dhcp4Config, Dhcp6Config, DhcpConfig, Document, DummyLinkConfig, EthernetConfig,
    IdentifierKind, Layer2VipConfig, LinkAddress, LinkAliasConfig, LinkConfig, LinkRoute,
    NetworkDocument, Selector, SelectorError, VlanConfig, VrfConfig, WireguardConfig,
    WireguardPeerConfig,
};
pub use error::{ConfigError, Position};
pub use healthz::{HealthzTarget, DEFAULT_HEALTHZ};
pub use machine::{
    Cluster, ControlPlaneConfig, Discovery, DiscoveryRegistries, DiskSelector, EtcdConfig,
    InstallConfig, KubeletConfig, KubernetesRegistry, Machine, MachineConfig, MachineType,
    MetricsConfig, NodeIpConfig, PemKeyPair, ServiceRegistry, TenantNetworksConfig, TimeConfig,
    DEFAULT_TENANT_AGENT, MAX_TENANT_ETCD_ENDPOINTS,
};
pub use migrate::{migrate, MigrateError};
pub use network::{
    Bond, Bridge, BridgePort, BridgeStp, BridgeVlan, Device, DeviceSelector, DeviceWireguard,
    DeviceWireguardPeer, DhcpOptions, ExtraHost, KubeSpanConfig, KubeSpanFilters, KubeSpanPeer,
    NetworkConfig, Route, Vip, Vlan, KUBESPAN_DEFAULT_ENDPOINT_TIMEOUT, KUBESPAN_DEFAULT_MTU,
};
pub use scalar::CidrFilter;
pub use specs::to_specs;
pub use stream::{check, Report};

/// ID of the machine configuration in the `config` namespace.
pub const MACHINE_CONFIG_ID: &str = "v1alpha1";

/// Parse and validate a machine configuration: one YAML document, or a stream of them (a
/// v1alpha1 machine configuration and typed documents). A leading byte-order mark is
/// dropped (editors on Windows write one; YAML 1.2 allows it). A document that is not a
/// mapping, or that aliases expand beyond one node per byte of text plus a fixed allowance,
/// is refused before anything of it is deserialized or quoted. The first problem is
/// returned; [`check`] returns them all.
/// Nothing is dropped: this is the all-or-nothing reading (an `apply-config` without
/// `--allow-partial`); [`check`] keeps what is valid.
pub fn parse(yaml: &str) -> Result<MachineConfig, ConfigError> {
    let mut report = stream::check(yaml);
    if report.errors.is_empty() {
        Ok(report.config)
    } else {
        let mut e = report.errors.swap_remove(0);
        e.dropped = None;
        Err(e)
    }
}
