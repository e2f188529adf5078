// SPDX-License-Identifier: Apache-2.0
//! The KubeSpan manager (docs/talos.md: KubeSpan): from one snapshot of the config, the identity,
//! the peer specs and what WireGuard reports, it writes the operator-layer `kubespan` LinkSpec, the
//! ULA AddressSpec, the table-180 routes and the fwmark rules (which `net` applies), programs the
//! nftables targets, and publishes each peer's status. Disabled, it removes all of it.
//!
//! It asks to be woken at the rotation engines' next deadline, and polls WireGuard every
//! second while an endpoint is on trial, every 10 s otherwise (handshakes raise no netlink
//! event).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use net::config::MachineConfig;
use net::controllers::MACHINE_CONFIG_ID;
use net::resource::{
    layered_id, ConfigLayer, Kind, KubeSpanIdentity, KubeSpanPeerSpec, KubeSpanPeerStatus,
    Namespace, PeerState, KUBESPAN_IDENTITY_ID,
};
use runtime::{Controller, ControllerError, Ctx, ErrorKind, Input, Next, Output};

use crate::firewall::Firewall;
use crate::nft::NftPlan;
use crate::plan::{plan, PeerRuntime, Plan, Snapshot, LINK_NAME};
use crate::rotation::{retry_jitter, Observation, Rotation, Timing, PEER_DOWN_INTERVAL};
use crate::wg::{WgPeerState, WgReader};

/// How often WireGuard is read while some peer's state is unknown (an endpoint on trial).
pub const POLL_PENDING: Duration = Duration::from_secs(1);
/// How often otherwise (counters and handshake ages in the status, a down peer coming back).
pub const POLL_STEADY: Duration = Duration::from_secs(10);
/// How often an unchanged firewall plan is applied again anyway, so a table someone else
/// changed or deleted is repaired (the adapter checks cheaply and rebuilds only on drift).
pub const FIREWALL_AUDIT: Duration = Duration::from_secs(30);

/// The kinds the manager writes into `network-config`.
const NETWORK_KINDS: [Kind; 4] =
    [Kind::LinkSpec, Kind::AddressSpec, Kind::RouteSpec, Kind::RoutingRuleSpec];

/// The manager.
pub struct Manager {
    firewall: Box<dyn Firewall>,
    wg: Box<dyn WgReader>,
    rotations: BTreeMap<String, Rotation>,
    /// What the table holds, as far as we know (`None` after a removal), and since when.
    firewall_applied: Option<(NftPlan, Instant)>,
    /// The table may hold something we did not apply (a previous run): remove once when off.
    firewall_unknown: bool,
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager").field("peers", &self.rotations.len()).finish()
    }
}

impl Manager {
    /// A manager programming `firewall` and reading `wg`.
    pub fn new(firewall: Box<dyn Firewall>, wg: Box<dyn WgReader>) -> Self {
        Self {
            firewall,
            wg,
            rotations: BTreeMap::new(),
            firewall_applied: None,
            firewall_unknown: true,
        }
    }

    fn disable(&mut self, ctx: &mut Ctx<'_>) -> Result<Next, ControllerError> {
        self.rotations.clear();
        for kind in NETWORK_KINDS {
            ctx.cleanup_untouched(Namespace::NetworkConfig, kind)?;
        }
        ctx.cleanup_untouched(Namespace::KubeSpan, Kind::KubeSpanPeerStatus)?;
        if self.firewall_applied.is_some() {
            self.firewall.remove().map_err(|e| transient(e.to_string()))?;
            self.firewall_applied = None;
        } else if self.firewall_unknown {
            // A table a previous run left behind. Best effort, once: a kernel without
            // nf_tables (KubeSpan never used) must not keep this controller failing.
            if let Err(e) = self.firewall.remove() {
                log::debug!(target: "kubespan.Manager", "removing a leftover table: {e}");
            }
        }
        self.firewall_unknown = false;
        Ok(Next::Idle)
    }
}

fn transient(message: String) -> ControllerError {
    ControllerError::Other { kind: ErrorKind::Transient, message }
}

impl Controller for Manager {
    fn name(&self) -> &'static str {
        "kubespan.Manager"
    }

    fn inputs(&self) -> Vec<Input> {
        vec![
            Input::strong(Namespace::Config, Kind::MachineConfig),
            Input::strong(Namespace::KubeSpan, Kind::KubeSpanIdentity),
            Input::strong(Namespace::KubeSpan, Kind::KubeSpanPeerSpec),
        ]
    }

    fn outputs(&self) -> Vec<Output> {
        let mut out: Vec<Output> =
            NETWORK_KINDS.iter().map(|k| Output::shared(Namespace::NetworkConfig, *k)).collect();
        out.push(Output::exclusive(Namespace::KubeSpan, Kind::KubeSpanPeerStatus));
        out
    }

    fn reconcile(&mut self, ctx: &mut Ctx<'_>) -> Result<Next, ControllerError> {
        let now = ctx.now();
        let cfg = ctx.get::<MachineConfig>(Namespace::Config, MACHINE_CONFIG_ID).cloned();
        let identity =
            ctx.get::<KubeSpanIdentity>(Namespace::KubeSpan, KUBESPAN_IDENTITY_ID).cloned();
        let (Some(cfg), Some(identity)) = (cfg, identity) else {
            return self.disable(ctx);
        };
        let ks = &cfg.machine.network.kubespan;
        if !ks.enabled {
            return self.disable(ctx);
        }
        let peers: Vec<(String, KubeSpanPeerSpec)> = ctx
            .list::<KubeSpanPeerSpec>(Namespace::KubeSpan)
            .into_iter()
            .map(|(k, s)| (k.to_owned(), s.clone()))
            .collect();

        // What WireGuard says now. A read failure leaves every peer unobserved this round:
        // nothing is decided on it, since "no handshake seen" would read as "down" and
        // re-point a live (perhaps roamed) tunnel.
        let observed: Option<BTreeMap<String, WgPeerState>> = match self.wg.peers(LINK_NAME) {
            Ok(list) => {
                Some(net::sort::into_map(list.into_iter().map(|p| (p.public_key.clone(), p))))
            }
            Err(e) => {
                log::debug!(target: "kubespan.Manager", "read WireGuard: {e}");
                None
            }
        };

        let timing =
            Timing { endpoint_timeout: ks.endpoint_timeout, down_interval: PEER_DOWN_INTERVAL };
        self.rotations.retain(|k, _| peers.iter().any(|(p, _)| p == k));
        let mut runtime: BTreeMap<String, PeerRuntime> = BTreeMap::new();
        let mut statuses = Vec::new();
        for (key, spec) in &peers {
            let rot = self
                .rotations
                .entry(key.clone())
                .or_insert_with(|| Rotation::new(timing).with_retry_jitter(retry_jitter(key)));
            rot.set_timing(timing);
            let Some(observed) = &observed else {
                // Unobserved: the spec leaves the endpoint alone and the status stays as it was.
                runtime.insert(key.clone(), (rot.state(), None, rot.retries()));
                if let Some(prev) = ctx.get::<KubeSpanPeerStatus>(Namespace::KubeSpan, key) {
                    statuses.push((key.clone(), prev.clone()));
                }
                continue;
            };
            let wg = observed.get(key);
            let obs = Observation {
                endpoint: wg.and_then(|w| w.endpoint),
                handshake_age: wg.and_then(|w| w.handshake_age),
            };
            let before = rot.state();
            let step = rot.handle(now, &spec.endpoints, &obs);
            if step.state != before && step.state != PeerState::Unknown {
                let via = obs.endpoint.map_or_else(|| "-".to_owned(), |e| e.to_string());
                log::info!(target: "kubespan.Manager", "peer {} ({key}): {} via {via}", spec.label, step.state);
            }
            // The spec names an endpoint only in the round that moves the peer there; every
            // other round it says "leave it", so WireGuard's roaming is never undone (a spec
            // still naming our last choice would put a roamed, live peer back on it).
            let mut endpoint = step.set_endpoint;
            if let Some(e) = step.set_endpoint {
                log::info!(target: "kubespan.Manager", "peer {} ({key}): trying endpoint {e}", spec.label);
            } else if step.retry_handshake {
                // The peer is re-created to initiate now: it must keep the endpoint on trial.
                endpoint = rot.last_used();
                log::debug!(target: "kubespan.Manager", "peer {} ({key}): no handshake yet, initiating again", spec.label);
            }
            runtime.insert(key.clone(), (step.state, endpoint, rot.retries()));
            statuses.push((
                key.clone(),
                KubeSpanPeerStatus {
                    label: spec.label.clone(),
                    endpoint: obs.endpoint,
                    state: step.state,
                    last_handshake_time: wg.and_then(|w| w.last_handshake),
                    receive_bytes: wg.map_or(0, |w| w.rx_bytes),
                    transmit_bytes: wg.map_or(0, |w| w.tx_bytes),
                    last_used_endpoint: rot.last_used(),
                    last_endpoint_change: rot.last_change().and_then(|t| {
                        std::time::SystemTime::now().checked_sub(now.saturating_duration_since(t))
                    }),
                },
            ));
        }

        let peer_refs: Vec<(&str, &KubeSpanPeerSpec)> =
            peers.iter().map(|(k, s)| (k.as_str(), s)).collect();
        let secret = cfg.cluster.as_ref().and_then(|c| c.secret.as_deref());
        let p = plan(&Snapshot {
            config: ks,
            cluster_secret: secret,
            identity: &identity,
            peers: &peer_refs,
            peer_runtime: &runtime,
        });
        self.write(ctx, p, statuses)?;

        // Fast while an endpoint is on trial; a peer that is simply down is looked at again on
        // the steady cadence (an idle node stays asleep).
        let pending = runtime.values().any(|(s, _, _)| *s == PeerState::Unknown);
        let poll = now + if pending { POLL_PENDING } else { POLL_STEADY };
        let deadline =
            self.rotations.values().filter_map(Rotation::poll_at).fold(poll, Instant::min);
        Ok(Next::At(deadline))
    }
}

impl Manager {
    fn write(
        &mut self,
        ctx: &mut Ctx<'_>,
        p: Plan,
        statuses: Vec<(String, KubeSpanPeerStatus)>,
    ) -> Result<(), ControllerError> {
        let Plan { mut link, wireguard, address, routes, rules, firewall } = p;
        link.wireguard = Some(wireguard);
        let op = |natural: String| layered_id(ConfigLayer::Operator, &natural);
        ctx.put(Namespace::NetworkConfig, &op(link.id()), link)?;
        ctx.put(Namespace::NetworkConfig, &op(address.id()), address)?;
        for r in routes {
            ctx.put(Namespace::NetworkConfig, &op(r.id()), r)?;
        }
        for r in rules {
            ctx.put(Namespace::NetworkConfig, &op(r.id()), r)?;
        }
        for kind in NETWORK_KINDS {
            ctx.cleanup_untouched(Namespace::NetworkConfig, kind)?;
        }
        for (key, status) in statuses {
            ctx.put(Namespace::KubeSpan, &key, status)?;
        }
        ctx.cleanup_untouched(Namespace::KubeSpan, Kind::KubeSpanPeerStatus)?;
        let now = ctx.now();
        let (changed, due) = match &self.firewall_applied {
            Some((plan, at)) => {
                (*plan != firewall, now.saturating_duration_since(*at) >= FIREWALL_AUDIT)
            }
            None => (true, true),
        };
        if changed || due {
            self.firewall.apply(&firewall).map_err(|e| transient(e.to_string()))?;
            if changed {
                log::info!(
                    target: "kubespan.Manager",
                    "nftables: {} IPv4 and {} IPv6 target prefixes",
                    firewall.targets_v4.len(),
                    firewall.targets_v6.len()
                );
            }
            self.firewall_applied = Some((firewall, now));
            self.firewall_unknown = false;
        }
        Ok(())
    }
}
