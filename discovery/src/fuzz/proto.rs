// SPDX-License-Identifier: Apache-2.0
//! The protobuf messages (`proto`): every request and response the server and client read off
//! the network, the encrypted payload inside an affiliate, and the server's snapshot file.
//!
//! Oracles: no panic; a decoded message, encoded, decodes to itself and encodes to the same
//! bytes again (the encoding is canonical); the encoding is at most twice the input plus a
//! little (int32 negatives widen to ten bytes, as Go writes them): decoding allocates in
//! proportion to its input.

use std::fmt::Debug;

use testkit::fuzzkit::{run, LenField, Mutator, Target, Verdict};

use crate::proto::payload::{decode_endpoint, encode_endpoint};
use crate::proto::storage::{AffiliateSnapshot, ClusterSnapshot, EndpointSnapshot, StateSnapshot};
use crate::proto::{
    Affiliate, AffiliateDeleteRequest, AffiliateUpdateRequest, ControlPlane, Duration, Empty,
    HelloRequest, HelloResponse, KubeSpan, ListRequest, Message, RedirectMessage, ServerAffiliate,
    WatchRequest, WatchResponse,
};

fn round_trip<M: Message + PartialEq + Debug>(b: &[u8]) -> Result<bool, String> {
    let Ok(m) = M::decode(b) else { return Ok(false) };
    let e = m.encode();
    if e.len() > 2 * b.len() + 16 {
        return Err(format!("{} input bytes encode to {}", b.len(), e.len()));
    }
    match M::decode(&e) {
        Ok(again) if again == m => {}
        other => return Err(format!("{m:?} re-decoded as {other:?}")),
    }
    if m.encode() != e {
        return Err(format!("{m:?} encodes differently twice"));
    }
    Ok(true)
}

/// The length of every length-delimited field, walked one level (and into sub-messages when
/// they parse as fields).
fn field_lengths(b: &[u8]) -> Vec<LenField> {
    fn varint(b: &[u8], at: &mut usize) -> Option<u64> {
        let mut v = 0u64;
        for i in 0..10 {
            let byte = *b.get(*at)?;
            *at += 1;
            v |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
    fn walk(b: &[u8], start: usize, end: usize, depth: u8, out: &mut Vec<LenField>) {
        let mut at = start;
        while at < end {
            let Some(key) = varint(b, &mut at) else { return };
            match key & 7 {
                0 => {
                    if varint(b, &mut at).is_none() {
                        return;
                    }
                }
                1 => at += 8,
                5 => at += 4,
                2 => {
                    // Single-byte lengths only: what the mutator can rewrite in place.
                    if b.get(at).is_some_and(|l| l & 0x80 == 0) {
                        out.push(LenField::be(at, 1));
                    }
                    let Some(len) = varint(b, &mut at) else { return };
                    let body_end = at.saturating_add(len as usize);
                    if depth < 4 && body_end <= end {
                        walk(b, at, body_end, depth + 1, out);
                    }
                    at = body_end;
                }
                _ => return,
            }
        }
    }
    let mut out = Vec::new();
    walk(b, 0, b.len(), 0, &mut out);
    out
}

fn seeds() -> Vec<Vec<u8>> {
    let d = Duration { seconds: 300, nanos: -5 };
    let ks = KubeSpan {
        public_key: "mB9hOLr7LB9fbJHPYBNZzvfQ5ZEj7xC+iy2d2zSm7Ec=".into(),
        address: Some("fd00::1".parse().unwrap()),
        additional_addresses: vec!["10.0.0.0/8".parse().unwrap(), "fd01::/64".parse().unwrap()],
        exclude_advertised_addresses: vec!["192.168.0.0/16".parse().unwrap()],
    };
    let affiliate = Affiliate {
        node_id: "node-1".into(),
        addresses: vec!["10.0.0.5".parse().unwrap(), "fd00::5".parse().unwrap()],
        hostname: "node-1.example".into(),
        nodename: "node-1".into(),
        machine_type: "worker".into(),
        operating_system: "keelson".into(),
        kubespan: Some(ks),
        control_plane: Some(ControlPlane { api_server_port: 6443 }),
    };
    let server_affiliate = ServerAffiliate {
        id: "aff".into(),
        data: affiliate.encode(),
        endpoints: vec![encode_endpoint(&"10.0.0.5:51820".parse().unwrap())],
    };
    let snapshot = StateSnapshot {
        clusters: vec![ClusterSnapshot {
            id: "cluster".into(),
            affiliates: vec![AffiliateSnapshot {
                id: "aff".into(),
                expiration: Some(d),
                data: vec![1, 2, 3],
                endpoints: vec![EndpointSnapshot {
                    expiration: None,
                    data: vec![4; 9],
                    ttl: Some(d),
                }],
                ttl: Some(Duration { seconds: -1, nanos: 999_999_999 }),
            }],
        }],
    };
    vec![
        affiliate.encode(),
        server_affiliate.encode(),
        WatchResponse {
            affiliates: vec![server_affiliate.clone(), ServerAffiliate::default()],
            deleted: true,
        }
        .encode(),
        AffiliateUpdateRequest {
            cluster_id: "c".into(),
            affiliate_id: "a".into(),
            affiliate_data: Some(vec![]),
            affiliate_endpoints: vec![vec![9; 20]],
            ttl: Some(d),
        }
        .encode(),
        HelloResponse {
            redirect: Some(RedirectMessage { endpoint: "x:443".into() }),
            client_ip: vec![10, 0, 0, 1],
        }
        .encode(),
        HelloRequest { cluster_id: "c".into(), client_version: "v1".into() }.encode(),
        snapshot.encode(),
        // Unknown fields of every wire type, a group among them.
        testkit::fuzzkit::unhex("0801110102030405060708150102030463080118026499010001"),
    ]
}

#[test]
fn fuzz_target_proto() {
    let target = Target {
        name: "proto",
        crate_dir: super::CRATE_DIR,
        seeds: seeds(),
        mutator: Mutator {
            dict: &[
                b"\x0a",
                b"\x12",
                b"\x1a",
                b"\x22",
                b"\x08",
                b"\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01",
                b"\x0b",
                b"\x0c",
                b"\xff\xff\xff\xff\x0f",
            ],
            lengths: Some(field_lengths),
            max_len: 8192,
        },
        default_iters: 40_000,
    };
    run(target, |b| {
        let mut any = false;
        for r in [
            round_trip::<Affiliate>(b),
            round_trip::<KubeSpan>(b),
            round_trip::<ControlPlane>(b),
            round_trip::<ServerAffiliate>(b),
            round_trip::<WatchResponse>(b),
            round_trip::<AffiliateUpdateRequest>(b),
            round_trip::<AffiliateDeleteRequest>(b),
            round_trip::<HelloRequest>(b),
            round_trip::<HelloResponse>(b),
            round_trip::<RedirectMessage>(b),
            round_trip::<ListRequest>(b),
            round_trip::<WatchRequest>(b),
            round_trip::<Empty>(b),
            round_trip::<Duration>(b),
            round_trip::<StateSnapshot>(b),
            round_trip::<ClusterSnapshot>(b),
            round_trip::<AffiliateSnapshot>(b),
            round_trip::<EndpointSnapshot>(b),
        ] {
            any |= r?;
        }
        if let Ok(Some(ep)) = decode_endpoint(b) {
            if decode_endpoint(&encode_endpoint(&ep)) != Ok(Some(ep)) {
                return Err(format!("endpoint {ep} does not round-trip"));
            }
        }
        Ok(if any { Verdict::Accepted } else { Verdict::Refused })
    });
}
