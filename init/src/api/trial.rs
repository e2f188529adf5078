// SPDX-License-Identifier: Apache-2.0
//! `apply-config --mode`: how an applied config takes effect (Talos's modes), and the config
//! on trial (`--mode try`): applied now, rolled back to the one before when the timeout passes
//! unless `config confirm` arrives first.

use std::time::{Duration, Instant};

use net::config::MachineConfig;
use net::controllers::MACHINE_CONFIG_ID;
use net::resource::Namespace;
use runtime::Runtime;

/// The default `--timeout` of `--mode try` (Talos's).
pub const DEFAULT_TRY: Duration = Duration::from_secs(60);
/// The longest trial.
pub const MAX_TRY: Duration = Duration::from_secs(24 * 3600);

/// How an applied config takes effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApplyMode {
    /// As the change allows: keelson applies every network change without a reboot.
    Auto,
    /// Now, without a reboot.
    NoReboot,
    /// Now, then reboot.
    Reboot,
    /// Kept for the next boot only (not supported yet: refused).
    Staged,
    /// Now, rolled back after this long unless confirmed.
    Try(Duration),
}

/// A config on trial: what to go back to, and when.
#[derive(Debug)]
pub struct Trial {
    previous: MachineConfig,
    /// When it rolls back.
    pub deadline: Instant,
    /// The config text on trial, written to the config file once confirmed.
    pub text: String,
}

impl Trial {
    /// Start a trial of whatever is applied next, going back to the running config; a trial
    /// already running keeps its original config to go back to.
    pub fn start(
        rt: &Runtime,
        running: Option<Trial>,
        timeout: Duration,
        now: Instant,
        text: &str,
    ) -> Result<Self, String> {
        let previous = match running {
            Some(t) => t.previous,
            None => rt
                .store()
                .get_spec::<MachineConfig>(Namespace::Config, MACHINE_CONFIG_ID)
                .cloned()
                .ok_or("--mode try needs a running config to roll back to")?,
        };
        Ok(Self { previous, deadline: now + timeout, text: text.to_owned() })
    }

    /// Put the previous config back.
    pub fn roll_back(self, rt: &mut Runtime) {
        match rt.put_input(
            crate::machine::SOURCE,
            Namespace::Config,
            MACHINE_CONFIG_ID,
            self.previous,
        ) {
            Ok(()) => {
                log::warn!(target: "api", "*** the config on trial was not confirmed in time: rolled back to the previous config ***")
            }
            Err(e) => log::error!(target: "api", "rolling back the config on trial: {e}"),
        }
    }
}

/// Keep an applied config where the node reads its config from, so a restart runs it too:
/// written beside the file (or what its symlink points to) and renamed over it, mode 0600.
pub fn write_back(path: &std::path::Path, text: &str) -> Result<(), String> {
    let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
    net::atomic_file::write(&target, text.as_bytes(), 0o600, net::atomic_file::Durability::File)
        .map_err(|e| format!("{}: {e}", target.display()))
}
