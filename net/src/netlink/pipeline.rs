// SPDX-License-Identifier: Apache-2.0
//! Many requests in flight: [`NlSocket::request_batch`] packs requests into one datagram
//! each window, sends it, and matches the acknowledgements back by sequence number. The
//! kernel handles the messages of a datagram one after the other and acknowledges each
//! (`netlink_rcv_skb`), so a failed request stops nothing but itself and every request still
//! gets its own result. `ip -batch` waits for each acknowledgement before sending the next
//! request; this saves a round trip per object.

use std::fmt::Display;

use log::trace;
use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NetlinkSerializable, NLM_F_ACK, NLM_F_REQUEST,
};

use super::error::NlError;
use super::frame::{frames, Outcome};
use super::socket::{kernel_error, recv_datagram, NlSocket, RouteSocket};

/// Requests per datagram. Their acknowledgements (capped: 36 bytes each, more with an error
/// and its text) stay far below the receive buffer, so none is dropped.
const WINDOW: usize = 256;

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
    /// Flags beyond `NLM_F_REQUEST | NLM_F_ACK`.
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
    /// most [`WINDOW`] or [`WINDOW_BYTES`]. Returns the bytes and how many went in.
    fn pack<M>(&mut self, requests: &[BatchRequest<'_, M>]) -> (Vec<u8>, usize)
    where
        M: NetlinkSerializable + Clone + std::fmt::Debug,
    {
        let mut bytes = Vec::new();
        let mut count = 0;
        for request in requests.iter().take(WINDOW) {
            let mut header = NetlinkHeader::default();
            header.flags = NLM_F_REQUEST | NLM_F_ACK | request.flags;
            header.sequence_number = self.seq.wrapping_add(1);
            let mut packet =
                NetlinkMessage::new(header, NetlinkPayload::InnerMessage(request.msg.clone()));
            packet.finalize();
            let len = packet.buffer_len();
            if count > 0 && bytes.len() + len > WINDOW_BYTES {
                break;
            }
            self.seq = self.seq.wrapping_add(1);
            let at = bytes.len();
            bytes.resize(at + len, 0);
            if let Some(slot) = bytes.get_mut(at..) {
                packet.serialize(slot);
            }
            trace!(target: "netlink", "batch seq {} {} {}", self.seq, request.op, request.target);
            count += 1;
        }
        (bytes, count)
    }

    /// Sends one datagram of `window` and collects their acknowledgements.
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
        let mut pending = window.len();
        while pending > 0 {
            let len = match recv_datagram(&self.sock, &mut self.buf) {
                Ok(len) => len,
                Err(e) => {
                    // ENOBUFS: acknowledgements were dropped, the outcome of the rest is
                    // unknown; they fail as transient and the controller retries them.
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
                if slot.is_none() {
                    pending -= 1;
                }
                *slot = Some(outcome);
            }
        }
        results
            .into_iter()
            .zip(window)
            .map(|(r, request)| {
                r.unwrap_or_else(|| {
                    Err(NlError::decode(
                        request.op,
                        request.target.to_string(),
                        "no acknowledgement",
                    ))
                })
            })
            .collect()
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
