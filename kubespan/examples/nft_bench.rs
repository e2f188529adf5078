// SPDX-License-Identifier: Apache-2.0
//! Benchmark driver for `scripts/bench-kubespan` (run it through the script, which gives it a
//! network namespace of its own): KubeSpan's nftables table programmed by keelson in-process
//! and by `nft -f`, and the cost of updating one peer's prefixes with 10 and 1,000 peers.
//!
//! Usage: `nft_bench [ROUNDS]` (default 7). Figures are medians; times in milliseconds.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fmt::Write as _;
use std::io::Write as _;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ipnet::{Ipv4Net, Ipv6Net};
use kubespan::nft::interval::{display, Width};
use kubespan::nft::script::nft_script;
use kubespan::nft::{Applied, Nft, NftPlan};

const TABLE: &str = "talos_kubespan";

fn main() {
    let rounds: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(7);
    let tables = Command::new("nft").args(["list", "tables"]).output().unwrap();
    if !tables.status.success() || !tables.stdout.is_empty() {
        panic!("nft_bench: run it in an empty network namespace (scripts/bench-kubespan does)");
    }

    // 1. 10,000 non-adjacent prefixes: 5,000 IPv4 /30 two addresses apart, 5,000 IPv6 /64.
    let v4: Vec<Ipv4Net> = (0..5000u32)
        .map(|i| Ipv4Net::new(Ipv4Addr::from(0x0a00_0000 + i * 8), 30).unwrap())
        .collect();
    let v6: Vec<Ipv6Net> = (0..5000u128)
        .map(|i| Ipv6Net::new(Ipv6Addr::from((0xfd00u128 << 112) | (i * 2) << 64), 64).unwrap())
        .collect();
    let plan = NftPlan { targets_v4: v4, targets_v6: v6, ..NftPlan::default() };
    let resolved = plan.resolve().unwrap();
    assert_eq!(resolved.targets.v4.len() + resolved.targets.v6.len(), 10_000);
    let script = nft_script(&resolved);

    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for _ in 0..rounds {
        let file = write_script(&script);
        let t = Instant::now();
        run_nft(&file);
        theirs.push(t.elapsed());
        run_nft(&write_script(&format!("delete table inet {TABLE}\n")));

        let t = Instant::now();
        let mut n = Nft::new().unwrap();
        let done = n.apply(&plan).unwrap();
        ours.push(t.elapsed());
        assert!(matches!(done, Applied::Full { .. }));
        n.remove().unwrap();
    }
    let (ours, theirs) = (median(ours), median(theirs));

    // 2. One peer's prefixes change, with 1,000 and with 10 peers applied.
    let mut rows = String::new();
    let mut delta_ms = Vec::new();
    for peers in [1000u32, 10] {
        let (ours, txn, theirs) = delta(peers, rounds.max(5) * 4);
        delta_ms.push((ours, txn));
        let _ = writeln!(
            rows,
            "| update one peer of {} ({} prefixes each) | {} (transaction {}) | {} | {:.3}× |",
            if peers == 1000 { "1,000".to_owned() } else { peers.to_string() },
            PREFIXES_PER_PEER,
            ms(ours),
            ms(txn),
            ms(theirs),
            ours.as_secs_f64() / theirs.as_secs_f64()
        );
    }

    println!("nft_bench: medians of {rounds} rounds (keelson: open socket + resolve + encode + one transaction, in-process; nft: `nft -f FILE`, process included)");
    println!();
    println!("| measurement | keelson | nft -f | keelson / nft |");
    println!("|---|---|---|---|");
    println!(
        "| program 10,000 prefixes (5,000 IPv4 + 5,000 IPv6), full table | {} | {} | {:.2}× |",
        ms(ours),
        ms(theirs),
        ours.as_secs_f64() / theirs.as_secs_f64()
    );
    print!("{rows}");
    println!();
    let over = |f: fn(&(Duration, Duration)) -> Duration| {
        f(&delta_ms[0]).as_secs_f64() / f(&delta_ms[1]).as_secs_f64()
    };
    println!(
        "one-peer update, 1,000 peers vs 10 peers: transaction {:.2}×, whole apply {:.2}×",
        over(|d| d.1),
        over(|d| d.0)
    );
    println!("(1.00× = independent of the untouched peers; the whole apply also re-normalises the full input plan in user space, O(n log n))");
    let ratio = ours.as_secs_f64() / theirs.as_secs_f64();
    println!("goal keelson/nft ≤ 1.2×: {}", if ratio <= 1.2 { "met" } else { "NOT met" });
}

const PREFIXES_PER_PEER: usize = 3;

/// Peer `k`'s prefixes: two IPv4 /24 and one IPv6 /64; `moved` shifts the second IPv4 one.
fn peer(k: u32, moved: bool) -> (Vec<Ipv4Net>, Vec<Ipv6Net>) {
    // Eight /24s per peer, two used, never adjacent to each other or to the next peer.
    let base = 0x0a00_0000 + k * 0x800;
    let second = if moved { base + 0x400 } else { base + 0x200 };
    (
        vec![
            Ipv4Net::new(Ipv4Addr::from(base), 24).unwrap(),
            Ipv4Net::new(Ipv4Addr::from(second), 24).unwrap(),
        ],
        vec![Ipv6Net::new(Ipv6Addr::from((0xfd01u128 << 112) | u128::from(k) << 66), 64).unwrap()],
    )
}

fn peers_plan(n: u32, moved: bool) -> NftPlan {
    let mut p = NftPlan::default();
    for k in 0..n {
        let (v4, v6) = peer(k, moved && k == n / 2);
        p.targets_v4.extend(v4);
        p.targets_v6.extend(v6);
    }
    p
}

/// Median time of moving one peer's prefix back and forth, by keelson and by `nft -f`.
fn delta(peers: u32, rounds: usize) -> (Duration, Duration, Duration) {
    let plans = [peers_plan(peers, false), peers_plan(peers, true)];
    let mut n = Nft::new().unwrap();
    assert!(matches!(n.apply(&plans[0]).unwrap(), Applied::Full { .. }));
    let mut ours = Vec::new();
    let mut txn = Vec::new();
    for i in 1..=rounds {
        let t = Instant::now();
        let done = n.apply(&plans[i % 2]).unwrap();
        ours.push(t.elapsed());
        txn.push(n.last_transaction().unwrap());
        assert_eq!(done, Applied::Delta { removed: 1, added: 1 });
    }
    // The same change through nft: delete the old element, add the new one, one transaction.
    let k = peers / 2;
    let (old, _) = peer(k, false);
    let (new, _) = peer(k, true);
    let show = |p: &Ipv4Net| {
        let r = kubespan::nft::interval::ranges_v4(&[*p]);
        display(&r[0], Width::V4)
    };
    let swap = |from: &Ipv4Net, to: &Ipv4Net| {
        format!(
            "delete element inet {TABLE} kubespan_targets_ipv4 {{ {} }}\nadd element inet {TABLE} kubespan_targets_ipv4 {{ {} }}\n",
            show(from),
            show(to)
        )
    };
    let scripts = [write_script(&swap(&old[1], &new[1])), write_script(&swap(&new[1], &old[1]))];
    if rounds % 2 == 1 {
        // keelson left the moved variant in place: move it back first.
        n.apply(&plans[0]).unwrap();
    }
    let mut theirs = Vec::new();
    for i in 0..rounds {
        let t = Instant::now();
        run_nft(&scripts[i % 2]);
        theirs.push(t.elapsed());
    }
    n.remove().unwrap();
    (median(ours), median(txn), median(theirs))
}

/// Writes an `nft -f` input file (outside the timed part); the script removes the directory.
fn write_script(script: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::var_os("NFT_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
    let path = dir.join(format!(
        "nft_bench.{}.{}.nft",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::File::create(&path).unwrap().write_all(script.as_bytes()).unwrap();
    path
}

/// `nft -f FILE`; the caller times it.
fn run_nft(path: &Path) {
    let out = Command::new("nft").arg("-f").arg(path).stderr(Stdio::piped()).output().unwrap();
    assert!(out.status.success(), "nft -f: {}", String::from_utf8_lossy(&out.stderr));
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}
