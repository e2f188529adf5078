// SPDX-License-Identifier: Apache-2.0
//! The API's listening socket and its path. The path is ours only while we serve: at bind,
//! a socket that still answers belongs to a running node and is never replaced (only one
//! that refuses connections is stale), and anything that is not a socket is left alone; at
//! shutdown the path is removed only if it is still the socket we bound (same device and
//! inode).

use std::io::ErrorKind;
use std::os::fd::AsFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use crate::reactor::Reactor;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// Socket setup failed.
    #[error("api socket {}: {what}: {source}", path.display())]
    Io {
        /// The socket path.
        path: PathBuf,
        /// What was attempted.
        what: &'static str,
        /// The error.
        source: std::io::Error,
    },
    /// Another process answers on the path: a running node's socket is never replaced.
    #[error("api socket {}: another process answers on it (is another keelson running?); not replacing it", path.display())]
    InUse {
        /// The socket path.
        path: PathBuf,
    },
    /// Something other than a socket is at the path.
    #[error("api socket {}: the path exists and is not a socket (a {kind}); not replacing it", path.display())]
    NotASocket {
        /// The socket path.
        path: PathBuf,
        /// What is there.
        kind: &'static str,
    },
    /// Registering with epoll failed.
    #[error("api socket: {0}")]
    Reactor(#[from] crate::reactor::ReactorError),
    /// A TCP listener could not be bound.
    #[error(transparent)]
    Listen(#[from] super::remote::ListenError),
}
/// The bound listener; dropping it removes the path if it is still this socket.
pub struct Socket {
    listener: UnixListener,
    path: PathBuf,
    /// The bound socket's (device, inode): at shutdown the path is removed only if it is
    /// still this socket.
    bound: (u64, u64),
}

impl Socket {
    /// Listen on `path` (mode 0600: only root may connect), registering the listener as
    /// `token`.
    pub fn bind(path: &Path, reactor: &Reactor, token: u64) -> Result<Self, ServerError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io(path, "create directory"))?;
        }
        claim(path)?;
        // The umask closes the window between bind and chmod in which others could connect.
        let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o177));
        let bound = UnixListener::bind(path);
        nix::sys::stat::umask(old);
        let listener = bound.map_err(io(path, "bind"))?;
        let meta = std::fs::symlink_metadata(path).map_err(io(path, "stat"))?;
        let bound = (meta.dev(), meta.ino());
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(io(path, "chmod"))?;
        listener.set_nonblocking(true).map_err(io(path, "set non-blocking"))?;
        reactor.add(listener.as_fd(), token)?;
        log::info!(target: "api", "listening on {}", path.display());
        Ok(Self { listener, path: path.to_owned(), bound })
    }

    /// The path it listens on.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Take one waiting connection.
    pub fn accept(&self) -> std::io::Result<UnixStream> {
        self.listener.accept().map(|(s, _)| s)
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        match std::fs::symlink_metadata(&self.path) {
            Ok(m) if m.file_type().is_socket() && (m.dev(), m.ino()) == self.bound => {
                let _ = std::fs::remove_file(&self.path);
            }
            Ok(_) => {
                log::warn!(target: "api", "{}: no longer the socket this node bound; left in place", self.path.display());
            }
            Err(_) => {}
        }
    }
}

/// Make way for binding `path`: nothing there, or a stale socket (nobody accepts on it),
/// which is removed. A socket that answers belongs to a running node; anything else is not
/// ours to remove.
fn claim(path: &Path) -> Result<(), ServerError> {
    use nix::errno::Errno;
    use nix::sys::socket::{connect, socket, AddressFamily, SockFlag, SockType, UnixAddr};
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(path, "inspect")(e)),
    };
    if !meta.file_type().is_socket() {
        let kind = kind_of(meta.file_type());
        return Err(ServerError::NotASocket { path: path.to_owned(), kind });
    }
    // Non-blocking: a live node with a full backlog answers EAGAIN instead of blocking us.
    let errno = |e: Errno| std::io::Error::from_raw_os_error(e as i32);
    let probe = socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(|e| io(path, "probe socket")(errno(e)))?;
    let addr = UnixAddr::new(path).map_err(|e| io(path, "probe address")(errno(e)))?;
    match connect(std::os::fd::AsRawFd::as_raw_fd(&probe), &addr) {
        Err(Errno::ECONNREFUSED) => {
            log::info!(target: "api", "{}: removing a stale socket (nobody accepts on it)", path.display());
            match std::fs::remove_file(path) {
                Err(e) if e.kind() != ErrorKind::NotFound => {
                    Err(io(path, "remove stale socket")(e))
                }
                _ => Ok(()),
            }
        }
        // Gone meanwhile: nothing to remove.
        Err(Errno::ENOENT) => Ok(()),
        Ok(()) | Err(Errno::EAGAIN) => Err(ServerError::InUse { path: path.to_owned() }),
        Err(e) => Err(io(path, "probe existing socket")(errno(e))),
    }
}

fn kind_of(ft: std::fs::FileType) -> &'static str {
    if ft.is_dir() {
        "directory"
    } else if ft.is_file() {
        "regular file"
    } else if ft.is_symlink() {
        "symbolic link"
    } else if ft.is_fifo() {
        "FIFO"
    } else if ft.is_char_device() || ft.is_block_device() {
        "device"
    } else {
        "special file"
    }
}

fn io<'a>(path: &'a Path, what: &'static str) -> impl Fn(std::io::Error) -> ServerError + 'a {
    move |source| ServerError::Io { path: path.to_owned(), what, source }
}
