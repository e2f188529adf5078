// SPDX-License-Identifier: Apache-2.0
//! `BondConfig`: a bond over a set of links (Talos's
//! `pkg/machinery/config/types/network/bond.go`). Settings left out take the kernel's
//! defaults, as in the v1alpha1 form.

use std::borrow::Cow;
use std::net::{IpAddr, Ipv4Addr};

use serde::{Deserialize, Serialize};

use super::link_common::{check_name, check_refs, legacy_link_conflict, link_document};
use super::link_names::LinkNames;
use super::{Body, Legacy, Problems, LINK_KINDS};
use crate::config::locate::YamlPath;
use crate::config::machine::TalosKey;
use crate::config::scalar::{
    self, AdSelectName, ArpAllTargetsName, ArpValidateName, BondModeName, FailOverMacName, Ip,
    LacpRateName, PrimaryReselectName, XmitHashPolicyName,
};
use crate::config::specs::Specs;
use crate::resource::{
    AdSelect, ArpAllTargets, ArpValidate, BondMasterSpec, BondMode, BondSlave, BondXmitHashPolicy,
    FailOverMac, HardwareAddr, LacpRate, LinkType, PrimaryReselect,
};

link_document! {
    /// `kind: BondConfig`.
    #[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct BondConfig {
        #[serde(default, rename = "apiVersion", skip_serializing)]
        pub(crate) api_version: TalosKey,
        #[serde(default, skip_serializing)]
        pub(crate) kind: TalosKey,
        /// `name`: the bond to create.
        pub name: String,
        /// `hardwareAddr`: the bond's MAC; absent takes the first member's.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub hardware_addr: Option<HardwareAddr>,
        /// `links`: the members, in enslaving order, by name, alias or altname.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub links: Vec<String>,
        /// `bondMode`: required.
        #[serde(default, deserialize_with = "scalar::opt::<BondModeName, _>", skip_serializing_if = "Option::is_none")]
        pub bond_mode: Option<BondMode>,
        /// `miimon`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub miimon: Option<u32>,
        /// `updelay`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub updelay: Option<u32>,
        /// `downdelay`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub downdelay: Option<u32>,
        /// `useCarrier`: absent is on.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub use_carrier: Option<bool>,
        /// `xmitHashPolicy`.
        #[serde(default, deserialize_with = "scalar::opt::<XmitHashPolicyName, _>", skip_serializing_if = "Option::is_none")]
        pub xmit_hash_policy: Option<BondXmitHashPolicy>,
        /// `arpInterval`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub arp_interval: Option<u32>,
        /// `arpIpTargets`: IPv4 ARP monitoring targets.
        #[serde(default, deserialize_with = "scalar::list::<Ip, _>", skip_serializing_if = "Vec::is_empty")]
        pub arp_ip_targets: Vec<IpAddr>,
        /// `nsIp6Targets`: IPv6 neighbour-solicitation targets (not applied yet: warned).
        #[serde(default, rename = "nsIp6Targets", deserialize_with = "scalar::list::<Ip, _>", skip_serializing_if = "Vec::is_empty")]
        pub ns_ip6_targets: Vec<IpAddr>,
        /// `arpValidate`.
        #[serde(default, deserialize_with = "scalar::opt::<ArpValidateName, _>", skip_serializing_if = "Option::is_none")]
        pub arp_validate: Option<ArpValidate>,
        /// `arpAllTargets`.
        #[serde(default, deserialize_with = "scalar::opt::<ArpAllTargetsName, _>", skip_serializing_if = "Option::is_none")]
        pub arp_all_targets: Option<ArpAllTargets>,
        /// `lacpRate`.
        #[serde(default, deserialize_with = "scalar::opt::<LacpRateName, _>", skip_serializing_if = "Option::is_none")]
        pub lacp_rate: Option<LacpRate>,
        /// `failOverMac`.
        #[serde(default, deserialize_with = "scalar::opt::<FailOverMacName, _>", skip_serializing_if = "Option::is_none")]
        pub fail_over_mac: Option<FailOverMac>,
        /// `adSelect`.
        #[serde(default, deserialize_with = "scalar::opt::<AdSelectName, _>", skip_serializing_if = "Option::is_none")]
        pub ad_select: Option<AdSelect>,
        /// `adActorSysPrio`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub ad_actor_sys_prio: Option<u16>,
        /// `adUserPortKey`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub ad_user_port_key: Option<u16>,
        /// `adLACPActive`: `on` (the kernel's default) or `off`.
        #[serde(default, rename = "adLACPActive", skip_serializing_if = "Option::is_none")]
        pub ad_lacp_active: Option<String>,
        /// `primary`: the member that is active whenever its link is up (active-backup,
        /// balance-tlb and balance-alb); by name, alias or altname, as in `links`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub primary: Option<String>,
        /// `primaryReselect`.
        #[serde(default, deserialize_with = "scalar::opt::<PrimaryReselectName, _>", skip_serializing_if = "Option::is_none")]
        pub primary_reselect: Option<PrimaryReselect>,
        /// `resendIGMP`.
        #[serde(default, rename = "resendIGMP", skip_serializing_if = "Option::is_none")]
        pub resend_igmp: Option<u32>,
        /// `minLinks`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub min_links: Option<u32>,
        /// `lpInterval`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub lp_interval: Option<u32>,
        /// `packetsPerSlave`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub packets_per_slave: Option<u32>,
        /// `numPeerNotif`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub num_peer_notif: Option<u8>,
        /// `tlbLogicalLb`.
        #[serde(default, rename = "tlbLogicalLb", skip_serializing_if = "Option::is_none")]
        pub tlb_dynamic_lb: Option<u8>,
        /// `allSlavesActive`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub all_slaves_active: Option<u8>,
        /// `peerNotifDelay`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub peer_notif_delay: Option<u32>,
        /// `missedMax`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub missed_max: Option<u8>,
    }
}

impl BondConfig {
    fn arp_targets(&self) -> Vec<Ipv4Addr> {
        self.arp_ip_targets
            .iter()
            .filter_map(|ip| match ip {
                IpAddr::V4(v4) => Some(*v4),
                IpAddr::V6(_) => None,
            })
            .collect()
    }

    /// Modes in which the kernel has a primary member (its `bond_uses_primary`).
    fn uses_primary(&self) -> bool {
        matches!(
            self.bond_mode,
            Some(BondMode::ACTIVE_BACKUP | BondMode::BALANCE_TLB | BondMode::BALANCE_ALB)
        )
    }

    /// Talos's checks on `primary` (`validatePrimary`).
    fn check_primary(&self, p: &mut Problems) {
        let Some(primary) = &self.primary else {
            if self.primary_reselect.is_some() && self.uses_primary() {
                p.warn(
                    YamlPath::keys("primaryReselect"),
                    "primaryReselect has no effect unless primary is specified",
                );
            }
            return;
        };
        let path = YamlPath::keys("primary");
        if primary.is_empty() {
            p.error(path, "primary link name can't be empty");
        } else if !self.links.contains(primary) {
            p.error(path, "primary link is not in the list of bonded links");
        } else if let Some(mode) = self.bond_mode.filter(|_| !self.uses_primary()) {
            p.error(path, format!("primary link is not supported in {mode} bond mode"));
        }
    }

    /// The bond's settings, with the kernel's defaults where the document is silent.
    pub fn master(&self) -> BondMasterSpec {
        let mut spec = BondMasterSpec {
            mode: self.bond_mode.unwrap_or_default(),
            xmit_hash_policy: self.xmit_hash_policy.unwrap_or_default(),
            lacp_rate: self.lacp_rate.unwrap_or_default(),
            arp_validate: self.arp_validate.unwrap_or_default(),
            arp_all_targets: self.arp_all_targets.unwrap_or_default(),
            primary: String::new(),
            primary_reselect: self.primary_reselect.unwrap_or_default(),
            fail_over_mac: self.fail_over_mac.unwrap_or_default(),
            ad_select: self.ad_select.unwrap_or_default(),
            mii_mon: self.miimon.unwrap_or(0),
            up_delay: self.updelay.unwrap_or(0),
            down_delay: self.downdelay.unwrap_or(0),
            arp_interval: self.arp_interval.unwrap_or(0),
            resend_igmp: self.resend_igmp.unwrap_or(0),
            min_links: self.min_links.unwrap_or(0),
            lp_interval: self.lp_interval.unwrap_or(0),
            packets_per_slave: self.packets_per_slave.unwrap_or(0),
            num_peer_notif: self.num_peer_notif.unwrap_or(0),
            tlb_dynamic_lb: self.tlb_dynamic_lb.unwrap_or(0),
            all_slaves_active: self.all_slaves_active.unwrap_or(0),
            use_carrier: true,
            ad_actor_sys_prio: self.ad_actor_sys_prio.unwrap_or(0),
            ad_user_port_key: self.ad_user_port_key.unwrap_or(0),
            peer_notify_delay: self.peer_notif_delay.unwrap_or(0),
            arp_ip_targets: self.arp_targets(),
            missed_max: self.missed_max.unwrap_or(0),
        };
        spec.fill_defaults();
        spec.use_carrier = self.use_carrier.unwrap_or(true);
        spec
    }
}

impl Body for BondConfig {
    fn name(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(&self.name))
    }

    fn conflicts_with(&self) -> &'static [&'static str] {
        LINK_KINDS
    }

    fn check(&self, p: &mut Problems) {
        check_name(&self.name, true, p);
        if self.links.is_empty() {
            p.error(YamlPath::keys("links"), "at least one link must be specified");
        }
        check_refs("links", &self.links, p);
        if self.links.contains(&self.name) {
            p.error(YamlPath::keys("links"), "a bond cannot be its own member");
        }
        match self.bond_mode {
            None => p.error(YamlPath::keys("bondMode"), "bond mode must be specified"),
            Some(BondMode::LACP) => {
                for (key, set) in [
                    ("miimon", self.miimon.is_some()),
                    ("updelay", self.updelay.is_some()),
                    ("downdelay", self.downdelay.is_some()),
                ] {
                    if !set {
                        p.warn(
                            YamlPath::keys("bondMode"),
                            format!("{key} was not specified for 802.3ad bond"),
                        );
                    }
                }
            }
            Some(_) => {}
        }
        for (i, ip) in self.arp_ip_targets.iter().enumerate() {
            if ip.is_ipv6() {
                p.error(YamlPath::keys("arpIpTargets").index(i), "ARP targets are IPv4 addresses");
            }
        }
        if self.arp_ip_targets.len() > 16 {
            p.error(YamlPath::keys("arpIpTargets"), "at most 16 ARP targets");
        }
        if !self.ns_ip6_targets.is_empty() {
            p.warn(
                YamlPath::keys("nsIp6Targets"),
                "IPv6 NS targets are not applied by keelson yet",
            );
        }
        self.check_primary(p);
        match self.ad_lacp_active.as_deref() {
            None | Some("on") => {}
            Some("off") => p.warn(
                YamlPath::keys("adLACPActive"),
                "adLACPActive off is not applied by keelson yet",
            ),
            Some(_) => p.error(YamlPath::keys("adLACPActive"), "adLACPActive is on or off"),
        }
        self.common().check(p);
    }

    fn add_specs(&self, out: &mut Specs, links: &LinkNames<'_, '_>) {
        let common = self.common();
        let mut link = common.logical_link(&self.name, "bond", LinkType::ETHER);
        link.hardware_addr = self.hardware_addr.clone();
        let mut master = self.master();
        // Resolved like the members, so an alias in `links` and `primary` names one link.
        master.primary = self.primary.as_deref().map(|p| links.resolve(p)).unwrap_or_default();
        link.bond_master = Some(master);
        out.link_settings(link);
        for (index, member) in self.links.iter().enumerate() {
            let member = links.resolve(member);
            if member == self.name {
                continue;
            }
            out.member(&member, |spec| {
                spec.bond_slave = Some(BondSlave {
                    master_name: self.name.clone(),
                    slave_index: u32::try_from(index).unwrap_or(u32::MAX),
                });
            });
        }
        common.add_addresses_and_routes(&self.name, out);
    }

    fn legacy_conflict(&self, legacy: &Legacy<'_>) -> Option<(&'static str, String)> {
        legacy_link_conflict(&self.name, legacy)
    }

    fn configures_links(&self) -> bool {
        true
    }
}
