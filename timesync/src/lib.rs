// SPDX-License-Identifier: Apache-2.0
//! keelson's time sync: the sans-IO NTP engine ([`ntp`]), Network Time Security ([`nts`]: the
//! key exchange over TLS 1.3 and AES-SIV-protected packets), the stub resolver that looks up
//! time server names ([`dns`]), the kernel clock ([`clock`], `adjtimex(2)`) and the event
//! source that runs them in the node's loop ([`TimeSync`]), reading and writing resources
//! through the `runtime` store. It owns the TLS client and AES-SIV code of NTS, so the network
//! stack does not link them. It must not depend on `net` or any netlink crate: what it needs
//! from the network (the node's addresses, resolvers and time servers) it reads as resources
//! (`NetworkStatus`, `ResolverStatus`, `TimeServerStatus`), never from the kernel's tables.
#![warn(missing_docs)]

pub mod clock;
pub mod dns;
#[cfg(test)]
mod fuzz;
pub mod ntp;
pub mod nts;
mod service;

pub use service::{TimeSync, KEY_KE, KEY_V4, KEY_V6, SOURCE};
