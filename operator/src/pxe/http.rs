// SPDX-License-Identifier: Apache-2.0
//! The HTTP boot service: iPXE scripts by MAC, the images they load, and machine configs.
//!
//! - `GET /ipxe?mac=<mac>` and `GET /boot/<mac>.ipxe`: the machine's script ([`super::script`]).
//! - `GET`/`HEAD /images/<version>/vmlinuz|initramfs`: the file, with single byte ranges.
//! - `GET /config/<mac>`: the machine's configuration, when the operator has one.
//!
//! One request per connection (`Connection: close`). Bounded: a request head of 8 KiB read
//! within [`HEAD_TIMEOUT`], [`MAX_CONNECTIONS`] at once (more are answered 503), each at most
//! [`CONNECTION_TIME`] in all. Targets are matched segment by segment against the routes
//! above; anything else (`..`, `%2e`, `//`, a bad MAC or version) is refused before any file
//! name is formed.

use std::io::{Read, Seek, SeekFrom, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::images::{valid_version, ImageError, Images, Part};
use super::mac::Mac;
use super::machines::MachineTable;
use super::script;

pub const HEAD_LIMIT: usize = 8 << 10;
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
pub const MAX_CONNECTIONS: usize = 64;
pub const CONNECTION_TIME: Duration = Duration::from_secs(600);
/// Each write must make progress within this.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Script(Mac),
    Image(String, Part),
    Config(Mac),
}

/// A parsed request: what it asks for, and its `Range` header if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: Method,
    pub route: Route,
    pub range: Option<String>,
}

/// Why a request is refused: the status and a short reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(pub u16, pub &'static str);

/// The head's end, if it is in `buf`.
pub fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// Parse a request head (through its blank line).
pub fn parse(head: &[u8]) -> Result<Request, Refusal> {
    let text = std::str::from_utf8(head).map_err(|_| Refusal(400, "not UTF-8"))?;
    let mut lines = text.split("\r\n");
    let line = lines.next().unwrap_or("");
    let mut parts = line.split(' ');
    let (Some(m), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Refusal(400, "bad request line"));
    };
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(Refusal(400, "bad HTTP version"));
    }
    let method = match m {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        _ => return Err(Refusal(405, "only GET and HEAD")),
    };
    let mut range = None;
    for h in lines {
        if h.is_empty() {
            break;
        }
        let Some((name, value)) = h.split_once(':') else {
            return Err(Refusal(400, "bad header line"));
        };
        if name.eq_ignore_ascii_case("range") {
            if range.is_some() {
                return Err(Refusal(400, "two Range headers"));
            }
            range = Some(value.trim().to_owned());
        }
    }
    Ok(Request { method, route: route(target)?, range })
}

/// `%3A`/`%3a` is the one escape a MAC may carry (a `${net0/mac:uristring}`).
fn mac_param(v: &str) -> Result<Mac, Refusal> {
    let v = v.replace("%3A", ":").replace("%3a", ":");
    Mac::parse(&v).map_err(|_| Refusal(400, "bad MAC"))
}

fn route(target: &str) -> Result<Route, Refusal> {
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (target, None),
    };
    if !path.starts_with('/') {
        return Err(Refusal(400, "bad target"));
    }
    let segs: Vec<&str> = path[1..].split('/').collect();
    let mac_of = |q: Option<&str>| -> Result<Mac, Refusal> {
        let q = q.ok_or(Refusal(400, "no mac parameter"))?;
        let mut mac = None;
        for kv in q.split('&') {
            if let Some(v) = kv.strip_prefix("mac=") {
                if mac.is_some() {
                    return Err(Refusal(400, "two mac parameters"));
                }
                mac = Some(mac_param(v)?);
            }
        }
        mac.ok_or(Refusal(400, "no mac parameter"))
    };
    match segs.as_slice() {
        ["ipxe"] => Ok(Route::Script(mac_of(query)?)),
        ["boot", file] if query.is_none() => {
            let m = file.strip_suffix(".ipxe").ok_or(Refusal(404, "not found"))?;
            Ok(Route::Script(mac_param(m)?))
        }
        ["config", m] if query.is_none() => Ok(Route::Config(mac_param(m)?)),
        ["images", v, f] if query.is_none() => {
            if !valid_version(v) {
                return Err(Refusal(400, "bad version"));
            }
            let part = Part::from_name(f).ok_or(Refusal(404, "not found"))?;
            Ok(Route::Image((*v).to_owned(), part))
        }
        _ => Err(Refusal(404, "not found")),
    }
}

/// A range the file cannot satisfy (416).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unsatisfiable;

/// A `Range` header against a file of `size` bytes: `Ok(None)` serves it whole (no header,
/// or a form we do not serve, such as several ranges, which RFC 9110 §14.2 lets a server
/// ignore); `Ok(Some((first, last)))` the inclusive range; `Err` is a 416.
pub fn range(header: Option<&str>, size: u64) -> Result<Option<(u64, u64)>, Unsatisfiable> {
    let Some(h) = header else { return Ok(None) };
    let Some(spec) = h.strip_prefix("bytes=") else { return Ok(None) };
    if spec.contains(',') {
        return Ok(None);
    }
    let Some((a, b)) = spec.trim().split_once('-') else { return Ok(None) };
    let num = |s: &str| -> Option<u64> {
        if s.is_empty() || s.len() > 19 || !s.bytes().all(|c| c.is_ascii_digit()) {
            None
        } else {
            s.parse().ok()
        }
    };
    match (a.is_empty(), b.is_empty()) {
        // bytes=-N: the last N bytes.
        (true, false) => {
            let n = num(b).ok_or(Unsatisfiable)?;
            if n == 0 || size == 0 {
                return Err(Unsatisfiable);
            }
            Ok(Some((size - n.min(size), size - 1)))
        }
        (false, _) => {
            let first = num(a).ok_or(Unsatisfiable)?;
            let last =
                if b.is_empty() { size.saturating_sub(1) } else { num(b).ok_or(Unsatisfiable)? };
            if first >= size || last < first {
                return Err(Unsatisfiable);
            }
            Ok(Some((first, last.min(size - 1))))
        }
        (true, true) => Err(Unsatisfiable),
    }
}

/// The service's shared parts.
pub struct Service {
    pub images: Arc<Images>,
    pub table: Arc<dyn MachineTable>,
    /// The URL scripts point at (`--boot-url`); else `http://<the address the client
    /// reached>`.
    pub base_url: Option<String>,
    active: AtomicUsize,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service").field("base_url", &self.base_url).finish_non_exhaustive()
    }
}

impl Service {
    pub fn new(
        images: Arc<Images>,
        table: Arc<dyn MachineTable>,
        base_url: Option<String>,
    ) -> Self {
        Self { images, table, base_url, active: AtomicUsize::new(0) }
    }
}

fn status_text(code: u16) -> &'static str {
    match code {
        200 => "OK",
        206 => "Partial Content",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        416 => "Range Not Satisfiable",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

fn head(code: u16, ctype: &str, len: u64, extra: &str) -> String {
    format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: {ctype}\r\nContent-Length: {len}\r\n\
         Accept-Ranges: bytes\r\nConnection: close\r\n{extra}\r\n",
        status_text(code)
    )
}

fn send(s: &mut TcpStream, code: u16, ctype: &str, body: &[u8], method: Method) {
    let mut out = head(code, ctype, body.len() as u64, "").into_bytes();
    if method == Method::Get {
        out.extend_from_slice(body);
    }
    let _ = s.write_all(&out);
}

fn refuse(s: &mut TcpStream, peer: SocketAddr, r: &Refusal) {
    log::info!("boot http {peer}: {} {}", r.0, r.1);
    send(s, r.0, "text/plain", format!("{}\n", r.1).as_bytes(), Method::Get);
}

/// Read the head, within the time and size bounds.
fn read_head(s: &mut TcpStream) -> Result<Vec<u8>, Refusal> {
    let deadline = Instant::now() + HEAD_TIMEOUT;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Refusal(408, "request head too slow"));
        }
        let _ = s.set_read_timeout(Some(left));
        match s.read(&mut chunk) {
            Ok(0) => return Err(Refusal(400, "connection closed before the head ended")),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return Err(Refusal(408, "request head too slow")),
        }
        if let Some(end) = head_end(&buf) {
            buf.truncate(end);
            return Ok(buf);
        }
        if buf.len() >= HEAD_LIMIT {
            return Err(Refusal(431, "request head over 8 KiB"));
        }
    }
}

fn base_url(svc: &Service, s: &TcpStream) -> String {
    match (&svc.base_url, s.local_addr()) {
        (Some(u), _) => u.clone(),
        (None, Ok(a)) => format!("http://{a}"),
        (None, Err(_)) => "http://127.0.0.1".into(),
    }
}

fn handle(svc: &Service, mut s: TcpStream, peer: SocketAddr) {
    let started = Instant::now();
    let _ = s.set_write_timeout(Some(WRITE_TIMEOUT));
    let req = match read_head(&mut s).and_then(|h| parse(&h)) {
        Ok(r) => r,
        Err(r) => return refuse(&mut s, peer, &r),
    };
    match &req.route {
        Route::Script(mac) => {
            let text = match svc.table.machine(mac) {
                Ok(Some(m)) => match svc.images.list() {
                    Ok(l) if l.contains_key(&m.version) => script::boot(&base_url(svc, &s), &m),
                    Ok(_) => script::refuse(Some(mac), "its image version is not on this operator"),
                    Err(e) => {
                        log::warn!("boot http: {e}");
                        script::refuse(Some(mac), "the image manifest is unreadable")
                    }
                },
                Ok(None) => script::refuse(Some(mac), "unknown MAC; not booting it"),
                Err(e) => {
                    log::warn!("boot http: {e}");
                    return send(
                        &mut s,
                        503,
                        "text/plain",
                        b"machine table unavailable\n",
                        req.method,
                    );
                }
            };
            log::info!("boot http {peer}: script for {mac}");
            send(&mut s, 200, "text/plain", text.as_bytes(), req.method);
        }
        Route::Config(mac) => match svc.table.config(mac) {
            Ok(Some(c)) => {
                log::info!("boot http {peer}: config for {mac}");
                send(&mut s, 200, "application/yaml", &c, req.method);
            }
            Ok(None) => refuse(&mut s, peer, &Refusal(404, "not found")),
            Err(e) => {
                log::warn!("boot http: {e}");
                send(&mut s, 503, "text/plain", b"machine table unavailable\n", req.method);
            }
        },
        Route::Image(v, part) => {
            let (mut f, size) = match svc.images.open(v, *part) {
                Ok(x) => x,
                Err(e @ ImageError::Mismatch(..)) => {
                    log::error!("boot http: {e}");
                    return refuse(&mut s, peer, &Refusal(500, "image does not match its digest"));
                }
                Err(ImageError::Unknown(_)) => {
                    return refuse(&mut s, peer, &Refusal(404, "not found"))
                }
                Err(e) => {
                    log::warn!("boot http: {e}");
                    return refuse(&mut s, peer, &Refusal(500, "image unreadable"));
                }
            };
            let (code, first, len, extra) = match range(req.range.as_deref(), size) {
                Ok(None) => (200, 0, size, String::new()),
                Ok(Some((a, b))) => {
                    (206, a, b - a + 1, format!("Content-Range: bytes {a}-{b}/{size}\r\n"))
                }
                Err(Unsatisfiable) => {
                    let h =
                        head(416, "text/plain", 0, &format!("Content-Range: bytes */{size}\r\n"));
                    let _ = s.write_all(h.as_bytes());
                    return;
                }
            };
            if s.write_all(head(code, "application/octet-stream", len, &extra).as_bytes()).is_err()
                || req.method == Method::Head
            {
                return;
            }
            if f.seek(SeekFrom::Start(first)).is_err() {
                return;
            }
            let mut left = len;
            let mut buf = vec![0u8; 64 << 10];
            while left > 0 {
                if started.elapsed() > CONNECTION_TIME {
                    log::info!(
                        "boot http {peer}: {v}/{} cut off after {CONNECTION_TIME:?}",
                        part.file_name()
                    );
                    return;
                }
                let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                let n = match f.read(&mut buf[..want]) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                if s.write_all(&buf[..n]).is_err() {
                    return;
                }
                left -= n as u64;
            }
            log::info!("boot http {peer}: {v}/{} ({code}, {len} bytes)", part.file_name());
        }
    }
}

/// Serve on `listener` until `stop` is set.
pub fn serve(listener: TcpListener, svc: Arc<Service>, stop: Arc<AtomicBool>) {
    if listener.set_nonblocking(true).is_err() {
        log::error!("boot http: cannot poll the listener");
        return;
    }
    while !stop.load(Ordering::Relaxed) {
        let (mut s, peer) = match listener.accept() {
            Ok(x) => x,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                super::pause(Duration::from_millis(50));
                continue;
            }
            Err(e) => {
                log::warn!("boot http: accept: {e}");
                super::pause(Duration::from_millis(50));
                continue;
            }
        };
        let _ = s.set_nonblocking(false);
        if svc.active.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
            svc.active.fetch_sub(1, Ordering::AcqRel);
            let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
            refuse(&mut s, peer, &Refusal(503, "too many connections"));
            continue;
        }
        let svc2 = svc.clone();
        let spawned = evloop::spawn_worker("boot-http", move || {
            handle(&svc2, s, peer);
            svc2.active.fetch_sub(1, Ordering::AcqRel);
        });
        if let Err(e) = spawned {
            svc.active.fetch_sub(1, Ordering::AcqRel);
            log::warn!("boot http: no thread for {peer}: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(line: &str) -> Result<Request, Refusal> {
        parse(format!("{line}\r\nHost: x\r\n\r\n").as_bytes())
    }

    #[test]
    fn routes() {
        let mac = Mac::parse("52:54:00:12:34:56").unwrap();
        assert_eq!(
            req("GET /ipxe?mac=52:54:00:12:34:56 HTTP/1.1").unwrap().route,
            Route::Script(mac)
        );
        assert_eq!(
            req("GET /ipxe?x=1&mac=52%3a54%3a00%3a12%3a34%3a56 HTTP/1.1").unwrap().route,
            Route::Script(mac)
        );
        assert_eq!(
            req("GET /boot/52-54-00-12-34-56.ipxe HTTP/1.0").unwrap().route,
            Route::Script(mac)
        );
        assert_eq!(
            req("GET /config/52:54:00:12:34:56 HTTP/1.1").unwrap().route,
            Route::Config(mac)
        );
        let r = parse(b"HEAD /images/v1.7/initramfs HTTP/1.1\r\nrange: bytes=0-9\r\n\r\n").unwrap();
        assert_eq!(r.method, Method::Head);
        assert_eq!(r.route, Route::Image("v1.7".into(), Part::Initramfs));
        assert_eq!(r.range.as_deref(), Some("bytes=0-9"));
    }

    #[test]
    fn hostile_targets_are_refused() {
        for (line, code) in [
            ("GET /images/../vmlinuz HTTP/1.1", 400),
            ("GET /images/../../etc/passwd HTTP/1.1", 404),
            ("GET /images/%2e%2e/v/vmlinuz HTTP/1.1", 404),
            ("GET /images/..%2f/vmlinuz HTTP/1.1", 400),
            ("GET /images/v1//vmlinuz HTTP/1.1", 404),
            ("GET /images/.v1/vmlinuz HTTP/1.1", 400),
            ("GET /images/v1/manifest.json HTTP/1.1", 404),
            ("GET /ipxe?mac=../../x HTTP/1.1", 400),
            ("GET /ipxe?mac=52:54:00:12:34:56&mac=52:54:00:12:34:57 HTTP/1.1", 400),
            ("GET /ipxe HTTP/1.1", 400),
            ("GET /boot/52:54:00:12:34:56.sh HTTP/1.1", 404),
            ("POST /ipxe?mac=52:54:00:12:34:56 HTTP/1.1", 405),
            ("GET http://x/ipxe HTTP/1.1", 400),
            ("GET /ipxe  HTTP/1.1", 400),
            ("GET /ipxe HTTP/2", 400),
        ] {
            assert_eq!(req(line).map(|_| ()).map_err(|r| r.0), Err(code), "{line}");
        }
        assert_eq!(parse(b"GET / HTTP/1.1\r\nno colon\r\n\r\n").unwrap_err().0, 400);
        assert_eq!(parse(b"GET /\xff HTTP/1.1\r\n\r\n").unwrap_err().0, 400);
    }

    #[test]
    fn ranges() {
        assert_eq!(range(None, 100), Ok(None));
        assert_eq!(range(Some("bytes=0-9"), 100), Ok(Some((0, 9))));
        assert_eq!(range(Some("bytes=90-"), 100), Ok(Some((90, 99))));
        assert_eq!(range(Some("bytes=90-1000"), 100), Ok(Some((90, 99))));
        assert_eq!(range(Some("bytes=-10"), 100), Ok(Some((90, 99))));
        assert_eq!(range(Some("bytes=-1000"), 100), Ok(Some((0, 99))));
        assert_eq!(range(Some("bytes=0-1,5-6"), 100), Ok(None));
        assert_eq!(range(Some("items=0-1"), 100), Ok(None));
        assert_eq!(range(Some("bytes=100-"), 100), Err(Unsatisfiable));
        assert_eq!(range(Some("bytes=5-4"), 100), Err(Unsatisfiable));
        assert_eq!(range(Some("bytes=-0"), 100), Err(Unsatisfiable));
        assert_eq!(range(Some("bytes=-"), 100), Err(Unsatisfiable));
        assert_eq!(range(Some("bytes=+1-2"), 100), Err(Unsatisfiable));
        assert_eq!(range(Some("bytes=99999999999999999999-"), 100), Err(Unsatisfiable));
        assert_eq!(range(Some("bytes=0-"), 0), Err(Unsatisfiable));
    }
}
