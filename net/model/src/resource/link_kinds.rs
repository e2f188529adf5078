// SPDX-License-Identifier: Apache-2.0
//! Per-kind link settings a [`LinkSpec`](super::LinkSpec) carries: bond, bridge, VLAN and veth.

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use super::nethelpers::{named_number, serde_via_str, RoutingTable};

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

/// Membership of a VRF.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VrfSlave {
    /// The VRF's name.
    pub master_name: String,
}

/// VRF settings: the routing table its members' routes go to.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VrfMasterSpec {
    /// The table.
    pub table: RoutingTable,
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
