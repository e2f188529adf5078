// SPDX-License-Identifier: Apache-2.0
//! A sans-IO DHCPv6 client engine (RFC 8415, with RFC 3646, RFC 4075, RFC 4704, RFC 5908).
//!
//! [`Dhcp6Client`] is a pure state machine sans-IO, in the shape of
//! [`crate::dhcp4`]: the event loop feeds it [`Input`]s with the current time through
//! [`Dhcp6Client::handle`], performs the [`Output`]s it returns (every packet goes to
//! [`ALL_DHCP_RELAY_AGENTS_AND_SERVERS`] port [`SERVER_PORT`] from the link-local address, port
//! [`CLIENT_PORT`]) and wakes it at [`Dhcp6Client::poll_at`]. It owns no socket and never
//! reads the clock.
//!
//! Unlike Talos (docs/talos.md: DHCPv6: a fresh Rapid SOLICIT every cycle, no RENEW, REBIND or
//! expiry), the client renews at T1 with the server's id, rebinds at T2 without it, and removes the
//! address when its valid lifetime ends. [`lease_to_specs`] turns a lease into operator-layer
//! specs.
//!
//! For the operator: build the [`ClientConfig`] with [`DuidConfig::from_client_identifier`]
//! of the operator spec's client identifier (DUID-LL unless a DUID is configured) and the
//! node's hostname when it has one; feed [`Input::LinkLocalReady`] once the link-local
//! address has left DAD (and again after each [`Input::LinkUp`]); apply [`Output::Bound`]
//! through [`lease_to_specs`] (same address: lifetimes only), remove the specs on
//! [`Output::Expired`], and surface [`Output::Status`] in the operator status. Received
//! payloads go in as they are: the [`wire`] boundary refuses malformed ones with a debug line.

mod client;
mod duid;
mod fqdn;
mod lease;
mod time;
pub mod wire;

#[cfg(test)]
mod tests;

use std::net::Ipv6Addr;

pub use client::{ClientConfig, Dhcp6Client, Dhcp6State, Input, Output};
pub use duid::{check_duid, iaid_from_mac, DuidConfig};
pub use lease::{lease_to_specs, Lease6, INFINITY};
pub use time::{next_rt, renewal_times, Retransmission, REBIND, RENEW, REQUEST, SOLICIT};

/// The DHCPv6 server and relay port (RFC 8415 §7.2).
pub const SERVER_PORT: u16 = 547;
/// The DHCPv6 client port (RFC 8415 §7.2).
pub const CLIENT_PORT: u16 = 546;
/// `ff02::1:2`, where every client message goes (RFC 8415 §7.1).
pub const ALL_DHCP_RELAY_AGENTS_AND_SERVERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 1, 2);
