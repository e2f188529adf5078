// SPDX-License-Identifier: Apache-2.0
//! `KubeNodeConfig`: the Kubernetes node's settings, which Talos 1.14 moved out of
//! `machine.kubelet` and `machine.node*` (Talos's `pkg/machinery/config/types/k8s/node.go`).
//!
//! keelson acts on `nodeIP.validSubnets`, which picks the `--node-ip` it gives the kubelet
//! (folded into `machine.kubelet.nodeIP`); the rest is the kubelet's registration with the API
//! server, which keelson does not make, and each present field is a warning.

use serde::{Deserialize, Serialize};

use super::{Body, Legacy, Problems};
use crate::config::locate::YamlPath;
use crate::config::machine::{MachineConfig, NodeIpConfig, TalosKey};

/// `kind: KubeNodeConfig`.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubeNodeConfig {
    #[serde(default, rename = "apiVersion", skip_serializing)]
    pub(crate) api_version: TalosKey,
    #[serde(default, skip_serializing)]
    pub(crate) kind: TalosKey,
    /// `nodeIP`: `validSubnets` (a `!` excludes), as v1alpha1's `machine.kubelet.nodeIP`.
    #[serde(default, rename = "nodeIP")]
    pub node_ip: NodeIpConfig,
    // The kubelet's registration: accepted, not used (see `check`).
    #[serde(default, skip_serializing)]
    pub(crate) skip_node_registration: Option<TalosKey>,
    #[serde(default, rename = "registerWithFQDN", skip_serializing)]
    pub(crate) register_with_fqdn: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) labels: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) annotations: Option<TalosKey>,
    #[serde(default, skip_serializing)]
    pub(crate) taints: Option<TalosKey>,
}

impl Body for KubeNodeConfig {
    fn check(&self, p: &mut Problems) {
        let unused = [
            ("skipNodeRegistration", self.skip_node_registration.is_some()),
            ("registerWithFQDN", self.register_with_fqdn.is_some()),
            ("labels", self.labels.is_some()),
            ("annotations", self.annotations.is_some()),
            ("taints", self.taints.is_some()),
        ];
        for (key, _) in unused.into_iter().filter(|(_, present)| *present) {
            p.warn(
                YamlPath::keys(key),
                "keelson does not register the node (the kubelet of machine.kubelet.command \
                 does, with its own flags); ignored",
            );
        }
    }

    fn legacy_conflict(&self, legacy: &Legacy<'_>) -> Option<(&'static str, String)> {
        // Talos's list: everything this document moved out of the v1alpha1 document.
        const MOVED: [&str; 8] = [
            "machine.kubelet.nodeIP",
            "machine.kubelet.skipNodeRegistration",
            "machine.kubelet.registerWithFQDN",
            "machine.nodeLabels",
            "machine.nodeAnnotations",
            "machine.nodeTaints",
            "cluster.allowSchedulingOnControlPlanes",
            "cluster.allowSchedulingOnMasters",
        ];
        MOVED
            .into_iter()
            .find(|path| legacy.line_of(path).is_some())
            .map(|path| (path, "the Kubernetes node is configured in both places".to_owned()))
    }

    fn fold_into(&self, cfg: &mut MachineConfig) -> bool {
        if !self.node_ip.valid_subnets.is_empty() {
            cfg.machine.kubelet.node_ip = Some(self.node_ip.clone());
        }
        true
    }
}
