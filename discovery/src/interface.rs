// SPDX-License-Identifier: Apache-2.0
//! What the owner of a client hands it and gets back.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use crate::proto::Affiliate;
use crate::target::Target;

/// What a client needs to take part in a cluster.
#[derive(Clone)]
pub struct Config {
    pub target: Target,
    /// Sent to the server as is (Talos: `cluster.id`).
    pub cluster_id: String,
    /// This node's affiliate ID (Talos: the node ID).
    pub affiliate_id: String,
    /// AES-256 key (Talos: base64-decoded `cluster.secret`).
    pub key: [u8; 32],
    /// Free-form version sent in Hello.
    pub client_version: String,
    /// Lifetime of what we publish (at most 30 minutes on the service); refreshed every TTL/2.
    pub ttl: Duration,
    /// Trust roots for `https://` targets.
    pub roots: Arc<rustls::RootCertStore>,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("Config")
            .field("target", &self.target)
            .field("cluster_id", &self.cluster_id)
            .field("affiliate_id", &self.affiliate_id)
            .field("client_version", &self.client_version)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

/// What this node publishes: itself, its endpoints, and endpoints it observed for others.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LocalData {
    pub affiliate: Affiliate,
    pub endpoints: Vec<SocketAddr>,
    /// (affiliate ID, endpoints) reported on behalf of other nodes.
    pub others: Vec<(String, Vec<SocketAddr>)>,
}

/// Another node, decrypted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovered {
    pub id: String,
    pub affiliate: Affiliate,
    pub endpoints: Vec<SocketAddr>,
}

/// What the owner asks of the client.
// A few commands per minute at most: the size of Publish costs nothing worth a Box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Publish (or replace) our data; unchanged data is not sent again.
    Publish(LocalData),
    /// Remove our affiliate from the service (and keep removing it on each refresh).
    Delete,
    Stop,
}

/// What the client tells its owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The whole current set of other nodes, after each change.
    Members(Vec<Discovered>),
    /// Our address as the service saw it.
    PublicIp(IpAddr),
    Connected {
        endpoint: String,
    },
    /// One escaped line for the log.
    Error(String),
}
