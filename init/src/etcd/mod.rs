// SPDX-License-Identifier: Apache-2.0
//! etcd on a control-plane node, the parts without I/O: its command line ([`args`]) and the
//! order of `Bootstrap`'s checks ([`bootstrap`]). The supervision lives in `node::etcd`.

pub mod args;
pub mod bootstrap;
pub mod join;
pub mod leave;

/// Where etcd keeps its data, as in Talos (`constants.EtcdDataPath`).
pub const DATA_DIR: &str = "/var/lib/etcd";
/// Client port.
pub const CLIENT_PORT: u16 = 2379;
/// Peer port.
pub const PEER_PORT: u16 = 2380;
/// Plain-HTTP metrics and `/health` on loopback only: what the health probe reads.
pub const METRICS_PORT: u16 = 2381;
/// The file in the state directory that says a bootstrap was asked for (written before
/// etcd starts, so a reboot before etcd's first write does not forget it).
pub const BOOTSTRAP_MARK: &str = "etcd-bootstrap-requested";

/// Is `dir` missing or empty (Talos's test for "not bootstrapped here")?
pub fn data_dir_empty(dir: &std::path::Path) -> bool {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => entries.next().is_none(),
        Err(_) => true,
    }
}
