// SPDX-License-Identifier: Apache-2.0
//! NTS Key Establishment records (RFC 8915 §4): the request keelson sends and a bounded,
//! incremental parse of the server's response. Pure: the TLS exchange lives in
//! [`super::exchange`].
//!
//! A record is a 16-bit word (the critical bit, then a 15-bit type), a 16-bit body length and
//! the body.

use thiserror::Error;

/// The NTS-KE port (RFC 8915 §4).
pub const KE_PORT: u16 = 4460;
/// The TLS ALPN protocol ID of NTS-KE.
pub const ALPN: &[u8] = b"ntske/1";
/// The TLS exporter label for the NTP keys (RFC 8915 §5.1).
pub const EXPORTER_LABEL: &[u8] = b"EXPORTER-network-time-security";
/// Next protocol ID of NTPv4 (RFC 8915 §7.7).
pub const PROTOCOL_NTPV4: u16 = 0;
/// AEAD_AES_SIV_CMAC_256 (RFC 5297; IANA AEAD registry number 15), the one algorithm every
/// NTS implementation must support and the only one keelson offers.
pub const AEAD_AES_SIV_CMAC_256: u16 = 15;
/// Cookies kept per server; also the most taken from one response.
pub const MAX_COOKIES: usize = 8;
/// The longest cookie accepted (chrony's and the common servers' are about 100 bytes).
pub const MAX_COOKIE_LEN: usize = 1024;
/// The longest host name accepted in a server negotiation record.
const MAX_SERVER_LEN: usize = 253;
/// Records read before giving up on an end-of-message that never comes.
const MAX_RECORDS: usize = 64;

const CRITICAL: u16 = 0x8000;

/// Record types (RFC 8915 §4.1).
mod kind {
    pub const END: u16 = 0;
    pub const NEXT_PROTOCOL: u16 = 1;
    pub const ERROR: u16 = 2;
    pub const WARNING: u16 = 3;
    pub const AEAD: u16 = 4;
    pub const COOKIE: u16 = 5;
    pub const SERVER: u16 = 6;
    pub const PORT: u16 = 7;
}

/// Why a response is not usable.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum KeError {
    /// The server sent an Error record.
    #[error("server refused the key exchange (error code {0})")]
    Refused(u16),
    /// The server sent a Warning record keelson does not know.
    #[error("server sent warning {0}")]
    Warning(u16),
    /// A critical record of a type keelson does not know.
    #[error("unknown critical record type {0}")]
    UnknownCritical(u16),
    /// A record body of the wrong length or content.
    #[error("malformed {0} record")]
    Malformed(&'static str),
    /// The server did not pick NTPv4.
    #[error("server does not offer NTPv4")]
    NoNtp,
    /// The server did not pick AES-SIV-CMAC-256.
    #[error("server does not offer AEAD_AES_SIV_CMAC_256")]
    NoAead,
    /// No cookies came with the response.
    #[error("no cookies in the response")]
    NoCookies,
    /// More records than any sane response has.
    #[error("more than {MAX_RECORDS} records")]
    TooManyRecords,
    /// The server closed before its end-of-message record.
    #[error("response ended before its end-of-message record")]
    Truncated,
}

fn record(out: &mut Vec<u8>, critical: bool, kind: u16, body: &[u8]) {
    let word = if critical { CRITICAL | kind } else { kind };
    out.extend_from_slice(&word.to_be_bytes());
    // Bodies keelson writes are a few bytes.
    out.extend_from_slice(&(body.len() as u16).to_be_bytes());
    out.extend_from_slice(body);
}

/// The request: NTPv4, AEAD_AES_SIV_CMAC_256, end of message (RFC 8915 §4.1.2, §4.1.5: the
/// first and the last are critical; the AEAD record is marked critical too, as a client that
/// supports one algorithm has nothing to fall back to).
pub fn request() -> Vec<u8> {
    let mut out = Vec::with_capacity(16);
    record(&mut out, true, kind::NEXT_PROTOCOL, &PROTOCOL_NTPV4.to_be_bytes());
    record(&mut out, true, kind::AEAD, &AEAD_AES_SIV_CMAC_256.to_be_bytes());
    record(&mut out, true, kind::END, &[]);
    out
}

/// What a successful key exchange gave.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Response {
    /// Cookies for NTP requests (at most [`MAX_COOKIES`]).
    pub cookies: Vec<Vec<u8>>,
    /// The NTP server to use, when not the key exchange server itself (RFC 8915 §4.1.7).
    pub server: Option<String>,
    /// The NTP port, when not 123 (RFC 8915 §4.1.8).
    pub port: Option<u16>,
}

impl std::fmt::Debug for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Cookies are bearer credentials for the keys: counted, not printed.
        f.debug_struct("Response")
            .field("cookies", &self.cookies.len())
            .field("server", &self.server)
            .field("port", &self.port)
            .finish()
    }
}

/// Parse a whole response from the bytes read so far: `Ok(None)` until the end-of-message
/// record has arrived, so the caller reads more (and bounds what it buffers).
pub fn parse_response(bytes: &[u8]) -> Result<Option<Response>, KeError> {
    let mut r = Response::default();
    let (mut protocol, mut aead) = (false, false);
    let mut at = 0usize;
    for _ in 0..MAX_RECORDS {
        let Some(head) = bytes.get(at..at + 4) else { return Ok(None) };
        let word = u16::from_be_bytes([head[0], head[1]]);
        let len = usize::from(u16::from_be_bytes([head[2], head[3]]));
        let Some(body) = bytes.get(at + 4..at + 4 + len) else { return Ok(None) };
        at += 4 + len;
        let (critical, kind) = (word & CRITICAL != 0, word & !CRITICAL);
        match kind {
            kind::END => {
                if !body.is_empty() {
                    return Err(KeError::Malformed("end of message"));
                }
                if !protocol {
                    return Err(KeError::NoNtp);
                }
                if !aead {
                    return Err(KeError::NoAead);
                }
                if r.cookies.is_empty() {
                    return Err(KeError::NoCookies);
                }
                return Ok(Some(r));
            }
            kind::NEXT_PROTOCOL => {
                // The server answers with exactly the one protocol it picked.
                if body != PROTOCOL_NTPV4.to_be_bytes() {
                    return Err(if body.len() == 2 || body.is_empty() {
                        KeError::NoNtp
                    } else {
                        KeError::Malformed("next protocol")
                    });
                }
                protocol = true;
            }
            kind::ERROR => {
                let code = u16_body(body).ok_or(KeError::Malformed("error"))?;
                return Err(KeError::Refused(code));
            }
            kind::WARNING => {
                let code = u16_body(body).ok_or(KeError::Malformed("warning"))?;
                return Err(KeError::Warning(code));
            }
            kind::AEAD => {
                if body != AEAD_AES_SIV_CMAC_256.to_be_bytes() {
                    return Err(if body.len() == 2 {
                        KeError::NoAead
                    } else {
                        KeError::Malformed("AEAD algorithm")
                    });
                }
                aead = true;
            }
            kind::COOKIE => {
                if body.is_empty() || body.len() > MAX_COOKIE_LEN {
                    return Err(KeError::Malformed("cookie"));
                }
                if r.cookies.len() < MAX_COOKIES {
                    r.cookies.push(body.to_vec());
                }
            }
            kind::SERVER => {
                let ok = !body.is_empty()
                    && body.len() <= MAX_SERVER_LEN
                    && body.iter().all(|b| b.is_ascii_alphanumeric() || b".-:".contains(b));
                if !ok {
                    return Err(KeError::Malformed("server negotiation"));
                }
                r.server = Some(String::from_utf8_lossy(body).to_ascii_lowercase());
            }
            kind::PORT => {
                let port = u16_body(body).filter(|p| *p != 0);
                r.port = Some(port.ok_or(KeError::Malformed("port negotiation"))?);
            }
            _ if critical => return Err(KeError::UnknownCritical(kind)),
            _ => {}
        }
    }
    Err(KeError::TooManyRecords)
}

fn u16_body(body: &[u8]) -> Option<u16> {
    let b: [u8; 2] = body.try_into().ok()?;
    Some(u16::from_be_bytes(b))
}

/// The context of the exporter for the client-to-server (`s2c = false`) or server-to-client
/// key: protocol ID, AEAD ID, then 0 or 1 (RFC 8915 §5.1).
pub fn exporter_context(s2c: bool) -> [u8; 5] {
    let p = PROTOCOL_NTPV4.to_be_bytes();
    let a = AEAD_AES_SIV_CMAC_256.to_be_bytes();
    [p[0], p[1], a[0], a[1], u8::from(s2c)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn request_golden_bytes() {
        assert_eq!(request(), hex("8001 0002 0000  8004 0002 000f  8000 0000"));
        assert_eq!(exporter_context(false), [0, 0, 0, 15, 0]);
        assert_eq!(exporter_context(true), [0, 0, 0, 15, 1]);
    }

    /// A response as chrony sends it: protocol, AEAD, cookies, end.
    fn response(extra: &str, cookies: usize) -> Vec<u8> {
        let mut v = hex("8001 0002 0000  0004 0002 000f");
        v.extend(hex(extra));
        for i in 0..cookies {
            v.extend(hex("0005 0004"));
            v.extend([i as u8; 4]);
        }
        v.extend(hex("8000 0000"));
        v
    }

    #[test]
    fn a_full_response_parses_and_a_partial_one_asks_for_more() {
        let bytes = response("0006 0009 6e74702e74657374 00  0007 0002 007b", 2);
        // "ntp.test\0" is not a valid name; use the real thing below.
        assert_eq!(parse_response(&bytes), Err(KeError::Malformed("server negotiation")));
        let bytes = response("0006 0008 4e54502e54455354  0007 0002 1023", 9);
        let r = parse_response(&bytes).unwrap().unwrap();
        assert_eq!(r.cookies.len(), MAX_COOKIES, "at most eight kept");
        assert_eq!(r.cookies[1], [1, 1, 1, 1]);
        assert_eq!(r.server.as_deref(), Some("ntp.test"));
        assert_eq!(r.port, Some(4131));
        for cut in 0..bytes.len() {
            assert_eq!(parse_response(&bytes[..cut]), Ok(None), "cut at {cut}");
        }
    }

    #[test]
    fn refusals_and_malformed_records() {
        let refused = hex("8002 0002 0001 8000 0000");
        assert_eq!(parse_response(&refused), Err(KeError::Refused(1)));
        assert_eq!(parse_response(&response("", 0)), Err(KeError::NoCookies));
        let no_aead = hex("8001 0002 0000 0005 0001 aa 8000 0000");
        assert_eq!(parse_response(&no_aead), Err(KeError::NoAead));
        let other_aead = hex("8001 0002 0000 0004 0002 0010 0005 0001 aa 8000 0000");
        assert_eq!(parse_response(&other_aead), Err(KeError::NoAead));
        let no_protocol = hex("8001 0000 0004 0002 000f 8000 0000");
        assert_eq!(parse_response(&no_protocol), Err(KeError::NoNtp));
        let unknown_critical = response("8123 0000", 1);
        assert_eq!(parse_response(&unknown_critical), Err(KeError::UnknownCritical(0x123)));
        // An unknown non-critical record is skipped.
        assert!(parse_response(&response("0123 0003 010203", 1)).unwrap().is_some());
        assert_eq!(
            parse_response(&response("0007 0002 0000", 1)),
            Err(KeError::Malformed("port negotiation"))
        );
        let endless: Vec<u8> = hex("0123 0000").repeat(100);
        assert_eq!(parse_response(&endless), Err(KeError::TooManyRecords));
    }
}
