// SPDX-License-Identifier: Apache-2.0
//! The nf_tables netlink wire format: constants from `linux/netfilter/nf_tables.h` and
//! `nfnetlink.h`, and a [`Batch`] writer for `NFNL_MSG_BATCH_BEGIN … END` transactions.
//!
//! Layout reminders: every message is a 16-byte `nlmsghdr` (native endian) plus a 4-byte
//! `nfgenmsg` (family, version 0, resource id big-endian); attributes are `len u16, type u16`
//! TLVs padded to 4 bytes, nested ones carry `NLA_F_NESTED`. nf_tables integers are big-endian
//! (`NLA_BE32`/`NLA_BE64`); register contents (marks, masks) are in host order, as the kernel
//! compares them byte by byte.

#![allow(missing_docs)] // the constants are named after the kernel's and documented there

/// Netlink protocol number of nfnetlink.
pub const NETLINK_NETFILTER: isize = 12;
/// `nfnetlink` subsystem of nf_tables; message types are `(subsys << 8) | msg`.
pub const NFNL_SUBSYS_NFTABLES: u16 = 10;
pub const NFNL_MSG_BATCH_BEGIN: u16 = 0x10;
pub const NFNL_MSG_BATCH_END: u16 = 0x11;

pub const NLM_F_REQUEST: u16 = 0x1;
pub const NLM_F_ACK: u16 = 0x4;
pub const NLM_F_APPEND: u16 = 0x800;
pub const NLM_F_CREATE: u16 = 0x400;
pub const NLA_F_NESTED: u16 = 0x8000;
pub const NLMSG_ERROR: u16 = 0x2;
pub const NLMSG_DONE: u16 = 0x3;

pub const NFPROTO_INET: u8 = 1;
pub const AF_UNSPEC: u8 = 0;

// enum nf_tables_msg_types
pub const NFT_MSG_NEWTABLE: u8 = 0;
pub const NFT_MSG_GETTABLE: u8 = 1;
pub const NFT_MSG_DELTABLE: u8 = 2;
pub const NFT_MSG_NEWCHAIN: u8 = 3;
pub const NFT_MSG_NEWRULE: u8 = 6;
pub const NFT_MSG_NEWSET: u8 = 9;
pub const NFT_MSG_NEWSETELEM: u8 = 12;
pub const NFT_MSG_DELSETELEM: u8 = 14;

pub const NFTA_LIST_ELEM: u16 = 1;
pub const NFTA_HOOK_HOOKNUM: u16 = 1;
pub const NFTA_HOOK_PRIORITY: u16 = 2;
pub const NFTA_TABLE_NAME: u16 = 1;
pub const NFTA_TABLE_FLAGS: u16 = 2;
pub const NFTA_TABLE_USE: u16 = 3;
pub const NFTA_TABLE_HANDLE: u16 = 4;
pub const NFTA_CHAIN_TABLE: u16 = 1;
pub const NFTA_CHAIN_NAME: u16 = 3;
pub const NFTA_CHAIN_HOOK: u16 = 4;
pub const NFTA_CHAIN_POLICY: u16 = 5;
pub const NFTA_CHAIN_TYPE: u16 = 7;
pub const NFTA_RULE_TABLE: u16 = 1;
pub const NFTA_RULE_CHAIN: u16 = 2;
pub const NFTA_RULE_EXPRESSIONS: u16 = 4;
pub const NFTA_SET_TABLE: u16 = 1;
pub const NFTA_SET_NAME: u16 = 2;
pub const NFTA_SET_FLAGS: u16 = 3;
pub const NFTA_SET_KEY_TYPE: u16 = 4;
pub const NFTA_SET_KEY_LEN: u16 = 5;
pub const NFTA_SET_ID: u16 = 10;
pub const NFTA_SET_USERDATA: u16 = 13;
pub const NFT_SET_INTERVAL: u32 = 0x4;
pub const NFTA_SET_ELEM_KEY: u16 = 1;
pub const NFTA_SET_ELEM_FLAGS: u16 = 3;
pub const NFT_SET_ELEM_INTERVAL_END: u32 = 0x1;
pub const NFTA_SET_ELEM_LIST_TABLE: u16 = 1;
pub const NFTA_SET_ELEM_LIST_SET: u16 = 2;
pub const NFTA_SET_ELEM_LIST_ELEMENTS: u16 = 3;
pub const NFTA_DATA_VALUE: u16 = 1;
pub const NFTA_DATA_VERDICT: u16 = 2;
pub const NFTA_VERDICT_CODE: u16 = 1;
pub const NFTA_EXPR_NAME: u16 = 1;
pub const NFTA_EXPR_DATA: u16 = 2;
pub const NFTA_IMMEDIATE_DREG: u16 = 1;
pub const NFTA_IMMEDIATE_DATA: u16 = 2;
pub const NFTA_BITWISE_SREG: u16 = 1;
pub const NFTA_BITWISE_DREG: u16 = 2;
pub const NFTA_BITWISE_LEN: u16 = 3;
pub const NFTA_BITWISE_MASK: u16 = 4;
pub const NFTA_BITWISE_XOR: u16 = 5;
pub const NFTA_CMP_SREG: u16 = 1;
pub const NFTA_CMP_OP: u16 = 2;
pub const NFTA_CMP_DATA: u16 = 3;
pub const NFTA_LOOKUP_SET: u16 = 1;
pub const NFTA_LOOKUP_SREG: u16 = 2;
pub const NFTA_PAYLOAD_DREG: u16 = 1;
pub const NFTA_PAYLOAD_BASE: u16 = 2;
pub const NFTA_PAYLOAD_OFFSET: u16 = 3;
pub const NFTA_PAYLOAD_LEN: u16 = 4;
pub const NFTA_EXTHDR_DREG: u16 = 1;
pub const NFTA_EXTHDR_TYPE: u16 = 2;
pub const NFTA_EXTHDR_OFFSET: u16 = 3;
pub const NFTA_EXTHDR_LEN: u16 = 4;
pub const NFTA_EXTHDR_OP: u16 = 6;
pub const NFTA_EXTHDR_SREG: u16 = 7;
pub const NFTA_META_DREG: u16 = 1;
pub const NFTA_META_KEY: u16 = 2;
pub const NFTA_META_SREG: u16 = 3;

pub const NF_ACCEPT: u32 = 1;
pub const NF_INET_PRE_ROUTING: u32 = 0;
pub const NF_INET_LOCAL_OUT: u32 = 3;
pub const NFT_REG_VERDICT: u32 = 0;
pub const NFT_REG_1: u32 = 1;
pub const NFT_META_MARK: u32 = 3;
pub const NFT_META_OIFNAME: u32 = 7;
pub const NFT_META_NFPROTO: u32 = 15;
pub const NFT_META_L4PROTO: u32 = 16;
pub const NFT_CMP_EQ: u32 = 0;
pub const NFT_CMP_GT: u32 = 4;
pub const NFT_PAYLOAD_NETWORK_HEADER: u32 = 1;
pub const NFT_PAYLOAD_TRANSPORT_HEADER: u32 = 2;
pub const NFT_EXTHDR_OP_TCPOPT: u32 = 1;

/// nft's data type ids (`enum datatypes` in nftables' `datatype.h`), stored in the set so that
/// `nft list` prints the keys as addresses.
pub const NFT_TYPE_IPADDR: u32 = 7;
pub const NFT_TYPE_IP6ADDR: u32 = 8;

const NLMSG_HDRLEN: usize = 16;
const NFGENMSG_LEN: usize = 4;

/// One message of a batch, kept to name it when the kernel rejects it: the shared netlink
/// socket's batch entry, which it reports a refusal by.
pub use net::netlink::BatchMsg as Sent;

/// An attribute or message outgrew its 16-bit (attribute) length field.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("netlink attribute too long in {what}")]
pub struct TooLong {
    /// The message being written.
    pub what: String,
}

/// A transaction being written: `BATCH_BEGIN`, the messages, then `BATCH_END` on
/// [`Batch::finish`]. Every message except the two markers asks for an ack, so each one is
/// answered, and a failure names the message that caused it.
#[derive(Debug)]
pub struct Batch {
    buf: Vec<u8>,
    seq: u32,
    sent: Vec<Sent>,
    msg_start: usize,
    overflow: Option<String>,
}

impl Batch {
    /// Starts a batch whose first message (`BATCH_BEGIN`) carries sequence number `seq`.
    pub fn new(seq: u32) -> Self {
        let mut b = Self {
            buf: Vec::with_capacity(4096),
            seq,
            sent: Vec::new(),
            msg_start: 0,
            overflow: None,
        };
        b.header(NFNL_MSG_BATCH_BEGIN, NLM_F_REQUEST, AF_UNSPEC, NFNL_SUBSYS_NFTABLES);
        b.close_msg();
        b
    }

    /// The messages written so far (not the batch markers).
    pub fn sent(&self) -> &[Sent] {
        &self.sent
    }

    /// Number of messages besides the batch markers.
    pub fn len(&self) -> usize {
        self.sent.len()
    }

    /// True when no message has been written besides `BATCH_BEGIN`.
    pub fn is_empty(&self) -> bool {
        self.sent.is_empty()
    }

    /// Bytes written so far.
    pub fn bytes(&self) -> usize {
        self.buf.len()
    }

    /// Opens an nf_tables message of type `msg` for family `family`; attributes follow until
    /// the next `begin` or [`Batch::finish`].
    pub fn begin(&mut self, msg: u8, family: u8, flags: u16, what: String) {
        self.close_msg();
        let ty = (NFNL_SUBSYS_NFTABLES << 8) | u16::from(msg);
        let seq = self.header(ty, NLM_F_REQUEST | NLM_F_ACK | flags, family, 0);
        self.sent.push(Sent { seq, what });
    }

    /// Closes the batch with `BATCH_END` and returns the bytes and the messages in it.
    pub fn finish(mut self) -> Result<(Vec<u8>, Vec<Sent>, u32), TooLong> {
        self.close_msg();
        self.header(NFNL_MSG_BATCH_END, NLM_F_REQUEST, AF_UNSPEC, NFNL_SUBSYS_NFTABLES);
        self.close_msg();
        match self.overflow {
            Some(what) => Err(TooLong { what }),
            None => Ok((self.buf, self.sent, self.seq)),
        }
    }

    fn header(&mut self, ty: u16, flags: u16, family: u8, res_id: u16) -> u32 {
        let seq = self.seq;
        self.seq = self.seq.wrapping_add(1);
        self.msg_start = self.buf.len();
        self.buf.extend_from_slice(&0u32.to_ne_bytes()); // length, patched by close_msg
        self.buf.extend_from_slice(&ty.to_ne_bytes());
        self.buf.extend_from_slice(&flags.to_ne_bytes());
        self.buf.extend_from_slice(&seq.to_ne_bytes());
        self.buf.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel fills it in
        self.buf.push(family);
        self.buf.push(0); // NFNETLINK_V0
        self.buf.extend_from_slice(&res_id.to_be_bytes());
        seq
    }

    fn close_msg(&mut self) {
        let len = self.buf.len() - self.msg_start;
        if len >= NLMSG_HDRLEN + NFGENMSG_LEN {
            let len = u32::try_from(len).unwrap_or(u32::MAX);
            if let Some(slot) = self.buf.get_mut(self.msg_start..self.msg_start + 4) {
                slot.copy_from_slice(&len.to_ne_bytes());
            }
        }
        // Only the first close of a message does anything.
        self.msg_start = self.buf.len();
    }

    /// A raw attribute.
    pub fn bytes_attr(&mut self, ty: u16, value: &[u8]) {
        let len = 4 + value.len();
        let Ok(len16) = u16::try_from(len) else {
            self.mark_overflow();
            return;
        };
        self.buf.extend_from_slice(&len16.to_ne_bytes());
        self.buf.extend_from_slice(&ty.to_ne_bytes());
        self.buf.extend_from_slice(value);
        self.pad();
    }

    /// A NUL-terminated string attribute.
    pub fn str_attr(&mut self, ty: u16, value: &str) {
        let mut v = Vec::with_capacity(value.len() + 1);
        v.extend_from_slice(value.as_bytes());
        v.push(0);
        self.bytes_attr(ty, &v);
    }

    /// A big-endian u32 attribute (`NLA_BE32`).
    pub fn be32(&mut self, ty: u16, value: u32) {
        self.bytes_attr(ty, &value.to_be_bytes());
    }

    /// Opens a nested attribute; returns the token [`Batch::nest_end`] needs.
    pub fn nest(&mut self, ty: u16) -> usize {
        let at = self.buf.len();
        self.buf.extend_from_slice(&0u16.to_ne_bytes());
        self.buf.extend_from_slice(&(ty | NLA_F_NESTED).to_ne_bytes());
        at
    }

    /// Closes the nested attribute opened at `at`.
    pub fn nest_end(&mut self, at: usize) {
        let len = self.buf.len().saturating_sub(at);
        match (u16::try_from(len), self.buf.get_mut(at..at + 2)) {
            (Ok(len), Some(slot)) => slot.copy_from_slice(&len.to_ne_bytes()),
            _ => self.mark_overflow(),
        }
    }

    fn pad(&mut self) {
        while !self.buf.len().is_multiple_of(4) {
            self.buf.push(0);
        }
    }

    fn mark_overflow(&mut self) {
        if self.overflow.is_none() {
            let what = self.sent.last().map_or_else(|| "batch".to_owned(), |s| s.what.clone());
            self.overflow = Some(what);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_batch_is_two_markers() {
        let (bytes, sent, next) = Batch::new(7).finish().unwrap();
        assert!(sent.is_empty());
        assert_eq!(next, 9);
        assert_eq!(bytes.len(), 40);
        // BATCH_BEGIN: len 20, type 0x10, flags REQUEST, seq 7, port 0, AF_UNSPEC, v0, res 10 BE.
        assert_eq!(
            &bytes[..20],
            &[20, 0, 0, 0, 0x10, 0, 1, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10]
        );
        assert_eq!(&bytes[20..28], &[20, 0, 0, 0, 0x11, 0, 1, 0]);
    }

    #[test]
    fn attributes_pad_and_nest() {
        let mut b = Batch::new(1);
        b.begin(NFT_MSG_NEWTABLE, NFPROTO_INET, NLM_F_CREATE, "t".into());
        let n = b.nest(NFTA_CHAIN_HOOK);
        b.str_attr(NFTA_TABLE_NAME, "ab");
        b.nest_end(n);
        let (bytes, sent, _) = b.finish().unwrap();
        assert_eq!(sent, [Sent { seq: 2, what: "t".into() }]);
        let msg = &bytes[20..];
        assert_eq!(u32::from_ne_bytes(msg[..4].try_into().unwrap()), 32);
        assert_eq!(u16::from_ne_bytes(msg[4..6].try_into().unwrap()), 0x0a00);
        assert_eq!(u16::from_ne_bytes(msg[6..8].try_into().unwrap()), 0x405);
        assert_eq!(&msg[16..20], &[NFPROTO_INET, 0, 0, 0]);
        // Nest of 12 bytes (type 4 | NESTED), string "ab\0" of 7 bytes padded to 8.
        assert_eq!(&msg[20..32], &[12, 0, 4, 0x80, 7, 0, 1, 0, b'a', b'b', 0, 0]);
    }

    #[test]
    fn oversized_attribute_is_an_error() {
        let mut b = Batch::new(1);
        b.begin(NFT_MSG_NEWSETELEM, NFPROTO_INET, 0, "elements".into());
        let n = b.nest(NFTA_SET_ELEM_LIST_ELEMENTS);
        for _ in 0..20_000 {
            b.be32(NFTA_SET_ELEM_FLAGS, 1);
        }
        b.nest_end(n);
        assert_eq!(b.finish().unwrap_err(), TooLong { what: "elements".into() });
    }
}
