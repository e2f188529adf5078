// SPDX-License-Identifier: Apache-2.0
//! IDs of the singleton inputs and files the controllers share. Their own module, so the
//! controllers need not import the module that registers them.

/// ID of the `/etc/hostname` file status.
pub const HOSTNAME_FILE: &str = "hostname";

/// ID of the parsed kernel command line (namespace `runtime`).
pub const CMDLINE_ID: &str = "cmdline";

/// ID of the machine configuration (namespace `config`); the model owns it, so time sync can
/// read the config without this crate.
pub use model::config::MACHINE_CONFIG_ID;
