// SPDX-License-Identifier: Apache-2.0
//! The synchronous netlink layer: one blocking request/reply loop ([`NlSocket`]) behind the
//! rtnetlink [`RouteSocket`], the generic netlink [`WireguardSocket`] and KubeSpan's nfnetlink
//! batches ([`NlSocket::send_batch`]), and a non-blocking multicast [`Watcher`] for the event
//! loop. Replies, extended acks included, are read in one place (`frame`).
//!
//! # Contract
//!
//! - **Synchronous.** Every operation is a blocking request/reply on the calling thread; there is
//!   no runtime and nothing is spawned. Requests carry `NLM_F_ACK`, so each call returns only
//!   once the kernel has applied (or refused) it.
//! - **One socket per network namespace, created on the calling thread.** A netlink socket is
//!   bound to the namespace of the thread that opens it (`socket(2)` uses the thread's
//!   `nsproxy`), so create the [`RouteSocket`] and the [`Watcher`] on a thread that is already in
//!   the target namespace. They keep working from any thread afterwards.
//! - **Errno is mapped once, here.** Every failure is an [`NlError`] whose
//!   [`kind`](NlError::kind) ([`NlErrorKind`]) tells callers what to do; it also carries the
//!   kernel's extended-ack text when the kernel gave a reason.
//! - **Plain data in, plain data out.** Kernel objects come back as [`KernelLink`],
//!   [`KernelAddress`], [`KernelRoute`] and [`KernelRule`] (Clone, Debug, PartialEq), built from
//!   the resource value types in [`crate::resource::nethelpers`], and the same structs describe
//!   what to add, replace or delete.
//! - **Dumps are complete.** Routes, addresses and rules are dumped per family (IPv4, then
//!   IPv6) and routes across all tables. A dump interrupted by concurrent changes is restarted.
//! - **Events are triggers.** [`Watcher::drain`] only reports *which* object classes changed
//!   (and whether the kernel dropped events: `overrun`); callers re-dump to learn the state.
//!
//! Logging uses the target `netlink`; every message sent and received is logged at `trace`.

mod address;
mod bond;
mod error;
mod frame;
mod link;
mod link_ops;
mod pipeline;
mod raw;
mod route;
mod route_wire;
#[cfg(test)]
mod route_wire_fuzz;
mod rule;
mod socket;
mod watch;
mod wireguard;

#[cfg(test)]
mod tests;

pub use address::{AddressChangeKind, KernelAddress, FOREVER};
pub use error::{NlError, NlErrorKind};
pub use link::{KernelLink, LinkRef};
pub use link_ops::{LinkKind, NewLink};
pub use pipeline::{BatchRequest, WINDOW as BATCH_WINDOW};
pub use raw::{BatchMsg, RawReply};
pub use route::KernelRoute;
pub use rule::KernelRule;
pub use socket::{NlOptions, NlSocket, RouteSocket};
pub use watch::{Changes, Event, Watcher};
pub use wireguard::{pack_set_device, WireguardSocket, SET_DEVICE_BUDGET};
