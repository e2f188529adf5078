// SPDX-License-Identifier: Apache-2.0
//! The contract between PID 1's single event loop and everything that feeds it.
//!
//! - [`tokens`]: epoll tokens are handed out here, one [`Tag`] per source; a source numbers
//!   its own fds under its tag, and a token nobody was given is ignored, never guessed at.
//! - [`source`]: what a source implements once: its fds, its readiness, its deadline.
//! - [`worker`]: the one way to start a thread (signal mask, name), for the few blocking
//!   jobs the loop hands off, and the [`Bell`] they wake the loop with.
//!
//! A crate of its own because `net` (time sync, the operators), `discovery` (its client
//! thread) and `init` (the loop) all need it, and `discovery` does not depend on `net`.

pub mod source;
pub mod tokens;
pub mod worker;

pub use source::{earliest, EventSource};
pub use tokens::{Exhausted, Tag, Tokens};
pub use worker::{spawn_worker, Bell, Ringer};
