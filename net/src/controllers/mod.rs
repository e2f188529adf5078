// SPDX-License-Identifier: Apache-2.0
//! Controllers of the network pipeline (docs/talos.md: Resources and IDs).
//!
//! Config controllers turn one source each (defaults, the kernel command line, the machine
//! configuration) into layered specs in `network-config`; merge controllers fold the layers
//! into one spec per natural ID in `network`. Each wraps a pure function that has its own tests.

mod address_spec;
mod apply;
mod cmdline_config;
mod default_config;
mod derived;
mod ids;
mod layer;
mod link_spec;
mod machine_config;
mod merge;
mod route_spec;
mod rule_spec;
mod status;

pub use address_spec::{address_to_kernel, plan_addresses, AddressPlan, AddressSpecController};
pub use apply::Desired;
pub use cmdline_config::CmdlineConfigController;
pub use default_config::{default_specs, DefaultConfigController, DefaultInputs};
pub use derived::{
    CopySpecsController, EtcFilesController, HostnameSpecController, NetworkStatusController,
    NodeAddressController, NETWORK_STATUS_ID,
};
pub use link_spec::{plan_links, LinkPlan, LinkSpecController};
pub use machine_config::MachineConfigController;
pub use merge::MergeController;
pub use route_spec::{plan_routes, route_to_kernel, RoutePlan, RouteSpecController};
pub use rule_spec::{plan_rules, rule_to_kernel, RuleSpecController, RULE_PROTOCOL};

use crate::host::SharedHost;
use crate::runtime::Controller;

pub use ids::{CMDLINE_ID, HOSTNAME_FILE, MACHINE_CONFIG_ID};

/// The config and merge controllers: everything between the inputs (cmdline, machine config,
/// link statuses) and the merged specs in `network`. Registration order is pipeline order,
/// which lets one pass settle most changes.
pub fn config_and_merge() -> Vec<Box<dyn Controller>> {
    let mut all: Vec<Box<dyn Controller>> = vec![
        Box::new(CmdlineConfigController::default()),
        Box::new(MachineConfigController::default()),
        Box::new(DefaultConfigController::default()),
    ];
    all.extend(merge::all());
    all
}

/// The whole network pipeline against a host: config and merge controllers, spec controllers
/// that apply merged specs, status controllers that mirror the kernel, and the derived
/// controllers (files, node addresses, readiness).
pub fn pipeline(host: &SharedHost) -> Vec<Box<dyn Controller>> {
    // The kernel's links first: the config layers resolve names and selectors through them,
    // so the first pass derives each layer once, with the links, rather than once without
    // them and again when they appear.
    let mut all: Vec<Box<dyn Controller>> = vec![Box::new(status::links(host.clone()))];
    all.extend(config_and_merge());
    all.extend([
        Box::new(status::addresses(host.clone())) as Box<dyn Controller>,
        Box::new(status::routes(host.clone())),
        Box::new(status::rules(host.clone())),
        Box::new(LinkSpecController::new(host.clone())),
        Box::new(AddressSpecController::new(host.clone())),
        Box::new(RouteSpecController::new(host.clone())),
        Box::new(RuleSpecController::new(host.clone())),
        // Derivations before their consumers: a restart over a configured kernel writes each
        // file once, already complete, instead of a partial version first.
        Box::new(NodeAddressController),
        Box::new(HostnameSpecController::new(host.clone())),
        Box::new(CopySpecsController),
        Box::new(EtcFilesController::new(host.clone())),
        Box::new(NetworkStatusController),
    ]);
    all
}

pub use status::MIRRORED;

#[cfg(test)]
mod pipeline_tests;
#[cfg(test)]
mod wireguard_netns_tests;
