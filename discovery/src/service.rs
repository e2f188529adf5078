// SPDX-License-Identifier: Apache-2.0
//! The discovery service on the `grpc` crate's generic call layer: its name, the message limit
//! a full cluster needs, and the request head of a call to one of its methods.

use std::time::Duration;

/// The discovery service.
pub const SERVICE: &str = "sidero.discovery.server.Cluster";

/// The largest message accepted. A full cluster (1,024 affiliates at their size limits) lists
/// at about 4.6 MB, above gRPC's usual 4 MiB default, so the bound is 16 MiB.
pub const MAX_MESSAGE: usize = 16 << 20;

/// The HTTP/2 path of a method of the discovery service.
pub fn path(method: &str) -> String {
    format!("/{SERVICE}/{method}")
}

/// The request head of a call to `method` of the discovery service. `timeout` becomes
/// `grpc-timeout`.
pub fn request_headers(
    tls: bool,
    authority: &str,
    method: &str,
    timeout: Option<Duration>,
) -> Vec<(String, String)> {
    let agent = format!("keelson-discovery/{}", env!("CARGO_PKG_VERSION"));
    grpc::request_headers(tls, authority, &path(method), &agent, timeout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_names_the_discovery_service_and_keelson() {
        let h = request_headers(true, "discovery.talos.dev:443", "Hello", None);
        assert_eq!(h[2], (":path".into(), "/sidero.discovery.server.Cluster/Hello".into()));
        assert_eq!(h[1].1, "https");
        let agent = format!("keelson-discovery/{}", env!("CARGO_PKG_VERSION"));
        assert!(h.contains(&("user-agent".into(), agent)));
        assert!(!h.iter().any(|(n, _)| n == "grpc-timeout"));
    }
}
