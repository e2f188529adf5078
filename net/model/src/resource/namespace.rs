// SPDX-License-Identifier: Apache-2.0
//! Resource namespaces and lifecycle phases.

use std::fmt;

use serde::{Serialize, Serializer};

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
    /// What the machine is (SMBIOS).
    Hardware,
    /// The node's identity, affiliates (merged per node) and members.
    Cluster,
    /// Affiliates as each registry reported them, before the merge.
    ClusterRaw,
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
            Namespace::Hardware => "hardware",
            Namespace::Cluster => "cluster",
            Namespace::ClusterRaw => "cluster-raw",
        }
    }

    /// Every namespace, in display order.
    pub const ALL: [Namespace; 8] = [
        Namespace::NetworkConfig,
        Namespace::Network,
        Namespace::Config,
        Namespace::Runtime,
        Namespace::KubeSpan,
        Namespace::Hardware,
        Namespace::Cluster,
        Namespace::ClusterRaw,
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
