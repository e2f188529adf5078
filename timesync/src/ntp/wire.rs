// SPDX-License-Identifier: Apache-2.0
//! The NTP packet header (RFC 5905 §7.3, Figure 8) and NTP timestamps (§6).
//!
//! Only the 48-byte header is read; extension fields after it (RFC 7822, used by NTS, RFC 8915)
//! are left to whoever authenticates the packet.

use std::time::Duration;

/// The NTP port (RFC 5905 §7.2).
pub const NTP_PORT: u16 = 123;
/// The header length.
pub const HEADER_LEN: usize = 48;
/// Mode 3: client (RFC 5905 §7.3).
pub const MODE_CLIENT: u8 = 3;
/// Mode 4: server.
pub const MODE_SERVER: u8 = 4;
/// Leap indicator 3: the server's clock is unsynchronised (RFC 5905 §7.3).
pub const LEAP_UNSYNC: u8 = 3;
/// The version keelson sends.
pub const VERSION: u8 = 4;
/// Seconds from the NTP era 0 origin (1900-01-01) to the Unix epoch.
const UNIX_OFFSET: u64 = 2_208_988_800;

/// A 64-bit NTP timestamp: seconds since 1900 in the high 32 bits, the fraction in the low 32.
///
/// Only differences are ever used, computed modulo 2^64 and read as signed, so they stay right
/// across the 2036 era rollover as long as the two times are within 68 years (RFC 5905 §6).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct NtpTime(pub u64);

impl NtpTime {
    /// The NTP timestamp of a time given as the duration since the Unix epoch.
    pub fn from_unix(since_epoch: Duration) -> Self {
        let secs = since_epoch.as_secs().wrapping_add(UNIX_OFFSET);
        let frac = (u64::from(since_epoch.subsec_nanos()) << 32) / 1_000_000_000;
        Self((secs << 32) | frac)
    }

    /// `self - earlier` in nanoseconds (negative when `self` is before `earlier`).
    pub fn diff_ns(self, earlier: NtpTime) -> i64 {
        // Wrapping difference of two 32.32 values, read as signed: ±68 years.
        let d = self.0.wrapping_sub(earlier.0) as i64;
        ((i128::from(d) * 1_000_000_000) >> 32) as i64
    }

    /// This time moved by `ns` nanoseconds.
    pub fn add_ns(self, ns: i64) -> Self {
        let d = (i128::from(ns) << 32) / 1_000_000_000;
        Self(self.0.wrapping_add(d as u64))
    }

    /// Seconds since the Unix epoch (era 0 and 1 folded: a time before 1970 reads as after
    /// 2036), for display.
    pub fn unix_secs(self) -> u64 {
        (self.0 >> 32).wrapping_sub(UNIX_OFFSET) & 0xffff_ffff
    }
}

/// A decoded header.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Header {
    /// Leap indicator (0..=3).
    pub leap: u8,
    /// Version number.
    pub version: u8,
    /// Association mode.
    pub mode: u8,
    /// Stratum: 0 is a kiss-o'-death packet (RFC 5905 §7.4), 1..=15 a synchronised server,
    /// 16 unsynchronised.
    pub stratum: u8,
    /// Poll exponent the server suggests.
    pub poll: i8,
    /// The server clock's precision exponent.
    pub precision: i8,
    /// Round trip to the server's reference, NTP short format (16.16 seconds).
    pub root_delay: u32,
    /// Dispersion to the server's reference, NTP short format.
    pub root_dispersion: u32,
    /// Reference ID; the kiss code when the stratum is 0.
    pub ref_id: [u8; 4],
    /// When the server's clock was last set.
    pub reference: NtpTime,
    /// Origin: the client's transmit timestamp, echoed.
    pub origin: NtpTime,
    /// When the server received the request.
    pub receive: NtpTime,
    /// When the server sent the reply.
    pub transmit: NtpTime,
}

fn be32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    if let Some(s) = b.get(at..at + 4) {
        a.copy_from_slice(s);
    }
    u32::from_be_bytes(a)
}

fn be64(b: &[u8], at: usize) -> NtpTime {
    NtpTime((u64::from(be32(b, at)) << 32) | u64::from(be32(b, at + 4)))
}

/// NTP short format (16.16 seconds) in nanoseconds.
pub fn short_to_ns(v: u32) -> i64 {
    ((u64::from(v) * 1_000_000_000) >> 16) as i64
}

impl Header {
    /// Decode the header; `None` when the datagram is shorter than a header.
    pub fn parse(bytes: &[u8]) -> Option<Self> {
        if bytes.len() < HEADER_LEN {
            return None;
        }
        let b0 = *bytes.first()?;
        let mut ref_id = [0u8; 4];
        ref_id.copy_from_slice(bytes.get(12..16)?);
        Some(Self {
            leap: b0 >> 6,
            version: (b0 >> 3) & 0x7,
            mode: b0 & 0x7,
            stratum: *bytes.get(1)?,
            poll: *bytes.get(2)? as i8,
            precision: *bytes.get(3)? as i8,
            root_delay: be32(bytes, 4),
            root_dispersion: be32(bytes, 8),
            ref_id,
            reference: be64(bytes, 16),
            origin: be64(bytes, 24),
            receive: be64(bytes, 32),
            transmit: be64(bytes, 40),
        })
    }

    /// Encode the header.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0] = (self.leap << 6) | ((self.version & 0x7) << 3) | (self.mode & 0x7);
        b[1] = self.stratum;
        b[2] = self.poll as u8;
        b[3] = self.precision as u8;
        b[4..8].copy_from_slice(&self.root_delay.to_be_bytes());
        b[8..12].copy_from_slice(&self.root_dispersion.to_be_bytes());
        b[12..16].copy_from_slice(&self.ref_id);
        b[16..24].copy_from_slice(&self.reference.0.to_be_bytes());
        b[24..32].copy_from_slice(&self.origin.0.to_be_bytes());
        b[32..40].copy_from_slice(&self.receive.0.to_be_bytes());
        b[40..48].copy_from_slice(&self.transmit.0.to_be_bytes());
        b
    }

    /// A client request whose transmit timestamp is `cookie`.
    ///
    /// The transmit timestamp is a random number, not the local time: the server echoes it as
    /// the origin, so it identifies the reply (an off-path attacker must guess 64 bits) and
    /// does not reveal the client's clock (RFC 9109 §6 gives the same advice for client mode).
    pub fn request(cookie: u64) -> [u8; HEADER_LEN] {
        Header {
            version: VERSION,
            mode: MODE_CLIENT,
            transmit: NtpTime(cookie),
            ..Header::default()
        }
        .encode()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_from_unix_and_differences() {
        let t = NtpTime::from_unix(Duration::new(1_700_000_000, 500_000_000));
        assert_eq!(t.0 >> 32, 1_700_000_000 + UNIX_OFFSET);
        assert_eq!(t.0 & 0xffff_ffff, 1 << 31);
        assert_eq!(t.unix_secs(), 1_700_000_000);
        let later = NtpTime::from_unix(Duration::new(1_700_000_001, 250_000_000));
        assert_eq!(later.diff_ns(t), 750_000_000);
        assert_eq!(t.diff_ns(later), -750_000_000);
        assert!(t.add_ns(750_000_000).diff_ns(later).abs() < 2);
    }

    #[test]
    fn differences_survive_the_2036_rollover() {
        let before = NtpTime(u64::MAX - (1 << 32) + 1); // era 0, last second
        let after = NtpTime(1 << 32); // era 1, second 1
        assert_eq!(after.diff_ns(before), 2_000_000_000);
    }

    #[test]
    fn header_round_trip_and_short_datagrams() {
        let h = Header {
            leap: 0,
            version: 4,
            mode: MODE_SERVER,
            stratum: 2,
            poll: 6,
            precision: -20,
            root_delay: 0x0001_8000,
            root_dispersion: 7,
            ref_id: *b"GPS\0",
            reference: NtpTime(1),
            origin: NtpTime(2),
            receive: NtpTime(3),
            transmit: NtpTime(4),
        };
        let bytes = h.encode();
        assert_eq!(Header::parse(&bytes), Some(h));
        assert_eq!(short_to_ns(h.root_delay), 1_500_000_000);
        assert_eq!(Header::parse(&bytes[..47]), None);
        let mut long = bytes.to_vec();
        long.extend_from_slice(&[0; 20]);
        assert_eq!(Header::parse(&long), Some(h));
        let req = Header::parse(&Header::request(0xdead_beef)).unwrap();
        assert_eq!((req.mode, req.version, req.transmit), (MODE_CLIENT, 4, NtpTime(0xdead_beef)));
    }
}
