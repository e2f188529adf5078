// SPDX-License-Identifier: Apache-2.0
//! Real-kernel tests of the netlink layer. Each test runs in its own network namespace
//! (`testkit::in_netns`) and asserts by re-dumping through this layer.
#![allow(clippy::disallowed_methods)] // Tests wait for the kernel.

mod address;
mod full_kernel;
mod link;
mod route;
mod rule;
mod watch;
mod wireguard;

use std::time::{Duration, Instant};

use super::{KernelLink, LinkKind, NewLink, RouteSocket};
use testkit::in_netns;

/// Runs `f` with a fresh socket in a fresh namespace (or skips).
fn with_sock(f: impl FnOnce(&mut RouteSocket) + Send + 'static) {
    in_netns(move || {
        let mut sock = RouteSocket::new().expect("open socket");
        f(&mut sock);
    });
}

fn link(sock: &mut RouteSocket, name: &str) -> KernelLink {
    sock.get_link_by_name(name).expect("get link").unwrap_or_else(|| panic!("{name} missing"))
}

/// Creates a veth pair, sets both ends up and returns their indexes.
fn veth_up(sock: &mut RouteSocket, a: &str, b: &str) -> (u32, u32) {
    sock.link_create(&NewLink::new(a, LinkKind::Veth { peer: b.to_owned() })).expect("veth");
    let (ia, ib) = (link(sock, a).index, link(sock, b).index);
    sock.link_set_up(ia, true).expect("up a");
    sock.link_set_up(ib, true).expect("up b");
    (ia, ib)
}

/// Polls `check` until it returns true or 5 s pass.
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
