// SPDX-License-Identifier: Apache-2.0
//! The worker threads that change etcd's membership for this node (blocking etcd calls, so
//! never on the loop): `etcd-join` adds it to a running cluster as a learner (removing a stale
//! entry of it first: its data directory is empty, so that member's log is lost), and
//! `etcd-promote` makes it a voting member once etcd says the learner caught up. Both retry
//! every [`RETRY`] until done or stopped, and report to the loop over a channel.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::time::Duration;

use crate::etcd::join;

/// Between attempts (Talos retries its join and promotion on a similar short period).
pub const RETRY: Duration = Duration::from_secs(2);
/// Each etcd call.
const CALL_TIMEOUT: Duration = Duration::from_secs(3);
/// How long the leave step retries a refused removal (the loop waits
/// `node::etcd::LEAVE_LIMIT` for the whole step, a little more).
const LEAVE_RETRY_FOR: Duration = Duration::from_secs(6);

/// What a worker tells the loop.
#[derive(Debug)]
pub enum Report {
    /// Where it is (the service's reason while etcd waits).
    Status(String),
    /// Added as a learner: the `--initial-cluster` to start with.
    Joined(String),
    /// A voting member (promoted now, or already).
    Voting,
}

/// Who this node is to the cluster, and how it reaches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub name: String,
    pub peer_url: String,
    /// Where the members are looked for.
    pub endpoints: Vec<String>,
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// A running worker; dropping it stops it.
#[derive(Debug)]
pub struct Worker {
    pub id: Identity,
    reports: Receiver<Report>,
    stop: Arc<AtomicBool>,
}

impl Worker {
    pub fn reports(&self) -> impl Iterator<Item = Report> + '_ {
        self.reports.try_iter()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn client(id: &Identity, urls: &[String]) -> Result<etcd::Client, String> {
    let tls =
        etcd::client::tls_config(&id.ca, Some((&id.cert, &id.key))).map_err(|e| e.to_string())?;
    let refs: Vec<&str> = urls.iter().map(String::as_str).collect();
    let mut config = etcd::Config::new(&refs, Some(tls)).map_err(|e| e.to_string())?;
    config.timeout = CALL_TIMEOUT;
    Ok(etcd::Client::new(config))
}

/// Sleep `d` in short steps; false once stopped.
fn pause(stop: &AtomicBool, d: Duration) -> bool {
    let step = Duration::from_millis(100);
    let mut left = d;
    while !left.is_zero() {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        #[allow(clippy::disallowed_methods)] // A worker, not the loop.
        std::thread::sleep(step.min(left));
        left = left.saturating_sub(step);
    }
    !stop.load(Ordering::Relaxed)
}

/// A thread body, handed to the `spawn_worker` call that names it.
type Body = Box<dyn FnOnce() + Send>;

fn spawn(
    thread: &str,
    start: impl FnOnce(Body) -> std::io::Result<std::thread::JoinHandle<()>>,
    id: Identity,
    mut attempt: impl FnMut(&Identity, &Sender<Report>) -> Result<bool, String> + Send + 'static,
) -> Result<Worker, String> {
    let (tx, rx) = mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let (stop2, id2, what) = (stop.clone(), id.clone(), thread.to_owned());
    // A node waiting for the cluster to exist would otherwise log the same line every 2 s.
    let mut last = String::new();
    start(Box::new(move || loop {
        match attempt(&id2, &tx) {
            Ok(true) => return,
            Ok(false) => {}
            Err(e) if e == last => {
                log::debug!(target: "etcd", "{what}: {e}; again in {}s", RETRY.as_secs());
            }
            Err(e) => {
                log::info!(target: "etcd", "{what}: {e}; again in {}s", RETRY.as_secs());
                last.clone_from(&e);
                let _ = tx.send(Report::Status(e));
            }
        }
        if !pause(&stop2, RETRY) {
            return;
        }
    }))
    .map_err(|e| format!("start {thread}: {e}"))?;
    Ok(Worker { id, reports: rx, stop })
}

/// Add this node to the cluster as a learner.
pub fn join(id: Identity) -> Result<Worker, String> {
    let start = |body: Body| evloop::spawn_worker("etcd-join", body);
    spawn("etcd-join", start, id, |id, tx| {
        let mut c = client(id, &id.endpoints)?;
        let list = c.member_list().map_err(|e| format!("list the members: {e}"))?;
        if let Some(stale) = join::find_self(&list.members, &id.name, &id.peer_url) {
            // Listed, but our data directory is empty: that member's log is gone with it.
            log::warn!(target: "etcd", "member {:x} ({}) is this node with an empty data directory: removing it to add it again", stale.id as u64, id.peer_url);
            c.member_remove(stale.id).map_err(|e| format!("remove the stale member: {e}"))?;
        }
        let added = c
            .member_add(std::slice::from_ref(&id.peer_url), true)
            .map_err(|e| format!("add this node as a learner: {e}"))?;
        let initial = join::initial_cluster(&added.members, added.member.id, &id.name);
        log::info!(target: "etcd", "added as learner {:x} to {} member(s)", added.member.id as u64, added.members.len());
        let _ = tx.send(Report::Joined(initial));
        Ok(true)
    })
}

/// Promote this node once it is in sync (nothing to do when it already votes).
pub fn promote(id: Identity) -> Result<Worker, String> {
    let start = |body: Body| evloop::spawn_worker("etcd-promote", body);
    spawn("etcd-promote", start, id, |id, tx| {
        let mut c = client(id, &id.endpoints)?;
        let list = c.member_list().map_err(|e| format!("list the members: {e}"))?;
        let Some(me) = join::find_self(&list.members, &id.name, &id.peer_url) else {
            return Err("this node is not a member (removed?)".into());
        };
        if !me.is_learner {
            let _ = tx.send(Report::Voting);
            return Ok(true);
        }
        let others = join::others(&list.members, me.id);
        let mut c = if others.is_empty() { c } else { client(id, &others)? };
        match c.member_promote(me.id) {
            Ok(_) => {
                log::info!(target: "etcd", "promoted to a voting member");
                let _ = tx.send(Report::Voting);
                Ok(true)
            }
            Err(e) if join::not_ready(&e.to_string()) => {
                let _ = tx.send(Report::Status("learner, catching up with the leader".into()));
                Ok(false)
            }
            Err(e) => Err(format!("promote: {e}")),
        }
    })
}

/// A graceful reset's `leave etcd` step, under way on its thread (`etcd-leave`).
#[derive(Debug)]
pub struct Leaving {
    done: Arc<AtomicBool>,
}

impl Leaving {
    /// The step ended (removed, or said why not).
    pub fn is_done(&self) -> bool {
        self.done.load(Ordering::Relaxed)
    }
}

/// Remove this node's member from the cluster (one attempt: the reset goes on either way,
/// bounded by the caller). The last member stays, and so does a member that cannot be
/// reached; each says so in one line.
pub fn leave(id: Identity) -> Result<Leaving, String> {
    use crate::etcd::leave::plan;
    let done = Arc::new(AtomicBool::new(false));
    let done2 = done.clone();
    evloop::spawn_worker("etcd-leave", move || {
        let step = || -> Result<String, String> {
            let mut c = client(&id, &id.endpoints)?;
            let list = c.member_list().map_err(|e| format!("list the members: {e}"))?;
            // Raft's leader as this member sees it (0 when it cannot say).
            let mut local = client(&id, &[local_url()])?;
            let leader = local.status().map(|s| s.leader).unwrap_or(0);
            let step = plan(&list.members, &id.name, &id.peer_url, leader);
            carry_out(&mut local, step, |urls| client(&id, urls), LEAVE_RETRY_FOR)
        };
        match step() {
            Ok(what) => log::info!(target: "etcd", "leave etcd: {what}"),
            Err(e) => log::warn!(target: "etcd", "leave etcd: {e}; the reset goes on without it"),
        }
        done2.store(true, Ordering::Relaxed);
    })
    .map_err(|e| format!("start etcd-leave: {e}"))?;
    Ok(Leaving { done })
}

/// Carry out a leave step (a graceful reset's, or `EtcdLeaveCluster`'s): hand raft
/// leadership on when this member holds it, then remove the member through the others
/// (`connect` makes a client for URLs). etcd's strict reconfiguration check refuses
/// ("unhealthy cluster") until the leader has been connected to enough members for 5 s,
/// which a new leader (the handover) or a peer that just came back has not: retried for
/// `retry_for`, as Talos retries its leave. What happened, in one line; the last member
/// and a stranger are `Ok` with the reason (the caller decides if that is a refusal).
pub fn carry_out(
    local: &mut etcd::Client,
    step: crate::etcd::leave::Leave,
    connect: impl Fn(&[String]) -> Result<etcd::Client, String>,
    retry_for: Duration,
) -> Result<String, String> {
    use crate::etcd::leave::Leave;
    let (member, via, hand_to) = match step {
        Leave::LastMember => {
            return Ok("this node is the only member: it stays (nothing to hand the data to)".into())
        }
        Leave::NotAMember => return Ok("this node is not a member: nothing to remove".into()),
        Leave::Remove { id, via, hand_to } => (id, via, hand_to),
    };
    if let Some(to) = hand_to {
        match local.move_leader(to) {
            Ok(_) => {
                log::info!(target: "etcd", "leave etcd: raft leadership handed to {:x}", to as u64)
            }
            Err(e) => {
                log::warn!(target: "etcd", "leave etcd: hand leadership to {:x}: {e}; the others elect a leader after the removal", to as u64)
            }
        }
    }
    let mut owned;
    let c = if via.is_empty() {
        local
    } else {
        owned = connect(&via)?;
        &mut owned
    };
    let until = std::time::Instant::now() + retry_for;
    loop {
        match c.member_remove(member) {
            Ok(left) => {
                break Ok(format!(
                    "member {:x} removed; {} remain",
                    member as u64,
                    left.members.len()
                ))
            }
            Err(e) if std::time::Instant::now() < until => {
                log::debug!(target: "etcd", "leave etcd: remove member {:x}: {e}; again", member as u64);
                #[allow(clippy::disallowed_methods)] // A worker, not the loop.
                std::thread::sleep(Duration::from_millis(500));
            }
            Err(e) => break Err(format!("remove member {:x}: {e}", member as u64)),
        }
    }
}

/// A client of the local member, with etcd's peer certificate (the API's etcd calls).
pub fn local_client(
    ca: &std::path::Path,
    cert: &std::path::Path,
    key: &std::path::Path,
    urls: &[String],
) -> Result<etcd::Client, String> {
    let tls = etcd::client::tls_config(ca, Some((cert, key))).map_err(|e| e.to_string())?;
    let all: Vec<String> = if urls.is_empty() { vec![local_url()] } else { urls.to_vec() };
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    let mut config = etcd::Config::new(&refs, Some(tls)).map_err(|e| e.to_string())?;
    config.timeout = CALL_TIMEOUT;
    Ok(etcd::Client::new(config))
}

/// How many members the local etcd lists (the graceful reset's check; blocking, for a
/// worker thread).
pub fn count_members(
    ca: &std::path::Path,
    cert: &std::path::Path,
    key: &std::path::Path,
) -> Result<usize, String> {
    let tls = etcd::client::tls_config(ca, Some((cert, key))).map_err(|e| e.to_string())?;
    let local =
        crate::etcd::args::url(std::net::IpAddr::from([127, 0, 0, 1]), crate::etcd::CLIENT_PORT);
    let mut config = etcd::Config::new(&[local.as_str()], Some(tls)).map_err(|e| e.to_string())?;
    config.timeout = CALL_TIMEOUT;
    let list = etcd::Client::new(config).member_list().map_err(|e| e.to_string())?;
    Ok(list.members.len())
}

/// The local member's client URL.
fn local_url() -> String {
    crate::etcd::args::url(std::net::IpAddr::from([127, 0, 0, 1]), crate::etcd::CLIENT_PORT)
}
