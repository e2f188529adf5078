// SPDX-License-Identifier: Apache-2.0
//! Applies merged `LinkSpec`s to the kernel (docs/talos.md: Applying specs, teardown docs/talos.md:
//! Merge).
//!
//! [`plan_links`] plans one step: only operations whose prerequisites exist in the kernel
//! now. [`LinkSpecController`] repeats dump, plan and apply until a plan is empty, so a stack
//! that needs several steps (create a bond, enslave its ports and create a VLAN on it, bring
//! everything up) settles in one reconcile.
//!
//! Differences from Talos, on purpose:
//! - specs are ordered by a dependency graph with distinct edges, VLAN → parent and
//!   port → master, instead of a sort by name; a cycle or a missing dependency is reported as
//!   waiting, with the reason;
//! - a link whose spec names no master stays enslaved to a master we do not manage (Talos
//!   unslaves it and fights OVS, talos#7845);
//! - a logical spec never deletes a link without a kind (a NIC that has the spec's name);
//! - bond drift compares only the settings the kernel reports reliably, so it cannot loop.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::apply::Desired;
use super::apply::{
    self, first_error, hash_of, op_text, Applied, ApplyGuard, IdList, OpKey, Outcome, SpecApply,
    SpecOps,
};
use crate::host::{Host, HostError, HostErrorKind, LinkOp, NewLinkKind, SharedHost, WgUpdate};
use crate::resource::{
    find_link, BondMasterSpec, Kind, LinkRefresh, LinkSpec, LinkStatus, LinkType, Namespace, Phase,
    VlanProtocol, VlanSpec, LINK_REFRESH_WIREGUARD,
};
use crate::runtime::{Controller, ControllerError, Ctx, Input, Next, Output};

/// Plan/apply rounds per reconcile; a deeper stack than this is reported as not converged.
const MAX_ROUNDS: usize = 8;

/// When to try again after running out of rounds.
const UNCONVERGED_RETRY: Duration = Duration::from_secs(10);

/// Kinds we can create (`NewLinkKind`); others are only configured if they already exist.
const CREATABLE: [&str; 7] = ["dummy", "veth", "vlan", "bond", "bridge", "wireguard", "vrf"];

/// What to do for a set of link specs, in one step.
#[derive(Debug, Default, PartialEq)]
pub struct LinkPlan {
    /// Operations in order, each with the ID of the spec it serves.
    pub ops: Vec<(String, LinkOp)>,
    /// Running specs that cannot progress in this step, with the reason.
    pub waiting: Vec<(String, String)>,
    /// Specs applied, or being applied by `ops` (hold a finalizer).
    pub applied: Vec<String>,
    /// Tearing-down specs whose kernel link is gone after `ops` (release the finalizer).
    pub released: Vec<String>,
}

/// Plan one step of link changes against the kernel's links.
///
/// Tearing-down specs come first (docs/talos.md: Applying specs), dependents before what they
/// depend on, so that the kernel does not delete a link under us; then running specs in dependency
/// order.
pub fn plan_links(desired: &[Desired<'_, LinkSpec>], kernel: &[(String, LinkStatus)]) -> LinkPlan {
    let mut p = Planner {
        kernel,
        managed: desired
            .iter()
            .filter_map(|d| find(kernel, d.spec))
            .map(|(_, l)| l.index)
            .collect(),
        unsettled: BTreeSet::new(),
        plan: LinkPlan::default(),
    };
    let (down, up): (Vec<_>, Vec<_>) = desired.iter().partition(|d| d.phase == Phase::TearingDown);

    let (order, stuck) = dependency_order(&down);
    for i in order.into_iter().rev().chain(stuck) {
        let d = down[i];
        if let Some(op) = p.teardown(d.spec) {
            p.plan.ops.push((d.id.to_owned(), op));
        }
        p.plan.released.push(d.id.to_owned());
    }

    let (order, stuck) = dependency_order(&up);
    for i in order {
        let d = up[i];
        match p.running(d.spec) {
            Ok(ops) => {
                p.plan.ops.extend(ops.into_iter().map(|op| (d.id.to_owned(), op)));
                p.plan.applied.push(d.id.to_owned());
            }
            Err(why) => p.plan.waiting.push((d.id.to_owned(), why)),
        }
    }
    for i in stuck {
        p.plan.waiting.push((up[i].id.to_owned(), "in or behind a dependency cycle".into()));
    }
    p.plan
}

/// The names a spec depends on: its VLAN parent and its master.
fn dependencies(spec: &LinkSpec) -> impl Iterator<Item = &str> {
    [spec.parent_name.as_str(), spec.master_name().unwrap_or_default()]
        .into_iter()
        .filter(|n| !n.is_empty())
}

/// Topological order (Kahn) over the specs' dependencies on each other; among the ready ones,
/// bond ports sort as (master, slave index, name), like Talos, so ports are enslaved in their
/// configured order (the first one gives the bond its MAC), and the rest by name. Returns the
/// order and the specs left over, which are in or behind a cycle.
fn dependency_order(items: &[&Desired<'_, LinkSpec>]) -> (Vec<usize>, Vec<usize>) {
    let key = |i: usize| {
        let s = items[i].spec;
        match &s.bond_slave {
            Some(b) => (b.master_name.as_str(), b.slave_index, s.name.as_str(), i),
            None => (s.name.as_str(), 0, s.name.as_str(), i),
        }
    };
    let by_name: BTreeMap<&str, usize> =
        crate::sort::into_map(items.iter().enumerate().map(|(i, d)| (d.spec.name.as_str(), i)));
    let mut blockers = vec![0usize; items.len()];
    let mut dependents = vec![Vec::new(); items.len()];
    for (i, d) in items.iter().enumerate() {
        for dep in dependencies(d.spec) {
            if let Some(&j) = by_name.get(dep) {
                blockers[i] += 1;
                dependents[j].push(i);
            }
        }
    }
    let mut ready: BTreeSet<_> = (0..items.len()).filter(|&i| blockers[i] == 0).map(key).collect();
    let mut order = Vec::with_capacity(items.len());
    while let Some((_, _, _, i)) = ready.pop_first() {
        order.push(i);
        for &j in &dependents[i] {
            blockers[j] -= 1;
            if blockers[j] == 0 {
                ready.insert(key(j));
            }
        }
    }
    let stuck = (0..items.len()).filter(|&i| blockers[i] > 0).collect();
    (order, stuck)
}

/// The kernel link a spec is about: logical links by exact name only, physical ones also by
/// alias or altname (docs/talos.md: Applying specs).
fn find<'a>(
    kernel: &'a [(String, LinkStatus)],
    spec: &LinkSpec,
) -> Option<(&'a str, &'a LinkStatus)> {
    if spec.logical {
        exact(kernel, &spec.name)
    } else {
        find_link(kernel, &spec.name)
    }
}

fn exact<'a>(kernel: &'a [(String, LinkStatus)], name: &str) -> Option<(&'a str, &'a LinkStatus)> {
    kernel.iter().find(|(n, _)| n == name).map(|(n, l)| (n.as_str(), l))
}

/// VLAN settings as the kernel reports them (an unset protocol is 802.1Q).
fn canonical_vlan(v: &VlanSpec) -> VlanSpec {
    let protocol =
        if v.protocol == VlanProtocol::default() { VlanProtocol::DOT1Q } else { v.protocol };
    VlanSpec { vid: v.vid, protocol }
}

/// Bond settings drift, on the fields the kernel reports reliably; the others (primary, ARP
/// targets, counters with kernel-chosen defaults) would make the comparison loop.
fn bond_drifted(want: &BondMasterSpec, have: &BondMasterSpec) -> bool {
    let key = |b: &BondMasterSpec| {
        (
            b.mode,
            b.xmit_hash_policy,
            b.lacp_rate,
            b.mii_mon,
            b.up_delay,
            b.down_delay,
            b.min_links,
            b.ad_select,
            b.arp_interval,
            b.primary_reselect,
            b.fail_over_mac,
        )
    };
    key(want) != key(have)
}

/// One planning step's state.
struct Planner<'a> {
    kernel: &'a [(String, LinkStatus)],
    /// Indexes of kernel links some spec is about.
    managed: BTreeSet<u32>,
    /// Names of links created or deleted by this step's ops: anything that depends on them
    /// waits for the next step, which sees the kernel's result.
    unsettled: BTreeSet<String>,
    plan: LinkPlan,
}

impl<'a> Planner<'a> {
    fn by_index(&self, index: u32) -> Option<(&'a str, &'a LinkStatus)> {
        self.kernel.iter().find(|(_, l)| l.index == index).map(|(n, l)| (n.as_str(), l))
    }

    /// A veth's peer, when it is in this namespace: its `IFLA_LINK` must point back, since a
    /// peer in another namespace reports an index that means nothing here.
    fn veth_peer(&self, link: &LinkStatus) -> Option<&'a str> {
        let (name, peer) = self.by_index(link.link_index)?;
        (link.kind == "veth" && peer.kind == "veth" && peer.link_index == link.index)
            .then_some(name)
    }

    /// Delete a logical link and note what goes with it.
    fn delete(&mut self, name: &str, link: &LinkStatus) -> LinkOp {
        self.unsettled.insert(name.to_owned());
        if let Some(peer) = self.veth_peer(link) {
            self.unsettled.insert(peer.to_owned());
        }
        LinkOp::Delete { index: link.index, name: name.to_owned() }
    }

    /// docs/talos.md: Merge: logical links are deleted, physical ones are left as they are.
    fn teardown(&mut self, spec: &LinkSpec) -> Option<LinkOp> {
        let (name, link) = find(self.kernel, spec).filter(|_| spec.logical)?;
        // Already gone with a peer deleted in this step; never delete a kind-less (real) link.
        if self.unsettled.contains(name) || link.kind.is_empty() {
            return None;
        }
        Some(self.delete(name, link))
    }

    /// The ops for a running spec, or why it cannot progress in this step.
    fn running(&mut self, spec: &LinkSpec) -> Result<Vec<LinkOp>, String> {
        if let Some(n) = std::iter::once(spec.name.as_str())
            .chain(dependencies(spec))
            .find(|n| self.unsettled.contains(*n))
        {
            return Err(format!("{n} is being created or deleted"));
        }
        let Some((name, link)) = find(self.kernel, spec) else {
            if !spec.logical {
                // Physical links come and go with hardware: not an error (docs/talos.md: Applying
                // specs).
                return Err("link not found".into());
            }
            return self.create(spec).map(|op| vec![op]);
        };
        if spec.logical && self.must_recreate(spec, link)? {
            return Ok(vec![self.delete(name, link)]);
        }
        self.configure(spec, name, link)
    }

    fn create(&mut self, spec: &LinkSpec) -> Result<LinkOp, String> {
        let kind = match spec.kind.as_str() {
            "dummy" => NewLinkKind::Dummy,
            "veth" => {
                let peer = spec.veth.as_ref().map(|v| v.peer_name.clone()).unwrap_or_default();
                if peer.is_empty() {
                    return Err("veth without a peer name".into());
                }
                self.unsettled.insert(peer.clone());
                NewLinkKind::Veth { peer }
            }
            "vlan" => {
                let vlan = spec.vlan.as_ref().ok_or("vlan without VLAN settings")?;
                let (_, parent) = find_link(self.kernel, &spec.parent_name)
                    .ok_or_else(|| format!("parent {:?} not found", spec.parent_name))?;
                NewLinkKind::Vlan { parent: parent.index, vlan: canonical_vlan(vlan) }
            }
            "bond" => NewLinkKind::Bond(spec.bond_master.clone().unwrap_or_default()),
            "bridge" => NewLinkKind::Bridge(spec.bridge_master.clone().unwrap_or_default()),
            "wireguard" => NewLinkKind::Wireguard,
            "vrf" => NewLinkKind::Vrf {
                table: spec.vrf_master.as_ref().ok_or("vrf without a table")?.table.0,
            },
            other => return Err(format!("unsupported kind {other:?}")),
        };
        self.unsettled.insert(spec.name.clone());
        Ok(LinkOp::Create {
            name: spec.name.clone(),
            kind,
            mtu: (spec.mtu != 0).then_some(spec.mtu),
            mac: spec.hardware_addr.clone(),
        })
    }

    /// docs/talos.md: Applying specs: a logical link of the wrong kind or type, VLAN settings or
    /// parent, or veth peer is deleted and created again.
    fn must_recreate(&self, spec: &LinkSpec, link: &LinkStatus) -> Result<bool, String> {
        if link.kind.is_empty() {
            return Err("a link without a kind (not created by us) has this name".into());
        }
        let wrong = link.kind != spec.kind
            || (spec.link_type != LinkType::default() && spec.link_type != link.link_type)
            || match spec.kind.as_str() {
                "vlan" => {
                    let settings = match (&spec.vlan, &link.vlan) {
                        (Some(want), Some(have)) => canonical_vlan(want) != *have,
                        _ => false,
                    };
                    let parent = find_link(self.kernel, &spec.parent_name)
                        .is_some_and(|(_, p)| p.index != link.link_index);
                    settings || parent
                }
                // The kernel does not move a live VRF to another table.
                "vrf" => match (&spec.vrf_master, &link.vrf_master) {
                    (Some(want), Some(have)) => want.table != have.table,
                    _ => false,
                },
                "veth" => {
                    let want = spec.veth.as_ref().map_or("", |v| v.peer_name.as_str());
                    self.veth_peer(link).is_some_and(|peer| !want.is_empty() && peer != want)
                }
                _ => false,
            };
        if wrong && !CREATABLE.contains(&spec.kind.as_str()) {
            // Deleting it would leave nothing in its place.
            return Err(format!("unsupported kind {:?}", spec.kind));
        }
        Ok(wrong)
    }

    /// Settings, master, MTU, MAC and up flag of an existing link, in that order: the link is
    /// brought up last, after everything that is better changed while it is down.
    fn configure(
        &mut self,
        spec: &LinkSpec,
        name: &str,
        link: &LinkStatus,
    ) -> Result<Vec<LinkOp>, String> {
        let index = link.index;
        let want_master = match spec.master_name() {
            Some(m) => Some(
                exact(self.kernel, m).ok_or_else(|| format!("master {m:?} not found"))?.1.index,
            ),
            None => None,
        };
        let current_master = self.by_index(link.master_index).filter(|_| link.master_index != 0);
        if let Some((m, _)) = current_master.filter(|(m, _)| self.unsettled.contains(*m)) {
            return Err(format!("{m} is being created or deleted"));
        }
        let mut ops = Vec::new();
        if let (Some(want), Some(have)) = (&spec.bond_master, &link.bond_master) {
            if link.kind == "bond" && bond_drifted(want, have) {
                return self.reset_bond(name, link, want);
            }
        }
        if let (Some(want), Some(have)) = (&spec.bridge_master, &link.bridge_master) {
            // STP and VLAN filtering change on a live bridge.
            if want != have {
                ops.push(LinkOp::SetBridge { index, bridge: want.clone() });
            }
        }
        let mut up = link.is_up();
        let current = current_master.map(|(_, m)| m.index);
        // Keelson rule: with no master in the spec, a port of a master we do not manage is
        // someone else's (OVS, a CNI bridge) and stays where it is.
        let foreign = want_master.is_none() && current.is_some_and(|m| !self.managed.contains(&m));
        if want_master != current && !foreign {
            // docs/talos.md: Applying specs: down first, then IFLA_MASTER.
            if up {
                ops.push(LinkOp::SetUp { index, up: false });
                up = false;
            }
            ops.push(LinkOp::SetMaster { index, master: want_master });
        }
        if spec.mtu != 0 && spec.mtu != link.mtu {
            ops.push(LinkOp::SetMtu { index, mtu: spec.mtu });
        }
        if let Some(mac) = spec.hardware_addr.as_ref().filter(|m| **m != link.hardware_addr) {
            ops.push(LinkOp::SetMac { index, mac: mac.clone() });
        }
        if spec.up != up {
            ops.push(LinkOp::SetUp { index, up: spec.up });
        }
        Ok(ops)
    }

    /// docs/talos.md: Applying specs bond settings sync: down, release every port, write the
    /// settings; the next step re-enslaves the ports and brings the bond up.
    fn reset_bond(
        &mut self,
        name: &str,
        link: &LinkStatus,
        want: &BondMasterSpec,
    ) -> Result<Vec<LinkOp>, String> {
        let ports: Vec<(&str, &LinkStatus)> = self
            .kernel
            .iter()
            .filter(|(_, l)| l.master_index == link.index)
            .map(|(n, l)| (n.as_str(), l))
            .collect();
        // The kernel refuses the change while ports are enslaved, and we would not put back a
        // port that has no spec.
        if let Some((port, _)) = ports.iter().find(|(_, l)| !self.managed.contains(&l.index)) {
            return Err(format!("bond settings differ, but port {port} is not managed by us"));
        }
        self.unsettled.insert(name.to_owned());
        let mut ops = vec![LinkOp::SetUp { index: link.index, up: false }];
        ops.extend(ports.iter().map(|(_, l)| LinkOp::SetMaster { index: l.index, master: None }));
        ops.push(LinkOp::SetBond { index: link.index, bond: want.clone() });
        Ok(ops)
    }
}

/// An operation as the link, the attribute and our value (`link eth0: mtu 1400`): what the
/// log says and what the guard counts.
fn op_key(id: &str, op: &LinkOp) -> String {
    let what = Links::what(op).1;
    match op {
        LinkOp::SetMtu { mtu, .. } => format!("link {id}: {what} {mtu}"),
        LinkOp::SetMac { mac, .. } => format!("link {id}: {what} {mac}"),
        LinkOp::SetMaster { master: Some(m), .. } => format!("link {id}: {what} index {m}"),
        _ => op_text("link", id, what),
    }
}

/// A setting the kernel may refuse on its own (a value the device cannot take) while the
/// link's other settings still make sense: its failure does not stop them.
fn is_attribute(op: &LinkOp) -> bool {
    matches!(op, LinkOp::SetMtu { .. } | LinkOp::SetMac { .. })
}

/// Links, to the apply loop: one operation at a time, keyed by its text (which holds our
/// value), and not counted by the guard's rule 2 (the rounds of one reconcile re-plan
/// against the kernel; rule 1 catches a value that does not stick).
#[derive(Debug)]
struct Links;

impl SpecOps for Links {
    type Spec = LinkSpec;
    type Op = LinkOp;
    const OBJECT: &'static str = "link";

    /// The attribute, without our value.
    fn what(op: &LinkOp) -> (u8, &'static str) {
        match op {
            LinkOp::Create { .. } => (0, "create"),
            LinkOp::Delete { .. } => (1, "delete"),
            LinkOp::SetUp { up: true, .. } => (2, "up"),
            LinkOp::SetUp { up: false, .. } => (3, "down"),
            LinkOp::SetMtu { .. } => (4, "mtu"),
            LinkOp::SetMac { .. } => (5, "mac"),
            LinkOp::SetMaster { master: Some(_), .. } => (6, "master"),
            LinkOp::SetMaster { master: None, .. } => (7, "no master"),
            LinkOp::SetBond { .. } => (8, "bond settings"),
            LinkOp::SetBridge { .. } => (9, "bridge settings"),
        }
    }

    fn key(id: &str, op: &LinkOp) -> OpKey {
        OpKey::of_text(&op_key(id, op))
    }

    fn name(id: &str, op: &LinkOp) -> String {
        op_key(id, op)
    }

    fn value(_op: &LinkOp) -> Option<u64> {
        None
    }

    fn apply(host: &mut dyn Host, ops: &[&LinkOp]) -> Vec<Result<(), HostError>> {
        ops.iter().map(|op| host.link(op)).collect()
    }

    fn refused_alone(op: &LinkOp) -> bool {
        is_attribute(op)
    }

    fn error(id: &str, op: &LinkOp, e: HostError) -> HostError {
        // Name the link and the attribute, not the kernel's index.
        HostError { op: op_key(id, op), ..e }
    }
}

/// What a WireGuard update changes, for the log (never key material).
fn describe(u: &WgUpdate) -> String {
    let mut parts = Vec::new();
    if u.private_key.is_some() {
        parts.push("private key".to_owned());
    }
    if let Some(p) = u.listen_port {
        parts.push(format!("listen port {p}"));
    }
    if let Some(m) = u.fwmark {
        parts.push(format!("fwmark {m:#x}"));
    }
    // A peer removed and added in one update is re-created (a new endpoint tried at once).
    let recreated = u
        .peers
        .iter()
        .filter(|p| p.remove && u.peers.iter().any(|q| !q.remove && q.public_key == p.public_key))
        .count();
    let removed = u.peers.iter().filter(|p| p.remove).count() - recreated;
    let changed = u.peers.len() - removed - 2 * recreated;
    if changed > 0 {
        parts.push(format!("{changed} peers added or changed"));
    }
    if recreated > 0 {
        parts.push(format!("{recreated} peers re-created for a new endpoint"));
    }
    if removed > 0 {
        parts.push(format!("{removed} peers removed"));
    }
    parts.join(", ")
}

/// The `LinkSpec` controller.
pub struct LinkSpecController {
    host: SharedHost,
    /// The guard (operations something else keeps undoing: another writer on the link) and
    /// the wait log.
    apply: SpecApply<Links>,
    /// WireGuard changes produce no netlink event, but the status poll wakes us: a device
    /// that never takes an update must not be written every poll (the guard's rule 2 only:
    /// one device's updates share a name whatever they change).
    wireguard_repeats: ApplyGuard,
    /// The peer endpoints written per WireGuard link, so a roam is not written back over.
    wireguard_endpoints: BTreeMap<String, wireguard::WrittenEndpoints>,
    /// The handshake retries answered per WireGuard link, so each is answered once.
    wireguard_retries: BTreeMap<String, wireguard::SeenRetries>,
    /// The last [`LinkRefresh`] generation written.
    refreshes: u64,
}

impl std::fmt::Debug for LinkSpecController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkSpecController").finish_non_exhaustive()
    }
}

impl LinkSpecController {
    /// A controller applying through `host`.
    pub fn new(host: SharedHost) -> Self {
        Self {
            host,
            apply: SpecApply::new(),
            wireguard_repeats: ApplyGuard::without_holds(),
            wireguard_endpoints: BTreeMap::new(),
            wireguard_retries: BTreeMap::new(),
            refreshes: 0,
        }
    }

    /// Configures the WireGuard devices of running specs whose link exists (docs/talos.md: Applying
    /// specs): read the device, plan the difference, write it. Returns the texts of the writes
    /// done.
    fn apply_wireguard(
        &mut self,
        specs: &[(String, LinkSpec, Phase)],
        kernel: &[(String, LinkStatus)],
        errors: &mut Vec<HostError>,
    ) -> Vec<String> {
        let mut done = Vec::new();
        for (id, spec, phase) in specs {
            let Some(want) = spec.wireguard.as_ref() else { continue };
            let exists = exact(kernel, &spec.name).is_some_and(|(_, l)| l.kind == "wireguard");
            if *phase != Phase::Running || spec.kind != "wireguard" || !exists {
                continue;
            }
            let mut host = self.host.borrow_mut();
            // Handshake times are wall-clock Unix seconds; a clock before 1970 reads as 0,
            // which only makes every session look older (a re-created peer loses nothing).
            let now_unix = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            let written = self.wireguard_endpoints.entry(spec.name.clone()).or_default();
            let seen = self.wireguard_retries.entry(spec.name.clone()).or_default();
            let update = host.wireguard(&spec.name).and_then(|have| {
                wireguard::plan_wireguard(want, &have, written, seen, now_unix).map_err(|e| {
                    HostError {
                        op: format!("link {id}"),
                        message: e.to_string(),
                        kind: HostErrorKind::Invalid,
                    }
                })
            });
            // A retry is answered by the plan it went into (a peer with a session needs none);
            // the next poll plans again if the write fails.
            let mark_seen = |seen: &mut wireguard::SeenRetries| {
                seen.clear();
                for p in &want.peers {
                    if let Ok(k) = crate::wireguard_keys::Key::from_base64(&p.public_key) {
                        seen.insert(k, p.handshake_retry);
                    }
                }
            };
            let update = match update {
                Ok(u) if u.is_empty() => {
                    mark_seen(seen);
                    continue;
                }
                Ok(u) => u,
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            };
            match host.wireguard_set(&spec.name, &update) {
                Ok(()) => {
                    mark_seen(seen);
                    for p in &update.peers {
                        match p.endpoint {
                            Some(e) => _ = written.insert(p.public_key, e),
                            None if p.remove => _ = written.remove(&p.public_key),
                            None => {}
                        }
                    }
                    log::info!(target: "network.LinkSpecController", "link {}: wireguard {}", spec.name, describe(&update));
                    done.push(format!("wireguard set {}", spec.name));
                }
                Err(e) => errors.push(e),
            }
        }
        done
    }
}

impl Controller for LinkSpecController {
    fn name(&self) -> &'static str {
        "network.LinkSpecController"
    }

    fn inputs(&self) -> Vec<Input> {
        vec![
            Input::strong(Namespace::Network, Kind::LinkSpec),
            Input::weak(Namespace::Network, Kind::LinkStatus),
        ]
    }

    fn outputs(&self) -> Vec<Output> {
        vec![Output::exclusive(Namespace::Network, Kind::LinkRefresh)]
    }

    fn reconcile(&mut self, ctx: &mut Ctx<'_>) -> Result<Next, ControllerError> {
        let specs: Vec<(String, LinkSpec, Phase)> = ctx
            .store()
            .list(Namespace::Network, Kind::LinkSpec)
            .filter_map(|r| {
                r.spec_as::<LinkSpec>()
                    .map(|s| (r.metadata.id.to_string(), s.clone(), r.metadata.phase))
            })
            .collect();
        let desired: Vec<Desired<'_, LinkSpec>> =
            specs.iter().map(|(id, spec, phase)| Desired { id, spec, phase: *phase }).collect();

        // Each round applies what the kernel allows now; the next dump shows the result.
        let now = ctx.now();
        let name = self.name();
        // Failed specs, and attributes the kernel refused (the link's other settings still
        // go ahead), across the rounds.
        let mut out = Outcome::default();
        let mut differing: Vec<OpKey>;
        let mut rounds = 0;
        let mut kernel;
        let plan = loop {
            kernel = self.host.borrow_mut().links()?;
            let mut plan = plan_links(&desired, &kernel);
            differing = SpecApply::<Links>::keys(&plan.ops);
            // A spec or attribute that failed is retried by the next reconcile (with
            // backoff), not here; a contested one when its hold ends.
            plan.ops.retain(|(id, op)| {
                let key = Links::key(id, op);
                !out.failed(id) && !out.refused.contains(&key) && !self.apply.held(id, op, now)
            });
            if plan.ops.is_empty() || rounds == MAX_ROUNDS {
                break plan;
            }
            rounds += 1;
            self.apply.apply(name, &self.host, now, &plan.ops, &mut out);
        };
        self.apply.settle(name, differing, now, &mut out);
        let mut errors = std::mem::take(&mut out.errors);

        let written = self.apply_wireguard(&specs, &kernel, &mut errors);
        if !written.is_empty() {
            // No netlink event follows a WireGuard change: tell the status controller.
            self.refreshes += 1;
            let refresh = LinkRefresh { generation: self.refreshes };
            ctx.put(Namespace::Network, LINK_REFRESH_WIREGUARD, refresh)?;
        }
        for w in &written {
            let text = || w.clone();
            let key = OpKey::of_text(w);
            let applied =
                Applied { key, value: Some(hash_of(w.as_str())), name: &text, detail: &text };
            self.wireguard_repeats.applied(name, applied, now);
        }
        errors.extend(self.wireguard_repeats.settle(name, Vec::new(), now));

        let pending: BTreeSet<&str> = plan.ops.iter().map(|(id, _)| id.as_str()).collect();
        let add: IdList = plan.applied.iter().filter(|id| !out.failed(id)).collect();
        let release = out.to_release(&plan.released, |id| pending.contains(id));
        apply::write_finalizers(ctx, Kind::LinkSpec, &add, &release)?;
        let waiting: Vec<String> =
            plan.waiting.iter().map(|(id, why)| format!("{id} ({why})")).collect();
        let mut next = self.apply.report(ctx, &waiting);
        if !pending.is_empty() {
            let list = pending.iter().copied().collect::<Vec<_>>().join(", ");
            let message = format!("not converged after {MAX_ROUNDS} rounds: {list}");
            log::warn!(target: self.name(), "{message}");
            ctx.set_condition(Some(message));
            let retry = ctx.now() + UNCONVERGED_RETRY;
            next = match next {
                Next::At(t) => Next::At(t.min(retry)),
                Next::Idle => Next::At(retry),
            };
        }
        first_error(self.name(), errors, next)
    }
}

pub mod wireguard;

#[cfg(test)]
mod tests;
