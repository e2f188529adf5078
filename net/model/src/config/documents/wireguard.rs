// SPDX-License-Identifier: Apache-2.0
//! `WireguardConfig`: a WireGuard link that is not KubeSpan, with its peers (Talos's
//! `pkg/machinery/config/types/network/wireguard.go`).

use std::borrow::Cow;
use std::net::SocketAddr;
use std::time::Duration;

use ipnet::IpNet;
use serde::{Deserialize, Serialize, Serializer};

use super::link_common::{check_name, legacy_link_conflict, link_document};
use super::link_names::LinkNames;
use super::{Body, Legacy, Problems, LINK_KINDS};
use crate::config::locate::YamlPath;
use crate::config::machine::TalosKey;
use crate::config::scalar::{self, Cidr, Endpoint, GoDuration, WgKey, WgKeyPublic};
use crate::config::specs::Specs;
use crate::resource::{LinkType, WireguardPeer, WireguardSpec};
use crate::wgkey::Key;

/// The key as written in the configuration: `migrate` prints the user's own file, so the key
/// is written out (everything that shows a running node's state redacts it instead).
fn key_text<S: Serializer>(key: &Option<Key>, s: S) -> Result<S::Ok, S::Error> {
    match key {
        Some(k) => s.serialize_str(&k.to_base64()),
        None => s.serialize_none(),
    }
}

fn keepalive_text<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => scalar::serialize_duration(d, s),
        None => s.serialize_none(),
    }
}

/// One entry of `peers`.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WireguardPeerConfig {
    /// `publicKey`.
    #[serde(deserialize_with = "scalar::one::<WgKeyPublic, _>")]
    pub public_key: String,
    /// `presharedKey`.
    #[serde(
        default,
        deserialize_with = "scalar::opt::<WgKey, _>",
        serialize_with = "key_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub preshared_key: Option<Key>,
    /// `endpoint`: `ip:port`; absent waits for the peer to reach us.
    #[serde(
        default,
        deserialize_with = "scalar::opt::<Endpoint, _>",
        skip_serializing_if = "Option::is_none"
    )]
    pub endpoint: Option<SocketAddr>,
    /// `persistentKeepaliveInterval`: a duration (`25s`), whole seconds up to 65535.
    #[serde(
        default,
        deserialize_with = "scalar::opt::<GoDuration, _>",
        serialize_with = "keepalive_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub persistent_keepalive_interval: Option<Duration>,
    /// `allowedIPs`.
    #[serde(
        default,
        rename = "allowedIPs",
        deserialize_with = "scalar::list::<Cidr, _>",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub allowed_ips: Vec<IpNet>,
}

link_document! {
    /// `kind: WireguardConfig`.
    #[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct WireguardConfig {
        #[serde(default, rename = "apiVersion", skip_serializing)]
        pub(crate) api_version: TalosKey,
        #[serde(default, skip_serializing)]
        pub(crate) kind: TalosKey,
        /// `name`: the link to create.
        pub name: String,
        /// `privateKey`: required.
        #[serde(
            default,
            deserialize_with = "scalar::opt::<WgKey, _>",
            serialize_with = "key_text",
            skip_serializing_if = "Option::is_none"
        )]
        pub private_key: Option<Key>,
        /// `listenPort`: 0 or absent lets the kernel pick.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub listen_port: Option<u16>,
        /// `firewallMark`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub firewall_mark: Option<u32>,
        /// `peers`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub peers: Vec<WireguardPeerConfig>,
    }
}

impl WireguardConfig {
    /// The device settings, peers sorted by public key as the spec keeps them.
    pub fn device(&self) -> WireguardSpec {
        let mut peers: Vec<WireguardPeer> = self
            .peers
            .iter()
            .map(|p| WireguardPeer {
                public_key: p.public_key.clone(),
                preshared_key: p.preshared_key,
                endpoint: p.endpoint,
                persistent_keepalive_interval: p
                    .persistent_keepalive_interval
                    .map_or(0, |d| u16::try_from(d.as_secs()).unwrap_or(u16::MAX)),
                allowed_ips: p.allowed_ips.iter().map(IpNet::trunc).collect(),
                handshake_retry: 0,
            })
            .collect();
        crate::sort::by(&mut peers, |a, b| a.public_key.cmp(&b.public_key));
        WireguardSpec {
            private_key: self.private_key,
            listen_port: self.listen_port.unwrap_or(0),
            firewall_mark: self.firewall_mark.unwrap_or(0),
            peers,
        }
    }
}

impl Body for WireguardConfig {
    fn name(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(&self.name))
    }

    fn conflicts_with(&self) -> &'static [&'static str] {
        LINK_KINDS
    }

    fn check(&self, p: &mut Problems) {
        check_name(&self.name, true, p);
        if self.private_key.is_none() {
            p.error(YamlPath::keys("privateKey"), "privateKey must be specified");
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, peer) in self.peers.iter().enumerate() {
            let at = |key: &'static str| YamlPath::keys("peers").index(i).key(key);
            if !seen.insert(peer.public_key.as_str()) {
                p.error(at("publicKey"), "the same peer is listed twice");
            }
            if peer.persistent_keepalive_interval.is_some_and(|d| d.as_secs() > u64::from(u16::MAX))
            {
                p.error(at("persistentKeepaliveInterval"), "at most 65535 seconds");
            }
        }
        self.common().check(p);
    }

    fn add_specs(&self, out: &mut Specs, _: &LinkNames<'_, '_>) {
        let common = self.common();
        let mut link = common.logical_link(&self.name, "wireguard", LinkType::NONE);
        link.wireguard = Some(self.device());
        out.link_settings(link);
        common.add_addresses_and_routes(&self.name, out);
    }

    fn legacy_conflict(&self, legacy: &Legacy<'_>) -> Option<(&'static str, String)> {
        legacy_link_conflict(&self.name, legacy)
    }

    fn configures_links(&self) -> bool {
        true
    }
}
