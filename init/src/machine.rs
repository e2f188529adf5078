// SPDX-License-Identifier: Apache-2.0
//! What the node loop and the API both need: the owner name of the inputs the node writes,
//! and the machine facts the runtime's store does not hold. Imports nothing from this crate,
//! so neither side imports the other.

use std::time::Instant;

/// The owner of the inputs the node writes (the config file, the command line, the
/// kubelet's status, and a config applied through the API).
pub const SOURCE: &str = "node";

/// Node facts the runtime's store does not hold.
#[derive(Debug, Clone, Copy)]
pub struct Machine {
    /// When the loop started.
    pub started: Instant,
    /// All controllers ran without error at least once.
    pub settled: bool,
}

/// What an API client may ask of the machine itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Power {
    /// Stop services, then reboot.
    Reboot,
    /// Stop services, then power off.
    Shutdown,
}
