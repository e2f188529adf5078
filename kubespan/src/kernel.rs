// SPDX-License-Identifier: Apache-2.0
//! The real adapters behind KubeSpan's boundaries: WireGuard read through `net`'s host, keys
//! through `net::wireguard_keys`, the firewall through [`crate::nft`], and the glue that puts
//! the planned WireGuard settings into the `kubespan` LinkSpec.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use net::host::{HostErrorKind, SharedHost};
use net::resource::{LinkSpec, WireguardPeer, WireguardSpec};
use net::runtime::Controller;
use net::wireguard_keys::{public_key, random_private_key, Key};

use crate::controller::{IdentityController, Manager, PeerSpecController};
use crate::firewall::{Firewall, FirewallError};
use crate::identity::{KeyOps, KeyOpsError};
use crate::nft::{Nft, NftPlan};
use crate::wg::{WgError, WgPeerState, WgPlan, WgReader};

/// KubeSpan's controllers against the real kernel, in pipeline order.
pub fn controllers(host: &SharedHost, state_dir: Option<PathBuf>) -> Vec<Box<dyn Controller>> {
    vec![
        Box::new(IdentityController::new(state_dir, Box::new(WgKeys))),
        Box::new(PeerSpecController::default()),
        Box::new(Manager::new(
            Box::new(NftFirewall::default()),
            Box::new(HostWg(host.clone())),
            link_glue,
        )),
    ]
}

/// Keys from `net::wireguard_keys` (X25519, the kernel's random source).
#[derive(Debug, Clone, Copy)]
pub struct WgKeys;

impl KeyOps for WgKeys {
    fn generate(&self) -> Result<String, KeyOpsError> {
        Ok(random_private_key()?.to_base64())
    }

    fn public_of(&self, private: &str) -> Result<String, KeyOpsError> {
        let key = Key::from_base64(private)?;
        Ok(public_key(&key).to_base64())
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
                let last = p.last_handshake.map(|s| UNIX_EPOCH + Duration::from_secs(s));
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
        self.open()?.remove().map(|_| ())
    }
}

/// Put the planned WireGuard settings into the `kubespan` LinkSpec.
pub fn link_glue(link: &mut LinkSpec, plan: &WgPlan) {
    let mut spec = WireguardSpec {
        private_key: plan.private_key.clone(),
        listen_port: plan.listen_port,
        firewall_mark: plan.firewall_mark,
        peers: plan
            .peers
            .iter()
            .map(|p| WireguardPeer {
                public_key: p.public_key.clone(),
                preshared_key: p.preshared_key.clone(),
                endpoint: p.endpoint,
                persistent_keepalive_interval: u16::try_from(
                    p.persistent_keepalive_interval.as_secs(),
                )
                .unwrap_or(u16::MAX),
                allowed_ips: p.allowed_ips.clone(),
            })
            .collect(),
    };
    spec.normalize();
    link.wireguard = Some(spec);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wg::WgPeerPlan;

    #[test]
    fn glue_carries_every_field_sorted() {
        let peer = |key: &str, endpoint: Option<&str>| WgPeerPlan {
            public_key: key.into(),
            preshared_key: Some("psk".into()),
            endpoint: endpoint.map(|e| e.parse().unwrap()),
            persistent_keepalive_interval: Duration::from_secs(25),
            allowed_ips: vec!["10.0.0.3/32".parse().unwrap(), "10.0.0.2/32".parse().unwrap()],
        };
        let plan = WgPlan {
            private_key: "priv".into(),
            listen_port: 51820,
            firewall_mark: 0x20,
            peers: vec![peer("b", None), peer("a", Some("192.0.2.1:51820"))],
        };
        let mut link = LinkSpec::default();
        link_glue(&mut link, &plan);
        let wg = link.wireguard.unwrap();
        assert_eq!(
            (wg.private_key.as_str(), wg.listen_port, wg.firewall_mark),
            ("priv", 51820, 0x20)
        );
        let keys: Vec<&str> = wg.peers.iter().map(|p| p.public_key.as_str()).collect();
        assert_eq!(keys, ["a", "b"]);
        let a = &wg.peers[0];
        assert_eq!(a.endpoint, Some("192.0.2.1:51820".parse().unwrap()));
        assert_eq!(
            (a.persistent_keepalive_interval, a.preshared_key.as_deref()),
            (25, Some("psk"))
        );
        assert_eq!(a.allowed_ips[0].to_string(), "10.0.0.2/32", "normalized order");
        assert_eq!(wg.peers[1].endpoint, None, "don't touch");
    }

    #[test]
    fn keys_generate_and_derive() {
        let a = WgKeys.generate().unwrap();
        let b = WgKeys.generate().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 44);
        let public = WgKeys.public_of(&a).unwrap();
        assert_eq!(public.len(), 44);
        assert_ne!(public, a);
        assert_eq!(WgKeys.public_of(&a).unwrap(), public, "deterministic");
        assert!(WgKeys.public_of("not a key").is_err());
    }
}
