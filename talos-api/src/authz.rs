// SPDX-License-Identifier: Apache-2.0
//! Who may call what, as Talos's machined authorizes its API (the rule table in
//! siderolabs/talos `internal/app/machined/pkg/system/services/machined.go`), and what a node
//! in maintenance mode (no `machine.ca`: clients come without a certificate) serves at all (the
//! methods Talos's maintenance service implements, `internal/app/maintenance/server.go`).
//!
//! Roles are a certificate's Organization: `os:admin`, `os:operator`, `os:reader`. A method
//! absent from the table needs `os:admin` (Talos's fallback), so a service added later is
//! closed until its line is written here.

/// A role a client certificate carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Admin,
    Operator,
    Reader,
}

impl Role {
    /// The Organization that grants it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Admin => "os:admin",
            Self::Operator => "os:operator",
            Self::Reader => "os:reader",
        }
    }

    fn bit(self) -> u8 {
        match self {
            Self::Admin => A,
            Self::Operator => O,
            Self::Reader => R,
        }
    }
}

const A: u8 = 1;
const O: u8 = 2;
const R: u8 = 4;
/// Read-only calls.
const READ: u8 = A | O | R;
/// Calls that act on the node without changing its config.
const OPERATE: u8 = A | O;

/// The roles of each method keelson serves or answers. Talos's table has more lines (etcd
/// snapshots and alarms, images, files); those methods fall back to admin-only like any other.
const RULES: &[(&str, u8)] = &[
    ("/machine.MachineService/ApplyConfiguration", A),
    ("/machine.MachineService/Bootstrap", A),
    ("/machine.MachineService/Dmesg", READ),
    ("/machine.MachineService/EtcdForfeitLeadership", A),
    ("/machine.MachineService/EtcdLeaveCluster", A),
    ("/machine.MachineService/EtcdMemberList", READ),
    ("/machine.MachineService/EtcdRemoveMember", A),
    ("/machine.MachineService/EtcdRemoveMemberByID", A),
    ("/machine.MachineService/EtcdStatus", READ),
    ("/machine.MachineService/Events", READ),
    ("/machine.MachineService/Hostname", READ),
    ("/machine.MachineService/Kubeconfig", A),
    ("/machine.MachineService/LoadAvg", READ),
    ("/machine.MachineService/Logs", READ),
    ("/machine.MachineService/Memory", READ),
    ("/machine.MachineService/Reboot", OPERATE),
    ("/machine.MachineService/Reset", A),
    ("/machine.MachineService/Restart", OPERATE),
    ("/machine.MachineService/ServiceList", READ),
    ("/machine.MachineService/ServiceRestart", OPERATE),
    ("/machine.MachineService/ServiceStart", OPERATE),
    ("/machine.MachineService/ServiceStop", OPERATE),
    ("/machine.MachineService/Shutdown", OPERATE),
    ("/machine.MachineService/Upgrade", A),
    ("/machine.MachineService/Version", READ),
    ("/cosi.resource.State/Create", A),
    ("/cosi.resource.State/Destroy", A),
    ("/cosi.resource.State/Get", READ),
    ("/cosi.resource.State/List", READ),
    ("/cosi.resource.State/Update", A),
    ("/cosi.resource.State/Watch", READ),
    ("/storage.StorageService/Disks", READ),
    ("/time.TimeService/Time", READ),
    ("/time.TimeService/TimeCheck", READ),
    // keelson's extension: the same roles as Talos's calls they stand beside.
    ("/keelson.v1.NodeService/ApplyConfiguration", A),
    ("/keelson.v1.NodeService/ConfirmConfiguration", A),
    ("/keelson.v1.NodeService/MachineStatus", READ),
    ("/keelson.v1.NodeService/StagedReboot", OPERATE),
];

/// May a client with `role` call `path`? Methods not in the table need `os:admin`.
pub fn allows(role: Role, path: &str) -> bool {
    let roles = RULES.iter().find(|(p, _)| *p == path).map_or(A, |(_, r)| *r);
    roles & role.bit() != 0
}

/// What a node in maintenance mode does with a call from a client without a certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Maintenance {
    /// Answered: what a node without a config needs (its version, its disks, its network
    /// resources, taking a config).
    Served,
    /// The maintenance service has the method but not for this client (`PermissionDenied`):
    /// COSI writes.
    Denied,
    /// The maintenance service has no such method (`Unimplemented`), as Talos answers.
    Absent,
}

/// Maintenance mode's answer to `path`. The COSI reads are served here; which resource
/// types they may show is the COSI service's own filter (Talos's access policy).
pub fn in_maintenance(path: &str) -> Maintenance {
    match path {
        "/machine.MachineService/Version"
        | "/machine.MachineService/ApplyConfiguration"
        | "/keelson.v1.NodeService/ApplyConfiguration"
        | "/storage.StorageService/Disks"
        | "/cosi.resource.State/Get"
        | "/cosi.resource.State/List"
        | "/cosi.resource.State/Watch" => Maintenance::Served,
        "/cosi.resource.State/Create"
        | "/cosi.resource.State/Update"
        | "/cosi.resource.State/Destroy" => Maintenance::Denied,
        _ => Maintenance::Absent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_read_operators_operate_admins_do_everything() {
        let m = |name: &str| format!("/machine.MachineService/{name}");
        for read in ["Version", "Dmesg", "Logs", "Events", "ServiceList", "Hostname", "Memory"] {
            assert!(allows(Role::Reader, &m(read)), "{read}");
            assert!(allows(Role::Operator, &m(read)), "{read}");
        }
        for operate in ["Reboot", "Shutdown", "ServiceRestart"] {
            assert!(!allows(Role::Reader, &m(operate)), "{operate}");
            assert!(allows(Role::Operator, &m(operate)), "{operate}");
            assert!(allows(Role::Admin, &m(operate)), "{operate}");
        }
        for read in ["EtcdMemberList", "EtcdStatus"] {
            assert!(allows(Role::Reader, &m(read)), "{read}");
        }
        for admin in [
            "ApplyConfiguration",
            "Bootstrap",
            "Kubeconfig",
            "Upgrade",
            "Reset",
            "EtcdLeaveCluster",
            "EtcdRemoveMember",
            "EtcdRemoveMemberByID",
            "EtcdForfeitLeadership",
        ] {
            assert!(!allows(Role::Operator, &m(admin)), "{admin}");
            assert!(allows(Role::Admin, &m(admin)), "{admin}");
        }
        assert!(allows(Role::Reader, "/storage.StorageService/Disks"));
        assert!(allows(Role::Reader, "/time.TimeService/Time"));
        assert!(allows(Role::Reader, "/cosi.resource.State/Watch"));
        assert!(!allows(Role::Operator, "/cosi.resource.State/Update"));
    }

    #[test]
    fn a_method_not_in_the_table_is_for_admins_only() {
        assert!(!allows(Role::Operator, "/machine.MachineService/EtcdSnapshot"));
        assert!(!allows(Role::Reader, "/x.Y/Z"));
        assert!(allows(Role::Admin, "/x.Y/Z"));
        // Paths are matched whole: no prefix or case games.
        assert!(!allows(Role::Reader, "/machine.MachineService/Version/"));
        assert!(!allows(Role::Reader, "/machine.machineservice/Version"));
    }

    #[test]
    fn maintenance_serves_what_a_node_without_a_config_needs() {
        assert_eq!(in_maintenance("/machine.MachineService/Version"), Maintenance::Served);
        assert_eq!(
            in_maintenance("/machine.MachineService/ApplyConfiguration"),
            Maintenance::Served
        );
        assert_eq!(in_maintenance("/storage.StorageService/Disks"), Maintenance::Served);
        assert_eq!(in_maintenance("/cosi.resource.State/List"), Maintenance::Served);
        assert_eq!(in_maintenance("/cosi.resource.State/Destroy"), Maintenance::Denied);
        for absent in ["Reboot", "Dmesg", "Logs", "ServiceList", "Events", "Kubeconfig"] {
            let path = format!("/machine.MachineService/{absent}");
            assert_eq!(in_maintenance(&path), Maintenance::Absent, "{absent}");
        }
        assert_eq!(in_maintenance("/time.TimeService/Time"), Maintenance::Absent);
    }

    #[test]
    fn keelson_extension_calls_take_the_roles_of_the_talos_calls_they_stand_beside() {
        use crate::keelson::path;
        for admin in [path::APPLY_CONFIGURATION, path::CONFIRM_CONFIGURATION] {
            assert!(!allows(Role::Operator, admin), "{admin}");
            assert!(allows(Role::Admin, admin), "{admin}");
        }
        assert!(allows(Role::Operator, path::STAGED_REBOOT));
        assert!(!allows(Role::Reader, path::STAGED_REBOOT));
        assert!(allows(Role::Reader, path::MACHINE_STATUS));
        // A node without a config takes one (a partial one too), and nothing else of these.
        assert_eq!(in_maintenance(path::APPLY_CONFIGURATION), Maintenance::Served);
        for absent in [path::CONFIRM_CONFIGURATION, path::STAGED_REBOOT, path::MACHINE_STATUS] {
            assert_eq!(in_maintenance(absent), Maintenance::Absent, "{absent}");
        }
    }
}
