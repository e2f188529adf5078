// SPDX-License-Identifier: Apache-2.0
//! `time.TimeService`: the node's clock and its time server. `Time` answers from keelson's
//! time sync (the `TimeStatus` it keeps: its last exchange with the server), so it never
//! waits. `TimeCheck` asks the server it is given (or the node's) once, as Talos does: one
//! SNTP exchange (RFC 4330 / RFC 5905 client mode) on a worker thread (`api-deferred`), never
//! on the loop.

use std::time::{Duration, SystemTime};

use grpc::Status;
use net::resource::{Namespace, TimeStatus, TIME_STATUS_ID};
use talos_api::common::Metadata;
use talos_api::google::{Empty, Timestamp};
use talos_api::time::{Time, TimeRequest, TimeResponse};
use talos_api::Message;
use timesync::ntp::wire::{Header, HEADER_LEN, MODE_SERVER};
use timesync::ntp::{NtpTime, NTP_PORT};

use super::dispatch::{decode, Call, Method, Reply, SMALL_REQUEST};

/// The methods served.
pub const METHODS: &[Method] = &[
    Method { path: "/time.TimeService/Time", max_request: SMALL_REQUEST, handler: time },
    Method { path: "/time.TimeService/TimeCheck", max_request: SMALL_REQUEST, handler: time_check },
];

/// How long one try waits for the server's answer.
const TRY_WAIT: Duration = Duration::from_secs(2);
/// Tries before the server is given up (a datagram may be lost).
const TRIES: usize = 3;
/// The call's limit (resolving the name included).
const CHECK_LIMIT: Duration = Duration::from_secs(10);

fn time(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    let _: Empty = decode(req)?;
    let now = SystemTime::now();
    let status = call.rt.store().get_spec::<TimeStatus>(Namespace::Runtime, TIME_STATUS_ID);
    let (server, remote) = match status {
        Some(s) if !s.server.is_empty() => (s.server.clone(), Some(shifted(now, s.offset_ns))),
        _ => (String::new(), None),
    };
    Reply::unary(&TimeResponse {
        messages: vec![Time {
            metadata: Metadata::of(&call.hostname()),
            server,
            localtime: Some(Timestamp::from_system(now)),
            remotetime: remote.map(Timestamp::from_system),
        }],
    })
}

fn time_check(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    let req: TimeRequest = decode(req)?;
    let server = if req.server.is_empty() {
        let status = call.rt.store().get_spec::<TimeStatus>(Namespace::Runtime, TIME_STATUS_ID);
        match status.map(|s| s.server.clone()).filter(|s| !s.is_empty()) {
            Some(s) => s,
            None => {
                return Err(Status::new(
                    grpc::code::INVALID_ARGUMENT,
                    "server: none given, and the node has no time server",
                ))
            }
        }
    } else {
        req.server
    };
    let (host, port) = host_port(&server).map_err(|why| {
        let shown = base::names::escape(&server.chars().take(64).collect::<String>(), 256);
        Status::new(grpc::code::INVALID_ARGUMENT, format!("server {shown}: {why}"))
    })?;
    let hostname = call.hostname();
    let feed = super::deferred::run(call, CHECK_LIMIT, move || {
        let (local, offset_ns) = sntp(&host, port).map_err(|e| {
            Status::new(grpc::code::UNAVAILABLE, format!("time server {host}: {e}"))
        })?;
        let reply = TimeResponse {
            messages: vec![Time {
                metadata: Metadata::of(&hostname),
                server,
                localtime: Some(Timestamp::from_system(local)),
                remotetime: Some(Timestamp::from_system(shifted(local, offset_ns))),
            }],
        };
        Ok(reply.encode_to_vec())
    })?;
    Ok(Reply::Stream(feed))
}

/// A server as `TimeCheck` takes it: a name or an address, with an optional port
/// (`host:port`, `[v6]:port`); 123 when none.
fn host_port(s: &str) -> Result<(String, u16), &'static str> {
    if s.len() > 253 + 7 || s.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err("not a host name or address");
    }
    if s.parse::<std::net::IpAddr>().is_ok() {
        return Ok((s.to_owned(), NTP_PORT));
    }
    let (host, port) = match s.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') || h.starts_with('[') => {
            (h.trim_start_matches('[').trim_end_matches(']'), p.parse().map_err(|_| "a bad port")?)
        }
        _ => (s, NTP_PORT),
    };
    if host.is_empty() || port == 0 {
        return Err("not a host name or address");
    }
    Ok((host.to_owned(), port))
}

/// One SNTP exchange with `host`: the local time the answer came, and the server's offset
/// from the local clock in nanoseconds. Blocks (a worker thread's).
fn sntp(host: &str, port: u16) -> Result<(SystemTime, i64), String> {
    use std::net::{ToSocketAddrs, UdpSocket};
    let addr =
        (host, port).to_socket_addrs().map_err(|e| e.to_string())?.next().ok_or("no address")?;
    let bind: std::net::SocketAddr =
        if addr.is_ipv4() { ([0, 0, 0, 0], 0).into() } else { ([0u16; 8], 0).into() };
    let sock = UdpSocket::bind(bind).map_err(|e| e.to_string())?;
    sock.connect(addr).map_err(|e| e.to_string())?;
    sock.set_read_timeout(Some(TRY_WAIT)).map_err(|e| e.to_string())?;
    let mut last = String::from("no answer");
    for _ in 0..TRIES {
        let cookie = cookie();
        let sent = SystemTime::now();
        sock.send(&Header::request(cookie)).map_err(|e| e.to_string())?;
        let mut buf = [0u8; 512];
        loop {
            let n = match sock.recv(&mut buf) {
                Ok(n) => n,
                Err(e) => {
                    last = format!("no answer in {} s ({e})", TRY_WAIT.as_secs());
                    break;
                }
            };
            let came = SystemTime::now();
            match offset(buf.get(..n).unwrap_or_default(), cookie, sent, came) {
                Ok(Some(off)) => return Ok((came, off)),
                // Not our answer (a late one of an earlier try): keep waiting.
                Ok(None) => continue,
                Err(e) => return Err(e),
            }
        }
    }
    Err(last)
}

/// A random transmit timestamp (the reply must echo it).
fn cookie() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: `b` is a valid buffer of its length.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    let fallback =
        SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
            ^ u64::from(std::process::id()).rotate_left(32);
    if n == 8 {
        u64::from_ne_bytes(b)
    } else {
        fallback
    }
}

/// The server's offset from a reply to the request with `cookie`, sent at `t1` and
/// received at `t4` (RFC 5905 §8: ((t2 - t1) + (t3 - t4)) / 2). `Ok(None)`: not the reply
/// to it; Err: the server refuses or is not synchronised.
fn offset(
    reply: &[u8],
    cookie: u64,
    t1: SystemTime,
    t4: SystemTime,
) -> Result<Option<i64>, String> {
    let Some(h) = Header::parse(reply).filter(|_| reply.len() >= HEADER_LEN) else {
        return Ok(None);
    };
    if h.mode != MODE_SERVER || h.origin != NtpTime(cookie) {
        return Ok(None);
    }
    if h.stratum == 0 {
        let code = String::from_utf8_lossy(&h.ref_id).into_owned();
        return Err(format!("kiss-o'-death {}", base::names::escape(&code, 16)));
    }
    if h.leap == timesync::ntp::wire::LEAP_UNSYNC || h.stratum >= 16 {
        return Err("the server is not synchronised".into());
    }
    let at = |t: SystemTime| {
        NtpTime::from_unix(t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default())
    };
    let (t1, t4) = (at(t1), at(t4));
    let a = h.receive.diff_ns(t1);
    let b = h.transmit.diff_ns(t4);
    Ok(Some(a / 2 + b / 2))
}

/// `now` moved by the server's offset (server minus local, in nanoseconds).
fn shifted(now: SystemTime, offset_ns: i64) -> SystemTime {
    let by = Duration::from_nanos(offset_ns.unsigned_abs());
    let moved = if offset_ns >= 0 { now.checked_add(by) } else { now.checked_sub(by) };
    moved.unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_gives_the_offset_and_only_the_reply_to_our_request_counts() {
        let t1 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let t4 = t1 + Duration::from_millis(20);
        let at = |t: SystemTime| {
            NtpTime::from_unix(t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default())
        };
        // The server is 5 s ahead; 10 ms each way.
        let server = |stratum, origin| {
            Header {
                version: 4,
                mode: MODE_SERVER,
                stratum,
                origin: NtpTime(origin),
                receive: at(t1 + Duration::from_millis(5010)),
                transmit: at(t1 + Duration::from_millis(5010)),
                ..Header::default()
            }
            .encode()
        };
        let got = offset(&server(2, 42), 42, t1, t4).ok().flatten().unwrap_or_default();
        assert!((got - 5_000_000_000).abs() < 1_000, "{got}");
        assert_eq!(offset(&server(2, 41), 42, t1, t4), Ok(None), "another request's");
        assert_eq!(offset(&[0u8; 10], 42, t1, t4), Ok(None));
        assert!(offset(&server(0, 42), 42, t1, t4).is_err(), "kiss-o'-death");
        assert!(offset(&server(16, 42), 42, t1, t4).is_err(), "unsynchronised");
    }

    #[test]
    fn servers_with_and_without_a_port() {
        assert_eq!(host_port("pool.ntp.org"), Ok(("pool.ntp.org".into(), 123)));
        assert_eq!(host_port("10.0.0.1:1123"), Ok(("10.0.0.1".into(), 1123)));
        assert_eq!(host_port("fd00::1"), Ok(("fd00::1".into(), 123)));
        assert_eq!(host_port("[fd00::1]:5"), Ok(("fd00::1".into(), 5)));
        assert!(host_port("a:b").is_err());
        assert!(host_port("a b").is_err());
        assert!(host_port(":1").is_err());
    }

    #[test]
    fn the_remote_time_is_the_local_time_moved_by_the_offset() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(100);
        assert_eq!(shifted(t, 1_500_000_000), t + Duration::from_millis(1500));
        assert_eq!(shifted(t, -2_000_000_000), t - Duration::from_secs(2));
    }
}
