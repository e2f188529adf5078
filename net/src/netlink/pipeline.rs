// SPDX-License-Identifier: Apache-2.0
//! Many requests in flight: [`NlSocket::request_batch`] packs requests into one datagram
//! each window and sends it. The kernel handles the messages of a datagram one after the
//! other, in the sender's context, and queues their replies in that order
//! (`netlink_rcv_skb`): a failed request stops nothing but itself, and its error carries its
//! sequence number. Only the last request of a window asks for an acknowledgement: a request
//! that fails is answered whether it asked or not, so when the last one's reply arrives every
//! earlier error is already queued, and a request with no reply succeeded. Each object still
//! gets its own result, and the kernel writes and we read one reply per window instead of one
//! per object. `ip -batch` waits for each acknowledgement before sending the next request.

use std::fmt::Display;

use log::trace;
use netlink_packet_core::{Emitable, NetlinkHeader, NetlinkSerializable, NLM_F_ACK, NLM_F_REQUEST};

use super::error::NlError;
use super::frame::{frames, Outcome, HEADER_LEN};
use super::socket::{kernel_error, recv_datagram, NlSocket, RouteSocket};

/// Requests per datagram. Were every one of them to fail, their errors (capped: 36 bytes each,
/// more with the kernel's text) would stay far below the receive buffer, so none is dropped.
pub const WINDOW: usize = 256;

/// Bytes per datagram: below the default send buffer, so no `SO_SNDBUF` change is needed.
const WINDOW_BYTES: usize = 48 * 1024;

/// One request of a batch.
#[derive(Clone)]
pub struct BatchRequest<'a, M> {
    /// The operation, for errors (`route_add`).
    pub op: &'static str,
    /// The object, for errors: written only when a request fails, so that a batch of
    /// thousands does not format one text per request.
    pub target: &'a dyn Display,
    /// The message.
    pub msg: M,
    /// Flags beyond `NLM_F_REQUEST` (and `NLM_F_ACK`, which the window's last request gets).
    pub flags: u16,
}

impl<M: std::fmt::Debug> std::fmt::Debug for BatchRequest<'_, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchRequest")
            .field("op", &self.op)
            .field("target", &self.target.to_string())
            .field("msg", &self.msg)
            .field("flags", &self.flags)
            .finish()
    }
}

impl RouteSocket {
    /// Sends every request, many per datagram, and returns one result per request.
    pub fn batch(
        &mut self,
        requests: &[BatchRequest<'_, netlink_packet_route::RouteNetlinkMessage>],
    ) -> Vec<Result<(), NlError>> {
        self.inner.request_batch(requests)
    }
}

impl NlSocket {
    /// Sends every request and returns one result per request, in order. Replies other than
    /// acknowledgements (there are none for changes) are ignored.
    pub(crate) fn request_batch<M>(
        &mut self,
        requests: &[BatchRequest<'_, M>],
    ) -> Vec<Result<(), NlError>>
    where
        M: NetlinkSerializable + Clone + std::fmt::Debug,
    {
        let mut results = Vec::with_capacity(requests.len());
        let mut start = 0;
        while start < requests.len() {
            let (bytes, count) = self.pack(requests.get(start..).unwrap_or_default());
            let window = requests.get(start..start + count).unwrap_or_default();
            let first_seq = self.seq.wrapping_sub(count as u32).wrapping_add(1);
            results.extend(self.exchange(window, &bytes, first_seq));
            start += count;
        }
        results
    }

    /// Serializes requests from the front of `requests` into one datagram: at least one, at
    /// most [`WINDOW`] or [`WINDOW_BYTES`], the last asking for an acknowledgement. Returns
    /// the bytes and how many went in.
    fn pack<M>(&mut self, requests: &[BatchRequest<'_, M>]) -> (Vec<u8>, usize)
    where
        M: NetlinkSerializable + Clone + std::fmt::Debug,
    {
        let mut bytes = Vec::new();
        let mut count = 0;
        let mut last_at = 0;
        for request in requests.iter().take(WINDOW) {
            // The header is written here and the message after it, in place: wrapping the
            // message in a `NetlinkMessage` would clone it, and measure it three times.
            let len = HEADER_LEN + request.msg.buffer_len();
            if count > 0 && bytes.len() + len > WINDOW_BYTES {
                break;
            }
            let mut header = NetlinkHeader::default();
            header.flags = NLM_F_REQUEST | request.flags;
            header.sequence_number = self.seq.wrapping_add(1);
            header.message_type = request.msg.message_type();
            header.length = u32::try_from(len).unwrap_or(u32::MAX);
            self.seq = self.seq.wrapping_add(1);
            let at = bytes.len();
            last_at = at;
            bytes.resize(at + len, 0);
            if let Some((head, body)) =
                bytes.get_mut(at..at + len).and_then(|m| m.split_at_mut_checked(HEADER_LEN))
            {
                header.emit(head);
                request.msg.serialize(body);
            }
            trace!(target: "netlink", "batch seq {} {} {}", self.seq, request.op, request.target);
            count += 1;
        }
        // Which request is last is known only once the next one does not fit: its header's
        // flags (bytes 6..8, host order) get the acknowledgement bit here.
        if let Some(flags) = bytes.get_mut(last_at + 6..last_at + 8) {
            if let Ok(current) = <[u8; 2]>::try_from(&*flags) {
                flags.copy_from_slice(&(u16::from_ne_bytes(current) | NLM_F_ACK).to_ne_bytes());
            }
        }
        (bytes, count)
    }

    /// Sends one datagram of `window` and collects the replies: errors as they come, and
    /// success for every request without one once the last request's reply is in.
    fn exchange<M>(
        &mut self,
        window: &[BatchRequest<'_, M>],
        bytes: &[u8],
        first_seq: u32,
    ) -> Vec<Result<(), NlError>> {
        if window.is_empty() {
            return Vec::new();
        }
        self.fit_sndbuf(bytes.len());
        if let Err(e) = self.send_datagram(bytes) {
            return window.iter().map(|r| Err(io_error(r, &e))).collect();
        }
        let mut results: Vec<Option<Result<(), NlError>>> = window.iter().map(|_| None).collect();
        let last = window.len() - 1;
        let mut answered = false;
        while !answered {
            let len = match recv_datagram(&self.sock, &mut self.buf) {
                Ok(len) => len,
                Err(e) => {
                    // ENOBUFS: replies were dropped, the outcome of the requests without one
                    // is unknown; they fail as transient and the controller retries them.
                    for (slot, request) in results.iter_mut().zip(window) {
                        if slot.is_none() {
                            *slot = Some(Err(io_error(request, &e)));
                        }
                    }
                    break;
                }
            };
            for frame in frames(self.buf.get(..len).unwrap_or_default()) {
                let Ok(frame) = frame else { continue };
                let index = frame.seq.wrapping_sub(first_seq) as usize;
                let (Some(slot), Some(request)) = (results.get_mut(index), window.get(index))
                else {
                    // A late reply to an earlier request: not ours.
                    continue;
                };
                let outcome = match frame.outcome() {
                    Ok(Some(Outcome::Ack | Outcome::Done)) => Ok(()),
                    Ok(Some(Outcome::Refused(errno, message))) => {
                        Err(kernel_error(request.op, &request.target.to_string(), errno, message))
                    }
                    Ok(None) => continue,
                    Err(e) => Err(NlError::decode(request.op, request.target.to_string(), e)),
                };
                answered |= index == last;
                *slot = Some(outcome);
            }
        }
        // Every reply is in: a request without one succeeded.
        results.into_iter().map(|r| r.unwrap_or(Ok(()))).collect()
    }

    /// Sends one datagram to the kernel, retrying on EINTR.
    fn send_datagram(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let kernel = netlink_sys::SocketAddr::new(0, 0);
        loop {
            match self.sock.send_to(bytes, &kernel, 0) {
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

/// The same I/O failure, for each request it hit.
fn io_error<M>(request: &BatchRequest<'_, M>, e: &std::io::Error) -> NlError {
    let copy = match e.raw_os_error() {
        Some(errno) => std::io::Error::from_raw_os_error(errno),
        None => std::io::Error::new(e.kind(), e.to_string()),
    };
    NlError::io(request.op, request.target.to_string(), copy)
}

#[cfg(test)]
mod tests {
    use netlink_packet_core::{NetlinkMessage, NetlinkPayload, NLM_F_CREATE, NLM_F_EXCL};
    use netlink_packet_route::route::{RouteAttribute, RouteMessage};
    use netlink_packet_route::RouteNetlinkMessage;

    use super::*;

    /// The datagram is what `NetlinkMessage` serializes for each request, back to back, the
    /// last with `NLM_F_ACK`.
    #[test]
    fn packs_as_netlink_message_serializes() {
        let Ok(mut sock) = NlSocket::new(netlink_sys::protocols::NETLINK_ROUTE, true) else {
            return testkit::skip_or_fail("no rtnetlink socket");
        };
        let msgs: Vec<RouteNetlinkMessage> = (0..3u32)
            .map(|i| {
                let mut m = RouteMessage::default();
                m.header.destination_prefix_length = 32;
                m.attributes.push(RouteAttribute::Table(1000 + i));
                m.attributes.push(RouteAttribute::Priority(i));
                if i == 1 {
                    RouteNetlinkMessage::DelRoute(m)
                } else {
                    RouteNetlinkMessage::NewRoute(m)
                }
            })
            .collect();
        let target = "t";
        let requests: Vec<_> = msgs
            .iter()
            .map(|m| BatchRequest {
                op: "op",
                target: &target,
                msg: m.clone(),
                flags: NLM_F_CREATE | NLM_F_EXCL,
            })
            .collect();
        let seq = sock.seq;
        let (bytes, count) = sock.pack(&requests);
        assert_eq!(count, 3);
        let mut want = Vec::new();
        for (i, m) in msgs.into_iter().enumerate() {
            let mut header = NetlinkHeader::default();
            header.flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL;
            if i == 2 {
                header.flags |= NLM_F_ACK;
            }
            header.sequence_number = seq.wrapping_add(i as u32 + 1);
            let mut packet = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(m));
            packet.finalize();
            let mut b = vec![0; packet.buffer_len()];
            packet.serialize(&mut b);
            want.extend(b);
        }
        assert_eq!(bytes, want);
    }
}
