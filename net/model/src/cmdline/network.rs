// SPDX-License-Identifier: Apache-2.0
//! What the kernel command line asks of the network, as parsed: [`CmdlineNetwork`], one
//! [`LinkConfig`] per link, and the [`CmdlineError`]s of rejected entries.

use std::net::IpAddr;

use ipnet::IpNet;
use serde::Serialize;

use crate::resource::nethelpers::HardwareAddr;
use crate::resource::LinkSpec;

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
    /// `talos.config=`. Not shown with the resource: a URL's query may hold a token.
    #[serde(skip)]
    pub config_url: Option<String>,
    /// `talos.config.inline=` (base64), not decoded here. Not shown: it may hold keys.
    #[serde(skip)]
    pub config_inline: Option<String>,
    /// The NIC the firmware booted from: pxelinux's and dracut's `BOOTIF=01-aa-bb-cc-dd-ee-ff`
    /// (hardware type 1, Ethernet), as `aa:bb:cc:dd:ee:ff`. A network boot names it; the node
    /// reports it so the operator that served the boot knows which machine answered.
    pub boot_mac: Option<String>,
    /// `keelson.image=`: the name of the image the node booted (the version keelson-operator
    /// served it as), reported with the boot MAC.
    pub image: Option<String>,
    /// `keelson.debug` present.
    pub debug: bool,
    /// Kernel modules from `keelson.modules=a,b` (repeatable), loaded at boot beside the
    /// image's fixed list; names checked, in order, without duplicates.
    pub modules: Vec<String>,
    /// False after `net.ifnames=0`: physical links keep their kernel names (as with
    /// systemd-udevd and Talos).
    pub predictable_names: bool,
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
