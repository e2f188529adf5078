// SPDX-License-Identifier: Apache-2.0
//! A private single-member etcd on loopback: the `etcd` binary on free ports of 127.0.0.1,
//! its data in a directory the caller names, stopped with SIGTERM (then SIGKILL after a grace)
//! when dropped. `keelson-operator serve` without endpoints runs one; the tests run one each.

use std::fs::File;
use std::io;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::client::{Client, Config};

/// How long etcd may take to become healthy (first boot writes its WAL).
const READY: Duration = Duration::from_secs(30);
/// How long a SIGTERM may take before SIGKILL.
const GRACE: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error("cannot start {binary}: {source} (is etcd installed? Debian: etcd-server)")]
    Spawn { binary: String, source: io::Error },
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("etcd exited before it was ready ({status}); its log: {log}")]
    Exited { status: ExitStatus, log: String },
    #[error("etcd not healthy after {READY:?}; its log: {log}")]
    NotReady { log: String },
}

/// Serve clients over TLS and require a client certificate signed by `client_ca` (PEM files).
#[derive(Debug, Clone)]
pub struct ServerTls {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub client_ca: PathBuf,
}

/// How to run it.
#[derive(Debug, Clone)]
pub struct Options {
    /// The binary (`etcd`, found on PATH).
    pub binary: PathBuf,
    /// etcd's `--data-dir` (created by etcd; kept when it stops).
    pub data_dir: PathBuf,
    /// Where etcd's own log goes.
    pub log: PathBuf,
    /// The member name.
    pub name: String,
    /// 10 ms heartbeats and a 100 ms election timeout: leases as short as 1 s (tests).
    pub fast: bool,
    /// No fsync (tests: data loss on a crash does not matter).
    pub no_fsync: bool,
    /// `--auto-compaction-retention` in periodic mode (e.g. `5h`), if any.
    pub auto_compaction: Option<String>,
    /// TLS for clients (the peer port stays plain: a single member has no peers).
    pub tls: Option<ServerTls>,
    /// The client configuration [`LocalEtcd::client`] uses (needed with `tls`).
    pub client_tls: Option<Arc<rustls::ClientConfig>>,
}

impl Options {
    pub fn new(data_dir: &Path, log: &Path) -> Self {
        Self {
            binary: PathBuf::from("etcd"),
            data_dir: data_dir.to_path_buf(),
            log: log.to_path_buf(),
            name: "keelson".into(),
            fast: false,
            no_fsync: false,
            auto_compaction: None,
            tls: None,
            client_tls: None,
        }
    }
}

/// A running private etcd.
#[derive(Debug)]
pub struct LocalEtcd {
    child: Option<Child>,
    /// `http://127.0.0.1:<port>`.
    pub client_url: String,
    pub peer_url: String,
    pub data_dir: PathBuf,
    pub log: PathBuf,
    client_tls: Option<Arc<rustls::ClientConfig>>,
}

/// A port nobody listens on now (the kernel's pick; etcd binds it right after).
fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn tail(path: &Path) -> String {
    let text = std::fs::read(path).unwrap_or_default();
    let start = text.len().saturating_sub(2000);
    base::names::escape(&String::from_utf8_lossy(text.get(start..).unwrap_or(&[])), 2000)
}

impl LocalEtcd {
    /// Start etcd and wait until it answers `/health`.
    #[allow(clippy::disallowed_methods)] // Blocking driver: polls a child, never the loop.
    pub fn start(opts: &Options) -> Result<Self, LocalError> {
        let scheme = if opts.tls.is_some() { "https" } else { "http" };
        let client_url = format!("{scheme}://127.0.0.1:{}", free_port()?);
        let peer_url = format!("http://127.0.0.1:{}", free_port()?);
        if let Some(dir) = opts.log.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let log = File::create(&opts.log)?;
        let mut cmd = Command::new(&opts.binary);
        cmd.arg("--name")
            .arg(&opts.name)
            .arg("--data-dir")
            .arg(&opts.data_dir)
            .arg("--listen-client-urls")
            .arg(&client_url)
            .arg("--advertise-client-urls")
            .arg(&client_url)
            .arg("--listen-peer-urls")
            .arg(&peer_url)
            .arg("--initial-advertise-peer-urls")
            .arg(&peer_url)
            .arg("--initial-cluster")
            .arg(format!("{}={peer_url}", opts.name))
            .arg("--logger=zap")
            .arg("--log-outputs=stderr");
        if opts.fast {
            cmd.args(["--heartbeat-interval", "10", "--election-timeout", "100"]);
        }
        if let Some(t) = &opts.tls {
            cmd.arg("--cert-file").arg(&t.cert).arg("--key-file").arg(&t.key);
            cmd.arg("--client-cert-auth").arg("--trusted-ca-file").arg(&t.client_ca);
        }
        if opts.no_fsync {
            cmd.arg("--unsafe-no-fsync");
        }
        if let Some(r) = &opts.auto_compaction {
            cmd.args(["--auto-compaction-mode", "periodic", "--auto-compaction-retention", r]);
        }
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(log);
        // Its own process group: a terminal's Ctrl-C reaches the caller, which stops etcd
        // in order, instead of both at once.
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        // SIGTERM when the thread that started it ends, so a killed caller (SIGKILL runs no
        // Drop) leaves no etcd behind. Callers start it from a thread that lives as long as
        // they use it.
        // SAFETY: the closure runs in the child between fork and exec and only calls
        // prctl(2), which is async-signal-safe; it allocates nothing and takes no lock.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                nix::sys::prctl::set_pdeathsig(Signal::SIGTERM).map_err(io::Error::from)
            });
        }
        let child = cmd.spawn().map_err(|source| LocalError::Spawn {
            binary: opts.binary.display().to_string(),
            source,
        })?;
        let mut me = Self {
            child: Some(child),
            client_url,
            peer_url,
            data_dir: opts.data_dir.clone(),
            log: opts.log.clone(),
            client_tls: opts.client_tls.clone(),
        };
        let mut client = me.client();
        let until = Instant::now() + READY;
        loop {
            if let Some(child) = me.child.as_mut() {
                if let Some(status) = child.try_wait()? {
                    me.child = None;
                    return Err(LocalError::Exited { status, log: tail(&me.log) });
                }
            }
            if client.health().unwrap_or(false) {
                return Ok(me);
            }
            if Instant::now() > until {
                let log = tail(&me.log);
                me.stop();
                return Err(LocalError::NotReady { log });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A client of this etcd.
    pub fn client(&self) -> Client {
        let mut config = Config::new(&[&self.client_url], self.client_tls.clone())
            .unwrap_or_else(|_| Config { endpoints: Vec::new(), tls: None, timeout: READY });
        config.timeout = Duration::from_secs(5);
        Client::new(config)
    }

    /// The process ID, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// SIGTERM, then SIGKILL after a grace; the exit status (None if it was not running).
    #[allow(clippy::disallowed_methods)] // Blocking driver: polls a child, never the loop.
    pub fn stop(&mut self) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        let pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
        let _ = kill(pid, Signal::SIGTERM);
        let until = Instant::now() + GRACE;
        while Instant::now() < until {
            match child.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(_) => break,
            }
        }
        let _ = child.kill();
        child.wait().ok()
    }

    /// SIGKILL at once (a crash, for tests).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for LocalEtcd {
    fn drop(&mut self) {
        self.stop();
    }
}
