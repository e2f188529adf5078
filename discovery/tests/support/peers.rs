// SPDX-License-Identifier: Apache-2.0
//! What the client interop suites share (`discovery/tests/grpc_interop.rs` against Python
//! grpcio, `discovery/server/tests/client_interop.rs` against keelson-discovery-server): the
//! data a test node publishes, and waiting for the set of members a test expects.

use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use discovery::{Affiliate, Discovered, Event, KubeSpan, LocalData};

/// What node `id` publishes: endpoint `ep`, and `others` on other nodes' behalf.
pub fn data(id: &str, ep: &str, others: &[(&str, &str)]) -> LocalData {
    LocalData {
        affiliate: Affiliate {
            node_id: id.into(),
            addresses: vec!["10.5.0.1".parse().unwrap()],
            hostname: format!("{id}.example"),
            nodename: id.into(),
            machine_type: "worker".into(),
            operating_system: "keelson (v0.1.0)".into(),
            kubespan: Some(KubeSpan {
                public_key: format!("{id}-key"),
                address: Some("fd50::1".parse().unwrap()),
                additional_addresses: vec!["10.244.0.0/24".parse().unwrap()],
                exclude_advertised_addresses: vec![],
            }),
            control_plane: None,
        },
        endpoints: vec![ep.parse().unwrap()],
        others: others.iter().map(|(o, e)| (o.to_string(), vec![e.parse().unwrap()])).collect(),
    }
}

/// Wait for a Members event satisfying `ok`; every event seen is returned for the report.
pub fn wait_members(rx: &mpsc::Receiver<Event>, ok: impl Fn(&[Discovered]) -> bool) -> Vec<Event> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(e) => {
                let done = matches!(&e, Event::Members(m) if ok(m));
                seen.push(e);
                if done {
                    return seen;
                }
            }
            Err(_) => break,
        }
    }
    panic!("members never matched; events: {seen:#?}");
}

/// Does `m` hold node `id` as [`data`] made it, with at least the endpoints `eps`?
pub fn has(m: &[Discovered], id: &str, eps: &[&str]) -> bool {
    m.iter().any(|d| {
        let want: Vec<SocketAddr> = eps.iter().map(|e| e.parse().unwrap()).collect();
        d.id == id
            && d.affiliate.hostname == format!("{id}.example")
            && d.affiliate.kubespan.as_ref().is_some_and(|k| k.public_key == format!("{id}-key"))
            && want.iter().all(|w| d.endpoints.contains(w))
    })
}
