// SPDX-License-Identifier: Apache-2.0
//! A sans-IO NTP client (RFC 5905 client mode).
//!
//! [`NtpClient`] polls several servers in parallel, each on its own schedule (a 4-request
//! burst 2 s apart, then 64 s doubling to 1024 s; a doubling backoff from 2 s while a server
//! is silent), validates every reply ([`client`]: mode, version, stratum, leap, kiss-o'-death,
//! the echoed origin, non-zero timestamps), filters each server's samples and rejects the
//! servers a majority disagrees with ([`select`]). The first correction steps the clock when
//! the offset exceeds [`STEP_THRESHOLD`] (128 ms); every later one is a slew through the
//! kernel PLL, which also marks the clock synchronised so the kernel's 11-minute mode keeps
//! the RTC right. The engine owns no socket and reads no clock, so every path is unit-tested.
//!
//! NTS (RFC 8915) servers hold a [`crate::nts::Session`]: a request gains its extension fields
//! (unique identifier, cookie, placeholders, authenticator) before it goes out, and a reply is
//! verified right after the origin check, before anything else in it is believed. Out of
//! cookies, refused (NTSN) or failing authentication [`MAX_BAD_AUTH`] times in a row, the
//! server asks for a new key exchange ([`Output::Rekey`]), which runs outside the engine.

mod client;
pub mod select;
pub mod wire;

#[cfg(test)]
mod tests;

pub use client::{
    ClientConfig, Input, NtpClient, Output, Report, Unsynced, BURST, BURST_INTERVAL, MAX_BAD_AUTH,
    MAX_POLL, MIN_POLL, REKEY_AUTH_FAILED, STEP_THRESHOLD,
};
pub use wire::{NtpTime, NTP_PORT};
