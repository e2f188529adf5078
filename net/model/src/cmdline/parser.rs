// SPDX-License-Identifier: Apache-2.0
//! The driver: routes each parameter to its grammar and records what it yields, or one
//! error for that entry alone.

use std::collections::BTreeMap;

use super::field::{check_link_ref, parse_hostname, Field, FieldError, Problem};
use super::ip::{self, IpEntry, IpLink};
use super::network::{CmdlineError, CmdlineNetwork};
use super::tokenize::{tokenize, Param};
use super::{bond, vlan};
use crate::resource::nethelpers::HardwareAddr;

/// The MTU and MAC the `ip=` entries already set for one device, with their offsets.
#[derive(Debug, Default)]
struct LinkSettings {
    mtu: Option<(u32, usize)>,
    mac: Option<(HardwareAddr, usize)>,
}

/// Parse state across parameters.
#[derive(Debug)]
pub(crate) struct Parser<'a> {
    cmdline: &'a str,
    net: CmdlineNetwork,
    talos_hostname: Option<String>,
    ip_hostname: Option<String>,
    /// Keyed by the raw device field ("" is the first non-loopback link).
    link_settings: BTreeMap<String, LinkSettings>,
}

impl<'a> Parser<'a> {
    /// Parse all of `cmdline`.
    pub(crate) fn run(cmdline: &'a str) -> CmdlineNetwork {
        let mut parser = Parser {
            cmdline,
            net: CmdlineNetwork {
                default_dhcp4: true,
                predictable_names: true,
                ..CmdlineNetwork::default()
            },
            talos_hostname: None,
            ip_hostname: None,
            link_settings: BTreeMap::new(),
        };
        let tokens = tokenize(cmdline);
        for param in &tokens.params {
            if let Err(e) = parser.param(param) {
                parser.net.errors.push(CmdlineError {
                    param: param.key.to_owned(),
                    entry: param.value.unwrap_or_default().to_owned(),
                    column: parser.column(e.offset),
                    message: e.problem.to_string(),
                });
            }
        }
        if let Some(offset) = tokens.unterminated_quote {
            let column = parser.column(offset);
            parser.net.warnings.push(format!(
                "column {column}: unterminated quote; the rest of the line was read as one parameter"
            ));
        }
        // `talos.hostname=` wins over any `ip=` hostname, wherever it appears.
        let from_ip = parser.ip_hostname.take();
        parser.net.hostname = parser.talos_hostname.take().or(from_ip);
        parser.net
    }

    /// The 1-based character column of byte `offset`.
    fn column(&self, offset: usize) -> usize {
        self.cmdline.get(..offset).map_or(0, |before| before.chars().count()) + 1
    }

    fn warn(&mut self, offset: usize, message: impl std::fmt::Display) {
        let column = self.column(offset);
        self.net.warnings.push(format!("column {column}: {message}"));
    }

    fn param(&mut self, p: &Param<'a>) -> Result<(), FieldError> {
        let value = || {
            p.value.map(|v| Field::new(v, p.value_offset)).ok_or(FieldError {
                offset: p.key_offset,
                problem: Problem::Missing("value (expected key=value)"),
            })
        };
        match p.key {
            "ip" => self.ip(&value()?),
            "bond" => {
                let v = value()?;
                let specs = bond::parse(v.text, v.offset, &self.net.link_specs)?;
                self.net.link_specs.extend(specs);
                Ok(())
            }
            "vlan" => {
                let v = value()?;
                let spec = vlan::parse(v.text, v.offset, &self.net.link_specs)?;
                self.net.link_specs.push(spec);
                Ok(())
            }
            "talos.hostname" => {
                let v = value()?;
                if self.talos_hostname.is_some() {
                    self.warn(p.key_offset, "talos.hostname repeated; the first one is used");
                    return Ok(());
                }
                self.talos_hostname = Some(parse_hostname(&v)?);
                Ok(())
            }
            "talos.network.interface.ignore" => {
                let v = value()?;
                check_link_ref(&v, "interface")?;
                if !self.net.ignore_interfaces.iter().any(|i| i == v.text) {
                    self.net.ignore_interfaces.push(v.text.to_owned());
                }
                Ok(())
            }
            "talos.config" => {
                let v = value()?;
                if v.is_empty() {
                    return Err(FieldError::at(&v, Problem::Missing("config URL")));
                }
                if self.net.config_url.is_some() {
                    self.warn(p.key_offset, "talos.config repeated; the first one is used");
                } else {
                    self.net.config_url = Some(v.text.to_owned());
                }
                Ok(())
            }
            "talos.config.inline" => {
                let v = value()?;
                if v.is_empty() {
                    return Err(FieldError::at(&v, Problem::Missing("inline config")));
                }
                if self.net.config_inline.is_some() {
                    self.warn(p.key_offset, "talos.config.inline repeated; the first one is used");
                } else {
                    self.net.config_inline = Some(v.text.to_owned());
                }
                Ok(())
            }
            // Platform selection is not a network matter; accepted so it draws no warning.
            "talos.platform" => Ok(()),
            "BOOTIF" => {
                let v = value()?;
                let mac = parse_bootif(v.text).ok_or_else(|| {
                    FieldError::invalid(
                        &v,
                        "BOOTIF",
                        "expected 01- and six hex pairs separated by '-' (01-aa-bb-cc-dd-ee-ff)",
                    )
                })?;
                if self.net.boot_mac.is_none() {
                    self.net.boot_mac = Some(mac);
                } else {
                    self.warn(p.key_offset, "BOOTIF repeated; the first one is used");
                }
                Ok(())
            }
            "keelson.image" => {
                let v = value()?;
                if !valid_image_name(v.text) {
                    return Err(FieldError::invalid(
                        &v,
                        "image name",
                        "expected 1 to 64 of A-Z a-z 0-9 . _ + -, not starting with '.'",
                    ));
                }
                if self.net.image.is_none() {
                    self.net.image = Some(v.text.to_owned());
                } else {
                    self.warn(p.key_offset, "keelson.image repeated; the first one is used");
                }
                Ok(())
            }
            "keelson.debug" => {
                self.net.debug = match p.value {
                    None | Some("1" | "true" | "yes" | "on") => true,
                    Some("0" | "false" | "no" | "off") => false,
                    Some(_) => {
                        return Err(FieldError::invalid(
                            &value()?,
                            "keelson.debug value",
                            "expected no value, 1/true/yes/on or 0/false/no/off",
                        ))
                    }
                };
                Ok(())
            }
            "keelson.modules" => {
                let v = value()?;
                let mut offset = v.offset;
                for name in v.text.split(',') {
                    let field = Field::new(name, offset);
                    offset += name.len() + 1;
                    if name.is_empty() {
                        continue;
                    }
                    if name.len() > 64
                        || !name
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
                    {
                        return Err(FieldError::invalid(
                            &field,
                            "module name",
                            "expected at most 64 letters, digits, '_' or '-'",
                        ));
                    }
                    if !self.net.modules.iter().any(|m| m == name) {
                        self.net.modules.push(name.to_owned());
                    }
                }
                Ok(())
            }
            // systemd-udevd's switch, which Talos honours too: "0" keeps kernel link names.
            "net.ifnames" => {
                self.net.predictable_names = p.value != Some("0");
                Ok(())
            }
            key if key.starts_with("talos.") || key.starts_with("keelson.") => {
                self.warn(p.key_offset, format_args!("unknown parameter {key:?} ignored"));
                Ok(())
            }
            // Everything else (console=, root=, ...) belongs to someone else.
            _ => Ok(()),
        }
    }

    fn ip(&mut self, v: &Field<'_>) -> Result<(), FieldError> {
        match ip::parse(v.text, v.offset)? {
            IpEntry::Defaults(autoconf) => {
                if autoconf.off {
                    self.net.default_dhcp4 = false;
                }
                if autoconf.dhcp6 {
                    self.net.default_dhcp6 = true;
                }
            }
            IpEntry::Link(link) => {
                self.record_link_settings(&link)?;
                let IpLink { config, hostname, dns, ntp, .. } = *link;
                self.net.link_configs.push(config);
                if self.ip_hostname.is_none() {
                    self.ip_hostname = hostname;
                }
                for ip in dns {
                    if !self.net.dns_servers.contains(&ip) {
                        self.net.dns_servers.push(ip);
                    }
                }
                for ip in ntp {
                    if !self.net.ntp_servers.contains(&ip) {
                        self.net.ntp_servers.push(ip);
                    }
                }
            }
        }
        Ok(())
    }

    /// Several `ip=` may name one link, but they may not disagree on its MTU or MAC: the
    /// LinkSpec they share can hold only one of each.
    fn record_link_settings(&mut self, link: &IpLink) -> Result<(), FieldError> {
        let name = &link.config.link_name;
        let known = self.link_settings.get(name);
        if let (Some(mtu), Some(&(before, at))) =
            (link.config.mtu, known.and_then(|k| k.mtu.as_ref()))
        {
            if mtu != before {
                return Err(self.contradiction(link.mtu_offset, "MTU", mtu, before, at, name));
            }
        }
        if let (Some(mac), Some((before, at))) =
            (&link.config.hardware_addr, known.and_then(|k| k.mac.as_ref()))
        {
            if mac != before {
                return Err(self.contradiction(link.mac_offset, "MAC", mac, before, *at, name));
            }
        }
        let entry = self.link_settings.entry(name.clone()).or_default();
        if entry.mtu.is_none() {
            entry.mtu = link.config.mtu.map(|m| (m, link.mtu_offset));
        }
        if entry.mac.is_none() {
            entry.mac = link.config.hardware_addr.clone().map(|m| (m, link.mac_offset));
        }
        Ok(())
    }

    fn contradiction(
        &self,
        offset: usize,
        what: &str,
        now: impl std::fmt::Display,
        before: impl std::fmt::Display,
        before_offset: usize,
        link: &str,
    ) -> FieldError {
        let link = if link.is_empty() { "the first non-loopback link" } else { link };
        FieldError {
            offset,
            problem: Problem::Conflict(format!(
                "{what} {now} contradicts {what} {before} given for {link} at column {}",
                self.column(before_offset)
            )),
        }
    }
}

/// pxelinux's `BOOTIF=` (its `IPAPPEND 2`, also read by dracut): the ARP hardware type `01`
/// (Ethernet) and the MAC, all as dash-separated hex pairs. Gives `aa:bb:cc:dd:ee:ff`.
fn parse_bootif(text: &str) -> Option<String> {
    let rest = text.strip_prefix("01-")?;
    let pairs: Vec<&str> = rest.split('-').collect();
    if pairs.len() != 6
        || !pairs.iter().all(|p| p.len() == 2 && p.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return None;
    }
    Some(pairs.join(":").to_ascii_lowercase())
}

/// The image names keelson-operator gives versions (`image add`).
fn valid_image_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b))
}
