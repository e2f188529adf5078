// SPDX-License-Identifier: Apache-2.0
//! `ResolverConfig`: name servers and search domains (Talos's
//! `pkg/machinery/config/types/network/resolver.go`).

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::{Body, Legacy, Problems};
use crate::config::locate::YamlPath;
use crate::config::machine::{MachineConfig, TalosKey};
use crate::config::scalar::{self, Domain, Ip};

/// `kind: ResolverConfig`.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResolverConfig {
    #[serde(default, rename = "apiVersion", skip_serializing)]
    pub(crate) api_version: TalosKey,
    #[serde(default, skip_serializing)]
    pub(crate) kind: TalosKey,
    /// `nameservers`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nameservers: Vec<Nameserver>,
    /// `searchDomains`.
    #[serde(default, skip_serializing_if = "SearchDomains::is_empty")]
    pub search_domains: SearchDomains,
    /// `hostDNS`: keelson has no caching resolver of its own; accepted with a warning.
    #[serde(default, rename = "hostDNS", skip_serializing_if = "Option::is_none")]
    pub host_dns: Option<HostDns>,
}

/// One `nameservers[]` entry.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Nameserver {
    /// `address`.
    #[serde(deserialize_with = "scalar::one::<Ip, _>")]
    pub address: IpAddr,
    /// `protocol`: `Do53` (the default), `DoT` or `DoH`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<DnsProtocol>,
    /// `tlsServerName`, for `DoT` and `DoH`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tls_server_name: String,
}

/// How a name server is spoken to.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum DnsProtocol {
    /// Plain DNS over UDP and TCP.
    Do53,
    /// DNS over TLS (RFC 7858).
    DoT,
    /// DNS over HTTPS (RFC 8484).
    DoH,
}

/// `searchDomains`.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SearchDomains {
    /// `domains`; `Some` when present, even empty (it then clears DHCP's).
    #[serde(
        default,
        deserialize_with = "scalar::opt_list::<Domain, _>",
        skip_serializing_if = "Option::is_none"
    )]
    pub domains: Option<Vec<String>>,
    /// `disableDefault`: no search domain derived from the hostname's domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_default: Option<bool>,
}

impl SearchDomains {
    fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// `hostDNS` (accepted, not acted on).
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HostDns {
    /// `enabled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// `forwardKubeDNSToHost`.
    #[serde(default, rename = "forwardKubeDNSToHost", skip_serializing_if = "Option::is_none")]
    pub forward_kube_dns_to_host: Option<bool>,
    /// `resolveMemberNames`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolve_member_names: Option<bool>,
}

impl Body for ResolverConfig {
    fn check(&self, p: &mut Problems) {
        let servers = YamlPath::keys("nameservers");
        for (i, ns) in self.nameservers.iter().enumerate() {
            let at = servers.index(i);
            match (ns.protocol.unwrap_or(DnsProtocol::Do53), ns.tls_server_name.is_empty()) {
                (DnsProtocol::Do53, false) => {
                    p.error(at.key("tlsServerName"), "tlsServerName is only for DoT and DoH")
                }
                (DnsProtocol::DoT | DnsProtocol::DoH, true) => {
                    p.error(at.key("tlsServerName"), "DoT and DoH need tlsServerName")
                }
                (DnsProtocol::DoT | DnsProtocol::DoH, false) => p.warn(
                    at.key("protocol"),
                    "keelson speaks plain DNS only; this encrypted name server is not used",
                ),
                (DnsProtocol::Do53, true) => {}
            }
        }
        if let Some(host) = &self.host_dns {
            let off = !host.enabled.unwrap_or(false);
            if off && host.forward_kube_dns_to_host == Some(true) {
                p.error(
                    YamlPath::keys("hostDNS.forwardKubeDNSToHost"),
                    "needs hostDNS.enabled: true",
                );
            }
            if off && host.resolve_member_names == Some(true) {
                p.error(
                    YamlPath::keys("hostDNS.resolveMemberNames"),
                    "needs hostDNS.enabled: true",
                );
            }
            p.warn(YamlPath::keys("hostDNS"), "keelson has no host DNS cache; ignored");
        }
    }

    fn legacy_conflict(&self, legacy: &Legacy<'_>) -> Option<(&'static str, String)> {
        let network = &legacy.cfg.machine.network;
        let set_twice = |what: &str| format!("{what} set in both places");
        if network.search_domains.is_some() {
            Some(("machine.network.searchDomains", set_twice("search domains")))
        } else if !network.nameservers.is_empty() {
            Some(("machine.network.nameservers", set_twice("name servers")))
        } else if network.disable_search_domain {
            Some(("machine.network.disableSearchDomain", set_twice("the default search domain")))
        } else {
            None
        }
    }

    fn fold_into(&self, cfg: &mut MachineConfig) -> bool {
        let network = &mut cfg.machine.network;
        network.nameservers = self
            .nameservers
            .iter()
            .filter(|ns| ns.protocol.unwrap_or(DnsProtocol::Do53) == DnsProtocol::Do53)
            .map(|ns| ns.address)
            .collect();
        network.search_domains.clone_from(&self.search_domains.domains);
        network.disable_search_domain = self.search_domains.disable_default.unwrap_or(false);
        true
    }
}
