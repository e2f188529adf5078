// SPDX-License-Identifier: Apache-2.0
//! Mutation fuzzing of [`route_wire::decode`] on the shared mutator (`testkit::fuzzkit`,
//! docs/fuzzing.md); `scripts/fuzz route` runs it long.
//!
//! Seeds are `RTM_NEWROUTE` payloads that `netlink-packet-route` encodes from routes of every
//! shape keelson reads (IPv4 and IPv6, a table past 255 only in `RTA_TABLE`, metrics with an
//! MTU, a gateway of the other family through `RTA_VIA`, a default route), plus attributes
//! the reader skips. The oracle: no panic, and whenever the crate's own decoder reads a mutant,
//! this reader gives exactly the same route (or the same "not a route").

use netlink_packet_core::{Emitable, Parseable};
use netlink_packet_route::route::{RouteAttribute, RouteMessage};
use testkit::fuzzkit::{self, LenField, Mutator, Target, Verdict};

use super::route::{self, KernelRoute};
use super::route_wire;
use crate::resource::nethelpers::{Family, RouteFlags, RoutingTable};

/// The payload `netlink-packet-route` sends for `r`, with `extra` attributes appended.
pub(super) fn payload(r: &KernelRoute, extra: Vec<RouteAttribute>) -> Vec<u8> {
    let mut msg = route::encode(r, true);
    msg.attributes.extend(extra);
    let mut b = vec![0; msg.buffer_len()];
    msg.emit(&mut b);
    b
}

pub(super) fn routes() -> Vec<KernelRoute> {
    let mut v4 = KernelRoute::new(Family::Inet4, Some("10.1.0.0/16".parse().unwrap()));
    v4.gateway = Some("192.168.1.1".parse().unwrap());
    v4.src = Some("192.168.1.7".parse().unwrap());
    v4.oif = Some(4);
    v4.table = RoutingTable(1000);
    v4.priority = 1024;
    v4.mtu = 1400;
    v4.flags = RouteFlags::ONLINK;
    let mut v6 = KernelRoute::new(Family::Inet6, Some("2001:db8::/32".parse().unwrap()));
    v6.gateway = Some("fe80::1".parse().unwrap());
    v6.oif = Some(2);
    v6.priority = 1024;
    let mut via = KernelRoute::new(Family::Inet4, None);
    via.gateway = Some("fe80::2".parse().unwrap());
    via.oif = Some(3);
    vec![v4, v6, via]
}

fn seeds() -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = routes().iter().map(|r| payload(r, Vec::new())).collect();
    let skipped = vec![
        RouteAttribute::Mark(7),
        RouteAttribute::Uid(1000),
        RouteAttribute::Preference(netlink_packet_route::route::RoutePreference::High),
    ];
    out.push(payload(&routes()[1], skipped));
    out
}

/// The rtmsg is 12 bytes; then each attribute's `rta_len` (and those nested in metrics).
fn lengths(b: &[u8]) -> Vec<LenField> {
    let mut out = Vec::new();
    let mut at = 12;
    while let Some(len) = b.get(at..at + 4).map(|h| usize::from(u16::from_le_bytes([h[0], h[1]]))) {
        out.push(LenField::le(at, 2));
        if len < 4 {
            break;
        }
        at += len.next_multiple_of(4);
    }
    out
}

fn oracle(input: &[u8]) -> Result<Verdict, String> {
    let mine = route_wire::decode(input);
    if let Ok(m) = RouteMessage::parse(input) {
        let theirs = route::decode(m);
        if mine != Ok(theirs.clone()) {
            return Err(format!("read {mine:?}, the crate's decoder {theirs:?}"));
        }
    }
    Ok(match mine {
        Ok(Some(_)) => Verdict::Accepted,
        _ => Verdict::Refused,
    })
}

#[test]
fn fuzz_target_route() {
    // Attribute types read (and some skipped), families, an MTU metric's type.
    let dict: &[&[u8]] =
        &[&[1, 0], &[4, 0], &[5, 0], &[6, 0], &[7, 0], &[8, 0], &[15, 0], &[18, 0], &[2], &[10]];
    let stats = fuzzkit::run(
        Target {
            name: "route",
            crate_dir: env!("CARGO_MANIFEST_DIR"),
            seeds: seeds(),
            mutator: Mutator { dict, lengths: Some(lengths), max_len: 512 },
            default_iters: 100_000,
        },
        oracle,
    );
    assert!(stats.accepted > 0, "no mutant read: the seeds are not reaching the reader");
}
