// SPDX-License-Identifier: Apache-2.0
//! `MachineService.Bootstrap`'s checks, in Talos's order and with its gRPC codes and texts
//! (`internal/app/machined/internal/server/v1alpha1/v1alpha1_server.go`, `Bootstrap`).
//!
//! Talos first asks whether bootstrap is allowed at all (its CRI running, no install or
//! reboot pending); keelson runs no CRI and its reboot is one call, so that check has no
//! counterpart here.

use grpc::code;

/// Where `Bootstrap` looks and what it writes.
#[derive(Debug, Clone)]
pub struct Paths {
    /// etcd's data directory.
    pub data: std::path::PathBuf,
    /// The file that keeps the request (in the state directory), if there is one.
    pub mark: Option<std::path::PathBuf>,
    /// etcd's CA and certificates (`ca.crt`, `peer.crt`, `peer.key`): a graceful `Reset`
    /// asks the local etcd how many members it has.
    pub pki: std::path::PathBuf,
}

/// What the checks look at, gathered by the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts {
    /// `machine.type: controlplane`.
    pub control_plane: bool,
    /// `cluster.etcd.ca` with its key.
    pub etcd_ca: bool,
    /// The clock is trusted (synced, or time sync disabled).
    pub time_synced: bool,
    /// The etcd data directory is missing or empty.
    pub data_dir_empty: bool,
}

/// Why `Bootstrap` is refused: a gRPC code and Talos's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    pub code: u32,
    pub message: &'static str,
}

/// Talos's checks, first failure wins.
pub fn check(f: Facts) -> Result<(), Refusal> {
    let refuse = |code, message| Err(Refusal { code, message });
    if !f.control_plane {
        return refuse(
            code::FAILED_PRECONDITION,
            "bootstrap is only supported on control plane nodes",
        );
    }
    if !f.etcd_ca {
        return refuse(code::INVALID_ARGUMENT, "etcd is not configured, bootstrap is not possible");
    }
    if !f.time_synced {
        return refuse(code::FAILED_PRECONDITION, "time is not in sync yet");
    }
    if !f.data_dir_empty {
        return refuse(code::ALREADY_EXISTS, "etcd data directory is not empty");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn talos_s_order_and_codes() {
        let ok =
            Facts { control_plane: true, etcd_ca: true, time_synced: true, data_dir_empty: true };
        let code = |f| check(f).map_err(|r| r.code);
        let none = Facts {
            control_plane: false,
            etcd_ca: false,
            time_synced: false,
            data_dir_empty: false,
        };
        // Each row: the facts, and the code the first failing check gives.
        let table = [
            (none, Err(code::FAILED_PRECONDITION)),
            (Facts { control_plane: true, ..none }, Err(code::INVALID_ARGUMENT)),
            (Facts { control_plane: true, etcd_ca: true, ..none }, Err(code::FAILED_PRECONDITION)),
            (Facts { time_synced: true, ..ok }, Ok(())),
            (Facts { data_dir_empty: false, ..ok }, Err(code::ALREADY_EXISTS)),
            (
                Facts { time_synced: false, data_dir_empty: false, ..ok },
                Err(code::FAILED_PRECONDITION),
            ),
            (Facts { etcd_ca: false, data_dir_empty: false, ..ok }, Err(code::INVALID_ARGUMENT)),
            (Facts { control_plane: false, ..ok }, Err(code::FAILED_PRECONDITION)),
        ];
        for (i, (facts, want)) in table.into_iter().enumerate() {
            assert_eq!(code(facts), want, "row {i}: {facts:?}");
        }
        assert_eq!(
            check(Facts { data_dir_empty: false, ..ok }).err().map(|r| r.message),
            Some("etcd data directory is not empty")
        );
        assert_eq!(
            check(Facts { time_synced: false, ..ok }).err().map(|r| r.message),
            Some("time is not in sync yet")
        );
    }
}
