// SPDX-License-Identifier: Apache-2.0
//! keelson's general utilities, shared by every crate: the one check for names that reach
//! `/etc` files and the kernel, and the escaping of text for logs and terminals (`names`); hex
//! text (`hex`); the one HTTP/1.1 response parser (`http1`); what per-client limits are kept per (`client_key`); replacing a file through a temporary and a rename (`atomic_file`); reads bounded in size that never block on open (`bounded`); bytes from the
//! kernel's random source (`random`); PEM trust roots for TLS clients (`tls_roots`); metrics as Prometheus or OpenMetrics text
//! (`metrics`); and the stderr logger of the tools that are not PID 1 (`stderr_log`).
//! Without features it is pure std, so the model crate may depend on it; the `os` feature adds
//! the modules that need `libc`, `tls` the one that needs rustls. It must never depend on
//! netlink or any other kernel crate beyond `libc`, nor on `model` or `net`: the discovery
//! server links this crate instead of the network stack.
#![warn(missing_docs)]

#[cfg(feature = "os")]
pub mod atomic_file;
#[cfg(feature = "os")]
pub mod bounded;
pub mod client_key;
pub mod hex;
pub mod http1;
pub mod metrics;
pub mod names;
#[cfg(feature = "os")]
pub mod random;
pub mod stderr_log;
#[cfg(feature = "tls")]
pub mod tls_roots;
