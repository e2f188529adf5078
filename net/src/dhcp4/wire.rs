// SPDX-License-Identifier: Apache-2.0
//! The parse boundary for received DHCPv4 messages (RFC 2131 §2, §4.1; RFC 2132 §9.3).
//!
//! Before `dhcproto` sees a payload, the fixed header, the magic cookie and the option TLVs
//! are walked here and refused with a precise error when an option overruns the packet or has
//! a length its type cannot have: `dhcproto` would otherwise stop decoding silently, or, in
//! builds with overflow checks, panic (option 81 shorter than 3 bytes, option 151 of length
//! 0, `debug_assert`s on options 80, 94, 152-155). An `hlen` over 16 is refused too: reading
//! `chaddr` of such a message panics in every build (found by `dhcp_fuzz`). The decode itself runs inside
//! `catch_unwind` as a last guard: PID 1 must not die on a packet.
//!
//! Option overload (option 52) is honoured here, which `dhcproto` does not do: the `file`
//! and then the `sname` field are decoded as further option areas (RFC 2131 §4.1 order), and
//! their options are added where the `options` field does not already carry the same code.

use std::panic::{catch_unwind, AssertUnwindSafe};

use dhcproto::v4::{DhcpOption, DhcpOptions, Message, OptionCode};
use dhcproto::{Decodable, Decoder};

/// The BOOTP header before the magic cookie (RFC 2131 Figure 1).
const HEADER_LEN: usize = 236;
/// RFC 2131 §3: 99.130.83.99.
const MAGIC_COOKIE: [u8; 4] = [99, 130, 83, 99];
/// The `sname` field (64 bytes) and the `file` field (128 bytes).
const SNAME: std::ops::Range<usize> = 44..108;
const FILE: std::ops::Range<usize> = 108..236;

/// Where in the packet an option area is, for error messages.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Area {
    /// The `options` field after the magic cookie.
    Options,
    /// The `file` field, overloaded.
    File,
    /// The `sname` field, overloaded.
    Sname,
}

impl std::fmt::Display for Area {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Area::Options => "options",
            Area::File => "file",
            Area::Sname => "sname",
        })
    }
}

/// Why a received payload is not a DHCPv4 message keelson will look at.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Wire4Error {
    /// Shorter than the header and magic cookie.
    #[error("{len} bytes, shorter than the 240-byte header and magic cookie")]
    Short {
        /// The payload length.
        len: usize,
    },
    /// Not the DHCP magic cookie (a plain BOOTP packet or garbage).
    #[error("magic cookie {0:?} at byte 236 is not 99.130.83.99")]
    Cookie([u8; 4]),
    /// An option runs past the end of its area.
    #[error("option {code} at byte {offset} ({area} field): length {len:?} overruns the field")]
    Overrun {
        /// The option code.
        code: u8,
        /// Where the option starts in the payload.
        offset: usize,
        /// Its length byte (`None`: the length byte itself is missing).
        len: Option<u8>,
        /// Which field.
        area: Area,
    },
    /// A length the option type cannot have.
    #[error("option {code} at byte {offset} ({area} field): length {len} is invalid for it")]
    BadLength {
        /// The option code.
        code: u8,
        /// Where the option starts in the payload.
        offset: usize,
        /// Its length byte.
        len: u8,
        /// Which field.
        area: Area,
    },
    /// `hlen` larger than the 16-byte `chaddr` field: `dhcproto`'s `Message::chaddr` slices
    /// `chaddr[..hlen]` and would panic in every build.
    #[error("hlen {0} at byte 2 is larger than the 16-byte chaddr field")]
    HardwareLength(u8),
    /// Option 52 with a value other than 1, 2 or 3 (RFC 2132 §9.3).
    #[error("option overload value {0} is not 1, 2 or 3")]
    Overload(u8),
    /// The decoder refused what the TLV walk accepted.
    #[error("decode: {0}")]
    Decode(String),
    /// The decoder panicked; the TLV walk must learn this shape (the fuzzer checks it never
    /// happens).
    #[error("the decoder panicked")]
    Panicked,
}

/// Check `bytes` as a DHCPv4 message, decode it and merge overloaded options.
pub fn decode(bytes: &[u8]) -> Result<Message, Wire4Error> {
    check(bytes)?;
    let mut msg = match catch_unwind(AssertUnwindSafe(|| Message::from_bytes(bytes))) {
        Ok(Ok(msg)) => msg,
        Ok(Err(err)) => return Err(Wire4Error::Decode(err.to_string())),
        Err(_) => return Err(Wire4Error::Panicked),
    };
    let overload = match msg.opts().get(OptionCode::OptionOverload) {
        Some(DhcpOption::OptionOverload(v)) => *v,
        _ => return Ok(msg),
    };
    if !(1..=3).contains(&overload) {
        return Err(Wire4Error::Overload(overload));
    }
    for (bit, range, area) in [(1, FILE, Area::File), (2, SNAME, Area::Sname)] {
        if overload & bit == 0 {
            continue;
        }
        let Some(field) = bytes.get(range.clone()) else { continue };
        check_area(bytes, range.start, range.end, area)?;
        let extra = match catch_unwind(AssertUnwindSafe(|| {
            DhcpOptions::decode(&mut Decoder::new(field))
        })) {
            Ok(Ok(opts)) => opts,
            Ok(Err(err)) => return Err(Wire4Error::Decode(err.to_string())),
            Err(_) => return Err(Wire4Error::Panicked),
        };
        for (code, opt) in extra.iter() {
            // Never let an overloaded field overload again or change the message type.
            let fixed = matches!(code, OptionCode::OptionOverload | OptionCode::MessageType);
            if !fixed && msg.opts().get(*code).is_none() {
                msg.opts_mut().insert(opt.clone());
            }
        }
    }
    Ok(msg)
}

/// The header, cookie and `options` field walk alone (no decoding).
pub fn check(bytes: &[u8]) -> Result<(), Wire4Error> {
    let Some(cookie) = bytes.get(HEADER_LEN..HEADER_LEN + 4) else {
        return Err(Wire4Error::Short { len: bytes.len() });
    };
    let hlen = bytes.get(2).copied().unwrap_or(0);
    if hlen > 16 {
        return Err(Wire4Error::HardwareLength(hlen));
    }
    if cookie != MAGIC_COOKIE {
        let mut got = [0; 4];
        got.copy_from_slice(cookie);
        return Err(Wire4Error::Cookie(got));
    }
    check_area(bytes, HEADER_LEN + 4, bytes.len(), Area::Options)
}

/// Walk the options in `bytes[start..end]` up to the end option (RFC 2132 §2, §3.1-3.2).
fn check_area(bytes: &[u8], start: usize, end: usize, area: Area) -> Result<(), Wire4Error> {
    let mut pos = start;
    while pos < end {
        let Some(&code) = bytes.get(pos) else { break };
        match code {
            0 => {
                pos += 1;
                continue;
            }
            255 => return Ok(()),
            _ => {}
        }
        let Some(&len) = bytes.get(pos + 1).filter(|_| pos + 1 < end) else {
            return Err(Wire4Error::Overrun { code, offset: pos, len: None, area });
        };
        let next = pos + 2 + usize::from(len);
        if next > end {
            return Err(Wire4Error::Overrun { code, offset: pos, len: Some(len), area });
        }
        let valid = match code {
            // Fixed sizes of what the client reads (RFC 2132 §3.3, §5.1, §9.2-9.7, §9.11-12).
            1 | 28 | 50 | 51 | 54 | 58 | 59 => len == 4,
            26 => len == 2,
            52 | 53 => len == 1,
            3 | 6 | 42 => len >= 4 && len % 4 == 0,
            // Shapes `dhcproto` panics on in builds with overflow checks or debug asserts.
            80 => len == 0,
            81 => len >= 3,
            94 => len == 3,
            151 => len >= 1,
            152..=155 => len == 4,
            _ => true,
        };
        if !valid {
            return Err(Wire4Error::BadLength { code, offset: pos, len, area });
        }
        pos = next;
    }
    Ok(())
}
