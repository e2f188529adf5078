// SPDX-License-Identifier: Apache-2.0
//! What a connection reads and writes through: the local Unix socket as it is, or TLS over
//! TCP. Both are non-blocking; the connection code ([`super::conn`]) sees only this trait, so
//! the bounds it keeps (request size, deadlines, write cap) hold for both.

use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;

/// Longest time from a request's first byte to its end (a JSON line's newline, a gRPC
/// request's last DATA frame), and from accept to the end of a TLS handshake.
pub const REQUEST_DEADLINE: std::time::Duration = std::time::Duration::from_secs(5);

/// What a client may do, decided by how it connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Everything: the local socket (root only), or a client certificate with `os:admin`.
    Admin,
    /// Everything but changing the config: `os:operator`.
    Operator,
    /// Read only: `os:reader`, or a certificate with no role keelson knows.
    Reader,
    /// A node without a config, reached with `--insecure`: reads of what maintenance needs,
    /// and `apply-config`.
    Maintenance,
    /// A client of trustd's port (50001): `securityapi.SecurityService/Certificate` only,
    /// with `machine.token`.
    Trustd,
    /// Not known yet (a TLS handshake in progress).
    Pending,
    /// None: a TLS connection accepted under a trust the node no longer has (maintenance
    /// ended, `machine.ca` changed); it is closed.
    Revoked,
}

/// A non-blocking byte stream to one client.
pub trait Transport {
    /// Read plaintext; `Ok(0)` when the client finished sending, `WouldBlock` when nothing
    /// is there now.
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize>;
    /// Write plaintext; `WouldBlock` when the peer does not take more now.
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize>;
    /// Push out what the transport queued itself (TLS records); Err when the peer is gone.
    fn flush_queued(&mut self) -> std::io::Result<()> {
        Ok(())
    }
    /// It has bytes of its own waiting for the socket to take them.
    fn wants_write(&self) -> bool {
        false
    }
    /// The handshake is not done.
    fn handshaking(&self) -> bool {
        false
    }
    /// What the client may do.
    fn access(&self) -> Access;
    /// The socket, for epoll.
    fn fd(&self) -> BorrowedFd<'_>;
    /// Say one line to a client that is being turned away, best effort, without blocking.
    fn refuse_raw(&mut self, bytes: &[u8]);
    /// The connection ends: say so (TLS close_notify), best effort.
    fn close(&mut self) {}
}

impl Transport for UnixStream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        Read::read(self, buf)
    }

    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        Write::write(self, buf)
    }

    fn access(&self) -> Access {
        // The socket is mode 0600: only root connects.
        Access::Admin
    }

    fn fd(&self) -> BorrowedFd<'_> {
        self.as_fd()
    }

    fn refuse_raw(&mut self, bytes: &[u8]) {
        let _ = Write::write(self, bytes);
    }
}
