// SPDX-License-Identifier: Apache-2.0
//! The stats page: `GET /stats` answers a small JSON object of counts, `GET /metrics` the
//! same and more as Prometheus text (OpenMetrics when `Accept` asks for it), `GET /` a line of
//! text saying what this port is. It is served on the gRPC port itself: a connection whose first
//! bytes are not the HTTP/2 preface is read as one HTTP/1.1 request (and closed after the
//! answer); over HTTP/2, a request that is not gRPC gets the same answers.

use base::metrics::Format;

use crate::metrics::Metrics;
use crate::registry::Totals;

/// The most bytes an HTTP/1.1 request head may have.
pub const HEAD_LIMIT: usize = 8 * 1024;

pub const LANDING: &str =
    "keelson-discovery-server: a discovery service for Talos and keelson nodes \
(gRPC sidero.discovery.server.Cluster). GET /stats for counts, /metrics for Prometheus.\n";

/// The counts as JSON.
pub fn json(t: &Totals) -> String {
    format!(
        "{{\"clusters\":{},\"affiliates\":{},\"endpoints\":{},\"watchers\":{},\"bytes\":{}}}\n",
        t.clusters, t.affiliates, t.endpoints, t.watchers, t.bytes
    )
}

/// The status, content type and body for a request path, in `format` for `/metrics`.
pub fn answer(path: &str, format: Format, t: &Totals, m: &Metrics) -> (u16, &'static str, String) {
    match path.split('?').next().unwrap_or_default() {
        "/stats" => (200, "application/json", json(t)),
        "/metrics" => (200, format.content_type(), m.render(format, t)),
        "/" => (200, "text/plain; charset=utf-8", LANDING.to_owned()),
        _ => (404, "text/plain; charset=utf-8", "not found\n".to_owned()),
    }
}

/// What an HTTP/1.1 request head asks for, once it is complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Head {
    /// More bytes are needed.
    Partial,
    /// A GET or HEAD of this path, and the metrics format its `Accept` header asks for.
    Get { path: String, head_only: bool, format: Format },
    /// Anything else: answered 400/405 and closed.
    Bad(u16),
}

/// Parse the head of an HTTP/1.1 request from the bytes read so far. A request line, not a
/// status line: keelson's response parser (`init/src/fetch/http.rs`) does the client's job and
/// is not shared with this server, which links no node code.
pub fn parse_head(buf: &[u8]) -> Head {
    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return if buf.len() >= HEAD_LIMIT { Head::Bad(431) } else { Head::Partial };
    };
    let line_end = buf[..end].windows(2).position(|w| w == b"\r\n").unwrap_or(end);
    let Ok(line) = std::str::from_utf8(&buf[..line_end]) else {
        return Head::Bad(400);
    };
    let mut parts = line.split(' ');
    let (Some(method), Some(path), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Head::Bad(400);
    };
    if !version.starts_with("HTTP/1.") || !path.starts_with('/') {
        return Head::Bad(400);
    }
    let format = Format::from_accept(header(&buf[..end], b"accept"));
    match method {
        "GET" => Head::Get { path: path.to_owned(), head_only: false, format },
        "HEAD" => Head::Get { path: path.to_owned(), head_only: true, format },
        _ => Head::Bad(405),
    }
}

/// The value of the first header line named `name` (ASCII case-insensitive) in a head.
fn header<'a>(head: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    head.split(|b| *b == b'\n').skip(1).find_map(|line| {
        let colon = line.iter().position(|b| *b == b':')?;
        let (n, v) = line.split_at(colon);
        n.eq_ignore_ascii_case(name).then(|| v.get(1..).unwrap_or_default().trim_ascii())
    })
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        _ => "Bad Request",
    }
}

/// A whole HTTP/1.1 response that closes the connection.
pub fn http1_response(status: u16, content_type: &str, body: &str, head_only: bool) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status} {}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\
         cache-control: no-store\r\nconnection: close\r\n\r\n",
        reason(status),
        body.len()
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(body.as_bytes());
    }
    out
}

/// The response to a complete request head (None while it is partial).
pub fn respond(buf: &[u8], t: &Totals, m: &Metrics) -> Option<Vec<u8>> {
    match parse_head(buf) {
        Head::Partial => None,
        Head::Get { path, head_only, format } => {
            let (status, ctype, body) = answer(&path, format, t, m);
            Some(http1_response(status, ctype, &body, head_only))
        }
        Head::Bad(status) => {
            Some(http1_response(status, "text/plain; charset=utf-8", "bad request\n", false))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_and_landing_over_http1() {
        let t = Totals { clusters: 1, affiliates: 2, endpoints: 3, watchers: 4, bytes: 5 };
        let m = Metrics::default();
        assert_eq!(respond(b"GET /stats HTTP/1.1\r\nHost: x\r\n", &t, &m), None);
        let r = respond(b"GET /stats HTTP/1.1\r\nHost: x\r\n\r\n", &t, &m).unwrap();
        let r = String::from_utf8(r).unwrap();
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"));
        assert!(r.ends_with(
            "\r\n\r\n{\"clusters\":1,\"affiliates\":2,\"endpoints\":3,\"watchers\":4,\"bytes\":5}\n"
        ));
        let r = respond(b"GET /nope HTTP/1.0\r\n\r\n", &t, &m).unwrap();
        assert!(r.starts_with(b"HTTP/1.1 404"));
        let r = respond(b"POST / HTTP/1.1\r\n\r\n", &t, &m).unwrap();
        assert!(r.starts_with(b"HTTP/1.1 405"));
        assert_eq!(parse_head(&[b'a'; HEAD_LIMIT]), Head::Bad(431));
        assert_eq!(parse_head(b"\xff\xfe\r\n\r\n"), Head::Bad(400));
    }

    #[test]
    fn metrics_in_the_format_accept_asks_for() {
        let t = Totals { clusters: 7, ..Totals::default() };
        let m = Metrics::default();
        let plain = respond(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", &t, &m).unwrap();
        let plain = String::from_utf8(plain).unwrap();
        assert!(plain.contains("content-type: text/plain; version=0.0.4"), "{plain}");
        assert!(plain.contains("\ndiscovery_clusters 7\n") && !plain.ends_with("# EOF\n"));
        let req = b"GET /metrics HTTP/1.1\r\nHost: x\r\nACCEPT:  application/openmetrics-text; version=1.0.0\r\n\r\n";
        let om = String::from_utf8(respond(req, &t, &m).unwrap()).unwrap();
        assert!(om.contains("content-type: application/openmetrics-text"), "{om}");
        assert!(om.ends_with("# EOF\n"));
    }
}
