// SPDX-License-Identifier: Apache-2.0
//! Resource kinds as the runtime sees them: [`Kind`], [`AnySpec`], [`SpecType`] and the
//! resource object ([`Resource`], [`Metadata`]), all generated from the kind table
//! (`crate::kind_table`), which lists every kind once.
//!
//! From each row come its [`Kind`] variant, its short and full type names (`AddressSpec`,
//! `AddressSpecs.net.keelson.dev`), the names the CLI accepts ([`Kind::extra_aliases`]), its
//! default namespace, and the [`SpecType`] impl that lets controllers read and write it with its
//! own Rust type. A `layered(...)` row also gives a [`LayerSpecs`](crate::resource::LayerSpecs)
//! field, a place in [`Kind::LAYERED`] (what config controllers write and `apply-config`
//! diffs) and a merge controller ([`visit_layered`]).
//!
//! This module sits above `resource`, `cmdline`, `config` and `merge` (it names their types);
//! none of them imports it.
//!
//! # Adding a kind
//!
//! 1. Write `resource/<kind>.rs`: the spec (and status) type, its ID function or constant.
//! 2. Declare and `pub use` it in `resource/mod.rs`.
//! 3. Add one row to the table in `kind_table.rs`: `Name(type) = "Name", "Names.net.keelson.dev"`.
//! 4. If config sources write it: add `layered(field, merge fn, "network.NameMergeController")`,
//!    `impl LayeredSpec` beside the type, and the merge fn in `merge/`.
//! 5. Add `namespace(Ns)` if it does not live in `network`, `aliases(...)` for irregular names.

mod kind;
mod object;

pub use kind::{visit_layered, AnySpec, Kind, LayeredKindVisitor, MergeFn, SpecType};
pub use object::{Finalizers, Metadata, Resource};
