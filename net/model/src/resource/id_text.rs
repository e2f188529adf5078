// SPDX-License-Identifier: Apache-2.0
//! Appending addresses and numbers to an ID without the `fmt` machinery.
//!
//! Every address and route gets an ID, and a config with tens of thousands of routes builds
//! each one several times (config layer, merge, kernel dump). `Display` through `write!` was a
//! fifth of the time of applying such a config; these write the same text directly. IPv6 keeps
//! `Display`: its compressed form has rules (RFC 5952) not worth repeating here, and the
//! common large configs are IPv4.

use std::fmt::Write;
use std::net::{IpAddr, Ipv4Addr};

use ipnet::IpNet;

/// Append `n` in decimal.
pub(crate) fn push_u32(out: &mut String, n: u32) {
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
    // ASCII digits: always UTF-8.
    out.push_str(std::str::from_utf8(&buf[i..]).unwrap_or_default());
}

fn push_ipv4(out: &mut String, ip: Ipv4Addr) {
    for (i, octet) in ip.octets().into_iter().enumerate() {
        if i > 0 {
            out.push('.');
        }
        push_u32(out, u32::from(octet));
    }
}

/// Append an address as `Display` writes it.
pub(crate) fn push_ip(out: &mut String, ip: &IpAddr) {
    match ip {
        IpAddr::V4(v4) => push_ipv4(out, *v4),
        IpAddr::V6(v6) => {
            let _ = write!(out, "{v6}");
        }
    }
}

/// Append a prefix as `Display` writes it: `<addr>/<len>`.
pub(crate) fn push_net(out: &mut String, net: &IpNet) {
    push_ip(out, &net.addr());
    out.push('/');
    push_u32(out, u32::from(net.prefix_len()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_text_as_display() {
        for text in ["0.0.0.0/0", "10.1.2.3/32", "255.255.255.255/8", "192.168.100.1/24"] {
            let net: IpNet = text.parse().unwrap();
            let mut out = String::new();
            push_net(&mut out, &net);
            assert_eq!(out, net.to_string());
        }
        for ip in ["2001:db8::1", "::", "fe80::1:2", "::ffff:10.0.0.1"] {
            let ip: IpAddr = ip.parse().unwrap();
            let mut out = String::new();
            push_ip(&mut out, &ip);
            assert_eq!(out, ip.to_string());
        }
        for n in [0, 7, 10, 1024, 4_294_967_295] {
            let mut out = String::new();
            push_u32(&mut out, n);
            assert_eq!(out, n.to_string());
        }
    }
}
