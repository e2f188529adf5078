// SPDX-License-Identifier: Apache-2.0
//! `KubeSpanIdentity`: the node's key pair and ULA address (docs/talos.md: KubeSpan). Present only
//! while KubeSpan is enabled, `cluster.id` is set, a physical link exists, and a key is available
//! (configured, or generated into the state directory); the condition says which is missing.

use std::path::PathBuf;

use net::config::MachineConfig;
use net::controllers::MACHINE_CONFIG_ID;
use net::resource::{
    Kind, KubeSpanIdentity, LinkStatus, LinkType, Namespace, KUBESPAN_IDENTITY_ID,
};
use net::wireguard_keys::Key;
use runtime::{Controller, ControllerError, Ctx, Input, Next, Output};

use crate::identity::{
    eui64_address, private_key, ula_subnet, IdentityError, KeyOps, KeyOpsError,
    ULA_PURPOSE_KUBESPAN,
};

/// Why KubeSpan is on but there is no identity yet: the controller's condition.
#[derive(Debug, thiserror::Error)]
pub enum Missing {
    /// No key to use and nowhere to keep a generated one.
    #[error(
        "no privateKey in the config and no state directory to keep a generated one (keelson \
         run --state DIR)"
    )]
    NoKeyStore,
    /// `cluster.id` is not set.
    #[error("cluster.id is not set")]
    ClusterId,
    /// No link to take the MAC from.
    #[error("no physical link yet (the address comes from its MAC)")]
    NoLink,
    /// The key or the address could not be made.
    #[error(transparent)]
    Identity(#[from] IdentityError),
    /// The public key could not be derived.
    #[error("public key: {0}")]
    PublicKey(KeyOpsError),
}

/// Writes the node's `KubeSpanIdentity`.
pub struct IdentityController {
    state_dir: Option<PathBuf>,
    keys: Box<dyn KeyOps>,
    /// The key pair already loaded, with the configured key it came from (`None`: state dir).
    loaded: Option<(Option<Key>, Key, String)>,
}

impl std::fmt::Debug for IdentityController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdentityController").field("state_dir", &self.state_dir).finish()
    }
}

impl IdentityController {
    /// A controller keeping generated keys in `state_dir`.
    pub fn new(state_dir: Option<PathBuf>, keys: Box<dyn KeyOps>) -> Self {
        Self { state_dir, keys, loaded: None }
    }

    /// `(private, public)`, loading or generating the key once per configured value.
    fn key_pair(&mut self, configured: Option<&Key>) -> Result<(Key, String), Missing> {
        if let Some((c, private, public)) = &self.loaded {
            if c.as_ref() == configured {
                return Ok((*private, public.clone()));
            }
        }
        let dir = match (&self.state_dir, configured) {
            (Some(d), _) => d.clone(),
            (None, Some(_)) => PathBuf::new(),
            (None, None) => return Err(Missing::NoKeyStore),
        };
        let (private, source) = private_key(configured, &dir, self.keys.as_ref())?;
        let public = self.keys.public_of(&private).map_err(Missing::PublicKey)?;
        log::info!(target: "kubespan.Identity", "public key {public} ({source:?})");
        self.loaded = Some((configured.copied(), private, public.clone()));
        Ok((private, public))
    }
}

impl Controller for IdentityController {
    fn name(&self) -> &'static str {
        "kubespan.IdentityController"
    }

    fn inputs(&self) -> Vec<Input> {
        vec![
            Input::strong(Namespace::Config, Kind::MachineConfig),
            Input::weak(Namespace::Network, Kind::LinkStatus),
        ]
    }

    fn outputs(&self) -> Vec<Output> {
        vec![Output::exclusive(Namespace::KubeSpan, Kind::KubeSpanIdentity)]
    }

    fn reconcile(&mut self, ctx: &mut Ctx<'_>) -> Result<Next, ControllerError> {
        let wanted = self.wanted(ctx);
        match wanted {
            Ok(Some(identity)) => {
                ctx.set_condition(None);
                ctx.put(Namespace::KubeSpan, KUBESPAN_IDENTITY_ID, identity)?;
            }
            Ok(None) => ctx.set_condition(None),
            Err(reason) => ctx.set_condition(Some(reason.to_string())),
        }
        // KubeSpan off, or something missing: no identity (the key file stays).
        ctx.cleanup_untouched(Namespace::KubeSpan, Kind::KubeSpanIdentity)?;
        Ok(Next::Idle)
    }
}

impl IdentityController {
    /// The identity to publish; `Ok(None)` when KubeSpan is off, `Err` when it is on but
    /// something it needs is missing.
    fn wanted(&mut self, ctx: &Ctx<'_>) -> Result<Option<KubeSpanIdentity>, Missing> {
        let Some(cfg) = ctx.get::<MachineConfig>(Namespace::Config, MACHINE_CONFIG_ID) else {
            return Ok(None);
        };
        let ks = &cfg.machine.network.kubespan;
        if !ks.enabled {
            return Ok(None);
        }
        let Some(cluster_id) = cfg.cluster.as_ref().and_then(|c| c.id.clone()) else {
            return Err(Missing::ClusterId);
        };
        let configured = ks.private_key;
        // The first physical link by name, as Talos's `first` hardware address; without one
        // (a node in a namespace or container has veths), the first Ethernet link.
        let links = ctx.list::<LinkStatus>(Namespace::Network);
        let mac = links
            .iter()
            .find(|(_, l)| l.physical())
            .or_else(|| {
                links
                    .iter()
                    .find(|(_, l)| l.link_type == LinkType::ETHER && l.hardware_addr.0.len() == 6)
            })
            .map(|(_, l)| l.hardware_addr.clone());
        let Some(mac) = mac else {
            return Err(Missing::NoLink);
        };
        let (private, public) = self.key_pair(configured.as_ref())?;
        let subnet = ula_subnet(&cluster_id, ULA_PURPOSE_KUBESPAN);
        let addr = eui64_address(subnet, &mac)?;
        Ok(Some(KubeSpanIdentity {
            address: ipnet::Ipv6Net::from(addr),
            subnet,
            private_key: private,
            public_key: public,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_read_as_before() {
        assert_eq!(
            Missing::NoKeyStore.to_string(),
            "no privateKey in the config and no state directory to keep a generated one (keelson run --state DIR)"
        );
        assert_eq!(Missing::ClusterId.to_string(), "cluster.id is not set");
        assert_eq!(
            Missing::NoLink.to_string(),
            "no physical link yet (the address comes from its MAC)"
        );
        let bad = net::wireguard_keys::Key::from_base64("short").err().map(KeyOpsError::from);
        let text = bad.map(|e| Missing::PublicKey(e).to_string()).unwrap_or_default();
        assert!(text.starts_with("public key: "), "{text}");
    }
}
