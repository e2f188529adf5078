// SPDX-License-Identifier: Apache-2.0
//! The shared VIPs of a control plane: one worker thread per `vip/<link>/<ip>` operator spec
//! runs the election (`crate::vip`) against the local etcd once it is healthy (Talos's
//! precondition too). The worker asks the loop to add or remove the address, which the loop
//! does as an operator-layer AddressSpec (`<ip>/32` or `/128`, as Talos) and acknowledges;
//! the worker sends the announcements itself (ARP request and reply, or an unsolicited NA,
//! three times a second apart).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use ipnet::IpNet;
use net::operator::announce::{Announcer, Schedule};
use net::operator::vip::{election_name, Event, Timings, Vip};
use net::resource::{
    layered_id, operator_output_id, vip_status_id, AddressSpec, ConfigLayer, Kind, LinkStatus,
    Namespace, OperatorSpec, Rfc3339, VipStatus,
};
use runtime::Runtime;

use crate::machine::SOURCE;
use crate::vip::{Driver, Holder};
use crate::vip_state::Campaign;

/// A worker's state change, for the `VIPStatus` resource.
struct Report {
    campaign: Campaign,
    holder: Option<String>,
    since: SystemTime,
}

/// What a worker asks of the loop.
enum Ask {
    Add,
    Remove,
}

/// How long a worker waits for the loop to act on an ask.
const ACK_WAIT: Duration = Duration::from_secs(1);
/// How often the loop looks at the workers' asks while any runs.
const POLL: Duration = Duration::from_millis(50);

struct LoopHolder {
    asks: Sender<Ask>,
    acks: Receiver<()>,
    announcer: Option<Arc<Announcer>>,
    vip: IpAddr,
    /// Cleared when the address goes: pending announcements of it are dropped.
    holding: Arc<AtomicBool>,
    /// How many times each announcement goes out.
    repeats: u32,
    reports: Sender<Report>,
}

impl LoopHolder {
    fn ask(&mut self, a: Ask) -> bool {
        // Drop a late ack of an earlier ask.
        while self.acks.try_recv().is_ok() {}
        self.asks.send(a).is_ok() && self.acks.recv_timeout(ACK_WAIT).is_ok()
    }
}

impl Holder for LoopHolder {
    fn add(&mut self) {
        if !self.ask(Ask::Add) {
            log::warn!(target: "vip", "{}: the node did not add the address in time", self.vip);
        }
        self.holding.store(true, Ordering::Relaxed);
    }

    fn remove(&mut self) -> bool {
        self.holding.store(false, Ordering::Relaxed);
        self.ask(Ask::Remove)
    }

    /// The repeats go out from a thread of their own, on time whatever etcd calls the
    /// election worker is blocked in. One racing the address's removal still goes at least
    /// the fence margin before anyone else can win.
    fn announce(&mut self) {
        let Some(announcer) = self.announcer.clone() else { return };
        let (vip, holding, repeats) = (self.vip, self.holding.clone(), self.repeats);
        let spawned = evloop::spawn_worker("vip-announce", move || {
            let origin = Instant::now();
            let mut schedule = Schedule::repeating(Duration::ZERO, repeats);
            while let Some(at) = schedule.deadline() {
                #[allow(clippy::disallowed_methods)] // A worker, not the loop.
                std::thread::sleep(at.saturating_sub(origin.elapsed()));
                if !holding.load(Ordering::Relaxed) {
                    return;
                }
                if schedule.due(origin.elapsed()) {
                    if let Err(e) = announcer.announce(vip) {
                        log::warn!(target: "vip", "announce {vip}: {e}");
                    }
                }
            }
        });
        if let Err(e) = spawned {
            log::warn!(target: "vip", "announce {vip}: {e}");
        }
    }

    fn report(&mut self, campaign: &Campaign, holder: Option<&str>, since: SystemTime) {
        let r = Report { campaign: campaign.clone(), holder: holder.map(str::to_owned), since };
        let _ = self.reports.send(r);
    }
}

/// The environment variable that overrides the election's timings (docs/config.md). PID 1
/// gets it from the kernel command line (`KEELSON_VIP_TIMINGS=talos`).
pub const TIMINGS_ENV: &str = "KEELSON_VIP_TIMINGS";

/// The timings from [`TIMINGS_ENV`], or the defaults (with one warning when it is bad).
fn timings() -> Timings {
    let Ok(v) = std::env::var(TIMINGS_ENV) else { return Timings::default() };
    Timings::parse(&v).unwrap_or_else(|e| {
        log::warn!(target: "vip", "{TIMINGS_ENV}: {e}; using the defaults");
        Timings::default()
    })
}

struct Worker {
    link: String,
    ip: IpAddr,
    asks: Receiver<Ask>,
    acks: Sender<()>,
    events: Sender<Event>,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
    started: bool,
    holding: bool,
    reports: Receiver<Report>,
}

/// Every VIP's worker.
#[derive(Default)]
pub struct Vips {
    workers: BTreeMap<String, Worker>,
    stopping: bool,
    /// The `VIPStatus` last written per spec ID.
    statuses: BTreeMap<String, VipStatus>,
}

impl std::fmt::Debug for Vips {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vips").field("workers", &self.workers.len()).finish()
    }
}

/// What the workers need of the node.
pub struct Setup<'a> {
    /// The node's hostname (the election value).
    pub hostname: &'a str,
    /// etcd's CA and a certificate with client auth (the peer one) and its key.
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Vips {
    /// Follow the VIP specs; `etcd` is `Some` while the local etcd is running and healthy;
    /// `control_plane`: the config makes this node one.
    pub fn sync(&mut self, rt: &mut Runtime, etcd: Option<Setup<'_>>, control_plane: bool) {
        self.serve(rt);
        if self.stopping {
            return;
        }
        let wanted: BTreeMap<String, (String, IpAddr)> = rt
            .store()
            .list_specs::<OperatorSpec>(Namespace::Network)
            .filter_map(|(id, o)| {
                o.vip.as_ref().map(|v| (id.to_owned(), (o.link_name.clone(), v.ip)))
            })
            .collect();
        // A VIP without a worker: say why nobody campaigns for it here.
        for (id, (link, ip)) in &wanted {
            if self.workers.contains_key(id) {
                continue;
            }
            let campaign =
                if control_plane { Campaign::WaitingForEtcd } else { Campaign::NotControlPlane };
            self.publish(
                rt,
                id,
                link,
                *ip,
                &Report { campaign, holder: None, since: SystemTime::now() },
            );
        }
        let unwanted: Vec<String> = self
            .statuses
            .keys()
            .filter(|id| !wanted.contains_key(*id) && !self.workers.contains_key(*id))
            .cloned()
            .collect();
        for id in unwanted {
            if let Some(st) = self.statuses.remove(&id) {
                let sid = vip_status_id(st.vip);
                let _ = rt.remove_input(SOURCE, Namespace::Network, Kind::VipStatus, &sid);
            }
        }
        let gone: Vec<String> =
            self.workers.keys().filter(|id| !wanted.contains_key(*id)).cloned().collect();
        for id in gone {
            if let Some(w) = self.workers.get(&id) {
                w.stop.store(true, Ordering::Relaxed);
            }
        }
        for (id, (link, ip)) in wanted {
            if let Some(w) = self.workers.get_mut(&id) {
                let event = match (&etcd, w.started) {
                    (Some(_), false) => Some(Event::Start),
                    (None, true) => Some(Event::EtcdDown),
                    _ => None,
                };
                if let Some(e) = event {
                    w.started = e == Event::Start;
                    if !w.started {
                        log::info!(target: "vip", "{id}: etcd stopped; the address goes");
                    }
                    let _ = w.events.send(e);
                }
                continue;
            }
            let Some(setup) = &etcd else { continue };
            match start(rt, &id, &link, ip, setup) {
                Ok(w) => {
                    self.workers.insert(id, w);
                }
                Err(e) => log::warn!(target: "vip", "{id}: {e}"),
            }
        }
        // Workers that ended (stopped, their spec gone) leave their address removed.
        let ended: Vec<String> = self
            .workers
            .iter()
            .filter(|(_, w)| w.done.load(Ordering::Relaxed))
            .map(|(id, _)| id.clone())
            .collect();
        for id in ended {
            if let Some(w) = self.workers.remove(&id) {
                if w.holding {
                    forget(rt, &id, &w.link, w.ip);
                }
            }
        }
    }

    /// Write `id`'s status when it differs from the last written (`since` only moves with the
    /// state).
    fn publish(&mut self, rt: &mut Runtime, id: &str, link: &str, ip: IpAddr, r: &Report) {
        let status = VipStatus {
            vip: ip,
            link_name: link.to_owned(),
            holding: r.campaign.holding(),
            holder: r.holder.clone().unwrap_or_default(),
            state: r.campaign.state().to_owned(),
            reason: r.campaign.reason(),
            since: Rfc3339(r.since).to_string(),
        };
        if let Some(old) = self.statuses.get(id) {
            if (VipStatus { since: old.since.clone(), ..status.clone() }) == *old {
                return;
            }
        }
        match rt.put_input(SOURCE, Namespace::Network, &vip_status_id(ip), status.clone()) {
            Ok(()) => {
                self.statuses.insert(id.to_owned(), status);
            }
            Err(e) => log::warn!(target: "vip", "{id}: status: {e}"),
        }
    }

    /// Act on the workers' asks, and write their state changes.
    fn serve(&mut self, rt: &mut Runtime) {
        let mut reports = Vec::new();
        for (id, w) in &self.workers {
            while let Ok(r) = w.reports.try_recv() {
                reports.push((id.clone(), w.link.clone(), w.ip, r));
            }
        }
        for (id, link, ip, r) in reports {
            self.publish(rt, &id, &link, ip, &r);
        }
        for (id, w) in &mut self.workers {
            while let Ok(ask) = w.asks.try_recv() {
                match ask {
                    Ask::Add => {
                        let spec =
                            AddressSpec::new(&w.link, IpNet::from(w.ip), ConfigLayer::Operator);
                        let rid =
                            layered_id(ConfigLayer::Operator, &operator_output_id(id, &spec.id()));
                        match rt.put_input(SOURCE, Namespace::NetworkConfig, &rid, spec) {
                            Ok(_) => {
                                log::info!(target: "vip", "{id}: this node holds {}", w.ip);
                                w.holding = true;
                            }
                            Err(e) => log::warn!(target: "vip", "{id}: {e}"),
                        }
                    }
                    Ask::Remove => {
                        forget(rt, id, &w.link, w.ip);
                        w.holding = false;
                    }
                }
                let _ = w.acks.send(());
            }
        }
    }

    /// Planned handover of every VIP (shutdown, reboot).
    pub fn shutdown(&mut self) {
        self.stopping = true;
        for w in self.workers.values() {
            w.stop.store(true, Ordering::Relaxed);
        }
    }

    /// Every worker let go (or there were none).
    pub fn is_stopped(&mut self, rt: &mut Runtime) -> bool {
        self.serve(rt);
        self.workers.retain(|_, w| !w.done.load(Ordering::Relaxed));
        self.workers.is_empty()
    }

    /// While workers run, their asks are looked at this often.
    pub fn poll_at(&self, now: Instant) -> Option<Instant> {
        (!self.workers.is_empty()).then_some(now + POLL)
    }
}

fn forget(rt: &mut Runtime, id: &str, link: &str, ip: IpAddr) {
    let spec = AddressSpec::new(link, IpNet::from(ip), ConfigLayer::Operator);
    let rid = layered_id(ConfigLayer::Operator, &operator_output_id(id, &spec.id()));
    if rt.remove_input(SOURCE, Namespace::NetworkConfig, Kind::AddressSpec, &rid).is_ok() {
        log::info!(target: "vip", "{id}: this node no longer holds {ip}");
    }
}

fn start(
    rt: &Runtime,
    id: &str,
    link: &str,
    ip: IpAddr,
    setup: &Setup<'_>,
) -> Result<Worker, String> {
    let status = rt.store().get_spec::<LinkStatus>(Namespace::Network, link);
    let announcer = status.and_then(|s| {
        let mac: [u8; 6] = s.hardware_addr.0.as_slice().try_into().ok()?;
        Announcer::open(s.index, mac).map_err(|e| log::warn!(target: "vip", "{id}: {e}")).ok()
    });
    if announcer.is_none() {
        log::warn!(target: "vip", "{id}: {link} is not an Ethernet link here; the VIP is not announced");
    }
    let tls = etcd::client::tls_config(&setup.ca, Some((&setup.cert, &setup.key)))
        .map_err(|e| e.to_string())?;
    let config =
        etcd::Config::new(&["https://127.0.0.1:2379"], Some(tls)).map_err(|e| e.to_string())?;
    let client = etcd::Client::new(config);
    let (ask_tx, ask_rx) = mpsc::channel();
    let (ack_tx, ack_rx) = mpsc::channel();
    let (ev_tx, ev_rx) = mpsc::channel::<Event>();
    let (report_tx, report_rx) = mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    let timings = timings();
    let holder = LoopHolder {
        asks: ask_tx,
        acks: ack_rx,
        announcer: announcer.map(Arc::new),
        vip: ip,
        holding: Arc::new(AtomicBool::new(false)),
        repeats: timings.announcements,
        reports: report_tx,
    };
    let hostname = setup.hostname.to_owned();
    let name = election_name(ip);
    let (stop2, done2) = (stop.clone(), done.clone());
    evloop::spawn_worker("vip", move || {
        let vip = Vip::new(&hostname, timings);
        let mut d = Driver::new(client, &name, &hostname, holder, vip);
        loop {
            if stop2.load(Ordering::Relaxed) {
                d.handle(Event::Stop);
                break;
            }
            while let Ok(e) = ev_rx.try_recv() {
                d.handle(e);
            }
            let sleep = d.step();
            #[allow(clippy::disallowed_methods)] // A worker, not the loop.
            std::thread::sleep(sleep.min(Duration::from_millis(50)));
        }
        done2.store(true, Ordering::Relaxed);
    })
    .map_err(|e| format!("start its worker: {e}"))?;
    let _ = ev_tx.send(Event::Start);
    log::info!(target: "vip", "{id}: campaigning for {ip}");
    Ok(Worker {
        link: link.to_owned(),
        ip,
        asks: ask_rx,
        acks: ack_tx,
        events: ev_tx,
        stop,
        done,
        started: true,
        holding: false,
        reports: report_rx,
    })
}
