// SPDX-License-Identifier: Apache-2.0
//! Checks that need more than one value (run after a successful parse). Each failure names
//! a YAML path, which is then located in the text for its line.

use std::collections::BTreeSet;

use std::net::IpAddr;

use ipnet::IpNet;

use super::locate::YamlPath;
use super::machine::MachineConfig;
use super::network::{Device, DhcpOptions, Route};
use crate::resource::{link_name_problem, MAX_LINK_NAME_LEN, MAX_LINK_REF_LEN};

/// The smallest MTU IPv4 works with (RFC 791: every host takes 68-octet datagrams; the
/// kernel's `ETH_MIN_MTU`).
const MIN_MTU: u32 = 68;
/// The largest MTU IP can use (`IP_MAX_MTU`); above it the kernel refuses with EINVAL.
const MAX_MTU: u32 = 65535;
/// The smallest MTU IPv6 works with (RFC 8200 §5); the kernel turns IPv6 off below it.
const MIN_MTU_IPV6: u32 = 1280;

/// The only document version there is.
pub(crate) const VERSION: &str = "v1alpha1";

/// The first problem found, in document order: its path and message.
pub(crate) fn check(cfg: &MachineConfig) -> Result<(), (YamlPath, String)> {
    if cfg.version != VERSION {
        return Err((
            YamlPath::keys("version"),
            format!("unsupported version {:?} (expected {VERSION})", cfg.version),
        ));
    }
    let devices = YamlPath::keys("machine.network.interfaces");
    for (i, device) in cfg.machine.network.interfaces.iter().enumerate() {
        check_device(device, &devices.index(i))?;
    }
    let peers = YamlPath::keys("machine.network.kubespan.peers");
    let mut keys = BTreeSet::new();
    for (i, peer) in cfg.machine.network.kubespan.peers.iter().enumerate() {
        if !keys.insert(peer.public_key.as_str()) {
            return Err((
                peers.index(i).key("publicKey"),
                format!("peer {} is listed twice", peer.public_key),
            ));
        }
    }
    Ok(())
}

/// KubeSpan settings that parse but cannot do what they say, one line each.
pub(crate) fn kubespan_warnings(cfg: &MachineConfig, yaml: &str) -> Vec<String> {
    let ks = &cfg.machine.network.kubespan;
    let at = |path: &'static str| match YamlPath::keys(path).locate(yaml) {
        Some(p) => format!("{path} (line {})", p.line),
        None => path.to_owned(),
    };
    let mut out = Vec::new();
    if ks.harvest_extra_endpoints {
        out.push(format!(
            "{}: needs a discovery service, which keelson does not have yet; ignored",
            at("machine.network.kubespan.harvestExtraEndpoints")
        ));
    }
    if ks.advertise_kubernetes_networks {
        out.push(format!(
            "{}: pod networks are advertised through discovery, which keelson does not have \
             yet; list them in peers[].addresses instead",
            at("machine.network.kubespan.advertiseKubernetesNetworks")
        ));
    }
    if !ks.filters.endpoints.is_empty() {
        out.push(format!(
            "{}: filters the addresses this node advertises, and keelson does not advertise any \
             yet (no discovery); no effect",
            at("machine.network.kubespan.filters.endpoints")
        ));
    }
    if ks.enabled && cfg.cluster.as_ref().and_then(|c| c.id.as_ref()).is_none() {
        out.push(format!(
            "{}: KubeSpan needs cluster.id for its address; it stays off until one is set",
            at("machine.network.kubespan.enabled")
        ));
    }
    out
}

fn check_device(device: &Device, at: &YamlPath) -> Result<(), (YamlPath, String)> {
    match (&device.interface, &device.device_selector) {
        (Some(_), Some(_)) => {
            return Err((
                at.key("deviceSelector"),
                "a device takes either interface or deviceSelector, not both".into(),
            ))
        }
        (None, None) => {
            return Err((at.clone(), "a device needs interface or deviceSelector".into()))
        }
        (Some(name), None) if name.is_empty() => {
            return Err((at.key("interface"), "empty interface name".into()))
        }
        (None, Some(sel)) if sel.is_empty() => {
            return Err((
                at.key("deviceSelector"),
                "deviceSelector needs at least one field".into(),
            ))
        }
        _ => {}
    }
    if let Some(name) = &device.interface {
        // A bond or bridge is created under this name; otherwise it may be an altname.
        let creates = device.bond.is_some() || device.bridge.is_some();
        let max = if creates { MAX_LINK_NAME_LEN } else { MAX_LINK_REF_LEN };
        if let Some(why) = link_name_problem(name, max) {
            return Err((at.key("interface"), format!("{name:?}: {why}")));
        }
    }
    let ipv6 = wants_ipv6(&device.addresses, device.dhcp, device.dhcp_options.as_ref());
    check_mtu(device.mtu, ipv6, at.key("mtu"))?;
    check_routes(&device.routes, at)?;
    if device.bond.is_some() && device.bridge.is_some() {
        return Err((at.key("bridge"), "a device is either a bond or a bridge, not both".into()));
    }
    if let Some(bond) = &device.bond {
        if let Some(j) = bond.device_selectors.iter().position(|s| s.is_empty()) {
            return Err((
                at.key("bond").key("deviceSelectors").index(j),
                "deviceSelector needs at least one field".into(),
            ));
        }
        check_link_refs(&bond.interfaces, &at.key("bond").key("interfaces"))?;
    }
    if let Some(bridge) = &device.bridge {
        check_link_refs(&bridge.interfaces, &at.key("bridge").key("interfaces"))?;
    }
    let mut seen = BTreeSet::new();
    for (j, vlan) in device.vlans.iter().enumerate() {
        let at = at.key("vlans").index(j);
        if !seen.insert(vlan.vlan_id) {
            return Err((
                at.key("vlanId"),
                format!("VLAN {} is defined twice on this device", vlan.vlan_id),
            ));
        }
        let ipv6 = wants_ipv6(&vlan.addresses, vlan.dhcp, vlan.dhcp_options.as_ref());
        check_mtu(vlan.mtu, ipv6, at.key("mtu"))?;
        check_routes(&vlan.routes, &at)?;
    }
    Ok(())
}

/// IPv6 is wanted on a link that has a static IPv6 address or runs DHCPv6.
fn wants_ipv6(addresses: &[IpNet], dhcp: bool, options: Option<&DhcpOptions>) -> bool {
    addresses.iter().any(|a| matches!(a, IpNet::V6(_)))
        || (dhcp && options.is_some_and(DhcpOptions::ipv6))
}

/// A link MTU the kernel can take (0 leaves the MTU alone).
fn check_mtu(mtu: u32, ipv6: bool, at: YamlPath) -> Result<(), (YamlPath, String)> {
    if mtu == 0 {
        return Ok(());
    }
    if !(MIN_MTU..=MAX_MTU).contains(&mtu) {
        return Err((at, format!("{mtu} is outside {MIN_MTU}..{MAX_MTU}")));
    }
    if ipv6 && mtu < MIN_MTU_IPV6 {
        return Err((
            at,
            format!(
                "{mtu} is below {MIN_MTU_IPV6}, the IPv6 minimum, and this link has an IPv6 \
                 address or DHCPv6"
            ),
        ));
    }
    Ok(())
}

/// Names of links to find (bond or bridge members).
fn check_link_refs(names: &[String], at: &YamlPath) -> Result<(), (YamlPath, String)> {
    for (j, name) in names.iter().enumerate() {
        if let Some(why) = link_name_problem(name, MAX_LINK_REF_LEN) {
            return Err((at.index(j), format!("{name:?}: {why}")));
        }
    }
    Ok(())
}

fn family(ip: IpAddr) -> u8 {
    if ip.is_ipv4() {
        4
    } else {
        6
    }
}

/// A route's gateway and source in the family of its destination (or of each other, for a
/// default route): the kernel refuses the rest.
fn check_routes(routes: &[Route], at: &YamlPath) -> Result<(), (YamlPath, String)> {
    for (k, route) in routes.iter().enumerate() {
        let at = at.key("routes").index(k);
        let dst = route.network.map(|n| family(n.addr()));
        let expected = dst.or_else(|| route.gateway.map(family));
        if let (Some(want), Some(gw)) = (expected, route.gateway) {
            if family(gw) != want {
                return Err((
                    at.key("gateway"),
                    format!("an IPv{want} route cannot go via the IPv{} gateway {gw}", family(gw)),
                ));
            }
        }
        if let (Some(want), Some(src)) = (expected, route.source) {
            if family(src) != want {
                return Err((
                    at.key("source"),
                    format!("an IPv{want} route cannot have the IPv{} source {src}", family(src)),
                ));
            }
        }
    }
    Ok(())
}
