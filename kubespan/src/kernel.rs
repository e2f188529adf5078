// SPDX-License-Identifier: Apache-2.0
//! The real adapters behind KubeSpan's boundaries: WireGuard read through `net`'s host, keys
//! through `net::wireguard_keys`, the firewall through [`crate::nft`].

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use net::host::{HostErrorKind, SharedHost};
use net::wireguard_keys::{public_key, random_private_key, Key};
use runtime::Controller;

use crate::controller::{IdentityController, Manager, PeerSpecController};
use crate::firewall::{Firewall, FirewallError};
use crate::identity::{KeyOps, KeyOpsError};
use crate::nft::{Nft, NftPlan};
use crate::wg::{WgError, WgPeerState, WgReader};

/// KubeSpan's controllers against the real kernel, in pipeline order.
pub fn controllers(host: &SharedHost, state_dir: Option<PathBuf>) -> Vec<Box<dyn Controller>> {
    vec![
        Box::new(IdentityController::new(state_dir, Box::new(WgKeys))),
        Box::new(crate::cluster::controller::AffiliateController),
        Box::new(crate::cluster::controller::MemberController),
        Box::new(PeerSpecController::default()),
        Box::new(Manager::new(Box::new(NftFirewall::default()), Box::new(HostWg(host.clone())))),
    ]
}

/// Keys from `net::wireguard_keys` (X25519, the kernel's random source).
#[derive(Debug, Clone, Copy)]
pub struct WgKeys;

impl KeyOps for WgKeys {
    fn generate(&self) -> Result<Key, KeyOpsError> {
        Ok(random_private_key()?)
    }

    fn public_of(&self, private: &Key) -> Result<String, KeyOpsError> {
        Ok(public_key(private).to_base64())
    }
}

/// Reads the device through the host's `WG_CMD_GET_DEVICE`.
pub struct HostWg(pub SharedHost);

impl std::fmt::Debug for HostWg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HostWg")
    }
}

impl WgReader for HostWg {
    fn peers(&mut self, name: &str) -> Result<Vec<WgPeerState>, WgError> {
        let device = match self.0.borrow_mut().wireguard(name) {
            Ok(d) => d,
            Err(e) if e.kind == HostErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e.into()),
        };
        let now = SystemTime::now();
        Ok(device
            .peers
            .into_iter()
            .map(|p| {
                let last =
                    p.last_handshake.map(|s| UNIX_EPOCH + Duration::new(s, p.last_handshake_nanos));
                WgPeerState {
                    public_key: p.public_key.to_base64(),
                    endpoint: p.endpoint,
                    last_handshake: last,
                    // A clock step backwards reads as "just now", never as a panic.
                    handshake_age: last.map(|t| now.duration_since(t).unwrap_or_default()),
                    rx_bytes: p.rx_bytes,
                    tx_bytes: p.tx_bytes,
                }
            })
            .collect())
    }
}

/// The nftables adapter, opened on first use: a node that never enables KubeSpan never needs
/// nf_tables.
#[derive(Debug, Default)]
pub struct NftFirewall {
    nft: Option<Nft>,
}

impl NftFirewall {
    fn open(&mut self) -> Result<&mut Nft, FirewallError> {
        let nft = match self.nft.take() {
            Some(n) => n,
            None => Nft::new()?,
        };
        Ok(self.nft.insert(nft))
    }
}

impl Firewall for NftFirewall {
    fn apply(&mut self, plan: &NftPlan) -> Result<(), FirewallError> {
        self.open()?.apply(plan).map(|_| ())
    }

    fn remove(&mut self) -> Result<(), FirewallError> {
        // With nf_tables not loaded there is no table to remove, and opening the socket would
        // have the kernel run its modprobe helper for nf_tables and wait for it, inside the
        // node loop, at every boot with KubeSpan off (the leftover check at start).
        if self.nft.is_none() && !nf_tables_loaded(Path::new(SYS_MODULE)) {
            return Ok(());
        }
        self.open()?.remove().map(|_| ())
    }
}

/// Where the kernel lists its loaded modules.
const SYS_MODULE: &str = "/sys/module";

/// Whether the kernel has nf_tables: a loaded module has `/sys/module/nf_tables`. (A kernel
/// with it built in may show no such entry; a table left there can only be from the same
/// boot, a node loop restarted after KubeSpan was on, and the skipped removal is best effort.)
fn nf_tables_loaded(sys_module: &Path) -> bool {
    sys_module.join("nf_tables").exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_leftover_table_without_nf_tables() {
        let dir = std::env::temp_dir().join(format!("keelson-sysmod-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("wireguard")).unwrap();
        assert!(!nf_tables_loaded(&dir));
        std::fs::create_dir_all(dir.join("nf_tables")).unwrap();
        assert!(nf_tables_loaded(&dir));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn keys_generate_and_derive() {
        let a = WgKeys.generate().unwrap();
        let b = WgKeys.generate().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.to_base64().len(), 44);
        let public = WgKeys.public_of(&a).unwrap();
        assert_eq!(public.len(), 44);
        assert_ne!(public, a.to_base64());
        assert_eq!(WgKeys.public_of(&a).unwrap(), public, "deterministic");
        // A private key that is not a key cannot reach `public_of`: it is a `Key`.
    }
}
