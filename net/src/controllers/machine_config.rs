// SPDX-License-Identifier: Apache-2.0
//! Layer `configuration`: specs from the machine configuration (docs/talos.md: Merge).

use super::ids::MACHINE_CONFIG_ID;
use super::layer::{layered_outputs, link_view, write_layer, LINKS_INPUT};
use crate::config::{self, MachineConfig};
use crate::resource::{ConfigLayer, Kind, LayerSpecs, Namespace};
use crate::runtime::{Controller, ControllerError, Ctx, Input, Next, Output};

/// Writes `configuration/…` specs from the `MachineConfig` resource.
#[derive(Debug, Default)]
pub struct MachineConfigController;

impl Controller for MachineConfigController {
    fn name(&self) -> &'static str {
        "network.MachineConfigController"
    }

    fn inputs(&self) -> Vec<Input> {
        vec![Input::strong(Namespace::Config, Kind::MachineConfig), LINKS_INPUT]
    }

    fn outputs(&self) -> Vec<Output> {
        layered_outputs()
    }

    fn reconcile(&mut self, ctx: &mut Ctx<'_>) -> Result<Next, ControllerError> {
        let specs = match ctx.get::<MachineConfig>(Namespace::Config, MACHINE_CONFIG_ID) {
            Some(cfg) => config::to_specs(cfg, &link_view(ctx)),
            None => LayerSpecs::default(),
        };
        write_layer(ctx, ConfigLayer::Configuration, specs)?;
        Ok(Next::Idle)
    }
}
