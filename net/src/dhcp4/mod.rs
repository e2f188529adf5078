// SPDX-License-Identifier: Apache-2.0
//! A sans-IO DHCPv4 client engine (RFC 2131, RFC 2132, RFC 3442, RFC 4361).
//!
//! [`Dhcp4Client`] is a pure state machine and sans-IO: the event loop
//! feeds it [`Input`]s with the current time through [`Dhcp4Client::handle`], performs the
//! [`Output`]s it returns (sending packets, applying or removing a [`Lease`]) and wakes it at
//! [`Dhcp4Client::poll_at`]. It owns no socket and never reads the clock, so every timer and
//! every malformed packet is unit-testable.
//!
//! [`lease_to_specs`] turns a bound lease into operator-layer specs (docs/talos.md: DHCPv4, with
//! the fixes listed there: rebinding, expiry, INIT-REBOOT across link flaps).

mod client;
mod lease;
mod time;
pub mod wire;

#[cfg(test)]
mod tests;

pub use client::{ClientConfig, Destination, Dhcp4Client, Dhcp4State, Input, Output};
pub use lease::{lease_to_specs, Lease};
pub use time::{backoff_delay, renewal_retransmit_at, BACKOFF_INITIAL, BACKOFF_MAX};

/// The DHCP server port (RFC 2131 §4.1).
pub const SERVER_PORT: u16 = 67;
/// The DHCP client port (RFC 2131 §4.1).
pub const CLIENT_PORT: u16 = 68;
