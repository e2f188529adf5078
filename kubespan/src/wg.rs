// SPDX-License-Identifier: Apache-2.0
//! What the manager needs from WireGuard: the peers of the `kubespan` device as the kernel
//! reports them (read fresh at every reconcile: handshakes and counters raise no netlink
//! events). The settings it asks for are a `WireguardSpec` in the `kubespan` LinkSpec
//! ([`crate::plan`]).

use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

/// One peer of the device, as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WgPeerState {
    /// Public key (base64).
    pub public_key: String,
    /// The endpoint in use.
    pub endpoint: Option<SocketAddr>,
    /// The last handshake (wall clock), if any.
    pub last_handshake: Option<SystemTime>,
    /// How long ago that was, when it was read.
    pub handshake_age: Option<Duration>,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
}

/// Why the device's peers could not be read.
#[derive(Debug, thiserror::Error)]
pub enum WgError {
    /// The host could not read the device.
    #[error(transparent)]
    Host(#[from] net::host::HostError),
}

/// Reads the device's peers.
pub trait WgReader {
    /// The peers of link `name`; an empty list when the link does not exist (yet).
    fn peers(&mut self, name: &str) -> Result<Vec<WgPeerState>, WgError>;
}

/// A reader with fixed answers, for controller tests.
#[derive(Debug, Default, Clone)]
pub struct FakeWg {
    /// What `peers` returns.
    pub peers: Vec<WgPeerState>,
}

impl WgReader for FakeWg {
    fn peers(&mut self, _name: &str) -> Result<Vec<WgPeerState>, WgError> {
        Ok(self.peers.clone())
    }
}

impl<W: WgReader + ?Sized> WgReader for std::rc::Rc<std::cell::RefCell<W>> {
    fn peers(&mut self, name: &str) -> Result<Vec<WgPeerState>, WgError> {
        self.borrow_mut().peers(name)
    }
}
