// SPDX-License-Identifier: Apache-2.0
//! The discovery service, driven by the node loop (docs/discovery.md). The client runs on a
//! thread of its own (the `discovery` crate) and reports through a socket pair the loop
//! watches. The loop tells it what to publish (the local affiliate, and with
//! `harvestExtraEndpoints` the endpoints this node sees its peers use), and writes what it
//! learns as raw affiliates (`cluster-raw`, `service/<nodeId>`) that the cluster controllers
//! merge. The last set learned is kept in the state directory and read back at start, so a
//! node that restarts while the service is away still finds its peers.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use discovery::{Command, Discovered, Event, Handle, LocalData, Target};
use evloop::Bell;
use ipnet::IpNet;
use net::config::MachineConfig;
use net::controllers::MACHINE_CONFIG_ID;
use net::resource::{
    Affiliate, AffiliateKubeSpan, ControlPlane, KubeSpanPeerStatus, Namespace, NodeAddress,
    NodeIdentity, PeerState, DISCOVERED_PUBLIC_ID, NODE_IDENTITY_ID, SERVICE_AFFILIATE_PREFIX,
};
use net::runtime::Runtime;

use crate::reactor::{Reactor, ReactorError};

/// Who writes the inputs.
const SOURCE: &str = "discovery";
/// Talos's default service.
pub const DEFAULT_ENDPOINT: &str = "https://discovery.talos.dev/";
/// What an affiliate lives for on the service unless configured (the service's maximum, as
/// Talos uses).
const TTL: Duration = Duration::from_secs(30 * 60);
/// How long an affiliate that left the service's list stays a peer. A service that restarts
/// empty lists nobody until the nodes publish again, a few seconds later: without this, every
/// tunnel would be torn down and rebuilt.
const GRACE: Duration = Duration::from_secs(60);
/// The cache of the last affiliates learned, in the state directory.
const CACHE_FILE: &str = "discovery-affiliates.yaml";
/// The cache is a few KiB per node; anything much larger is not ours. The one bound for both
/// sides: the writer leaves out what would take the file past it, so what is saved is always
/// read back.
const CACHE_LIMIT: u64 = 4 << 20;
/// Bounds on what one discovered affiliate may bring (the service caps endpoints at 64).
const MAX_LIST: usize = 64;
const MAX_NAME: usize = 253;
/// A Talos NodeID is 43 characters; IDs are used in resource IDs and logs.
const MAX_ID: usize = 64;
const CA_LIMIT: u64 = 4 << 20;

/// What the client is started with; a change restarts it.
#[derive(Clone, PartialEq, Eq)]
struct Wanted {
    endpoint: String,
    cluster_id: String,
    key: [u8; 32],
    node_id: String,
    ttl: Duration,
}

impl std::fmt::Debug for Wanted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        write!(f, "Wanted({}, node {})", self.endpoint, self.node_id)
    }
}

/// What the starter and client threads send back.
enum Msg {
    Started(u64, std::io::Result<Handle>),
    Event(u64, Event),
}

/// The discovery side of the node.
pub struct Discovery {
    wake: Bell,
    rx: Receiver<Msg>,
    tx: Sender<Msg>,
    /// The running client: what it was started with, its generation, its handle once up.
    client: Option<(Wanted, u64, Option<Handle>)>,
    generation: u64,
    published: Option<LocalData>,
    /// Raw affiliate IDs written, and their specs (for the cache).
    learned: BTreeMap<String, Affiliate>,
    /// Affiliates the service stopped listing, and since when (dropped after [`GRACE`]).
    vanished: BTreeMap<String, Instant>,
    /// How many the service listed last (said in the log when it changes).
    listed: Option<usize>,
    /// The learned set came from the cache, not the service (yet).
    from_cache: bool,
    cache: Option<PathBuf>,
    /// Affiliates the last cache write left out (said in the log when it changes).
    cache_left_out: usize,
    roots: Vec<PathBuf>,
    /// The NodeID when this process made it (`keelson run`), else the state thread's.
    own_node_id: Option<String>,
    node_id_put: bool,
    said_config: Option<String>,
}

impl std::fmt::Debug for Discovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Discovery")
            .field("client", &self.client.as_ref().map(|c| &c.0))
            .field("learned", &self.learned.len())
            .finish()
    }
}

impl Discovery {
    /// Watch the reports as `token`; read the cache under `state` (at start: before the loop).
    pub fn start(
        reactor: &Reactor,
        token: u64,
        state: Option<&Path>,
        roots: Vec<PathBuf>,
        own_node_id: Option<String>,
        rt: &mut Runtime,
    ) -> Result<Self, ReactorError> {
        let sys = |e: std::io::Error| ReactorError::Sys {
            what: "discovery socketpair",
            errno: nix::errno::Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
        };
        let wake = Bell::new().map_err(sys)?;
        reactor.add(wake.as_fd(), token)?;
        let (tx, rx) = mpsc::channel();
        let mut d = Self {
            wake,
            rx,
            tx,
            client: None,
            generation: 0,
            published: None,
            learned: BTreeMap::new(),
            vanished: BTreeMap::new(),
            listed: None,
            from_cache: false,
            cache: state.map(|s| s.join(CACHE_FILE)),
            cache_left_out: 0,
            roots,
            own_node_id,
            node_id_put: false,
            said_config: None,
        };
        d.load_cache(rt);
        Ok(d)
    }

    fn load_cache(&mut self, rt: &mut Runtime) {
        let Some(path) = &self.cache else { return };
        let Some(list) = read_cache(path) else { return };
        let list: BTreeMap<String, Affiliate> =
            list.into_iter().filter_map(sanitize).map(|a| (a.node_id.clone(), a)).collect();
        if list.is_empty() {
            return;
        }
        log::info!(target: "discovery", "{} affiliate(s) from the last run, until the service answers", list.len());
        self.replace(rt, list);
        self.from_cache = true;
    }

    /// When an affiliate's grace ends.
    pub fn poll_at(&self) -> Option<Instant> {
        self.vanished.values().min().map(|t| *t + GRACE)
    }

    /// Start, restart or stop the client as the config wants; drop affiliates whose grace
    /// ended.
    pub fn tick(&mut self, rt: &mut Runtime, now: Instant) {
        self.put_node_id(rt);
        let gone: Vec<String> = self
            .vanished
            .iter()
            .filter(|(_, since)| now >= **since + GRACE)
            .map(|(id, _)| id.clone())
            .collect();
        if !gone.is_empty() {
            let mut set = self.learned.clone();
            for id in &gone {
                log::info!(target: "discovery", "affiliate {id} left the service's list {} s ago: dropped", GRACE.as_secs());
                set.remove(id);
                self.vanished.remove(id);
            }
            self.replace(rt, set);
            self.save_cache();
        }
        let wanted = self.wanted(rt);
        let current = self.client.as_ref().map(|c| &c.0);
        if wanted.as_ref() != current {
            if let Some((old, _, _)) = self.client.take() {
                log::info!(target: "discovery", "client for {} stopped", old.endpoint);
            }
            self.published = None;
            if let Some(w) = wanted {
                self.spawn(w);
            } else if !self.from_cache {
                // Discovery turned off: what it taught goes, except a cache kept for a
                // service that is merely unreachable.
                self.replace(rt, BTreeMap::new());
            }
        }
    }

    fn put_node_id(&mut self, rt: &mut Runtime) {
        if self.node_id_put {
            return;
        }
        let id = match &self.own_node_id {
            Some(id) => id.clone(),
            None => crate::state::status().node_id,
        };
        if id.is_empty() {
            return;
        }
        match rt.put_input(
            SOURCE,
            Namespace::Cluster,
            NODE_IDENTITY_ID,
            NodeIdentity { node_id: id },
        ) {
            Ok(()) => self.node_id_put = true,
            Err(e) => log::warn!(target: "discovery", "node identity: {e}"),
        }
    }

    /// The client the config asks for, if any; says once why there is none.
    fn wanted(&mut self, rt: &Runtime) -> Option<Wanted> {
        let store = rt.store();
        let cfg = store.get_spec::<MachineConfig>(Namespace::Config, MACHINE_CONFIG_ID)?;
        if !kubespan::cluster::local::service_enabled(cfg) {
            return None;
        }
        let node_id =
            store.get_spec::<NodeIdentity>(Namespace::Cluster, NODE_IDENTITY_ID)?.node_id.clone();
        let cluster = cfg.cluster.as_ref()?;
        let endpoint = cluster
            .discovery
            .as_ref()
            .and_then(|d| d.registries.service.endpoint.clone())
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned());
        let why = match (&cluster.id, cluster.secret.as_deref().map(decode_key)) {
            (Some(id), Some(Some(key))) if !id.is_empty() => {
                self.said_config = None;
                let ttl = cluster
                    .discovery
                    .as_ref()
                    .and_then(|d| d.registries.service.ttl)
                    .unwrap_or(TTL);
                return Some(Wanted { endpoint, cluster_id: id.clone(), key, node_id, ttl });
            }
            (None, _) | (Some(_), None) => "cluster.id and cluster.secret are both needed",
            _ => "cluster.secret is not 32 bytes of base64",
        };
        if self.said_config.as_deref() != Some(why) {
            log::warn!(target: "discovery", "the discovery service is enabled but {why}: not started");
            self.said_config = Some(why.to_owned());
        }
        None
    }

    fn spawn(&mut self, w: Wanted) {
        let target = match Target::from_url(&w.endpoint) {
            Ok(t) => t,
            Err(e) => {
                log::error!(target: "discovery", "cluster.discovery.registries.service.endpoint: {e}");
                // Remembered, so the same bad value is not retried every iteration.
                self.client = Some((w, self.generation, None));
                return;
            }
        };
        self.generation += 1;
        let generation = self.generation;
        let (tx, roots) = (self.tx.clone(), self.roots.clone());
        let cfg = (w.cluster_id.clone(), w.node_id.clone(), w.key, w.ttl);
        let ring = self.wake.ringer();
        // Trust roots are files: read them here, not in the loop.
        let started = {
            evloop::spawn_worker("discovery-start", move || {
                let roots = Arc::new(net::tls_roots::load(&roots, CA_LIMIT).store);
                let (cluster_id, affiliate_id, key, ttl) = cfg;
                let config = discovery::Config {
                    target,
                    cluster_id,
                    affiliate_id,
                    key,
                    client_version: concat!("v", env!("CARGO_PKG_VERSION")).to_owned(),
                    ttl,
                    roots,
                };
                let (etx, ring2) = (tx.clone(), ring.clone());
                let notify: Box<dyn FnMut(Event) + Send> = Box::new(move |e| {
                    let _ = etx.send(Msg::Event(generation, e));
                    ring2.ring();
                });
                let handle = discovery::spawn(config, notify);
                let _ = tx.send(Msg::Started(generation, handle));
                ring.ring();
            })
        };
        match started {
            Ok(_) => {
                log::info!(target: "discovery", "client for {} starting", w.endpoint);
                self.client = Some((w, generation, None));
            }
            Err(e) => {
                log::error!(target: "discovery", "client thread: {e}");
                self.client = Some((w, generation, None));
            }
        }
    }

    /// Hand the client the local affiliate when it changed.
    pub fn publish(&mut self, rt: &Runtime) {
        let Some((w, _, Some(handle))) = &self.client else { return };
        let store = rt.store();
        let Some(local) = store.get_spec::<Affiliate>(Namespace::Cluster, &w.node_id) else {
            return;
        };
        let harvest = store
            .get_spec::<MachineConfig>(Namespace::Config, MACHINE_CONFIG_ID)
            .is_some_and(|c| c.machine.network.kubespan.harvest_extra_endpoints);
        let mut others: Vec<(String, Vec<SocketAddr>)> = Vec::new();
        if harvest {
            let by_key: BTreeMap<&str, &str> = store
                .list_specs::<Affiliate>(Namespace::Cluster)
                .filter_map(|(id, a)| {
                    let key = a.kubespan.as_ref()?.public_key.as_str();
                    (id != w.node_id).then_some((key, id))
                })
                .collect();
            for (key, st) in store.list_specs::<KubeSpanPeerStatus>(Namespace::KubeSpan) {
                if let (PeerState::Up, Some(ep), Some(id)) =
                    (st.state, st.endpoint, by_key.get(key))
                {
                    others.push(((*id).to_owned(), vec![ep]));
                }
            }
        }
        let data = LocalData {
            affiliate: to_wire(local),
            endpoints: local.kubespan.as_ref().map(|k| k.endpoints.clone()).unwrap_or_default(),
            others,
        };
        if self.published.as_ref() == Some(&data) {
            return;
        }
        if handle.send(Command::Publish(data.clone())) {
            self.published = Some(data);
        }
    }

    /// The socket pair is readable: take the reports.
    pub fn ready(&mut self, rt: &mut Runtime, now: Instant) {
        self.wake.drain();
        while let Ok(msg) = self.rx.try_recv() {
            let current = self.client.as_ref().map(|c| c.1);
            match msg {
                Msg::Started(g, Ok(handle)) if Some(g) == current => {
                    if let Some(c) = &mut self.client {
                        c.2 = Some(handle);
                    }
                }
                Msg::Started(g, Err(e)) if Some(g) == current => {
                    log::error!(target: "discovery", "client: {e}");
                }
                Msg::Event(g, event) if Some(g) == current => self.event(rt, event, now),
                // A stopped client's last words.
                _ => {}
            }
        }
        self.publish(rt);
    }

    fn event(&mut self, rt: &mut Runtime, event: Event, now: Instant) {
        match event {
            Event::Members(list) => {
                let mut set: BTreeMap<String, Affiliate> = list
                    .into_iter()
                    .filter_map(|d| sanitize(from_wire(d)))
                    .map(|a| (a.node_id.clone(), a))
                    .collect();
                if self.from_cache || Some(set.len()) != self.listed {
                    log::info!(target: "discovery", "{} affiliate(s) from the service", set.len());
                    self.listed = Some(set.len());
                }
                self.vanished.retain(|id, _| !set.contains_key(id));
                for (id, a) in &self.learned {
                    if !set.contains_key(id) {
                        self.vanished.entry(id.clone()).or_insert(now);
                        set.insert(id.clone(), a.clone());
                    }
                }
                self.from_cache = false;
                if set != self.learned {
                    self.replace(rt, set);
                    self.save_cache();
                }
            }
            Event::PublicIp(ip) => {
                let addr = NodeAddress { addresses: vec![IpNet::from(ip)] };
                if let Err(e) = rt.put_input(SOURCE, Namespace::Cluster, DISCOVERED_PUBLIC_ID, addr)
                {
                    log::warn!(target: "discovery", "public address: {e}");
                }
            }
            Event::Connected { endpoint } => {
                log::info!(target: "discovery", "connected to {}", net::names::escape(&endpoint, MAX_NAME));
            }
            Event::Error(line) => {
                log::warn!(target: "discovery", "{}", net::names::escape(&line, 512));
            }
        }
    }

    /// Make the raw affiliates exactly `set`.
    fn replace(&mut self, rt: &mut Runtime, set: BTreeMap<String, Affiliate>) {
        for id in self.learned.keys().filter(|id| !set.contains_key(*id)) {
            let raw = format!("{SERVICE_AFFILIATE_PREFIX}{id}");
            if let Err(e) =
                rt.remove_input(SOURCE, Namespace::ClusterRaw, net::resource::Kind::Affiliate, &raw)
            {
                log::warn!(target: "discovery", "affiliate {id}: {e}");
            }
        }
        for (id, a) in &set {
            if self.learned.get(id) == Some(a) {
                continue;
            }
            let raw = format!("{SERVICE_AFFILIATE_PREFIX}{id}");
            if let Err(e) = rt.put_input(SOURCE, Namespace::ClusterRaw, &raw, a.clone()) {
                log::warn!(target: "discovery", "affiliate {id}: {e}");
            }
        }
        self.learned = set;
    }

    /// Keep the set for the next start (a small file in the state directory).
    fn save_cache(&mut self) {
        let Some(path) = &self.cache else { return };
        let (text, left_out) = cache_text(&self.learned);
        if left_out != self.cache_left_out {
            if left_out > 0 {
                log::warn!(target: "discovery", "{}: {left_out} affiliate(s) left out to keep the cache within {CACHE_LIMIT} bytes", path.display());
            }
            self.cache_left_out = left_out;
        }
        if let Err(e) = crate::api::trial::write_back(path, &text) {
            log::warn!(target: "discovery", "{}: {e}", path.display());
        }
    }
}

/// The cache file's text: as many affiliates (in ID order) as fit [`CACHE_LIMIT`], the bound
/// it is read back with, and how many did not fit.
fn cache_text(learned: &BTreeMap<String, Affiliate>) -> (String, usize) {
    let mut text = String::new();
    let mut left_out = 0;
    for a in learned.values() {
        // Each affiliate as a one-item YAML list: concatenated, the items make the list.
        match serde_yaml::to_string(&[a]) {
            Ok(item) if (text.len() + item.len()) as u64 <= CACHE_LIMIT => text.push_str(&item),
            Ok(_) => left_out += 1,
            Err(e) => {
                log::warn!(target: "discovery", "cache: affiliate {}: {e}", a.node_id);
                left_out += 1;
            }
        }
    }
    if text.is_empty() {
        text.push_str("[]\n");
    }
    (text, left_out)
}

/// The affiliates of the cache file; None (with one log line unless there is no file) when
/// it cannot be used.
fn read_cache(path: &Path) -> Option<Vec<Affiliate>> {
    let text = match net::bounded::read_text(path, CACHE_LIMIT) {
        Ok(t) => t,
        Err(net::bounded::ReadError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            return None;
        }
        Err(e) => {
            log::warn!(target: "discovery", "{}: {e}; ignored", path.display());
            return None;
        }
    };
    match serde_yaml::from_str(&text) {
        Ok(l) => Some(l),
        Err(e) => {
            log::warn!(target: "discovery", "{}: not a list of affiliates ({e}); ignored", path.display());
            None
        }
    }
}

/// `cluster.secret` as the 32-byte key.
fn decode_key(secret: &str) -> Option<[u8; 32]> {
    // Talos's cluster secret is 32 random bytes in base64, the same form as a WireGuard key.
    net::wgkey::Key::from_base64(secret).ok().map(|k| k.0)
}

/// A discovered affiliate as the resource, endpoints inside its KubeSpan part (Talos's form).
fn from_wire(d: Discovered) -> Affiliate {
    let a = d.affiliate;
    let kubespan = a.kubespan.map(|k| AffiliateKubeSpan {
        public_key: k.public_key,
        address: k.address,
        additional_addresses: k.additional_addresses,
        endpoints: d.endpoints.clone(),
        exclude_advertised_networks: k.exclude_advertised_addresses,
    });
    Affiliate {
        node_id: if a.node_id.is_empty() { d.id } else { a.node_id },
        addresses: a.addresses,
        hostname: a.hostname,
        nodename: a.nodename,
        machine_type: a.machine_type,
        operating_system: a.operating_system,
        kubespan,
        control_plane: a.control_plane.and_then(|c| {
            u16::try_from(c.api_server_port).ok().map(|p| ControlPlane { api_server_port: p })
        }),
    }
}

/// The local affiliate as the wire form.
fn to_wire(a: &Affiliate) -> discovery::Affiliate {
    discovery::Affiliate {
        node_id: a.node_id.clone(),
        addresses: a.addresses.clone(),
        hostname: a.hostname.clone(),
        nodename: a.nodename.clone(),
        machine_type: a.machine_type.clone(),
        operating_system: a.operating_system.clone(),
        kubespan: a.kubespan.as_ref().map(|k| discovery::KubeSpan {
            public_key: k.public_key.clone(),
            address: k.address,
            additional_addresses: k.additional_addresses.clone(),
            exclude_advertised_addresses: k.exclude_advertised_networks.clone(),
        }),
        control_plane: a
            .control_plane
            .map(|c| discovery::ControlPlane { api_server_port: u32::from(c.api_server_port) }),
    }
}

/// What another node says is hostile until checked: the ID must be a plain token (it goes
/// into resource IDs), names are escaped and bounded, lists bounded, and a KubeSpan part
/// needs a real WireGuard key.
fn sanitize(mut a: Affiliate) -> Option<Affiliate> {
    let id_ok = !a.node_id.is_empty()
        && a.node_id.len() <= MAX_ID
        && a.node_id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !id_ok {
        log::warn!(target: "discovery", "an affiliate with an unusable ID ({}) is ignored", net::names::escape(&a.node_id, MAX_ID));
        return None;
    }
    for s in [&mut a.hostname, &mut a.nodename, &mut a.machine_type, &mut a.operating_system] {
        *s = net::names::escape(s, MAX_NAME);
    }
    a.addresses.truncate(MAX_LIST);
    if let Some(k) = &mut a.kubespan {
        if net::wgkey::Key::from_base64(&k.public_key).is_err() {
            log::warn!(target: "discovery", "affiliate {}: not a WireGuard public key; no KubeSpan peer", a.node_id);
            a.kubespan = None;
        } else {
            k.additional_addresses.truncate(MAX_LIST);
            k.endpoints.truncate(MAX_LIST);
            k.exclude_advertised_networks.truncate(MAX_LIST);
            k.endpoints.retain(|e| !e.ip().is_unspecified() && e.port() != 0);
            if k.address.is_some_and(|ip| !IpAddr::V6(ip).is_ipv6()) {
                k.address = None;
            }
        }
    }
    Some(a)
}

/// The reports' socket pair, watched from the start (key 0).
impl evloop::EventSource<Runtime> for Discovery {
    fn take_new_keys(&mut self) -> Vec<u64> {
        Vec::new()
    }

    fn fd(&self, key: u64) -> Option<std::os::fd::BorrowedFd<'_>> {
        (key == 0).then(|| self.wake.as_fd())
    }

    fn ready(&mut self, _key: u64, rt: &mut Runtime, now: Instant) {
        Discovery::ready(self, rt, now);
    }

    fn poll_at(&self) -> Option<Instant> {
        Discovery::poll_at(self)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn hostile_affiliates_are_bounded_escaped_or_dropped() {
        let bad_id = Affiliate { node_id: "../../etc".into(), ..Default::default() };
        assert!(sanitize(bad_id).is_none());
        let a = Affiliate {
            node_id: "Node1".into(),
            hostname: "evil\u{1b}[2J".into(),
            addresses: (0..200).map(|i| IpAddr::from([10, 0, 0, i as u8])).collect(),
            kubespan: Some(AffiliateKubeSpan { public_key: "nope".into(), ..Default::default() }),
            ..Default::default()
        };
        let a = sanitize(a).unwrap();
        assert!(!a.hostname.contains('\u{1b}'), "{}", a.hostname);
        assert_eq!(a.addresses.len(), MAX_LIST);
        assert!(a.kubespan.is_none(), "a bad key makes no peer");
    }

    /// An affiliate as large as [`sanitize`] lets one be: 64 of every list.
    fn big_affiliate(i: usize) -> Affiliate {
        let v6 = |j: usize| {
            IpAddr::from([0x2001, 0xdb8, 0x1234, i as u16, 0x5678, 0x9abc, 0xdef0, j as u16])
        };
        Affiliate {
            node_id: format!("node-{i:04}-with-a-talos-sized-identifier-abcdefghij"),
            addresses: (0..MAX_LIST).map(v6).collect(),
            hostname: format!("host-{i}.a-long-domain-name.example.com"),
            nodename: format!("host-{i}"),
            kubespan: Some(AffiliateKubeSpan {
                public_key: "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI=".into(),
                address: None,
                additional_addresses: (0..MAX_LIST).map(|j| IpNet::from(v6(j))).collect(),
                endpoints: (0..MAX_LIST).map(|j| SocketAddr::new(v6(j), 51820)).collect(),
                exclude_advertised_networks: Vec::new(),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_cache_written_is_always_read_back() {
        let learned: BTreeMap<String, Affiliate> =
            (0..1024).map(big_affiliate).map(|a| (a.node_id.clone(), a)).collect();
        let (text, left_out) = cache_text(&learned);
        assert!(text.len() as u64 <= CACHE_LIMIT, "{} bytes", text.len());
        let dir = std::env::temp_dir().join(format!("keelson-dcache-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(CACHE_FILE);
        std::fs::write(&path, &text).unwrap();
        let back = read_cache(&path);
        assert!(back.is_some(), "the cache written is read back");
        let back = back.unwrap();
        assert!(!back.is_empty());
        assert_eq!(back.len() + left_out, learned.len());
        assert_eq!(back[0], learned.values().next().unwrap().clone());
        // A small set is written whole; an empty one is an empty list.
        let few: BTreeMap<String, Affiliate> =
            (0..3).map(big_affiliate).map(|a| (a.node_id.clone(), a)).collect();
        let (text, left_out) = cache_text(&few);
        assert_eq!(left_out, 0);
        let list: Vec<Affiliate> = serde_yaml::from_str(&text).unwrap();
        assert_eq!(list, few.values().cloned().collect::<Vec<_>>());
        let (text, _) = cache_text(&BTreeMap::new());
        assert!(serde_yaml::from_str::<Vec<Affiliate>>(&text).unwrap().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn secrets_decode_to_32_bytes_only() {
        assert!(decode_key("c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI=").is_some());
        assert!(decode_key("c2hvcnQ=").is_none());
        assert!(decode_key("!!!").is_none());
    }
}
