// SPDX-License-Identifier: Apache-2.0
//! [`NlSocket`]: the one blocking request/reply loop of this crate, for every netlink protocol:
//! sequence numbers, extended acks, multi-part dumps, each failure mapped to an [`NlError`].
//! It is generic over the message type, so rtnetlink ([`RouteSocket`]) and the generic netlink
//! families (`super::wireguard`) share it; `super::raw` adds raw requests and batches on the
//! same socket for nfnetlink (KubeSpan's nftables).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::time::Duration;

use log::trace;
use netlink_packet_core::{
    NetlinkDeserializable, NetlinkHeader, NetlinkMessage, NetlinkPayload, NetlinkSerializable,
    NLM_F_ACK, NLM_F_DUMP, NLM_F_DUMP_INTR, NLM_F_REQUEST,
};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use nix::errno::Errno;
use nix::sys::socket::{setsockopt, sockopt};
use nix::sys::time::TimeVal;

use super::error::NlError;
use super::frame::{frames, Frame, Outcome, NLMSG_NOOP, NLMSG_OVERRUN};

/// Receive buffer we ask for: 1 MiB. The default (`net.core.rmem_default`, 208 KiB) overflows
/// when a bond flaps with thousands of routes attached, and the watcher then has to re-dump.
pub(crate) const RCVBUF: usize = 1 << 20;

/// Initial user-space buffer for one datagram. The kernel sizes dump datagrams after the
/// largest `recvmsg` buffer it has seen, capped at 32 KiB (`netlink_recvmsg`'s
/// `max_recvmsg_len`), but a single link message with many VFs can be larger, so the real size
/// is peeked before each read.
const RECV_BUF: usize = 64 * 1024;

/// How often a dump that the kernel flags `NLM_F_DUMP_INTR` is restarted before giving up.
const DUMP_ATTEMPTS: u32 = 5;

/// Opens a netlink socket of `protocol` in the calling thread's network namespace, bound to a
/// kernel-assigned port, with a receive buffer of at least `rcvbuf` bytes.
pub(crate) fn open(
    op: &'static str,
    protocol: isize,
    rcvbuf: usize,
) -> Result<(Socket, u32), NlError> {
    let mut sock = Socket::new(protocol).map_err(|e| NlError::io(op, "socket", e))?;
    let addr = sock.bind_auto().map_err(|e| NlError::io(op, "bind", e))?;
    // SO_RCVBUFFORCE ignores net.core.rmem_max but needs CAP_NET_ADMIN, which PID 1 has; fall
    // back to the capped SO_RCVBUF so that unprivileged tests still get a working socket.
    if let Err(e) = setsockopt(&sock, sockopt::RcvBufForce, &rcvbuf) {
        trace!(target: "netlink", "SO_RCVBUFFORCE: {e}; using SO_RCVBUF");
        setsockopt(&sock, sockopt::RcvBuf, &rcvbuf)
            .map_err(|e| NlError::io(op, "SO_RCVBUF", e.into()))?;
    }
    Ok((sock, addr.port_number()))
}

/// A blocking rtnetlink socket bound in the network namespace of the thread that created it.
///
/// Every request carries `NLM_F_ACK`, so each one ends with either an ack or an error that
/// belongs to it. `NETLINK_GET_STRICT_CHK` makes the kernel reject malformed dump filters
/// instead of ignoring them, `NETLINK_EXT_ACK` asks for the kernel's reason text, and
/// `NETLINK_CAP_ACK` keeps error replies from echoing whole requests back.
///
/// The socket is not `Sync`: a request and its replies must not interleave with another's.
#[derive(Debug)]
pub struct RouteSocket {
    pub(super) inner: NlSocket,
}

impl RouteSocket {
    /// Opens a socket in the calling thread's current network namespace.
    pub fn new() -> Result<Self, NlError> {
        let inner = NlSocket::new(NETLINK_ROUTE, true)?;
        Ok(Self { inner })
    }

    /// The netlink port id the kernel assigned to this socket.
    pub fn port(&self) -> u32 {
        self.inner.port
    }

    /// Sends `msg` with `NLM_F_REQUEST | NLM_F_ACK | flags` and waits for its ack.
    ///
    /// Returns the messages the kernel sent before the ack (the object for a `RTM_GET*`
    /// by key, nothing for a change). `op` and `target` label the error.
    pub fn request(
        &mut self,
        op: &'static str,
        target: &str,
        msg: RouteNetlinkMessage,
        flags: u16,
    ) -> Result<Vec<RouteNetlinkMessage>, NlError> {
        self.inner.request(op, target, msg, flags)
    }

    /// Sends `msg` as a dump request and collects every reply until `NLMSG_DONE`.
    ///
    /// A dump that the kernel marks `NLM_F_DUMP_INTR` (the object list changed while it was
    /// being walked, so the result may be inconsistent) is restarted, up to 5 times, before
    /// failing with a [`Transient`](super::NlErrorKind::Transient) error.
    pub fn dump(
        &mut self,
        op: &'static str,
        msg: RouteNetlinkMessage,
    ) -> Result<Vec<RouteNetlinkMessage>, NlError> {
        self.inner.dump(op, "", msg)
    }
}

/// How a [`NlSocket`] is set up.
#[derive(Clone, Copy, Debug)]
pub struct NlOptions {
    /// `NETLINK_GET_STRICT_CHK`: rtnetlink only (generic netlink families and nfnetlink parse
    /// their own requests).
    pub strict: bool,
    /// Receive buffer to ask for.
    pub rcvbuf: usize,
    /// Send buffer to ask for; `None` keeps the kernel's default. A socket with one set grows it
    /// before a batch larger than half of it: netlink refuses a datagram larger than the send
    /// buffer (`EMSGSIZE`).
    pub sndbuf: Option<usize>,
    /// `SO_RCVTIMEO`: `None` waits as long as the kernel takes.
    pub recv_timeout: Option<Duration>,
}

impl NlOptions {
    /// Extended and capped acks, a 1 MiB receive buffer, default send buffer, no timeout.
    pub const fn new(strict: bool) -> Self {
        Self { strict, rcvbuf: RCVBUF, sndbuf: None, recv_timeout: None }
    }
}

/// The request/reply loop of any netlink protocol: sequence numbers, acks, extended acks,
/// multi-part dumps, and raw messages and batches for protocols without a packet crate
/// (nfnetlink, see `super::raw`). Message types are per call, so one socket serves several
/// generic netlink families (the controller and the family it resolves).
#[derive(Debug)]
pub struct NlSocket {
    pub(super) sock: Socket,
    pub(super) port: u32,
    /// The last sequence number used.
    pub(super) seq: u32,
    pub(super) sndbuf: Option<usize>,
    pub(super) buf: Vec<u8>,
}

impl NlSocket {
    /// Opens a socket of `protocol` in the calling thread's network namespace, with extended
    /// and capped acks, and strict dump checking when `strict` (rtnetlink only: generic
    /// netlink families parse their own dump requests).
    pub(crate) fn new(protocol: isize, strict: bool) -> Result<Self, NlError> {
        Self::with_options(protocol, &NlOptions::new(strict))
    }

    /// Opens a socket of `protocol` in the calling thread's network namespace, set up as
    /// `options` says, always with extended and capped acks.
    pub fn with_options(protocol: isize, options: &NlOptions) -> Result<Self, NlError> {
        let op = "open";
        let (sock, port) = open(op, protocol, options.rcvbuf)?;
        if let Some(size) = options.sndbuf {
            set_sndbuf(&sock, size).map_err(|e| NlError::io(op, "SO_SNDBUF", e))?;
        }
        if let Some(t) = options.recv_timeout {
            let tv = TimeVal::new(t.as_secs().try_into().unwrap_or(i64::MAX), 0);
            setsockopt(&sock, sockopt::ReceiveTimeout, &tv)
                .map_err(|e| NlError::io(op, "SO_RCVTIMEO", e.into()))?;
        }
        if options.strict {
            sock.set_netlink_get_strict_chk(true)
                .map_err(|e| NlError::io(op, "NETLINK_GET_STRICT_CHK", e))?;
        }
        sock.set_ext_ack(true).map_err(|e| NlError::io(op, "NETLINK_EXT_ACK", e))?;
        sock.set_cap_ack(true).map_err(|e| NlError::io(op, "NETLINK_CAP_ACK", e))?;
        Ok(Self { sock, port, seq: 0, sndbuf: options.sndbuf, buf: Vec::with_capacity(RECV_BUF) })
    }

    /// The netlink port id the kernel assigned to this socket.
    pub fn port(&self) -> u32 {
        self.port
    }

    /// See [`RouteSocket::request`].
    pub(crate) fn request<M>(
        &mut self,
        op: &'static str,
        target: &str,
        msg: M,
        flags: u16,
    ) -> Result<Vec<M>, NlError>
    where
        M: NetlinkSerializable + NetlinkDeserializable + std::fmt::Debug,
    {
        let seq = self.send(op, target, msg, flags)?;
        let mut replies = Vec::new();
        self.receive(op, target, seq, |f| {
            replies.push(deserialize(op, target, f)?);
            Ok(())
        })?;
        Ok(replies)
    }

    /// See [`RouteSocket::dump`].
    pub(crate) fn dump<M>(
        &mut self,
        op: &'static str,
        target: &str,
        msg: M,
    ) -> Result<Vec<M>, NlError>
    where
        M: NetlinkSerializable + NetlinkDeserializable + std::fmt::Debug + Clone,
    {
        self.dump_into(op, target, msg, Some)
    }

    /// A dump whose replies are each turned into what the caller keeps as they are read
    /// (`keep` returns `None` to skip one): a large dump is never held twice, as parsed
    /// messages and as their decoded form.
    pub(crate) fn dump_into<M, T>(
        &mut self,
        op: &'static str,
        target: &str,
        msg: M,
        mut keep: impl FnMut(M) -> Option<T>,
    ) -> Result<Vec<T>, NlError>
    where
        M: NetlinkSerializable + NetlinkDeserializable + std::fmt::Debug + Clone,
    {
        self.dump_frames(op, target, msg, |f| Ok(keep(deserialize(op, target, f)?)))
    }

    /// [`dump_into`](Self::dump_into) with each reply read from its bytes by `keep`, for
    /// replies read without the crate's decoder.
    pub(crate) fn dump_frames<M, T>(
        &mut self,
        op: &'static str,
        target: &str,
        msg: M,
        mut keep: impl FnMut(&Frame<'_>) -> Result<Option<T>, NlError>,
    ) -> Result<Vec<T>, NlError>
    where
        M: NetlinkSerializable + std::fmt::Debug + Clone,
    {
        for _ in 0..DUMP_ATTEMPTS {
            let seq = self.send(op, target, msg.clone(), NLM_F_DUMP)?;
            let mut replies = Vec::new();
            let interrupted = self.receive(op, target, seq, |f| {
                replies.extend(keep(f)?);
                Ok(())
            })?;
            if !interrupted {
                trace!(target: "netlink", "{op}: {} messages", replies.len());
                return Ok(replies);
            }
            trace!(target: "netlink", "{op}: dump interrupted, restarting");
        }
        Err(NlError::DumpInterrupted { op, attempts: DUMP_ATTEMPTS })
    }

    fn send<M>(
        &mut self,
        op: &'static str,
        target: &str,
        msg: M,
        flags: u16,
    ) -> Result<u32, NlError>
    where
        M: NetlinkSerializable + std::fmt::Debug,
    {
        self.seq = self.seq.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | NLM_F_ACK | flags;
        header.sequence_number = self.seq;
        let mut packet = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(msg));
        packet.finalize();
        let mut bytes = vec![0u8; packet.buffer_len()];
        packet.serialize(&mut bytes);
        trace!(target: "netlink", "send seq {} flags {flags:#x} {op} {target}: {:?}", self.seq, packet.payload);
        self.send_bytes(op, target, &bytes)?;
        Ok(self.seq)
    }

    /// Sends one datagram to the kernel, retrying on EINTR.
    pub(super) fn send_bytes(
        &mut self,
        op: &'static str,
        target: &str,
        bytes: &[u8],
    ) -> Result<(), NlError> {
        let kernel = SocketAddr::new(0, 0);
        loop {
            match self.sock.send_to(bytes, &kernel, 0) {
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(NlError::io(op, target, e)),
            }
        }
    }

    /// Grows the send buffer, when this socket manages one, so that a datagram of `len` bytes
    /// fits. Best effort: the send fails with `EMSGSIZE` if it still does not.
    pub(super) fn fit_sndbuf(&mut self, len: usize) {
        if let Some(size) = self.sndbuf {
            if len > size / 2 {
                let _ = set_sndbuf(&self.sock, len.saturating_mul(2));
            }
        }
    }

    /// Reads datagrams until the reply to `seq` is complete (ack, error or `NLMSG_DONE`),
    /// handing its data messages to `data`. Returns whether any message carried
    /// `NLM_F_DUMP_INTR`.
    pub(super) fn receive(
        &mut self,
        op: &'static str,
        target: &str,
        seq: u32,
        mut data: impl FnMut(&Frame<'_>) -> Result<(), NlError>,
    ) -> Result<bool, NlError> {
        let mut interrupted = false;
        loop {
            // ENOBUFS here means replies were dropped: the outcome is unknown, the error is
            // Transient and the caller retries; leftovers are skipped by sequence number.
            let len =
                recv_datagram(&self.sock, &mut self.buf).map_err(|e| NlError::io(op, target, e))?;
            for frame in frames(self.buf.get(..len).unwrap_or_default()) {
                let frame = frame.map_err(|e| NlError::decode(op, target, e))?;
                if frame.seq != seq {
                    // A late reply to an earlier request that failed half-way: skip it.
                    trace!(target: "netlink", "{op}: skipping stale seq {} (want {seq})", frame.seq);
                    continue;
                }
                interrupted |= frame.flags & NLM_F_DUMP_INTR != 0;
                match frame.outcome().map_err(|e| NlError::decode(op, target, e))? {
                    Some(Outcome::Ack | Outcome::Done) => return Ok(interrupted),
                    Some(Outcome::Refused(errno, message)) => {
                        return Err(kernel_error(op, target, errno, message));
                    }
                    None => {}
                }
                match frame.ty {
                    NLMSG_NOOP => {}
                    NLMSG_OVERRUN => return Err(NlError::decode(op, target, "NLMSG_OVERRUN")),
                    _ => data(&frame)?,
                }
            }
        }
    }
}

/// Decodes a data message of a typed protocol.
fn deserialize<M>(op: &'static str, target: &str, frame: &Frame<'_>) -> Result<M, NlError>
where
    M: NetlinkDeserializable + std::fmt::Debug,
{
    let parsed = NetlinkMessage::<M>::deserialize(frame.bytes)
        .map_err(|e| NlError::decode(op, target, e))?;
    match parsed.payload {
        NetlinkPayload::InnerMessage(m) => {
            trace!(target: "netlink", "recv seq {}: {m:?}", frame.seq);
            Ok(m)
        }
        other => Err(NlError::decode(op, target, format_args!("unexpected payload {other:?}"))),
    }
}

/// SO_SNDBUFFORCE ignores net.core.wmem_max but needs CAP_NET_ADMIN; SO_SNDBUF is the capped
/// fallback.
fn set_sndbuf(sock: &Socket, size: usize) -> io::Result<()> {
    if setsockopt(sock, sockopt::SndBufForce, &size).is_err() {
        setsockopt(sock, sockopt::SndBuf, &size)?;
    }
    Ok(())
}

impl AsFd for RouteSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.sock.as_fd()
    }
}

impl AsRawFd for RouteSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.sock.as_raw_fd()
    }
}

/// Reads one datagram into `buf` (replacing its contents), growing `buf` first if the datagram
/// is larger than its capacity, and returns its length. Retries on EINTR.
pub(crate) fn recv_datagram(sock: &Socket, buf: &mut Vec<u8>) -> io::Result<usize> {
    loop {
        buf.clear();
        // MSG_TRUNC makes recv report the datagram's full length even though the peek copies
        // at most the capacity.
        let size = match sock.recv(buf, libc_flags::MSG_PEEK | libc_flags::MSG_TRUNC) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        buf.clear();
        if size > buf.capacity() {
            buf.reserve(size);
        }
        match sock.recv(buf, 0) {
            Ok(n) => return Ok(n.min(buf.len())),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// The two `recv` flags we need, without depending on `libc` directly.
mod libc_flags {
    use nix::sys::socket::MsgFlags;
    pub const MSG_PEEK: i32 = MsgFlags::MSG_PEEK.bits();
    pub const MSG_TRUNC: i32 = MsgFlags::MSG_TRUNC.bits();
}

pub(super) fn kernel_error(
    op: &'static str,
    target: &str,
    errno: Errno,
    message: Option<String>,
) -> NlError {
    trace!(target: "netlink", "{op} {target}: {errno} {message:?}");
    NlError::Kernel { op, target: target.to_owned(), errno, message }
}
