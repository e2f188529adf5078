// SPDX-License-Identifier: Apache-2.0
//! The cluster controllers: [`AffiliateController`] writes the local affiliate and the
//! reported ones merged per node into `cluster`; [`MemberController`] makes a member of each
//! affiliate with a nodename.

use std::collections::BTreeMap;

use net::config::MachineConfig;
use net::controllers::MACHINE_CONFIG_ID;
use net::nodeaddress::{CURRENT, ROUTED};
use net::resource::{
    Affiliate, HostnameStatus, Kind, KubeSpanIdentity, Member, Namespace, NodeAddress,
    NodeIdentity, DISCOVERED_PUBLIC_ID, HOSTNAME_ID, KUBESPAN_IDENTITY_ID, NODE_IDENTITY_ID,
};
use runtime::{Controller, ControllerError, Ctx, Input, Next, Output};

use super::local::{local_affiliate, service_enabled, LocalInputs};

/// Writes the affiliates of namespace `cluster`.
#[derive(Debug, Default)]
pub struct AffiliateController;

impl Controller for AffiliateController {
    fn name(&self) -> &'static str {
        "cluster.AffiliateController"
    }

    fn inputs(&self) -> Vec<Input> {
        vec![
            Input::strong(Namespace::Config, Kind::MachineConfig),
            Input::strong(Namespace::Cluster, Kind::NodeIdentity),
            Input::strong(Namespace::KubeSpan, Kind::KubeSpanIdentity),
            Input::strong(Namespace::Network, Kind::HostnameStatus),
            Input::strong(Namespace::Network, Kind::NodeAddress),
            Input::strong(Namespace::Cluster, Kind::NodeAddress),
            Input::strong(Namespace::ClusterRaw, Kind::Affiliate),
        ]
    }

    fn outputs(&self) -> Vec<Output> {
        vec![Output::exclusive(Namespace::Cluster, Kind::Affiliate)]
    }

    fn reconcile(&mut self, ctx: &mut Ctx<'_>) -> Result<Next, ControllerError> {
        let node_id = ctx.get::<NodeIdentity>(Namespace::Cluster, NODE_IDENTITY_ID);
        let cfg = ctx.get::<MachineConfig>(Namespace::Config, MACHINE_CONFIG_ID);
        let mut out: BTreeMap<String, Affiliate> = BTreeMap::new();
        if let (Some(cfg), Some(node)) = (cfg, node_id) {
            if service_enabled(cfg) {
                // Talos reports the node only once it has a name and addresses; so does this.
                let host = ctx.get::<HostnameStatus>(Namespace::Network, HOSTNAME_ID);
                let addrs = |ns, id| {
                    ctx.get::<NodeAddress>(ns, id).map(|a| a.addresses.as_slice()).unwrap_or(&[])
                };
                let routed = addrs(Namespace::Network, ROUTED);
                if let Some(host) = host.filter(|h| !h.hostname.is_empty() && !routed.is_empty()) {
                    let local = local_affiliate(&LocalInputs {
                        config: cfg,
                        node_id: &node.node_id,
                        hostname: (&host.hostname, &host.domainname),
                        routed,
                        current: addrs(Namespace::Network, CURRENT),
                        public: addrs(Namespace::Cluster, DISCOVERED_PUBLIC_ID),
                        kubespan: ctx
                            .get::<KubeSpanIdentity>(Namespace::KubeSpan, KUBESPAN_IDENTITY_ID),
                    });
                    out.insert(node.node_id.clone(), local);
                }
            }
            // Raw IDs sort by registry, so the merge order is stable.
            for (_, raw) in ctx.list::<Affiliate>(Namespace::ClusterRaw) {
                if raw.node_id.is_empty() || raw.node_id == node.node_id {
                    continue;
                }
                match out.get_mut(&raw.node_id) {
                    Some(merged) => merged.merge(raw),
                    None => {
                        out.insert(raw.node_id.clone(), raw.clone());
                    }
                }
            }
        }
        for (id, a) in out {
            ctx.put(Namespace::Cluster, &id, a)?;
        }
        ctx.cleanup_untouched(Namespace::Cluster, Kind::Affiliate)?;
        Ok(Next::Idle)
    }
}

/// Writes one member per affiliate with a nodename (ID: the nodename).
#[derive(Debug, Default)]
pub struct MemberController;

impl Controller for MemberController {
    fn name(&self) -> &'static str {
        "cluster.MemberController"
    }

    fn inputs(&self) -> Vec<Input> {
        vec![Input::strong(Namespace::Cluster, Kind::Affiliate)]
    }

    fn outputs(&self) -> Vec<Output> {
        vec![Output::exclusive(Namespace::Cluster, Kind::Member)]
    }

    fn reconcile(&mut self, ctx: &mut Ctx<'_>) -> Result<Next, ControllerError> {
        let members: Vec<(String, Member)> = ctx
            .list::<Affiliate>(Namespace::Cluster)
            .into_iter()
            .filter_map(|(_, a)| a.member().map(|(id, m)| (id.to_owned(), m)))
            .collect();
        for (id, m) in members {
            ctx.put(Namespace::Cluster, &id, m)?;
        }
        ctx.cleanup_untouched(Namespace::Cluster, Kind::Member)?;
        Ok(Next::Idle)
    }
}
