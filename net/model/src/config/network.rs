// SPDX-License-Identifier: Apache-2.0
//! `machine.network`: devices, VLANs, bonds, bridges, resolvers, KubeSpan.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use crate::resource::{
    AdSelect, ArpAllTargets, ArpValidate, BondMode, BondXmitHashPolicy, FailOverMac, LacpRate,
    PrimaryReselect, RoutingTable,
};

use super::documents::AutoHostname;
use super::scalar::{self, *};

/// `machine.network`.
#[derive(Clone, PartialEq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetworkConfig {
    /// Static hostname, possibly fully qualified (`node-1.example.org`).
    #[serde(default, deserialize_with = "scalar::opt::<Hostname, _>")]
    pub hostname: Option<String>,
    /// Network devices.
    #[serde(default)]
    pub interfaces: Vec<Device>,
    /// DNS servers.
    #[serde(default, deserialize_with = "scalar::list::<Ip, _>")]
    pub nameservers: Vec<IpAddr>,
    /// Search domains; `Some` when the key is present, even empty (it then clears lower
    /// layers' domains).
    #[serde(default, deserialize_with = "scalar::opt_list::<Domain, _>")]
    pub search_domains: Option<Vec<String>>,
    /// Do not derive a search domain from the hostname's domain.
    #[serde(default)]
    pub disable_search_domain: bool,
    /// Extra `/etc/hosts` entries.
    #[serde(default)]
    pub extra_host_entries: Vec<ExtraHost>,
    /// KubeSpan.
    #[serde(default)]
    pub kubespan: KubeSpanConfig,
    /// How a hostname is made up when nothing sets one: only a `HostnameConfig` document
    /// changes it from `addr`.
    #[serde(skip_deserializing, skip_serializing_if = "is_addr")]
    pub auto_hostname: AutoHostname,
}

fn is_addr(auto: &AutoHostname) -> bool {
    *auto == AutoHostname::Addr
}

/// One extra `/etc/hosts` line.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtraHost {
    /// The address.
    #[serde(deserialize_with = "scalar::one::<Ip, _>")]
    pub ip: IpAddr,
    /// Names for it.
    #[serde(default, deserialize_with = "scalar::list::<Domain, _>")]
    pub aliases: Vec<String>,
}

/// A network device (`machine.network.interfaces[]`): named by `interface` or found by
/// `deviceSelector`, exactly one of the two.
#[derive(Clone, PartialEq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Device {
    /// Link name (or alias, or altname).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
    /// Find the link by its properties instead of its name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_selector: Option<DeviceSelector>,
    /// Static addresses; a bare IP means a full-length prefix.
    #[serde(default, deserialize_with = "scalar::list::<CidrOrIp, _>")]
    pub addresses: Vec<IpNet>,
    /// Deprecated single address (Talos reads it when `addresses` is empty; both is an
    /// error). Use [`Device::all_addresses`].
    #[serde(
        default,
        deserialize_with = "scalar::opt::<CidrOrIp, _>",
        skip_serializing_if = "Option::is_none"
    )]
    pub cidr: Option<IpNet>,
    /// Static routes.
    #[serde(default)]
    pub routes: Vec<Route>,
    /// MTU; 0 leaves it alone.
    #[serde(default)]
    pub mtu: u32,
    /// Run DHCP.
    #[serde(default)]
    pub dhcp: bool,
    /// DHCP settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dhcp_options: Option<DhcpOptions>,
    /// Leave this device alone entirely.
    #[serde(default)]
    pub ignore: bool,
    /// VLANs on top of this device.
    #[serde(default)]
    pub vlans: Vec<Vlan>,
    /// Make this device a bond.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bond: Option<Bond>,
    /// Make this device a bridge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bridge: Option<Bridge>,
    /// Make this device a port of a bridge configured elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bridge_port: Option<BridgePort>,
    /// Create this device as a dummy link.
    #[serde(default)]
    pub dummy: bool,
    /// Create this device as a WireGuard link (not KubeSpan's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wireguard: Option<DeviceWireguard>,
    /// A shared virtual IP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vip: Option<Vip>,
}

impl Device {
    /// The static addresses: `addresses`, or the deprecated `cidr` when that is empty.
    pub fn all_addresses(&self) -> Vec<IpNet> {
        match (&self.addresses[..], self.cidr) {
            ([], Some(cidr)) => vec![cidr],
            (list, _) => list.to_vec(),
        }
    }
}

/// `bridgePort`: the bridge this device is a port of.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BridgePort {
    /// The bridge (name, alias or altname).
    pub master: String,
}

/// `wireguard` on a device: a WireGuard link configured by hand.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeviceWireguard {
    /// The link's private key (base64); shown as `<redacted>`.
    #[serde(deserialize_with = "scalar::one::<WgKey, _>")]
    pub private_key: crate::wgkey::Key,
    /// UDP listen port; 0 lets the kernel pick one.
    #[serde(default)]
    pub listen_port: u16,
    /// Mark put on the link's own encrypted packets; 0 is none.
    #[serde(default)]
    pub firewall_mark: u32,
    /// Peers.
    #[serde(default)]
    pub peers: Vec<DeviceWireguardPeer>,
}

/// One peer of a device's WireGuard link.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeviceWireguardPeer {
    /// Its public key (base64).
    #[serde(deserialize_with = "scalar::one::<WgKeyPublic, _>")]
    pub public_key: String,
    /// Where it can be reached (`ip:port`, `[v6]:port`).
    #[serde(
        default,
        deserialize_with = "scalar::opt::<Endpoint, _>",
        skip_serializing_if = "Option::is_none"
    )]
    pub endpoint: Option<SocketAddr>,
    /// Keepalive interval (Go-style duration, whole seconds up to 65535); absent is off.
    #[serde(
        default,
        deserialize_with = "scalar::opt::<GoDuration, _>",
        serialize_with = "scalar::serialize_opt_duration",
        skip_serializing_if = "Option::is_none"
    )]
    pub persistent_keepalive_interval: Option<Duration>,
    /// Prefixes routed to and accepted from it.
    #[serde(rename = "allowedIPs", default, deserialize_with = "scalar::list::<Cidr, _>")]
    pub allowed_ips: Vec<IpNet>,
}

/// Properties that pick a link; every given field must match.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeviceSelector {
    /// Current MAC, a glob (`00:1a:*`).
    #[serde(default, deserialize_with = "scalar::opt::<MacGlob, _>")]
    pub hardware_addr: Option<String>,
    /// Permanent MAC, a glob.
    #[serde(default, deserialize_with = "scalar::opt::<MacGlob, _>")]
    pub permanent_addr: Option<String>,
    /// Kernel driver, exact.
    #[serde(default)]
    pub driver: Option<String>,
    /// Bus path, a glob (`00:01.0*`).
    #[serde(default)]
    pub bus_path: Option<String>,
    /// Physical (ether without a kind) or not.
    #[serde(default)]
    pub physical: Option<bool>,
    /// PCI vendor and device ID (`8086:100E`), a glob, any case.
    #[serde(rename = "pciID", default)]
    pub pci_id: Option<String>,
}

impl DeviceSelector {
    /// No field given: such a selector would match every link, which is never meant.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// A static route.
#[derive(Clone, PartialEq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Route {
    /// Destination; absent means the default route.
    #[serde(default, deserialize_with = "scalar::opt::<Cidr, _>")]
    pub network: Option<IpNet>,
    /// Next hop.
    #[serde(default, deserialize_with = "scalar::opt::<Ip, _>")]
    pub gateway: Option<IpAddr>,
    /// Preferred source address.
    #[serde(default, deserialize_with = "scalar::opt::<Ip, _>")]
    pub source: Option<IpAddr>,
    /// Metric; 0 means 1024.
    #[serde(default)]
    pub metric: u32,
    /// Route MTU; 0 leaves it unset.
    #[serde(default)]
    pub mtu: u32,
    /// Routing table (keelson addition): a number or main/local/default; default main.
    #[serde(default, deserialize_with = "scalar::opt::<Table, _>")]
    pub table: Option<RoutingTable>,
}

/// DHCP settings of a device or VLAN.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DhcpOptions {
    /// Metric of DHCP routes; 0 means 1024.
    #[serde(default)]
    pub route_metric: u32,
    /// Run DHCPv4 (default true).
    #[serde(default)]
    pub ipv4: Option<bool>,
    /// Run DHCPv6 (default false).
    #[serde(default)]
    pub ipv6: Option<bool>,
    /// DHCPv6 DUID as bare lowercase hex; absent lets the client pick (DUID-LLT).
    #[serde(default, deserialize_with = "scalar::opt::<DuidHex, _>")]
    pub duidv6: Option<String>,
}

impl DhcpOptions {
    /// DHCPv4 on (the default).
    pub fn ipv4(&self) -> bool {
        self.ipv4.unwrap_or(true)
    }

    /// DHCPv6 on (default off).
    pub fn ipv6(&self) -> bool {
        self.ipv6.unwrap_or(false)
    }
}

/// A VLAN on a device.
#[derive(Clone, PartialEq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Vlan {
    /// VLAN ID, 1 to 4094.
    #[serde(deserialize_with = "scalar::one::<VlanId, _>")]
    pub vlan_id: u16,
    /// Static addresses, in CIDR notation only.
    #[serde(default, deserialize_with = "scalar::list::<Cidr, _>")]
    pub addresses: Vec<IpNet>,
    /// Deprecated single address, as on a device. Use [`Vlan::all_addresses`].
    #[serde(
        default,
        deserialize_with = "scalar::opt::<Cidr, _>",
        skip_serializing_if = "Option::is_none"
    )]
    pub cidr: Option<IpNet>,
    /// Static routes.
    #[serde(default)]
    pub routes: Vec<Route>,
    /// Run DHCP.
    #[serde(default)]
    pub dhcp: bool,
    /// DHCP settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dhcp_options: Option<DhcpOptions>,
    /// MTU; 0 leaves it alone.
    #[serde(default)]
    pub mtu: u32,
    /// A shared virtual IP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vip: Option<Vip>,
}

impl Vlan {
    /// The static addresses: `addresses`, or the deprecated `cidr` when that is empty.
    pub fn all_addresses(&self) -> Vec<IpNet> {
        match (&self.addresses[..], self.cidr) {
            ([], Some(cidr)) => vec![cidr],
            (list, _) => list.to_vec(),
        }
    }
}

/// A shared virtual IP (layer 2, announced with gratuitous ARP).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Vip {
    /// The address.
    #[serde(deserialize_with = "scalar::one::<Ip, _>")]
    pub ip: IpAddr,
}

/// Bond settings; kernel names as in `/sys/class/net/<bond>/bonding`.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Bond {
    /// Member links by name.
    #[serde(default)]
    pub interfaces: Vec<String>,
    /// Member links by selector (after `interfaces` in enslaving order); every link a
    /// selector matches joins, except the bond itself.
    #[serde(default)]
    pub device_selectors: Vec<DeviceSelector>,
    /// 802.3ad actor system MAC: parsed so that it is refused with Talos's reason (Talos does
    /// not support it either).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ad_actor_system: Option<String>,
    /// ARP monitoring targets.
    #[serde(default, rename = "arpIPTarget", deserialize_with = "scalar::list::<Ipv4, _>")]
    pub arp_ip_target: Vec<Ipv4Addr>,
    /// Mode (`balance-rr`, `active-backup`, `802.3ad`, ...).
    #[serde(default, deserialize_with = "scalar::one::<BondModeName, _>")]
    pub mode: BondMode,
    /// Transmit hash policy.
    #[serde(default, deserialize_with = "scalar::one::<XmitHashPolicyName, _>")]
    pub xmit_hash_policy: BondXmitHashPolicy,
    /// LACP rate; `Some` when written, since Talos refuses it outside 802.3ad even with its
    /// default value (absent means slow).
    #[serde(
        default,
        deserialize_with = "scalar::opt::<LacpRateName, _>",
        skip_serializing_if = "Option::is_none"
    )]
    pub lacp_rate: Option<LacpRate>,
    /// ARP validation; `Some` when written, since Talos refuses it in the modes without ARP
    /// monitoring even with its default value (absent means none).
    #[serde(
        default,
        deserialize_with = "scalar::opt::<ArpValidateName, _>",
        skip_serializing_if = "Option::is_none"
    )]
    pub arp_validate: Option<ArpValidate>,
    /// ARP all targets.
    #[serde(default, deserialize_with = "scalar::one::<ArpAllTargetsName, _>")]
    pub arp_all_targets: ArpAllTargets,
    /// Primary member.
    #[serde(default)]
    pub primary: String,
    /// Primary reselect policy.
    #[serde(default, deserialize_with = "scalar::one::<PrimaryReselectName, _>")]
    pub primary_reselect: PrimaryReselect,
    /// Fail-over MAC policy.
    #[serde(default, deserialize_with = "scalar::one::<FailOverMacName, _>")]
    pub fail_over_mac: FailOverMac,
    /// 802.3ad aggregator selection.
    #[serde(default, deserialize_with = "scalar::one::<AdSelectName, _>")]
    pub ad_select: AdSelect,
    /// MII monitoring interval (ms).
    #[serde(default)]
    pub miimon: u32,
    /// Up delay (ms).
    #[serde(default)]
    pub updelay: u32,
    /// Down delay (ms).
    #[serde(default)]
    pub downdelay: u32,
    /// ARP interval (ms).
    #[serde(default)]
    pub arp_interval: u32,
    /// IGMP reports after failover.
    #[serde(default)]
    pub resend_igmp: u32,
    /// Minimum links for carrier.
    #[serde(default)]
    pub min_links: u32,
    /// Learning packet interval.
    #[serde(default)]
    pub lp_interval: u32,
    /// Packets per member (balance-rr).
    #[serde(default)]
    pub packets_per_slave: u32,
    /// Peer notifications after failover.
    #[serde(default)]
    pub num_peer_notif: u8,
    /// TLB dynamic load balancing.
    #[serde(default)]
    pub tlb_dynamic_lb: u8,
    /// Deliver duplicate frames on all members.
    #[serde(default)]
    pub all_slaves_active: u8,
    /// Use carrier for link monitoring (default true).
    #[serde(default)]
    pub use_carrier: Option<bool>,
    /// 802.3ad actor system priority.
    #[serde(default)]
    pub ad_actor_sys_prio: u16,
    /// 802.3ad user port key.
    #[serde(default)]
    pub ad_user_port_key: u16,
    /// Peer notify delay (ms).
    #[serde(default)]
    pub peer_notify_delay: u32,
}

/// Bridge settings.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Bridge {
    /// Member links by name.
    #[serde(default)]
    pub interfaces: Vec<String>,
    /// Spanning tree.
    #[serde(default)]
    pub stp: Option<BridgeStp>,
    /// VLAN filtering.
    #[serde(default)]
    pub vlan: Option<BridgeVlan>,
}

/// `bridge.stp`. STP is on unless `enabled: false` says otherwise: a legacy bridge without
/// `stp`, or with `stp: {}`, runs STP (Talos's v1alpha1 `STP.Enabled()`; the typed
/// `BridgeConfig` defaults to off instead).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BridgeStp {
    /// STP on (default true).
    #[serde(default = "stp_default")]
    pub enabled: bool,
}

fn stp_default() -> bool {
    true
}

impl Default for BridgeStp {
    fn default() -> Self {
        Self { enabled: stp_default() }
    }
}

impl Bridge {
    /// Is STP on? Absent `stp` means on.
    pub fn stp_enabled(&self) -> bool {
        self.stp.as_ref().is_none_or(|s| s.enabled)
    }
}

/// `bridge.vlan`.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BridgeVlan {
    /// VLAN filtering on.
    #[serde(default)]
    pub vlan_filtering: bool,
}

/// The KubeSpan MTU Talos uses when none is given (CONST `KubeSpanLinkMTU`).
pub const KUBESPAN_DEFAULT_MTU: u32 = 1420;

fn kubespan_default_mtu() -> u32 {
    KUBESPAN_DEFAULT_MTU
}

/// `machine.network.kubespan` (docs/talos.md: KubeSpan), plus keelson's `peers`, `privateKey` and
/// `endpointTimeout`.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubeSpanConfig {
    /// KubeSpan on.
    #[serde(default)]
    pub enabled: bool,
    /// Link MTU, at least 1280; default 1420.
    #[serde(default = "kubespan_default_mtu", deserialize_with = "scalar::one::<KubeSpanMtu, _>")]
    pub mtu: u32,
    /// Let traffic bypass KubeSpan while a peer is down (`ForceRouting = !this`).
    #[serde(default)]
    pub allow_down_peer_bypass: bool,
    /// Advertise pod CIDRs over KubeSpan.
    #[serde(default)]
    pub advertise_kubernetes_networks: bool,
    /// Publish the endpoints this node sees its peers use, for them (discovery service).
    #[serde(default)]
    pub harvest_extra_endpoints: bool,
    /// Endpoint and network filters.
    #[serde(default)]
    pub filters: KubeSpanFilters,
    /// keelson: how long one endpoint gets to complete a handshake before the next is tried.
    #[serde(
        default = "kubespan_default_endpoint_timeout",
        deserialize_with = "scalar::one::<EndpointTimeout, _>",
        serialize_with = "scalar::serialize_duration"
    )]
    pub endpoint_timeout: Duration,
    /// keelson: the node's WireGuard private key (base64); absent, one is generated and kept
    /// in the state directory.
    #[serde(
        default,
        deserialize_with = "scalar::opt::<WgKey, _>",
        skip_serializing_if = "Option::is_none"
    )]
    pub private_key: Option<crate::wgkey::Key>,
    /// keelson: peers known in advance, beside those the discovery service brings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peers: Vec<KubeSpanPeer>,
    /// keelson: the name of the `inet` nftables table KubeSpan owns.
    #[serde(
        default = "kubespan_default_nftables_table",
        deserialize_with = "scalar::one::<NftTableName, _>"
    )]
    pub nftables_table: String,
    /// Endpoints announced beyond the node's own addresses (a `KubeSpanEndpointsConfig`
    /// document), published through the discovery service.
    #[serde(skip_deserializing, skip_serializing_if = "Vec::is_empty")]
    pub extra_announced_endpoints: Vec<SocketAddr>,
}

/// The nftables table KubeSpan owns unless configured otherwise (the name Talos documents for
/// KubeSpan's table).
pub const KUBESPAN_DEFAULT_NFTABLES_TABLE: &str = "talos_kubespan";

fn kubespan_default_nftables_table() -> String {
    KUBESPAN_DEFAULT_NFTABLES_TABLE.to_owned()
}

/// How long an endpoint gets by default. A switch re-creates the WireGuard peer, so its first
/// handshake initiation leaves at once; WireGuard retransmits after REKEY_TIMEOUT (5 s) plus up
/// to 1/3 s of jitter. 6 s lets both initiations and their answers land, so one lost packet
/// does not move a working endpoint on. It only ever applies to an endpoint on trial: a peer
/// with a live session is never rotated. Talos's 15 s is the ceiling.
pub const KUBESPAN_DEFAULT_ENDPOINT_TIMEOUT: Duration = Duration::from_secs(6);

fn kubespan_default_endpoint_timeout() -> Duration {
    KUBESPAN_DEFAULT_ENDPOINT_TIMEOUT
}

impl Default for KubeSpanConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            mtu: KUBESPAN_DEFAULT_MTU,
            allow_down_peer_bypass: false,
            advertise_kubernetes_networks: false,
            harvest_extra_endpoints: false,
            filters: KubeSpanFilters::default(),
            endpoint_timeout: KUBESPAN_DEFAULT_ENDPOINT_TIMEOUT,
            private_key: None,
            peers: Vec::new(),
            nftables_table: kubespan_default_nftables_table(),
            extra_announced_endpoints: Vec::new(),
        }
    }
}

/// `kubespan.peers[]` (keelson): a peer known in advance.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubeSpanPeer {
    /// Its WireGuard public key (base64 of 32 bytes).
    #[serde(deserialize_with = "scalar::one::<WgKeyPublic, _>")]
    pub public_key: String,
    /// Where it can be reached, tried in this order (`ip:port`, `[v6]:port`).
    #[serde(default, deserialize_with = "scalar::list::<Endpoint, _>")]
    pub endpoints: Vec<SocketAddr>,
    /// What is routed to it: its node addresses, pod CIDRs, its KubeSpan address.
    #[serde(default, deserialize_with = "scalar::list::<CidrOrIp, _>")]
    pub addresses: Vec<IpNet>,
    /// A name for humans (its node name).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub label: String,
}

/// `kubespan.filters`.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubeSpanFilters {
    /// Which peer endpoints to use (`!` excludes).
    #[serde(default, deserialize_with = "scalar::list::<Filter, _>")]
    pub endpoints: Vec<CidrFilter>,
    /// Networks not to route over KubeSpan.
    #[serde(default, deserialize_with = "scalar::list::<Cidr, _>")]
    pub exclude_advertised_networks: Vec<IpNet>,
}
