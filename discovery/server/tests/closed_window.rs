// SPDX-License-Identifier: Apache-2.0
//! The real keelson-discovery-server binary under a closed-window attack over loopback:
//! clients on the Python `h2` package (tests/h2_flood.py; `scripts/setup` installs it) set
//! SETTINGS_INITIAL_WINDOW_SIZE to 0 and open many List or Watch streams. The server must keep
//! what it queues for each connection within its budget (`--max-queued`), reset the streams
//! past it and close connections that keep asking.
#![allow(clippy::disallowed_methods)] // Tests and examples drive keelson from outside: plain threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use common::Server;

/// The budget the test gives the server, per connection.
const BUDGET: usize = 2 << 20;
/// Allocator and bookkeeping noise on top of the budgets.
const SLACK: usize = 12 << 20;
/// Affiliates of 2 KiB: each List or Watch answer is about 420 KiB.
const AFFILIATES: usize = 200;

fn script() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/h2_flood.py")
}

fn populate(addr: &str, cluster: &str) {
    let out = Command::new("python3")
        .arg(script())
        .args(["populate", addr, cluster, &AFFILIATES.to_string(), "2048"])
        .output()
        .expect("run python3 (scripts/setup installs h2)");
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains("ok populate"), "populate failed:\n{text}");
}

/// The attack in place: the python process holds its connections until this is dropped.
struct Flood {
    child: Child,
    resets: usize,
    goaways: usize,
}

impl Flood {
    fn start(addr: &str, cluster: &str, method: &str, conns: usize, streams: usize) -> Flood {
        let mut child = Command::new("python3")
            .arg(script())
            .args(["flood", addr, cluster, method, &conns.to_string(), &streams.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("run python3 (scripts/setup installs h2)");
        let stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        assert!(line.starts_with("holding"), "flood client: {line:?}");
        let count = |key: &str| -> usize {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(key))
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("no {key} in {line:?}"))
        };
        let (resets, goaways) = (count("resets="), count("goaways="));
        Flood { child, resets, goaways }
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn attack(method: &str, conns: usize, streams: usize) {
    let budget = BUDGET.to_string();
    let s = Server::start(&["--rate", "100000", "--burst", "100000", "--max-queued", &budget]);
    populate(&s.addr, "big");
    let base = s.vm("VmRSS");
    let flood = Flood::start(&s.addr, "big", method, conns, streams);
    let peak = s.vm("VmHWM");
    let bound = base + BUDGET * conns + SLACK;
    eprintln!(
        "{method}: {conns} connections x {streams} streams: RSS {base} -> peak {peak} \
         (bound {bound}); {} resets, {} GOAWAYs",
        flood.resets, flood.goaways
    );
    assert!(
        peak <= bound,
        "{method} flood: peak RSS {peak} bytes, over {bound} (baseline {base} + {conns} x \
         {BUDGET} budget + {SLACK})"
    );
    assert!(flood.resets > 0, "{method} flood: no stream was reset past the budget");
    assert_eq!(flood.goaways, conns, "{method} flood: every connection is told to go away");
    drop(flood);
    // The server still serves.
    populate(&s.addr, "after");
}

#[test]
fn list_answers_behind_closed_windows_stay_within_the_connection_budget() {
    attack("List", 4, 60);
}

#[test]
fn watch_snapshots_behind_closed_windows_stay_within_the_connection_budget() {
    attack("Watch", 2, 60);
}
