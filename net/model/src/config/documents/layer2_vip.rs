// SPDX-License-Identifier: Apache-2.0
//! `Layer2VIPConfig`: a shared address announced with gratuitous ARP on one link (Talos's
//! `pkg/machinery/config/types/network/layer2_vip.go`). Parsed and checked; its operator
//! spec is emitted as the v1alpha1 `vip` one is; only a control plane running etcd holds
//! the address, which the warning says.

use std::borrow::Cow;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::link_names::LinkNames;
use super::{Body, Problems};
use crate::config::locate::YamlPath;
use crate::config::machine::TalosKey;
use crate::config::scalar::{self, Ip};
use crate::config::specs::Specs;
use crate::resource::{
    link_name_problem, ConfigLayer, Operator, OperatorSpec, VipOperatorSpec, MAX_LINK_REF_LEN,
};

/// `kind: Layer2VIPConfig`.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Layer2VipConfig {
    #[serde(default, rename = "apiVersion", skip_serializing)]
    pub(crate) api_version: TalosKey,
    #[serde(default, skip_serializing)]
    pub(crate) kind: TalosKey,
    /// `name`: the shared address.
    #[serde(deserialize_with = "scalar::one::<Ip, _>")]
    pub name: IpAddr,
    /// `link`: where it is announced, by name, alias or altname.
    pub link: String,
}

impl Body for Layer2VipConfig {
    fn name(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Owned(self.name.to_string()))
    }

    fn check(&self, p: &mut Problems) {
        if self.link.is_empty() {
            p.error(YamlPath::keys("link"), "link must be specified");
        } else if let Some(problem) = link_name_problem(&self.link, MAX_LINK_REF_LEN) {
            p.error(YamlPath::keys("link"), problem);
        }
        if self.name.is_unspecified() || self.name.is_multicast() || self.name.is_loopback() {
            p.error(YamlPath::keys("name"), "the shared address must be a unicast address");
        }
        p.warn(
            YamlPath::keys("name"),
            "only a control-plane node with a healthy etcd campaigns for a shared VIP; elsewhere \
             the address is never added",
        );
    }

    fn add_specs(&self, out: &mut Specs, links: &LinkNames<'_, '_>) {
        out.operator(OperatorSpec {
            operator: Operator::Vip,
            link_name: links.resolve(&self.link),
            require_up: true,
            vip: Some(VipOperatorSpec { ip: self.name, gratuitous_arp: true }),
            layer: ConfigLayer::Configuration,
            ..OperatorSpec::default()
        });
    }
}
