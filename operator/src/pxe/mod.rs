// SPDX-License-Identifier: Apache-2.0
//! Network boot from the operator (docs/pxe.md): boot images by version ([`images`]), the
//! machines it boots ([`machines`]: `machine add` entries; [`talos_table`]: TalosMachines with
//! a `pxeClientSpec`), the iPXE scripts ([`script`]) and the HTTP service that hands them and
//! the images out ([`http`]), a read-only TFTP server for the first stage ([`tftp`]),
//! proxyDHCP ([`proxydhcp`]), `serve`'s flags ([`options`]) and the `image` and `machine`
//! commands ([`cli`]).

pub mod cli;
#[cfg(test)]
mod fuzz;
pub mod http;
pub mod images;
pub mod mac;
pub mod machines;
pub mod options;
pub mod proxydhcp;
pub mod script;
pub mod talos_table;
pub mod tftp;

use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use images::Images;
use machines::MachineTable;
pub use options::Options;

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("--boot-http {0}: {1}")]
    Http(SocketAddr, std::io::Error),
    #[error("--tftp {0}: {1}")]
    Tftp(SocketAddr, std::io::Error),
    #[error("--proxy-dhcp needs --boot-http")]
    ProxyWithoutHttp,
    #[error("{0}")]
    Proxy(#[from] proxydhcp::SocketError),
    #[error("boot service: no --data-dir, and neither XDG_STATE_HOME nor HOME is set")]
    NoDataDir,
    #[error("boot service thread: {0}")]
    Thread(std::io::Error),
}

/// The running services; they stop when the `stop` flag given to [`start`] is set.
#[derive(Debug, Default)]
pub struct Running {
    pub http: Option<SocketAddr>,
    pub tftp: Option<SocketAddr>,
    threads: Vec<JoinHandle<()>>,
}

impl Running {
    pub fn join(self) {
        for t in self.threads {
            let _ = t.join();
        }
    }
}

#[allow(clippy::disallowed_methods)] // Service threads of the operator, not an event loop.
pub(crate) fn pause(d: Duration) {
    std::thread::sleep(d);
}

/// Start what `o` asks for.
pub fn start(
    o: &Options,
    images: Arc<Images>,
    table: Arc<dyn MachineTable>,
    stop: Arc<AtomicBool>,
) -> Result<Running, StartError> {
    let mut r = Running::default();
    if o.proxy_dhcp.is_some() && o.http.is_none() {
        return Err(StartError::ProxyWithoutHttp);
    }
    let proxy_table = table.clone();
    if let Some(addr) = o.http {
        let l = TcpListener::bind(addr).map_err(|e| StartError::Http(addr, e))?;
        let bound = l.local_addr().map_err(|e| StartError::Http(addr, e))?;
        let svc = Arc::new(http::Service::new(images, table, o.url.clone()));
        let stop = stop.clone();
        let t = evloop::spawn_worker("boot-http", move || http::serve(l, svc, stop))
            .map_err(StartError::Thread)?;
        log::info!("boot http on {bound}");
        r.http = Some(bound);
        r.threads.push(t);
    }
    if let Some(addr) = o.tftp {
        let sock = UdpSocket::bind(addr).map_err(|e| StartError::Tftp(addr, e))?;
        let bound = sock.local_addr().map_err(|e| StartError::Tftp(addr, e))?;
        let root = o.tftp_root.clone().unwrap_or_else(|| PathBuf::from(tftp::DEFAULT_ROOT));
        log::info!("tftp on {bound}, files from {}", root.display());
        let stop = stop.clone();
        let t = evloop::spawn_worker("tftp", move || tftp::serve(sock, root, stop))
            .map_err(StartError::Thread)?;
        r.tftp = Some(bound);
        r.threads.push(t);
    }
    if let (Some(iface), Some(http)) = (&o.proxy_dhcp, r.http) {
        let server = proxydhcp::iface_addr(iface)?;
        let http_base = o.url.clone().unwrap_or_else(|| format!("http://{server}:{}", http.port()));
        let cfg = proxydhcp::Config { server, http_base };
        // Port 67 for the broadcast DISCOVER/REQUEST, 4011 for a ROM's unicast REQUEST.
        for (addr, port) in [(std::net::Ipv4Addr::UNSPECIFIED, 67), (server, 4011)] {
            let sock = proxydhcp::socket(iface, addr, port)?;
            let (table, cfg, stop) = (proxy_table.clone(), cfg.clone(), stop.clone());
            let t =
                evloop::spawn_worker("proxydhcp", move || proxydhcp::serve(sock, table, cfg, stop))
                    .map_err(StartError::Thread)?;
            r.threads.push(t);
        }
        log::info!("proxydhcp on {iface} ({server}), ports 67 and 4011");
    }
    Ok(r)
}

/// The boot services `serve` runs; dropping this stops them.
#[derive(Debug)]
pub struct Guard {
    stop: Arc<AtomicBool>,
    running: Option<Running>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(r) = self.running.take() {
            r.join();
        }
    }
}

/// Start the boot services `serve`'s flags ask for (none: `Ok(None)`), with images from the
/// data directory and the machine table in the operator's store.
pub fn from_serve(
    o: &crate::cli::ServeOptions,
    client: &etcd::Client,
) -> Result<Option<Guard>, StartError> {
    if o.pxe.http.is_none() && o.pxe.tftp.is_none() && o.pxe.proxy_dhcp.is_none() {
        return Ok(None);
    }
    let dir =
        o.data_dir.clone().or_else(crate::cli::default_data_dir).ok_or(StartError::NoDataDir)?;
    let images = Arc::new(Images::new(&dir));
    let layout = crate::key::Layout::new(&o.prefix, o.prefix.as_bytes());
    let store = crate::store::Store::new(client.clone(), layout.clone());
    let talos = crate::store::Store::new(client.clone(), layout);
    let mut talos = talos_table::TalosMachines::new(talos, &o.namespace);
    // The key `serve` made (or was given) opens generated cluster secrets for `/config/MAC`.
    let key_path = o.secrets_key.clone().unwrap_or_else(|| dir.join("secrets.key"));
    if key_path.exists() {
        match crate::secrets::SecretsKey::load_or_create(&key_path) {
            Ok(k) => talos = talos.with_secrets_key(k),
            Err(e) => log::warn!("boot service: {e}; generated configurations not served"),
        }
    }
    // Explicit `machine add` entries first, then TalosMachines with a pxeClientSpec.
    let table: Arc<dyn MachineTable> = Arc::new(talos_table::Chain(vec![
        Arc::new(machines::StoreTable::new(store)),
        Arc::new(talos),
    ]));
    let stop = Arc::new(AtomicBool::new(false));
    let running = start(&o.pxe, images, table, stop.clone())?;
    Ok(Some(Guard { stop, running: Some(running) }))
}
