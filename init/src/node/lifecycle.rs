// SPDX-License-Identifier: Apache-2.0
//! The machine's stage as a resource: gathers the facts ([`crate::lifecycle`] decides), puts
//! `MachineStatus` into the store when it changes, and logs one console line per stage
//! transition and per change of readiness.

use net::config::MachineConfig;
use net::controllers::{MACHINE_CONFIG_ID, NETWORK_STATUS_ID};
use net::resource::{
    MachineStatus, Namespace, NetworkStatus, TimeStatus, MACHINE_STATUS_ID, TIME_STATUS_ID,
};
use runtime::Runtime;

use super::kubelet::Kubelet;
use crate::lifecycle::{self, Facts, Going};
use crate::machine::SOURCE;

/// The last status published.
#[derive(Debug, Default)]
pub struct Lifecycle {
    last: Option<MachineStatus>,
}

/// Why the network is not ready, or `None`.
fn network(rt: &Runtime) -> Option<String> {
    let Some(s) = rt.store().get_spec::<NetworkStatus>(Namespace::Network, NETWORK_STATUS_ID)
    else {
        return Some("no network status yet".into());
    };
    let mut missing = Vec::new();
    for (ok, what) in [
        (s.address_ready, "address"),
        (s.connectivity_ready, "connectivity"),
        (s.etc_files_ready, "/etc files"),
    ] {
        if !ok {
            missing.push(what);
        }
    }
    if missing.is_empty() {
        return None;
    }
    let mut why = format!("waiting for {}", missing.join(", "));
    if !s.waiting.is_empty() {
        why.push_str(&format!(" ({})", s.waiting.join("; ")));
    }
    Some(why)
}

/// Why the clock is not trusted, or `None`.
fn time(rt: &Runtime) -> Option<String> {
    match rt.store().get_spec::<TimeStatus>(Namespace::Runtime, TIME_STATUS_ID) {
        Some(t) if t.synced || t.sync_disabled => None,
        Some(t) if t.reason.is_empty() => Some("not synced".into()),
        Some(t) => Some(format!("not synced: {}", t.reason)),
        None => Some("no time status yet".into()),
    }
}

impl Lifecycle {
    /// Decide the stage from the store, the kubelet and whether the node is going down;
    /// publish and log what changed.
    pub fn update(&mut self, rt: &mut Runtime, kubelet: &Kubelet, going: Option<Going>) {
        let config = rt.store().get_spec::<MachineConfig>(Namespace::Config, MACHINE_CONFIG_ID);
        let facts = Facts {
            going,
            installing: crate::machine::installing(),
            configured: config.is_some(),
            dropped: config.map(|c| c.dropped.clone()).unwrap_or_default(),
            network: network(rt),
            time: time(rt),
            kubelet: kubelet.facts(),
        };
        let prev = self.last.as_ref().map(|s| s.stage);
        let mut next = lifecycle::status(prev.unwrap_or_default(), &facts);
        next.boot = crate::api::rpc::dispatch::boot_source(rt);
        if self.last.as_ref() == Some(&next) {
            return;
        }
        let was_ready = self.last.as_ref().is_some_and(|s| s.status.ready);
        if prev != Some(next.stage) {
            log::info!(target: "pid1", "{}", lifecycle::transition_line(prev, &next));
        } else if was_ready != next.status.ready {
            log::info!(target: "pid1", "{}", lifecycle::readiness_line(&next));
        }
        if let Err(e) = rt.put_input(SOURCE, Namespace::Runtime, MACHINE_STATUS_ID, next.clone()) {
            log::warn!(target: "pid1", "{e}");
        }
        self.last = Some(next);
    }
}
