// SPDX-License-Identifier: Apache-2.0
//! Allocations per object of applying a large config: the YAML reading, then the controller
//! pipeline converging it against the fake host (merges, plans, the status mirror). Counted
//! with a global allocator of this test binary only. musl's allocator is slow, so the static
//! binary's apply time follows these counts (docs/memory.md); the bounds below catch a change
//! that brings per-object allocations back.
#![allow(clippy::unwrap_used, clippy::tests_outside_test_module)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use net::controllers::{pipeline, MACHINE_CONFIG_ID, MIRRORED};
use net::host::fake::FakeHost;
use net::host::SharedHost;
use net::resource::{LinkType, Namespace};
use net::runtime::Runtime;

struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed on to the system allocator unchanged; only a counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is System's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The benchmark's config (scripts/bench-apply) at a fifth of its size.
fn config(addresses: usize, routes: usize) -> String {
    let mut y = String::from(
        "version: v1alpha1\nmachine:\n  network:\n    interfaces:\n      - interface: eth0\n        addresses:\n          - 10.0.0.2/16\n",
    );
    for i in 0..addresses - 1 {
        y += &format!("          - 10.1.{}.{}/32\n", i / 250, i % 250 + 1);
    }
    y += "        routes:\n";
    for i in 0..routes {
        y += &format!(
            "          - {{network: 10.{}.{}.{}/32, gateway: 10.0.0.1}}\n",
            100 + i / 65536,
            (i / 256) % 256,
            i % 256
        );
    }
    y
}

fn settle(rt: &mut Runtime, fake: &Rc<RefCell<FakeHost>>) {
    let now = Instant::now();
    let mut seen = fake.borrow().log.len();
    while rt.has_work() {
        rt.run(now);
        let len = fake.borrow().log.len();
        if len != seen {
            seen = len;
            for kind in MIRRORED {
                rt.mark_dirty(kind);
            }
        }
    }
}

fn count<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = ALLOCS.load(Ordering::Relaxed);
    let out = f();
    (out, ALLOCS.load(Ordering::Relaxed) - before)
}

#[test]
fn applying_a_large_config_allocates_a_bounded_number_of_blocks_per_object() {
    const ADDRESSES: usize = 400;
    const ROUTES: usize = 2000;
    let objects = ADDRESSES + ROUTES;
    let yaml = config(ADDRESSES, ROUTES);

    let (cfg, parse) = count(|| net::config::parse(&yaml).unwrap());
    let fake = Rc::new(RefCell::new(FakeHost::new()));
    fake.borrow_mut().add_link("eth0", LinkType::ETHER, "");
    let host: SharedHost = fake.clone();
    let mut rt = Runtime::new();
    for c in pipeline(&host) {
        rt.register(c).unwrap();
    }
    let ((), apply) = count(|| {
        rt.put_input("test", Namespace::Config, MACHINE_CONFIG_ID, cfg).unwrap();
        settle(&mut rt, &fake);
    });
    let routes = fake.borrow().routes.iter().filter(|r| r.gateway.is_some()).count();
    assert_eq!(routes, ROUTES, "every route reached the fake kernel");
    let (per_parse, per_apply) = (parse as f64 / objects as f64, apply as f64 / objects as f64);
    println!("{objects} objects: parse {per_parse:.1} allocations each, apply {per_apply:.1}");
    assert!(per_parse <= PARSE_BOUND, "parse: {per_parse:.1} allocations per object");
    assert!(per_apply <= APPLY_BOUND, "apply: {per_apply:.1} allocations per object");
}

/// Measured 15.9 (33.6 before the v1alpha1 document was deserialized from the tree the
/// bounds scan builds instead of being parsed a second time; 36.9 before the route checks
/// stopped building YAML paths for valid routes), plus a margin; libyaml's own allocations,
/// one pass, are most of it.
const PARSE_BOUND: f64 = 17.5;
/// Measured 34.1 (43.1 before the store shared one ID allocation between its key, the
/// metadata and the change events), plus a margin.
const APPLY_BOUND: f64 = 39.0;
