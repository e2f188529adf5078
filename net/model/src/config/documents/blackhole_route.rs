// SPDX-License-Identifier: Apache-2.0
//! `BlackholeRouteConfig`: a route that drops what it matches, named by its destination
//! (Talos's `pkg/machinery/config/types/network/blackhole_route.go`; docs/talos.md: Merge).

use std::borrow::Cow;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use super::{Body, LinkNames};
use crate::config::machine::TalosKey;
use crate::config::scalar::{self, Cidr};
use crate::config::specs::Specs;
use crate::resource::{ConfigLayer, Family, RouteSpec, RouteType, Scope, DEFAULT_ROUTE_METRIC};

/// `kind: BlackholeRouteConfig`.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BlackholeRouteConfig {
    #[serde(default, rename = "apiVersion", skip_serializing)]
    pub(crate) api_version: TalosKey,
    #[serde(default, skip_serializing)]
    pub(crate) kind: TalosKey,
    /// `name`: the destination prefix.
    #[serde(deserialize_with = "scalar::one::<Cidr, _>")]
    pub name: IpNet,
    /// `metric`; 0 or absent means 1024.
    #[serde(default, skip_serializing_if = "super::is_zero")]
    pub metric: u32,
}

impl Body for BlackholeRouteConfig {
    fn name(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Owned(self.name.to_string()))
    }

    fn add_specs(&self, out: &mut Specs, _: &LinkNames<'_, '_>) {
        let family = Family::of(&self.name.addr());
        let mut spec = RouteSpec::new(family, ConfigLayer::Configuration);
        spec.dst = Some(self.name);
        spec.kind = RouteType::BLACKHOLE;
        spec.priority = if self.metric == 0 { DEFAULT_ROUTE_METRIC } else { self.metric };
        // IPv6 routes are keyed by their out link; Talos puts IPv6 blackholes on `lo`.
        if family == Family::Inet6 {
            spec.out_link_name = "lo".to_owned();
        }
        spec.normalize();
        // A blackhole has no next hop: it is not a link-scope route.
        spec.scope = Scope::GLOBAL;
        out.route(spec);
    }
}
