// SPDX-License-Identifier: Apache-2.0
//! The kernel command line: what it asks of the network (docs/talos.md: Kernel command line), and
//! the layer-`cmdline` specs that follow from it.
//!
//! [`parse`] never fails. Every rejected entry becomes one [`CmdlineError`] with the column of the
//! offending field, and only that entry is skipped; Talos instead drops all cmdline networking on
//! the first bad entry (docs/talos.md: Kernel command line), which silently turns a typo into DHCP.
//! [`to_specs`] then turns the result into specs, resolving link names through a
//! [`LinkView`](crate::resource::LinkView).
//!
//! Parameters understood (anything else outside `talos.*`/`keelson.*` is ignored silently):
//!
//! | parameter | grammar |
//! |---|---|
//! | `ip=` (repeatable) | kernel nfsroot and dracut forms, see the `ip` module |
//! | `bond=` (repeatable) | `<name>[:<slaves>[:<options>[:<mtu>]]]`, see the `bond` module |
//! | `vlan=` (repeatable) | `<name>:<link>`, see the `vlan` module |
//! | `talos.hostname=` | FQDN; the first valid one wins over any `ip=` hostname |
//! | `talos.network.interface.ignore=` (repeatable) | a link name |
//! | `talos.config=` | config URL (first one) |
//! | `talos.platform=` | accepted and ignored here |
//! | `keelson.debug` | flag (`=0`/`=1` style values also accepted) |
//!
//! Tokenizing follows the kernel (quotes, `--`), see the `tokenize` module.
//!
//! keelson choices, where Talos or the kernel left room:
//! * Bare `ip=off`/`ip=none` sets [`CmdlineNetwork::default_dhcp4`] to false: no default DHCP
//!   on unconfigured links (Talos fails the whole parse). Bare `ip=dhcp`/`on`/`any` is a
//!   no-op and does not undo an `ip=off`; bare `ip=dhcp6` sets
//!   [`CmdlineNetwork::default_dhcp6`]; bare `ip=auto6` is accepted and does nothing (the
//!   kernel does SLAAC); bare `ip=static` is an error (nothing to configure).
//! * `ip=<dev>:off`, `ip=<dev>:auto6` and autoconf lists (`dhcp,dhcp6`) are accepted.
//! * Several `bond=` and `vlan=` entries are allowed (Talos uses only the first of each).
//! * Several `ip=` entries may name one link; they share its LinkSpec and must agree on MTU
//!   and MAC. Routes get metrics 1024, 1025, ... by entry position.
//! * Validation is stricter than Talos: the server field must be an IP, gateway and netmask
//!   must match the client's family, masks must be contiguous, MTUs lie in 68..=65535,
//!   MACs are 6-octet unicast, hostnames contain no blanks, and bond option values must be
//!   known names or integers in range. Duplicate `talos.hostname=`/`talos.config=` give a
//!   warning and the first stays.
//! * A link may be a slave of one bond only, and a `bond=`/`vlan=` may not redefine a link an
//!   earlier one created; the later entry is the one rejected.
//! * Unknown `talos.*`/`keelson.*` keys and an unterminated quote are warnings, not errors.

mod bond;
mod field;
mod ip;
mod parser;
mod specs;
mod tokenize;
mod vlan;

#[cfg(test)]
mod tests;

use std::net::IpAddr;

use ipnet::IpNet;
use serde::Serialize;

use crate::resource::nethelpers::HardwareAddr;
use crate::resource::LinkSpec;

pub use specs::to_specs;

/// What the kernel command line asks of the network, plus every problem found in it.
#[derive(Clone, PartialEq, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CmdlineNetwork {
    /// One entry per accepted `ip=` (in order; the index sets the route metric 1024+idx).
    pub link_configs: Vec<LinkConfig>,
    /// The FQDN from `talos.hostname=`, else the first `ip=` hostname field (validated).
    pub hostname: Option<String>,
    /// DNS servers from `ip=` fields 7 and 8, in order, without duplicates.
    pub dns_servers: Vec<IpAddr>,
    /// NTP servers from `ip=` field 9, in order, without duplicates.
    pub ntp_servers: Vec<IpAddr>,
    /// `talos.network.interface.ignore=` values (raw names; resolve through a `LinkView`).
    pub ignore_interfaces: Vec<String>,
    /// Bond masters (defaults filled), bond slaves and VLANs from `bond=`/`vlan=` (layer
    /// cmdline, names and parents as written).
    pub link_specs: Vec<LinkSpec>,
    /// `talos.config=`.
    pub config_url: Option<String>,
    /// `keelson.debug` present.
    pub debug: bool,
    /// False after a bare `ip=off`/`ip=none`: no default DHCP on unconfigured links.
    pub default_dhcp4: bool,
    /// True after a bare `ip=dhcp6` (or a bare list holding it): DHCPv6 on every physical
    /// link that default DHCP covers.
    pub default_dhcp6: bool,
    /// Rejected entries; each one was skipped and everything else still applies.
    pub errors: Vec<CmdlineError>,
    /// Unknown `talos.*`/`keelson.*` keys and other non-fatal notes.
    pub warnings: Vec<String>,
}

/// One `ip=` entry.
#[derive(Clone, PartialEq, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LinkConfig {
    /// The device field as written (resolved by [`to_specs`]); empty means "the first
    /// non-loopback link by name".
    pub link_name: String,
    /// Client address with its prefix length.
    pub address: Option<IpNet>,
    /// Default gateway.
    pub gateway: Option<IpAddr>,
    /// Run DHCPv4 on the link.
    pub dhcp4: bool,
    /// Run DHCPv6 on the link.
    pub dhcp6: bool,
    /// MTU (dracut's `:<mtu>:<macaddr>` tail).
    pub mtu: Option<u32>,
    /// MAC to set (dracut's tail).
    pub hardware_addr: Option<HardwareAddr>,
}

/// A rejected command line entry: which parameter, the entry, the 1-based column in the whole
/// command line where the problem is, and what is wrong.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, thiserror::Error)]
#[error("{param}={entry}: column {column}: {message}")]
pub struct CmdlineError {
    /// Parameter name (`ip`, `bond`, `vlan`, `talos.hostname`...).
    pub param: String,
    /// The entry's value as written.
    pub entry: String,
    /// 1-based column in the whole command line.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

/// Parse a whole kernel command line. Never fails: problems land in
/// [`CmdlineNetwork::errors`] (skipped entries) and [`CmdlineNetwork::warnings`].
pub fn parse(cmdline: &str) -> CmdlineNetwork {
    parser::Parser::run(cmdline)
}
