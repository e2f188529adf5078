// SPDX-License-Identifier: Apache-2.0
//! What a scrape reports, written from the runtime's counters and its store: pure, so tests
//! fill a store and read the text back.
//!
//! Every label takes values from a bounded set (controller names, namespaces and kinds are
//! compiled in; operator states are protocol words) or from the store (link names, KubeSpan
//! peer keys); the latter are capped at [`MAX_SERIES`] per family and the rest counted in
//! `keelson_metrics_dropped_series`.

use std::time::SystemTime;

use base::metrics::{Exposition, Format, Type};
use net::resource::{
    KubeSpanPeerStatus, Namespace, OperatorStatus, PeerState, TimeStatus, TIME_STATUS_ID,
};
use runtime::store::Store;
use runtime::ControllerState;

/// The most series one family writes; the rest are counted as dropped.
pub const MAX_SERIES: usize = 256;

/// What the process itself reports (read from `/proc/self`; `None` when it could not be).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Process {
    /// Resident memory, in bytes.
    pub rss_bytes: Option<u64>,
    /// Open file descriptors.
    pub open_fds: Option<u64>,
}

/// What the management API reports.
#[derive(Debug, Clone, Default)]
pub struct ApiFigures {
    /// Open connections (`None`: the API is not served).
    pub connections: Option<usize>,
    /// gRPC calls by method and code (both from fixed sets: `api::rpc::stats`).
    pub calls: Vec<(&'static str, &'static str, u64)>,
    /// Unary calls' durations by method.
    pub unary: Vec<(&'static str, base::metrics::Histogram)>,
    /// Configuration applies, by whether they changed the running configuration.
    pub applies: crate::api::rpc::stats::Applies,
}

/// Samples of one family, up to [`MAX_SERIES`].
struct Capped<'a> {
    e: &'a mut Exposition,
    written: usize,
    dropped: &'a mut u64,
}

impl Capped<'_> {
    fn sample(&mut self, labels: &[(&str, &str)], v: f64) {
        if self.written >= MAX_SERIES {
            *self.dropped += 1;
            return;
        }
        self.written += 1;
        self.e.sample(labels, v);
    }
}

/// The scrape: controllers' counters, resources by kind, operators, KubeSpan, time, process.
#[cfg(test)]
pub fn render(
    format: Format,
    controllers: &[ControllerState],
    store: &Store,
    process: Process,
    api: &ApiFigures,
    now: SystemTime,
) -> String {
    render_into(String::new(), format, controllers, store, process, api, now)
}

/// The scrape (controllers' counters, resources by kind, operators, KubeSpan, time, process)
/// written into `buf` (cleared first), so a caller that keeps the last scrape's text reuses
/// its allocation.
pub fn render_into(
    buf: String,
    format: Format,
    controllers: &[ControllerState],
    store: &Store,
    process: Process,
    api: &ApiFigures,
    now: SystemTime,
) -> String {
    let mut e = Exposition::with_buffer(format, buf);
    let mut dropped = 0u64;
    e.family("keelson_controller_reconciles", Type::Counter, "Reconciles run, by controller.");
    for c in controllers.iter().take(MAX_SERIES) {
        e.sample(&[("controller", c.name)], c.runs as f64);
    }
    e.family(
        "keelson_controller_errors",
        Type::Counter,
        "Reconciles that failed (an error or a panic), by controller.",
    );
    for c in controllers.iter().take(MAX_SERIES) {
        e.sample(&[("controller", c.name)], c.errors as f64);
    }
    e.family(
        "keelson_controller_reconcile_seconds",
        Type::Histogram,
        "How long reconciles took, by controller.",
    );
    for c in controllers.iter().take(MAX_SERIES) {
        e.histogram(&[("controller", c.name)], &c.durations);
    }
    dropped += 3 * controllers.len().saturating_sub(MAX_SERIES) as u64;

    resources(&mut e, store, &mut dropped);
    operators(&mut e, store, &mut dropped);
    kubespan(&mut e, store, now, &mut dropped);
    time(&mut e, store);

    if let Some(rss) = process.rss_bytes {
        e.family(
            "keelson_process_resident_memory_bytes",
            Type::Gauge,
            "Resident memory of the keelson process.",
        )
        .sample(&[], rss as f64);
    }
    if let Some(fds) = process.open_fds {
        e.family(
            "keelson_process_open_fds",
            Type::Gauge,
            "Open file descriptors of the keelson process.",
        )
        .sample(&[], fds as f64);
    }
    if let Some(n) = api.connections {
        e.family("keelson_api_connections", Type::Gauge, "Open connections to the management API.")
            .sample(&[], n as f64);
    }
    api_calls(&mut e, api, &mut dropped);
    e.family(
        "keelson_metrics_dropped_series",
        Type::Gauge,
        "Series left out of this scrape because their family reached its cap.",
    )
    .sample(&[], dropped as f64);
    e.finish()
}

/// gRPC calls by method and code, and unary durations by method.
fn api_calls(e: &mut Exposition, api: &ApiFigures, dropped: &mut u64) {
    if !api.calls.is_empty() {
        e.family(
            "keelson_api_requests",
            Type::Counter,
            "gRPC API calls by method (`other`: not served) and status code.",
        );
        let mut c = Capped { e, written: 0, dropped };
        for (method, code, n) in &api.calls {
            c.sample(&[("method", method), ("code", code)], *n as f64);
        }
    }
    if !api.unary.is_empty() {
        e.family(
            "keelson_api_unary_seconds",
            Type::Histogram,
            "How long unary gRPC calls took, from the request head to the answer, by method.",
        );
        for (method, h) in api.unary.iter().take(MAX_SERIES) {
            e.histogram(&[("method", method)], h);
        }
        *dropped += api.unary.len().saturating_sub(MAX_SERIES) as u64;
    }
    e.family(
        "keelson_config_applies",
        Type::Counter,
        "Machine configurations applied through the API (dry runs aside), by whether the running configuration changed.",
    );
    e.sample(&[("result", "changed")], api.applies.changed as f64);
    e.sample(&[("result", "unchanged")], api.applies.unchanged as f64);
}

/// Resources in the store by namespace and kind (both compiled-in sets): the store's own
/// per-kind sizes, not a walk over every resource.
fn resources(e: &mut Exposition, store: &Store, dropped: &mut u64) {
    e.family("keelson_resources", Type::Gauge, "Resources in the store, by namespace and kind.");
    let mut c = Capped { e, written: 0, dropped };
    for (ns, kind, n) in store.counts() {
        c.sample(&[("namespace", ns.as_str()), ("kind", kind.short_name())], n as f64);
    }
}

/// DHCP and VIP operators: their protocol state, and the lease time granted.
fn operators(e: &mut Exposition, store: &Store, dropped: &mut u64) {
    let statuses: Vec<&OperatorStatus> =
        store.list_specs::<OperatorStatus>(Namespace::Network).map(|(_, s)| s).collect();
    e.family(
        "keelson_operator_state",
        Type::Gauge,
        "1 for each operator (dhcp4, dhcp6, vip) on its link, labelled with its protocol state.",
    );
    let mut c = Capped { e, written: 0, dropped };
    for s in &statuses {
        let op = s.operator.to_string();
        c.sample(&[("operator", &op), ("link", &s.link_name), ("state", &s.state)], 1.0);
    }
    e.family(
        "keelson_operator_lease_seconds",
        Type::Gauge,
        "The lease time the server granted, for operators that hold a finite lease.",
    );
    let mut c = Capped { e, written: 0, dropped };
    for s in &statuses {
        if let Some(secs) = s.lease_seconds {
            let op = s.operator.to_string();
            c.sample(&[("operator", &op), ("link", &s.link_name)], f64::from(secs));
        }
    }
}

/// KubeSpan peers: how many in each state, and each one's handshake age.
fn kubespan(e: &mut Exposition, store: &Store, now: SystemTime, dropped: &mut u64) {
    let peers: Vec<(&str, &KubeSpanPeerStatus)> =
        store.list_specs::<KubeSpanPeerStatus>(Namespace::KubeSpan).collect();
    let mut by_state = [(PeerState::Up, 0u64), (PeerState::Down, 0), (PeerState::Unknown, 0)];
    for (_, p) in &peers {
        if let Some(slot) = by_state.iter_mut().find(|(s, _)| *s == p.state) {
            slot.1 += 1;
        }
    }
    e.family("keelson_kubespan_peers", Type::Gauge, "KubeSpan peers, by state.");
    for (state, n) in by_state {
        let state = match state {
            PeerState::Up => "up",
            PeerState::Down => "down",
            PeerState::Unknown => "unknown",
        };
        e.sample(&[("state", state)], n as f64);
    }
    e.family(
        "keelson_kubespan_peer_handshake_age_seconds",
        Type::Gauge,
        "Seconds since the last completed WireGuard handshake, by peer public key.",
    );
    let mut c = Capped { e, written: 0, dropped };
    for (key, p) in &peers {
        if let Some(t) = p.last_handshake_time {
            let age = now.duration_since(t).map(|d| d.as_secs_f64()).unwrap_or(0.0);
            c.sample(&[("peer", key)], age);
        }
    }
}

/// Time sync: synced or not, and the last measured offset.
fn time(e: &mut Exposition, store: &Store) {
    let Some(t) = store.get_spec::<TimeStatus>(Namespace::Runtime, TIME_STATUS_ID) else {
        return;
    };
    e.family(
        "keelson_time_synced",
        Type::Gauge,
        "1 when the clock is synchronised to an NTP server.",
    )
    .sample(&[], if t.synced { 1.0 } else { 0.0 });
    e.family(
        "keelson_time_offset_seconds",
        Type::Gauge,
        "The selected server's clock minus the local clock, at the last update.",
    )
    .sample(&[], t.offset_ns as f64 / 1e9);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::time::Duration;

    use base::metrics::Histogram;
    use net::resource::Operator;
    use runtime::Runtime;

    use super::*;

    static BOUNDS: [f64; 2] = [0.001, 0.1];

    fn controller(name: &'static str, runs: u64, errors: u64) -> ControllerState {
        let mut durations = Histogram::new(&BOUNDS);
        for _ in 0..runs {
            durations.observe(0.0005);
        }
        ControllerState {
            name,
            runs,
            errors,
            durations,
            condition: None,
            last_error: None,
            retry_at: None,
        }
    }

    /// A store with two operators, three KubeSpan peers and the time status.
    fn filled(now: SystemTime) -> Runtime {
        let mut rt = Runtime::new();
        let put = |rt: &mut Runtime, id: &str, s: OperatorStatus| {
            rt.put_input("test", Namespace::Network, id, s).unwrap();
        };
        put(
            &mut rt,
            "dhcp4/eth0",
            OperatorStatus {
                operator: Operator::Dhcp4,
                link_name: "eth0".into(),
                state: "bound".into(),
                lease_seconds: Some(3600),
                ..OperatorStatus::default()
            },
        );
        put(
            &mut rt,
            "dhcp6/eth1",
            OperatorStatus {
                operator: Operator::Dhcp6,
                link_name: "eth1".into(),
                state: "soliciting".into(),
                ..OperatorStatus::default()
            },
        );
        for (key, state, handshake) in [
            ("peerA=", PeerState::Up, Some(now - Duration::from_secs(30))),
            ("peerB=", PeerState::Up, None),
            ("peerC=", PeerState::Down, None),
        ] {
            let peer =
                KubeSpanPeerStatus { state, last_handshake_time: handshake, ..Default::default() };
            rt.put_input("test", Namespace::KubeSpan, key, peer).unwrap();
        }
        let time = TimeStatus { synced: true, offset_ns: -2_500_000, ..TimeStatus::default() };
        rt.put_input("test", Namespace::Runtime, TIME_STATUS_ID, time).unwrap();
        rt
    }

    #[test]
    fn a_scrape_reports_controllers_resources_operators_kubespan_time_and_the_process() {
        let now = SystemTime::now();
        let rt = filled(now);
        let controllers = [controller("AddressSpec", 4, 1), controller("LinkStatus", 2, 0)];
        let process = Process { rss_bytes: Some(4096), open_fds: Some(12) };
        let mut api = ApiFigures { connections: Some(3), ..ApiFigures::default() };
        api.calls.push(("/machine.MachineService/Version", "OK", 2));
        let mut h = base::metrics::Histogram::new(&[0.1]);
        h.observe(0.05);
        api.unary.push(("/machine.MachineService/Version", h));
        api.applies.changed = 1;
        api.applies.unchanged = 2;
        let text = render(Format::Prometheus, &controllers, rt.store(), process, &api, now);
        for want in [
            "# TYPE keelson_controller_reconciles_total counter\n",
            "keelson_controller_reconciles_total{controller=\"AddressSpec\"} 4\n",
            "keelson_config_applies_total{result=\"changed\"} 1\n",
            "keelson_config_applies_total{result=\"unchanged\"} 2\n",
            "keelson_controller_errors_total{controller=\"AddressSpec\"} 1\n",
            "keelson_controller_errors_total{controller=\"LinkStatus\"} 0\n",
            "keelson_controller_reconcile_seconds_bucket{controller=\"LinkStatus\",le=\"0.001\"} 2\n",
            "keelson_controller_reconcile_seconds_count{controller=\"AddressSpec\"} 4\n",
            "keelson_resources{namespace=\"network\",kind=\"OperatorStatus\"} 2\n",
            "keelson_resources{namespace=\"kubespan\",kind=\"KubeSpanPeerStatus\"} 3\n",
            "keelson_operator_state{operator=\"dhcp4\",link=\"eth0\",state=\"bound\"} 1\n",
            "keelson_operator_state{operator=\"dhcp6\",link=\"eth1\",state=\"soliciting\"} 1\n",
            "keelson_operator_lease_seconds{operator=\"dhcp4\",link=\"eth0\"} 3600\n",
            "keelson_kubespan_peers{state=\"up\"} 2\n",
            "keelson_kubespan_peers{state=\"down\"} 1\n",
            "keelson_kubespan_peers{state=\"unknown\"} 0\n",
            "keelson_kubespan_peer_handshake_age_seconds{peer=\"peerA=\"} 30\n",
            "keelson_time_synced 1\n",
            "keelson_time_offset_seconds -0.0025\n",
            "# TYPE keelson_api_requests_total counter\n",
            "keelson_api_requests_total{method=\"/machine.MachineService/Version\",code=\"OK\"} 2\n",
            "keelson_api_unary_seconds_bucket{method=\"/machine.MachineService/Version\",le=\"0.1\"} 1\n",
            "keelson_api_unary_seconds_count{method=\"/machine.MachineService/Version\"} 1\n",
            "keelson_process_resident_memory_bytes 4096\n",
            "keelson_process_open_fds 12\n",
            "keelson_api_connections 3\n",
            "keelson_metrics_dropped_series 0\n",
        ] {
            assert!(text.contains(want), "missing {want:?} in\n{text}");
        }
        // Only the one peer with a handshake has an age; only the finite lease is reported.
        assert_eq!(text.matches("keelson_kubespan_peer_handshake_age_seconds{").count(), 1);
        assert_eq!(text.matches("keelson_operator_lease_seconds{").count(), 1);
        let om = render(
            Format::OpenMetrics,
            &controllers,
            rt.store(),
            process,
            &ApiFigures::default(),
            now,
        );
        assert!(om.contains("# TYPE keelson_controller_reconciles counter\n"), "{om}");
        assert!(om.ends_with("# EOF\n"));
        assert!(!om.contains("keelson_api_connections"), "{om}");
    }

    #[test]
    fn a_family_stops_at_its_cap_and_counts_the_rest_as_dropped() {
        let now = SystemTime::now();
        let mut rt = Runtime::new();
        for i in 0..MAX_SERIES + 10 {
            let s = OperatorStatus {
                operator: Operator::Dhcp4,
                link_name: format!("l{i}"),
                state: "bound".into(),
                ..OperatorStatus::default()
            };
            rt.put_input("test", Namespace::Network, &format!("dhcp4/l{i}"), s).unwrap();
        }
        let text = render(
            Format::Prometheus,
            &[],
            rt.store(),
            Process::default(),
            &ApiFigures::default(),
            now,
        );
        assert_eq!(text.matches("keelson_operator_state{").count(), MAX_SERIES);
        assert!(text.contains("\nkeelson_metrics_dropped_series 10\n"), "{text}");
        // No process figures read: none written, rather than a zero that looks real.
        assert!(!text.contains("keelson_process_"), "{text}");
        // No time status yet: no time family either.
        assert!(!text.contains("keelson_time_"), "{text}");
    }
}
