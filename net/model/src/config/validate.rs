// SPDX-License-Identifier: Apache-2.0
//! Checks that need more than one value (run after a successful parse). Each failure names
//! a YAML path, which is then located in the text for its line.

use std::collections::{BTreeMap, BTreeSet};

use std::net::IpAddr;

use ipnet::IpNet;

use super::locate::YamlPath;
use super::machine::{MachineConfig, MAX_TENANT_ETCD_ENDPOINTS};
use super::network::{Bond, Device, DhcpOptions, Route};
use super::prune::Source;
use crate::resource::BondMode;
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

/// The problems found, in document order: at most one per device (the first), then the
/// checks across devices (only when every device passed), discovery and KubeSpan peers.
/// Each is a path and a message; `yaml` is the document's text, for the line of a second
/// place an error names. The first is what the all-or-nothing reading reports.
pub(crate) fn check(cfg: &MachineConfig, yaml: &Source<'_>) -> Vec<(YamlPath, String)> {
    if cfg.version != VERSION {
        return vec![(
            YamlPath::keys("version"),
            format!("unsupported version {:?} (expected {VERSION})", cfg.version),
        )];
    }
    let mut out = Vec::new();
    let devices = YamlPath::keys("machine.network.interfaces");
    for (i, device) in cfg.machine.network.interfaces.iter().enumerate() {
        out.extend(check_device(device, &devices.index(i)).err());
    }
    if out.is_empty() {
        out.extend(check_ports(&cfg.machine.network.interfaces, &devices, yaml).err());
    }
    out.extend(check_discovery(cfg).err());
    out.extend(check_tenant_networks(cfg).err());
    let peers = YamlPath::keys("machine.network.kubespan.peers");
    let mut keys = BTreeSet::new();
    for (i, peer) in cfg.machine.network.kubespan.peers.iter().enumerate() {
        if !keys.insert(peer.public_key.as_str()) {
            out.push((
                peers.index(i).key("publicKey"),
                format!("peer {} is listed twice", peer.public_key),
            ));
        }
    }
    out
}

/// `path (line N)`, or the bare path when it is not in the text.
fn at_line(path: &YamlPath, yaml: &Source<'_>) -> String {
    yaml.at_line(path)
}

/// Settings that parse but are deprecated or cannot do what they say, one line each. The
/// deprecated `cidr` gets one line for devices and one for VLANs, at the first use (each
/// line costs a pass over the text, so not one per use).
pub(crate) fn warnings(cfg: &MachineConfig, yaml: &Source<'_>, beside: Beside) -> Vec<String> {
    let mut out = kubespan_warnings(cfg, yaml, beside);
    let devices = YamlPath::keys("machine.network.interfaces");
    let mut on_devices = Vec::new();
    let mut on_vlans = Vec::new();
    for (i, device) in cfg.machine.network.interfaces.iter().enumerate() {
        let at = devices.index(i);
        if device.cidr.is_some() {
            on_devices.push(at.key("cidr"));
        }
        for (j, vlan) in device.vlans.iter().enumerate() {
            if vlan.cidr.is_some() {
                on_vlans.push(at.key("vlans").index(j).key("cidr"));
            }
        }
    }
    for uses in [on_devices, on_vlans] {
        let Some(first) = uses.first() else { continue };
        let more = match uses.len() - 1 {
            0 => String::new(),
            n => format!(" ({n} more like it)"),
        };
        out.push(format!("{}: deprecated; use addresses{more}", at_line(first, yaml)));
    }
    out
}

/// What typed documents in the same stream give the v1alpha1 document (Talos 1.14 writes the
/// discovery service and the cluster identity as documents), so that its warnings do not say
/// they are missing.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Beside {
    /// A `DiscoveryServiceConfig`.
    pub discovery: bool,
    /// A `DiscoveryIdentityConfig`.
    pub identity: bool,
}

/// KubeSpan settings that parse but cannot do what they say, one line each.
fn kubespan_warnings(cfg: &MachineConfig, yaml: &Source<'_>, beside: Beside) -> Vec<String> {
    let ks = &cfg.machine.network.kubespan;
    let at = |path: &'static str| at_line(&YamlPath::keys(path), yaml);
    let mut out = Vec::new();
    let discovery = beside.discovery
        || cfg
            .cluster
            .as_ref()
            .and_then(|c| c.discovery.as_ref())
            .is_some_and(|d| d.enabled && !d.registries.service.disabled);
    if ks.harvest_extra_endpoints && !discovery {
        out.push(format!(
            "{}: endpoints are shared through the discovery service, which this config does not \
             enable (cluster.discovery); no effect",
            at("machine.network.kubespan.harvestExtraEndpoints")
        ));
    }
    if ks.advertise_kubernetes_networks {
        out.push(format!(
            "{}: the pod networks come from the Kubernetes node object, which keelson does not \
             read; list them in peers[].addresses instead",
            at("machine.network.kubespan.advertiseKubernetesNetworks")
        ));
    }
    if !ks.filters.endpoints.is_empty() && !discovery {
        out.push(format!(
            "{}: filters the endpoints this node publishes through the discovery service, which \
             this config does not enable (cluster.discovery); no effect",
            at("machine.network.kubespan.filters.endpoints")
        ));
    }
    if ks.enabled && !beside.identity && cfg.cluster.as_ref().and_then(|c| c.id.as_ref()).is_none()
    {
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
        let creates = device.bond.is_some()
            || device.bridge.is_some()
            || device.wireguard.is_some()
            || device.dummy;
        let max = if creates { MAX_LINK_NAME_LEN } else { MAX_LINK_REF_LEN };
        if let Some(why) = link_name_problem(name, max) {
            return Err((at.key("interface"), format!("{name:?}: {why}")));
        }
    }
    if !device.addresses.is_empty() && device.cidr.is_some() {
        return Err((
            at.key("cidr"),
            "a device takes addresses or the deprecated cidr, not both".into(),
        ));
    }
    let ipv6 = wants_ipv6(&device.all_addresses(), device.dhcp, device.dhcp_options.as_ref());
    check_mtu(device.mtu, ipv6, at.key("mtu"))?;
    check_routes(&device.routes, at)?;
    if device.bond.is_some() && device.bridge.is_some() {
        return Err((at.key("bridge"), "a device is either a bond or a bridge, not both".into()));
    }
    let kinds = [
        ("bond", device.bond.is_some()),
        ("bridge", device.bridge.is_some()),
        ("wireguard", device.wireguard.is_some()),
        ("dummy", device.dummy),
    ];
    if let [(_, _), (second, _), ..] = kinds.iter().filter(|(_, set)| *set).collect::<Vec<_>>()[..]
    {
        return Err((
            at.key(second),
            "a device creates one kind of link: bond, bridge, wireguard or dummy".into(),
        ));
    }
    if let Some(bond) = &device.bond {
        if let Some(j) = bond.device_selectors.iter().position(|s| s.is_empty()) {
            return Err((
                at.key("bond").key("deviceSelectors").index(j),
                "deviceSelector needs at least one field".into(),
            ));
        }
        check_link_refs(&bond.interfaces, &at.key("bond").key("interfaces"))?;
        check_bond(bond, &at.key("bond"))?;
    }
    if let Some(bridge) = &device.bridge {
        check_link_refs(&bridge.interfaces, &at.key("bridge").key("interfaces"))?;
    }
    if let Some(port) = &device.bridge_port {
        if let Some(why) = link_name_problem(&port.master, MAX_LINK_REF_LEN) {
            return Err((at.key("bridgePort").key("master"), format!("{:?}: {why}", port.master)));
        }
    }
    if let Some(wg) = &device.wireguard {
        for (j, peer) in wg.peers.iter().enumerate() {
            let keepalive = peer.persistent_keepalive_interval.unwrap_or_default();
            if keepalive.subsec_nanos() != 0 || keepalive.as_secs() > u64::from(u16::MAX) {
                return Err((
                    at.key("wireguard").key("peers").index(j).key("persistentKeepaliveInterval"),
                    format!("WireGuard keeps alive in whole seconds up to {}s", u16::MAX),
                ));
            }
        }
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
        if !vlan.addresses.is_empty() && vlan.cidr.is_some() {
            return Err((
                at.key("cidr"),
                "a VLAN takes addresses or the deprecated cidr, not both".into(),
            ));
        }
        let ipv6 = wants_ipv6(&vlan.all_addresses(), vlan.dhcp, vlan.dhcp_options.as_ref());
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
        // Built only for an error: a valid route costs no allocation here.
        let at = || at.key("routes").index(k);
        if route.network.is_none() && route.gateway.is_none() {
            return Err((at(), "a route needs a network, a gateway or both".into()));
        }
        let dst = route.network.map(|n| family(n.addr()));
        let expected = dst.or_else(|| route.gateway.map(family));
        if let (Some(want), Some(gw)) = (expected, route.gateway) {
            if family(gw) != want {
                return Err((
                    at().key("gateway"),
                    format!("an IPv{want} route cannot go via the IPv{} gateway {gw}", family(gw)),
                ));
            }
        }
        if let (Some(want), Some(src)) = (expected, route.source) {
            if family(src) != want {
                return Err((
                    at().key("source"),
                    format!("an IPv{want} route cannot have the IPv{} source {src}", family(src)),
                ));
            }
        }
    }
    Ok(())
}

/// Modes that use the given bond option, after Talos's `checkBond`
/// (`pkg/machinery/config/types/v1alpha1/v1alpha1_validation.go`) and the kernel's bonding
/// documentation.
const ARP_MONITOR_OFF: [BondMode; 3] =
    [BondMode::LACP, BondMode::BALANCE_ALB, BondMode::BALANCE_TLB];
const HAS_PRIMARY: [BondMode; 3] =
    [BondMode::ACTIVE_BACKUP, BondMode::BALANCE_ALB, BondMode::BALANCE_TLB];
const TLB_MODES: [BondMode; 2] = [BondMode::BALANCE_ALB, BondMode::BALANCE_TLB];

/// Bond options that need another option or a mode. `lacpRate` and `arpValidate` count when
/// written at all (even with their default value), as in Talos.
fn check_bond(bond: &Bond, at: &YamlPath) -> Result<(), (YamlPath, String)> {
    let mode = bond.mode;
    let fail = |key: &'static str, why: String| Err((at.key(key), why));
    if bond.miimon == 0 {
        for (key, value) in [("updelay", bond.updelay), ("downdelay", bond.downdelay)] {
            if value != 0 {
                return fail(key, format!("{key} needs miimon: it delays MII link monitoring"));
            }
        }
    } else {
        for (key, value) in [("updelay", bond.updelay), ("downdelay", bond.downdelay)] {
            if value % bond.miimon != 0 {
                return fail(
                    key,
                    format!("{key} {value} is not a multiple of miimon {}", bond.miimon),
                );
            }
        }
    }
    if bond.lacp_rate.is_some() && mode != BondMode::LACP {
        return fail("lacpRate", format!("lacpRate is only used in 802.3ad mode, not {mode}"));
    }
    if bond.ad_actor_system.is_some() {
        return fail("adActorSystem", "not supported (Talos refuses it as well)".into());
    }
    if bond.arp_validate.is_some() && ARP_MONITOR_OFF.contains(&mode) {
        return fail("arpValidate", format!("arpValidate is not available in {mode} mode"));
    }
    if !bond.primary.is_empty() && !HAS_PRIMARY.contains(&mode) {
        return fail("primary", format!("primary is not available in {mode} mode"));
    }
    if bond.arp_interval > 0 && ARP_MONITOR_OFF.contains(&mode) {
        return fail("arpInterval", format!("arpInterval is not available in {mode} mode"));
    }
    if bond.packets_per_slave > 1 && mode != BondMode::BALANCE_RR {
        return fail(
            "packetsPerSlave",
            format!("packetsPerSlave is only used in balance-rr mode, not {mode}"),
        );
    }
    if bond.tlb_dynamic_lb > 0 && !TLB_MODES.contains(&mode) {
        return fail(
            "tlbDynamicLb",
            format!("tlbDynamicLb is only used in balance-tlb and balance-alb modes, not {mode}"),
        );
    }
    if bond.ad_actor_sys_prio > 0 && mode != BondMode::LACP {
        return fail(
            "adActorSysPrio",
            format!("adActorSysPrio is only used in 802.3ad mode, not {mode}"),
        );
    }
    if bond.ad_user_port_key > 0 && mode != BondMode::LACP {
        return fail(
            "adUserPortKey",
            format!("adUserPortKey is only used in 802.3ad mode, not {mode}"),
        );
    }
    Ok(())
}

/// Bond and bridge ports, by name as written: a link is a port of one bond or bridge only
/// (Talos refuses a name under two devices' `interfaces`; keelson also counts `bridgePort`),
/// and a port takes no addresses, DHCP or VIP of its own (its master does).
fn check_ports(
    devices: &[Device],
    at: &YamlPath,
    yaml: &Source<'_>,
) -> Result<(), (YamlPath, String)> {
    // member -> (its master, where it was listed)
    let mut masters: BTreeMap<&str, (&str, YamlPath)> = BTreeMap::new();
    // Ports named in a bond's or bridge's `interfaces` (Talos checks these for addressing).
    let mut listed: BTreeSet<&str> = BTreeSet::new();
    for (i, device) in devices.iter().enumerate() {
        let at = at.index(i);
        let mut ports: Vec<(&str, &str, YamlPath)> = Vec::new();
        if let Some(master) = device.interface.as_deref() {
            if let Some(bond) = &device.bond {
                let list = at.key("bond").key("interfaces");
                ports.extend(
                    bond.interfaces
                        .iter()
                        .enumerate()
                        .map(|(j, m)| (m.as_str(), master, list.index(j))),
                );
            }
            if let Some(bridge) = &device.bridge {
                let list = at.key("bridge").key("interfaces");
                ports.extend(
                    bridge
                        .interfaces
                        .iter()
                        .enumerate()
                        .map(|(j, m)| (m.as_str(), master, list.index(j))),
                );
            }
            listed.extend(ports.iter().map(|(member, _, _)| *member));
            if let Some(port) = &device.bridge_port {
                ports.push((master, port.master.as_str(), at.key("bridgePort").key("master")));
            }
        }
        for (member, master, path) in ports {
            match masters.get(member) {
                Some((other, first)) if *other != master => {
                    return Err((
                        path,
                        format!(
                            "{member:?} is already a port of {other:?} ({}); a link has one \
                             master",
                            at_line(first, yaml)
                        ),
                    ));
                }
                Some(_) => {}
                None => {
                    masters.insert(member, (master, path));
                }
            }
        }
    }
    for (i, device) in devices.iter().enumerate().filter(|(_, d)| !d.ignore) {
        // Only `interfaces` lists count here, as in Talos: a `bridgePort` device keeps its
        // addresses.
        let Some(name) = device.interface.as_deref().filter(|n| listed.contains(n)) else {
            continue;
        };
        let Some((master, _)) = masters.get(name) else { continue };
        let at = at.index(i);
        let own = [
            ("addresses", !device.addresses.is_empty()),
            ("cidr", device.cidr.is_some()),
            ("dhcp", device.dhcp),
            ("vip", device.vip.is_some()),
        ];
        if let Some((key, _)) = own.iter().find(|(_, set)| *set) {
            return Err((
                at.key(key),
                format!("a port of {master:?} takes no addresses, DHCP or VIP: configure them on {master:?}"),
            ));
        }
    }
    Ok(())
}

/// The agent needs its etcd, and its client certificate and key go together.
fn check_tenant_networks(cfg: &MachineConfig) -> Result<(), (YamlPath, String)> {
    let Some(t) = &cfg.machine.tenant_networks else { return Ok(()) };
    let n = t.etcd_endpoints.len();
    if !(1..=MAX_TENANT_ETCD_ENDPOINTS).contains(&n) {
        return Err((
            YamlPath::keys("machine.tenantNetworks.etcdEndpoints"),
            format!("1 to {MAX_TENANT_ETCD_ENDPOINTS} etcd endpoints expected, got {n}"),
        ));
    }
    match (&t.etcd_cert, &t.etcd_key) {
        (Some(_), None) => Err((
            YamlPath::keys("machine.tenantNetworks.etcdCert"),
            "etcdCert needs etcdKey".into(),
        )),
        (None, Some(_)) => {
            Err((YamlPath::keys("machine.tenantNetworks.etcdKey"), "etcdKey needs etcdCert".into()))
        }
        _ => Ok(()),
    }
}

/// The discovery service registry needs the cluster's identity (Talos's
/// `ClusterDiscoveryConfig.Validate`), and its endpoint is a bare origin.
fn check_discovery(cfg: &MachineConfig) -> Result<(), (YamlPath, String)> {
    let Some(cluster) = &cfg.cluster else { return Ok(()) };
    let Some(discovery) = cluster.discovery.as_ref().filter(|d| d.enabled) else {
        return Ok(());
    };
    let service = &discovery.registries.service;
    if service.disabled {
        return Ok(());
    }
    for (key, missing) in [("id", cluster.id.is_none()), ("secret", cluster.secret.is_none())] {
        if missing {
            return Err((
                YamlPath::keys("cluster.discovery.enabled"),
                format!("the discovery service needs cluster.{key}"),
            ));
        }
    }
    if let Some(endpoint) = &service.endpoint {
        let rest = endpoint.split_once("://").map_or(endpoint.as_str(), |(_, rest)| rest);
        let path = rest.find('/').and_then(|i| rest.get(i..)).unwrap_or_default();
        if !path.is_empty() && path != "/" {
            return Err((
                YamlPath::keys("cluster.discovery.registries.service.endpoint"),
                "the discovery service endpoint takes no path".into(),
            ));
        }
    }
    Ok(())
}
