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
//! NTS (RFC 8915) fits in without changing this shape: a server's request gains extension
//! fields (unique identifier, cookie, authenticator) before it goes out and a reply is
//! verified before [`NtpClient::handle`] looks past the origin check; key establishment is a
//! separate TLS exchange whose result (keys, cookies) a server entry would hold.

mod client;
pub mod select;
pub mod wire;

#[cfg(test)]
mod tests;

pub use client::{
    ClientConfig, Input, NtpClient, Output, Report, Unsynced, BURST, BURST_INTERVAL, MAX_POLL,
    MIN_POLL, STEP_THRESHOLD,
};
pub use wire::{NtpTime, NTP_PORT};
