// SPDX-License-Identifier: Apache-2.0
//! Network Time Security for NTP (RFC 8915).
//!
//! - [`ke`]: the key establishment records (request, bounded response parse).
//! - [`exchange`]: the key establishment over TLS 1.3 on a thread of its own, with the keys
//!   exported from the TLS session; [`verify`]: the certificate check and its clock policy.
//! - [`fields`], [`session`]: the NTP extension fields, the cookie jar, and sealing requests
//!   and opening replies with AEAD_AES_SIV_CMAC_256 (RFC 5297).
//!
//! The NTP engine ([`crate::ntp`]) stays sans-IO: it holds a [`session::Session`] per NTS
//! server, asks for a new key exchange when the cookies run out or the server refuses them,
//! and [`crate::TimeSync`] runs the exchanges.

pub mod exchange;
pub mod fields;
pub mod ke;
pub mod session;
pub mod verify;

pub use exchange::{Exchanges, Outcome, Request, Trust};
pub use session::{AuthError, Keys, Sent, Session};
