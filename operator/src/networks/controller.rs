// SPDX-License-Identifier: Apache-2.0
//! The tenant network controller, one pass at a time on the leader: claim an ID for each
//! Network of the namespace ([`super::allocate`]), run the peering handshake, write each
//! network's NodeNetwork, carry the nodes' reports back into the Network's status, and on
//! deletion take the NodeNetwork down, release the ID and let the Network go.

use std::collections::HashMap;
use std::time::Duration;

use crate::store::{Phase, Resource, Store, StoreError};

use super::allocate::{self, claim_of, AllocError, Allocator, Released, FINALIZER};
use super::kinds::{
    encode_id, uid, Body, NetState, Network, NetworkIdSpec, NetworkSpec, NetworkStatus,
    NodeNetwork, NodeNetworkSpec, NodeNetworkStatus, PeeringStatus, CLUSTER, NETWORKS, NETWORK_IDS,
    NODE_NETWORKS,
};
use super::peering::{self, View};

/// Next pass while something waits (a peer, a node), and when all is settled.
const FAST: Duration = Duration::from_millis(500);
const SLOW: Duration = Duration::from_secs(5);
/// Orphaned claims are looked for every this many passes (5 min at the settled pace).
const GC_EVERY: u64 = 60;

type NetBody = Body<NetworkSpec, NetworkStatus>;
type NodeBody = Body<NodeNetworkSpec, NodeNetworkStatus>;

pub struct Controller {
    pub allocator: Allocator,
    pub namespace: String,
    rng: Box<dyn FnMut() -> u64 + Send>,
    passes: u64,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("allocator", &self.allocator)
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

fn show(s: &str) -> String {
    base::names::escape(s, 300)
}

impl Controller {
    pub fn new(allocator: Allocator, namespace: &str) -> Self {
        Self { allocator, namespace: namespace.into(), rng: Box::new(allocate::random), passes: 0 }
    }

    /// With a chosen random source (tests make collisions likely with a small range).
    pub fn with_rng(mut self, rng: Box<dyn FnMut() -> u64 + Send>) -> Self {
        self.rng = rng;
        self
    }

    /// One pass; returns how soon the next is wanted.
    pub fn pass(&mut self, store: &mut Store) -> Result<Duration, StoreError> {
        let mut wait = SLOW;
        let (nets, _) = store.list::<NetBody>(&self.namespace, NETWORKS)?;
        for n in nets {
            if n.metadata.phase == Phase::TearingDown {
                self.teardown(store, &n)?;
            } else if !self.ensure_id(store, n)? {
                wait = FAST;
            }
        }
        let (nets, _) = store.list::<NetBody>(&self.namespace, NETWORKS)?;
        // Peers in other namespaces, read once per pass.
        let mut others: HashMap<(String, String), Network> = HashMap::new();
        for n in &nets {
            for p in &n.spec.spec.peerings {
                if let Some(ns) =
                    p.network_ref.namespace.as_deref().filter(|ns| *ns != self.namespace)
                {
                    let key = (ns.to_owned(), p.network_ref.name.clone());
                    if let std::collections::hash_map::Entry::Vacant(e) = others.entry(key) {
                        if let Some(r) = store.get::<NetBody>(ns, NETWORKS, &e.key().1)? {
                            e.insert(r);
                        }
                    }
                }
            }
        }
        let mut live_uids = Vec::new();
        for n in &nets {
            let Some(id) = held_id(n) else { continue };
            if n.metadata.phase == Phase::TearingDown {
                continue;
            }
            live_uids.push(uid(n));
            let sides = peering::sides(&view(n), &mut |ns, name| {
                if ns == self.namespace {
                    nets.iter().find(|m| m.metadata.id == name).map(view)
                } else {
                    others.get(&(ns.to_owned(), name.to_owned())).map(view)
                }
            });
            let want = peering::node_spec(id, claim_of(n), &n.spec.spec, &sides);
            let node = write_node(store, want)?;
            let st = peering::statuses(&sides, Some(&node.spec.status));
            if st.iter().any(|(s, _)| s.state != NetState::Ready) {
                wait = FAST;
            }
            write_status(store, n, id, st)?;
        }
        // Claims whose Network is gone (its key deleted behind the operator's back): the first
        // pass of a leader, then every GC_EVERY.
        if self.passes.is_multiple_of(GC_EVERY) {
            self.collect_ids(store)?;
        }
        self.passes = self.passes.wrapping_add(1);
        // NodeNetworks of this namespace's Networks that are gone (a pass cut short).
        let (nodes, _) = store.list::<NodeBody>(CLUSTER, NODE_NETWORKS)?;
        for nn in nodes {
            let r = &nn.spec.spec.network_ref;
            if r.namespace == self.namespace && !live_uids.contains(&r.uid) {
                let gone =
                    nets.iter().all(|n| uid(n) != r.uid || n.metadata.phase == Phase::TearingDown);
                if gone {
                    log::info!(
                        "NodeNetwork {}: its Network {} is gone",
                        nn.metadata.id,
                        show(&r.name)
                    );
                    destroy_quiet(store, CLUSTER, NODE_NETWORKS, &nn)?;
                }
            }
        }
        Ok(wait)
    }

    /// Delete the NetworkIDs of this namespace whose Network (by name and UID) is gone.
    fn collect_ids(&mut self, store: &mut Store) -> Result<(), StoreError> {
        let (claims, _) =
            store.list::<Body<NetworkIdSpec, serde_json::Value>>(CLUSTER, NETWORK_IDS)?;
        for c in claims {
            let r = &c.spec.spec.claim_ref;
            if r.namespace != self.namespace {
                continue;
            }
            let owner = store.get::<NetBody>(&r.namespace, NETWORKS, &r.name)?;
            if owner.is_some_and(|n| uid(&n) == r.uid) {
                continue;
            }
            let Some(id) = super::kinds::parse_id(&c.metadata.id) else { continue };
            if allocate::delete_guarded(store, id, c.metadata.revision)? {
                log::info!(
                    "NetworkID {id}: its Network {}/{} (uid {}) is gone; released",
                    show(&r.namespace),
                    show(&r.name),
                    show(&r.uid)
                );
            }
        }
        Ok(())
    }

    /// Make sure `n` holds an ID; `Ok(false)`: it does not (yet).
    fn ensure_id(&mut self, store: &mut Store, n: Network) -> Result<bool, StoreError> {
        let what = format!("{}/{}", n.metadata.namespace, n.metadata.id);
        if let Some(id) = allocate::held(store, &n)? {
            if let Some(asked) = n.spec.spec.id.filter(|a| *a != id) {
                let msg = format!(
                    "spec.id {asked} differs from the claimed ID {id}: IDs do not change (delete and re-create the Network)"
                );
                set_state(store, &n, NetState::Error, &msg)?;
            }
            return Ok(true);
        }
        // A Network whose claim was lost (its NetworkID deleted by hand) asks for its ID again.
        let before = n.spec.status.id.filter(|_| n.spec.status.uid == uid(&n));
        let requested = n.spec.spec.id.or(before);
        match self.allocator.claim(store, &n, requested, &mut *self.rng) {
            Ok(c) => {
                log::info!(
                    "Network {}: claimed ID {} ({} attempts)",
                    show(&what),
                    c.id,
                    c.attempts
                );
                Ok(true)
            }
            Err(AllocError::NetworkChanged) => Ok(false),
            Err(AllocError::Store(e)) => Err(e),
            Err(e) => {
                log::warn!("Network {}: {e}", show(&what));
                set_state(store, &n, NetState::Error, &e.to_string())?;
                Ok(false)
            }
        }
    }
}

/// The Network's status from its peerings' (the ID held, the state Ready unless a spec
/// mismatch keeps it in Error).
fn write_status(
    store: &mut Store,
    n: &Network,
    id: u32,
    st: Vec<(PeeringStatus, String)>,
) -> Result<(), StoreError> {
    let mut want = n.spec.status.clone();
    let mismatch = n.spec.spec.id.is_some_and(|a| a != id);
    if !mismatch {
        want.state = NetState::Ready;
        let waits: Vec<String> = st
            .iter()
            .filter(|(s, _)| s.state != NetState::Ready)
            .map(|(s, why)| format!("{}: {why}", s.name))
            .collect();
        want.message = show(&waits.join("; "));
    }
    want.peerings = st.into_iter().map(|(s, _)| s).collect();
    if want == n.spec.status {
        return Ok(());
    }
    let r = store.modify::<NetBody>(&n.metadata.namespace, NETWORKS, &n.metadata.id, |r| {
        if uid(r) == uid(n) && r.metadata.phase != Phase::TearingDown {
            r.spec.status = want.clone();
        }
    });
    ignore_gone(r.map(|_| ()))
}

impl Controller {
    /// Deletion: the NodeNetwork, then the ID (only ours), then the finalizer and the Network.
    fn teardown(&mut self, store: &mut Store, n: &Network) -> Result<(), StoreError> {
        let what = show(&format!("{}/{}", n.metadata.namespace, n.metadata.id));
        if let Some(id) = n.spec.status.id {
            let nn: Option<NodeNetwork> = store.get(CLUSTER, NODE_NETWORKS, &encode_id(id))?;
            if let Some(nn) = nn.filter(|x| x.spec.spec.network_ref.uid == n.spec.status.uid) {
                destroy_quiet(store, CLUSTER, NODE_NETWORKS, &nn)?;
            }
        }
        match allocate::release(store, n)? {
            Released::Deleted(id) => log::info!("Network {what}: released ID {id}"),
            Released::Gone => {}
            Released::NotOurs(by) => {
                log::warn!("Network {what}: its ID is claimed by {by} now; left alone")
            }
        }
        let r = store.modify::<NetBody>(&n.metadata.namespace, NETWORKS, &n.metadata.id, |r| {
            r.metadata.finalizers.retain(|f| f != FINALIZER)
        });
        let r = match r {
            Ok(r) => r,
            Err(StoreError::NotFound(_)) => return Ok(()),
            Err(e) => return Err(e),
        };
        if r.metadata.finalizers.is_empty() {
            let m = &r.metadata;
            ignore_gone(store.destroy(&m.namespace, NETWORKS, &m.id, m.version, &m.owner))?;
            log::info!("Network {what}: deleted");
        }
        Ok(())
    }
}

fn view(n: &Network) -> View<'_> {
    View {
        namespace: &n.metadata.namespace,
        name: &n.metadata.id,
        id: held_id(n),
        tearing_down: n.metadata.phase == Phase::TearingDown,
        spec: &n.spec.spec,
    }
}

/// The ID a Network holds according to its status (checked against the claim by
/// [`allocate::held`] when it was claimed).
fn held_id(n: &Network) -> Option<u32> {
    n.spec.status.id.filter(|_| n.spec.status.uid == uid(n))
}

fn ignore_gone(r: Result<(), StoreError>) -> Result<(), StoreError> {
    match r {
        Err(StoreError::NotFound(_)) => Ok(()),
        // Someone wrote in between: the next pass sees it.
        Err(e) if e.is_conflict() => Ok(()),
        other => other,
    }
}

fn destroy_quiet<S>(
    store: &mut Store,
    ns: &str,
    kind: &str,
    r: &Resource<S>,
) -> Result<(), StoreError> {
    let m = &r.metadata;
    ignore_gone(store.destroy(ns, kind, &m.id, m.version, &m.owner))
}

fn set_state(store: &mut Store, n: &Network, state: NetState, msg: &str) -> Result<(), StoreError> {
    let msg = show(msg);
    if n.spec.status.state == state && n.spec.status.message == msg {
        return Ok(());
    }
    let r = store.modify::<NetBody>(&n.metadata.namespace, NETWORKS, &n.metadata.id, |r| {
        r.spec.status.state = state;
        r.spec.status.message = msg.clone();
    });
    ignore_gone(r.map(|_| ()))
}

/// Create or update the NodeNetwork to `want`, keeping the nodes' reports (cleared when it
/// belonged to an earlier Network with this ID).
fn write_node(store: &mut Store, want: NodeNetworkSpec) -> Result<NodeNetwork, StoreError> {
    let name = encode_id(want.id);
    for _ in 0..4 {
        match store.get::<NodeBody>(CLUSTER, NODE_NETWORKS, &name)? {
            None => {
                let mut r = Resource::new(
                    CLUSTER,
                    NODE_NETWORKS,
                    &name,
                    Body {
                        annotations: Default::default(),
                        labels: Default::default(),
                        spec: want.clone(),
                        status: NodeNetworkStatus::default(),
                    },
                );
                match store.create(&mut r) {
                    Ok(()) => return Ok(r),
                    Err(StoreError::AlreadyExists(_)) => continue,
                    Err(e) => return Err(e),
                }
            }
            Some(mut r) if r.spec.spec != want => {
                if r.spec.spec.network_ref.uid != want.network_ref.uid {
                    r.spec.status = NodeNetworkStatus::default();
                }
                r.spec.spec = want.clone();
                match store.update(&mut r) {
                    Ok(()) => return Ok(r),
                    Err(e) if e.is_conflict() => continue,
                    Err(e) => return Err(e),
                }
            }
            Some(r) => return Ok(r),
        }
    }
    Err(StoreError::Conflict { what: format!("NodeNetwork {name}"), expected: 0, found: -1 })
}
