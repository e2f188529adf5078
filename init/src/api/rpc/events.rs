// SPDX-License-Identifier: Apache-2.0
//! The node's recent events as Talos's `Events` stream carries them: the machine's stage
//! (`MachineStatusEvent`), service state changes (`ServiceStateEvent`) and the node's hostname
//! and addresses (`AddressEvent`), made from store changes and kept in a bounded ring so a
//! client can ask for the last ones (`tail_events`, `tail_id`, `tail_seconds`).

use std::collections::VecDeque;
use std::time::Instant;

use net::resource::{
    AddressStatus, HostnameStatus, Kind, MachineStage, MachineStatus, Namespace, ServiceStatus,
    HOSTNAME_ID, MACHINE_STATUS_ID,
};
use runtime::{Change, Runtime};
use talos_api::google::Any;
use talos_api::machine as m;

/// Events kept.
pub const KEPT: usize = 256;

/// The kinds events are made from (the server journals them).
pub const KINDS: [Kind; 4] =
    [Kind::MachineStatus, Kind::ServiceStatus, Kind::AddressStatus, Kind::HostnameStatus];

/// One event.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Its sequence number, and its id as Talos's clients see it.
    pub seq: u64,
    pub id: String,
    pub at: Instant,
    pub data: Any,
}

/// The ring of recent events.
#[derive(Debug, Default)]
pub struct EventLog {
    entries: VecDeque<Entry>,
    next: u64,
}

impl EventLog {
    /// The sequence number the next event gets.
    pub fn next_seq(&self) -> u64 {
        self.next
    }

    /// The sequence number of the oldest event kept.
    pub fn oldest_seq(&self) -> u64 {
        self.entries.front().map_or(self.next, |e| e.seq)
    }

    /// Events from sequence number `from` on.
    pub fn since(&self, from: u64) -> impl Iterator<Item = &Entry> {
        self.entries.iter().filter(move |e| e.seq >= from)
    }

    /// The sequence number of the event with `id`.
    pub fn seq_of(&self, id: &str) -> Option<u64> {
        self.entries.iter().find(|e| e.id == id).map(|e| e.seq)
    }

    /// The sequence number of the first event at or after `at`.
    pub fn first_since(&self, at: Instant) -> u64 {
        self.entries.iter().find(|e| e.at >= at).map_or(self.next, |e| e.seq)
    }

    fn push(&mut self, name: &str, value: Vec<u8>, now: Instant) {
        if self.entries.len() == KEPT {
            self.entries.pop_front();
        }
        let seq = self.next;
        self.next += 1;
        let data = Any { type_url: format!("talos/runtime/{name}"), value };
        self.entries.push_back(Entry { seq, id: format!("keelson-{seq:016x}"), at: now, data });
    }

    /// Make the events of this round of store changes.
    pub fn record(&mut self, rt: &Runtime, changes: &[Change], now: Instant) {
        let store = rt.store();
        let mut addresses = false;
        for ch in changes {
            match ch.kind {
                Kind::MachineStatus if &*ch.id == MACHINE_STATUS_ID => {
                    if let Some(s) = store.get_spec::<MachineStatus>(Namespace::Runtime, &ch.id) {
                        let msg = machine_status_event(s);
                        self.push("machine.MachineStatusEvent", prost_bytes(&msg), now);
                    }
                }
                Kind::ServiceStatus => {
                    if let Some(s) = store.get_spec::<ServiceStatus>(ch.namespace, &ch.id) {
                        let msg = service_event(&ch.id, s);
                        self.push("machine.ServiceStateEvent", prost_bytes(&msg), now);
                    }
                }
                Kind::AddressStatus | Kind::HostnameStatus => addresses = true,
                _ => {}
            }
        }
        if addresses {
            let hostname = store
                .get_spec::<HostnameStatus>(Namespace::Network, HOSTNAME_ID)
                .map(|h| h.hostname.clone())
                .unwrap_or_default();
            let mut list: Vec<String> = store
                .list_specs::<AddressStatus>(Namespace::Network)
                .map(|(_, a)| a.address.to_string())
                .collect();
            net::sort::ascending(&mut list);
            list.dedup();
            list.truncate(64);
            let msg = m::AddressEvent { hostname, addresses: list };
            self.push("machine.AddressEvent", prost_bytes(&msg), now);
        }
    }
}

fn prost_bytes<M: talos_api::Message>(msg: &M) -> Vec<u8> {
    msg.encode_to_vec()
}

/// keelson's stage as Talos's enum.
pub fn stage(s: MachineStage) -> m::MachineStage {
    match s {
        MachineStage::Booting => m::MachineStage::Booting,
        MachineStage::Maintenance => m::MachineStage::Maintenance,
        MachineStage::Installing => m::MachineStage::Installing,
        MachineStage::Running => m::MachineStage::Running,
        MachineStage::Upgrading => m::MachineStage::Upgrading,
        MachineStage::Rebooting => m::MachineStage::Rebooting,
        MachineStage::ShuttingDown => m::MachineStage::ShuttingDown,
    }
}

/// The machine status as a `MachineStatusEvent`.
pub fn machine_status_event(s: &MachineStatus) -> m::MachineStatusEvent {
    m::MachineStatusEvent {
        stage: stage(s.stage) as i32,
        status: Some(m::MachineStatus {
            ready: s.status.ready,
            unmet_conditions: s
                .status
                .unmet_conditions
                .iter()
                .map(|c| m::UnmetCondition { name: c.name.clone(), reason: c.reason.clone() })
                .collect(),
        }),
    }
}

/// A supervised service's state as Talos names it: `running` is `Running`, `waiting` (for a
/// restart after a crash, or for its first start) `Waiting`, `stopping` `Stopping`; a stopped
/// service `Finished` when it last exited cleanly (or never ran), else `Failed`.
pub fn service_action(s: &ServiceStatus) -> m::ServiceAction {
    match s.state.as_str() {
        "running" => m::ServiceAction::Running,
        "waiting" if s.starts == 0 => m::ServiceAction::Preparing,
        "waiting" => m::ServiceAction::Waiting,
        "stopping" => m::ServiceAction::Stopping,
        _ if s.last_exit.is_empty() || s.last_exit.starts_with("exited with status 0") => {
            m::ServiceAction::Finished
        }
        _ => m::ServiceAction::Failed,
    }
}

/// A service's health as Talos reports it: unknown until a running process was probed.
pub fn service_health(s: &ServiceStatus) -> m::ServiceHealth {
    let running = s.state == "running";
    m::ServiceHealth {
        unknown: !running,
        healthy: running && s.healthy,
        last_message: s.health_reason.clone(),
        last_change: None,
    }
}

fn service_event(id: &str, s: &ServiceStatus) -> m::ServiceStateEvent {
    let action = service_action(s);
    let message = match action {
        m::ServiceAction::Failed | m::ServiceAction::Finished => s.last_exit.clone(),
        _ => format!("Service {}", action.state_name().to_lowercase()),
    };
    m::ServiceStateEvent {
        service: id.to_owned(),
        action: action as i32,
        message,
        health: Some(service_health(s)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(state: &str, starts: u32, last_exit: &str) -> ServiceStatus {
        ServiceStatus {
            state: state.into(),
            starts,
            last_exit: last_exit.into(),
            ..ServiceStatus::default()
        }
    }

    #[test]
    fn service_states_in_talos_words() {
        let name = |s: &ServiceStatus| service_action(s).state_name();
        assert_eq!(name(&svc("running", 1, "")), "Running");
        assert_eq!(name(&svc("waiting", 0, "")), "Preparing");
        assert_eq!(name(&svc("waiting", 2, "exited with status 1 after 1.0s")), "Waiting");
        assert_eq!(name(&svc("stopping", 1, "")), "Stopping");
        assert_eq!(name(&svc("stopped", 0, "")), "Finished");
        assert_eq!(name(&svc("stopped", 1, "exited with status 0 after 3.0s")), "Finished");
        assert_eq!(name(&svc("stopped", 1, "killed by SIGKILL after 3.0s")), "Failed");
        let h = service_health(&svc("stopped", 1, ""));
        assert!(h.unknown && !h.healthy);
    }

    #[test]
    fn the_ring_keeps_the_last_events() {
        let mut log = EventLog::default();
        let t = Instant::now();
        for i in 0..(KEPT + 10) {
            log.push("x", vec![i as u8], t);
        }
        assert_eq!(log.next_seq(), (KEPT + 10) as u64);
        assert_eq!(log.since(0).count(), KEPT);
        assert_eq!(log.since(0).next().map(|e| e.seq), Some(10));
        let id = format!("keelson-{:016x}", 20);
        assert_eq!(log.seq_of(&id), Some(20));
        assert_eq!(log.first_since(t), 10);
    }
}
