// SPDX-License-Identifier: Apache-2.0
//! `DiscoveryServiceConfig` and `DiscoveryIdentityConfig`: Talos 1.14 moved the discovery
//! service endpoint out of v1alpha1's `cluster.discovery` and the cluster identity out of
//! `cluster.id`/`cluster.secret` into these two documents (Talos's
//! `pkg/machinery/config/types/cluster/discovery_service.go`, `discovery_identity.go`).
//!
//! Both fold into the v1alpha1 shape, so the discovery client and KubeSpan read one place.
//! Talos runs a client per `DiscoveryServiceConfig`; keelson runs one, for the first document
//! in the stream, and warns about the others.

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::{Body, Document, Legacy, NetworkDocument, Problems};
use crate::config::locate::YamlPath;
use crate::config::machine::{
    Cluster, Discovery, DiscoveryRegistries, KubernetesRegistry, MachineConfig, ServiceRegistry,
    TalosKey,
};
use crate::config::scalar::{self, Url};

/// `kind: DiscoveryServiceConfig`: a discovery service to publish to and learn from.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DiscoveryServiceConfig {
    #[serde(default, rename = "apiVersion", skip_serializing)]
    pub(crate) api_version: TalosKey,
    #[serde(default, skip_serializing)]
    pub(crate) kind: TalosKey,
    /// `name`: what tells two services apart.
    pub name: String,
    /// `endpoint`: `https://` or `grpc://` (TLS), `http://` (plaintext); the path is ignored.
    #[serde(deserialize_with = "scalar::one::<Url, _>")]
    pub endpoint: String,
}

impl Body for DiscoveryServiceConfig {
    fn name(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(&self.name))
    }

    fn check(&self, p: &mut Problems) {
        if self.name.is_empty() {
            p.error(YamlPath::keys("name"), "name is required");
        }
    }

    fn legacy_conflict(&self, legacy: &Legacy<'_>) -> Option<(&'static str, String)> {
        // Talos: the mere presence of `cluster.discovery` conflicts, whatever it says.
        let path = "cluster.discovery";
        legacy
            .line_of(path)
            .map(|_| (path, "the discovery service is configured in both places".into()))
    }

    fn fold_into(&self, cfg: &mut MachineConfig) -> bool {
        let cluster = cfg.cluster.get_or_insert_with(Cluster::default);
        if cluster.discovery.is_none() {
            // As Talos 1.14 reads these documents: the service on, the Kubernetes registry
            // (a v1alpha1-only setting) off.
            cluster.discovery = Some(Discovery {
                enabled: true,
                registries: DiscoveryRegistries {
                    kubernetes: KubernetesRegistry { disabled: true },
                    service: ServiceRegistry {
                        disabled: false,
                        endpoint: Some(self.endpoint.clone()),
                        ttl: None,
                    },
                },
            });
        }
        // A later document is counted but not used: see [`extra_services`].
        true
    }
}

/// One warning for each `DiscoveryServiceConfig` after the first kept one: keelson runs a
/// single discovery client.
pub(crate) fn extra_services<'a>(
    docs: impl IntoIterator<Item = &'a NetworkDocument>,
) -> Vec<String> {
    let mut first: Option<&NetworkDocument> = None;
    let mut warnings = Vec::new();
    for doc in docs {
        if !matches!(doc.doc, Document::DiscoveryService(_)) {
            continue;
        }
        match first {
            None => first = Some(doc),
            Some(used) => warnings.push(format!(
                "{} (line {}): keelson runs one discovery client, for {} (line {}); this \
                 service is not used",
                doc.label(),
                doc.line,
                used.label(),
                used.line
            )),
        }
    }
    warnings
}

/// The `DiscoveryServiceConfig` documents (indices in `docs`) to refuse because no cluster
/// identity comes with them: Talos refuses such a configuration, and the service's payloads
/// are encrypted with the cluster secret. `cfg` is the v1alpha1 document, before any folding.
pub(crate) fn without_identity(
    docs: &[NetworkDocument],
    refused: &std::collections::BTreeSet<usize>,
    cfg: &MachineConfig,
) -> Vec<usize> {
    let kept = || docs.iter().enumerate().filter(|(i, _)| !refused.contains(i));
    let legacy = cfg.cluster.as_ref().is_some_and(|c| c.id.is_some() && c.secret.is_some());
    let document = kept().any(|(_, d)| matches!(d.doc, Document::DiscoveryIdentity(_)));
    if legacy || document {
        return Vec::new();
    }
    kept().filter(|(_, d)| matches!(d.doc, Document::DiscoveryService(_))).map(|(i, _)| i).collect()
}

/// `kind: DiscoveryIdentityConfig`: the cluster's identity for the discovery service and
/// KubeSpan. The secret is never shown: serialized as `<redacted>`, left out of `Debug`.
#[derive(Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscoveryIdentityConfig {
    #[serde(default, rename = "apiVersion", skip_serializing)]
    pub(crate) api_version: TalosKey,
    #[serde(default, skip_serializing)]
    pub(crate) kind: TalosKey,
    /// `clusterID`: an identifier, never decoded (Talos writes base64 of 32 random bytes, in
    /// the URL alphabet before 1.14).
    #[serde(rename = "clusterID")]
    pub cluster_id: String,
    /// `clusterSecret`: 32 bytes in base64, the discovery encryption key.
    #[serde(rename = "clusterSecret", serialize_with = "redacted")]
    pub cluster_secret: String,
}

/// Longest `clusterID` accepted: Talos's are 44 characters; the bound keeps a hostile value
/// out of every affiliate this node publishes.
const CLUSTER_ID_MAX: usize = 256;

impl fmt::Debug for DiscoveryIdentityConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DiscoveryIdentityConfig")
            .field("cluster_id", &self.cluster_id)
            .field("cluster_secret", &"<redacted>")
            .finish()
    }
}

fn redacted<S: serde::Serializer>(_: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str("<redacted>")
}

impl Body for DiscoveryIdentityConfig {
    fn check(&self, p: &mut Problems) {
        let id = &self.cluster_id;
        if id.is_empty() {
            p.error(YamlPath::keys("clusterID"), "clusterID is required");
        } else if id.len() > CLUSTER_ID_MAX || !id.bytes().all(|b| b.is_ascii_graphic()) {
            p.error(
                YamlPath::keys("clusterID"),
                format!("clusterID is at most {CLUSTER_ID_MAX} printable characters"),
            );
        }
        // The value is a secret: the message never quotes it.
        if self.cluster_secret.is_empty() {
            p.error(YamlPath::keys("clusterSecret"), "clusterSecret is required");
        } else if crate::wgkey::Key::from_base64(&self.cluster_secret).is_err() {
            p.error(YamlPath::keys("clusterSecret"), "clusterSecret is not 32 bytes in base64");
        }
    }

    fn legacy_conflict(&self, legacy: &Legacy<'_>) -> Option<(&'static str, String)> {
        ["cluster.id", "cluster.secret"]
            .into_iter()
            .find(|p| legacy.line_of(p).is_some())
            .map(|path| (path, "the cluster identity is configured in both places".to_owned()))
    }

    fn fold_into(&self, cfg: &mut MachineConfig) -> bool {
        let cluster = cfg.cluster.get_or_insert_with(Cluster::default);
        cluster.id = Some(self.cluster_id.clone());
        cluster.secret = Some(self.cluster_secret.clone());
        true
    }
}
