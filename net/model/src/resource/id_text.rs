// SPDX-License-Identifier: Apache-2.0
//! Building IDs from names, addresses and numbers without the `fmt` machinery.
//!
//! Every address and route gets an ID, and a config with tens of thousands of routes builds
//! each one several times (config layer, merge, kernel dump). `Display` through `write!` was a
//! fifth of the time of applying such a config; [`IdText`] writes the same text as bytes and
//! checks them once, when the `String` is made. IPv6 keeps `Display`: its compressed form has
//! rules (RFC 5952) not worth repeating here, and the common large configs are IPv4.

use std::fmt::Write;
use std::net::{IpAddr, Ipv4Addr};

use ipnet::IpNet;

/// An ID under construction: UTF-8 text kept as bytes until [`IdText::finish`].
#[derive(Debug, Default)]
pub(crate) struct IdText(Vec<u8>);

impl IdText {
    /// Room for `n` bytes before the first reallocation.
    pub(crate) fn with_capacity(n: usize) -> Self {
        Self(Vec::with_capacity(n))
    }

    /// Append text.
    pub(crate) fn push_str(&mut self, s: &str) {
        self.0.extend_from_slice(s.as_bytes());
    }

    /// Append one ASCII character (a separator).
    pub(crate) fn push_ascii(&mut self, c: u8) {
        debug_assert!(c.is_ascii());
        self.0.push(c);
    }

    /// Append `n` in decimal.
    pub(crate) fn push_u32(&mut self, n: u32) {
        let mut buf = [0u8; 10];
        let mut i = buf.len();
        let mut n = n;
        loop {
            i -= 1;
            // n % 10 < 10: the cast cannot truncate.
            buf[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.0.extend_from_slice(buf.get(i..).unwrap_or_default());
    }

    /// Dotted decimal, built on the stack (at most 15 bytes) and appended at once.
    fn push_ipv4(&mut self, ip: Ipv4Addr) {
        let mut buf = [0u8; 15];
        let mut len = 0;
        let mut put = |c: u8| {
            if let Some(slot) = buf.get_mut(len) {
                *slot = c;
                len += 1;
            }
        };
        for (i, octet) in ip.octets().into_iter().enumerate() {
            if i > 0 {
                put(b'.');
            }
            if octet >= 100 {
                put(b'0' + octet / 100);
            }
            if octet >= 10 {
                put(b'0' + octet / 10 % 10);
            }
            put(b'0' + octet % 10);
        }
        self.0.extend_from_slice(buf.get(..len).unwrap_or_default());
    }

    /// Append an address as `Display` writes it.
    pub(crate) fn push_ip(&mut self, ip: &IpAddr) {
        match ip {
            IpAddr::V4(v4) => self.push_ipv4(*v4),
            IpAddr::V6(v6) => {
                let mut text = String::with_capacity(39);
                let _ = write!(text, "{v6}");
                self.push_str(&text);
            }
        }
    }

    /// Append a prefix as `Display` writes it: `<addr>/<len>`.
    pub(crate) fn push_net(&mut self, net: &IpNet) {
        self.push_ip(&net.addr());
        self.0.push(b'/');
        self.push_u32(u32::from(net.prefix_len()));
    }

    /// The text. Only `str`s and ASCII went in, so it is always UTF-8; the check is one pass.
    pub(crate) fn finish(self) -> String {
        String::from_utf8(self.0).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(f: impl FnOnce(&mut IdText)) -> String {
        let mut id = IdText::default();
        f(&mut id);
        id.finish()
    }

    #[test]
    fn same_text_as_display() {
        for s in
            ["0.0.0.0/0", "10.1.2.3/32", "255.255.255.255/8", "192.168.100.1/24", "2001:db8::/64"]
        {
            let net: IpNet = s.parse().unwrap();
            assert_eq!(text(|id| id.push_net(&net)), net.to_string());
        }
        for ip in ["2001:db8::1", "::", "fe80::1:2", "::ffff:10.0.0.1", "10.0.0.1"] {
            let ip: IpAddr = ip.parse().unwrap();
            assert_eq!(text(|id| id.push_ip(&ip)), ip.to_string());
        }
        for o in 0..=255u8 {
            let ip = IpAddr::V4(Ipv4Addr::new(o, 255 - o, o / 7, 100));
            assert_eq!(text(|id| id.push_ip(&ip)), ip.to_string());
        }
        for n in [0, 7, 10, 1024, 4_294_967_295] {
            assert_eq!(text(|id| id.push_u32(n)), n.to_string());
        }
        assert_eq!(
            text(|id| {
                id.push_str("eth0é");
                id.push_ascii(b'/')
            }),
            "eth0é/"
        );
    }
}
