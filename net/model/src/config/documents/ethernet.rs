// SPDX-License-Identifier: Apache-2.0
//! `EthernetConfig`: ring sizes, offload features and channels of a NIC through ethtool
//! (Talos's `pkg/machinery/config/types/network/ethernet.go`). keelson checks the document's
//! shape and warns that it does not apply it yet: ethtool's generic netlink family is a
//! piece of work of its own, and a Talos configuration that carries the document still loads.

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
    /// `wakeOnLAN`: wake-on-LAN modes.
    #[serde(default, rename = "wakeOnLAN", skip_serializing_if = "Vec::is_empty")]
    pub wake_on_lan: Vec<String>,
}

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
        p.warn(
            YamlPath::keys("name"),
            "keelson does not apply ethtool settings yet: rings, features and channels are left as they are",
        );
    }
}
