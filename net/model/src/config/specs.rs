// SPDX-License-Identifier: Apache-2.0
//! Machine configuration → layer-`configuration` specs (docs/talos.md: Merge, legacy v1alpha1
//! rows).

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnet::IpNet;

use crate::resource::{
    vlan_link_name, AddressSpec, BondMasterSpec, BondSlave, BridgeMasterSpec, BridgeSlave,
    BridgeVlanSpec, ClientIdentifier, ConfigLayer, Dhcp6OperatorSpec, Family, HostnameSpec,
    LayerSpecs, LinkSpec, LinkType, LinkView, Operator, OperatorSpec, ResolverSpec, RouteSpec,
    RouteType, RoutingRuleSpec, RoutingTable, StpSpec, TimeServerSpec, VipOperatorSpec,
    VlanProtocol, VlanSpec, WireguardPeer, WireguardSpec, DEFAULT_ROUTE_METRIC,
};

use super::machine::MachineConfig;
use super::network::{Bond, Bridge, Device, DeviceWireguard, DhcpOptions, Route, Vip};
use super::select::Target;

const LAYER: ConfigLayer = ConfigLayer::Configuration;

/// The specs the machine configuration asks for, at layer `configuration`.
///
/// `links` resolves names, aliases and `deviceSelector`s. A selector configures every link
/// it matches; a device whose selector matches nothing yet, or a bond whose
/// `deviceSelectors` match nothing yet, produces nothing (the links may appear later, and
/// the caller re-runs this), as in Talos's `network/device_config.go`.
///
/// Entries for the same link merge as Talos's `network/link_config.go` does: the link spec is
/// made once and each entry sets what it gives (a non-zero MTU, bond, bridge, WireGuard or
/// dummy settings); bond and bridge membership is added on top. Addresses, routes and
/// operators keep one spec per natural ID (the later wins).
pub fn to_specs(cfg: &MachineConfig, links: &LinkView) -> LayerSpecs {
    let mut out = Specs::default();
    let network = &cfg.machine.network;
    for device in network.interfaces.iter().filter(|d| !d.ignore) {
        for target in device.targets(links) {
            out.device(device, &target, links);
        }
    }
    if let Some(hostname) = &network.hostname {
        // Validated while parsing; a failure here is impossible but must not panic PID 1.
        match HostnameSpec::parse_fqdn(hostname, LAYER) {
            Ok(spec) => out.0.hostnames = vec![spec],
            Err(err) => log::warn!("machine.network.hostname: {err}"),
        }
    }
    if !network.nameservers.is_empty() || network.search_domains.is_some() {
        out.0.resolvers = vec![ResolverSpec {
            dns_servers: network.nameservers.clone(),
            search_domains: network.search_domains.clone().unwrap_or_default(),
            search_domains_overridden: network.search_domains.is_some(),
            layer: LAYER,
        }];
    }
    let time = &cfg.machine.time;
    if !time.servers.is_empty() {
        // v1alpha1 has no NTS switch (Talos's `UseNTS()` is false for it, docs/talos.md:
        // Defaults); a `TimeSyncConfig` document's `ntp.useNTS` sets it.
        out.0.time_servers = vec![TimeServerSpec {
            time_servers: time.servers.clone(),
            use_nts: time.use_nts,
            layer: LAYER,
        }];
    }
    super::documents::add_specs(&cfg.documents, &mut out, links);
    out.0
}

/// Collects specs, keeping one per natural ID (the last one given, at the first one's place).
/// The per-kind ID indexes keep this linear: configs with thousands of routes are normal.
#[derive(Default)]
pub(crate) struct Specs(pub(crate) LayerSpecs, Indexes);

#[derive(Default)]
struct Indexes {
    links: BTreeMap<String, usize>,
    operators: BTreeMap<String, usize>,
    addresses: BTreeMap<String, usize>,
    routes: BTreeMap<String, usize>,
}

fn upsert<T>(list: &mut Vec<T>, index: &mut BTreeMap<String, usize>, item: T, key: String) {
    // One search of the index, not a lookup and then an insert.
    match index.entry(key) {
        Entry::Occupied(at) => match list.get_mut(*at.get()) {
            Some(slot) => *slot = item,
            None => {
                *at.into_mut() = list.len();
                list.push(item);
            }
        },
        Entry::Vacant(at) => {
            at.insert(list.len());
            list.push(item);
        }
    }
}

impl Specs {
    pub(crate) fn link(&mut self, spec: LinkSpec) {
        let key = spec.id();
        upsert(&mut self.0.links, &mut self.1.links, spec, key);
    }

    /// The link spec named `name`, made `{name, up}` when there is none yet: legacy entries
    /// for one link add to the same spec.
    fn link_entry(&mut self, name: &str) -> &mut LinkSpec {
        let index = match self.1.links.get(name) {
            Some(&i) if i < self.0.links.len() => i,
            _ => {
                self.1.links.insert(name.to_owned(), self.0.links.len());
                self.0.links.push(LinkSpec::up(name, LAYER));
                self.0.links.len() - 1
            }
        };
        // In bounds: checked or just pushed.
        &mut self.0.links[index]
    }

    /// Make `member` a port of `master`: of a bond at `bond_index`, or of a bridge (`None`).
    /// A link has one master; a later membership replaces an earlier one with a warning
    /// (validation refuses the cases it can see without the links: selectors are not).
    fn enslave(&mut self, member: &str, master: &str, bond_index: Option<u32>) {
        let link = self.link_entry(member);
        let before = link.master_name().map(str::to_owned);
        if let Some(before) = before.filter(|b| b != master) {
            log::warn!(
                "machine.network: link {} is in both {} and {}; {} wins",
                crate::names::escape(member, 32),
                crate::names::escape(&before, 32),
                crate::names::escape(master, 32),
                crate::names::escape(master, 32),
            );
        }
        match bond_index {
            Some(slave_index) => {
                link.bridge_slave = None;
                link.bond_slave = Some(BondSlave { master_name: master.to_owned(), slave_index });
            }
            None => {
                link.bond_slave = None;
                link.bridge_slave = Some(BridgeSlave { master_name: master.to_owned() });
            }
        }
    }

    pub(crate) fn operator(&mut self, spec: OperatorSpec) {
        let key = spec.id();
        upsert(&mut self.0.operators, &mut self.1.operators, spec, key);
    }

    /// One route, replacing an earlier one with its ID.
    pub(crate) fn route(&mut self, spec: RouteSpec) {
        let key = spec.id();
        upsert(&mut self.0.routes, &mut self.1.routes, spec, key);
    }

    /// A link's own settings from a typed document: they replace what an earlier document
    /// set, but the link stays a member of whatever bond, bridge or VRF made it one.
    pub(crate) fn link_settings(&mut self, spec: LinkSpec) {
        let key = spec.id();
        let member =
            self.1.links.get(&key).and_then(|&i| self.0.links.get(i)).map(|old| {
                (old.bond_slave.clone(), old.bridge_slave.clone(), old.vrf_slave.clone())
            });
        let mut spec = spec;
        if let Some((bond, bridge, vrf)) = member {
            spec.bond_slave = spec.bond_slave.or(bond);
            spec.bridge_slave = spec.bridge_slave.or(bridge);
            spec.vrf_slave = spec.vrf_slave.or(vrf);
        }
        upsert(&mut self.0.links, &mut self.1.links, spec, key);
    }

    /// Make `name` a member of something: `set` marks the link's spec (created up when no
    /// document configured the link itself), so the link's own settings stay.
    pub(crate) fn member(&mut self, name: &str, set: impl FnOnce(&mut LinkSpec)) {
        let slot = match self.1.links.get(name).copied() {
            Some(i) => i,
            None => {
                self.1.links.insert(name.to_owned(), self.0.links.len());
                self.0.links.push(LinkSpec::up(name, LAYER));
                self.0.links.len() - 1
            }
        };
        if let Some(spec) = self.0.links.get_mut(slot) {
            set(spec);
        }
    }

    /// One address, replacing an earlier one with its ID.
    pub(crate) fn address(&mut self, spec: AddressSpec) {
        let key = spec.id();
        upsert(&mut self.0.addresses, &mut self.1.addresses, spec, key);
    }

    /// One routing rule (documents give each priority once per family).
    pub(crate) fn rule(&mut self, spec: RoutingRuleSpec) {
        self.0.rules.push(spec);
    }

    pub(crate) fn addresses(&mut self, link: &str, addresses: &[IpNet]) {
        for address in addresses {
            let spec = AddressSpec::new(link, *address, LAYER);
            let key = spec.id();
            upsert(&mut self.0.addresses, &mut self.1.addresses, spec, key);
        }
    }

    fn routes(&mut self, link: &str, routes: &[Route]) {
        for route in routes {
            let spec = route_spec(link, route);
            let key = spec.id();
            upsert(&mut self.0.routes, &mut self.1.routes, spec, key);
        }
    }

    /// One device on one link: its link, members, VLANs, addresses, routes and operators.
    fn device(&mut self, device: &Device, target: &Target, links: &LinkView) {
        let name = target.name.as_str();
        let members = device.bond.as_ref().map(|bond| bond.members(name, links));
        if let (Some(bond), Some(members)) = (&device.bond, &members) {
            if !bond.device_selectors.is_empty() && members.is_empty() {
                // Not half a bond: it comes once a member is there.
                return;
            }
        }
        let link = self.link_entry(name);
        if device.mtu != 0 {
            link.mtu = device.mtu;
        }
        if let Some(bond) = &device.bond {
            link.logical = true;
            link.kind = "bond".into();
            link.link_type = LinkType::ETHER;
            link.bond_master = Some(bond_master(bond));
        }
        if let Some(bridge) = &device.bridge {
            link.logical = true;
            link.kind = "bridge".into();
            link.link_type = LinkType::ETHER;
            link.bridge_master = Some(bridge_master(bridge));
        }
        if let Some(wireguard) = &device.wireguard {
            link.logical = true;
            link.kind = "wireguard".into();
            link.link_type = LinkType::NONE;
            link.wireguard = Some(wireguard_spec(wireguard));
        }
        if device.dummy {
            link.logical = true;
            link.kind = "dummy".into();
            link.link_type = LinkType::ETHER;
        }
        for (index, member) in members.unwrap_or_default().iter().enumerate() {
            self.enslave(member, name, Some(u32::try_from(index).unwrap_or(u32::MAX)));
        }
        if let Some(bridge) = &device.bridge {
            for member in &bridge.interfaces {
                self.enslave(&links.resolve(member), name, None);
            }
        }
        if let Some(port) = &device.bridge_port {
            self.enslave(name, &links.resolve(&port.master), None);
        }
        self.addresses(name, &device.all_addresses());
        self.routes(name, &device.routes);
        self.dhcp(name, device.dhcp, device.dhcp_options.as_ref());
        self.vip(name, device.vip.as_ref());
        for vlan in &device.vlans {
            let vlan_name = vlan_link_name(&target.raw, vlan.vlan_id);
            self.link(LinkSpec {
                logical: true,
                mtu: vlan.mtu,
                kind: "vlan".into(),
                link_type: LinkType::ETHER,
                parent_name: name.to_owned(),
                vlan: Some(VlanSpec { vid: vlan.vlan_id, protocol: VlanProtocol::DOT1Q }),
                ..LinkSpec::up(&vlan_name, LAYER)
            });
            self.addresses(&vlan_name, &vlan.all_addresses());
            self.routes(&vlan_name, &vlan.routes);
            self.dhcp(&vlan_name, vlan.dhcp, vlan.dhcp_options.as_ref());
            self.vip(&vlan_name, vlan.vip.as_ref());
        }
    }

    /// DHCP operators: v4 unless `ipv4: false`, v6 only with `ipv6: true`.
    fn dhcp(&mut self, link: &str, enabled: bool, options: Option<&DhcpOptions>) {
        if !enabled {
            return;
        }
        let default = DhcpOptions::default();
        let options = options.unwrap_or(&default);
        let metric = match options.route_metric {
            0 => DEFAULT_ROUTE_METRIC,
            m => m,
        };
        if options.ipv4() {
            self.operator(OperatorSpec::dhcp4(link, metric, ClientIdentifier::None, LAYER));
        }
        if options.ipv6() {
            let client_identifier = options
                .duidv6
                .as_ref()
                .map_or(ClientIdentifier::None, |hex| ClientIdentifier::Duid(hex.clone()));
            self.operator(OperatorSpec {
                operator: Operator::Dhcp6,
                link_name: link.to_owned(),
                require_up: true,
                dhcp6: Some(Dhcp6OperatorSpec {
                    route_metric: metric,
                    skip_hostname_request: false,
                    client_identifier,
                }),
                layer: LAYER,
                ..OperatorSpec::default()
            });
        }
    }

    fn vip(&mut self, link: &str, vip: Option<&Vip>) {
        let Some(vip) = vip else { return };
        self.operator(OperatorSpec {
            operator: Operator::Vip,
            link_name: link.to_owned(),
            require_up: true,
            vip: Some(VipOperatorSpec { ip: vip.ip, gratuitous_arp: true }),
            layer: LAYER,
            ..OperatorSpec::default()
        });
    }
}

/// A device's WireGuard settings as a link's (Talos's `wireguardLink`): keys, port, mark and
/// peers; keepalive in whole seconds (validation refuses the rest).
fn wireguard_spec(wg: &DeviceWireguard) -> WireguardSpec {
    let mut spec = WireguardSpec {
        private_key: Some(wg.private_key),
        listen_port: wg.listen_port,
        firewall_mark: wg.firewall_mark,
        peers: wg
            .peers
            .iter()
            .map(|peer| WireguardPeer {
                public_key: peer.public_key.clone(),
                preshared_key: None,
                endpoint: peer.endpoint,
                persistent_keepalive_interval: peer
                    .persistent_keepalive_interval
                    .map_or(0, |d| u16::try_from(d.as_secs()).unwrap_or(u16::MAX)),
                allowed_ips: peer.allowed_ips.clone(),
                handshake_retry: 0,
            })
            .collect(),
    };
    spec.normalize();
    spec
}

pub(crate) fn bridge_master(bridge: &Bridge) -> BridgeMasterSpec {
    BridgeMasterSpec {
        stp: StpSpec { enabled: bridge.stp_enabled() },
        vlan: BridgeVlanSpec {
            filtering_enabled: bridge.vlan.as_ref().is_some_and(|v| v.vlan_filtering),
        },
    }
}

fn bond_master(bond: &Bond) -> BondMasterSpec {
    let mut spec = BondMasterSpec {
        mode: bond.mode,
        xmit_hash_policy: bond.xmit_hash_policy,
        lacp_rate: bond.lacp_rate.unwrap_or_default(),
        arp_validate: bond.arp_validate.unwrap_or_default(),
        arp_all_targets: bond.arp_all_targets,
        primary: bond.primary.clone(),
        primary_reselect: bond.primary_reselect,
        fail_over_mac: bond.fail_over_mac,
        ad_select: bond.ad_select,
        mii_mon: bond.miimon,
        up_delay: bond.updelay,
        down_delay: bond.downdelay,
        arp_interval: bond.arp_interval,
        resend_igmp: bond.resend_igmp,
        min_links: bond.min_links,
        lp_interval: bond.lp_interval,
        packets_per_slave: bond.packets_per_slave,
        num_peer_notif: bond.num_peer_notif,
        tlb_dynamic_lb: bond.tlb_dynamic_lb,
        all_slaves_active: bond.all_slaves_active,
        use_carrier: true,
        ad_actor_sys_prio: bond.ad_actor_sys_prio,
        ad_user_port_key: bond.ad_user_port_key,
        peer_notify_delay: bond.peer_notify_delay,
        arp_ip_targets: bond.arp_ip_target.clone(),
        missed_max: 0,
    };
    spec.fill_defaults();
    // `fill_defaults` forces carrier monitoring on; an explicit `useCarrier: false` wins.
    spec.use_carrier = bond.use_carrier.unwrap_or(true);
    spec
}

/// A legacy route on `link` (docs/talos.md: Merge): no `network` is the default route, metric 0 is
/// 1024, type multicast for a multicast destination.
pub(crate) fn route_spec(link: &str, route: &Route) -> RouteSpec {
    // A v6 destination or gateway makes it inet6; `normalize` re-derives the same.
    let family = route
        .network
        .map(|n| n.addr())
        .or(route.gateway)
        .map_or(Family::Inet4, |ip: IpAddr| Family::of(&ip));
    let mut spec = RouteSpec::new(family, LAYER);
    spec.dst = route.network;
    spec.gateway = route.gateway;
    spec.src = route.source;
    spec.out_link_name = link.to_owned();
    spec.table = route.table.unwrap_or(RoutingTable::MAIN);
    spec.priority = match route.metric {
        0 => DEFAULT_ROUTE_METRIC,
        m => m,
    };
    spec.mtu = route.mtu;
    if route.network.is_some_and(|n| n.addr().is_multicast()) {
        spec.kind = RouteType::MULTICAST;
    }
    spec.normalize();
    spec
}

impl MachineConfig {
    /// Do the defaults bring up and run DHCP on physical links nothing else mentions? Not
    /// once a typed document configures links or DHCP: the user then has taken links over
    /// (Talos's `RunDefaultDHCPOperators`).
    pub fn runs_default_link_config(&self) -> bool {
        !self.documents.iter().any(|d| d.doc.body().configures_links())
    }

    /// Resolved names of devices marked `ignore: true` (selectors that match nothing are
    /// left out). The defaults controller skips these (docs/talos.md: Defaults).
    pub fn ignored_interfaces(&self, links: &LinkView) -> Vec<String> {
        let mut names: Vec<String> = self
            .machine
            .network
            .interfaces
            .iter()
            .filter(|d| d.ignore)
            .flat_map(|d| d.resolve_all(links))
            .collect();
        crate::sort::ascending(&mut names);
        names.dedup();
        names
    }

    /// Resolved names of every configured device (ignored ones included) and of every bond
    /// and bridge member, sorted. The defaults controller does not bring these up on its
    /// own (docs/talos.md: Defaults). VLANs are not listed: they are never physical links.
    pub fn mentioned_interfaces(&self, links: &LinkView) -> Vec<String> {
        let mut names = Vec::new();
        for device in &self.machine.network.interfaces {
            for name in device.resolve_all(links) {
                if let Some(bond) = &device.bond {
                    names.extend(bond.members(&name, links));
                }
                names.push(name);
            }
            if let Some(bridge) = &device.bridge {
                names.extend(bridge.interfaces.iter().map(|n| links.resolve(n)));
            }
        }
        crate::sort::ascending(&mut names);
        names.dedup();
        names
    }
}
