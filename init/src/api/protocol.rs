// SPDX-License-Identifier: Apache-2.0
//! The wire protocol: one JSON object per line in each direction. Pure: parsing and response
//! shapes only, no I/O.
//!
//! Requests carry an `op` (`get`, `list`, `watch`, `logs`, `apply-config`, `machine-status`);
//! every response line has `ok`, and `error` when `ok` is false.

use net::resource::{Kind, Namespace};
use serde::Deserialize;
use serde_json::{json, Value};

use super::aliases::{self, UnknownType};
pub use super::trial::ApplyMode;

/// Longest request line accepted (bytes, without the newline).
pub const MAX_REQUEST: usize = 1 << 20;

/// Why a request line was refused.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    /// Not JSON, or not a known request shape. serde quotes what it could not match (an
    /// unknown `op`, decoded from its JSON escapes), so the text is escaped for a terminal.
    #[error("bad request: {}", net::names::escape(&.0.to_string(), 256))]
    Json(#[from] serde_json::Error),
    /// An unknown type name.
    #[error(transparent)]
    Type(#[from] UnknownType),
    /// An unknown namespace.
    #[error("{0}")]
    Namespace(String),
    /// A bad `apply-config` mode or timeout.
    #[error("{0}")]
    Mode(String),
    /// Longer than [`MAX_REQUEST`].
    #[error("request longer than {MAX_REQUEST} bytes")]
    TooLong,
}

/// A request as sent.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Wire {
    /// One resource.
    Get {
        /// Type name or alias.
        #[serde(rename = "type")]
        kind: String,
        /// Namespace; the type's own when absent.
        namespace: Option<String>,
        /// ID.
        id: String,
    },
    /// Every resource of a type in a namespace.
    List {
        /// Type name or alias.
        #[serde(rename = "type")]
        kind: String,
        /// Namespace.
        namespace: Option<String>,
    },
    /// The current state, then every change, as events.
    Watch {
        /// Type name or alias.
        #[serde(rename = "type")]
        kind: String,
        /// Namespace.
        namespace: Option<String>,
        /// Only this ID.
        id: Option<String>,
    },
    /// The log ring; with `follow`, new lines as they come.
    Logs {
        /// Keep the connection open for new lines.
        #[serde(default)]
        follow: bool,
    },
    /// Validate a machine config, diff it against the running one, apply unless dry-run.
    ApplyConfig {
        /// The YAML text.
        config: String,
        /// Only report the diff.
        #[serde(default, rename = "dryRun")]
        dry_run: bool,
        /// `auto`, `no-reboot`, `reboot`, `staged` or `try`.
        #[serde(default)]
        mode: Option<String>,
        /// How long a `try` lasts.
        #[serde(default, rename = "timeoutSeconds")]
        timeout_seconds: Option<u64>,
        /// Apply what is valid when some entries are not (otherwise such a config is refused
        /// whole).
        #[serde(default, rename = "allowPartial")]
        allow_partial: bool,
    },
    /// Keep the config on trial.
    ConfirmConfig,
    /// Uptime, readiness, kubelet.
    MachineStatus,
    /// keelson's version, and whether the node is in maintenance mode.
    Version,
    /// Block devices (sysfs).
    Disks,
    /// The kernel ring buffer.
    Dmesg,
    /// Stop services and reboot.
    Reboot {
        /// `default`, or `staged`: only when a staged config waits (it is booted into).
        #[serde(default)]
        mode: Option<String>,
    },
    /// Stop services and power off.
    Shutdown,
}

/// Which resources a get, list or watch is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// Kind.
    pub kind: Kind,
    /// Namespace.
    pub namespace: Namespace,
    /// One ID, or all.
    pub id: Option<String>,
}

/// A parsed request with resolved names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// See [`Wire::Get`].
    Get(Query),
    /// See [`Wire::List`].
    List(Query),
    /// See [`Wire::Watch`].
    Watch(Query),
    /// See [`Wire::Logs`].
    Logs {
        /// Follow.
        follow: bool,
    },
    /// See [`Wire::ApplyConfig`].
    ApplyConfig {
        /// YAML.
        config: String,
        /// Only report.
        dry_run: bool,
        /// How it takes effect.
        mode: ApplyMode,
        /// Drop invalid entries and apply the rest.
        allow_partial: bool,
    },
    /// See [`Wire::ConfirmConfig`].
    ConfirmConfig,
    /// See [`Wire::MachineStatus`].
    MachineStatus,
    /// See [`Wire::Version`].
    Version,
    /// See [`Wire::Disks`].
    Disks,
    /// See [`Wire::Dmesg`].
    Dmesg,
    /// See [`Wire::Reboot`].
    Reboot {
        /// `--mode staged`: refuse unless a staged config waits.
        staged: bool,
    },
    /// See [`Wire::Shutdown`].
    Shutdown,
}

fn query(kind: &str, namespace: Option<&str>, id: Option<String>) -> Result<Query, ProtocolError> {
    let kind = aliases::resolve(kind)?;
    let namespace = match namespace {
        Some(n) => n.parse().map_err(ProtocolError::Namespace)?,
        None => aliases::default_namespace(kind),
    };
    Ok(Query { kind, namespace, id })
}

/// Parse one request line (without its newline).
pub fn parse(line: &[u8]) -> Result<Request, ProtocolError> {
    if line.len() > MAX_REQUEST {
        return Err(ProtocolError::TooLong);
    }
    Ok(match serde_json::from_slice::<Wire>(line)? {
        Wire::Get { kind, namespace, id } => {
            Request::Get(query(&kind, namespace.as_deref(), Some(id))?)
        }
        Wire::List { kind, namespace } => Request::List(query(&kind, namespace.as_deref(), None)?),
        Wire::Watch { kind, namespace, id } => {
            Request::Watch(query(&kind, namespace.as_deref(), id)?)
        }
        Wire::Logs { follow } => Request::Logs { follow },
        Wire::ApplyConfig { config, dry_run, mode, timeout_seconds, allow_partial } => {
            Request::ApplyConfig {
                config,
                dry_run,
                mode: ApplyMode::parse(mode.as_deref(), timeout_seconds)
                    .map_err(ProtocolError::Mode)?,
                allow_partial,
            }
        }
        Wire::ConfirmConfig => Request::ConfirmConfig,
        Wire::MachineStatus => Request::MachineStatus,
        Wire::Version => Request::Version,
        Wire::Disks => Request::Disks,
        Wire::Dmesg => Request::Dmesg,
        Wire::Reboot { mode } => Request::Reboot {
            staged: match mode.as_deref() {
                None | Some("default") => false,
                Some("staged") => true,
                Some(other) => {
                    return Err(ProtocolError::Mode(format!(
                        "unknown reboot mode {other:?} (default, staged)"
                    )))
                }
            },
        },
        Wire::Shutdown => Request::Shutdown,
    })
}

/// An error response.
pub fn error(message: &str) -> Value {
    json!({"ok": false, "error": message})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests() {
        let r = parse(br#"{"op":"get","type":"addresses","id":"lo/127.0.0.1/8"}"#);
        assert_eq!(
            r.ok(),
            Some(Request::Get(Query {
                kind: Kind::AddressStatus,
                namespace: Namespace::Network,
                id: Some("lo/127.0.0.1/8".into())
            }))
        );
        let r = parse(br#"{"op":"list","type":"hostnamespec","namespace":"network-config"}"#);
        assert!(matches!(r, Ok(Request::List(Query { namespace: Namespace::NetworkConfig, .. }))));
        let r = parse(br#"{"op":"watch","type":"services"}"#);
        assert!(matches!(
            r,
            Ok(Request::Watch(Query { namespace: Namespace::Runtime, id: None, .. }))
        ));
        assert_eq!(parse(br#"{"op":"logs"}"#).ok(), Some(Request::Logs { follow: false }));
        let r = parse(br#"{"op":"apply-config","config":"x","dryRun":true}"#);
        assert_eq!(
            r.ok(),
            Some(Request::ApplyConfig {
                config: "x".into(),
                dry_run: true,
                mode: ApplyMode::Auto,
                allow_partial: false
            })
        );
        let r = parse(br#"{"op":"apply-config","config":"x","allowPartial":true}"#);
        assert!(matches!(r, Ok(Request::ApplyConfig { allow_partial: true, .. })), "{r:?}");
        let r = parse(br#"{"op":"apply-config","config":"x","mode":"try","timeoutSeconds":5}"#);
        assert!(matches!(r, Ok(Request::ApplyConfig { mode: ApplyMode::Try(_), .. })), "{r:?}");
        assert!(matches!(
            parse(br#"{"op":"apply-config","config":"x","mode":"later"}"#),
            Err(ProtocolError::Mode(_))
        ));
        assert_eq!(parse(br#"{"op":"confirm-config"}"#).ok(), Some(Request::ConfirmConfig));
        assert_eq!(parse(br#"{"op":"machine-status"}"#).ok(), Some(Request::MachineStatus));
        assert_eq!(parse(br#"{"op":"reboot"}"#).ok(), Some(Request::Reboot { staged: false }));
        let r = parse(br#"{"op":"reboot","mode":"staged"}"#);
        assert_eq!(r.ok(), Some(Request::Reboot { staged: true }));
        assert!(matches!(parse(br#"{"op":"reboot","mode":"soon"}"#), Err(ProtocolError::Mode(_))));
    }

    #[test]
    fn bad_requests() {
        for bad in [
            &b"\xff\xfe garbage"[..],
            b"",
            b"{}",
            b"[1,2]",
            br#"{"op":"rebootx"}"#,
            br#"{"op":"get","type":"addresses"}"#,
        ] {
            assert!(matches!(parse(bad), Err(ProtocolError::Json(_))), "{bad:?}");
        }
        assert!(matches!(parse(br#"{"op":"list","type":"nope"}"#), Err(ProtocolError::Type(_))));
        assert!(matches!(
            parse(br#"{"op":"list","type":"routes","namespace":"nope"}"#),
            Err(ProtocolError::Namespace(_))
        ));
        assert!(matches!(parse(&vec![b' '; MAX_REQUEST + 1]), Err(ProtocolError::TooLong)));
    }
}
