// SPDX-License-Identifier: Apache-2.0
//! `keelson config migrate`: the v1alpha1 `machine.network` and `machine.time` sections
//! rewritten as typed documents, the rest of the file kept as it was. Talos reads both forms
//! (and deprecates the first) but offers no conversion.
//!
//! The result plans to the same specs as the input ([`super::to_specs`]), with one
//! exception Talos's rules force: once a link document exists, the defaults no longer bring
//! up and run DHCP on links the configuration does not mention. The output says so in a
//! comment when it applies.

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde_yaml::{Mapping, Value};

use super::documents::{
    Document, HostnameConfig, KubeSpanDocument, KubeSpanDocumentFilters, NetworkDocument,
    ResolverConfig, StaticHostConfig, TimeSyncConfig,
};
use super::documents::{Nameserver, Ntp, SearchDomains, NOT_IMPLEMENTED};
use super::machine::MachineConfig;
use super::network::{KubeSpanConfig, NetworkConfig};
use super::{parse, ConfigError};

/// Why a configuration cannot be migrated.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// It does not load.
    #[error("{0}")]
    Invalid(#[from] ConfigError),
    /// It uses something the typed documents cannot say.
    #[error("{path}: {why}")]
    NoEquivalent {
        /// Where in the v1alpha1 document.
        path: String,
        /// What is missing.
        why: String,
    },
    /// The YAML could not be rewritten.
    #[error("rewriting the YAML: {0}")]
    Yaml(#[from] serde_yaml::Error),
}

/// Migrate `yaml`: the rewritten stream, as text.
pub fn migrate(yaml: &str) -> Result<String, MigrateError> {
    let cfg = parse(yaml)?;
    let mut docs = network_documents(&cfg)?;
    // Typed documents the input already had (links, rules...) stay, after the new ones.
    docs.extend(cfg.documents.iter().map(|d: &NetworkDocument| d.doc.clone()));
    let links = docs.iter().any(|d| d.body().configures_links());
    let mut out = String::new();
    if let Some(v1) = legacy_rest(yaml)? {
        out.push_str(&v1);
    }
    if links {
        out.push_str(
            "# Links no document mentions get no default link-up or DHCP once link documents\n\
             # exist (Talos's rule): give each such link a LinkConfig and a DHCPv4Config.\n",
        );
    }
    for doc in &docs {
        if !out.is_empty() {
            out.push_str("---\n");
        }
        out.push_str(&serde_yaml::to_string(doc)?);
    }
    for doc in copied_documents(yaml)? {
        if !out.is_empty() {
            out.push_str("---\n");
        }
        out.push_str(&doc);
    }
    Ok(out)
}

/// Typed documents that are neither network documents rebuilt above nor kept as documents:
/// the discovery documents and `KubeNodeConfig` (folded into `cluster` and `machine.kubelet`)
/// and the kinds keelson does not implement.
/// They are copied as they were, so the output says everything the input did.
fn copied_documents(yaml: &str) -> Result<Vec<String>, MigrateError> {
    const FOLDED: [&str; 3] =
        ["DiscoveryServiceConfig", "DiscoveryIdentityConfig", "KubeNodeConfig"];
    let mut out = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(yaml) {
        let value = <Value as serde::Deserialize>::deserialize(doc)?;
        let Some(kind) = value.get("kind").and_then(Value::as_str) else { continue };
        if FOLDED.contains(&kind) || NOT_IMPLEMENTED.contains(&kind) {
            out.push(serde_yaml::to_string(&value)?);
        }
    }
    Ok(out)
}

/// The v1alpha1 document without what moved into documents; `None` when the input has no
/// v1alpha1 document. Comments are not kept (the YAML is re-serialized); keys keep their
/// order.
fn legacy_rest(yaml: &str) -> Result<Option<String>, MigrateError> {
    for doc in serde_yaml::Deserializer::from_str(yaml) {
        let mut value = <Value as serde::Deserialize>::deserialize(doc)?;
        if value.get("version").is_none() || value.get("kind").is_some() {
            continue;
        }
        if let Some(machine) = value.get_mut("machine").and_then(Value::as_mapping_mut) {
            strip_network(machine);
            strip_time(machine);
        }
        return Ok(Some(serde_yaml::to_string(&value)?));
    }
    Ok(None)
}

/// `machine.network` loses everything but keelson's own KubeSpan keys (peers, key,
/// timeout, table), which have no document and stay where they were.
fn strip_network(machine: &mut Mapping) {
    const KEELSON_KUBESPAN: [&str; 4] = ["peers", "privateKey", "endpointTimeout", "nftablesTable"];
    let Some(network) = machine.get_mut("network").and_then(Value::as_mapping_mut) else {
        return;
    };
    let kept: Option<Mapping> = network.get("kubespan").and_then(Value::as_mapping).map(|ks| {
        ks.iter()
            .filter(|(k, _)| k.as_str().is_some_and(|k| KEELSON_KUBESPAN.contains(&k)))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    });
    network.clear();
    match kept {
        Some(ks) if !ks.is_empty() => {
            network.insert("kubespan".into(), Value::Mapping(ks));
        }
        _ => {
            machine.remove("network");
        }
    }
}

fn strip_time(machine: &mut Mapping) {
    machine.remove("time");
}

/// The documents for everything v1alpha1's network and time sections say.
fn network_documents(cfg: &MachineConfig) -> Result<Vec<Document>, MigrateError> {
    let network = &cfg.machine.network;
    let mut docs = Vec::new();
    if let Some(hostname) = &network.hostname {
        docs.push(Document::Hostname(HostnameConfig {
            hostname: Some(hostname.clone()),
            ..HostnameConfig::default()
        }));
    }
    if let Some(resolver) = resolver(network) {
        docs.push(Document::Resolver(resolver));
    }
    docs.extend(static_hosts(network).into_iter().map(Document::StaticHost));
    docs.extend(super::migrate_links::devices(network)?);
    let time = &cfg.machine.time;
    if time.disabled || !time.servers.is_empty() || time.boot_timeout.is_some() {
        docs.push(Document::TimeSync(TimeSyncConfig {
            enabled: time.disabled.then_some(false),
            boot_timeout: time.boot_timeout,
            ntp: (!time.servers.is_empty())
                .then(|| Ntp { servers: time.servers.clone(), use_nts: time.use_nts }),
            ..TimeSyncConfig::default()
        }));
    }
    if let Some(ks) = kubespan(&network.kubespan) {
        docs.push(Document::KubeSpan(ks));
    }
    Ok(docs)
}

fn resolver(network: &NetworkConfig) -> Option<ResolverConfig> {
    let search = SearchDomains {
        domains: network.search_domains.clone(),
        disable_default: network.disable_search_domain.then_some(true),
    };
    (!network.nameservers.is_empty() || search != SearchDomains::default()).then(|| {
        ResolverConfig {
            nameservers: network
                .nameservers
                .iter()
                .map(|&address| Nameserver {
                    address,
                    protocol: None,
                    tls_server_name: String::new(),
                })
                .collect(),
            search_domains: search,
            ..ResolverConfig::default()
        }
    })
}

/// One document per address (the document's name), names of repeated entries joined in
/// order.
fn static_hosts(network: &NetworkConfig) -> Vec<StaticHostConfig> {
    let mut by_ip: BTreeMap<IpAddr, (usize, Vec<String>)> = BTreeMap::new();
    for (i, entry) in network.extra_host_entries.iter().enumerate() {
        by_ip.entry(entry.ip).or_insert((i, Vec::new())).1.extend(entry.aliases.iter().cloned());
    }
    let mut hosts: Vec<_> = by_ip.into_iter().collect();
    crate::sort::by_key(&mut hosts, |(_, (first, _))| *first);
    hosts
        .into_iter()
        .map(|(name, (_, hostnames))| StaticHostConfig {
            api_version: Default::default(),
            kind: Default::default(),
            name,
            hostnames,
        })
        .collect()
}

/// Talos's KubeSpan settings, when any differs from the default.
fn kubespan(ks: &KubeSpanConfig) -> Option<KubeSpanDocument> {
    let default = KubeSpanConfig::default();
    let filters = (ks.filters != default.filters).then(|| KubeSpanDocumentFilters {
        endpoints: ks.filters.endpoints.clone(),
        exclude_advertised_networks: ks.filters.exclude_advertised_networks.clone(),
    });
    let flag = |v: bool| v.then_some(true);
    let doc = KubeSpanDocument {
        enabled: flag(ks.enabled),
        advertise_kubernetes_networks: flag(ks.advertise_kubernetes_networks),
        allow_down_peer_bypass: flag(ks.allow_down_peer_bypass),
        harvest_extra_endpoints: flag(ks.harvest_extra_endpoints),
        mtu: (ks.mtu != default.mtu).then_some(ks.mtu),
        filters,
        ..KubeSpanDocument::default()
    };
    (doc != KubeSpanDocument::default()).then_some(doc)
}
