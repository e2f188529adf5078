// SPDX-License-Identifier: Apache-2.0
//! [`RouteSocket`]: a blocking `NETLINK_ROUTE` socket with sequence numbers, extended acks and
//! a request/dump loop that maps every failure to an [`NlError`]. The loop itself
//! ([`NlSocket`]) is generic over the message type, so the generic netlink families
//! (`super::wireguard`) share it.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};

use log::{trace, warn};
use netlink_packet_core::{
    NetlinkBuffer, NetlinkDeserializable, NetlinkHeader, NetlinkMessage, NetlinkPayload,
    NetlinkSerializable, NlasIterator, NLM_F_ACK, NLM_F_ACK_TLVS, NLM_F_CAPPED, NLM_F_DUMP,
    NLM_F_DUMP_INTR, NLM_F_REQUEST,
};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use nix::errno::Errno;
use nix::sys::socket::{setsockopt, sockopt};

use super::error::NlError;

/// Receive buffer we ask for: 1 MiB. The default (`net.core.rmem_default`, 208 KiB) overflows
/// when a bond flaps with thousands of routes attached, and the watcher then has to re-dump.
pub(crate) const RCVBUF: usize = 1 << 20;

/// Initial user-space buffer for one datagram. The kernel sizes dump datagrams after the
/// largest `recvmsg` buffer it has seen, capped at 32 KiB (`netlink_recvmsg`'s
/// `max_recvmsg_len`), but a single link message with many VFs can be larger, so the real size
/// is peeked before each read.
const RECV_BUF: usize = 64 * 1024;

/// `NLMSGERR_ATTR_MSG`: the extended ack's human readable text.
const NLMSGERR_ATTR_MSG: u16 = 1;

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
    inner: NlSocket,
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

/// The request/reply loop of any netlink protocol: sequence numbers, acks, extended acks,
/// multi-part dumps. Message types are per call, so one socket serves several generic
/// netlink families (the controller and the family it resolves).
#[derive(Debug)]
pub(crate) struct NlSocket {
    sock: Socket,
    port: u32,
    seq: u32,
    buf: Vec<u8>,
}

impl NlSocket {
    /// Opens a socket of `protocol` in the calling thread's network namespace, with extended
    /// and capped acks, and strict dump checking when `strict` (rtnetlink only: generic
    /// netlink families parse their own dump requests).
    pub(crate) fn new(protocol: isize, strict: bool) -> Result<Self, NlError> {
        let op = "open";
        let (sock, port) = open(op, protocol, RCVBUF)?;
        if strict {
            sock.set_netlink_get_strict_chk(true)
                .map_err(|e| NlError::io(op, "NETLINK_GET_STRICT_CHK", e))?;
        }
        sock.set_ext_ack(true).map_err(|e| NlError::io(op, "NETLINK_EXT_ACK", e))?;
        sock.set_cap_ack(true).map_err(|e| NlError::io(op, "NETLINK_CAP_ACK", e))?;
        Ok(Self { sock, port, seq: 0, buf: Vec::with_capacity(RECV_BUF) })
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
        self.receive(op, target, seq, &mut replies)?;
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
        for _ in 0..DUMP_ATTEMPTS {
            let seq = self.send(op, target, msg.clone(), NLM_F_DUMP)?;
            let mut replies = Vec::new();
            if !self.receive(op, target, seq, &mut replies)? {
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
        let kernel = SocketAddr::new(0, 0);
        loop {
            match self.sock.send_to(&bytes, &kernel, 0) {
                Ok(_) => return Ok(self.seq),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(NlError::io(op, target, e)),
            }
        }
    }

    /// Reads datagrams until the reply to `seq` is complete (ack, error or `NLMSG_DONE`),
    /// pushing its data messages to `out`. Returns whether any message carried
    /// `NLM_F_DUMP_INTR`.
    fn receive<M>(
        &mut self,
        op: &'static str,
        target: &str,
        seq: u32,
        out: &mut Vec<M>,
    ) -> Result<bool, NlError>
    where
        M: NetlinkDeserializable + std::fmt::Debug,
    {
        let mut interrupted = false;
        loop {
            // ENOBUFS here means replies were dropped: the outcome is unknown, the error is
            // Transient and the caller retries; leftovers are skipped by sequence number.
            let len =
                recv_datagram(&self.sock, &mut self.buf).map_err(|e| NlError::io(op, target, e))?;
            let mut off = 0;
            while off < len {
                let data = &self.buf[off..len];
                let nl =
                    NetlinkBuffer::new_checked(data).map_err(|e| NlError::decode(op, target, e))?;
                let msg_len = nl.length() as usize;
                let (msg_seq, msg_flags) = (nl.sequence_number(), nl.flags());
                if msg_len < 16 {
                    return Err(NlError::decode(op, target, "message shorter than its header"));
                }
                off += msg_len.next_multiple_of(4);
                if msg_seq != seq {
                    // A late reply to an earlier request that failed half-way: skip it.
                    trace!(target: "netlink", "{op}: skipping stale seq {msg_seq} (want {seq})");
                    continue;
                }
                interrupted |= msg_flags & NLM_F_DUMP_INTR != 0;
                let parsed = NetlinkMessage::<M>::deserialize(&data[..msg_len])
                    .map_err(|e| NlError::decode(op, target, e))?;
                match parsed.payload {
                    NetlinkPayload::InnerMessage(m) => {
                        trace!(target: "netlink", "recv seq {msg_seq}: {m:?}");
                        out.push(m);
                    }
                    NetlinkPayload::Error(e) => {
                        return match e.code {
                            None => Ok(interrupted),
                            Some(code) => Err(kernel_error(
                                op,
                                target,
                                code.get(),
                                ext_ack_after_request(msg_flags, &e.header),
                            )),
                        };
                    }
                    NetlinkPayload::Done(d) => {
                        if d.code < 0 {
                            let msg = if msg_flags & NLM_F_ACK_TLVS != 0 {
                                ext_ack_message(&d.extended_ack)
                            } else {
                                None
                            };
                            return Err(kernel_error(op, target, d.code, msg));
                        }
                        return Ok(interrupted);
                    }
                    NetlinkPayload::Noop => {}
                    NetlinkPayload::Overrun(_) => {
                        return Err(NlError::decode(op, target, "NLMSG_OVERRUN"));
                    }
                    other => {
                        warn!(target: "netlink", "{op}: unexpected payload {other:?}");
                    }
                }
            }
        }
    }
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

fn kernel_error(op: &'static str, target: &str, code: i32, message: Option<String>) -> NlError {
    let errno = Errno::from_raw(code.saturating_abs());
    trace!(target: "netlink", "{op} {target}: {errno} {message:?}");
    NlError::Kernel { op, target: target.to_owned(), errno, message }
}

/// The extended ack text of an `NLMSG_ERROR` whose payload after the errno is `rest`: the
/// request's header (only the 16-byte header when the kernel set `NLM_F_CAPPED`, else the whole
/// request), then TLVs when `NLM_F_ACK_TLVS` is set.
fn ext_ack_after_request(flags: u16, rest: &[u8]) -> Option<String> {
    if flags & NLM_F_ACK_TLVS == 0 {
        return None;
    }
    let skip = if flags & NLM_F_CAPPED != 0 {
        16
    } else {
        let len = u32::from_ne_bytes(rest.get(..4)?.try_into().ok()?) as usize;
        len.next_multiple_of(4)
    };
    ext_ack_message(rest.get(skip..)?)
}

/// Finds `NLMSGERR_ATTR_MSG` in a TLV area.
fn ext_ack_message(tlvs: &[u8]) -> Option<String> {
    NlasIterator::new(tlvs).filter_map(Result::ok).find(|nla| nla.kind() == NLMSGERR_ATTR_MSG).map(
        |nla| {
            let v = nla.value();
            let end = v.iter().position(|&b| b == 0).unwrap_or(v.len());
            String::from_utf8_lossy(&v[..end]).into_owned()
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ext_ack_capped() {
        // 16-byte echoed header, then NLMSGERR_ATTR_MSG "bad\0" (len 8) and an OFFS attr.
        let mut rest = vec![0u8; 16];
        rest[..4].copy_from_slice(&40u32.to_ne_bytes());
        rest.extend_from_slice(&8u16.to_ne_bytes());
        rest.extend_from_slice(&1u16.to_ne_bytes());
        rest.extend_from_slice(b"bad\0");
        rest.extend_from_slice(&8u16.to_ne_bytes());
        rest.extend_from_slice(&2u16.to_ne_bytes());
        rest.extend_from_slice(&20u32.to_ne_bytes());
        assert_eq!(
            ext_ack_after_request(NLM_F_CAPPED | NLM_F_ACK_TLVS, &rest).as_deref(),
            Some("bad")
        );
        assert_eq!(ext_ack_after_request(NLM_F_CAPPED, &rest), None);
        // Not capped: the echoed request is 40 bytes long, so the TLVs start after it.
        let mut full = vec![0u8; 40];
        full[..4].copy_from_slice(&40u32.to_ne_bytes());
        full.extend_from_slice(&rest[16..]);
        assert_eq!(ext_ack_after_request(NLM_F_ACK_TLVS, &full).as_deref(), Some("bad"));
        assert_eq!(ext_ack_after_request(NLM_F_ACK_TLVS, &full[..3]), None);
    }
}
