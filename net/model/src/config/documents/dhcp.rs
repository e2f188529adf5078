// SPDX-License-Identifier: Apache-2.0
//! `DHCPv4Config` and `DHCPv6Config`: run a DHCP client on a link (Talos's
//! `pkg/machinery/config/types/network/dhcp4.go` and `dhcp6.go`). The client identifier is
//! the link's MAC unless the document says otherwise.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::link_common::check_name;
use super::link_names::LinkNames;
use super::{Body, Problems};
use crate::config::locate::YamlPath;
use crate::config::machine::TalosKey;
use crate::config::scalar::{self, DuidHex};
use crate::config::specs::Specs;
use crate::resource::{
    ClientIdentifier, ConfigLayer, Dhcp6OperatorSpec, Operator, OperatorSpec, DEFAULT_ROUTE_METRIC,
};

/// `clientIdentifier`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IdentifierKind {
    /// Send none.
    None,
    /// The link's MAC (DHCPv4), a DUID-LL (DHCPv6).
    Mac,
    /// `duidRaw`.
    Duid,
}

/// What both DHCP documents hold.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DhcpConfig {
    #[serde(default, rename = "apiVersion", skip_serializing)]
    pub(crate) api_version: TalosKey,
    #[serde(default, skip_serializing)]
    pub(crate) kind: TalosKey,
    /// `name`: the link, by name, alias or altname.
    pub name: String,
    /// `routeMetric`: 0 or absent is 1024.
    #[serde(default, skip_serializing_if = "super::is_zero")]
    pub route_metric: u32,
    /// `ignoreHostname`: neither ask for nor use the server's hostname.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_hostname: Option<bool>,
    /// `ignoreRoutes` (`DHCPv4Config` only): the lease's routes are not installed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_routes: Option<bool>,
    /// `clientIdentifier`: absent is `mac`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_identifier: Option<IdentifierKind>,
    /// `duidRaw`: the identifier's bytes, with `clientIdentifier: duid`.
    #[serde(
        default,
        deserialize_with = "scalar::opt::<DuidHex, _>",
        serialize_with = "duid_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub duid_raw: Option<String>,
}

/// Hex bytes with colons, as Talos writes a DUID.
fn duid_text<S: serde::Serializer>(hex: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    let Some(hex) = hex else { return s.serialize_none() };
    let pairs: Vec<&str> =
        hex.as_bytes().chunks(2).filter_map(|c| std::str::from_utf8(c).ok()).collect();
    s.serialize_str(&pairs.join(":"))
}

impl DhcpConfig {
    fn metric(&self) -> u32 {
        if self.route_metric == 0 {
            DEFAULT_ROUTE_METRIC
        } else {
            self.route_metric
        }
    }

    fn identifier(&self) -> ClientIdentifier {
        match (self.client_identifier, &self.duid_raw) {
            (Some(IdentifierKind::None), _) => ClientIdentifier::None,
            (Some(IdentifierKind::Duid), Some(hex)) => ClientIdentifier::Duid(hex.clone()),
            _ => ClientIdentifier::Mac,
        }
    }

    fn check(&self, p: &mut Problems) {
        check_name(&self.name, false, p);
        let duid = self.client_identifier == Some(IdentifierKind::Duid);
        match (duid, self.duid_raw.is_some()) {
            (false, true) => p.error(
                YamlPath::keys("duidRaw"),
                "duidRaw can only be set if clientIdentifier is 'duid'",
            ),
            (true, false) => p.error(
                YamlPath::keys("clientIdentifier"),
                "duidRaw must be set if clientIdentifier is 'duid'",
            ),
            _ => {}
        }
    }
}

/// `kind: DHCPv4Config`.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Dhcp4Config(pub DhcpConfig);

/// `kind: DHCPv6Config`.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Dhcp6Config(pub DhcpConfig);

impl Body for Dhcp4Config {
    fn name(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(&self.0.name))
    }

    fn check(&self, p: &mut Problems) {
        self.0.check(p);
    }

    fn add_specs(&self, out: &mut Specs, links: &LinkNames<'_, '_>) {
        let link = links.resolve(&self.0.name);
        let mut spec = OperatorSpec::dhcp4(
            &link,
            self.0.metric(),
            self.0.identifier(),
            ConfigLayer::Configuration,
        );
        if let Some(d) = spec.dhcp4.as_mut() {
            d.skip_hostname_request = self.0.ignore_hostname.unwrap_or(false);
            d.skip_routes = self.0.ignore_routes.unwrap_or(false);
        }
        out.operator(spec);
    }

    fn configures_links(&self) -> bool {
        true
    }
}

impl Body for Dhcp6Config {
    fn name(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(&self.0.name))
    }

    fn check(&self, p: &mut Problems) {
        self.0.check(p);
        // The two kinds share one shape here; Talos's DHCPv6Config has no such field (a
        // DHCPv6 lease carries no routes: they come from router advertisements).
        if self.0.ignore_routes.is_some() {
            p.error(
                YamlPath::keys("ignoreRoutes"),
                "unknown key \"ignoreRoutes\": DHCPv6Config has no ignoreRoutes (DHCPv6 installs no routes)",
            );
        }
    }

    fn add_specs(&self, out: &mut Specs, links: &LinkNames<'_, '_>) {
        out.operator(OperatorSpec {
            operator: Operator::Dhcp6,
            link_name: links.resolve(&self.0.name),
            require_up: true,
            dhcp6: Some(Dhcp6OperatorSpec {
                route_metric: self.0.metric(),
                skip_hostname_request: self.0.ignore_hostname.unwrap_or(false),
                client_identifier: self.0.identifier(),
            }),
            layer: ConfigLayer::Configuration,
            ..OperatorSpec::default()
        });
    }

    fn configures_links(&self) -> bool {
        true
    }
}
