// SPDX-License-Identifier: Apache-2.0
//! `ip=`: the kernel's nfsroot form, dracut's additions, and the bare autoconf form.
//!
//! ```text
//! ip=<client>:<server>:<gw>:<netmask>:<hostname>:<device>:<autoconf>:<dns0>:<dns1>:<ntp0>
//! ip=<client>:<server>:<gw>:<netmask>:<hostname>:<device>:<autoconf>:<mtu>:<mac>   (dracut)
//! ip=<device>:<autoconf>[:<mtu>[:<mac>]]                                         (dracut)
//! ip=<autoconf>                                                                  (bare)
//! ```
//!
//! Which form applies:
//! * one field that is not an IP address: bare autoconf;
//! * a first field that is a name (not an IP, not only digits and dots) followed by an
//!   autoconf list, or by exactly one more field: the device form;
//! * anything else: positional.
//!
//! After the positional autoconf field, an integer means the dracut `mtu:mac` tail; so does an
//! empty MTU followed by something MAC-shaped. Otherwise the tail is `dns0:dns1:ntp0`.
//! A MAC may be bracketed or written as its six colon-separated fields. Trailing empty fields
//! (beyond the second) are dropped first, so the 11-field vectors Talos tests with still parse.

use std::net::IpAddr;

use ipnet::IpNet;

use super::field::{
    check_link_ref, parse_digits, parse_hostname, parse_ip, parse_mac, parse_mtu, split_bracketed,
    Field, FieldError, Problem,
};
use super::network::LinkConfig;
use crate::resource::nethelpers::HardwareAddr;

/// The autoconf methods of one entry (a comma list such as `dhcp,dhcp6`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Autoconf {
    /// `dhcp`, `on`, `any`.
    pub dhcp4: bool,
    /// `dhcp6`.
    pub dhcp6: bool,
    /// `auto6`: the kernel does SLAAC by itself, so there is nothing for us to run.
    pub slaac: bool,
    /// `off`, `none`, `static`.
    pub off: bool,
}

const AUTOCONF_NAMES: &str = "dhcp, on, any, dhcp6, auto6, off, none, static";

impl Autoconf {
    fn parse(field: &Field<'_>) -> Result<Self, FieldError> {
        let mut a = Self::default();
        for method in field.split(',') {
            match method.text {
                "dhcp" | "on" | "any" => a.dhcp4 = true,
                "dhcp6" => a.dhcp6 = true,
                "auto6" => a.slaac = true,
                "off" | "none" | "static" => a.off = true,
                "" => return Err(FieldError::at(&method, Problem::Missing("autoconf method"))),
                _ => {
                    return Err(FieldError::invalid(
                        &method,
                        "autoconf method",
                        format_args!("expected one of {AUTOCONF_NAMES}"),
                    ))
                }
            }
        }
        if a.off && (a.dhcp4 || a.dhcp6 || a.slaac) {
            return Err(FieldError::invalid(
                field,
                "autoconf method",
                "off/none/static cannot be combined with another method",
            ));
        }
        Ok(a)
    }
}

/// What one `ip=` entry asks for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum IpEntry {
    /// A bare method (`ip=dhcp`, `ip=off`, `ip=dhcp6`): changes the defaults only.
    Defaults(Autoconf),
    /// A link to configure, with the global settings the entry carries.
    Link(Box<IpLink>),
}

/// A link entry and its global fields.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct IpLink {
    /// The per-link part.
    pub config: LinkConfig,
    /// The hostname field.
    pub hostname: Option<String>,
    /// `dns0`, `dns1`.
    pub dns: Vec<IpAddr>,
    /// `ntp0`.
    pub ntp: Vec<IpAddr>,
    /// Byte offset of the MTU field, for conflicts found against other entries.
    pub mtu_offset: usize,
    /// Byte offset of the MAC field, likewise.
    pub mac_offset: usize,
}

/// The nfsroot field count.
const POSITIONAL_FIELDS: usize = 10;

/// Parse one `ip=` value that starts at byte `offset` of the command line.
pub(crate) fn parse(value: &str, offset: usize) -> Result<IpEntry, FieldError> {
    let mut fields = split_bracketed(value, offset)?;
    if let [only] = fields.as_slice() {
        if !only.bracketed && !looks_like_ipv4(only.text) {
            return bare(only);
        }
    }
    // Two fields stay, so that `ip=eth0:` still reads as a device lacking its method.
    while fields.len() > 2 && fields.last().is_some_and(Field::is_empty) {
        fields.pop();
    }
    match fields.as_slice() {
        [dev, method, rest @ ..] if is_device_form(dev, method, rest) => {
            device_form(dev, method, rest)
        }
        _ => positional(&fields),
    }
}

fn bare(field: &Field<'_>) -> Result<IpEntry, FieldError> {
    if field.is_empty() {
        return Err(FieldError::at(field, Problem::Missing("value")));
    }
    let autoconf = Autoconf::parse(field)?;
    if autoconf.off && field.text == "static" {
        return Err(FieldError::invalid(field, "autoconf method", "static needs a client address"));
    }
    Ok(IpEntry::Defaults(autoconf))
}

fn is_device_form(dev: &Field<'_>, method: &Field<'_>, rest: &[Field<'_>]) -> bool {
    let names_a_link = !dev.is_empty() && !dev.bracketed && !looks_like_ipv4(dev.text);
    names_a_link && (rest.is_empty() || Autoconf::parse(method).is_ok())
}

/// Only digits and dots: an IPv4 address, maybe a mistyped one (`10.0.0.300`) that deserves
/// an "invalid client address" rather than being taken for a device or a method.
fn looks_like_ipv4(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit() || b == b'.')
}

/// `<device>:<autoconf>[:<mtu>[:<mac>]]`.
fn device_form(
    dev: &Field<'_>,
    method: &Field<'_>,
    rest: &[Field<'_>],
) -> Result<IpEntry, FieldError> {
    check_link_ref(dev, "device")?;
    if method.is_empty() {
        return Err(FieldError::at(method, Problem::Missing("autoconf method")));
    }
    let autoconf = Autoconf::parse(method)?;
    let mut link = IpLink {
        config: LinkConfig {
            link_name: dev.text.to_owned(),
            dhcp4: autoconf.dhcp4,
            dhcp6: autoconf.dhcp6,
            ..LinkConfig::default()
        },
        ..IpLink::default()
    };
    mtu_mac(rest, &mut link, autoconf.dhcp6 || autoconf.slaac)?;
    Ok(IpEntry::Link(Box::new(link)))
}

/// The nfsroot/dracut positional form.
fn positional(fields: &[Field<'_>]) -> Result<IpEntry, FieldError> {
    // Absent fields behave as empty ones, which never produce an error, so their offset is moot.
    let field = |i: usize| fields.get(i).copied().unwrap_or(Field::EMPTY);

    let client = parse_ip(&field(0), "client address")?;
    parse_ip(&field(1), "server address")?;
    let gateway = parse_ip(&field(2), "gateway")?;
    if let (Some(c), Some(g)) = (client, gateway) {
        if c.is_ipv4() != g.is_ipv4() {
            return Err(FieldError::invalid(
                &field(2),
                "gateway",
                "not in the client address's family",
            ));
        }
    }
    let prefix = parse_netmask(&field(3), client)?;
    let address = client
        .map(|ip| {
            let host_bits = if ip.is_ipv4() { 32 } else { 128 };
            IpNet::new(ip, prefix.unwrap_or(host_bits))
        })
        .transpose()
        .map_err(|e| FieldError::invalid(&field(3), "netmask", e))?;
    let hostname =
        Some(field(4)).filter(|f| !f.is_empty()).map(|f| parse_hostname(&f)).transpose()?;
    let dev = field(5);
    if !dev.is_empty() {
        check_link_ref(&dev, "device")?;
    }
    let method = field(6);
    let autoconf = if method.is_empty() { Autoconf::default() } else { Autoconf::parse(&method)? };

    let mut link = IpLink {
        config: LinkConfig {
            link_name: dev.text.to_owned(),
            address,
            gateway,
            dhcp4: autoconf.dhcp4,
            dhcp6: autoconf.dhcp6,
            ..LinkConfig::default()
        },
        hostname,
        ..IpLink::default()
    };
    let rest = fields.get(7..).unwrap_or_default();
    if is_mtu_tail(rest) {
        let ipv6 = client.is_some_and(|c| c.is_ipv6()) || autoconf.dhcp6 || autoconf.slaac;
        mtu_mac(rest, &mut link, ipv6)?;
    } else {
        dns_ntp(rest, &mut link)?;
    }
    Ok(IpEntry::Link(Box::new(link)))
}

/// A prefix length, or a contiguous dotted/IPv6 mask of the client's family.
fn parse_netmask(field: &Field<'_>, client: Option<IpAddr>) -> Result<Option<u8>, FieldError> {
    if field.is_empty() {
        return Ok(None);
    }
    let max = if client.is_some_and(|c| c.is_ipv4()) { 32 } else { 128 };
    if field.text.bytes().all(|b| b.is_ascii_digit()) {
        return match parse_digits::<u8>(field.text) {
            Some(bits) if bits <= max => Ok(Some(bits)),
            _ => Err(FieldError::invalid(
                field,
                "netmask",
                format_args!("prefix length above {max}"),
            )),
        };
    }
    let mask: IpAddr = field.text.parse().map_err(|_| {
        FieldError::invalid(
            field,
            "netmask",
            "expected a prefix length, a dotted mask or an IPv6 mask",
        )
    })?;
    if client.is_some_and(|c| c.is_ipv4() != mask.is_ipv4()) {
        return Err(FieldError::invalid(field, "netmask", "not in the client address's family"));
    }
    let (ones, zeros, width) = match mask {
        IpAddr::V4(m) => {
            let m = u32::from(m);
            (m.leading_ones(), m.trailing_zeros(), 32)
        }
        IpAddr::V6(m) => {
            let m = u128::from(m);
            (m.leading_ones(), m.trailing_zeros(), 128)
        }
    };
    if ones + zeros != width {
        return Err(FieldError::invalid(
            field,
            "netmask",
            "not contiguous (ones must all come before zeros)",
        ));
    }
    u8::try_from(ones).map(Some).map_err(|e| FieldError::invalid(field, "netmask", e))
}

/// Does the positional tail hold dracut's `mtu:mac` rather than `dns0:dns1:ntp0`?
fn is_mtu_tail(rest: &[Field<'_>]) -> bool {
    match rest {
        [first, ..] if !first.is_empty() => first.text.bytes().all(|b| b.is_ascii_digit()),
        [_, second, ..] => {
            // No IP address is MAC-shaped: a bare IPv6 address would have been split and a
            // bracketed one parses as an address.
            !second.is_empty()
                && second.text.parse::<IpAddr>().is_err()
                && ((second.text.len() == 2 && second.text.bytes().all(|b| b.is_ascii_hexdigit()))
                    || second.text.parse::<HardwareAddr>().is_ok())
        }
        _ => false,
    }
}

/// The smallest MTU IPv6 works with (RFC 8200 §5); the kernel turns IPv6 off below it.
const MIN_MTU_IPV6: u32 = 1280;

/// `[<mtu>[:<mac>]]`; `ipv6` when the entry wants IPv6 (an IPv6 address, DHCPv6 or SLAAC).
fn mtu_mac(rest: &[Field<'_>], link: &mut IpLink, ipv6: bool) -> Result<(), FieldError> {
    let Some((mtu, mac)) = rest.split_first() else {
        return Ok(());
    };
    link.config.mtu = parse_mtu(mtu)?;
    if ipv6 && link.config.mtu.is_some_and(|m| m < MIN_MTU_IPV6) {
        return Err(FieldError::invalid(
            mtu,
            "MTU",
            format_args!("below {MIN_MTU_IPV6}, the IPv6 minimum, and this entry wants IPv6"),
        ));
    }
    link.mtu_offset = mtu.offset;
    link.config.hardware_addr = parse_mac(mac)?;
    link.mac_offset = mac.first().map_or(0, |f| f.offset);
    Ok(())
}

/// `[<dns0>[:<dns1>[:<ntp0>]]]`.
fn dns_ntp(rest: &[Field<'_>], link: &mut IpLink) -> Result<(), FieldError> {
    if let Some(extra) = rest.get(3) {
        return Err(FieldError::at(extra, Problem::TooManyFields(POSITIONAL_FIELDS)));
    }
    for (i, f) in rest.iter().enumerate() {
        if i < 2 {
            link.dns.extend(parse_ip(f, "DNS server")?);
        } else {
            link.ntp.extend(parse_ip(f, "NTP server")?);
        }
    }
    Ok(())
}
