// SPDX-License-Identifier: Apache-2.0
//! Time servers: [`TimeServerSpec`], [`TimeServerStatus`]; a singleton ([`TIMESERVER_ID`]).

use serde::{Deserialize, Serialize};

use super::layer::{ConfigLayer, LayeredSpec};
use super::nethelpers::is_default;

/// NTP servers.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TimeServerSpec {
    /// Server names or addresses.
    #[serde(default)]
    pub time_servers: Vec<String>,
    /// Use NTS (needs names, not IP literals).
    #[serde(default, rename = "useNTS", skip_serializing_if = "is_default")]
    pub use_nts: bool,
    /// The layer this spec came from.
    pub layer: ConfigLayer,
}

/// The singleton ID of time server resources.
pub const TIMESERVER_ID: &str = "timeservers";

/// The time servers in effect.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TimeServerStatus {
    /// Server names or addresses.
    pub time_servers: Vec<String>,
    /// NTS on.
    #[serde(default, rename = "useNTS", skip_serializing_if = "is_default")]
    pub use_nts: bool,
}

impl LayeredSpec for TimeServerSpec {
    fn natural_id(&self) -> String {
        TIMESERVER_ID.to_owned()
    }
    fn layer(&self) -> ConfigLayer {
        self.layer
    }
}
