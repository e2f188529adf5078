// SPDX-License-Identifier: Apache-2.0
//! `EthernetConfig`: ring sizes, offload features, channels and wake-on-LAN of a NIC through
//! ethtool (Talos's `pkg/machinery/config/types/network/ethernet.go`). keelson checks the
//! document's shape and warns, per setting, that it does not apply it yet: ethtool's generic
//! netlink family is a piece of work of its own, and a Talos configuration that carries the
//! document still loads.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::link_common::check_name;
use super::{Body, Problems};
use crate::config::locate::YamlPath;
use crate::config::machine::TalosKey;

/// `rings`.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Rings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rx: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tx: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rx_mini: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rx_jumbo: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rx_buf_len: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cqe_size: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tx_push: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rx_push: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tx_push_buf_len: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tcp_data_split: Option<bool>,
}

/// `channels`.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Channels {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rx: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tx: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    other: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    combined: Option<u32>,
}

/// `kind: EthernetConfig`.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EthernetConfig {
    #[serde(default, rename = "apiVersion", skip_serializing)]
    pub(crate) api_version: TalosKey,
    #[serde(default, skip_serializing)]
    pub(crate) kind: TalosKey,
    /// `name`: the link.
    pub name: String,
    /// `features`: ethtool feature names (`tx-checksum-ipv4`) on or off.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub features: BTreeMap<String, bool>,
    /// `rings`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rings: Option<Rings>,
    /// `channels`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channels: Option<Channels>,
    /// `wakeOnLan`: wake-on-LAN modes (`phy`, `unicast`, `multicast`, `broadcast`, `magic`,
    /// `magicsecure`, `filter`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wake_on_lan: Vec<String>,
}

/// Talos's `nethelpers.WOLMode` names (ethtool's `WAKE_*` bits).
const WOL_MODES: [&str; 7] =
    ["phy", "unicast", "multicast", "broadcast", "magic", "magicsecure", "filter"];

impl Body for EthernetConfig {
    fn name(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(&self.name))
    }

    fn check(&self, p: &mut Problems) {
        check_name(&self.name, false, p);
        for feature in self.features.keys() {
            let valid = !feature.is_empty()
                && feature.len() <= 64
                && feature.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
            if !valid {
                p.error(YamlPath::keys("features"), "a feature is an ethtool feature name");
            }
        }
        for (i, mode) in self.wake_on_lan.iter().enumerate() {
            if !WOL_MODES.contains(&mode.as_str()) {
                p.error(
                    YamlPath::keys("wakeOnLan").index(i),
                    format!("a wake-on-LAN mode is one of {}", WOL_MODES.join(", ")),
                );
            }
        }
        // One warning per setting present, at its path: each is left as the driver has it.
        let present = [
            ("features", !self.features.is_empty()),
            ("rings", self.rings.is_some()),
            ("channels", self.channels.is_some()),
            ("wakeOnLan", !self.wake_on_lan.is_empty()),
        ];
        for (key, _) in present.into_iter().filter(|(_, set)| *set) {
            p.warn(
                YamlPath::keys(key),
                "keelson does not apply ethtool settings yet; left as the driver has it",
            );
        }
    }
}
