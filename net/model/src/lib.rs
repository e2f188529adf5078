// SPDX-License-Identifier: Apache-2.0
//! keelson's model: what the node is asked to be, as plain data. Resource kinds and their
//! natural IDs, the machine configuration and kernel command line parsers, and the pure merge
//! functions that fold configuration layers into one spec per ID.
//!
//! Nothing here touches the kernel: the crate depends on no netlink, `nix` or `libc` crate
//! (CI checks its `cargo tree`), so it builds and tests anywhere.
//!
//! Modules, bottom up (each imports only modules listed before it): `names` (from `base`, which
//! without features is pure std); `sort` (the
//! shared stable sort); `resource` (the
//! kinds as plain data); `cmdline` and `config` (parsers that emit resource specs); `merge`
//! (the folds); `kinds` ([`kinds::Kind`], `AnySpec`, the resource object), generated from the
//! kind table (`kind_table`, a macro that imports nothing) and naming the types of all of them.
#![warn(missing_docs)]

pub mod cmdline;
pub mod config;
pub mod ifnames;
mod kind_table;
pub mod kinds;
pub mod merge;
pub use base::names;
pub mod resource;
pub mod sort;
pub mod wgkey;
