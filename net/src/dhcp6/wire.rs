// SPDX-License-Identifier: Apache-2.0
//! The parse boundary for received DHCPv6 messages (RFC 8415 §8, §21).
//!
//! `dhcproto` decodes options leniently (a bad option silently ends the option list) and, in
//! builds with overflow checks, panics on some short option lengths (a status code shorter
//! than 2 bytes computes `len - 2`). So every received payload is first walked here as plain
//! TLVs, nested IA options included, and refused with a precise error when an option overruns
//! its container or has a length its type cannot have. Only then is it handed to `dhcproto`,
//! inside `catch_unwind` as a last guard: PID 1 must not die on a packet.

use std::panic::{catch_unwind, AssertUnwindSafe};

use dhcproto::v6::Message;
use dhcproto::Decodable;

/// How deep options may nest: IA_NA → IAADDR → STATUS_CODE is the deepest a client needs.
const MAX_DEPTH: u8 = 4;

/// Why a received payload is not a DHCPv6 message keelson will look at.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Wire6Error {
    /// Less than the 4-byte header.
    #[error("{len} bytes, shorter than the 4-byte header")]
    Short {
        /// The payload length.
        len: usize,
    },
    /// Relay messages (types 12 and 13) never go to a client (RFC 8415 §7.3).
    #[error("message type {0} is a relay message")]
    Relay(u8),
    /// An option header or body runs past the end of its container.
    #[error(
        "option {code} at byte {offset}: length {len} overruns its container ({left} bytes left)"
    )]
    Overrun {
        /// The option code.
        code: u16,
        /// Where the option starts in the payload.
        offset: usize,
        /// The option's length field.
        len: usize,
        /// Bytes left after the option header.
        left: usize,
    },
    /// A truncated option header (fewer than 4 bytes left).
    #[error("truncated option header at byte {offset}")]
    TruncatedHeader {
        /// Where the header starts.
        offset: usize,
    },
    /// A length the option type cannot have.
    #[error("option {code} at byte {offset}: length {len} is invalid for it")]
    BadLength {
        /// The option code.
        code: u16,
        /// Where the option starts.
        offset: usize,
        /// The option's length field.
        len: usize,
    },
    /// Options nested deeper than any client message needs.
    #[error("option {code} at byte {offset}: nested deeper than {MAX_DEPTH} levels")]
    TooDeep {
        /// The option code.
        code: u16,
        /// Where the option starts.
        offset: usize,
    },
    /// A relay-message option inside a message for a client.
    #[error("option 9 (relay message) at byte {offset} in a message for a client")]
    RelayOption {
        /// Where the option starts.
        offset: usize,
    },
    /// The decoder refused what the TLV walk accepted.
    #[error("decode: {0}")]
    Decode(String),
    /// The decoder panicked; the TLV walk must learn this shape (the fuzzer checks it never
    /// happens).
    #[error("the decoder panicked")]
    Panicked,
}

/// Check `bytes` as a DHCPv6 client-side message and decode it.
pub fn decode(bytes: &[u8]) -> Result<Message, Wire6Error> {
    check(bytes)?;
    match catch_unwind(AssertUnwindSafe(|| Message::from_bytes(bytes))) {
        Ok(Ok(msg)) => Ok(msg),
        Ok(Err(err)) => Err(Wire6Error::Decode(err.to_string())),
        Err(_) => Err(Wire6Error::Panicked),
    }
}

/// The TLV walk alone (no decoding).
pub fn check(bytes: &[u8]) -> Result<(), Wire6Error> {
    let Some((&kind, _)) = bytes.split_first() else {
        return Err(Wire6Error::Short { len: 0 });
    };
    if bytes.len() < 4 {
        return Err(Wire6Error::Short { len: bytes.len() });
    }
    if kind == 12 || kind == 13 {
        return Err(Wire6Error::Relay(kind));
    }
    check_options(bytes, 4, bytes.len(), 0)
}

/// Walk the options in `bytes[start..end]`; offsets in errors are into the whole payload.
fn check_options(bytes: &[u8], start: usize, end: usize, depth: u8) -> Result<(), Wire6Error> {
    let mut pos = start;
    while pos < end {
        let Some(header) = bytes.get(pos..pos + 4).filter(|_| pos + 4 <= end) else {
            return Err(Wire6Error::TruncatedHeader { offset: pos });
        };
        let code = u16::from_be_bytes([header[0], header[1]]);
        let len = usize::from(u16::from_be_bytes([header[2], header[3]]));
        let body = pos + 4;
        if body + len > end {
            return Err(Wire6Error::Overrun { code, offset: pos, len, left: end - body });
        }
        let bad = Wire6Error::BadLength { code, offset: pos, len };
        // (minimum length, fixed header before nested options) per RFC 8415 §21.
        let nested = match code {
            3 | 25 => Some(12), // IA_NA, IA_PD: IAID, T1, T2
            4 | 17 => Some(4),  // IA_TA: IAID; VENDOR_OPTS: enterprise number
            5 => Some(24),      // IAADDR: address, preferred, valid
            26 => Some(25),     // IAPREFIX
            _ => None,
        };
        let valid = match code {
            6 => len % 2 == 0,
            7 | 19 => len == 1,
            8 => len == 2,
            9 => return Err(Wire6Error::RelayOption { offset: pos }),
            11 => len >= 11,
            12 => len == 16,
            13 => len >= 2,
            14 | 20 => len == 0,
            16 => len >= 4,
            23 => len % 16 == 0,
            32 => len == 4,
            _ => nested.is_none_or(|head| len >= head),
        };
        if !valid {
            return Err(bad);
        }
        if let Some(head) = nested {
            if depth >= MAX_DEPTH {
                return Err(Wire6Error::TooDeep { code, offset: pos });
            }
            check_options(bytes, body + head, body + len, depth + 1)?;
        }
        pos = body + len;
    }
    Ok(())
}
