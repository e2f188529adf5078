// SPDX-License-Identifier: Apache-2.0
//! A shared VIP's election as this node sees it: [`VipStatus`], one per configured VIP in
//! `network`, its ID the VIP address. It says who holds the VIP and, when this node does not,
//! why (`waiting behind cp-1`, `quorum lost`, ...), so a VIP nobody holds can be explained from
//! every node. Talos has no such resource: keelson's own.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

/// This node's part in one VIP's election.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VipStatus {
    /// The shared address.
    pub vip: IpAddr,
    /// The link it goes on.
    pub link_name: String,
    /// This node holds it (the address is on the link).
    #[serde(default)]
    pub holding: bool,
    /// The hostname of the election's leader, when known.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub holder: String,
    /// One word or two: `holding`, `waiting`, `campaigning`, `fenced`, `quorum lost`,
    /// `etcd unreachable`, `waiting for etcd`, `not a control plane`, `handing over`,
    /// `stopped`.
    pub state: String,
    /// The state in a sentence (`waiting behind cp-1`, `fenced: no keep-alive since ...`).
    pub reason: String,
    /// When the state last changed, RFC 3339.
    pub since: String,
}

/// The ID of `vip`'s status: the address as text.
pub fn vip_status_id(vip: IpAddr) -> String {
    vip.to_string()
}
