// SPDX-License-Identifier: Apache-2.0
//! The discovery state: clusters of affiliates, each with an opaque data blob and a set of
//! opaque endpoint blobs that expire on their own, and the watchers of each cluster.
//!
//! Pure: every call is given the current time, so expiry is tested without sleeping. The
//! blobs are ciphertext the server cannot read; they are stored, compared byte for byte and
//! handed back unchanged.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Pending notifications one watcher may hold before it is dropped as too slow.
pub const WATCH_QUEUE: usize = 32;

/// Bounds on what clients may store. The first seven are the protocol's own (a Talos node
/// stays well inside them); the last two bound this server's memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Longest cluster or affiliate ID, in bytes (the shortest is 1).
    pub id_max: usize,
    /// Largest affiliate data blob.
    pub data_max: usize,
    /// Largest endpoint blob.
    pub endpoint_max: usize,
    /// Longest TTL a request may ask for.
    pub ttl_max: Duration,
    /// Affiliates in one cluster.
    pub affiliates_per_cluster: usize,
    /// Distinct endpoints of one affiliate.
    pub endpoints_per_affiliate: usize,
    /// Clusters held at once.
    pub clusters: usize,
    /// Watchers of one cluster.
    pub watchers_per_cluster: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            id_max: 256,
            data_max: 2048,
            endpoint_max: 32,
            ttl_max: Duration::from_secs(30 * 60),
            affiliates_per_cluster: 1024,
            endpoints_per_affiliate: 64,
            clusters: 100_000,
            watchers_per_cluster: 4096,
        }
    }
}

impl Limits {
    /// An upper bound on one affiliate as a List or Watch answer carries it: its ID, data
    /// and endpoints with their protobuf tags and lengths (at most 3 bytes each for blobs
    /// this small), the framing of the record, and the gRPC message prefix.
    pub fn affiliate_wire_max(&self) -> usize {
        let blob = |n: usize| n.saturating_add(1 + 3);
        blob(self.id_max)
            .saturating_add(blob(self.data_max))
            .saturating_add(self.endpoints_per_affiliate.saturating_mul(blob(self.endpoint_max)))
            .saturating_add(1 + 5 + 16)
    }

    /// An upper bound on a whole cluster as one answer (List, or a Watch's first message).
    pub fn cluster_wire_max(&self) -> usize {
        self.affiliates_per_cluster.saturating_mul(self.affiliate_wire_max()).saturating_add(16)
    }
}

/// gRPC status codes this server returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// 3: the request breaks a protocol bound.
    InvalidArgument = 3,
    /// 8: a limit of the cluster, the server or the caller's address is reached.
    ResourceExhausted = 8,
    /// 10: a watcher fell too far behind.
    Aborted = 10,
}

/// Why a request was refused. The messages are the protocol's wording, which clients log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    #[error("cluster ID can't be empty")]
    ClusterIdEmpty,
    #[error("cluster ID is too long")]
    ClusterIdTooLong,
    #[error("affiliate ID can't be empty")]
    AffiliateIdEmpty,
    #[error("affiliate ID is too long")]
    AffiliateIdTooLong,
    #[error("affiliate data is too big")]
    DataTooBig,
    #[error("affiliate endpoint is too big")]
    EndpointTooBig,
    #[error("ttl is too large")]
    TtlTooLarge,
    #[error("too many affiliates in the cluster")]
    TooManyAffiliates,
    #[error("too many endpoints in the affiliate")]
    TooManyEndpoints,
    #[error("too many clusters")]
    TooManyClusters,
    #[error("too many watchers of the cluster")]
    TooManyWatchers,
}

impl RegistryError {
    /// The gRPC status code the error travels as.
    pub fn code(&self) -> Code {
        match self {
            RegistryError::TooManyAffiliates
            | RegistryError::TooManyEndpoints
            | RegistryError::TooManyClusters
            | RegistryError::TooManyWatchers => Code::ResourceExhausted,
            _ => Code::InvalidArgument,
        }
    }
}

/// What a watcher is told: an affiliate's whole current state, or that it is gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The affiliate's ID.
    pub id: String,
    /// True when the affiliate was removed; `data` and `endpoints` are then empty.
    pub deleted: bool,
    /// Its data blob (empty when only endpoints were reported for it).
    pub data: Vec<u8>,
    /// Its endpoint blobs in the order they were first stored.
    pub endpoints: Vec<Vec<u8>>,
}

/// A watcher's subscription handle.
pub type WatchId = u64;

/// A watcher fell more than [`WATCH_QUEUE`] notifications behind and was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("subscription canceled: lost update")]
pub struct LostUpdate;

/// One AffiliateUpdate request, already decoded.
#[derive(Debug, Clone, Copy)]
pub struct Update<'a> {
    pub cluster: &'a str,
    pub affiliate: &'a str,
    /// Empty means "keep the stored data".
    pub data: &'a [u8],
    pub endpoints: &'a [Vec<u8>],
    /// How long what this request submits lives (a negative TTL arrives here as zero).
    pub ttl: Duration,
}

/// Totals for the stats endpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub clusters: usize,
    pub affiliates: usize,
    pub endpoints: usize,
    pub watchers: usize,
    /// Bytes of IDs, data and endpoints held.
    pub bytes: usize,
}

/// An affiliate as saved to disk: what it holds and how long each part has left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedAffiliate {
    pub id: String,
    pub data: Vec<u8>,
    pub ttl: Duration,
    pub endpoints: Vec<(Vec<u8>, Duration)>,
}

/// A cluster as saved to disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedCluster {
    pub id: String,
    pub affiliates: Vec<SavedAffiliate>,
}

#[derive(Debug)]
struct Endpoint {
    blob: Vec<u8>,
    expires: Instant,
}

#[derive(Debug)]
struct Affiliate {
    data: Vec<u8>,
    expires: Instant,
    endpoints: Vec<Endpoint>,
}

impl Affiliate {
    fn event(&self, id: &str) -> Event {
        Event {
            id: id.to_owned(),
            deleted: false,
            data: self.data.clone(),
            endpoints: self.endpoints.iter().map(|e| e.blob.clone()).collect(),
        }
    }
}

#[derive(Debug, Default)]
struct Cluster {
    affiliates: BTreeMap<String, Affiliate>,
    watchers: Vec<WatchId>,
}

#[derive(Debug)]
struct Watcher {
    cluster: String,
    queue: VecDeque<Arc<Event>>,
    lost: bool,
    woken: bool,
}

/// All clusters and watchers.
#[derive(Debug, Default)]
pub struct Registry {
    limits: Limits,
    clusters: HashMap<String, Cluster>,
    watchers: HashMap<WatchId, Watcher>,
    next_watch: WatchId,
    woken: Vec<WatchId>,
}

impl Registry {
    pub fn new(limits: Limits) -> Self {
        Registry { limits, ..Registry::default() }
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Check a cluster ID as every call does.
    pub fn check_cluster_id(&self, id: &str) -> Result<(), RegistryError> {
        if id.is_empty() {
            Err(RegistryError::ClusterIdEmpty)
        } else if id.len() > self.limits.id_max {
            Err(RegistryError::ClusterIdTooLong)
        } else {
            Ok(())
        }
    }

    fn check_affiliate_id(&self, id: &str) -> Result<(), RegistryError> {
        if id.is_empty() {
            Err(RegistryError::AffiliateIdEmpty)
        } else if id.len() > self.limits.id_max {
            Err(RegistryError::AffiliateIdTooLong)
        } else {
            Ok(())
        }
    }

    fn cluster_mut(&mut self, id: &str) -> Result<&mut Cluster, RegistryError> {
        if !self.clusters.contains_key(id) && self.clusters.len() >= self.limits.clusters {
            return Err(RegistryError::TooManyClusters);
        }
        Ok(self.clusters.entry(id.to_owned()).or_default())
    }

    /// Create or update an affiliate: new data replaces the old (and sets the expiry, which may
    /// shorten it); endpoints are merged by their bytes, a known one only has its expiry
    /// extended; the affiliate lives at least as long as anything this request submitted.
    pub fn update(&mut self, u: &Update<'_>, now: Instant) -> Result<(), RegistryError> {
        self.check_cluster_id(u.cluster)?;
        self.check_affiliate_id(u.affiliate)?;
        if u.data.len() > self.limits.data_max {
            return Err(RegistryError::DataTooBig);
        }
        if u.endpoints.iter().any(|e| e.len() > self.limits.endpoint_max) {
            return Err(RegistryError::EndpointTooBig);
        }
        if u.ttl > self.limits.ttl_max {
            return Err(RegistryError::TtlTooLarge);
        }
        let limits = self.limits.clone();
        let expires = now + u.ttl;
        let cluster = self.cluster_mut(u.cluster)?;
        let created = !cluster.affiliates.contains_key(u.affiliate);
        if created && cluster.affiliates.len() >= limits.affiliates_per_cluster {
            return Err(RegistryError::TooManyAffiliates);
        }
        let affiliate = cluster
            .affiliates
            .entry(u.affiliate.to_owned())
            .or_insert_with(|| Affiliate { data: Vec::new(), expires: now, endpoints: Vec::new() });
        let mut changed = created;
        if !u.data.is_empty() {
            // Identical bytes still count: every refresh is re-broadcast, as clients expect.
            affiliate.data = u.data.to_vec();
            affiliate.expires = expires;
            changed = true;
        }
        let mut result = Ok(());
        for blob in u.endpoints {
            if let Some(known) = affiliate.endpoints.iter_mut().find(|e| &e.blob == blob) {
                known.expires = known.expires.max(expires);
            } else if affiliate.endpoints.len() >= limits.endpoints_per_affiliate {
                // What was merged before the limit stays, as does a record just created.
                result = Err(RegistryError::TooManyEndpoints);
                break;
            } else {
                affiliate.endpoints.push(Endpoint { blob: blob.clone(), expires });
                changed = true;
            }
        }
        // Endpoint-only reports (a node publishing what it saw of a peer) keep the record alive.
        affiliate.expires = affiliate.expires.max(expires);
        if changed {
            let event = affiliate.event(u.affiliate);
            let watchers = cluster.watchers.clone();
            self.notify(u.cluster, &watchers, event);
        }
        result
    }

    /// Remove an affiliate; removing one that does not exist succeeds.
    pub fn delete(&mut self, cluster_id: &str, affiliate_id: &str) -> Result<(), RegistryError> {
        self.check_cluster_id(cluster_id)?;
        self.check_affiliate_id(affiliate_id)?;
        let Some(cluster) = self.clusters.get_mut(cluster_id) else {
            return Ok(());
        };
        if cluster.affiliates.remove(affiliate_id).is_some() {
            let watchers = cluster.watchers.clone();
            self.notify(cluster_id, &watchers, deleted(affiliate_id));
        }
        Ok(())
    }

    /// Every affiliate of a cluster, data-less ones included, ordered by ID.
    pub fn list(&self, cluster_id: &str) -> Result<Vec<Event>, RegistryError> {
        self.check_cluster_id(cluster_id)?;
        Ok(self
            .clusters
            .get(cluster_id)
            .map(|c| c.affiliates.iter().map(|(id, a)| a.event(id)).collect())
            .unwrap_or_default())
    }

    /// Take a snapshot of a cluster and subscribe to its changes in one step, so that no
    /// change falls between the two.
    pub fn watch(&mut self, cluster_id: &str) -> Result<(WatchId, Vec<Event>), RegistryError> {
        self.check_cluster_id(cluster_id)?;
        let per_cluster = self.limits.watchers_per_cluster;
        let id = self.next_watch;
        let cluster = self.cluster_mut(cluster_id)?;
        if cluster.watchers.len() >= per_cluster {
            return Err(RegistryError::TooManyWatchers);
        }
        let snapshot = cluster.affiliates.iter().map(|(id, a)| a.event(id)).collect();
        cluster.watchers.push(id);
        self.next_watch += 1;
        self.watchers.insert(
            id,
            Watcher {
                cluster: cluster_id.to_owned(),
                queue: VecDeque::new(),
                lost: false,
                woken: false,
            },
        );
        Ok((id, snapshot))
    }

    /// The watcher's next notification, `Err` once it has lost one (the watcher is then
    /// gone), `None` when nothing is pending or the watcher is unknown.
    pub fn next_event(&mut self, id: WatchId) -> Option<Result<Arc<Event>, LostUpdate>> {
        let watcher = self.watchers.get_mut(&id)?;
        if watcher.lost {
            self.watchers.remove(&id);
            return Some(Err(LostUpdate));
        }
        watcher.queue.pop_front().map(Ok)
    }

    /// End a subscription (the stream closed).
    pub fn unwatch(&mut self, id: WatchId) {
        if let Some(w) = self.watchers.remove(&id) {
            if let Some(c) = self.clusters.get_mut(&w.cluster) {
                c.watchers.retain(|&x| x != id);
            }
        }
    }

    /// Watchers that were given something since the last call, each once.
    pub fn take_woken(&mut self) -> Vec<WatchId> {
        let woken = std::mem::take(&mut self.woken);
        for id in &woken {
            if let Some(w) = self.watchers.get_mut(id) {
                w.woken = false;
            }
        }
        woken
    }

    /// Queue an event for every watcher of a cluster. A full queue drops its watcher instead
    /// of waiting for it: a slow reader never holds back the others or the server.
    fn notify(&mut self, cluster_id: &str, watchers: &[WatchId], event: Event) {
        let event = Arc::new(event);
        let mut dropped = Vec::new();
        for id in watchers {
            let Some(w) = self.watchers.get_mut(id) else {
                continue;
            };
            if w.queue.len() >= WATCH_QUEUE {
                w.lost = true;
                w.queue.clear();
                dropped.push(*id);
            } else {
                w.queue.push_back(Arc::clone(&event));
            }
            if !w.woken {
                w.woken = true;
                self.woken.push(*id);
            }
        }
        if !dropped.is_empty() {
            if let Some(c) = self.clusters.get_mut(cluster_id) {
                c.watchers.retain(|x| !dropped.contains(x));
            }
        }
    }

    /// Drop what has expired: a whole affiliate (its watchers are told it is deleted) or
    /// single endpoints (its watchers are sent its remaining state). Clusters with neither
    /// affiliates nor watchers go too. Returns how many affiliates were removed.
    pub fn gc(&mut self, now: Instant) -> usize {
        let mut events: Vec<(String, Vec<WatchId>, Event)> = Vec::new();
        let mut removed = 0;
        self.clusters.retain(|cluster_id, cluster| {
            cluster.affiliates.retain(|id, a| {
                if a.expires <= now {
                    events.push((cluster_id.clone(), cluster.watchers.clone(), deleted(id)));
                    removed += 1;
                    return false;
                }
                let before = a.endpoints.len();
                a.endpoints.retain(|e| e.expires > now);
                if a.endpoints.len() != before {
                    events.push((cluster_id.clone(), cluster.watchers.clone(), a.event(id)));
                }
                true
            });
            !cluster.affiliates.is_empty() || !cluster.watchers.is_empty()
        });
        for (cluster_id, watchers, event) in events {
            self.notify(&cluster_id, &watchers, event);
        }
        removed
    }

    /// Counts and bytes held.
    pub fn totals(&self) -> Totals {
        let mut t = Totals {
            clusters: self.clusters.len(),
            watchers: self.watchers.len(),
            ..Totals::default()
        };
        for (cid, c) in &self.clusters {
            t.bytes += cid.len();
            for (id, a) in &c.affiliates {
                t.affiliates += 1;
                t.endpoints += a.endpoints.len();
                t.bytes += id.len()
                    + a.data.len()
                    + a.endpoints.iter().map(|e| e.blob.len()).sum::<usize>();
            }
        }
        t
    }

    /// Everything still alive, with the time each part has left.
    pub fn export(&self, now: Instant) -> Vec<SavedCluster> {
        let mut out: Vec<SavedCluster> = self
            .clusters
            .iter()
            .filter(|(_, c)| !c.affiliates.is_empty())
            .map(|(cid, c)| SavedCluster {
                id: cid.clone(),
                affiliates: c
                    .affiliates
                    .iter()
                    .filter(|(_, a)| a.expires > now)
                    .map(|(id, a)| SavedAffiliate {
                        id: id.clone(),
                        data: a.data.clone(),
                        ttl: a.expires - now,
                        endpoints: a
                            .endpoints
                            .iter()
                            .filter(|e| e.expires > now)
                            .map(|e| (e.blob.clone(), e.expires - now))
                            .collect(),
                    })
                    .collect(),
            })
            .collect();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        out
    }

    /// Load saved clusters into an empty registry. A saved record that breaks today's limits
    /// (the file may come from a server with other settings, or be damaged) is skipped and
    /// counted; TTLs are capped at the maximum. Returns (affiliates loaded, records skipped).
    pub fn import(&mut self, saved: Vec<SavedCluster>, now: Instant) -> (usize, usize) {
        let (mut loaded, mut skipped) = (0, 0);
        let limits = self.limits.clone();
        for c in saved {
            if self.check_cluster_id(&c.id).is_err() {
                skipped += c.affiliates.len().max(1);
                continue;
            }
            for a in c.affiliates {
                let ok = self.check_affiliate_id(&a.id).is_ok()
                    && a.data.len() <= limits.data_max
                    && a.endpoints.len() <= limits.endpoints_per_affiliate
                    && a.endpoints.iter().all(|(b, _)| b.len() <= limits.endpoint_max);
                let Ok(cluster) = self.cluster_mut(&c.id) else {
                    skipped += 1;
                    continue;
                };
                if !ok
                    || cluster.affiliates.contains_key(&a.id)
                    || cluster.affiliates.len() >= limits.affiliates_per_cluster
                {
                    skipped += 1;
                    continue;
                }
                let mut endpoints: Vec<Endpoint> = Vec::with_capacity(a.endpoints.len());
                for (blob, ttl) in a.endpoints {
                    if !endpoints.iter().any(|e| e.blob == blob) {
                        endpoints.push(Endpoint { blob, expires: now + ttl.min(limits.ttl_max) });
                    }
                }
                cluster.affiliates.insert(
                    a.id,
                    Affiliate { data: a.data, expires: now + a.ttl.min(limits.ttl_max), endpoints },
                );
                loaded += 1;
            }
        }
        (loaded, skipped)
    }
}

fn deleted(id: &str) -> Event {
    Event { id: id.to_owned(), deleted: true, data: Vec::new(), endpoints: Vec::new() }
}

#[cfg(test)]
#[path = "registry_tests.rs"]
mod tests;
