// SPDX-License-Identifier: Apache-2.0
//! Where the machine is in its life: [`MachineStatus`], a singleton ([`MACHINE_STATUS_ID`]) in
//! `runtime`, in Talos's shape (`talosctl get machinestatus`: `stage`, `status.ready`,
//! `status.unmetConditions`).

use serde::{Deserialize, Serialize};

/// The ID of the machine status (Talos's `machine`).
pub const MACHINE_STATUS_ID: &str = "machine";

/// The stage of the machine's life (Talos's `MachineStage`, in keelson's subset).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum MachineStage {
    /// Started, with a config, the kubelet not healthy yet.
    #[default]
    Booting,
    /// No machine config: waiting for one (the API serves maintenance mode).
    Maintenance,
    /// A config applied in maintenance mode is preparing the install disk.
    Installing,
    /// The kubelet is up and its health endpoint answers (or no kubelet is configured).
    Running,
    /// The kubelet's command changed: the old one stopped, the new one not healthy yet.
    Upgrading,
    /// Stopping services before a reboot.
    Rebooting,
    /// Stopping services before a power off (or, for `keelson run`, an exit).
    ShuttingDown,
}

impl MachineStage {
    /// The name shown on the console and in the resource.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Booting => "booting",
            Self::Maintenance => "maintenance",
            Self::Installing => "installing",
            Self::Running => "running",
            Self::Upgrading => "upgrading",
            Self::Rebooting => "rebooting",
            Self::ShuttingDown => "shuttingDown",
        }
    }
}

impl std::fmt::Display for MachineStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A condition that keeps the machine from being ready.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnmetCondition {
    /// `network`, `time` or `kubelet`.
    pub name: String,
    /// Why, in one line.
    pub reason: String,
}

/// Readiness at the current stage.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineStatusStatus {
    /// Running, and no condition unmet.
    pub ready: bool,
    /// What is missing, in a fixed order (network, time, kubelet).
    #[serde(default)]
    pub unmet_conditions: Vec<UnmetCondition>,
}

/// The machine's stage and readiness.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineStatus {
    /// Where the machine is in its life.
    pub stage: MachineStage,
    /// Whether it is ready, and what is missing.
    pub status: MachineStatusStatus,
    /// How the machine was booted, when a network boot said so (keelson's addition: Talos
    /// has no such field; its clients ignore it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot: Option<BootSource>,
}

/// What a network boot put on the kernel command line: the NIC the firmware booted from
/// (`BOOTIF=`) and the image it was served as (`keelson.image=`).
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BootSource {
    /// `aa:bb:cc:dd:ee:ff`, or empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mac: String,
    /// The image name, or empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image: String,
}
