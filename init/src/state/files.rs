// SPDX-License-Identifier: Apache-2.0
//! Small file helpers of the state thread.

use std::path::Path;

/// Write a file through a temporary and a rename, mode 0600.
pub fn write_file(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let tmp = path.with_extension("keelson-tmp");
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| f.write_all(data))?;
    std::fs::rename(&tmp, path)
}
