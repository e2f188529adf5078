// SPDX-License-Identifier: Apache-2.0
//! KubeSpan's controllers, in pipeline order: identity, peer specs, manager.

mod identity;
mod manager;
mod peer_spec;

#[cfg(test)]
mod pipeline_tests;
#[cfg(test)]
mod tests;

pub use identity::IdentityController;
pub use manager::{Manager, FIREWALL_AUDIT, POLL_PENDING, POLL_STEADY};
pub use peer_spec::PeerSpecController;
