// SPDX-License-Identifier: Apache-2.0
//! `KubeSpanConfig` and `KubeSpanEndpointsConfig` (Talos's
//! `pkg/machinery/config/types/network/kubespan.go`, `kubespan_endpoints.go`).

use std::net::SocketAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use super::{Body, Legacy, Problems};
use crate::config::locate::YamlPath;
use crate::config::machine::{MachineConfig, TalosKey};
use crate::config::scalar::{self, Cidr, CidrFilter, Endpoint, Filter, KubeSpanMtu};

/// `kind: KubeSpanConfig`: the same settings as v1alpha1's `machine.network.kubespan`
/// without keelson's additions (peers, key, timeout), which stay in the v1alpha1 document.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubeSpanDocument {
    #[serde(default, rename = "apiVersion", skip_serializing)]
    pub(crate) api_version: TalosKey,
    #[serde(default, skip_serializing)]
    pub(crate) kind: TalosKey,
    /// `enabled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// `advertiseKubernetesNetworks`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advertise_kubernetes_networks: Option<bool>,
    /// `allowDownPeerBypass`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_down_peer_bypass: Option<bool>,
    /// `harvestExtraEndpoints`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harvest_extra_endpoints: Option<bool>,
    /// `mtu`, at least 1280.
    #[serde(
        default,
        deserialize_with = "scalar::opt::<KubeSpanMtu, _>",
        skip_serializing_if = "Option::is_none"
    )]
    pub mtu: Option<u32>,
    /// `filters`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filters: Option<KubeSpanDocumentFilters>,
}

/// `filters`.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubeSpanDocumentFilters {
    /// `endpoints`.
    #[serde(
        default,
        deserialize_with = "scalar::list::<Filter, _>",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub endpoints: Vec<CidrFilter>,
    /// `excludeAdvertisedNetworks`.
    #[serde(
        default,
        deserialize_with = "scalar::list::<Cidr, _>",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub exclude_advertised_networks: Vec<IpNet>,
}

impl Body for KubeSpanDocument {
    fn check(&self, p: &mut Problems) {
        // harvestExtraEndpoints and filters.endpoints act through the discovery service;
        // the node says once at run time when that service is off.
        if self.advertise_kubernetes_networks == Some(true) {
            p.warn(
                YamlPath::keys("advertiseKubernetesNetworks"),
                "the pod networks come from the Kubernetes node object, which keelson does not \
                 read; list them in the v1alpha1 kubespan.peers[].addresses instead",
            );
        }
    }

    fn legacy_conflict(&self, legacy: &Legacy<'_>) -> Option<(&'static str, String)> {
        // Only the settings this document also has: keelson's peers, key and timeout live in
        // the v1alpha1 document alone and may sit beside it.
        const SHARED: [&str; 6] = [
            "machine.network.kubespan.enabled",
            "machine.network.kubespan.advertiseKubernetesNetworks",
            "machine.network.kubespan.allowDownPeerBypass",
            "machine.network.kubespan.harvestExtraEndpoints",
            "machine.network.kubespan.mtu",
            "machine.network.kubespan.filters",
        ];
        SHARED
            .into_iter()
            .find(|path| legacy.line_of(path).is_some())
            .map(|path| (path, "KubeSpan is configured in both places".to_owned()))
    }

    fn fold_into(&self, cfg: &mut MachineConfig) -> bool {
        let ks = &mut cfg.machine.network.kubespan;
        ks.enabled = self.enabled.unwrap_or(false);
        ks.advertise_kubernetes_networks = self.advertise_kubernetes_networks.unwrap_or(false);
        ks.allow_down_peer_bypass = self.allow_down_peer_bypass.unwrap_or(false);
        ks.harvest_extra_endpoints = self.harvest_extra_endpoints.unwrap_or(false);
        if let Some(mtu) = self.mtu {
            ks.mtu = mtu;
        }
        if let Some(filters) = &self.filters {
            ks.filters.endpoints.clone_from(&filters.endpoints);
            ks.filters.exclude_advertised_networks.clone_from(&filters.exclude_advertised_networks);
        }
        true
    }
}

/// `kind: KubeSpanEndpointsConfig`: endpoints to announce beyond the node's own addresses
/// (a NAT mapping).
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubeSpanEndpointsConfig {
    #[serde(default, rename = "apiVersion", skip_serializing)]
    pub(crate) api_version: TalosKey,
    #[serde(default, skip_serializing)]
    pub(crate) kind: TalosKey,
    /// `extraAnnouncedEndpoints`: `ip:port` each.
    #[serde(default, deserialize_with = "scalar::list::<Endpoint, _>")]
    pub extra_announced_endpoints: Vec<SocketAddr>,
}

impl Body for KubeSpanEndpointsConfig {
    fn check(&self, _: &mut Problems) {}

    fn fold_into(&self, cfg: &mut MachineConfig) -> bool {
        cfg.machine
            .network
            .kubespan
            .extra_announced_endpoints
            .clone_from(&self.extra_announced_endpoints);
        true
    }
}
