// SPDX-License-Identifier: Apache-2.0
//! The node: the network runtime, kubelet supervision and reaping in one event loop. `run`
//! mode and init mode (PID 1) both drive it; they differ in where files go, whether the
//! hostname is set, and what happens after the loop ends (exit, or power off).
//!
//! The parts: [`event_loop`] (the epoll wait and dispatch, the sources' tags), [`kubelet`] (its
//! desired command, status and reaping), [`config`] (the config file loaded and followed),
//! [`api`] (the local API's wiring), [`netlink`] (kernel events into the runtime), [`health`]
//! (the kubelet's health check), [`lifecycle`] (the machine's stage as a resource) and
//! [`metrics`] (the Prometheus listener).

mod api;
mod config;
mod config_url;
mod discovery;
mod error;
mod etcd;
pub(crate) mod etcd_join;
mod event_loop;
mod hardware;
pub(crate) mod health;
mod kubelet;
mod lifecycle;
mod metrics;
mod netlink;
mod tenant_agent;
mod tenant_status;
mod vips;

use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

use net::controllers::{self, CMDLINE_ID};
use net::host::kernel::KernelHost;
use net::host::SharedHost;
use net::operator::Operators;
use net::resource::{Namespace, SYSTEM_INFORMATION_ID};
use runtime::Runtime;
use timesync::TimeSync;

use self::api::Api;
use self::config::ConfigInput;
use self::config_url::ConfigUrl;
pub use self::error::NodeError;
pub use self::event_loop::Ending;
use self::event_loop::{EventLoop, Tags};
use self::kubelet::Kubelet;
use self::netlink::Netlink;
use crate::machine::SOURCE;
use crate::pid1::uevent::Hotplug;
use crate::reactor::Reactor;

/// How a node runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// The kernel command line.
    pub cmdline: String,
    /// The machine configuration file. With `config_url`, where the fetched config is kept:
    /// when the file exists already it is used and nothing is fetched.
    pub config: Option<PathBuf>,
    /// Fetch the config from this URL (variables not yet substituted) once the network is up.
    pub config_url: Option<String>,
    /// Trust roots for an https `config_url`.
    pub config_roots: Vec<PathBuf>,
    /// Where an applied config is kept (the config file, or where the next boot finds one).
    pub keep_config: Option<PathBuf>,
    /// Where `/etc` files go.
    pub root: PathBuf,
    /// Set the hostname.
    pub hostname: bool,
    /// Stop once settled (`run --once`).
    pub once: bool,
    /// Step and slew the clock from NTP (PID 1, or `run --set-clock`); otherwise time sync
    /// only measures.
    pub set_clock: bool,
    /// A PEM file of extra trust roots for NTS key exchange (beside the image's bundle).
    pub nts_ca: Option<PathBuf>,
    /// Longest wait for services to stop at shutdown.
    pub stop_grace: Duration,
    /// Serve the local API on this Unix socket.
    pub api_socket: Option<PathBuf>,
    /// Serve the API over TLS on these addresses.
    pub api_listen: Vec<std::net::SocketAddr>,
    /// Most API connections at once.
    pub api_max_connections: usize,
    /// Where trustd listens (TLS, a control plane's `securityapi.SecurityService`).
    pub trustd_listen: Vec<std::net::SocketAddr>,
    /// How long the certificates trustd signs are valid (`None`: a year).
    pub trustd_cert_lifetime: Option<Duration>,
    /// Serve Prometheus metrics here when the config has no `machine.metrics`.
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Where state that outlives the loop goes (DHCP leases, keys); `None` keeps nothing.
    pub state: Option<PathBuf>,
    /// Kernel uevents to load drivers for (PID 1 only).
    pub hotplug: Option<Hotplug>,
    /// Rename physical links to their predictable names (PID 1, unless `net.ifnames=0`).
    pub predictable_names: bool,
}

/// Run the node until a stop signal (or, with `once`, until settled).
pub fn run(opts: &Options) -> Result<Ending, NodeError> {
    let reactor = Reactor::new()?;
    let mut tokens = evloop::Tokens::new();
    let tags = Tags::new(&mut tokens).map_err(crate::reactor::ReactorError::from)?;
    let kernel = KernelHost::new(&opts.root, opts.hostname)?;
    let host: SharedHost =
        Rc::new(RefCell::new(kernel.with_predictable_names(opts.predictable_names)));
    let netlink = Netlink::watch(&reactor, tags.netlink.token(0))?;
    let mut api = Api::bind(
        opts.api_socket.as_deref(),
        &opts.api_listen,
        &reactor,
        tags.api,
        opts.api_max_connections,
    )?;
    api.listen_trustd(&opts.trustd_listen, &reactor);
    api.trustd_cert_lifetime(opts.trustd_cert_lifetime);
    api.keep_config_in(opts.keep_config.clone());
    api.fetch_roots(opts.config_roots.clone());
    let mut rt = runtime(&host, opts)?;
    let operators = Operators::new(opts.state.clone());
    if let Some(path) = &opts.config {
        match crate::staged::promote(path) {
            Ok(true) => {
                log::info!(target: "run", "booting into the staged config (now {})", path.display())
            }
            Ok(false) => {}
            Err(e) => log::error!(target: "run", "staged config: {e}; booting the current one"),
        }
    }
    let now = std::time::Instant::now();
    let (config, config_url) = match (&opts.config, &opts.config_url) {
        (Some(path), Some(_)) if path.is_file() => {
            log::info!(target: "config", "using the config fetched before, kept in {}", path.display());
            (Some(ConfigInput::start(path, &mut rt, &reactor, tags.config.token(0))?), None)
        }
        (_, Some(url)) => {
            let fetch = ConfigUrl::start(
                url,
                opts.config_roots.clone(),
                &reactor,
                tags.config_url.token(0),
                now,
            )?;
            (None, Some(fetch))
        }
        (Some(path), None) => {
            (Some(ConfigInput::start(path, &mut rt, &reactor, tags.config.token(0))?), None)
        }
        (None, None) => (None, None),
    };
    let discovery = discovery::Discovery::start(
        &reactor,
        tags.discovery.token(0),
        opts.state.as_deref(),
        opts.config_roots.clone(),
        own_node_id(opts),
        &mut rt,
    )?;
    let etcd_paths = etcd::Paths {
        data: opts.root.join(crate::etcd::DATA_DIR.trim_start_matches('/')),
        pki: opts.root.join("system/secrets/etcd"),
        state: opts.state.clone(),
    };
    api.etcd_paths(crate::etcd::bootstrap::Paths {
        data: etcd_paths.data.clone(),
        mark: opts.state.as_ref().map(|s| s.join(crate::etcd::BOOTSTRAP_MARK)),
        pki: etcd_paths.pki.clone(),
    });
    let node = EventLoop {
        tokens,
        tags,
        discovery,
        metrics: metrics::Metrics::new(opts.metrics_listen),
        tenant: tenant_status::TenantStatus::start(&opts.root, &mut rt, now),
        reactor,
        rt,
        operators,
        netlink,
        api,
        config,
        config_url,
        config_path: opts.config.clone(),
        kubelet: Kubelet::new(),
        etcd: etcd::Etcd::new(etcd_paths.clone()),
        tenant_agent: tenant_agent::TenantAgent::new(opts.root.join(tenant_status::STATUS_FILE)),
        vips: vips::Vips::default(),
        etcd_stopping: false,
        lifecycle: lifecycle::Lifecycle::default(),
        time: TimeSync::new(opts.set_clock, std::time::Instant::now()).with_trust(trust(opts)),
        hotplug: opts.hotplug.clone(),
        features_for: None,
        once: opts.once,
        stop_grace: opts.stop_grace,
    };
    Ok(node.run()?)
}

/// The NodeID, when no state thread keeps one (`keelson run`): kept in `--state` if given,
/// else new for this run. Under PID 1 the state thread makes it, later.
fn own_node_id(opts: &Options) -> Option<String> {
    if !crate::state::status().medium.is_empty() {
        return None;
    }
    let made = match &opts.state {
        Some(dir) => crate::state::identity::establish(dir, &opts.root.join("etc/machine-id"))
            .map(|(id, _)| id),
        None => net::random::random::<{ crate::state::identity::SIZE }>()
            .map(|raw| crate::state::identity::encode(&raw)),
    };
    match made {
        Ok(id) => Some(id),
        Err(e) => {
            log::error!(target: "run", "node identity: {e}");
            None
        }
    }
}

/// NTS-KE trust roots: the image's CA bundle, then `--nts-ca`.
fn trust(opts: &Options) -> timesync::nts::Trust {
    let mut trust = timesync::nts::Trust::default();
    trust.files.extend(opts.nts_ca.clone());
    trust
}

/// The runtime with every controller (network, then KubeSpan) and the command line as input.
fn runtime(host: &SharedHost, opts: &Options) -> Result<Runtime, NodeError> {
    let mut rt = Runtime::new();
    for c in controllers::pipeline(host) {
        rt.register(c)?;
    }
    for c in kubespan::kernel::controllers(host, opts.state.clone()) {
        rt.register(c)?;
    }
    let parsed = net::cmdline::parse(&opts.cmdline);
    for e in &parsed.errors {
        log::error!(target: "cmdline", "{e}");
    }
    for w in &parsed.warnings {
        log::warn!(target: "cmdline", "{w}");
    }
    rt.put_input(SOURCE, Namespace::Runtime, CMDLINE_ID, parsed)?;
    let system = hardware::read(std::path::Path::new("/sys"));
    if !system.uuid.is_empty() || !system.manufacturer.is_empty() {
        log::info!(
            target: "run",
            "system: {} {}, serial {:?}, uuid {}",
            system.manufacturer,
            system.product_name,
            system.serial_number,
            system.uuid
        );
    }
    rt.put_input(SOURCE, Namespace::Hardware, SYSTEM_INFORMATION_ID, system)?;
    Ok(rt)
}
