// SPDX-License-Identifier: Apache-2.0
//! The shared-VIP driver: one blocking worker per VIP that runs the election machine
//! (`net::operator::vip`) against etcd with the `etcd` crate's client, and tells a [`Holder`]
//! when to put the address on, announce it and take it off.
//!
//! The machine's fence is a point in time, so nothing here may block past it: the client's
//! timeout is well under the fence margin, the machine is ticked before and after every call,
//! and a candidate waiting for its predecessor polls (one short transaction every
//! [`POLL`]) instead of blocking on a watch.
//!
//! The node's [`Holder`] (`node::vips`) turns add and remove into operator-layer
//! AddressSpecs and sends the announcements (docs/control-plane.md).

use std::time::{Duration, Instant, SystemTime};

use etcd::election::{Election, Step};
use etcd::wire::TxnResponse;
use etcd::Client;
use net::operator::vip::{Action, Event, LeaderKey, Phase, Vip};

use crate::vip_state::{classify, Campaign, Failure, Seen};

/// How often a waiting candidate looks at its predecessor again, and the longest sleep.
/// One local etcd read each time, so a successor sees its predecessor's key gone soon after
/// etcd revokes it.
pub const POLL: Duration = Duration::from_millis(100);

/// Where the address goes.
pub trait Holder {
    /// Put the VIP on its link.
    fn add(&mut self);
    /// Take it off; true once it is gone (false: gone later, the driver waits for
    /// [`Driver::address_removed`]).
    fn remove(&mut self) -> bool;
    /// Announce it.
    fn announce(&mut self);
    /// The election's state as a user sees it changed (`since`: when); `holder` is the
    /// leader's hostname when known. For the `VIPStatus` resource.
    fn report(&mut self, _campaign: &Campaign, _holder: Option<&str>, _since: SystemTime) {}
}

/// One VIP's election, driven.
pub struct Driver<H: Holder> {
    vip: Vip,
    client: Client,
    name: Vec<u8>,
    hostname: Vec<u8>,
    holder: H,
    election: Option<Election>,
    waiting: bool,
    origin: Instant,
    /// The last etcd call's failure (cleared by a success).
    failure: Option<Failure>,
    /// The local etcd is not running (from [`Event::EtcdDown`] until [`Event::Start`]).
    etcd_down: bool,
    /// When the fence fired, on the wall clock (its last successful keep-alive).
    fenced_at: Option<SystemTime>,
    /// What [`Holder::report`] was last told.
    reported: Option<(Campaign, Option<String>)>,
}

impl<H: Holder> std::fmt::Debug for Driver<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver").field("phase", &self.vip.phase()).finish()
    }
}

impl<H: Holder> Driver<H> {
    /// A driver for the VIP named `name` (`talos:v1:vip:election:<ip>`) on `client`.
    pub fn new(client: Client, name: &str, hostname: &str, holder: H, vip: Vip) -> Self {
        let timeout = vip.timings().call_timeout();
        Self {
            vip,
            client: short(&client, timeout),
            name: name.as_bytes().to_vec(),
            hostname: hostname.as_bytes().to_vec(),
            holder,
            election: None,
            waiting: false,
            origin: Instant::now(),
            failure: None,
            etcd_down: false,
            fenced_at: None,
            reported: None,
        }
    }

    /// Talk to other endpoints from now on (the same short timeout).
    #[cfg(test)]
    pub fn set_client(&mut self, client: &Client) {
        self.client = short(client, self.vip.timings().call_timeout());
    }

    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    /// Feed `event` and do what follows.
    pub fn handle(&mut self, event: Event) {
        match event {
            Event::EtcdDown => self.etcd_down = true,
            Event::Start => {
                self.etcd_down = false;
                self.failure = None;
            }
            _ => {}
        }
        let actions = self.vip.handle(self.now(), event);
        self.perform(actions);
        self.report();
    }

    /// Tell the holder when the user-visible state changed (only then: no extra polling or
    /// writes while nothing changes).
    fn report(&mut self) {
        let phase = self.vip.phase();
        if phase != Phase::Fenced {
            self.fenced_at = None;
        } else if self.fenced_at.is_none() {
            let ago =
                self.vip.last_keepalive().map_or(Duration::ZERO, |t| self.now().saturating_sub(t));
            self.fenced_at = SystemTime::now().checked_sub(ago);
        }
        let leader = self
            .election
            .as_ref()
            .and_then(|e| e.leader_value())
            .map(|v| String::from_utf8_lossy(v).into_owned());
        let campaign = Campaign::of(Seen {
            phase,
            waiting: self.waiting,
            leader: leader.as_deref(),
            failure: self.failure.as_ref(),
            fenced: self.fenced_at,
            etcd_down: self.etcd_down,
        });
        let holder = match &campaign {
            Campaign::Holding => Some(String::from_utf8_lossy(&self.hostname).into_owned()),
            Campaign::Waiting { holder } => holder.clone(),
            _ => None,
        };
        let now = (campaign, holder);
        if self.reported.as_ref() != Some(&now) {
            self.holder.report(&now.0, now.1.as_deref(), SystemTime::now());
            self.reported = Some(now);
        }
    }

    /// One round: time-driven actions, a waiting candidate's poll. Returns how long to sleep.
    pub fn step(&mut self) -> Duration {
        let actions = self.vip.tick(self.now());
        self.perform(actions);
        if self.waiting {
            self.poll_predecessor();
        }
        self.report();
        let next = self.vip.deadline().map_or(POLL, |d| d.saturating_sub(self.now()));
        next.min(POLL)
    }

    fn perform(&mut self, actions: Vec<Action>) {
        let mut queue: std::collections::VecDeque<Action> = actions.into();
        while let Some(action) = queue.pop_front() {
            let events = self.run(action);
            for e in events {
                queue.extend(self.vip.handle(self.now(), e));
            }
            // The fence is checked between calls, never only after a batch.
            queue.extend(self.vip.tick(self.now()));
        }
    }

    fn run(&mut self, action: Action) -> Vec<Event> {
        match action {
            Action::QueryLeader => match etcd::session::leader(&mut self.client, &self.name) {
                Ok(l) => self.ok(vec![Event::Leader(l.map(|l| LeaderKey {
                    key: l.key,
                    value: l.value,
                    create_revision: l.create_revision,
                    lease: l.lease,
                }))]),
                Err(e) => self.failed("read the leader", &e),
            },
            Action::ResignStale { .. } => {
                // Every key of ours on another lease, not only the leader's.
                match etcd::session::clear_stale(&mut self.client, &self.name, &self.hostname, 0) {
                    Ok(n) => {
                        log::info!(target: "vip", "resigned {n} stale key(s) of this node");
                        self.ok(vec![Event::StaleResigned])
                    }
                    Err(e) => self.failed("resign a stale key", &e),
                }
            }
            Action::GrantLease { ttl } => {
                let secs = i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX);
                match self.client.lease_grant(secs) {
                    Ok(r) => self.ok(vec![Event::LeaseGranted { id: r.id }]),
                    Err(e) => self.failed("grant a lease", &e),
                }
            }
            Action::Campaign { lease } => {
                let mut e = Election::new(&self.name, lease, &self.hostname);
                let step = e.campaign();
                self.election = Some(e);
                self.follow(step)
            }
            Action::KeepAlive { lease } => {
                let sent_at = self.now();
                match self.client.lease_keep_alive(lease) {
                    Ok(ttl) if ttl > 0 => {
                        self.failure = None;
                        let mut out = vec![Event::KeepAliveOk { sent_at }];
                        if self.vip.holds_address() && !self.still_leader() {
                            out.push(Event::LeaderChanged);
                        }
                        out
                    }
                    Ok(_) => self.ok(vec![Event::LeaseGone]),
                    Err(e) => {
                        log::debug!(target: "vip", "keep-alive failed: {e}");
                        self.failure = Some(classify(&e));
                        vec![Event::KeepAliveFailed]
                    }
                }
            }
            Action::AddAddress => {
                self.holder.add();
                Vec::new()
            }
            Action::Announce => {
                self.holder.announce();
                Vec::new()
            }
            Action::RemoveAddress => {
                // One line saying why, for whoever wonders why nobody holds the VIP.
                let t = self.vip.timings();
                match self.vip.phase() {
                    Phase::Fenced => log::warn!(
                        target: "vip",
                        "fenced: no successful keep-alive for {:?} (etcd unreachable or without quorum); the address goes until one succeeds",
                        t.ttl.saturating_sub(t.margin)
                    ),
                    Phase::Releasing => {
                        log::info!(target: "vip", "handing over: the address goes first")
                    }
                    _ => {
                        log::info!(target: "vip", "leadership lost (lease gone, another leader, or etcd down); the address goes")
                    }
                }
                if self.holder.remove() {
                    vec![Event::AddressRemoved]
                } else {
                    Vec::new()
                }
            }
            Action::Resign => {
                if let Some(mut e) = self.election.take() {
                    if let Err(err) = etcd::session::resign(&mut self.client, &mut e) {
                        log::warn!(target: "vip", "resign: {err}");
                    }
                }
                self.waiting = false;
                Vec::new()
            }
            Action::Revoke { lease } => {
                if let Err(e) = self.client.lease_revoke(lease) {
                    log::debug!(target: "vip", "revoke: {e}");
                }
                self.election = None;
                self.waiting = false;
                Vec::new()
            }
        }
    }

    /// Is our key still the oldest? A failed read says nothing (the fence covers it).
    fn still_leader(&mut self) -> bool {
        let Some(e) = &self.election else { return false };
        match etcd::session::leader(&mut self.client, &self.name) {
            Ok(Some(l)) => l.key == e.key() && l.create_revision == e.revision(),
            Ok(None) => false,
            Err(_) => true,
        }
    }

    /// Run the election's transactions until it waits, wins or loses.
    fn follow(&mut self, mut step: Step) -> Vec<Event> {
        loop {
            let Some(e) = self.election.as_mut() else { return Vec::new() };
            step = match step {
                Step::Send(call) => match self.client.call::<TxnResponse>("txn", &call) {
                    Ok(r) => {
                        self.failure = None;
                        e.answered(&r)
                    }
                    Err(err) => {
                        self.waiting = false;
                        return self.failed("campaign", &err);
                    }
                },
                Step::WatchDelete { .. } => {
                    self.waiting = true;
                    return Vec::new();
                }
                Step::Elected => {
                    self.waiting = false;
                    return vec![Event::Elected];
                }
                Step::Lost(l) => {
                    log::info!(target: "vip", "campaign lost: {l}");
                    self.waiting = false;
                    return vec![Event::CampaignLost];
                }
            };
        }
    }

    fn poll_predecessor(&mut self) {
        let Some(e) = self.election.as_mut() else { return };
        let step = e.predecessor_deleted();
        let events = self.follow(step);
        for ev in events {
            let actions = self.vip.handle(self.now(), ev);
            self.perform(actions);
        }
    }
}

/// `client`'s endpoints with the timeout the fence allows (`Timings::call_timeout`: a call
/// that starts just before the fence must end well inside the margin).
fn short(client: &Client, timeout: Duration) -> Client {
    let mut config = client.config().clone();
    config.timeout = timeout;
    Client::new(config)
}

impl<H: Holder> Driver<H> {
    /// A call succeeded: etcd answers.
    fn ok(&mut self, events: Vec<Event>) -> Vec<Event> {
        self.failure = None;
        events
    }

    /// A call failed: remembered (for the status) and fed to the machine.
    fn failed(&mut self, what: &str, e: &etcd::ClientError) -> Vec<Event> {
        log::debug!(target: "vip", "{what}: {e}");
        self.failure = Some(classify(e));
        vec![Event::Failed]
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::disallowed_methods)] // Test threads and sleeps, not the loop.
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};

    use net::operator::vip::{election_name, Timings};

    /// The timings this test's bounds were set for (a 5 s lease, fenced at 4 s).
    fn five_seconds() -> Timings {
        Timings::parse("ttl=5,keepalive=1,margin=1").unwrap_or_else(|e| unreachable!("{e}"))
    }

    /// Who holds the address now, and every time two did at once.
    #[derive(Default)]
    struct Link {
        holder: Option<String>,
        overlaps: Vec<String>,
        history: Vec<(Instant, String, bool)>,
    }

    struct Recorder {
        host: String,
        link: Arc<Mutex<Link>>,
        announced: u32,
    }

    impl Holder for Recorder {
        fn add(&mut self) {
            let mut l = self.link.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(other) = &l.holder {
                if *other != self.host {
                    let msg = format!("{} added while {other} held", self.host);
                    l.overlaps.push(msg);
                }
            }
            l.holder = Some(self.host.clone());
            l.history.push((Instant::now(), self.host.clone(), true));
        }
        fn remove(&mut self) -> bool {
            let mut l = self.link.lock().unwrap_or_else(|p| p.into_inner());
            if l.holder.as_deref() == Some(&self.host) {
                l.holder = None;
            }
            l.history.push((Instant::now(), self.host.clone(), false));
            true
        }
        fn announce(&mut self) {
            self.announced += 1;
        }
    }

    /// A candidate on its own thread; `cut` makes every etcd call fail (a partition).
    fn candidate(
        url: &str,
        host: &str,
        link: &Arc<Mutex<Link>>,
        cut: Arc<AtomicBool>,
        stop: Arc<AtomicBool>,
    ) -> std::thread::JoinHandle<()> {
        let (url, host, link) = (url.to_owned(), host.to_owned(), link.clone());
        std::thread::spawn(move || {
            let good = Client::new(
                etcd::Config::new(&[url.as_str()], None).unwrap_or_else(|e| unreachable!("{e}")),
            );
            // Nothing listens on port 9: every call fails fast.
            let dead = Client::new(
                etcd::Config::new(&["http://127.0.0.1:9"], None)
                    .unwrap_or_else(|e| unreachable!("{e}")),
            );
            let name = election_name("10.5.0.100".parse().unwrap_or_else(|e| unreachable!("{e}")));
            let rec = Recorder { host: host.clone(), link, announced: 0 };
            let mut d =
                Driver::new(good.clone(), &name, &host, rec, Vip::new(&host, five_seconds()));
            d.handle(Event::Start);
            let mut was_cut = false;
            while !stop.load(Ordering::Relaxed) {
                let now_cut = cut.load(Ordering::Relaxed);
                if now_cut != was_cut {
                    d.set_client(if now_cut { &dead } else { &good });
                    was_cut = now_cut;
                }
                let sleep = d.step();
                std::thread::sleep(sleep.min(Duration::from_millis(50)));
            }
            d.handle(Event::Stop);
        })
    }

    fn holder(link: &Arc<Mutex<Link>>) -> Option<String> {
        link.lock().unwrap_or_else(|p| p.into_inner()).holder.clone()
    }

    fn wait_holder(link: &Arc<Mutex<Link>>, want: Option<&str>, within: Duration) -> Duration {
        let start = Instant::now();
        while start.elapsed() < within {
            let h = holder(link);
            if match want {
                Some(w) => h.as_deref() == Some(w),
                None => h.is_some(),
            } {
                return start.elapsed();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        unreachable!("no holder {want:?} within {within:?}; holder now {:?}", holder(link));
    }

    /// Talos's side of the queue, run by a tool we did not write: `etcdctl elect`, which is
    /// etcd's Go `concurrency.Election` (as Talos's VIP operator uses it), holds the VIP's
    /// election first with the value `talos-1`. keelson queues behind it and never holds while
    /// it leads; when it resigns (SIGINT), keelson takes over at once.
    #[test]
    fn waits_behind_a_go_election_holder_and_takes_over_when_it_resigns() {
        if std::process::Command::new("etcd").arg("--version").output().is_err()
            || std::process::Command::new("etcdctl").arg("version").output().is_err()
        {
            assert!(std::env::var("KEELSON_REQUIRE_ROOT").as_deref() != Ok("1"), "no etcd/etcdctl");
            eprintln!("SKIP: no etcd or etcdctl binary");
            return;
        }
        use std::io::BufRead;
        let dir = std::env::temp_dir().join(format!("keelson-vip-go-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| unreachable!("{e}"));
        let mut opts = etcd::local::Options::new(&dir.join("data"), &dir.join("etcd.log"));
        opts.no_fsync = true;
        let mut local =
            etcd::local::LocalEtcd::start(&opts).unwrap_or_else(|e| unreachable!("{e}"));
        let url = local.client_url.clone();
        let name = election_name("10.5.0.100".parse().unwrap_or_else(|e| unreachable!("{e}")));
        let mut go = std::process::Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .args(["--endpoints", &url, "elect", &name, "talos-1"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| unreachable!("etcdctl: {e}"));
        let out = go.stdout.take().unwrap_or_else(|| unreachable!("piped"));
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        // It prints its key, then its value, once it leads.
        let key =
            lines.recv_timeout(Duration::from_secs(10)).unwrap_or_else(|e| unreachable!("{e}"));
        assert!(key.starts_with(&format!("{name}/")), "{key}");

        let link = Arc::new(Mutex::new(Link::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let a = candidate(&url, "cp-a", &link, Arc::new(AtomicBool::new(false)), stop.clone());
        std::thread::sleep(Duration::from_secs(3));
        assert_eq!(holder(&link), None, "keelson held while the Go candidate led");

        let resigned = Instant::now();
        let pid = nix::unistd::Pid::from_raw(i32::try_from(go.id()).unwrap_or(i32::MAX));
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT)
            .unwrap_or_else(|e| unreachable!("{e}"));
        let _ = go.wait();
        wait_holder(&link, Some("cp-a"), Duration::from_secs(3));
        eprintln!("took over {:?} after the Go holder's SIGINT", resigned.elapsed());
        stop.store(true, Ordering::Relaxed);
        let _ = a.join();
        let l = link.lock().unwrap_or_else(|p| p.into_inner());
        assert!(l.overlaps.is_empty(), "{:?}", l.overlaps);
        drop(l);
        local.stop();
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Two candidates on a real etcd: one holds; a partitioned holder lets go before the
    /// other takes over (never two at once); a planned stop hands over at once.
    #[test]
    fn failover_and_handover_on_a_real_etcd_without_overlap() {
        if std::process::Command::new("etcd").arg("--version").output().is_err() {
            assert!(std::env::var("KEELSON_REQUIRE_ROOT").as_deref() != Ok("1"), "no etcd binary");
            eprintln!("SKIP: no etcd binary");
            return;
        }
        let dir = std::env::temp_dir().join(format!("keelson-vip-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| unreachable!("{e}"));
        let mut opts = etcd::local::Options::new(&dir.join("data"), &dir.join("etcd.log"));
        opts.no_fsync = true;
        let mut local =
            etcd::local::LocalEtcd::start(&opts).unwrap_or_else(|e| unreachable!("{e}"));
        let url = local.client_url.clone();
        let link = Arc::new(Mutex::new(Link::default()));
        let (cut_a, stop_a) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let (cut_b, stop_b) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let a = candidate(&url, "cp-a", &link, cut_a.clone(), stop_a.clone());
        wait_holder(&link, Some("cp-a"), Duration::from_secs(5));
        let b = candidate(&url, "cp-b", &link, cut_b.clone(), stop_b.clone());
        std::thread::sleep(Duration::from_secs(2));
        assert_eq!(holder(&link).as_deref(), Some("cp-a"), "the first holder keeps it");

        // Partition the holder: it must drop within the fence (4 s after its last good
        // keep-alive), and cp-b may take over only once the lease expired at etcd (5 s).
        let cut_at = Instant::now();
        cut_a.store(true, Ordering::Relaxed);
        let took = wait_holder(&link, Some("cp-b"), Duration::from_secs(10));
        eprintln!("failover after a partition: {took:?}");
        {
            let l = link.lock().unwrap_or_else(|p| p.into_inner());
            let dropped = l.history.iter().find(|(t, h, on)| h == "cp-a" && !on && *t >= cut_at);
            let dropped = dropped.map(|(t, _, _)| t.duration_since(cut_at));
            assert!(
                dropped.is_some_and(|d| d <= Duration::from_millis(4500)),
                "cp-a dropped at {dropped:?}"
            );
        }
        assert!(took >= Duration::from_secs(3), "cp-b took over too soon: {took:?}");

        // Heal cp-a: it queues behind cp-b. A planned stop of cp-b hands over at once.
        cut_a.store(false, Ordering::Relaxed);
        std::thread::sleep(Duration::from_secs(2));
        assert_eq!(holder(&link).as_deref(), Some("cp-b"));
        stop_b.store(true, Ordering::Relaxed);
        let handover = wait_holder(&link, Some("cp-a"), Duration::from_secs(5));
        eprintln!("planned handover: {handover:?}");
        assert!(handover < Duration::from_millis(1500), "handover took {handover:?}");
        b.join().unwrap_or_else(|_| unreachable!());
        stop_a.store(true, Ordering::Relaxed);
        a.join().unwrap_or_else(|_| unreachable!());
        let l = link.lock().unwrap_or_else(|p| p.into_inner());
        assert!(l.overlaps.is_empty(), "two holders at once: {:?}", l.overlaps);
        assert_eq!(l.holder, None, "the last holder let go at its stop");
        drop(l);
        local.stop();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
