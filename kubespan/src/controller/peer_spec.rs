// SPDX-License-Identifier: Apache-2.0
//! `KubeSpanPeerSpec`s from the configured peers and the discovered affiliates (docs/talos.md:
//! KubeSpan; docs/discovery.md): one per peer other than the node itself, IDs are public keys.

use net::config::MachineConfig;
use net::controllers::MACHINE_CONFIG_ID;
use net::resource::{
    Affiliate, Kind, KubeSpanIdentity, Namespace, NodeIdentity, KUBESPAN_IDENTITY_ID,
    NODE_IDENTITY_ID,
};
use runtime::{Controller, ControllerError, Ctx, Input, Next, Output};

use crate::peers::{merged_peers, peer_specs};

/// Writes the peer specs.
#[derive(Debug, Default)]
pub struct PeerSpecController {
    /// The overlap warnings last logged, so a reconcile does not repeat them.
    warned: Vec<String>,
}

impl Controller for PeerSpecController {
    fn name(&self) -> &'static str {
        "kubespan.PeerSpecController"
    }

    fn inputs(&self) -> Vec<Input> {
        vec![
            Input::strong(Namespace::Config, Kind::MachineConfig),
            Input::strong(Namespace::KubeSpan, Kind::KubeSpanIdentity),
            Input::strong(Namespace::Cluster, Kind::Affiliate),
            Input::strong(Namespace::Cluster, Kind::NodeIdentity),
        ]
    }

    fn outputs(&self) -> Vec<Output> {
        vec![Output::exclusive(Namespace::KubeSpan, Kind::KubeSpanPeerSpec)]
    }

    fn reconcile(&mut self, ctx: &mut Ctx<'_>) -> Result<Next, ControllerError> {
        let identity = ctx.get::<KubeSpanIdentity>(Namespace::KubeSpan, KUBESPAN_IDENTITY_ID);
        let cfg = ctx.get::<MachineConfig>(Namespace::Config, MACHINE_CONFIG_ID);
        let (specs, warnings) = match (cfg, identity) {
            (Some(cfg), Some(id)) if cfg.machine.network.kubespan.enabled => {
                let node = ctx
                    .get::<NodeIdentity>(Namespace::Cluster, NODE_IDENTITY_ID)
                    .map_or("", |n| n.node_id.as_str());
                let affiliates = ctx.list::<Affiliate>(Namespace::Cluster);
                let (peers, mut warnings) =
                    merged_peers(&cfg.machine.network.kubespan.peers, affiliates.into_iter(), node);
                let (specs, more) = peer_specs(&peers, &id.public_key, id.subnet);
                warnings.extend(more);
                (specs, warnings)
            }
            _ => (Vec::new(), Vec::new()),
        };
        if warnings != self.warned {
            for w in &warnings {
                log::warn!(target: "kubespan.PeerSpec", "{w}");
            }
            self.warned = warnings;
        }
        for (key, spec) in specs {
            ctx.put(Namespace::KubeSpan, &key, spec)?;
        }
        ctx.cleanup_untouched(Namespace::KubeSpan, Kind::KubeSpanPeerSpec)?;
        Ok(Next::Idle)
    }
}
