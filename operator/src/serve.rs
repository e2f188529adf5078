// SPDX-License-Identifier: Apache-2.0
//! `keelson-operator serve`: the etcd to use (a private one, or the cluster named on the
//! command line), the resource store on it, and the leader election among replicas (one
//! lease-bound candidate key per replica under `<prefix>/leader`, etcd's `concurrency` queue).
//! Only the leader runs the controllers ([`crate::reconcile`]).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use etcd::local::{LocalError, LocalEtcd, Options};
use etcd::session::{self, CampaignError, Session};
use etcd::{Client, Config};

use crate::cli::{default_data_dir, ServeOptions};
use crate::key::Layout;
use crate::push::Push;
use crate::reconcile::{NodeApi, Reconciler};
use crate::store::{Fence, Store};
use crate::talos::GrpcNode;

/// Between failed attempts (etcd unreachable, a lost campaign).
const RETRY: Duration = Duration::from_secs(1);
const TICK: Duration = Duration::from_millis(100);
/// Between reconcile passes: new resources are picked up by polling (no watch yet).
const PASS_MIN: Duration = Duration::from_millis(500);
const PASS_MAX: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("no --data-dir given, and neither XDG_STATE_HOME nor HOME is set")]
    NoDataDir,
    #[error("data directory {0}: {1}")]
    DataDir(PathBuf, std::io::Error),
    #[error("private etcd: {0}")]
    Local(#[from] LocalError),
    #[error("etcd: {0}")]
    Etcd(#[from] etcd::ClientError),
    #[error("no keelson-operator serve is running on {0} (give --etcd-endpoints or --data-dir)")]
    NotServing(PathBuf),
    #[error("Talos API client: {0}")]
    Talos(String),
    #[error("{0}")]
    Boot(#[from] crate::pxe::StartError),
    #[error("etcd at {0}: {1}")]
    Unreachable(String, etcd::ClientError),
    #[error("{0}")]
    Secrets(#[from] crate::secrets::SecretsError),
    #[error("metrics listener on {0}: {1}")]
    Metrics(std::net::SocketAddr, std::io::Error),
}

fn display(text: &str) -> String {
    base::names::escape(text, 512)
}

/// This replica's name: `--name`, else `<hostname>/<pid>`.
fn identity(o: &ServeOptions) -> String {
    o.name.clone().unwrap_or_else(|| {
        let host = nix::unistd::gethostname()
            .ok()
            .and_then(|h| h.into_string().ok())
            .unwrap_or_else(|| "localhost".into());
        format!("{host}/{}", std::process::id())
    })
}

/// Sleep up to `d`, waking early when `stop` is set.
#[allow(clippy::disallowed_methods)] // The operator's worker thread, not an event loop.
fn pause(d: Duration, stop: &AtomicBool) {
    let until = Instant::now() + d;
    while !stop.load(Ordering::Relaxed) && Instant::now() < until {
        std::thread::sleep(TICK.min(until - Instant::now()));
    }
}

/// An etcd outage, said once when it begins and once when it ends: every retry meanwhile
/// (once a second) is a debug line, not a warning.
#[derive(Debug, Default)]
struct Outage {
    since: Option<Instant>,
}

impl Outage {
    fn failed(&mut self, what: &str, e: &dyn std::fmt::Display) {
        if self.since.is_none() {
            self.since = Some(Instant::now());
            log::warn!(
                "etcd unreachable ({what}: {e}); reconciling paused, retrying every {} s",
                RETRY.as_secs()
            );
        } else {
            log::debug!("etcd still unreachable ({what}: {e})");
        }
    }

    fn ok(&mut self) {
        if let Some(t) = self.since.take() {
            log::info!("etcd reachable again after {:.1} s", t.elapsed().as_secs_f64());
        }
    }
}

/// Run until `stop` is set.
pub fn run(o: &ServeOptions, stop: &AtomicBool) -> Result<(), ServeError> {
    let mut local = None;
    let client = if o.endpoints.is_empty() {
        let dir = o.data_dir.clone().or_else(default_data_dir).ok_or(ServeError::NoDataDir)?;
        create_private_dir(&dir).map_err(|e| ServeError::DataDir(dir.clone(), e))?;
        let mut opts = Options::new(&dir.join("etcd"), &dir.join("etcd.log"));
        // As Omni's embedded etcd: keep five hours of history.
        opts.auto_compaction = Some("5h".into());
        let etcd = LocalEtcd::start(&opts)?;
        log::info!(
            "private etcd at {} (pid {}), data in {}, log {}",
            etcd.client_url,
            etcd.pid().unwrap_or(0),
            etcd.data_dir.display(),
            etcd.log.display()
        );
        // Where `apply`, `get`, ... find this etcd while the operator runs.
        let marker = dir.join(ENDPOINT_FILE);
        if let Err(e) = std::fs::write(&marker, format!("{}\n", etcd.client_url)) {
            log::warn!("writing {}: {e}", marker.display());
        }
        let client = etcd.client();
        local = Some((etcd, marker));
        client
    } else {
        external(o)?
    };
    let result = serve(client, o, stop);
    if let Some((mut etcd, marker)) = local {
        let _ = std::fs::remove_file(marker);
        let pid = etcd.pid().unwrap_or(0);
        let status = etcd.stop();
        log::info!(
            "private etcd (pid {pid}) stopped ({}); data kept in {}",
            status.map_or_else(|| "not running".into(), |s| s.to_string()),
            etcd.data_dir.display()
        );
    }
    result
}

/// The file in the data directory naming the private etcd's URL while `serve` runs.
pub const ENDPOINT_FILE: &str = "etcd.endpoint";

fn external(o: &ServeOptions) -> Result<Client, ServeError> {
    let urls: Vec<&str> = o.endpoints.iter().map(String::as_str).collect();
    let tls = match &o.cacert {
        Some(ca) => {
            let pair = o.cert.as_deref().zip(o.key.as_deref());
            Some(etcd::client::tls_config(ca, pair)?)
        }
        None => None,
    };
    Ok(Client::new(Config::new(&urls, tls)?))
}

/// A client for the resource commands: `--etcd-endpoints`, else the private etcd of a running
/// `serve` on the same data directory.
pub fn client(o: &ServeOptions) -> Result<Client, ServeError> {
    if !o.endpoints.is_empty() {
        return external(o);
    }
    let dir = o.data_dir.clone().or_else(default_data_dir).ok_or(ServeError::NoDataDir)?;
    let marker = dir.join(ENDPOINT_FILE);
    let url = std::fs::read_to_string(&marker).map_err(|_| ServeError::NotServing(dir.clone()))?;
    let url = url.trim();
    Ok(Client::new(Config::new(&[url], None)?))
}

fn create_private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

fn serve(mut client: Client, o: &ServeOptions, stop: &AtomicBool) -> Result<(), ServeError> {
    // Reachable at all? (Unreachable etcd at start is an error; later it is retried.)
    let endpoints =
        client.config().endpoints.iter().map(ToString::to_string).collect::<Vec<_>>().join(",");
    let status = client.status().map_err(|e| ServeError::Unreachable(endpoints.clone(), e))?;
    log::info!(
        "etcd {} at {endpoints}, revision {}",
        display(&status.version),
        status.header.revision
    );
    // The store the controllers use; its salt is the prefix, as Omni salts per account.
    let store = Store::new(client.clone(), Layout::new(&o.prefix, o.prefix.as_bytes()));
    // The key sealing generated cluster secrets: every replica needs the same one.
    let key_path = match &o.secrets_key {
        Some(p) => p.clone(),
        None => {
            let dir = o.data_dir.clone().or_else(default_data_dir).ok_or(ServeError::NoDataDir)?;
            create_private_dir(&dir).map_err(|e| ServeError::DataDir(dir.clone(), e))?;
            dir.join("secrets.key")
        }
    };
    let key = crate::secrets::SecretsKey::load_or_create(&key_path)?;
    // Network boot, on every replica (it only reads): stopped when this returns.
    let _boot = crate::pxe::from_serve(o, &client)?;
    // Maintenance-mode calls need no credentials; calls to configured nodes need the client
    // certificate (without one they answer that none is configured).
    let secure = match &o.talos_tls {
        Some((ca, cert, key)) => Some(
            etcd::client::tls_config(ca, Some((cert, key)))
                .map_err(|e| ServeError::Talos(e.to_string()))?,
        ),
        None => None,
    };
    let node = GrpcNode::new(secure).map_err(ServeError::Talos)?.with_port(o.talos_port);
    // The nodes' event streams, held by the leader only.
    let push = Push::new(o.talos_port, node.insecure_client(), node.secure_client(), o.push);
    let metrics = crate::metrics::Metrics::new();
    let mut push = push.with_metrics(metrics.clone());
    let _metrics_guard = match o.metrics_listen {
        Some(addr) => Some(metrics_listener(addr, metrics.clone())?),
        None => None,
    };
    let store = store.with_metrics(metrics.clone());
    let mut reconciler = Reconciler::new(store, node, &o.namespace)
        .with_poll_interval(o.poll_interval)
        .with_secrets_key(key)
        .with_metrics(metrics.clone())
        .with_kubelet_bound(o.kubelet_timeout);
    let mut networks = crate::networks::controller::Controller::new(
        crate::networks::allocate::Allocator::new(o.vni),
        &o.namespace,
    );
    let me = identity(o);
    let election = format!("{}/leader", o.prefix);
    let margin = Duration::from_secs((o.lease_ttl / 5).max(1) as u64);
    let mut outage = Outage::default();
    while !stop.load(Ordering::Relaxed) {
        let session = match Session::grant(&client, o.lease_ttl, margin) {
            Ok(s) => s,
            Err(e) => {
                outage.failed("leader election, granting a lease", &e);
                pause(RETRY, stop);
                continue;
            }
        };
        outage.ok();
        match session::clear_stale(&mut client, election.as_bytes(), me.as_bytes(), session.id()) {
            Ok(0) => {}
            Ok(n) => log::info!("removed {n} election key(s) of an earlier {}", display(&me)),
            Err(e) => log::debug!("clearing earlier election keys: {e}"),
        }
        if let Ok(Some(l)) = session::leader(&mut client, election.as_bytes()) {
            log::info!(
                "{} leads; {} waits (lease {:x})",
                display(&String::from_utf8_lossy(&l.value)),
                display(&me),
                session.id()
            );
        }
        match session::campaign(&mut client, &session, election.as_bytes(), me.as_bytes(), stop) {
            Ok(mut e) => {
                log::info!(
                    "{} leads (lease {:x}, ttl {} s)",
                    display(&me),
                    session.id(),
                    session.ttl()
                );
                metrics.set_leader(true);
                // Every write of this term is fenced on the election key: once the lease is
                // revoked or expires, a write in flight fails rather than land late.
                let fence = Fence { key: e.key().to_vec(), create_revision: e.revision() };
                reconciler.store.set_fence(Some(fence));
                lead(
                    &mut client,
                    &session,
                    (&election, e.key()),
                    &mut reconciler,
                    &mut networks,
                    &mut outage,
                    &mut push,
                    stop,
                );
                reconciler.store.set_fence(None);
                push.clear();
                metrics.set_leader(false);
                if stop.load(Ordering::Relaxed) {
                    match session::resign(&mut client, &mut e) {
                        Ok(_) => log::info!("{} resigned", display(&me)),
                        Err(err) => log::warn!("resign: {err}"),
                    }
                }
            }
            Err(CampaignError::Stopped) => {}
            Err(CampaignError::Client(e)) => {
                outage.failed("leader election", &e);
                pause(RETRY, stop);
            }
            Err(e) => {
                log::warn!("leader election: {e}; campaigning again");
                pause(RETRY, stop);
            }
        }
        // Revoked even when leadership was lost without a stop: a lease that still exists
        // would keep our old key ahead of the new campaign until it expired.
        if let Err(e) = session.close(&mut client) {
            if stop.load(Ordering::Relaxed) {
                log::warn!("revoking the election lease: {e}");
            } else {
                log::debug!("revoking the election lease: {e}");
            }
        }
    }
    Ok(())
}

/// Stops the metrics listener when dropped.
struct MetricsGuard(std::sync::Arc<AtomicBool>, Option<std::thread::JoinHandle<()>>);

impl Drop for MetricsGuard {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
        if let Some(t) = self.1.take() {
            let _ = t.join();
        }
    }
}

fn metrics_listener(
    addr: std::net::SocketAddr,
    m: std::sync::Arc<crate::metrics::Metrics>,
) -> Result<MetricsGuard, ServeError> {
    let listener = std::net::TcpListener::bind(addr).map_err(|e| ServeError::Metrics(addr, e))?;
    let local = listener.local_addr().map_err(|e| ServeError::Metrics(addr, e))?;
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let t = evloop::spawn_worker("operator-metrics", move || {
        crate::metrics::serve(listener, m, s2);
    })
    .map_err(|e| ServeError::Metrics(addr, e))?;
    log::info!("metrics on http://{local}/metrics");
    Ok(MetricsGuard(stop, Some(t)))
}

/// Lead while the lease is trusted and the key is still the oldest, running the controllers;
/// returns when either ends or `stop` is set. `seat`: the election and this replica's key in it.
#[allow(clippy::too_many_arguments)] // The leader's parts, each borrowed for its term.
fn lead<N: NodeApi>(
    client: &mut Client,
    session: &Session,
    seat: (&str, &[u8]),
    reconciler: &mut Reconciler<N>,
    networks: &mut crate::networks::controller::Controller,
    outage: &mut Outage,
    push: &mut Push,
    stop: &AtomicBool,
) {
    let (election, key) = seat;
    let check_every = Duration::from_secs((session.ttl() / 3).max(1) as u64);
    let mut next_check = Instant::now() + check_every;
    let mut next_pass = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        // Only while leading: a pass is bounded by the node calls' timeouts; the lease is
        // renewed on its own thread meanwhile.
        if Instant::now() >= next_pass && session.alive() {
            let wait = match reconciler.pass() {
                Ok(d) => {
                    outage.ok();
                    d
                }
                Err(crate::store::StoreError::Deposed) => {
                    log::warn!("the election key is gone: no longer leading; pass stopped");
                    return;
                }
                // A pass stopped by etcd resumes with a fresh read when etcd answers; what
                // it did before is in the store (one write per step).
                Err(crate::store::StoreError::Etcd(e)) => {
                    outage.failed("reconcile", &e);
                    RETRY
                }
                Err(e) => {
                    log::warn!("reconcile: {e}");
                    RETRY
                }
            };
            let wait = match networks.pass(&mut reconciler.store) {
                Ok(d) => wait.min(d),
                Err(crate::store::StoreError::Deposed) => {
                    log::warn!("the election key is gone: no longer leading; pass stopped");
                    return;
                }
                Err(e) if outage.since.is_some() => {
                    log::debug!("tenant networks: {e}");
                    wait.min(RETRY)
                }
                Err(e) => {
                    log::warn!("tenant networks: {e}");
                    wait.min(RETRY)
                }
            };
            next_pass = Instant::now() + wait.clamp(PASS_MIN, PASS_MAX);
            push.sync(reconciler.watches());
        }
        if !session.alive() {
            log::warn!(
                "the election lease is no longer trusted ({:?}): no longer leading",
                session.state()
            );
            return;
        }
        if Instant::now() >= next_check {
            next_check = Instant::now() + check_every;
            match session::leader(client, election.as_bytes()) {
                Ok(Some(l)) if l.key == key => {}
                Ok(other) => {
                    let who = other.map(|l| String::from_utf8_lossy(&l.value).into_owned());
                    log::warn!("no longer leading (leader now {:?})", who.as_deref().map(display));
                    return;
                }
                // Unknown: the lease's deadline decides.
                Err(e) => log::debug!("leader check: {e}"),
            }
        }
        // A node's event wakes its machine for a pass now; otherwise a tick.
        let woken = push.wait(TICK);
        if !woken.is_empty() {
            for (machine, why) in woken {
                reconciler.wake(&machine, why);
            }
            next_pass = Instant::now();
        }
    }
}
