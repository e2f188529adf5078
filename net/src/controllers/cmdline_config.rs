// SPDX-License-Identifier: Apache-2.0
//! Layer `cmdline`: specs from the parsed kernel command line (docs/talos.md: Kernel command line).

use super::ids::CMDLINE_ID;
use super::layer::{layered_outputs, sourced_key, LayerCache, SourceVersion, LINKS_INPUT};
use crate::cmdline::{self, CmdlineNetwork};
use crate::resource::{ConfigLayer, Kind, LayerSpecs, LinkDigest, Namespace};
use crate::runtime::{Controller, ControllerError, Ctx, Input, Next, Output};

/// Writes `cmdline/…` specs from the `Cmdline` resource.
#[derive(Debug, Default)]
pub struct CmdlineConfigController {
    /// The command line's version and the links' identities the layer was written from.
    cache: LayerCache<(Option<SourceVersion>, LinkDigest)>,
}

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
        let (key, links) = sourced_key(ctx, Namespace::Runtime, Kind::Cmdline, CMDLINE_ID);
        if self.cache.is_current(&key) {
            return Ok(Next::Idle);
        }
        let specs = match ctx.get::<CmdlineNetwork>(Namespace::Runtime, CMDLINE_ID) {
            Some(parsed) => cmdline::to_specs(parsed, &links.view()),
            None => LayerSpecs::default(),
        };
        self.cache.write(ctx, ConfigLayer::Cmdline, key, specs)?;
        Ok(Next::Idle)
    }
}
