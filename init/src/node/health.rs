// SPDX-License-Identifier: Apache-2.0
//! The kubelet's health check: `GET` its health endpoint and expect `200`. The connect and the
//! read may block for seconds, so they run on one helper thread; the loop hands it a probe
//! over a channel and is woken through a socket pair when the answer is in. The request and
//! the status-line parse are pure; the read is bounded in bytes and in time (each read and
//! the whole probe).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::time::Duration;

use evloop::Bell;
use net::config::HealthzTarget;

/// Connect, write and read each get this long.
const IO_TIMEOUT: Duration = Duration::from_secs(2);
/// The most of the answer read: the status line is all that counts.
const MAX_ANSWER: usize = 1024;
/// A whole probe gets this long, however slowly the answer trickles in.
const PROBE_DEADLINE: Duration = Duration::from_secs(5);

/// One probe of one kubelet process.
#[derive(Debug)]
struct Probe {
    generation: u32,
    target: HealthzTarget,
}

/// The answer to a probe: `Ok` on 200, otherwise why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The kubelet start the probe was for (answers for an older process are stale).
    pub generation: u32,
    /// Healthy, or why not.
    pub result: Result<(), String>,
}

/// The request line and headers for `target`.
fn request(target: &HealthzTarget) -> String {
    format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: keelson\r\nConnection: close\r\n\r\n",
        target.path, target.host
    )
}

/// The status code of an answer's first line, once it is complete (the fetch's parser:
/// `HTTP/1.0` or `HTTP/1.1` and three digits).
pub(crate) fn status_code(head: &[u8]) -> Option<u16> {
    crate::fetch::http::status_line(head)?.ok().map(|(code, _)| code)
}

/// One probe, blocking (on the helper thread).
fn check(target: &HealthzTarget) -> Result<(), String> {
    let started = std::time::Instant::now();
    let mut s = TcpStream::connect_timeout(&target.addr, IO_TIMEOUT)
        .map_err(|e| format!("{}: {e}", target.addr))?;
    let _ = s.set_read_timeout(Some(IO_TIMEOUT));
    let _ = s.set_write_timeout(Some(IO_TIMEOUT));
    s.write_all(request(target).as_bytes()).map_err(|e| format!("{}: {e}", target.addr))?;
    let mut head = Vec::with_capacity(128);
    let mut buf = [0u8; 256];
    while head.len() < MAX_ANSWER && !head.contains(&b'\n') {
        if started.elapsed() > PROBE_DEADLINE {
            return Err(format!("{}: no status line within {PROBE_DEADLINE:?}", target.addr));
        }
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("{}: {e}", target.addr)),
        }
    }
    match status_code(&head) {
        Some(200) => Ok(()),
        Some(code) => Err(format!("{} answered {code}", target.addr)),
        None => Err(format!("{}: not an HTTP answer", target.addr)),
    }
}

/// The helper thread, started with the first probe.
struct Worker {
    probes: Sender<Probe>,
    outcomes: Receiver<Outcome>,
    wake: Bell,
}

/// Probes sent to the helper thread, and their answers.
#[derive(Default)]
pub struct Prober {
    worker: Option<Worker>,
    /// A probe is out (one at a time).
    pub in_flight: bool,
}

impl Prober {
    /// Ask `target` on behalf of kubelet start `generation`. Err: the helper thread could not
    /// be started (retried at the next probe).
    pub fn send(&mut self, generation: u32, target: HealthzTarget) -> Result<(), String> {
        if self.worker.is_none() {
            self.worker = Some(spawn().map_err(|e| format!("cannot start the health check: {e}"))?);
        }
        let Some(w) = &self.worker else { return Err("no health check thread".into()) };
        if w.probes.send(Probe { generation, target }).is_err() {
            // The thread is gone (it never is, short of a panic): start another next time.
            self.worker = None;
            return Err("the health check thread ended".into());
        }
        self.in_flight = true;
        Ok(())
    }

    /// The socket that becomes readable when an answer is in (after the first probe).
    pub fn wake_fd(&self) -> Option<BorrowedFd<'_>> {
        self.worker.as_ref().map(|w| w.wake.as_fd())
    }

    /// The answers that are in.
    pub fn take(&mut self) -> Vec<Outcome> {
        let Some(w) = &mut self.worker else { return Vec::new() };
        w.wake.drain();
        let mut out = Vec::new();
        loop {
            match w.outcomes.try_recv() {
                Ok(o) => out.push(o),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    self.worker = None;
                    break;
                }
            }
        }
        if !out.is_empty() {
            self.in_flight = false;
        }
        out
    }
}

fn spawn() -> std::io::Result<Worker> {
    let wake = Bell::new()?;
    let ring = wake.ringer();
    let (probes, rx) = mpsc::channel::<Probe>();
    let (tx, outcomes) = mpsc::channel::<Outcome>();
    evloop::spawn_worker("healthz", move || {
        // Ends when the loop drops its sender.
        for p in rx {
            let result = check(&p.target);
            if tx.send(Outcome { generation: p.generation, result }).is_err() {
                return;
            }
            ring.ring();
        }
    })?;
    Ok(Worker { probes, outcomes, wake })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_and_status_line() {
        let t = HealthzTarget::parse("http://127.0.0.1:10248/healthz")
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(
            request(&t),
            "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:10248\r\nUser-Agent: keelson\r\nConnection: close\r\n\r\n"
        );
        assert_eq!(status_code(b"HTTP/1.1 200 OK\r\n"), Some(200));
        assert_eq!(status_code(b"HTTP/1.0 503 Service Unavailable\r\nx"), Some(503));
        assert_eq!(status_code(b"HTTP/1.1 200 OK"), None, "incomplete line");
        assert_eq!(status_code(b"SSH-2.0-OpenSSH\r\n"), None);
        assert_eq!(status_code(b"HTTP/1.1 2000 OK\r\n"), None);
        assert_eq!(status_code(b"\xff\xfe\n"), None);
    }

    #[test]
    fn the_status_is_the_fetch_parsers() {
        // One grammar for both clients: a line the fetch refuses is no status here either.
        for line in [
            &b"HTTP/1.1 200 OK\r\n"[..],
            b"HTTP/1.0 204\n",
            b"HTTP/1.1  200 OK\r\n",
            b"HTTP/1.2 200 OK\r\n",
            b"HTTP/1.1 099 Low\r\n",
            b"HTTP/1.1 +04 No\r\n",
        ] {
            let mut p = crate::fetch::http::ResponseParser::default();
            let fetch = p.feed(&[line, &b"\r\n"[..]].concat()).and_then(|_| p.finish());
            assert_eq!(status_code(line), fetch.ok().map(|r| r.status), "{line:?}");
        }
    }

    #[test]
    fn probes_a_real_listener() {
        let listener =
            std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| unreachable!("{e}"));
        let port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
        #[allow(clippy::disallowed_methods)] // A test's stand-in kubelet, not a PID-1 thread.
        let server = std::thread::spawn(move || {
            for (i, conn) in listener.incoming().take(2).enumerate() {
                let Ok(mut c) = conn else { continue };
                let mut buf = [0u8; 512];
                let _ = c.read(&mut buf);
                let answer: &[u8] =
                    if i == 0 { b"HTTP/1.1 200 OK\r\n\r\nok" } else { b"HTTP/1.1 500 No\r\n\r\n" };
                let _ = c.write_all(answer);
            }
        });
        let t = HealthzTarget::parse(&format!("http://127.0.0.1:{port}/healthz"))
            .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(check(&t), Ok(()));
        assert!(check(&t).is_err_and(|e| e.contains("answered 500")));
        let _ = server.join();
        assert!(check(&t).is_err(), "nothing listens any more");
    }
}
