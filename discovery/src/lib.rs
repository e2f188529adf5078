//! keelson's discovery client: the wire protocol of the Talos discovery service
//! (`sidero.discovery.server.Cluster`), spoken with small sans-IO engines.

pub mod crypto;
pub mod h2;
pub mod proto;
