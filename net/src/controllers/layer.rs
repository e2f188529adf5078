// SPDX-License-Identifier: Apache-2.0
//! Writing one layer's specs into `network-config`, shared by every config controller, and
//! skipping the derivation while nothing it reads has changed.

use std::time::SystemTime;

use crate::resource::{
    layered_id_into, ConfigLayer, Kind, LayerSpecs, LinkDigest, LinkIdentities, LinkStatus,
    Namespace, Phase,
};
use crate::runtime::{ControllerError, Ctx, Input, Output};

/// Shared outputs of every config controller: every layered kind of the kind table.
pub(super) fn layered_outputs() -> Vec<Output> {
    Kind::LAYERED.iter().map(|k| Output::shared(Namespace::NetworkConfig, *k)).collect()
}

/// The link statuses input every config controller has (names resolve through it).
pub(super) const LINKS_INPUT: Input = Input::weak(Namespace::Network, Kind::LinkStatus);

/// The node's links as the layers see them: what names and selectors read, nothing that
/// changes as a link runs (`LinkIdentities`).
pub(super) fn link_identities(ctx: &Ctx<'_>) -> LinkIdentities {
    LinkIdentities::new(ctx.store().list_specs::<LinkStatus>(Namespace::Network))
}

/// Which stored resource a layer was derived from. Only its source writes it, and each write
/// that changes it bumps the version; a resource destroyed and created again starts over at
/// version 1, but with a new creation time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct SourceVersion {
    version: u64,
    created: SystemTime,
}

/// The version of the resource `kind`/`id` in `namespace`, when it exists.
pub(super) fn source_version(
    ctx: &Ctx<'_>,
    namespace: Namespace,
    kind: Kind,
    id: &str,
) -> Option<SourceVersion> {
    ctx.resource(namespace, kind, id)
        .map(|r| SourceVersion { version: r.metadata.version, created: r.metadata.created })
}

/// The key of a layer derived from one source resource and the links, with the links it
/// resolves against. Without the source there is nothing to resolve: the links are left out,
/// so that their changes derive nothing.
pub(super) fn sourced_key(
    ctx: &Ctx<'_>,
    namespace: Namespace,
    kind: Kind,
    id: &str,
) -> ((Option<SourceVersion>, LinkDigest), LinkIdentities) {
    let version = source_version(ctx, namespace, kind, id);
    let links = match version {
        Some(_) => link_identities(ctx),
        None => LinkIdentities::default(),
    };
    ((version, links.digest()), links)
}

/// What a layer was last written from. The layer is a pure function of its key (the
/// controller derives it from nothing else), and only its owner writes it, so while the key
/// compares equal the specs in the store are what a new derivation would put there: the
/// controller skips deriving and writing them. Links changing state (up, down, carrier,
/// flags) wake the controllers but leave the key equal.
#[derive(Debug)]
pub(super) struct LayerCache<K> {
    /// The key of the last write that went through in full, if the layer is still as it left
    /// it.
    last: Option<K>,
    /// Derivations written, for tests.
    #[cfg(test)]
    pub(super) writes: std::rc::Rc<std::cell::Cell<u64>>,
}

impl<K> Default for LayerCache<K> {
    fn default() -> Self {
        Self {
            last: None,
            #[cfg(test)]
            writes: Default::default(),
        }
    }
}

impl<K: PartialEq> LayerCache<K> {
    /// Is the layer already what deriving from `key` gives?
    pub(super) fn is_current(&self, key: &K) -> bool {
        self.last.as_ref() == Some(key)
    }

    /// Write `specs`, derived from `key`, as `layer`. The key is kept only when the write
    /// went through in full and left no spec of this controller tearing down: a failed
    /// write is retried with a new derivation, and a spec waiting for its finalizers is
    /// destroyed by the next pass's cleanup.
    pub(super) fn write(
        &mut self,
        ctx: &mut Ctx<'_>,
        layer: ConfigLayer,
        key: K,
        specs: LayerSpecs,
    ) -> Result<(), ControllerError> {
        self.last = None;
        #[cfg(test)]
        self.writes.set(self.writes.get() + 1);
        write_layer(ctx, layer, specs)?;
        if !tearing_down(ctx) {
            self.last = Some(key);
        }
        Ok(())
    }
}

/// Put every spec of `specs` under `<layer>/<natural id>`, and remove what this controller
/// wrote before but no longer produces.
fn write_layer(
    ctx: &mut Ctx<'_>,
    layer: ConfigLayer,
    specs: LayerSpecs,
) -> Result<(), ControllerError> {
    // One buffer for every ID: the store copies the ID only for a new resource.
    let mut id = String::new();
    for (natural, _, spec) in specs.into_entries() {
        layered_id_into(&mut id, layer, &natural);
        ctx.put_any(Namespace::NetworkConfig, &id, spec)?;
    }
    for kind in Kind::LAYERED {
        ctx.cleanup_untouched(Namespace::NetworkConfig, *kind)?;
    }
    Ok(())
}

/// Does this controller own a spec that is tearing down (held by a finalizer)?
fn tearing_down(ctx: &Ctx<'_>) -> bool {
    let name = ctx.name();
    Kind::LAYERED.iter().any(|kind| {
        ctx.store()
            .list(Namespace::NetworkConfig, *kind)
            .any(|r| r.metadata.phase == Phase::TearingDown && r.metadata.owner == name)
    })
}
