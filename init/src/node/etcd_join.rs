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
