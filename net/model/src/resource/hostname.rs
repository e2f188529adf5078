// SPDX-License-Identifier: Apache-2.0
//! Hostname: [`HostnameSpec`], [`HostnameStatus`]; a singleton ([`HOSTNAME_ID`]).

use serde::{Deserialize, Serialize};

use super::layer::{ConfigLayer, LayeredSpec};

/// Hostname and domain name.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HostnameSpec {
    /// Host name (first label).
    pub hostname: String,
    /// Domain name (the rest).
    #[serde(default)]
    pub domainname: String,
    /// The layer this spec came from.
    pub layer: ConfigLayer,
}

/// The singleton ID of hostname resources.
pub const HOSTNAME_ID: &str = "hostname";

/// Why a hostname was rejected: the shared name check's reason.
pub type HostnameError = crate::names::NameError;

/// The longest domain name `setdomainname(2)` accepts (`__NEW_UTS_LEN`).
pub const MAX_DOMAINNAME_LEN: usize = 64;

impl HostnameSpec {
    /// Split a name at the first dot into hostname and domain name, refusing anything that is
    /// not a valid RFC 1123 hostname or that the kernel would refuse ([`crate::names`]).
    pub fn parse_fqdn(fqdn: &str, layer: ConfigLayer) -> Result<Self, HostnameError> {
        let (host, domain) = crate::names::split_hostname(fqdn)?;
        Ok(Self { hostname: host.to_owned(), domainname: domain.to_owned(), layer })
    }

    /// `hostname.domainname`, or just the hostname.
    pub fn fqdn(&self) -> String {
        if self.domainname.is_empty() {
            self.hostname.clone()
        } else {
            format!("{}.{}", self.hostname, self.domainname)
        }
    }
}

/// The hostname in effect.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostnameStatus {
    /// Host name.
    pub hostname: String,
    /// Domain name.
    pub domainname: String,
}

impl LayeredSpec for HostnameSpec {
    fn natural_id(&self) -> String {
        // A singleton: every input competes for the one `hostname` resource.
        HOSTNAME_ID.to_owned()
    }
    fn layer(&self) -> ConfigLayer {
        self.layer
    }
}
