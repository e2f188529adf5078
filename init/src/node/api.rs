// SPDX-License-Identifier: Apache-2.0
//! The local API's wiring into the node loop: bound at start (PID 1 runs on without it),
//! fed every store change after the runtime ran, and handed its sockets' readiness.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Instant;

use runtime::{Change, Runtime};

use crate::api::server::{Server, ServerError};
use crate::machine::Machine;
use crate::reactor::Reactor;

/// The API server, when there is one.
pub struct Api(Option<Server>);

impl Api {
    /// Serve on `socket` and over TLS on `listen` (if asked), the listeners and their
    /// connections reported as tokens of `tag`.
    pub fn bind(
        socket: Option<&Path>,
        listen: &[SocketAddr],
        reactor: &Reactor,
        tag: evloop::Tag,
        max_connections: usize,
    ) -> Result<Self, ServerError> {
        // A path no Unix socket can have is the operator's typo, not a reason to leave the
        // network unconfigured: said once, and the rest runs without the socket.
        let socket = socket.filter(|path| match socket_path_problem(path) {
            Some(why) => {
                log::error!(target: "api", "api socket {}: {why}; the API is not served on it", path.display());
                false
            }
            None => true,
        });
        if socket.is_none() && listen.is_empty() {
            return Ok(Self(None));
        }
        // PID 1 never dies: without its API it still runs the network, so a bind failure (say,
        // another node answering on the socket) is logged, and what can be served is. `run`
        // was asked for its API: it refuses to start without it.
        match Server::bind(socket, listen, reactor, tag, max_connections) {
            Ok(server) => Ok(Self(Some(server))),
            Err(e) if std::process::id() == 1 => {
                log::error!(target: "api", "{e}");
                // Without IPv6 (ipv6.disable=1) `[::]` cannot be bound: IPv4 alone, then the
                // socket alone, then the TLS port alone.
                let v4: Vec<SocketAddr> = listen
                    .iter()
                    .map(|a| match a.ip() {
                        std::net::IpAddr::V6(v6) if v6.is_unspecified() => {
                            SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, a.port()))
                        }
                        _ => *a,
                    })
                    .collect();
                let fallback = Server::bind(socket, &v4, reactor, tag, max_connections)
                    .or_else(|_| Server::bind(socket, &[], reactor, tag, max_connections))
                    .or_else(|_| Server::bind(None, listen, reactor, tag, max_connections));
                match fallback {
                    Ok(server) => Ok(Self(Some(server))),
                    Err(e) => {
                        log::error!(target: "api", "{e}; running without the API");
                        Ok(Self(None))
                    }
                }
            }
            Err(e) => Err(e),
        }
    }

    /// Serve trustd over TLS on `listen` too (a control plane signs its workers' API
    /// certificates there); a bind failure is logged and the rest runs.
    pub fn listen_trustd(&mut self, listen: &[SocketAddr], reactor: &Reactor) {
        if let (Some(server), false) = (&mut self.0, listen.is_empty()) {
            // Without IPv6 (ipv6.disable=1) `[::]` cannot be bound: IPv4 alone then.
            let v4: Vec<SocketAddr> = listen
                .iter()
                .map(|a| match a.ip() {
                    std::net::IpAddr::V6(v6) if v6.is_unspecified() => {
                        SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, a.port()))
                    }
                    _ => *a,
                })
                .collect();
            let bound = server.listen_trustd(listen, reactor).or_else(|e| {
                if v4 == listen {
                    Err(e)
                } else {
                    server.listen_trustd(&v4, reactor)
                }
            });
            if let Err(e) = bound {
                log::error!(target: "trustd", "{e}; trustd is not served");
            }
        }
    }

    /// Stream the changes to watchers, close what timed out.
    pub fn after_run(&mut self, rt: &Runtime, changes: &[Change], reactor: &Reactor, now: Instant) {
        if let Some(api) = &mut self.0 {
            api.after_run(rt, changes, reactor, now);
        }
    }

    /// Keep applied configs in the config file the node reads at start.
    pub fn keep_config_in(&mut self, path: Option<std::path::PathBuf>) {
        if let Some(api) = &mut self.0 {
            api.keep_config_in(path);
        }
    }

    /// Roll back a config on trial whose time is up.
    pub fn before_run(&mut self, rt: &mut Runtime, now: Instant) {
        if let Some(api) = &mut self.0 {
            api.before_run(rt, now);
        }
    }

    /// A reboot or shutdown a client asked for, once.
    pub fn take_power(&mut self) -> Option<crate::machine::Power> {
        self.0.as_mut().and_then(Server::take_power)
    }

    /// How long the certificates trustd signs are valid (`None`: a year).
    pub fn trustd_cert_lifetime(&mut self, lifetime: Option<std::time::Duration>) {
        if let Some(api) = &mut self.0 {
            api.trustd_cert_lifetime(lifetime);
        }
    }

    /// Trust roots for an upgrade's https downloads.
    pub fn fetch_roots(&mut self, roots: Vec<std::path::PathBuf>) {
        if let Some(api) = &mut self.0 {
            api.fetch_roots(roots);
        }
    }

    /// Where `Bootstrap` looks and what it writes.
    pub fn etcd_paths(&mut self, paths: crate::etcd::bootstrap::Paths) {
        if let Some(api) = &mut self.0 {
            api.etcd_paths(paths);
        }
    }

    /// `Bootstrap` accepted, once.
    pub fn take_bootstrap(&mut self) -> bool {
        self.0.as_mut().is_some_and(Server::take_bootstrap)
    }

    /// `EtcdLeaveCluster` removed this node's member, once.
    pub fn take_etcd_stop(&mut self) -> bool {
        self.0.as_mut().is_some_and(Server::take_etcd_stop)
    }

    /// A service restart a client asked for (its id), once.
    pub fn take_restart(&mut self) -> Option<String> {
        self.0.as_mut().and_then(Server::take_restart)
    }

    /// A service start or stop a client asked for (its id), once.
    pub fn take_service_op(&mut self) -> Option<(String, crate::supervisor::Op)> {
        self.0.as_mut().and_then(Server::take_service_op)
    }

    /// Open connections (`None`: the API is not served).
    pub fn open_connections(&self) -> Option<usize> {
        self.0.as_ref().map(Server::open_connections)
    }

    /// The earliest connection deadline.
    pub fn poll_at(&self) -> Option<Instant> {
        self.0.as_ref().and_then(Server::poll_at)
    }

    /// Handle `token` if it is the listener's or a connection's; false when it is not ours.
    pub fn ready(
        &mut self,
        token: u64,
        rt: &mut Runtime,
        machine: Machine,
        reactor: &Reactor,
        now: Instant,
    ) -> bool {
        match self.0.as_mut().filter(|a| a.owns(token)) {
            Some(api) => {
                api.ready(token, rt, machine, reactor, now);
                true
            }
            None => false,
        }
    }
}

/// The most bytes of a Unix socket path (`sun_path` holds 108 with its NUL, unix(7)).
const MAX_SOCKET_PATH: usize = 107;

/// Why `path` cannot name a Unix socket, if it cannot.
fn socket_path_problem(path: &Path) -> Option<String> {
    use std::os::unix::ffi::OsStrExt;
    let len = path.as_os_str().as_bytes().len();
    (len > MAX_SOCKET_PATH).then(|| {
        format!("{len} bytes long, longer than the {MAX_SOCKET_PATH} a Unix socket path may be")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_paths_longer_than_sun_path_are_told_apart() {
        assert_eq!(socket_path_problem(Path::new("/run/keelson/api.sock")), None);
        let at_most = format!("/{}", "a".repeat(MAX_SOCKET_PATH - 1));
        assert_eq!(socket_path_problem(Path::new(&at_most)), None);
        let over = format!("/{}", "a".repeat(MAX_SOCKET_PATH));
        let why = socket_path_problem(Path::new(&over)).unwrap_or_default();
        assert!(why.starts_with("108 bytes long"), "{why}");
    }
}
