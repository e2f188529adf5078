// SPDX-License-Identifier: Apache-2.0
//! Small file helpers of the state thread.

use std::path::Path;

/// Write a file through a temporary and a rename, mode 0600.
pub fn write_file(path: &Path, data: &[u8]) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    net::atomic_file::write(path, data, 0o600, net::atomic_file::Durability::Nothing)
}
