// SPDX-License-Identifier: Apache-2.0
//! KubeSpan's nftables table, programmed in-process over netlink (no `nft` binary).
//!
//! - [`plan`]: [`NftPlan`], the desired state as plain data, validated and normalised.
//! - [`interval`]: prefix lists folded into the ranges an interval set accepts.
//! - [`compile`]: the nf_tables transactions (full replace, set delta) as bytes.
//! - [`wire`]: the netlink/nfnetlink encoding and constants.
//! - [`apply`]: [`Nft`], which sends them through net's shared netlink socket and checks each ack.
//!
//! Invariants: only the table named in the plan is ever changed or deleted; every change is
//! one atomic batch; a plan is either fully in the kernel or not at all.

pub mod apply;
pub mod compile;
pub mod interval;
pub mod plan;
pub mod script;
pub mod wire;

pub use apply::{Applied, Nft, NftError};
pub use plan::{NftPlan, PlanError, DEFAULT_MTU, DEFAULT_TABLE, MIN_MTU};
