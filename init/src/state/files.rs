// SPDX-License-Identifier: Apache-2.0
//! Small file and randomness helpers of the state thread.

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

/// `N` bytes from the kernel's random source.
pub fn random<const N: usize>() -> std::io::Result<[u8; N]> {
    let mut buf = [0u8; N];
    let mut filled = 0;
    while filled < N {
        let rest = buf.get_mut(filled..).unwrap_or_default();
        // SAFETY: the pointer and length describe `rest`, a live writable slice, for the whole
        // call; getrandom(2) writes at most `rest.len()` bytes into it.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        match usize::try_from(n) {
            Ok(n) => filled += n,
            Err(_) => {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    Ok(buf)
}
