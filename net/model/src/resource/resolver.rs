// SPDX-License-Identifier: Apache-2.0
//! DNS resolvers: [`ResolverSpec`], [`ResolverStatus`]; a singleton ([`RESOLVER_ID`]).

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::layer::{ConfigLayer, LayeredSpec};
use super::nethelpers::is_default;

/// DNS resolvers and search domains.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResolverSpec {
    /// Name servers.
    #[serde(default)]
    pub dns_servers: Vec<IpAddr>,
    /// Search domains.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub search_domains: Vec<String>,
    /// The configuration stated search domains explicitly (an empty list clears them).
    #[serde(default, skip_serializing_if = "is_default")]
    pub search_domains_overridden: bool,
    /// The layer this spec came from.
    pub layer: ConfigLayer,
}

/// The singleton ID of resolver resources.
pub const RESOLVER_ID: &str = "resolvers";

/// The resolvers in effect.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolverStatus {
    /// Name servers.
    pub dns_servers: Vec<IpAddr>,
    /// Search domains.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub search_domains: Vec<String>,
}

impl LayeredSpec for ResolverSpec {
    fn natural_id(&self) -> String {
        RESOLVER_ID.to_owned()
    }
    fn layer(&self) -> ConfigLayer {
        self.layer
    }
}
