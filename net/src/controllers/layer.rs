// SPDX-License-Identifier: Apache-2.0
//! Writing one layer's specs into `network-config`, shared by every config controller.

use crate::resource::{layered_id, ConfigLayer, Kind, LayerSpecs, LinkStatus, LinkView, Namespace};
use crate::runtime::{ControllerError, Ctx, Input, Output};

/// Shared outputs of every config controller: every layered kind of the kind table.
pub(super) fn layered_outputs() -> Vec<Output> {
    Kind::LAYERED.iter().map(|k| Output::shared(Namespace::NetworkConfig, *k)).collect()
}

/// The link statuses input every config controller has (names resolve through it).
pub(super) const LINKS_INPUT: Input = Input::weak(Namespace::Network, Kind::LinkStatus);

/// A view of the node's links as the status controller reports them.
pub(super) fn link_view<'a>(ctx: &'a Ctx<'_>) -> LinkView<'a> {
    LinkView::new(ctx.store().list_specs::<LinkStatus>(Namespace::Network))
}

/// Put every spec of `specs` under `<layer>/<natural id>`, and remove what this controller
/// wrote before but no longer produces.
pub(super) fn write_layer(
    ctx: &mut Ctx<'_>,
    layer: ConfigLayer,
    specs: LayerSpecs,
) -> Result<(), ControllerError> {
    for (natural, _, spec) in specs.into_entries() {
        ctx.put_any(Namespace::NetworkConfig, &layered_id(layer, &natural), spec)?;
    }
    for kind in Kind::LAYERED {
        ctx.cleanup_untouched(Namespace::NetworkConfig, *kind)?;
    }
    Ok(())
}
