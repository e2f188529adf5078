// SPDX-License-Identifier: Apache-2.0
//! Operators (DHCPv4, DHCPv6, VIP): [`OperatorSpec`], [`OperatorStatus`] and their ID,
//! [`operator_id`].

use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use super::layer::{ConfigLayer, LayeredSpec};
use super::nethelpers::{is_default, serde_via_str, ParseNameError};

/// Which operator.
#[derive(
    Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Operator {
    /// DHCPv4 client.
    #[default]
    Dhcp4,
    /// DHCPv6 client.
    Dhcp6,
    /// Virtual IP.
    Vip,
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Operator::Dhcp4 => "dhcp4",
            Operator::Dhcp6 => "dhcp6",
            Operator::Vip => "vip",
        })
    }
}

/// DHCP client identifier policy (option 61 / DUID).
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub enum ClientIdentifier {
    /// Send none.
    #[default]
    None,
    /// `0x01` + the link's MAC (DHCPv4), DUID-LL (DHCPv6).
    Mac,
    /// These raw bytes, given as hex.
    Duid(String),
}

impl fmt::Display for ClientIdentifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientIdentifier::None => f.write_str("none"),
            ClientIdentifier::Mac => f.write_str("mac"),
            ClientIdentifier::Duid(hex) => write!(f, "duid:{hex}"),
        }
    }
}

impl std::str::FromStr for ClientIdentifier {
    type Err = ParseNameError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" => Ok(Self::None),
            "mac" => Ok(Self::Mac),
            _ => {
                let hex = s.strip_prefix("duid:").unwrap_or(s).replace(':', "");
                let valid = hex.len() >= 4
                    && hex.len().is_multiple_of(2)
                    && hex.bytes().all(|b| b.is_ascii_hexdigit());
                if valid {
                    Ok(Self::Duid(hex.to_ascii_lowercase()))
                } else {
                    Err(ParseNameError::new("client identifier", s))
                }
            }
        }
    }
}
serde_via_str!(ClientIdentifier);

/// DHCPv4 operator settings.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Dhcp4OperatorSpec {
    /// Metric of the routes (and the address's prefix route).
    pub route_metric: u32,
    /// Never ask the server for a hostname.
    #[serde(skip_serializing_if = "is_default")]
    pub skip_hostname_request: bool,
    /// Client identifier.
    pub client_identifier: ClientIdentifier,
    /// Install none of the lease's routes (the default route, option 121's, the on-link
    /// routes to their gateways): Talos's `DHCPv4Config.ignoreRoutes`.
    #[serde(skip_serializing_if = "is_default")]
    pub skip_routes: bool,
}

/// DHCPv6 operator settings.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Dhcp6OperatorSpec {
    /// Route metric.
    pub route_metric: u32,
    /// Never ask the server for a hostname.
    #[serde(skip_serializing_if = "is_default")]
    pub skip_hostname_request: bool,
    /// DUID policy.
    pub client_identifier: ClientIdentifier,
}

/// Virtual IP operator settings.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VipOperatorSpec {
    /// The shared address.
    pub ip: IpAddr,
    /// Announce with gratuitous ARP on takeover.
    pub gratuitous_arp: bool,
}

/// Run an operator on a link.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OperatorSpec {
    /// Which operator.
    pub operator: Operator,
    /// The link it runs on.
    pub link_name: String,
    /// Run only while the link is up.
    pub require_up: bool,
    /// DHCPv4 settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dhcp4: Option<Dhcp4OperatorSpec>,
    /// DHCPv6 settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dhcp6: Option<Dhcp6OperatorSpec>,
    /// VIP settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vip: Option<VipOperatorSpec>,
    /// The layer this spec came from.
    pub layer: ConfigLayer,
}

/// What an operator is doing: its protocol state, what it holds, and why it holds nothing
/// (`no offer`, `no ACK`, `NAK`), so a node without a lease says why instead of waiting.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperatorStatus {
    /// Which operator.
    pub operator: Operator,
    /// The link it runs on.
    pub link_name: String,
    /// The protocol state (`selecting`, `bound`, `renewing`, ...).
    pub state: String,
    /// The leased address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<IpNet>,
    /// The server that leased it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<IpAddr>,
    /// The lease time in seconds, as granted (`None`: no lease, or infinite).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_seconds: Option<u32>,
    /// Why there is no lease, or the last event worth knowing; empty when all is well.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

impl OperatorSpec {
    /// A DHCPv4 operator on `link`.
    pub fn dhcp4(
        link: &str,
        route_metric: u32,
        client_identifier: ClientIdentifier,
        layer: ConfigLayer,
    ) -> Self {
        Self {
            operator: Operator::Dhcp4,
            link_name: link.to_owned(),
            require_up: true,
            dhcp4: Some(Dhcp4OperatorSpec {
                route_metric,
                skip_hostname_request: false,
                client_identifier,
                skip_routes: false,
            }),
            layer,
            ..Self::default()
        }
    }

    /// The natural ID.
    pub fn id(&self) -> String {
        operator_id(self.operator, &self.link_name, self.vip.as_ref().map(|v| &v.ip))
    }
}

/// `dhcp4/<link>`, `dhcp6/<link>`, `vip/<link>/<ip>`.
pub fn operator_id(operator: Operator, link: &str, vip: Option<&IpAddr>) -> String {
    match vip {
        Some(ip) => format!("{operator}/{link}/{ip}"),
        None => format!("{operator}/{link}"),
    }
}

impl LayeredSpec for OperatorSpec {
    fn natural_id(&self) -> String {
        self.id()
    }
    fn layer(&self) -> ConfigLayer {
        self.layer
    }
}
