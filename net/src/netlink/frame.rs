// SPDX-License-Identifier: Apache-2.0
//! Splitting a received datagram into netlink messages, and reading the kernel's answer out of
//! `NLMSG_ERROR` / `NLMSG_DONE`, extended ack included. Pure: bytes in, values out. Every
//! socket of this layer (rtnetlink, generic netlink, nfnetlink) reads replies through here, so
//! the extended ack is parsed in this one place.

use netlink_packet_core::{NlasIterator, NLM_F_ACK_TLVS, NLM_F_CAPPED};
use nix::errno::Errno;

/// `struct nlmsghdr`: length, type, flags, sequence number, port id.
pub(crate) const HEADER_LEN: usize = 16;

/// `NLMSG_NOOP`, `NLMSG_ERROR`, `NLMSG_DONE`, `NLMSG_OVERRUN` (`linux/netlink.h`).
pub(crate) const NLMSG_NOOP: u16 = 1;
pub(crate) const NLMSG_ERROR: u16 = 2;
pub(crate) const NLMSG_DONE: u16 = 3;
pub(crate) const NLMSG_OVERRUN: u16 = 4;

/// `NLMSGERR_ATTR_MSG`: the extended ack's human readable text.
const NLMSGERR_ATTR_MSG: u16 = 1;

/// One message of a datagram, borrowed from it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Frame<'a> {
    pub(crate) ty: u16,
    pub(crate) flags: u16,
    pub(crate) seq: u32,
    /// The whole message, header included.
    pub(crate) bytes: &'a [u8],
}

/// What an `NLMSG_ERROR` or `NLMSG_DONE` says about the request it answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// `NLMSG_ERROR` with code 0: the request was applied.
    Ack,
    /// The end of a dump (`NLMSG_DONE` with a code that is not negative).
    Done,
    /// The kernel refused the request: its errno and extended ack text.
    Refused(Errno, Option<String>),
}

impl<'a> Frame<'a> {
    /// The payload after the 16-byte header.
    pub(crate) fn payload(&self) -> &'a [u8] {
        self.bytes.get(HEADER_LEN..).unwrap_or_default()
    }

    /// The outcome this message reports, if it is an `NLMSG_ERROR` or `NLMSG_DONE`; `Err` when
    /// one is too short to hold its code.
    pub(crate) fn outcome(&self) -> Result<Option<Outcome>, &'static str> {
        let code = || -> Result<i32, &'static str> {
            let b = self.payload().get(..4).ok_or("error or done message without its code")?;
            Ok(i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        };
        let rest = self.payload().get(4..).unwrap_or_default();
        Ok(match self.ty {
            NLMSG_ERROR => match code()? {
                0 => Some(Outcome::Ack),
                c => Some(Outcome::Refused(errno(c), ext_ack_after_request(self.flags, rest))),
            },
            NLMSG_DONE => match code()? {
                c if c < 0 => {
                    let msg =
                        if self.flags & NLM_F_ACK_TLVS != 0 { ext_ack_message(rest) } else { None };
                    Some(Outcome::Refused(errno(c), msg))
                }
                _ => Some(Outcome::Done),
            },
            _ => None,
        })
    }
}

fn errno(code: i32) -> Errno {
    Errno::from_raw(code.saturating_abs())
}

/// The messages of one datagram, in order. Stops with `Err` at a length field that is shorter
/// than a header or points past the end of the datagram; nothing past it is read.
pub(crate) fn frames(data: &[u8]) -> impl Iterator<Item = Result<Frame<'_>, &'static str>> {
    let mut off = 0;
    let mut failed = false;
    std::iter::from_fn(move || {
        if failed || off >= data.len() {
            return None;
        }
        let result = frame_at(data, off);
        match &result {
            Ok(f) => off += f.bytes.len().next_multiple_of(4),
            Err(_) => failed = true,
        }
        Some(result)
    })
}

fn frame_at(data: &[u8], off: usize) -> Result<Frame<'_>, &'static str> {
    let h = data.get(off..off + HEADER_LEN).ok_or("truncated netlink message")?;
    let len = u32::from_ne_bytes([h[0], h[1], h[2], h[3]]) as usize;
    if len < HEADER_LEN {
        return Err("message shorter than its header");
    }
    let bytes = data.get(off..off + len).ok_or("truncated netlink message")?;
    Ok(Frame {
        ty: u16::from_ne_bytes([h[4], h[5]]),
        flags: u16::from_ne_bytes([h[6], h[7]]),
        seq: u32::from_ne_bytes([h[8], h[9], h[10], h[11]]),
        bytes,
    })
}

/// The extended ack text of an `NLMSG_ERROR` whose payload after the errno is `rest`: the
/// request's header (only the 16-byte header when the kernel set `NLM_F_CAPPED`, else the whole
/// request), then TLVs when `NLM_F_ACK_TLVS` is set.
pub(crate) fn ext_ack_after_request(flags: u16, rest: &[u8]) -> Option<String> {
    if flags & NLM_F_ACK_TLVS == 0 {
        return None;
    }
    let skip = if flags & NLM_F_CAPPED != 0 {
        HEADER_LEN
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

    #[test]
    fn parses_error_with_ext_ack() {
        // NLMSG_ERROR, capped, with TLVs: errno -2, echoed 16-byte header, MSG "no set\0".
        let mut m = Vec::new();
        let body_len = 16 + 4 + 16 + 12;
        m.extend_from_slice(&(body_len as u32).to_ne_bytes());
        m.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
        m.extend_from_slice(&(NLM_F_CAPPED | NLM_F_ACK_TLVS).to_ne_bytes());
        m.extend_from_slice(&9u32.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(&(-2i32).to_ne_bytes());
        m.extend_from_slice(&[0u8; 16]);
        m.extend_from_slice(&11u16.to_ne_bytes());
        m.extend_from_slice(&1u16.to_ne_bytes());
        m.extend_from_slice(b"no set\0\0");
        let parsed: Vec<Frame<'_>> = frames(&m).collect::<Result<_, _>>().unwrap();
        assert_eq!(parsed.len(), 1);
        assert_eq!(parsed[0].seq, 9);
        assert_eq!(
            parsed[0].outcome().unwrap(),
            Some(Outcome::Refused(Errno::ENOENT, Some("no set".into())))
        );
        // A length that runs past the datagram is refused, not read past.
        let cut: Vec<_> = frames(&m[..m.len() - 4]).collect();
        assert_eq!(cut.len(), 1);
        assert!(cut[0].is_err());
    }

    #[test]
    fn ack_done_and_data() {
        let msg = |ty: u16, flags: u16, seq: u32, body: &[u8]| {
            let mut m = Vec::new();
            m.extend_from_slice(&((16 + body.len()) as u32).to_ne_bytes());
            m.extend_from_slice(&ty.to_ne_bytes());
            m.extend_from_slice(&flags.to_ne_bytes());
            m.extend_from_slice(&seq.to_ne_bytes());
            m.extend_from_slice(&0u32.to_ne_bytes());
            m.extend_from_slice(body);
            while m.len() % 4 != 0 {
                m.push(0);
            }
            m
        };
        let mut d = msg(0x0a00, 0, 1, &[1, 0, 0, 0, 9]);
        d.extend(msg(NLMSG_DONE, 0, 1, &0i32.to_ne_bytes()));
        d.extend(msg(NLMSG_ERROR, 0, 2, &[0u8; 20]));
        d.extend(msg(NLMSG_DONE, 0, 3, &(-16i32).to_ne_bytes()));
        let f: Vec<Frame<'_>> = frames(&d).collect::<Result<_, _>>().unwrap();
        assert_eq!(f.len(), 4);
        assert_eq!((f[0].ty, f[0].payload()), (0x0a00, &[1u8, 0, 0, 0, 9][..]));
        assert_eq!(f[0].outcome().unwrap(), None);
        assert_eq!(f[1].outcome().unwrap(), Some(Outcome::Done));
        assert_eq!(f[2].outcome().unwrap(), Some(Outcome::Ack));
        assert_eq!(f[3].outcome().unwrap(), Some(Outcome::Refused(Errno::EBUSY, None)));
        // An error message too short for its code is malformed, not an ack.
        let short = msg(NLMSG_ERROR, 0, 4, &[0, 0]);
        assert!(frames(&short).next().unwrap().unwrap().outcome().is_err());
    }
}
