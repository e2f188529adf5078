// SPDX-License-Identifier: Apache-2.0
//! Layer `cmdline`: specs from the parsed kernel command line (docs/talos.md: Kernel command line).

use super::ids::CMDLINE_ID;
use super::layer::{layered_outputs, link_view, write_layer, LINKS_INPUT};
use crate::cmdline::{self, CmdlineNetwork};
use crate::resource::{ConfigLayer, Kind, LayerSpecs, Namespace};
use crate::runtime::{Controller, ControllerError, Ctx, Input, Next, Output};

/// Writes `cmdline/…` specs from the `Cmdline` resource.
#[derive(Debug, Default)]
pub struct CmdlineConfigController;

impl Controller for CmdlineConfigController {
    fn name(&self) -> &'static str {
        "network.CmdlineConfigController"
    }

    fn inputs(&self) -> Vec<Input> {
        vec![Input::strong(Namespace::Runtime, Kind::Cmdline), LINKS_INPUT]
    }

    fn outputs(&self) -> Vec<Output> {
        layered_outputs()
    }

    fn reconcile(&mut self, ctx: &mut Ctx<'_>) -> Result<Next, ControllerError> {
        let specs = match ctx.get::<CmdlineNetwork>(Namespace::Runtime, CMDLINE_ID) {
            Some(parsed) => cmdline::to_specs(parsed, &link_view(ctx)),
            None => LayerSpecs::default(),
        };
        write_layer(ctx, ConfigLayer::Cmdline, specs)?;
        Ok(Next::Idle)
    }
}
