// SPDX-License-Identifier: Apache-2.0
//! Loading a kernel and an initramfs for the next boot with `kexec_file_load(2)`: each goes
//! into a memfd (keelson runs from RAM: there is no disk file to hand the kernel), the
//! command line is NUL-terminated. The kernel checks the image itself (and, where the kernel
//! enforces it, its signature). Booting it is `reboot(RB_KEXEC)`, once services stopped.

use std::io::Write as _;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Why the new kernel could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum KexecError {
    #[error("memfd for the {0}: {1}")]
    Memfd(&'static str, std::io::Error),
    #[error("the kernel command line holds a NUL byte")]
    Cmdline,
    #[error("kexec_file_load: {0}")]
    Load(std::io::Error),
}

/// `data` in a new memfd (the download's buffer can then go: only one copy is held).
pub fn memfd(what: &'static str, data: &[u8]) -> Result<OwnedFd, KexecError> {
    let name = c"keelson-upgrade";
    // SAFETY: a valid NUL-terminated name; the returned fd is owned below.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(KexecError::Memfd(what, std::io::Error::last_os_error()));
    }
    // SAFETY: `fd` was just created and is owned by nothing else.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut file = std::fs::File::from(owned);
    file.write_all(data).map_err(|e| KexecError::Memfd(what, e))?;
    Ok(file.into())
}

/// Load the kernel and initramfs in `kernel` and `initramfs` (memfds) with `cmdline` as the
/// kernel to boot at `RB_KEXEC`.
pub fn load(kernel: &OwnedFd, initramfs: &OwnedFd, cmdline: &str) -> Result<(), KexecError> {
    let cmdline = std::ffi::CString::new(cmdline).map_err(|_| KexecError::Cmdline)?;
    let bytes = cmdline.as_bytes_with_nul();
    // SAFETY: both fds are open; the command line pointer and its length (with the NUL, as
    // the call wants) stay valid for the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_kexec_file_load,
            kernel.as_raw_fd(),
            initramfs.as_raw_fd(),
            bytes.len() as libc::c_ulong,
            bytes.as_ptr(),
            0 as libc::c_ulong,
        )
    };
    if rc != 0 {
        return Err(KexecError::Load(std::io::Error::last_os_error()));
    }
    Ok(())
}
