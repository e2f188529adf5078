// SPDX-License-Identifier: Apache-2.0
//! The operator's Prometheus metrics (`serve --metrics-listen ADDR:PORT`, `GET /metrics`):
//! resources by kind and state, reconcile durations, etcd request latency, whether this
//! replica leads. The counting side ([`Metrics`]) is a mutex the reconciler and the store
//! update; the text is written at scrape time by `base::metrics` ([`render`], pure). The
//! listener answers one connection at a time, each bounded in size and time: a scrape is a
//! few kilobytes and Prometheus scrapes every few seconds at most.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base::metrics::{Exposition, Format, Histogram, Type};

/// Reconcile durations: a pass over one resource is a store read, at most one node call
/// (bounded by 10 s) and a write.
const RECONCILE_BOUNDS: &[f64] = &[0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0];
/// etcd requests over its gateway, on a LAN or loopback.
const ETCD_BOUNDS: &[f64] = &[0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0];
/// A request head larger than this, or slower than [`HEAD_TIMEOUT`], is refused.
const MAX_HEAD: usize = 8 << 10;
const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// What is counted between scrapes.
#[derive(Debug, Default)]
pub struct Counts {
    /// (kind, state) → resources, as the leader's last pass saw them.
    pub resources: BTreeMap<(&'static str, String), u64>,
    /// Per kind, the duration of each resource's reconcile.
    pub reconcile: BTreeMap<&'static str, Histogram>,
    /// Per kind, reconciles that ended in a store error.
    pub reconcile_errors: BTreeMap<&'static str, u64>,
    /// Per operation (`get`, `range`, `txn`), etcd request latency.
    pub etcd: BTreeMap<&'static str, Histogram>,
    /// Per operation, failed etcd requests.
    pub etcd_errors: BTreeMap<&'static str, u64>,
    pub leader: bool,
    /// Passes run while leading.
    pub passes: u64,
    /// The nodes' `Events` streams open now (push).
    pub event_streams: i64,
    /// Machines woken by their nodes' events.
    pub wakes: u64,
}

/// The operator's metrics, shared by the reconciler, the store and the listener.
#[derive(Debug, Default)]
pub struct Metrics(Mutex<Counts>);

impl Metrics {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    fn with(&self, f: impl FnOnce(&mut Counts)) {
        // A poisoned lock (a panic elsewhere) still counts: the numbers are plain data.
        let mut c = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut c);
    }

    /// One etcd request of `op` took `secs`.
    pub fn etcd(&self, op: &'static str, secs: f64, ok: bool) {
        self.with(|c| {
            c.etcd.entry(op).or_insert_with(|| Histogram::new(ETCD_BOUNDS)).observe(secs);
            if !ok {
                *c.etcd_errors.entry(op).or_default() += 1;
            }
        });
    }

    /// An event stream opened (`+1`) or ended (`-1`).
    pub fn event_stream(&self, delta: i64) {
        self.with(|c| c.event_streams = c.event_streams.saturating_add(delta).max(0));
    }

    /// `n` machines woken by their nodes' events.
    pub fn woken(&self, n: u64) {
        self.with(|c| c.wakes = c.wakes.saturating_add(n));
    }

    /// One resource of `kind` reconciled in `secs`.
    pub fn reconciled(&self, kind: &'static str, secs: f64, ok: bool) {
        self.with(|c| {
            c.reconcile
                .entry(kind)
                .or_insert_with(|| Histogram::new(RECONCILE_BOUNDS))
                .observe(secs);
            if !ok {
                *c.reconcile_errors.entry(kind).or_default() += 1;
            }
        });
    }

    /// The resources a pass saw, by kind and state (replacing the last pass's).
    pub fn resources(&self, counts: BTreeMap<(&'static str, String), u64>) {
        self.with(|c| {
            c.resources = counts;
            c.passes += 1;
        });
    }

    pub fn set_leader(&self, leader: bool) {
        self.with(|c| c.leader = leader);
    }

    /// The scrape text.
    pub fn render(&self, format: Format) -> String {
        let mut out = String::new();
        self.with(|c| out = render(c, format));
        out
    }
}

/// The exposition of `c` (pure).
pub fn render(c: &Counts, format: Format) -> String {
    let mut e = Exposition::new(format);
    e.family("keelson_operator_leader", Type::Gauge, "1 while this replica leads and reconciles");
    e.sample(&[], if c.leader { 1.0 } else { 0.0 });
    e.family(
        "keelson_operator_resources",
        Type::Gauge,
        "Resources by kind and status.state, as the leader's last pass saw them",
    );
    for ((kind, state), n) in &c.resources {
        e.sample(&[("kind", kind), ("state", state)], *n as f64);
    }
    e.family("keelson_operator_passes", Type::Counter, "Reconcile passes run while leading");
    e.sample(&[], c.passes as f64);
    e.family(
        "keelson_operator_reconcile_seconds",
        Type::Histogram,
        "Time to reconcile one resource (its store reads, node call and status write)",
    );
    for (kind, h) in &c.reconcile {
        e.histogram(&[("kind", kind)], h);
    }
    e.family(
        "keelson_operator_reconcile_errors",
        Type::Counter,
        "Reconciles of one resource that ended in a store error",
    );
    for (kind, n) in &c.reconcile_errors {
        e.sample(&[("kind", kind)], *n as f64);
    }
    e.family(
        "keelson_operator_etcd_request_seconds",
        Type::Histogram,
        "Latency of the store's etcd requests by operation",
    );
    for (op, h) in &c.etcd {
        e.histogram(&[("op", op)], h);
    }
    e.family("keelson_operator_etcd_request_errors", Type::Counter, "Failed etcd requests");
    for (op, n) in &c.etcd_errors {
        e.sample(&[("op", op)], *n as f64);
    }
    e.family(
        "keelson_operator_event_streams",
        Type::Gauge,
        "The nodes' Events streams the leader holds open",
    );
    e.sample(&[], c.event_streams as f64);
    e.family("keelson_operator_wakes", Type::Counter, "Machines woken by their nodes' events");
    e.sample(&[], c.wakes as f64);
    e.finish()
}

/// The answer to one request head: `GET /metrics` (or `HEAD`) is the exposition, in the
/// format `Accept` asks for; anything else 404 or 405 (pure).
pub fn answer(head: &[u8], m: &Metrics) -> (u16, &'static str, String) {
    let text = String::from_utf8_lossy(head);
    let mut lines = text.split("\r\n");
    let request = lines.next().unwrap_or_default();
    let mut parts = request.split(' ');
    let (method, target) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
    if method != "GET" && method != "HEAD" {
        return (405, "text/plain", "only GET\n".into());
    }
    if target.split('?').next() != Some("/metrics") {
        return (404, "text/plain", "not found: the metrics are at /metrics\n".into());
    }
    let accept = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("accept"))
        .map(|(_, v)| v.trim().as_bytes().to_vec());
    let format = Format::from_accept(accept.as_deref());
    (200, format.content_type(), m.render(format))
}

/// Read a request head: up to the blank line, at most [`MAX_HEAD`] bytes.
fn read_head(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut buf).ok()?;
        if n == 0 || head.len() + n > MAX_HEAD {
            return None;
        }
        head.extend_from_slice(buf.get(..n)?);
    }
    Some(head)
}

fn respond(mut s: TcpStream, m: &Metrics) {
    let _ = s.set_read_timeout(Some(HEAD_TIMEOUT));
    let _ = s.set_write_timeout(Some(WRITE_TIMEOUT));
    let Some(head) = read_head(&mut s) else {
        let _ = s.write_all(
            b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
        );
        // Closing with unread input would reset the connection and could lose the answer:
        // end our side, then read (a bounded amount, briefly) what the client still sends.
        let _ = s.shutdown(std::net::Shutdown::Write);
        let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
        let _ = std::io::copy(&mut (&mut s).take(64 << 10), &mut std::io::sink());
        return;
    };
    let (code, ctype, body) = answer(&head, m);
    let reason = match code {
        200 => "OK",
        404 => "Not Found",
        _ => "Method Not Allowed",
    };
    let body = if head.starts_with(b"HEAD ") { String::new() } else { body };
    let resp = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = s.write_all(resp.as_bytes());
}

/// Serve `GET /metrics` on `listener` until `stop` is set, one connection at a time.
pub fn serve(listener: TcpListener, m: Arc<Metrics>, stop: Arc<AtomicBool>) {
    if let Err(e) = listener.set_nonblocking(true) {
        log::warn!("metrics listener: {e}");
        return;
    }
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((s, _)) => {
                if s.set_nonblocking(false).is_ok() {
                    respond(s, &m);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                #[allow(clippy::disallowed_methods)] // The listener's own thread.
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => {
                log::warn!("metrics listener: {e}");
                #[allow(clippy::disallowed_methods)]
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exposition_has_every_family_and_answers_only_get_metrics() {
        let m = Metrics::default();
        m.set_leader(true);
        m.etcd("range", 0.002, true);
        m.etcd("txn", 0.3, false);
        m.reconciled("TalosMachines.keelson.dev", 0.02, true);
        m.resources(BTreeMap::from([(("TalosMachines.keelson.dev", "Available".into()), 2)]));
        m.event_stream(1);
        m.event_stream(1);
        m.event_stream(-1);
        m.woken(3);
        let text = m.render(Format::Prometheus);
        for line in [
            "keelson_operator_leader 1",
            "keelson_operator_resources{kind=\"TalosMachines.keelson.dev\",state=\"Available\"} 2",
            "keelson_operator_passes_total 1",
            "keelson_operator_event_streams 1",
            "keelson_operator_wakes_total 3",
            "keelson_operator_etcd_request_seconds_count{op=\"range\"} 1",
            "keelson_operator_etcd_request_errors_total{op=\"txn\"} 1",
            "keelson_operator_reconcile_seconds_bucket{kind=\"TalosMachines.keelson.dev\",le=\"0.05\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
        }
        let (code, _, body) = answer(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", &m);
        assert_eq!((code, body), (200, text));
        let (code, ctype, body) = answer(
            b"GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text; version=1.0.0\r\n\r\n",
            &m,
        );
        assert_eq!(code, 200);
        assert!(ctype.starts_with("application/openmetrics-text") && body.ends_with("# EOF\n"));
        assert_eq!(answer(b"GET / HTTP/1.1\r\n\r\n", &m).0, 404);
        assert_eq!(answer(b"POST /metrics HTTP/1.1\r\n\r\n", &m).0, 405);
        assert_eq!(answer(b"\xff\xfe\r\n\r\n", &m).0, 405);
    }
}
