// SPDX-License-Identifier: Apache-2.0
//! The demo workload that stands in for the kubelet in the demo image.
//!
//! It is its own small static binary (`/bin/demo-kubelet` in the demo image), not linked into
//! PID 1. keelson starts it once the network is ready, with `--node-ip=` and
//! `--hostname-override=` appended. It:
//!
//! - serves HTTP/1.0 on `[::]:8080`, IPv4 and IPv6 (`--listen PORT|ADDR:PORT`; `0.0.0.0`
//!   when the kernel has no IPv6): `GET /` answers with its
//!   own argv, the node's addresses, PID 1's resident memory and `ok`; `GET /zombies` counts
//!   the processes in state Z, so a boot test can check that PID 1 reaps;
//! - answers `GET /healthz` with `200 ok` there and on `127.0.0.1:10248` (the kubelet's own
//!   health endpoint; `--healthz-listen ADDR:PORT` moves it), which keelson probes;
//! - exits at once with `--fail-with CODE` (a kubelet upgrade that fails), and on SIGTERM
//!   exits 0 after appending `SIGTERM pid N` to the file `--sigterm-log PATH` names;
//! - at start and then every few seconds (`--orphan-every SECS`, default 2) abandons a
//!   process: it runs a child that starts a grandchild and exits at once, so the grandchild is
//!   reparented to PID 1 and stays a zombie after it exits unless PID 1 reaps it.
//!
//! The child and grandchild are this same binary re-executed with an internal first argument,
//! so the image needs no shell. Bad requests get a 4xx answer and never stop the server.
#![allow(clippy::disallowed_methods)] // A stand-in kubelet for tests, run as a child process, never as PID 1: threads and sleeps are its job.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

// keelson's HTTP/1 response parser (bounded), shared by inclusion: the demo is its own binary
// and keelson has no library target. Only the parser is used here.
#[allow(dead_code, unused_imports)]
#[path = "../fetch/http.rs"]
mod http;

/// First argument of the re-executed child that starts the grandchild and exits.
const ORPHAN_PARENT: &str = "--demo-internal-orphan-parent";
/// First argument of the re-executed grandchild that lives briefly, as an orphan.
const ORPHAN: &str = "--demo-internal-orphan";
/// How long the abandoned grandchild lives: long enough to be reparented before it exits.
const ORPHAN_LIFETIME: Duration = Duration::from_millis(300);
/// Largest request head we read; anything longer is answered 431 and dropped.
const MAX_REQUEST: usize = 8 * 1024;
/// A client that sends nothing for this long is dropped.
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// What the command line asked for.
#[derive(Debug, Clone, PartialEq)]
struct Options {
    listen: SocketAddr,
    orphan_every: Duration,
    /// Another workload to fetch `GET /` from every few seconds (the two-node KubeSpan boot
    /// test proves traffic between the nodes' KubeSpan addresses with it).
    probe: Option<SocketAddr>,
    /// Where the health endpoint listens too.
    healthz: SocketAddr,
    /// Exit at once with this status.
    fail_with: Option<u8>,
    /// Append a line here on SIGTERM.
    sigterm_log: Option<String>,
}

/// Entry point when invoked as `demo-kubelet`; `args` excludes argv[0].
fn main() -> ExitCode {
    run(std::env::args_os().skip(1).collect())
}

fn run(args: Vec<OsString>) -> ExitCode {
    match args.first().and_then(|a| a.to_str()) {
        Some(ORPHAN_PARENT) => return orphan_parent(),
        Some(ORPHAN) => {
            std::thread::sleep(ORPHAN_LIFETIME);
            return ExitCode::SUCCESS;
        }
        _ => {}
    }
    let argv: Vec<String> = std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect();
    let opts = match parse_options(argv.get(1..).unwrap_or_default()) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("demo-kubelet: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(code) = opts.fail_with {
        eprintln!("demo-kubelet: --fail-with {code}: exiting");
        return ExitCode::from(code);
    }
    on_sigterm(opts.sigterm_log.clone());
    let listener = match TcpListener::bind(opts.listen)
        .or_else(|e| ipv4_fallback(opts.listen).map_or(Err(e), TcpListener::bind))
    {
        Ok(l) => l,
        Err(e) => {
            eprintln!("demo-kubelet: cannot listen on {}: {e}", opts.listen);
            return ExitCode::FAILURE;
        }
    };
    println!(
        "demo-kubelet: listening on {}, abandoning a child every {} s; argv: {}",
        opts.listen,
        opts.orphan_every.as_secs_f32(),
        argv.join(" ")
    );

    let spawned = Arc::new(AtomicU64::new(0));
    {
        let spawned = Arc::clone(&spawned);
        let every = opts.orphan_every;
        let started = std::thread::Builder::new().name("orphans".into()).spawn(move || loop {
            match abandon_child() {
                Ok(()) => {
                    spawned.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => eprintln!("demo-kubelet: cannot start a child: {e}"),
            }
            std::thread::sleep(every);
        });
        if let Err(e) = started {
            eprintln!("demo-kubelet: cannot start the orphan thread: {e}");
        }
    }

    if let Some(target) = opts.probe {
        let started = std::thread::Builder::new().name("probe".into()).spawn(move || probe(target));
        if let Err(e) = started {
            eprintln!("demo-kubelet: cannot start the probe thread: {e}");
        }
    }

    let argv = Arc::new(argv);
    match TcpListener::bind(opts.healthz) {
        Ok(l) => {
            let (argv, spawned) = (Arc::clone(&argv), Arc::clone(&spawned));
            let started = std::thread::Builder::new()
                .name("healthz".into())
                .spawn(move || accept(&l, &argv, &spawned));
            if let Err(e) = started {
                eprintln!("demo-kubelet: cannot start the health thread: {e}");
            }
        }
        // The main port still answers /healthz.
        Err(e) => eprintln!("demo-kubelet: cannot listen on {}: {e}", opts.healthz),
    }
    accept(&listener, &argv, &spawned);
    ExitCode::FAILURE
}

/// SIGTERM ends the process with status 0, after a line in `log` (if given): the upgrade test
/// checks that the old kubelet was asked to stop rather than killed.
fn on_sigterm(log: Option<String>) {
    use nix::sys::signal::{SigSet, Signal};
    let mut set = SigSet::empty();
    set.add(Signal::SIGTERM);
    // Blocked before any other thread starts, so only the waiting thread takes it.
    if let Err(e) = set.thread_block() {
        eprintln!("demo-kubelet: cannot block SIGTERM: {e}");
        return;
    }
    let started = std::thread::Builder::new().name("sigterm".into()).spawn(move || {
        if set.wait().is_ok() {
            let line = format!("SIGTERM pid {}\n", std::process::id());
            if let Some(path) = &log {
                let appended = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .and_then(|mut f| f.write_all(line.as_bytes()));
                if let Err(e) = appended {
                    eprintln!("demo-kubelet: {path}: {e}");
                }
            }
            // Not println!: with the node gone its stdout is a broken pipe, and a panic here
            // would leave the process running.
            let _ = writeln!(std::io::stdout(), "demo-kubelet: SIGTERM, exiting");
            // The other threads block in accept and sleep: only exit ends them all.
            #[allow(clippy::exit, reason = "a stand-in for the kubelet ends on SIGTERM")]
            std::process::exit(0);
        }
    });
    if let Err(e) = started {
        eprintln!("demo-kubelet: cannot start the SIGTERM thread: {e}");
    }
}

/// Serve every connection of `listener`, each on its own thread.
fn accept(listener: &TcpListener, argv: &Arc<Vec<String>>, spawned: &Arc<AtomicU64>) {
    for conn in listener.incoming() {
        let stream = match conn {
            Ok(s) => s,
            Err(e) => {
                eprintln!("demo-kubelet: accept: {e}");
                // EMFILE and friends: give the other connections time to close.
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        let argv = Arc::clone(argv);
        let spawned = Arc::clone(spawned);
        let handler = move || serve(stream, &argv, spawned.load(Ordering::Relaxed));
        if let Err(e) = std::thread::Builder::new().name("http".into()).spawn(handler) {
            eprintln!("demo-kubelet: cannot start a connection thread: {e}");
        }
    }
}

/// Fetches `GET /` from `target` every 2 s and prints a line whenever the outcome changes.
fn probe(target: SocketAddr) {
    let mut last: Option<bool> = None;
    loop {
        let result = get_root(target).map(|r| r.body.len());
        let ok = result.is_ok();
        if last != Some(ok) {
            match result {
                Ok(n) => println!("demo-kubelet: probe {target} ok ({n} bytes)"),
                Err(e) => println!("demo-kubelet: probe {target} failed: {e}"),
            }
            last = Some(ok);
        }
        std::thread::sleep(Duration::from_secs(2));
    }
}

/// `GET /` from `target`: the whole response, bounded by the parser's limits.
fn get_root(target: SocketAddr) -> Result<http::Response, String> {
    let mut s = TcpStream::connect_timeout(&target, IO_TIMEOUT).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(IO_TIMEOUT)).map_err(|e| e.to_string())?;
    s.write_all(b"GET / HTTP/1.0\r\n\r\n").map_err(|e| e.to_string())?;
    let mut parser = http::ResponseParser::default();
    let mut buf = [0u8; 4096];
    loop {
        let n = s.read(&mut buf).map_err(|e| e.to_string())?;
        if n == 0 || parser.feed(buf.get(..n).unwrap_or_default()).map_err(|e| e.to_string())? {
            break;
        }
    }
    parser.finish().map_err(|e| e.to_string())
}

/// Parses the options the demo understands; everything else (the kubelet flags keelson adds)
/// is accepted and only echoed.
fn parse_options(args: &[String]) -> Result<Options, String> {
    let mut opts = Options {
        listen: SocketAddr::from((Ipv6Addr::UNSPECIFIED, 8080)),
        orphan_every: Duration::from_secs(2),
        probe: None,
        healthz: SocketAddr::from((Ipv4Addr::LOCALHOST, 10248)),
        fail_with: None,
        sigterm_log: None,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (arg.as_str(), None),
        };
        let known = [
            "--listen",
            "--orphan-every",
            "--probe",
            "--healthz-listen",
            "--fail-with",
            "--sigterm-log",
        ];
        if !known.contains(&name) {
            continue;
        }
        let value = match inline.or_else(|| it.next().cloned()) {
            Some(v) => v,
            None => return Err(format!("{name} needs a value")),
        };
        match name {
            "--listen" => opts.listen = parse_listen(&value)?,
            "--healthz-listen" => opts.healthz = parse_listen(&value)?,
            "--fail-with" => {
                opts.fail_with = Some(
                    value
                        .parse()
                        .map_err(|_| format!("--fail-with: expected 0-255, got {value:?}"))?,
                )
            }
            "--sigterm-log" => opts.sigterm_log = Some(value),
            "--probe" => {
                opts.probe = Some(
                    value
                        .parse()
                        .map_err(|_| format!("--probe: expected ADDR:PORT, got {value:?}"))?,
                )
            }
            _ => {
                let secs: f32 = value
                    .parse()
                    .ok()
                    .filter(|s: &f32| s.is_finite() && *s >= 0.1 && *s <= 3600.0)
                    .ok_or_else(|| format!("--orphan-every: bad number of seconds {value:?}"))?;
                opts.orphan_every = Duration::from_secs_f32(secs);
            }
        }
    }
    Ok(opts)
}

/// Where to listen when binding `addr` failed: `[::]` (both families on Linux) becomes
/// `0.0.0.0` for a kernel without IPv6 (ipv6.disable=1); any other address has none.
fn ipv4_fallback(addr: SocketAddr) -> Option<SocketAddr> {
    (addr.ip() == Ipv6Addr::UNSPECIFIED)
        .then(|| SocketAddr::from((Ipv4Addr::UNSPECIFIED, addr.port())))
}

/// `8080` (all addresses, IPv4 and IPv6: `[::]:8080`), `0.0.0.0:8080` or `[::]:8080`.
fn parse_listen(value: &str) -> Result<SocketAddr, String> {
    if let Ok(port) = value.parse::<u16>() {
        return Ok(SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)));
    }
    value.parse().map_err(|_| format!("--listen: expected PORT or ADDR:PORT, got {value:?}"))
}

/// Runs the child that starts a grandchild and exits, and waits for that child (so the
/// only process left behind is the grandchild, which is now PID 1's).
fn abandon_child() -> std::io::Result<()> {
    let mut child = Command::new("/proc/self/exe")
        .arg0("demo-kubelet")
        .arg(ORPHAN_PARENT)
        .stdin(Stdio::null())
        .spawn()?;
    child.wait().map(|_| ())
}

/// The middle process: start the grandchild and exit without waiting for it.
fn orphan_parent() -> ExitCode {
    let started = Command::new("/proc/self/exe")
        .arg0("demo-kubelet")
        .arg(ORPHAN)
        .stdin(Stdio::null())
        .spawn();
    match started {
        // Dropping the handle neither waits nor kills: the grandchild outlives us.
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("demo-kubelet: cannot start the grandchild: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Answers one request on `stream`; every error ends only this connection.
fn serve(mut stream: TcpStream, argv: &[String], spawned: u64) {
    let _ = stream.set_read_timeout(Some(IO_TIMEOUT));
    let _ = stream.set_write_timeout(Some(IO_TIMEOUT));
    let (status, body) = match read_head(&mut stream) {
        Ok(head) => route(&head, argv, spawned),
        Err(HeadError::TooLarge) => (431, "request too large\n".to_string()),
        Err(HeadError::Io) => return,
    };
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Request Header Fields Too Large",
    };
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes());
}

/// Why a request head could not be read.
#[derive(Debug, PartialEq)]
enum HeadError {
    TooLarge,
    Io,
}

/// Reads up to the blank line that ends the request head (the server's side: a request, not a
/// response, so not the included response parser's job).
fn read_head(stream: &mut impl Read) -> Result<Vec<u8>, HeadError> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    loop {
        let n = stream.read(&mut buf).map_err(|_| HeadError::Io)?;
        if n == 0 {
            // The client closed early: answer what we have (likely a 400).
            return Ok(head);
        }
        head.extend_from_slice(&buf[..n]);
        if head.windows(4).any(|w| w == b"\r\n\r\n") || head.windows(2).any(|w| w == b"\n\n") {
            return Ok(head);
        }
        if head.len() > MAX_REQUEST {
            return Err(HeadError::TooLarge);
        }
    }
}

/// Maps a request head to a status and a body.
fn route(head: &[u8], argv: &[String], spawned: u64) -> (u16, String) {
    let text = String::from_utf8_lossy(head);
    let line = text.lines().next().unwrap_or_default();
    let mut parts = line.split_ascii_whitespace();
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return (400, "bad request line\n".to_string());
    };
    if !version.starts_with("HTTP/") {
        return (400, "bad request line\n".to_string());
    }
    if method != "GET" {
        return (405, "only GET\n".to_string());
    }
    let path = target.split('?').next().unwrap_or_default();
    match path {
        "/" => (200, index(argv, spawned)),
        "/zombies" => (200, zombies_report(spawned)),
        "/healthz" => (200, "ok".to_string()),
        _ => (404, "not found; try /, /zombies or /healthz\n".to_string()),
    }
}

/// The body of `GET /`.
fn index(argv: &[String], spawned: u64) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "demo-kubelet, standing in for the kubelet");
    let _ = writeln!(out, "argv: {}", argv.join(" "));
    let _ = writeln!(out, "addresses:");
    for (addr, dev) in node_addresses() {
        let _ = writeln!(out, "  {addr} {dev}");
    }
    match pid1_rss_kib() {
        Some(kib) => {
            let _ = writeln!(out, "pid1 VmRSS: {kib} kB");
        }
        None => {
            let _ = writeln!(out, "pid1 VmRSS: unknown");
        }
    }
    let _ = writeln!(out, "abandoned children: {spawned}");
    let _ = writeln!(out, "zombies: {}", zombies().len());
    let _ = writeln!(out, "ok");
    out
}

/// The body of `GET /zombies`: the count first, then one line per zombie.
fn zombies_report(spawned: u64) -> String {
    let list = zombies();
    let mut out = format!("zombies: {}\nabandoned children: {spawned}\n", list.len());
    for (pid, ppid, comm) in list {
        let _ = writeln!(out, "  pid {pid} ppid {ppid} {comm}");
    }
    out
}

/// The node's addresses with the link they are on: IPv4 from `/proc/net/fib_trie` (local
/// host entries) and `/proc/net/route` (which link holds the subnet), IPv6 from
/// `/proc/net/if_inet6`.
fn node_addresses() -> Vec<(String, String)> {
    let routes = std::fs::read_to_string("/proc/net/route").unwrap_or_default();
    let routes = parse_route_table(&routes);
    let mut out: Vec<(String, String)> = Vec::new();
    let trie = std::fs::read_to_string("/proc/net/fib_trie").unwrap_or_default();
    for addr in parse_fib_trie_locals(&trie) {
        let dev = if addr.is_loopback() {
            "lo".to_string()
        } else {
            link_of(addr, &routes).unwrap_or_else(|| "?".to_string())
        };
        out.push((addr.to_string(), dev));
    }
    let inet6 = std::fs::read_to_string("/proc/net/if_inet6").unwrap_or_default();
    out.extend(parse_if_inet6(&inet6));
    out
}

/// The addresses of the `/32 host LOCAL` leaves of `/proc/net/fib_trie`, deduplicated, in
/// order of first appearance.
fn parse_fib_trie_locals(text: &str) -> Vec<Ipv4Addr> {
    let mut out = Vec::new();
    let mut last: Option<Ipv4Addr> = None;
    for line in text.lines() {
        let t = line.trim_start_matches([' ', '|', '+', '-', '`']).trim();
        if let Ok(a) = t.parse::<Ipv4Addr>() {
            last = Some(a);
        } else if t.starts_with("/32 host LOCAL") {
            if let Some(a) = last {
                if !out.contains(&a) {
                    out.push(a);
                }
            }
        }
    }
    out
}

/// `(link, destination, mask)` rows of `/proc/net/route` (hex fields in host byte order).
fn parse_route_table(text: &str) -> Vec<(String, u32, u32)> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let dest = u32::from_str_radix(f.get(1)?, 16).ok()?;
            let mask = u32::from_str_radix(f.get(7)?, 16).ok()?;
            Some((f.first()?.to_string(), u32::from_be(dest), u32::from_be(mask)))
        })
        .collect()
}

/// The link whose most specific connected route covers `addr`.
fn link_of(addr: Ipv4Addr, routes: &[(String, u32, u32)]) -> Option<String> {
    let a = u32::from(addr);
    routes
        .iter()
        .filter(|(_, dest, mask)| *mask != 0 && a & mask == *dest)
        .max_by_key(|(_, _, mask)| mask.count_ones())
        .map(|(dev, _, _)| dev.clone())
}

/// `(address/prefix, link)` pairs from `/proc/net/if_inet6`.
fn parse_if_inet6(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let hex = f.first()?;
            let bits = u128::from_str_radix(hex, 16).ok()?;
            let prefix = u8::from_str_radix(f.get(2)?, 16).ok()?;
            let addr = std::net::Ipv6Addr::from(bits);
            Some((format!("{addr}/{prefix}"), f.get(5)?.to_string()))
        })
        .collect()
}

/// PID 1's resident set size in KiB, from `/proc/1/status`.
fn pid1_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/1/status").ok()?;
    parse_vmrss(&status)
}

fn parse_vmrss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// `(pid, ppid, comm)` of every process in state Z.
fn zombies() -> Vec<(u32, u32, String)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out: Vec<(u32, u32, String)> = dir
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let (state, ppid, comm) = parse_stat(&stat)?;
            (state == 'Z').then_some((pid, ppid, comm))
        })
        .collect();
    out.sort_unstable();
    out
}

/// State, parent PID and command name from one `/proc/PID/stat` line. The name is in
/// parentheses and may itself contain spaces and parentheses, so split at the last `)`.
fn parse_stat(stat: &str) -> Option<(char, u32, String)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat.get(open + 1..close)?.to_string();
    let mut rest = stat.get(close + 1..)?.split_whitespace();
    let state = rest.next()?.chars().next()?;
    let ppid = rest.next()?.parse().ok()?;
    Some((state, ppid, comm))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn strings(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_default_listener_takes_both_families() {
        assert_eq!(
            ipv4_fallback("[::]:8080".parse().unwrap()),
            Some("0.0.0.0:8080".parse().unwrap())
        );
        assert_eq!(ipv4_fallback("[fd00::1]:8080".parse().unwrap()), None);
        assert_eq!(ipv4_fallback("0.0.0.0:8080".parse().unwrap()), None);
        // The default address on an ephemeral port answers over IPv4 and IPv6 loopback.
        let mut o = parse_options(&strings(&[])).unwrap();
        o.listen.set_port(0);
        let l = TcpListener::bind(o.listen).unwrap();
        let port = l.local_addr().unwrap().port();
        TcpStream::connect((Ipv4Addr::LOCALHOST, port)).unwrap();
        TcpStream::connect((Ipv6Addr::LOCALHOST, port)).unwrap();
    }

    #[test]
    fn options_default_and_overrides() {
        let o = parse_options(&strings(&["--node-ip=10.0.2.15", "--hostname-override=n"])).unwrap();
        // All addresses of both families: an IPv6-only node serves too.
        assert_eq!(o.listen, "[::]:8080".parse().unwrap());
        assert_eq!(o.orphan_every, Duration::from_secs(2));
        let o = parse_options(&strings(&["--listen", "9000", "--orphan-every=0.5"])).unwrap();
        assert_eq!(o.listen, "[::]:9000".parse().unwrap());
        assert_eq!(o.orphan_every, Duration::from_millis(500));
        let o = parse_options(&strings(&["--listen=0.0.0.0:9000"])).unwrap();
        assert_eq!(o.listen, "0.0.0.0:9000".parse().unwrap());
        let o = parse_options(&strings(&["--listen=[::]:81"])).unwrap();
        assert_eq!(o.listen, "[::]:81".parse().unwrap());
        assert!(parse_options(&strings(&["--listen"])).is_err());
        assert!(parse_options(&strings(&["--listen=nope"])).is_err());
        let o = parse_options(&strings(&["--probe", "[fd00::1]:8080"])).unwrap();
        assert_eq!(o.probe, Some("[fd00::1]:8080".parse().unwrap()));
        assert!(parse_options(&strings(&["--probe=fd00::1"])).is_err());
        assert!(parse_options(&strings(&["--orphan-every=0"])).is_err());
        assert!(parse_options(&strings(&["--orphan-every=NaN"])).is_err());
    }

    #[test]
    fn routes_requests() {
        let argv = strings(&["/bin/demo-kubelet", "--node-ip=10.0.2.15"]);
        let (s, body) = route(b"GET / HTTP/1.0\r\n\r\n", &argv, 3);
        assert_eq!(s, 200);
        assert!(body.contains("argv: /bin/demo-kubelet --node-ip=10.0.2.15\n"));
        assert!(body.contains("abandoned children: 3\n"));
        assert!(body.ends_with("ok\n"));
        assert_eq!(route(b"GET /zombies?x=1 HTTP/1.1\r\n\r\n", &argv, 0).0, 200);
        assert_eq!(route(b"GET /nope HTTP/1.0\r\n\r\n", &argv, 0).0, 404);
        assert_eq!(route(b"POST / HTTP/1.0\r\n\r\n", &argv, 0).0, 405);
        assert_eq!(route(b"", &argv, 0).0, 400);
        assert_eq!(route(b"GET /\r\n\r\n", &argv, 0).0, 400);
        assert_eq!(route(b"GET / FTP/1.0\r\n\r\n", &argv, 0).0, 400);
        assert_eq!(route(b"GET / HTTP/1.0 extra\r\n\r\n", &argv, 0).0, 400);
        assert_eq!(route(b"\xff\xfe / HTTP/1.0\r\n\r\n", &argv, 0).0, 405);
    }

    #[test]
    fn the_probe_reads_an_http_answer_and_refuses_anything_else() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            for (i, conn) in listener.incoming().take(2).enumerate() {
                let mut c = conn.unwrap();
                let mut buf = [0u8; 256];
                let _ = c.read(&mut buf);
                let answer: &[u8] = if i == 0 {
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhiEXTRA"
                } else {
                    b"SSH-2.0-OpenSSH\r\n\r\n"
                };
                c.write_all(answer).unwrap();
            }
        });
        assert_eq!(get_root(addr).unwrap().body, b"hi");
        let err = get_root(addr).unwrap_err();
        assert!(err.contains("status line"), "{err}");
        server.join().unwrap();
    }

    #[test]
    fn head_is_bounded() {
        let big = vec![b'a'; MAX_REQUEST + 2048];
        assert_eq!(read_head(&mut &big[..]), Err(HeadError::TooLarge));
        let ok = b"GET / HTTP/1.0\r\nHost: x\r\n\r\ntrailing".to_vec();
        assert_eq!(read_head(&mut &ok[..]).unwrap(), ok);
        assert_eq!(read_head(&mut &b"GET"[..]).unwrap(), b"GET".to_vec());
    }

    #[test]
    fn fib_trie_locals() {
        let trie = "\
Main:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 10.0.2.0/24 2 0 2
        +-- 10.0.2.0/28 2 0 2
           |-- 10.0.2.0
              /24 link UNICAST
           |-- 10.0.2.15
              /32 host LOCAL
        |-- 10.0.2.255
           /32 link BROADCAST
     +-- 127.0.0.0/8 2 0 2
        |-- 127.0.0.1
           /32 host LOCAL
Local:
  +-- 0.0.0.0/0 3 0 5
           |-- 10.0.2.15
              /32 host LOCAL
";
        let want: Vec<Ipv4Addr> = vec!["10.0.2.15".parse().unwrap(), "127.0.0.1".parse().unwrap()];
        assert_eq!(parse_fib_trie_locals(trie), want);
    }

    #[test]
    fn route_table_links() {
        let table = "\
Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth0\t00000000\t0202000A\t0003\t0\t0\t1024\t00000000\t0\t0\t0
eth0\t0002000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
";
        let routes = parse_route_table(table);
        assert_eq!(link_of("10.0.2.15".parse().unwrap(), &routes).as_deref(), Some("eth0"));
        assert_eq!(link_of("192.168.1.1".parse().unwrap(), &routes), None);
    }

    #[test]
    fn if_inet6_lines() {
        let text = "fe80000000000000505400fffe123456 02 40 20 80     eth0\n\
                    00000000000000000000000000000001 01 80 10 80       lo\nbad\n";
        assert_eq!(
            parse_if_inet6(text),
            vec![
                ("fe80::5054:ff:fe12:3456/64".to_string(), "eth0".to_string()),
                ("::1/128".to_string(), "lo".to_string())
            ]
        );
    }

    #[test]
    fn stat_lines() {
        assert_eq!(parse_stat("42 (a) b)) Z 1 42 42 0 -1").unwrap(), ('Z', 1, "a) b)".to_string()));
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_vmrss("Name:\tinit\nVmRSS:\t  1234 kB\n"), Some(1234));
    }
}
