// SPDX-License-Identifier: Apache-2.0
//! What the server counts, and `GET /metrics`: the registry's sizes, calls by method and gRPC
//! code, refusals, connections and snapshot writes, as Prometheus or OpenMetrics text.
//!
//! Every label takes a fixed set of values (the service's five methods plus `other`, the 17
//! gRPC codes), so a client cannot grow the scrape by calling made-up paths.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use base::metrics::{Exposition, Format, Type};

use crate::registry::Totals;
use crate::rpc;

/// The methods counted by name; anything else is `other`.
const METHODS: [&str; 6] =
    ["Hello", "AffiliateUpdate", "AffiliateDelete", "List", "Watch", "other"];

/// gRPC's code names (index = code), as the `code` label.
const CODES: [&str; 17] = [
    "OK",
    "Canceled",
    "Unknown",
    "InvalidArgument",
    "DeadlineExceeded",
    "NotFound",
    "AlreadyExists",
    "PermissionDenied",
    "ResourceExhausted",
    "FailedPrecondition",
    "Aborted",
    "OutOfRange",
    "Unimplemented",
    "Internal",
    "Unavailable",
    "DataLoss",
    "Unauthenticated",
];

/// The server's counters. Snapshot writes happen on their own thread, so those two are shared
/// atomics; everything else is counted on the serving thread.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Calls answered, by method and code.
    calls: [[u64; CODES.len()]; METHODS.len()],
    /// Calls refused by the per-client rate limit (also counted in `calls`).
    pub rate_limited: u64,
    /// Answers not queued because the connection's unread bytes were at its budget.
    pub refused_answers: u64,
    /// Connections accepted, and refused at a connection cap.
    pub accepted: u64,
    pub rejected: u64,
    /// Open connections.
    pub open: u64,
    /// Snapshot writes that succeeded, and that failed.
    pub snapshots: Arc<SnapshotCounts>,
}

/// Snapshot writes, counted by the writer thread.
#[derive(Debug, Default)]
pub struct SnapshotCounts {
    pub written: AtomicU64,
    pub failed: AtomicU64,
}

impl Metrics {
    /// One call to `path` ended with gRPC `code`.
    pub fn call(&mut self, path: &str, code: u32) {
        let method = path
            .strip_prefix(rpc::PREFIX)
            .and_then(|m| METHODS[..METHODS.len() - 1].iter().position(|k| *k == m))
            .unwrap_or(METHODS.len() - 1);
        let code = (code as usize).min(CODES.len() - 1);
        if let Some(n) = self.calls.get_mut(method).and_then(|row| row.get_mut(code)) {
            *n += 1;
        }
    }

    /// The scrape.
    pub fn render(&self, format: Format, t: &Totals) -> String {
        let mut e = Exposition::new(format);
        let gauges: [(&'static str, &str, usize); 5] = [
            ("discovery_clusters", "Clusters with at least one affiliate.", t.clusters),
            ("discovery_affiliates", "Affiliates stored, over all clusters.", t.affiliates),
            ("discovery_endpoints", "Endpoints stored, over all affiliates.", t.endpoints),
            ("discovery_watchers", "Open Watch streams.", t.watchers),
            ("discovery_stored_bytes", "Bytes of IDs, data and endpoints held.", t.bytes),
        ];
        for (name, help, v) in gauges {
            e.family(name, Type::Gauge, help).sample(&[], v as f64);
        }
        e.family("discovery_calls", Type::Counter, "gRPC calls answered, by method and code.");
        for (m, row) in METHODS.iter().zip(&self.calls) {
            for (c, n) in CODES.iter().zip(row) {
                if *n > 0 {
                    e.sample(&[("method", m), ("code", c)], *n as f64);
                }
            }
        }
        let counters: [(&'static str, &str, u64); 6] = [
            (
                "discovery_rate_limited",
                "Calls refused by the per-client rate limit.",
                self.rate_limited,
            ),
            (
                "discovery_refused_answers",
                "Answers dropped because the connection held its budget of unread bytes.",
                self.refused_answers,
            ),
            ("discovery_connections_accepted", "Connections accepted.", self.accepted),
            (
                "discovery_connections_rejected",
                "Connections refused at a connection cap.",
                self.rejected,
            ),
            (
                "discovery_snapshot_writes",
                "Snapshots written to disk.",
                self.snapshots.written.load(Ordering::Relaxed),
            ),
            (
                "discovery_snapshot_failures",
                "Snapshot writes that failed.",
                self.snapshots.failed.load(Ordering::Relaxed),
            ),
        ];
        for (name, help, v) in counters {
            e.family(name, Type::Counter, help).sample(&[], v as f64);
        }
        e.family("discovery_connections_open", Type::Gauge, "Open connections.")
            .sample(&[], self.open as f64);
        e.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_counted_by_known_method_and_code_and_made_up_paths_share_one_label() {
        let mut m = Metrics::default();
        m.call("/sidero.discovery.server.Cluster/Hello", 0);
        m.call("/sidero.discovery.server.Cluster/Hello", 0);
        m.call("/sidero.discovery.server.Cluster/Watch", 8);
        for i in 0..100 {
            m.call(&format!("/made.up/{i}"), 12);
        }
        m.call("/x", 99);
        let text = m.render(Format::Prometheus, &Totals { clusters: 2, ..Totals::default() });
        assert!(text.contains("discovery_calls_total{method=\"Hello\",code=\"OK\"} 2\n"), "{text}");
        assert!(text.contains("{method=\"Watch\",code=\"ResourceExhausted\"} 1\n"));
        assert!(text.contains("{method=\"other\",code=\"Unimplemented\"} 100\n"));
        assert!(text.contains("{method=\"other\",code=\"Unauthenticated\"} 1\n"));
        assert!(text.contains("\ndiscovery_clusters 2\n"));
        assert_eq!(text.matches("discovery_calls_total{").count(), 4);
    }
}
