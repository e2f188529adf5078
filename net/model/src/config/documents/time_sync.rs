// SPDX-License-Identifier: Apache-2.0
//! `TimeSyncConfig`: time servers, NTS, and how long boot waits for the clock (Talos's
//! `pkg/machinery/config/types/network/time_sync.go`).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{Body, Legacy, Problems};
use crate::config::locate::YamlPath;
use crate::config::machine::{MachineConfig, TalosKey};
use crate::config::scalar::{self, GoDuration};

/// `kind: TimeSyncConfig`.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TimeSyncConfig {
    #[serde(default, rename = "apiVersion", skip_serializing)]
    pub(crate) api_version: TalosKey,
    #[serde(default, skip_serializing)]
    pub(crate) kind: TalosKey,
    /// `enabled` (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// `bootTimeout`, a Go duration.
    #[serde(
        default,
        deserialize_with = "scalar::opt::<GoDuration, _>",
        serialize_with = "scalar::serialize_opt_duration",
        skip_serializing_if = "Option::is_none"
    )]
    pub boot_timeout: Option<Duration>,
    /// `ntp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ntp: Option<Ntp>,
    /// `ptp`: keelson has no PTP client; accepted with a warning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ptp: Option<Ptp>,
}

/// `ntp`.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Ntp {
    /// `servers`: names or addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub servers: Vec<String>,
    /// `useNTS`: authenticate the servers with NTS (RFC 8915).
    #[serde(default, rename = "useNTS", skip_serializing_if = "std::ops::Not::not")]
    pub use_nts: bool,
}

/// `ptp`.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Ptp {
    /// `devices`: PTP clock devices under `/dev`.
    #[serde(default)]
    pub devices: Vec<String>,
}

/// A time server entry: a host name or IP address, optionally with a port (`name:4460`,
/// `192.0.2.1:123`, `[2001:db8::1]:123`): with NTS the port is the key exchange's.
pub fn is_server(server: &str) -> bool {
    if crate::names::is_domain(server)
        || server.parse::<std::net::IpAddr>().is_ok()
        || server.parse::<std::net::SocketAddr>().is_ok()
    {
        return true;
    }
    server.rsplit_once(':').is_some_and(|(host, port)| {
        crate::names::is_domain(host) && port.parse::<u16>().is_ok_and(|p| p != 0)
    })
}

/// Where PTP clock devices live; a "server" there belongs under `ptp`.
const PTP_DEVICE_PREFIX: &str = "/dev/";

impl Body for TimeSyncConfig {
    fn check(&self, p: &mut Problems) {
        if self.ntp.is_some() && self.ptp.is_some() {
            p.error(YamlPath::keys("ptp"), "ntp and ptp cannot both be set");
        }
        if let Some(ntp) = &self.ntp {
            for (i, server) in ntp.servers.iter().enumerate() {
                let at = YamlPath::keys("ntp.servers").index(i);
                if server.starts_with(PTP_DEVICE_PREFIX) {
                    p.error(at, "a PTP device belongs under ptp.devices, not ntp.servers");
                } else if !is_server(server) {
                    p.error(at, "not a host name or IP address (with an optional :port)");
                }
            }
        }
        if let Some(ptp) = &self.ptp {
            for (i, device) in ptp.devices.iter().enumerate() {
                if !device.starts_with(PTP_DEVICE_PREFIX) {
                    p.error(
                        YamlPath::keys("ptp.devices").index(i),
                        "a PTP device is a path under /dev/",
                    );
                }
            }
            p.warn(YamlPath::keys("ptp"), "keelson has no PTP client; ignored");
        }
    }

    fn legacy_conflict(&self, legacy: &Legacy<'_>) -> Option<(&'static str, String)> {
        let time = &legacy.cfg.machine.time;
        if time.disabled {
            Some(("machine.time.disabled", "time sync is disabled in both places".to_owned()))
        } else if !time.servers.is_empty() {
            Some(("machine.time.servers", "time servers are set in both places".to_owned()))
        } else if time.boot_timeout.is_some() {
            Some(("machine.time.bootTimeout", "the boot timeout is set in both places".to_owned()))
        } else {
            None
        }
    }

    fn fold_into(&self, cfg: &mut MachineConfig) -> bool {
        let time = &mut cfg.machine.time;
        time.disabled = self.enabled == Some(false);
        time.boot_timeout = self.boot_timeout;
        if let Some(ntp) = &self.ntp {
            time.servers.clone_from(&ntp.servers);
            time.use_nts = ntp.use_nts;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::is_server;

    #[test]
    fn servers_are_names_or_addresses_with_an_optional_port() {
        for ok in [
            "time.cloudflare.com",
            "ntp.test:4460",
            "192.0.2.1",
            "192.0.2.1:123",
            "[2001:db8::1]:4460",
            "2001:db8::1",
        ] {
            assert!(is_server(ok), "{ok}");
        }
        for bad in ["ntp.test:0", "ntp.test:x", "ntp test", ":123", "[2001:db8::1]", "a:b:c"] {
            assert!(!is_server(bad), "{bad}");
        }
    }
}
