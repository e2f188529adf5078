// SPDX-License-Identifier: Apache-2.0
//! Raw messages on an [`NlSocket`], for protocols this crate has no packet types for (the
//! caller encodes and decodes the payloads; nfnetlink for KubeSpan's nftables): one request
//! and its replies, and a batch, one datagram holding several messages, whose acks are
//! collected by sequence number.

use log::trace;
use netlink_packet_core::{NLM_F_ACK, NLM_F_REQUEST};

use super::error::NlError;
use super::frame::{frames, Outcome, HEADER_LEN};
use super::socket::{kernel_error, recv_datagram, NlSocket};

/// A data message of a reply: its type and the payload after the netlink header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawReply {
    /// `nlmsg_type`.
    pub ty: u16,
    /// Everything after the 16-byte header.
    pub payload: Vec<u8>,
}

/// One message of a batch that asks for an ack, named so that an error can say which one the
/// kernel refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchMsg {
    /// Its sequence number.
    pub seq: u32,
    /// What it does, for errors and logs: `NEWSETELEM kubespan_targets_ipv4 (120 ranges)`.
    pub what: String,
}

impl NlSocket {
    /// The sequence number the next request or batch should start with.
    pub fn next_seq(&self) -> u32 {
        self.seq.wrapping_add(1)
    }

    /// Sends one message of type `ty` with `NLM_F_REQUEST | NLM_F_ACK | flags` and `payload`
    /// after its header, and collects the data messages that come before its ack. A refusal
    /// is an [`NlError::Kernel`] labelled `op target`.
    pub fn request_raw(
        &mut self,
        op: &'static str,
        target: &str,
        ty: u16,
        flags: u16,
        payload: &[u8],
    ) -> Result<Vec<RawReply>, NlError> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let len = u32::try_from(HEADER_LEN + payload.len())
            .map_err(|_| NlError::decode(op, target, "request too long"))?;
        let mut msg = Vec::with_capacity(HEADER_LEN + payload.len() + 3);
        msg.extend_from_slice(&len.to_ne_bytes());
        msg.extend_from_slice(&ty.to_ne_bytes());
        msg.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ACK | flags).to_ne_bytes());
        msg.extend_from_slice(&seq.to_ne_bytes());
        msg.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel fills it in
        msg.extend_from_slice(payload);
        while !msg.len().is_multiple_of(4) {
            msg.push(0);
        }
        trace!(target: "netlink", "send seq {seq} type {ty:#x} flags {flags:#x} {op} {target}");
        self.send_bytes(op, target, &msg)?;
        let mut out = Vec::new();
        self.receive(op, target, seq, |f| {
            out.push(RawReply { ty: f.ty, payload: f.payload().to_vec() });
            Ok(())
        })?;
        Ok(out)
    }

    /// Sends `bytes`, one datagram of several messages numbered from [`NlSocket::next_seq`]
    /// on, and waits for the ack of each message in `acked`. `end_seq` is the sequence number
    /// after the batch's last message.
    ///
    /// Every message in `acked` is answered before this returns; the first refusal is the
    /// error (later ones are often its echo), as an [`NlError::Kernel`] whose target is that
    /// message's [`what`](BatchMsg::what). A refusal of a message not in `acked` (a batch
    /// marker) refuses the whole batch: its target is `"batch"`. Once a refusal is in hand, a
    /// receive that fails (the socket's receive timeout) ends the wait: the kernel answers a
    /// batch inside `sendmsg`, so silence then means it has nothing more to say.
    pub fn send_batch(
        &mut self,
        op: &'static str,
        bytes: &[u8],
        acked: &[BatchMsg],
        end_seq: u32,
    ) -> Result<(), NlError> {
        self.fit_sndbuf(bytes.len());
        self.send_bytes(op, "batch", bytes)?;
        self.seq = end_seq.wrapping_sub(1);
        let first = acked.first().map_or(0, |m| m.seq);
        let mut pending = acked.len();
        let mut failure: Option<NlError> = None;
        while pending > 0 {
            let len = match recv_datagram(&self.sock, &mut self.buf) {
                Ok(n) => n,
                Err(_) if failure.is_some() => break,
                Err(e) => return Err(NlError::io(op, "recv", e)),
            };
            for frame in frames(self.buf.get(..len).unwrap_or_default()) {
                let outcome = frame.and_then(|f| Ok((f.seq, f.outcome()?)));
                let (seq, outcome) = match outcome {
                    Ok(v) => v,
                    // Malformed: the refusal already in hand, if any, is the better error.
                    Err(e) => return Err(failure.unwrap_or_else(|| NlError::decode(op, "recv", e))),
                };
                let msg = seq.checked_sub(first).and_then(|i| acked.get(i as usize));
                let Some(msg) = msg else {
                    if let Some(Outcome::Refused(errno, message)) = outcome {
                        let batch = kernel_error(op, "batch", errno, message);
                        return Err(failure.unwrap_or(batch));
                    }
                    continue;
                };
                match outcome {
                    Some(Outcome::Ack) => pending -= 1,
                    Some(Outcome::Refused(errno, message)) => {
                        pending -= 1;
                        if failure.is_none() {
                            failure = Some(kernel_error(op, &msg.what, errno, message));
                        }
                    }
                    Some(Outcome::Done) | None => {}
                }
            }
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
