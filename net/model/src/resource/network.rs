// SPDX-License-Identifier: Apache-2.0
//! Network spec and status types (docs/talos.md: Resources and IDs) and their natural-ID functions.
//!
//! IDs are built only here. Their formats match Talos exactly, so a Talos user reads
//! `keelson get` output without surprise.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use super::nethelpers::{is_default, named_number, serde_via_str};
pub use super::nethelpers::{
    AddressFlags, Family, HardwareAddr, LinkType, ParseNameError, RouteFlags, RouteProtocol,
    RouteType, RoutingTable, Scope,
};

/// Where a layered spec came from; a higher layer has priority (docs/talos.md: Resources and IDs).
#[derive(
    Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum ConfigLayer {
    /// Built-in defaults.
    #[default]
    Default,
    /// The kernel command line.
    Cmdline,
    /// Platform metadata.
    Platform,
    /// Operators (DHCP, VIP, KubeSpan).
    Operator,
    /// The machine configuration.
    Configuration,
}

impl ConfigLayer {
    /// The name used as an ID prefix in `network-config`.
    pub fn as_str(self) -> &'static str {
        match self {
            ConfigLayer::Default => "default",
            ConfigLayer::Cmdline => "cmdline",
            ConfigLayer::Platform => "platform",
            ConfigLayer::Operator => "operator",
            ConfigLayer::Configuration => "configuration",
        }
    }
}

impl fmt::Display for ConfigLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `<layer>/<natural id>`: the ID of a layered spec in `network-config`.
pub fn layered_id(layer: ConfigLayer, natural: &str) -> String {
    format!("{layer}/{natural}")
}

/// `<operator id>/<natural id>`: the ID of a spec an operator emits.
pub fn operator_output_id(operator_id: &str, natural: &str) -> String {
    format!("{operator_id}/{natural}")
}

// ---------------------------------------------------------------------------------------------
// Address

/// An address to assign to a link.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AddressSpec {
    /// The address with its prefix length (host bits kept).
    pub address: IpNet,
    /// The link name (or alias) it belongs to.
    pub link_name: String,
    /// Address family.
    pub family: Family,
    /// Address scope.
    pub scope: Scope,
    /// Managed `IFA_F_*` flags.
    pub flags: AddressFlags,
    /// Send one gratuitous ARP after adding (IPv4 only).
    #[serde(default, skip_serializing_if = "is_default")]
    pub announce_with_arp: bool,
    /// `IFA_RT_PRIORITY`: the metric of the kernel's prefix route.
    #[serde(default, skip_serializing_if = "is_default")]
    pub priority: u32,
    /// Valid lifetime in seconds; `None` is forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_lifetime: Option<u32>,
    /// Preferred lifetime in seconds; `None` is forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_lifetime: Option<u32>,
    /// The layer this spec came from.
    pub layer: ConfigLayer,
}

impl AddressSpec {
    /// A permanent global address, the shape every config source starts from.
    pub fn new(link: &str, address: IpNet, layer: ConfigLayer) -> Self {
        Self {
            family: Family::of(&address.addr()),
            address,
            link_name: link.to_owned(),
            scope: Scope::GLOBAL,
            flags: AddressFlags::PERMANENT,
            announce_with_arp: false,
            priority: 0,
            valid_lifetime: None,
            preferred_lifetime: None,
            layer,
        }
    }

    /// The natural ID.
    pub fn id(&self) -> String {
        address_id(&self.link_name, &self.address)
    }
}

/// `<link>/<addr>/<bits>`, e.g. `eth0/10.0.0.5/24`.
pub fn address_id(link: &str, address: &IpNet) -> String {
    format!("{link}/{address}")
}

/// An address as the kernel reports it.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AddressStatus {
    /// `IFA_ADDRESS` with the prefix length.
    pub address: IpNet,
    /// `IFA_LOCAL`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<IpAddr>,
    /// `IFA_BROADCAST`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broadcast: Option<IpAddr>,
    /// `IFA_ANYCAST`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anycast: Option<IpAddr>,
    /// `IFA_MULTICAST`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multicast: Option<IpAddr>,
    /// Interface index.
    pub link_index: u32,
    /// Interface name.
    pub link_name: String,
    /// Address family.
    pub family: Family,
    /// Scope.
    pub scope: Scope,
    /// Flags (`IFA_FLAGS`).
    pub flags: AddressFlags,
    /// `IFA_RT_PRIORITY`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub priority: u32,
}

impl AddressStatus {
    /// The natural ID.
    pub fn id(&self) -> String {
        address_id(&self.link_name, &self.address)
    }
}

// ---------------------------------------------------------------------------------------------
// Route

/// A route to install.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RouteSpec {
    /// Address family.
    pub family: Family,
    /// Destination; `None` is the default route.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<IpNet>,
    /// Preferred source (`RTA_PREFSRC`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<IpAddr>,
    /// Next hop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<IpAddr>,
    /// Output link name (or alias).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub out_link_name: String,
    /// Routing table.
    pub table: RoutingTable,
    /// Metric.
    pub priority: u32,
    /// Scope.
    pub scope: Scope,
    /// Route type.
    #[serde(rename = "type")]
    pub kind: RouteType,
    /// Flags.
    #[serde(default, skip_serializing_if = "is_default")]
    pub flags: RouteFlags,
    /// Protocol (who installed it).
    pub protocol: RouteProtocol,
    /// `RTAX_MTU`; 0 means unset.
    #[serde(default, skip_serializing_if = "is_default")]
    pub mtu: u32,
    /// The layer this spec came from.
    pub layer: ConfigLayer,
}

/// The metric every config source uses when none is given (docs/talos.md: Resources and IDs).
pub const DEFAULT_ROUTE_METRIC: u32 = 1024;

impl RouteSpec {
    /// A unicast route in the main table; call [`RouteSpec::normalize`] after filling it in.
    pub fn new(family: Family, layer: ConfigLayer) -> Self {
        Self {
            family,
            dst: None,
            src: None,
            gateway: None,
            out_link_name: String::new(),
            table: RoutingTable::MAIN,
            priority: DEFAULT_ROUTE_METRIC,
            scope: Scope::GLOBAL,
            kind: RouteType::UNICAST,
            flags: RouteFlags::default(),
            protocol: RouteProtocol::STATIC,
            mtu: 0,
            layer,
        }
    }

    /// Bring the route into canonical form: `0/0` and unspecified addresses become `None`,
    /// and the scope is derived as the kernel would report it.
    ///
    /// Talos derives `link` scope for gateway-less IPv6 routes, which the kernel reports as
    /// `global`; the resulting never-equal diff looped. IPv6 routes are
    /// therefore always `global` here.
    pub fn normalize(&mut self) {
        if self.dst.is_some_and(|d| d.prefix_len() == 0 && d.addr().is_unspecified()) {
            self.dst = None;
        }
        if self.gateway.is_some_and(|g| g.is_unspecified()) {
            self.gateway = None;
        }
        if self.src.is_some_and(|s| s.is_unspecified()) {
            self.src = None;
        }
        if let Some(ip) = self.dst.map(|d| d.addr()).or(self.gateway) {
            self.family = Family::of(&ip);
        }
        self.scope = if self.family == Family::Inet6 {
            Scope::GLOBAL
        } else if self.dst.is_some_and(|d| d.addr().is_loopback()) {
            Scope::HOST
        } else if self.gateway.is_none() && self.dst.is_some() {
            Scope::LINK
        } else {
            Scope::GLOBAL
        };
    }

    /// The natural ID.
    pub fn id(&self) -> String {
        route_id(
            self.table,
            self.family,
            self.dst.as_ref(),
            self.gateway.as_ref(),
            self.priority,
            &self.out_link_name,
        )
    }
}

/// `[<table>/][<outlink>/ for inet6]<family>/<gw>/<dst>/<priority>` (docs/talos.md: Resources and
/// IDs): the table prefix only outside `main`, the out-link only for IPv6, zero gw/dst render
/// empty.
pub fn route_id(
    table: RoutingTable,
    family: Family,
    dst: Option<&IpNet>,
    gateway: Option<&IpAddr>,
    priority: u32,
    out_link: &str,
) -> String {
    use fmt::Write;
    let mut id = String::new();
    if table != RoutingTable::MAIN {
        let _ = write!(id, "{table}/");
    }
    if family == Family::Inet6 && !out_link.is_empty() {
        let _ = write!(id, "{out_link}/");
    }
    let _ = write!(id, "{family}/");
    if let Some(gw) = gateway.filter(|g| !g.is_unspecified()) {
        let _ = write!(id, "{gw}");
    }
    id.push('/');
    if let Some(dst) = dst.filter(|d| !(d.prefix_len() == 0 && d.addr().is_unspecified())) {
        let _ = write!(id, "{dst}");
    }
    let _ = write!(id, "/{priority}");
    id
}

/// A route as the kernel reports it (all tables are mirrored).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteStatus {
    /// Address family.
    pub family: Family,
    /// Destination; `None` is the default route.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<IpNet>,
    /// `RTA_PREFSRC`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<IpAddr>,
    /// `RTA_GATEWAY` (or `RTA_VIA`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<IpAddr>,
    /// Output interface index.
    #[serde(default, skip_serializing_if = "is_default")]
    pub out_link_index: u32,
    /// Output interface name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub out_link_name: String,
    /// Table.
    pub table: RoutingTable,
    /// Metric.
    pub priority: u32,
    /// Scope.
    pub scope: Scope,
    /// Type.
    #[serde(rename = "type")]
    pub kind: RouteType,
    /// Flags.
    #[serde(default, skip_serializing_if = "is_default")]
    pub flags: RouteFlags,
    /// Protocol.
    pub protocol: RouteProtocol,
    /// `RTAX_MTU`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub mtu: u32,
}

impl RouteStatus {
    /// The natural ID.
    pub fn id(&self) -> String {
        route_id(
            self.table,
            self.family,
            self.dst.as_ref(),
            self.gateway.as_ref(),
            self.priority,
            &self.out_link_name,
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Link

named_number!(
    /// Bonding mode (`IFLA_BOND_MODE`).
    BondMode(u8), "bond mode", {
        /// 0.
        BALANCE_RR = 0 => "balance-rr",
        /// 1.
        ACTIVE_BACKUP = 1 => "active-backup",
        /// 2.
        BALANCE_XOR = 2 => "balance-xor",
        /// 3.
        BROADCAST = 3 => "broadcast",
        /// 4.
        LACP = 4 => "802.3ad",
        /// 5.
        BALANCE_TLB = 5 => "balance-tlb",
        /// 6.
        BALANCE_ALB = 6 => "balance-alb",
    }
);

named_number!(
    /// `IFLA_BOND_XMIT_HASH_POLICY`.
    BondXmitHashPolicy(u8), "bond xmit hash policy", {
        /// 0.
        LAYER2 = 0 => "layer2",
        /// 1.
        LAYER34 = 1 => "layer3+4",
        /// 2.
        LAYER23 = 2 => "layer2+3",
        /// 3.
        ENCAP23 = 3 => "encap2+3",
        /// 4.
        ENCAP34 = 4 => "encap3+4",
        /// 5.
        VLAN_SRCMAC = 5 => "vlan+srcmac",
    }
);

named_number!(
    /// `IFLA_BOND_AD_LACP_RATE`.
    LacpRate(u8), "lacp rate", {
        /// 0.
        SLOW = 0 => "slow",
        /// 1.
        FAST = 1 => "fast",
    }
);

named_number!(
    /// `IFLA_BOND_ARP_VALIDATE`.
    ArpValidate(u32), "arp validate", {
        /// 0.
        NONE = 0 => "none",
        /// 1.
        ACTIVE = 1 => "active",
        /// 2.
        BACKUP = 2 => "backup",
        /// 3.
        ALL = 3 => "all",
        /// 4.
        FILTER = 4 => "filter",
        /// 5.
        FILTER_ACTIVE = 5 => "filter_active",
        /// 6.
        FILTER_BACKUP = 6 => "filter_backup",
    }
);

named_number!(
    /// `IFLA_BOND_ARP_ALL_TARGETS`.
    ArpAllTargets(u32), "arp all targets", {
        /// 0.
        ANY = 0 => "any",
        /// 1.
        ALL = 1 => "all",
    }
);

named_number!(
    /// `IFLA_BOND_PRIMARY_RESELECT`.
    PrimaryReselect(u8), "primary reselect", {
        /// 0.
        ALWAYS = 0 => "always",
        /// 1.
        BETTER = 1 => "better",
        /// 2.
        FAILURE = 2 => "failure",
    }
);

named_number!(
    /// `IFLA_BOND_FAIL_OVER_MAC`.
    FailOverMac(u8), "fail over mac", {
        /// 0.
        NONE = 0 => "none",
        /// 1.
        ACTIVE = 1 => "active",
        /// 2.
        FOLLOW = 2 => "follow",
    }
);

named_number!(
    /// `IFLA_BOND_AD_SELECT`.
    AdSelect(u8), "ad select", {
        /// 0.
        STABLE = 0 => "stable",
        /// 1.
        BANDWIDTH = 1 => "bandwidth",
        /// 2.
        COUNT = 2 => "count",
    }
);

named_number!(
    /// VLAN ethertype.
    VlanProtocol(u16), "vlan protocol", {
        /// 802.1Q (0x8100).
        DOT1Q = 0x8100 => "802.1q",
        /// 802.1ad (0x88a8).
        DOT1AD = 0x88a8 => "802.1ad",
    }
);

/// Bond master settings (`IFLA_BOND_*`).
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BondMasterSpec {
    /// Mode.
    pub mode: BondMode,
    /// Transmit hash policy.
    pub xmit_hash_policy: BondXmitHashPolicy,
    /// LACP rate.
    pub lacp_rate: LacpRate,
    /// ARP validation.
    pub arp_validate: ArpValidate,
    /// ARP all targets.
    pub arp_all_targets: ArpAllTargets,
    /// Primary slave name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub primary: String,
    /// Primary reselect policy.
    pub primary_reselect: PrimaryReselect,
    /// Fail-over MAC policy.
    pub fail_over_mac: FailOverMac,
    /// 802.3ad aggregation selection.
    pub ad_select: AdSelect,
    /// MII monitoring interval (ms).
    pub mii_mon: u32,
    /// Up delay (ms).
    pub up_delay: u32,
    /// Down delay (ms).
    pub down_delay: u32,
    /// ARP interval (ms).
    pub arp_interval: u32,
    /// IGMP reports after failover.
    pub resend_igmp: u32,
    /// Minimum links for carrier.
    pub min_links: u32,
    /// Learning packet interval.
    pub lp_interval: u32,
    /// Packets per slave (balance-rr).
    pub packets_per_slave: u32,
    /// Peer notifications after failover.
    pub num_peer_notif: u8,
    /// TLB dynamic load balancing.
    pub tlb_dynamic_lb: u8,
    /// Deliver duplicate frames on all slaves.
    pub all_slaves_active: u8,
    /// Use carrier for link monitoring.
    pub use_carrier: bool,
    /// 802.3ad actor system priority.
    pub ad_actor_sys_prio: u16,
    /// 802.3ad user port key.
    pub ad_user_port_key: u16,
    /// Peer notify delay (ms).
    pub peer_notify_delay: u32,
    /// ARP monitoring targets.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub arp_ip_targets: Vec<Ipv4Addr>,
    /// Missed ARP probes before down.
    pub missed_max: u8,
}

impl BondMasterSpec {
    /// Fill the kernel defaults that a zero value would otherwise override (docs/talos.md: Kernel
    /// command line).
    pub fn fill_defaults(&mut self) {
        self.use_carrier = true;
        for v in [&mut self.resend_igmp, &mut self.lp_interval, &mut self.packets_per_slave] {
            if *v == 0 {
                *v = 1;
            }
        }
        if self.num_peer_notif == 0 {
            self.num_peer_notif = 1;
        }
        if self.mode != BondMode::BALANCE_TLB && self.mode != BondMode::BALANCE_ALB {
            self.tlb_dynamic_lb = 1;
        }
        if self.mode == BondMode::LACP && self.ad_actor_sys_prio == 0 {
            self.ad_actor_sys_prio = 65535;
        }
        let keeps_zero_missed = [BondMode::LACP, BondMode::BALANCE_ALB, BondMode::BALANCE_TLB];
        if self.missed_max == 0 && !keeps_zero_missed.contains(&self.mode) {
            self.missed_max = 2;
        }
    }
}

/// Bridge master settings.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BridgeMasterSpec {
    /// Spanning tree.
    pub stp: StpSpec,
    /// VLAN filtering.
    pub vlan: BridgeVlanSpec,
}

/// Spanning tree settings.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct StpSpec {
    /// STP on.
    pub enabled: bool,
}

/// Bridge VLAN settings.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BridgeVlanSpec {
    /// VLAN filtering on.
    pub filtering_enabled: bool,
}

/// Membership of a bond.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BondSlave {
    /// The bond's name.
    pub master_name: String,
    /// Position in the bond's slave list (orders enslaving).
    pub slave_index: u32,
}

/// Membership of a bridge.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BridgeSlave {
    /// The bridge's name.
    pub master_name: String,
}

/// VLAN settings.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VlanSpec {
    /// VLAN ID, 1..4095.
    #[serde(rename = "vlanID")]
    pub vid: u16,
    /// Ethertype.
    #[serde(rename = "vlanProtocol")]
    pub protocol: VlanProtocol,
}

/// veth settings.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VethSpec {
    /// The peer's name.
    pub peer_name: String,
}

/// A WireGuard device's configuration (docs/talos.md: Applying specs).
///
/// Keys are base64 strings as in Talos; peers are kept sorted by public key and allowed IPs by
/// (address, prefix length) ([`WireguardSpec::normalize`]), so equal configurations compare
/// equal. `Debug` leaves the private and preshared keys out.
#[derive(Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WireguardSpec {
    /// The device's private key (base64). Never shown: `keelson get` prints `<redacted>`.
    #[serde(default, skip_serializing_if = "String::is_empty", serialize_with = "redacted")]
    pub private_key: String,
    /// UDP listen port; 0 lets the kernel pick one and is not compared.
    #[serde(default, skip_serializing_if = "is_default")]
    pub listen_port: u16,
    /// Mark set on the device's own encrypted packets.
    #[serde(default, skip_serializing_if = "is_default")]
    pub firewall_mark: u32,
    /// Peers, sorted by public key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peers: Vec<WireguardPeer>,
}

/// Secrets serialize as `<redacted>`: resources are only ever serialized to be shown.
fn redacted<S: serde::Serializer>(_: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str("<redacted>")
}

fn redacted_opt<S: serde::Serializer>(_: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str("<redacted>")
}

impl fmt::Debug for WireguardSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WireguardSpec")
            .field("private_key", &if self.private_key.is_empty() { "" } else { "<redacted>" })
            .field("listen_port", &self.listen_port)
            .field("firewall_mark", &self.firewall_mark)
            .field("peers", &self.peers)
            .finish()
    }
}

impl WireguardSpec {
    /// Sort peers by public key and each peer's allowed IPs by (address, prefix length), and
    /// drop duplicate allowed IPs: the order the kernel's answer is compared in.
    pub fn normalize(&mut self) {
        for p in &mut self.peers {
            p.allowed_ips.sort_by_key(|n| (n.addr(), n.prefix_len()));
            p.allowed_ips.dedup();
        }
        self.peers.sort_by(|a, b| a.public_key.cmp(&b.public_key));
    }
}

/// One WireGuard peer of a [`WireguardSpec`].
#[derive(Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WireguardPeer {
    /// The peer's public key (base64).
    pub public_key: String,
    /// Preshared key (base64). Never shown, like the private key.
    #[serde(default, skip_serializing_if = "Option::is_none", serialize_with = "redacted_opt")]
    pub preshared_key: Option<String>,
    /// Where to send to; `None` leaves the device's endpoint alone, so WireGuard's roaming is
    /// kept (docs/talos.md: KubeSpan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<std::net::SocketAddr>,
    /// Persistent keepalive in seconds; 0 is off.
    #[serde(default, skip_serializing_if = "is_default")]
    pub persistent_keepalive_interval: u16,
    /// Prefixes routed to and accepted from this peer.
    #[serde(rename = "allowedIPs", default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_ips: Vec<IpNet>,
}

impl fmt::Debug for WireguardPeer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WireguardPeer")
            .field("public_key", &self.public_key)
            .field("preshared_key", &self.preshared_key.as_ref().map(|_| "<redacted>"))
            .field("endpoint", &self.endpoint)
            .field("persistent_keepalive_interval", &self.persistent_keepalive_interval)
            .field("allowed_ips", &self.allowed_ips)
            .finish()
    }
}

/// A WireGuard device as the kernel reports it (no private or preshared keys).
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WireguardStatus {
    /// The device's public key (base64); empty without a private key.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub public_key: String,
    /// UDP listen port.
    pub listen_port: u16,
    /// Mark on encrypted packets.
    #[serde(skip_serializing_if = "is_default")]
    pub firewall_mark: u32,
    /// Peers, sorted by public key.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub peers: Vec<WireguardPeerStatus>,
}

/// One peer of a [`WireguardStatus`].
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WireguardPeerStatus {
    /// The peer's public key (base64).
    pub public_key: String,
    /// The endpoint WireGuard currently sends to (configured or roamed to).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<std::net::SocketAddr>,
    /// Last completed handshake, in Unix seconds; `None` before the first one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_handshake: Option<u64>,
    /// Bytes received from the peer.
    pub rx_bytes: u64,
    /// Bytes sent to the peer.
    pub tx_bytes: u64,
    /// Persistent keepalive in seconds; 0 is off.
    #[serde(skip_serializing_if = "is_default")]
    pub persistent_keepalive_interval: u16,
    /// Allowed IPs, sorted.
    #[serde(rename = "allowedIPs", skip_serializing_if = "Vec::is_empty")]
    pub allowed_ips: Vec<IpNet>,
}

/// Bumped by the link spec controller after it changes link state that raises no netlink
/// event (WireGuard configuration), so the link status controller re-reads at once (Talos
/// `LinkRefresh`). ID: [`LINK_REFRESH_WIREGUARD`].
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LinkRefresh {
    /// Counts the changes.
    pub generation: u64,
}

/// The ID of the [`LinkRefresh`] bumped after WireGuard changes.
pub const LINK_REFRESH_WIREGUARD: &str = "wireguard";

/// A link to configure or create.
///
/// Merge is "a non-zero incoming value overrides" per field (docs/talos.md: Merge), so every
/// field's zero value means "not set by this layer".
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LinkSpec {
    /// Link name.
    pub name: String,
    /// Created by us (deleted when the spec goes), as opposed to a physical link.
    #[serde(default, skip_serializing_if = "is_default")]
    pub logical: bool,
    /// Administratively up.
    #[serde(default)]
    pub up: bool,
    /// MTU; 0 leaves it alone.
    #[serde(default, skip_serializing_if = "is_default")]
    pub mtu: u32,
    /// rtnetlink kind (`bond`, `vlan`, `bridge`, `dummy`, `veth`, `wireguard`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Link-layer type.
    #[serde(rename = "type", default, skip_serializing_if = "is_default")]
    pub link_type: LinkType,
    /// Parent link (VLAN).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub parent_name: String,
    /// MAC to set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware_addr: Option<HardwareAddr>,
    /// `IFF_MULTICAST`; only the lowest layer's value survives merge (a Talos quirk kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multicast: Option<bool>,
    /// Bond membership.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bond_slave: Option<BondSlave>,
    /// Bridge membership.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bridge_slave: Option<BridgeSlave>,
    /// VLAN settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan: Option<VlanSpec>,
    /// Bond settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bond_master: Option<BondMasterSpec>,
    /// Bridge settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bridge_master: Option<BridgeMasterSpec>,
    /// veth settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub veth: Option<VethSpec>,
    /// WireGuard settings (kind `wireguard`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wireguard: Option<WireguardSpec>,
    /// The layer this spec came from.
    pub layer: ConfigLayer,
}

impl LinkSpec {
    /// `{name, up: true}` at a layer: the most common link spec.
    pub fn up(name: &str, layer: ConfigLayer) -> Self {
        Self { name: name.to_owned(), up: true, layer, ..Self::default() }
    }

    /// The natural ID (the link name).
    pub fn id(&self) -> String {
        self.name.clone()
    }

    /// The name of the bond or bridge this link is enslaved to, if any.
    pub fn master_name(&self) -> Option<&str> {
        self.bond_slave
            .as_ref()
            .map(|s| s.master_name.as_str())
            .or_else(|| self.bridge_slave.as_ref().map(|s| s.master_name.as_str()))
    }
}

/// The longest interface name the kernel accepts (`IFNAMSIZ - 1`).
pub const MAX_LINK_NAME_LEN: usize = 15;

/// The longest alternative name (`ALTIFNAMSIZ - 1`): a reference may be one.
pub const MAX_LINK_REF_LEN: usize = 127;

/// Why `name` cannot name a link, as the kernel's `dev_valid_name` sees it: empty, `.` or
/// `..`, a `/`, `:`, blank or control character, or longer than `max_len` bytes.
pub fn link_name_problem(name: &str, max_len: usize) -> Option<String> {
    if name.is_empty() {
        return Some("empty".into());
    }
    if name == "." || name == ".." {
        return Some("not a link name ('.' and '..' are not)".into());
    }
    if let Some(c) =
        name.chars().find(|c| matches!(c, '/' | ':') || c.is_whitespace() || c.is_control())
    {
        return Some(format!("not a link name (contains {c:?})"));
    }
    if name.len() > max_len {
        return Some(format!("longer than {max_len} bytes"));
    }
    None
}

/// The name of VLAN `vid` on `parent` (docs/talos.md: Kernel command line): `<parent>.<vid>` when
/// that fits in 15 characters, otherwise the first 4 characters of the parent, 6 hex digits of
/// sha256(parent), then `.<vid>`.
pub fn vlan_link_name(parent: &str, vid: u16) -> String {
    if parent.len() + 5 <= MAX_LINK_NAME_LEN {
        return format!("{parent}.{vid}");
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(parent.as_bytes());
    let head: String = parent.chars().take(4).collect();
    format!("{head}{:02x}{:02x}{:02x}.{vid}", digest[0], digest[1], digest[2])
}

/// A link as the kernel reports it.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LinkStatus {
    /// Interface index.
    pub index: u32,
    /// Link-layer type.
    #[serde(rename = "type")]
    pub link_type: LinkType,
    /// `IFLA_LINK` (the parent of a VLAN).
    #[serde(skip_serializing_if = "is_default")]
    pub link_index: u32,
    /// Interface flags (`UP,BROADCAST,...`).
    pub flags: String,
    /// Current MAC.
    pub hardware_addr: HardwareAddr,
    /// Permanent MAC (ethtool), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permanent_addr: Option<HardwareAddr>,
    /// Broadcast address.
    pub broadcast_addr: HardwareAddr,
    /// MTU.
    pub mtu: u32,
    /// Master (bond/bridge/vrf) index.
    #[serde(skip_serializing_if = "is_default")]
    pub master_index: u32,
    /// `IFLA_OPERSTATE` name (`up`, `down`, `unknown`, ...).
    pub operational_state: String,
    /// rtnetlink kind (empty for physical links).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Slave kind (`bond`, `bridge`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub slave_kind: String,
    /// Carrier.
    pub link_state: bool,
    /// `IFLA_IFALIAS`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub alias: String,
    /// Alternative names.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub alt_names: Vec<String>,
    /// Driver (sysfs).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub driver: String,
    /// Bus path (sysfs).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub bus_path: String,
    /// VLAN settings, for VLAN links.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vlan: Option<VlanSpec>,
    /// Bond settings, for bonds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bond_master: Option<BondMasterSpec>,
    /// Bridge settings, for bridges.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bridge_master: Option<BridgeMasterSpec>,
    /// WireGuard device and peer state, for WireGuard links.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wireguard: Option<WireguardStatus>,
}

impl LinkStatus {
    /// Ethernet without a kind: a real NIC, not loopback, WireGuard, bond, VLAN, veth...
    /// (docs/talos.md: Defaults).
    pub fn physical(&self) -> bool {
        self.link_type == LinkType::ETHER && self.kind.is_empty()
    }

    /// Does `name` refer to this link (by its name, alias or an altname)?
    pub fn answers_to(&self, id: &str, name: &str) -> bool {
        id == name
            || (!self.alias.is_empty() && self.alias == name)
            || self.alt_names.iter().any(|a| a == name)
    }

    /// Administratively up: `IFF_UP` is among the `flags` names.
    pub fn is_up(&self) -> bool {
        self.flags.split(',').any(|f| f.trim() == "UP")
    }
}

// ---------------------------------------------------------------------------------------------
// Resolver, hostname, time servers

/// DNS resolvers and search domains.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResolverSpec {
    /// Name servers.
    #[serde(default)]
    pub dns_servers: Vec<IpAddr>,
    /// Search domains.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub search_domains: Vec<String>,
    /// The configuration stated search domains explicitly (an empty list clears them).
    #[serde(default, skip_serializing_if = "is_default")]
    pub search_domains_overridden: bool,
    /// The layer this spec came from.
    pub layer: ConfigLayer,
}

/// The singleton ID of resolver resources.
pub const RESOLVER_ID: &str = "resolvers";

/// The resolvers in effect.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolverStatus {
    /// Name servers.
    pub dns_servers: Vec<IpAddr>,
    /// Search domains.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub search_domains: Vec<String>,
}

/// Hostname and domain name.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HostnameSpec {
    /// Host name (first label).
    pub hostname: String,
    /// Domain name (the rest).
    #[serde(default)]
    pub domainname: String,
    /// The layer this spec came from.
    pub layer: ConfigLayer,
}

/// The singleton ID of hostname resources.
pub const HOSTNAME_ID: &str = "hostname";

/// Why a hostname was rejected: the shared name check's reason.
pub type HostnameError = crate::names::NameError;

/// The longest domain name `setdomainname(2)` accepts (`__NEW_UTS_LEN`).
pub const MAX_DOMAINNAME_LEN: usize = 64;

impl HostnameSpec {
    /// Split a name at the first dot into hostname and domain name, refusing anything that is
    /// not a valid RFC 1123 hostname or that the kernel would refuse ([`crate::names`]).
    pub fn parse_fqdn(fqdn: &str, layer: ConfigLayer) -> Result<Self, HostnameError> {
        let (host, domain) = crate::names::split_hostname(fqdn)?;
        Ok(Self { hostname: host.to_owned(), domainname: domain.to_owned(), layer })
    }

    /// `hostname.domainname`, or just the hostname.
    pub fn fqdn(&self) -> String {
        if self.domainname.is_empty() {
            self.hostname.clone()
        } else {
            format!("{}.{}", self.hostname, self.domainname)
        }
    }
}

/// The hostname in effect.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostnameStatus {
    /// Host name.
    pub hostname: String,
    /// Domain name.
    pub domainname: String,
}

/// NTP servers.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TimeServerSpec {
    /// Server names or addresses.
    #[serde(default)]
    pub time_servers: Vec<String>,
    /// Use NTS (needs names, not IP literals).
    #[serde(default, rename = "useNTS", skip_serializing_if = "is_default")]
    pub use_nts: bool,
    /// The layer this spec came from.
    pub layer: ConfigLayer,
}

/// The singleton ID of time server resources.
pub const TIMESERVER_ID: &str = "timeservers";

/// The time servers in effect.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TimeServerStatus {
    /// Server names or addresses.
    pub time_servers: Vec<String>,
    /// NTS on.
    #[serde(default, rename = "useNTS", skip_serializing_if = "is_default")]
    pub use_nts: bool,
}

// ---------------------------------------------------------------------------------------------
// Operators

/// Which operator.
#[derive(
    Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Operator {
    /// DHCPv4 client.
    #[default]
    Dhcp4,
    /// DHCPv6 client.
    Dhcp6,
    /// Virtual IP.
    Vip,
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Operator::Dhcp4 => "dhcp4",
            Operator::Dhcp6 => "dhcp6",
            Operator::Vip => "vip",
        })
    }
}

/// DHCP client identifier policy (option 61 / DUID).
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub enum ClientIdentifier {
    /// Send none.
    #[default]
    None,
    /// `0x01` + the link's MAC (DHCPv4), DUID-LL (DHCPv6).
    Mac,
    /// These raw bytes, given as hex.
    Duid(String),
}

impl fmt::Display for ClientIdentifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientIdentifier::None => f.write_str("none"),
            ClientIdentifier::Mac => f.write_str("mac"),
            ClientIdentifier::Duid(hex) => write!(f, "duid:{hex}"),
        }
    }
}

impl std::str::FromStr for ClientIdentifier {
    type Err = ParseNameError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" => Ok(Self::None),
            "mac" => Ok(Self::Mac),
            _ => {
                let hex = s.strip_prefix("duid:").unwrap_or(s).replace(':', "");
                let valid = hex.len() >= 4
                    && hex.len().is_multiple_of(2)
                    && hex.bytes().all(|b| b.is_ascii_hexdigit());
                if valid {
                    Ok(Self::Duid(hex.to_ascii_lowercase()))
                } else {
                    Err(ParseNameError::new("client identifier", s))
                }
            }
        }
    }
}
serde_via_str!(ClientIdentifier);

/// DHCPv4 operator settings.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Dhcp4OperatorSpec {
    /// Metric of the routes (and the address's prefix route).
    pub route_metric: u32,
    /// Never ask the server for a hostname.
    #[serde(skip_serializing_if = "is_default")]
    pub skip_hostname_request: bool,
    /// Client identifier.
    pub client_identifier: ClientIdentifier,
}

/// DHCPv6 operator settings.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Dhcp6OperatorSpec {
    /// Route metric.
    pub route_metric: u32,
    /// Never ask the server for a hostname.
    #[serde(skip_serializing_if = "is_default")]
    pub skip_hostname_request: bool,
    /// DUID policy.
    pub client_identifier: ClientIdentifier,
}

/// Virtual IP operator settings.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VipOperatorSpec {
    /// The shared address.
    pub ip: IpAddr,
    /// Announce with gratuitous ARP on takeover.
    pub gratuitous_arp: bool,
}

/// Run an operator on a link.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OperatorSpec {
    /// Which operator.
    pub operator: Operator,
    /// The link it runs on.
    pub link_name: String,
    /// Run only while the link is up.
    pub require_up: bool,
    /// DHCPv4 settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dhcp4: Option<Dhcp4OperatorSpec>,
    /// DHCPv6 settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dhcp6: Option<Dhcp6OperatorSpec>,
    /// VIP settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vip: Option<VipOperatorSpec>,
    /// The layer this spec came from.
    pub layer: ConfigLayer,
}

/// What an operator is doing: its protocol state, what it holds, and why it holds nothing
/// (`no offer`, `no ACK`, `NAK`), so a node without a lease says why instead of waiting.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperatorStatus {
    /// Which operator.
    pub operator: Operator,
    /// The link it runs on.
    pub link_name: String,
    /// The protocol state (`selecting`, `bound`, `renewing`, ...).
    pub state: String,
    /// The leased address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<IpNet>,
    /// The server that leased it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<IpAddr>,
    /// The lease time in seconds, as granted (`None`: no lease, or infinite).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_seconds: Option<u32>,
    /// Why there is no lease, or the last event worth knowing; empty when all is well.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

impl OperatorSpec {
    /// A DHCPv4 operator on `link`.
    pub fn dhcp4(
        link: &str,
        route_metric: u32,
        client_identifier: ClientIdentifier,
        layer: ConfigLayer,
    ) -> Self {
        Self {
            operator: Operator::Dhcp4,
            link_name: link.to_owned(),
            require_up: true,
            dhcp4: Some(Dhcp4OperatorSpec {
                route_metric,
                skip_hostname_request: false,
                client_identifier,
            }),
            layer,
            ..Self::default()
        }
    }

    /// The natural ID.
    pub fn id(&self) -> String {
        operator_id(self.operator, &self.link_name, self.vip.as_ref().map(|v| &v.ip))
    }
}

/// `dhcp4/<link>`, `dhcp6/<link>`, `vip/<link>/<ip>`.
pub fn operator_id(operator: Operator, link: &str, vip: Option<&IpAddr>) -> String {
    match vip {
        Some(ip) => format!("{operator}/{link}/{ip}"),
        None => format!("{operator}/{link}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Routing rules

named_number!(
    /// `FR_ACT_*` rule action.
    RuleAction(u8), "rule action", {
        /// Look up a table (`FR_ACT_TO_TBL`).
        UNICAST = 1 => "unicast",
        /// Jump to another rule.
        GOTO = 2 => "goto",
        /// No operation.
        NOP = 3 => "nop",
        /// Drop silently.
        BLACKHOLE = 6 => "blackhole",
        /// ENETUNREACH.
        UNREACHABLE = 7 => "unreachable",
        /// EACCES.
        PROHIBIT = 8 => "prohibit",
    }
);

/// A policy routing rule.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RoutingRuleSpec {
    /// Address family.
    pub family: Family,
    /// Source selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<IpNet>,
    /// Destination selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<IpNet>,
    /// Table to look up.
    pub table: RoutingTable,
    /// Priority (unique per family: it is the natural ID).
    pub priority: u32,
    /// Action.
    pub action: RuleAction,
    /// Input interface.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub iif_name: String,
    /// Output interface.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub oif_name: String,
    /// Firewall mark.
    #[serde(default, skip_serializing_if = "is_default")]
    pub fw_mark: u32,
    /// Firewall mark mask.
    #[serde(default, skip_serializing_if = "is_default")]
    pub fw_mask: u32,
    /// The layer this spec came from.
    pub layer: ConfigLayer,
}

impl RoutingRuleSpec {
    /// The natural ID.
    pub fn id(&self) -> String {
        routing_rule_id(self.family, self.priority)
    }
}

/// `<family>/<priority %05d>`, e.g. `inet4/32500`.
pub fn routing_rule_id(family: Family, priority: u32) -> String {
    format!("{family}/{priority:05}")
}

/// A rule as the kernel reports it.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoutingRuleStatus {
    /// Address family.
    pub family: Family,
    /// Source selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<IpNet>,
    /// Destination selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<IpNet>,
    /// Table.
    pub table: RoutingTable,
    /// Priority.
    pub priority: u32,
    /// Action.
    pub action: RuleAction,
    /// Input interface.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub iif_name: String,
    /// Output interface.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub oif_name: String,
    /// Firewall mark.
    #[serde(default, skip_serializing_if = "is_default")]
    pub fw_mark: u32,
    /// Firewall mark mask.
    #[serde(default, skip_serializing_if = "is_default")]
    pub fw_mask: u32,
    /// Protocol (we only touch rules carrying ours).
    pub protocol: RouteProtocol,
}

// ---------------------------------------------------------------------------------------------
// Derived

/// A list of node addresses (`default`, `current`, `routed`, `accumulative`; docs/talos.md:
/// Statuses and readiness).
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeAddress {
    /// Addresses with prefix lengths.
    pub addresses: Vec<IpNet>,
}

/// A file the runtime wrote (ID: its name, e.g. `resolv.conf`).
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EtcFileStatus {
    /// Path under the root.
    pub path: String,
    /// Size in bytes of what was written.
    pub size: usize,
    /// Why the last writes failed, once readiness stopped waiting for the file.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
}

/// A supervised service (ID: its name, e.g. `kubelet`).
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceStatus {
    /// `stopped`, `waiting`, `running`, `stopping`.
    pub state: String,
    /// Process ID while running.
    #[serde(default, skip_serializing_if = "is_default")]
    pub pid: i32,
    /// Starts so far.
    pub starts: u32,
    /// The command line it runs (or will run).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
}

/// Readiness of the network (docs/talos.md: Statuses and readiness).
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkStatus {
    /// NodeAddress `current` is non-empty.
    pub address_ready: bool,
    /// A default route exists (in any table).
    pub connectivity_ready: bool,
    /// A hostname is applied.
    pub hostname_ready: bool,
    /// `/etc/hosts` and `/etc/resolv.conf` are written.
    pub etc_files_ready: bool,
    /// While the address or connectivity is not ready: what the operators say they wait on
    /// (`dhcp4/eth0: no offer`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    #[test]
    fn route_ids_match_talos_examples() {
        let gw: IpAddr = "172.20.0.1".parse().unwrap();
        assert_eq!(
            route_id(RoutingTable::MAIN, Family::Inet4, None, Some(&gw), 1024, "eth0"),
            "inet4/172.20.0.1//1024"
        );
        let dst = net("172.20.0.1/32");
        assert_eq!(
            route_id(RoutingTable::MAIN, Family::Inet4, Some(&dst), None, 1024, ""),
            "inet4//172.20.0.1/32/1024"
        );
        let gw6: IpAddr = "2001:db8::1".parse().unwrap();
        assert_eq!(
            route_id(RoutingTable::MAIN, Family::Inet6, None, Some(&gw6), 1024, "eth2"),
            "eth2/inet6/2001:db8::1//1024"
        );
        assert_eq!(
            route_id(RoutingTable(180), Family::Inet4, None, None, 1, "kubespan"),
            "180/inet4///1"
        );
        assert_eq!(
            route_id(RoutingTable(180), Family::Inet6, None, None, 1, "kubespan"),
            "180/kubespan/inet6///1"
        );
        let lo = net("127.0.0.0/8");
        assert_eq!(
            route_id(RoutingTable::LOCAL, Family::Inet4, Some(&lo), None, 0, "lo"),
            "local/inet4//127.0.0.0/8/0"
        );
        let zero = net("0.0.0.0/0");
        let zgw: IpAddr = "0.0.0.0".parse().unwrap();
        assert_eq!(
            route_id(RoutingTable::MAIN, Family::Inet4, Some(&zero), Some(&zgw), 5, ""),
            "inet4///5"
        );
    }

    #[test]
    fn other_ids() {
        assert_eq!(address_id("eth0", &net("10.0.0.5/24")), "eth0/10.0.0.5/24");
        assert_eq!(
            layered_id(ConfigLayer::Cmdline, "eth1/172.20.0.2/24"),
            "cmdline/eth1/172.20.0.2/24"
        );
        let vip: IpAddr = "10.5.0.50".parse().unwrap();
        assert_eq!(operator_id(Operator::Vip, "eth0", Some(&vip)), "vip/eth0/10.5.0.50");
        assert_eq!(operator_id(Operator::Dhcp4, "eth0", None), "dhcp4/eth0");
        assert_eq!(routing_rule_id(Family::Inet4, 32500), "inet4/32500");
        assert_eq!(routing_rule_id(Family::Inet6, 100), "inet6/00100");
        assert_eq!(
            operator_output_id("dhcp4/eth0", "eth0/172.20.0.2/24"),
            "dhcp4/eth0/eth0/172.20.0.2/24"
        );
    }

    #[test]
    fn normalize_routes() {
        let mut r = RouteSpec::new(Family::Inet4, ConfigLayer::Configuration);
        r.dst = Some(net("0.0.0.0/0"));
        r.gateway = Some("10.0.0.1".parse().unwrap());
        r.normalize();
        assert_eq!((r.dst, r.scope), (None, Scope::GLOBAL));

        let mut r = RouteSpec::new(Family::Inet4, ConfigLayer::Configuration);
        r.dst = Some(net("10.1.0.0/16"));
        r.normalize();
        assert_eq!(r.scope, Scope::LINK);

        let mut r = RouteSpec::new(Family::Inet4, ConfigLayer::Configuration);
        r.dst = Some(net("2001:db8::/64"));
        r.normalize();
        assert_eq!(
            (r.family, r.scope),
            (Family::Inet6, Scope::GLOBAL),
            "kernel reports v6 routes as global"
        );

        let mut r = RouteSpec::new(Family::Inet4, ConfigLayer::Configuration);
        r.dst = Some(net("127.0.0.0/8"));
        r.normalize();
        assert_eq!(r.scope, Scope::HOST);
    }

    #[test]
    fn vlan_names() {
        assert_eq!(vlan_link_name("eth0", 100), "eth0.100");
        assert_eq!(vlan_link_name("enxa", 4095), "enxa.4095");
        let long = vlan_link_name("enp0s31f6abcd", 5);
        assert!(
            long.starts_with("enp0") && long.ends_with(".5") && long.len() == 4 + 6 + 2,
            "{long}"
        );
    }

    #[test]
    fn fqdn_parsing() {
        let h = HostnameSpec::parse_fqdn("node-1.example.org", ConfigLayer::Cmdline).unwrap();
        assert_eq!((h.hostname.as_str(), h.domainname.as_str()), ("node-1", "example.org"));
        assert_eq!(h.fqdn(), "node-1.example.org");
        assert!(HostnameSpec::parse_fqdn("", ConfigLayer::Cmdline).is_err());
        assert!(HostnameSpec::parse_fqdn(&"a".repeat(64), ConfigLayer::Cmdline).is_err());
        let long = format!("a.{}", "b".repeat(253));
        assert!(matches!(
            HostnameSpec::parse_fqdn(&long, ConfigLayer::Cmdline),
            Err(HostnameError::TooLong { .. })
        ));
    }

    #[test]
    fn bond_defaults() {
        let mut b = BondMasterSpec { mode: BondMode::LACP, ..Default::default() };
        b.fill_defaults();
        assert!(b.use_carrier);
        assert_eq!(
            (b.ad_actor_sys_prio, b.missed_max, b.tlb_dynamic_lb, b.resend_igmp),
            (65535, 0, 1, 1)
        );
        let mut b = BondMasterSpec { mode: BondMode::BALANCE_ALB, ..Default::default() };
        b.fill_defaults();
        assert_eq!((b.tlb_dynamic_lb, b.missed_max), (0, 0));
        let mut b = BondMasterSpec::default();
        b.fill_defaults();
        assert_eq!(b.missed_max, 2);
    }

    #[test]
    fn client_identifier_parse() {
        assert_eq!("mac".parse::<ClientIdentifier>().unwrap(), ClientIdentifier::Mac);
        assert_eq!(
            "00:01:02:03".parse::<ClientIdentifier>().unwrap(),
            ClientIdentifier::Duid("00010203".into())
        );
        assert!("xyz".parse::<ClientIdentifier>().is_err());
    }

    #[test]
    fn link_is_up_reads_the_up_flag_only() {
        let with = |flags: &str| LinkStatus { flags: flags.into(), ..Default::default() };
        assert!(with("UP,BROADCAST,RUNNING,MULTICAST,LOWER_UP").is_up());
        assert!(with("BROADCAST,UP").is_up());
        assert!(!with("BROADCAST,MULTICAST,LOWER_UP").is_up());
        assert!(!with("").is_up());
    }
}
