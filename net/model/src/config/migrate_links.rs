// SPDX-License-Identifier: Apache-2.0
//! `keelson config migrate` for `machine.network.interfaces`: each device as link, bond,
//! bridge, VLAN and DHCP documents.

use super::documents::Document;
use super::migrate::MigrateError;
use super::network::NetworkConfig;

/// The link documents of every device.
pub(crate) fn devices(network: &NetworkConfig) -> Result<Vec<Document>, MigrateError> {
    if network.interfaces.is_empty() {
        return Ok(Vec::new());
    }
    Err(MigrateError::NoEquivalent {
        path: "machine.network.interfaces".into(),
        why: "link documents are not implemented yet".into(),
    })
}
