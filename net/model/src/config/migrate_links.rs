// SPDX-License-Identifier: Apache-2.0
//! `keelson config migrate` for `machine.network.interfaces`: each device as link, bond,
//! bridge, VLAN, DHCP and VIP documents.
//!
//! A `deviceSelector` becomes a `LinkAliasConfig` whose selector says the same, and the
//! documents name the link by that alias. An alias picks exactly one link, so a selector
//! that matched several links configures none after migration (the output's comment says
//! so). Devices marked `ignore: true` have no document: once link documents exist the
//! defaults leave every unmentioned link alone anyway.

use super::documents::{
    AliasSelector, BondConfig, BridgeConfig, BridgeStpConfig, BridgeVlanConfig, CommonLink,
    Dhcp4Config, Dhcp6Config, DhcpConfig, Document, DummyLinkConfig, IdentifierKind,
    Layer2VipConfig, LinkAliasConfig, LinkConfig, VlanConfig, WireguardConfig, WireguardPeerConfig,
};
use super::migrate::MigrateError;
use super::network::{
    Bond, Device, DeviceSelector, DeviceWireguard, DhcpOptions, NetworkConfig, Vip,
};
use super::specs::bridge_master;
use crate::resource::{vlan_link_name, PrimaryReselect};

/// The link documents of every device.
pub(crate) fn devices(network: &NetworkConfig) -> Result<Vec<Document>, MigrateError> {
    let mut out = Migration::default();
    for (i, device) in network.interfaces.iter().enumerate() {
        if device.ignore {
            continue;
        }
        out.device(i, device)?;
    }
    out.bridge_ports()?;
    Ok(out.docs)
}

#[derive(Default)]
struct Migration {
    docs: Vec<Document>,
    aliases: usize,
    /// `bridgePort`s: (device index, link, bridge), added to the bridge's `links` at the end.
    ports: Vec<(usize, String, String)>,
}

impl Migration {
    /// A name for the link `selector` picks: an alias document, named `selected-N`.
    fn alias(&mut self, selector: &DeviceSelector) -> String {
        self.aliases += 1;
        let name = format!("selected-{}", self.aliases);
        self.docs.push(Document::LinkAlias(LinkAliasConfig {
            api_version: Default::default(),
            kind: Default::default(),
            name: name.clone(),
            selector: AliasSelector { expr: selector_expr(selector) },
        }));
        name
    }

    fn device(&mut self, i: usize, device: &Device) -> Result<(), MigrateError> {
        let name = match (&device.interface, &device.device_selector) {
            (Some(name), _) => name.clone(),
            (None, Some(selector)) => self.alias(selector),
            (None, None) => {
                return Err(MigrateError::NoEquivalent {
                    path: format!("machine.network.interfaces[{i}]"),
                    why: "a device with neither interface nor deviceSelector".into(),
                })
            }
        };
        let common = CommonLink::from_legacy(device.mtu, &device.all_addresses(), &device.routes);
        if let Some(port) = &device.bridge_port {
            self.ports.push((i, name.clone(), port.master.clone()));
        }
        if let Some(wg) = &device.wireguard {
            self.docs.push(Document::Wireguard(wireguard_document(&name, wg).with_common(common)));
        } else if device.dummy {
            self.docs.push(Document::DummyLink(
                DummyLinkConfig {
                    api_version: Default::default(),
                    kind: Default::default(),
                    name: name.clone(),
                    hardware_addr: None,
                    up: None,
                    mtu: 0,
                    addresses: Vec::new(),
                    routes: Vec::new(),
                    multicast: None,
                }
                .with_common(common),
            ));
        } else if let Some(bond) = &device.bond {
            let links = self.bond_links(bond);
            // BondConfig names its primary among `links`: one picked by a selector has an
            // alias there, not the name v1alpha1 gives.
            if !bond.primary.is_empty() && !links.contains(&bond.primary) {
                return Err(MigrateError::NoEquivalent {
                    path: format!("machine.network.interfaces[{i}].bond.primary"),
                    why: "the primary is not one of the bond's interfaces by name".into(),
                });
            }
            self.docs.push(Document::Bond(bond_document(&name, bond, links).with_common(common)));
        } else if let Some(bridge) = &device.bridge {
            let master = bridge_master(bridge);
            self.docs.push(Document::Bridge(
                BridgeConfig {
                    name: name.clone(),
                    links: bridge.interfaces.clone(),
                    stp: BridgeStpConfig { enabled: Some(master.stp.enabled) },
                    vlan: BridgeVlanConfig {
                        filtering: master.vlan.filtering_enabled.then_some(true),
                    },
                    ..BridgeConfig::default()
                }
                .with_common(common),
            ));
        } else {
            self.docs.push(Document::Link(
                LinkConfig {
                    api_version: Default::default(),
                    kind: Default::default(),
                    name: name.clone(),
                    up: None,
                    mtu: 0,
                    addresses: Vec::new(),
                    routes: Vec::new(),
                    multicast: None,
                }
                .with_common(common),
            ));
        }
        self.dhcp(&name, device.dhcp, device.dhcp_options.as_ref());
        self.vip(&name, device.vip.as_ref());
        for vlan in &device.vlans {
            // VLAN links are named after the interface as written (docs/talos.md: Merge).
            let vlan_name = vlan_link_name(&name, vlan.vlan_id);
            self.docs.push(Document::Vlan(
                VlanConfig {
                    api_version: Default::default(),
                    kind: Default::default(),
                    name: vlan_name.clone(),
                    vlan_id: vlan.vlan_id,
                    vlan_mode: None,
                    parent: name.clone(),
                    up: None,
                    mtu: 0,
                    addresses: Vec::new(),
                    routes: Vec::new(),
                    multicast: None,
                }
                .with_common(CommonLink::from_legacy(
                    vlan.mtu,
                    &vlan.addresses,
                    &vlan.routes,
                )),
            ));
            self.dhcp(&vlan_name, vlan.dhcp, vlan.dhcp_options.as_ref());
            self.vip(&vlan_name, vlan.vip.as_ref());
        }
        Ok(())
    }

    /// Each `bridgePort` joins the `links` of the bridge document it names.
    fn bridge_ports(&mut self) -> Result<(), MigrateError> {
        for (i, port, master) in std::mem::take(&mut self.ports) {
            let bridge = self.docs.iter_mut().find_map(|d| match d {
                Document::Bridge(b) if b.name == master => Some(b),
                _ => None,
            });
            match bridge {
                Some(b) if !b.links.contains(&port) => b.links.push(port),
                Some(_) => {}
                None => {
                    return Err(MigrateError::NoEquivalent {
                        path: format!("machine.network.interfaces[{i}].bridgePort.master"),
                        why: "the bridge it names is not a device of this configuration".into(),
                    })
                }
            }
        }
        Ok(())
    }

    fn bond_links(&mut self, bond: &Bond) -> Vec<String> {
        let mut links = bond.interfaces.clone();
        for selector in &bond.device_selectors {
            let alias = self.alias(selector);
            links.push(alias);
        }
        links
    }

    /// v1alpha1 DHCP sends no DHCPv4 client identifier unless told; the documents default
    /// to the MAC, so `none` is written out.
    fn dhcp(&mut self, link: &str, enabled: bool, options: Option<&DhcpOptions>) {
        if !enabled {
            return;
        }
        let default = DhcpOptions::default();
        let options = options.unwrap_or(&default);
        let base = DhcpConfig {
            name: link.to_owned(),
            route_metric: options.route_metric,
            client_identifier: Some(IdentifierKind::None),
            ..DhcpConfig::default()
        };
        if options.ipv4() {
            self.docs.push(Document::Dhcp4(Dhcp4Config(base.clone())));
        }
        if options.ipv6() {
            let v6 = match &options.duidv6 {
                Some(hex) => DhcpConfig {
                    client_identifier: Some(IdentifierKind::Duid),
                    duid_raw: Some(hex.clone()),
                    ..base
                },
                None => base,
            };
            self.docs.push(Document::Dhcp6(Dhcp6Config(v6)));
        }
    }

    fn vip(&mut self, link: &str, vip: Option<&Vip>) {
        if let Some(vip) = vip {
            self.docs.push(Document::Layer2Vip(Layer2VipConfig {
                api_version: Default::default(),
                kind: Default::default(),
                name: vip.ip,
                link: link.to_owned(),
            }));
        }
    }
}

/// A device's WireGuard link as a document.
fn wireguard_document(name: &str, wg: &DeviceWireguard) -> WireguardConfig {
    WireguardConfig {
        api_version: Default::default(),
        kind: Default::default(),
        name: name.to_owned(),
        private_key: Some(wg.private_key),
        listen_port: (wg.listen_port != 0).then_some(wg.listen_port),
        firewall_mark: (wg.firewall_mark != 0).then_some(wg.firewall_mark),
        peers: wg
            .peers
            .iter()
            .map(|p| WireguardPeerConfig {
                public_key: p.public_key.clone(),
                preshared_key: None,
                endpoint: p.endpoint,
                persistent_keepalive_interval: p.persistent_keepalive_interval,
                allowed_ips: p.allowed_ips.clone(),
            })
            .collect(),
        up: None,
        mtu: 0,
        addresses: Vec::new(),
        routes: Vec::new(),
        multicast: None,
    }
}

/// A CEL expression that picks what the selector picks.
fn selector_expr(s: &DeviceSelector) -> String {
    let quote = |v: &str| format!("{:?}", v);
    let mut terms = Vec::new();
    if let Some(mac) = &s.hardware_addr {
        terms.push(format!("glob({}, mac(link.hardware_addr))", quote(&mac.to_ascii_lowercase())));
    }
    if let Some(mac) = &s.permanent_addr {
        terms.push(format!("glob({}, mac(link.permanent_addr))", quote(&mac.to_ascii_lowercase())));
    }
    if let Some(driver) = &s.driver {
        terms.push(format!("link.driver == {}", quote(driver)));
    }
    if let Some(path) = &s.bus_path {
        terms.push(format!("glob({}, link.bus_path)", quote(path)));
    }
    if let Some(physical) = s.physical {
        terms.push(if physical { "link.physical".into() } else { "!link.physical".into() });
    }
    if terms.is_empty() {
        "false".into()
    } else {
        terms.join(" && ")
    }
}

/// The bond's settings as a document; every v1alpha1 value is written out, so the kernel
/// defaults both forms fill in are the same.
fn bond_document(name: &str, bond: &Bond, links: Vec<String>) -> BondConfig {
    let set = |v: u32| (v != 0).then_some(v);
    BondConfig {
        name: name.to_owned(),
        links,
        bond_mode: Some(bond.mode),
        miimon: set(bond.miimon),
        updelay: set(bond.updelay),
        downdelay: set(bond.downdelay),
        use_carrier: bond.use_carrier,
        xmit_hash_policy: Some(bond.xmit_hash_policy),
        arp_interval: set(bond.arp_interval),
        arp_ip_targets: bond.arp_ip_target.iter().map(|ip| (*ip).into()).collect(),
        arp_validate: bond.arp_validate,
        arp_all_targets: Some(bond.arp_all_targets),
        lacp_rate: bond.lacp_rate,
        fail_over_mac: Some(bond.fail_over_mac),
        ad_select: Some(bond.ad_select),
        ad_actor_sys_prio: (bond.ad_actor_sys_prio != 0).then_some(bond.ad_actor_sys_prio),
        ad_user_port_key: (bond.ad_user_port_key != 0).then_some(bond.ad_user_port_key),
        primary: (!bond.primary.is_empty()).then(|| bond.primary.clone()),
        // Only with a primary, or when not the default: alone it has no effect (Talos warns).
        primary_reselect: (!bond.primary.is_empty()
            || bond.primary_reselect != PrimaryReselect::default())
        .then_some(bond.primary_reselect),
        resend_igmp: set(bond.resend_igmp),
        min_links: set(bond.min_links),
        lp_interval: set(bond.lp_interval),
        packets_per_slave: set(bond.packets_per_slave),
        num_peer_notif: (bond.num_peer_notif != 0).then_some(bond.num_peer_notif),
        tlb_dynamic_lb: (bond.tlb_dynamic_lb != 0).then_some(bond.tlb_dynamic_lb),
        all_slaves_active: (bond.all_slaves_active != 0).then_some(bond.all_slaves_active),
        peer_notif_delay: set(bond.peer_notify_delay),
        ..BondConfig::default()
    }
}
