// SPDX-License-Identifier: Apache-2.0
//! Bond settings: [`BondMasterSpec`] to and from `IFLA_BOND_*` attributes.

use netlink_packet_route::link::{
    BondAdSelect, BondAllPortActive, BondArpAllTargets, BondArpValidate, BondFailOverMac,
    BondLacpRate, BondMode as NlBondMode, BondPrimaryReselect, BondXmitHashPolicy, InfoBond,
};

use crate::resource::{
    AdSelect, ArpAllTargets, ArpValidate, BondMasterSpec, BondMode, BondXmitHashPolicy as Xmit,
    FailOverMac, LacpRate, PrimaryReselect,
};

/// Decodes what the kernel reports; the primary slave comes back as an index.
pub(crate) fn decode(attrs: Vec<InfoBond>) -> (BondMasterSpec, Option<u32>) {
    let mut b = BondMasterSpec::default();
    let mut primary = None;
    for a in attrs {
        match a {
            InfoBond::Mode(m) => b.mode = BondMode(m.into()),
            InfoBond::XmitHashPolicy(v) => b.xmit_hash_policy = Xmit(v.into()),
            InfoBond::AdLacpRate(v) => b.lacp_rate = LacpRate(v.into()),
            InfoBond::ArpValidate(v) => b.arp_validate = ArpValidate(v.into()),
            InfoBond::ArpAllTargets(v) => b.arp_all_targets = ArpAllTargets(v.into()),
            InfoBond::Primary(i) if i != 0 => primary = Some(i),
            InfoBond::PrimaryReselect(v) => b.primary_reselect = PrimaryReselect(v.into()),
            InfoBond::FailOverMac(v) => b.fail_over_mac = FailOverMac(v.into()),
            InfoBond::AdSelect(v) => b.ad_select = AdSelect(v.into()),
            InfoBond::MiiMon(v) => b.mii_mon = v,
            InfoBond::UpDelay(v) => b.up_delay = v,
            InfoBond::DownDelay(v) => b.down_delay = v,
            InfoBond::ArpInterval(v) => b.arp_interval = v,
            InfoBond::ResendIgmp(v) => b.resend_igmp = v,
            InfoBond::MinLinks(v) => b.min_links = v,
            InfoBond::LpInterval(v) => b.lp_interval = v,
            InfoBond::PacketsPerPort(v) => b.packets_per_slave = v,
            InfoBond::NumPeerNotif(v) => b.num_peer_notif = v,
            InfoBond::TlbDynamicLb(v) => b.tlb_dynamic_lb = u8::from(v),
            InfoBond::AllPortsActive(v) => b.all_slaves_active = v.into(),
            InfoBond::UseCarrier(v) => b.use_carrier = v,
            InfoBond::AdActorSysPrio(v) => b.ad_actor_sys_prio = v,
            InfoBond::AdUserPortKey(v) => b.ad_user_port_key = v,
            InfoBond::PeerNotifDelay(v) => b.peer_notify_delay = v,
            InfoBond::ArpIpTarget(v) => b.arp_ip_targets = v,
            InfoBond::MissedMax(v) => b.missed_max = v,
            _ => {}
        }
    }
    (b, primary)
}

/// Encodes the settings the kernel accepts for `b.mode`.
///
/// The kernel rejects an option that does not apply to the bond's mode with EACCES
/// (`bond_opt_check_mode`, the option's `unsuppmodes` in `drivers/net/bonding/bond_options.c`),
/// even when the value is the default, so mode-specific options are only sent for their modes:
/// LACP options for 802.3ad, ARP monitoring for everything but 802.3ad/tlb/alb, `primary` for
/// active-backup/tlb/alb, `tlb_dynamic_lb` for tlb/alb, `packets_per_slave` for balance-rr.
/// `use_carrier` is only sent when false: 1 is the default and newer kernels deprecate it.
pub(crate) fn encode(b: &BondMasterSpec, primary_index: Option<u32>) -> Vec<InfoBond> {
    let mode = b.mode;
    let lacp = mode == BondMode::LACP;
    let tlb_alb = mode == BondMode::BALANCE_TLB || mode == BondMode::BALANCE_ALB;
    let arp_ok = !lacp && !tlb_alb;
    let mut v = vec![
        InfoBond::Mode(NlBondMode::from(mode.0)),
        InfoBond::XmitHashPolicy(BondXmitHashPolicy::from(b.xmit_hash_policy.0)),
        InfoBond::ArpAllTargets(BondArpAllTargets::from(b.arp_all_targets.0)),
        InfoBond::PrimaryReselect(BondPrimaryReselect::from(b.primary_reselect.0)),
        InfoBond::FailOverMac(BondFailOverMac::from(b.fail_over_mac.0)),
        InfoBond::MiiMon(b.mii_mon),
        InfoBond::UpDelay(b.up_delay),
        InfoBond::DownDelay(b.down_delay),
        InfoBond::ResendIgmp(b.resend_igmp),
        InfoBond::MinLinks(b.min_links),
        InfoBond::NumPeerNotif(b.num_peer_notif),
        InfoBond::AllPortsActive(BondAllPortActive::from(b.all_slaves_active)),
        InfoBond::PeerNotifDelay(b.peer_notify_delay),
    ];
    // lp_interval must be at least 1 ("invalid option value" otherwise): 0 leaves the
    // kernel's default, as for the other options that have a floor.
    if b.lp_interval != 0 {
        v.push(InfoBond::LpInterval(b.lp_interval));
    }
    if !b.use_carrier {
        v.push(InfoBond::UseCarrier(false));
    }
    if lacp {
        v.push(InfoBond::AdLacpRate(BondLacpRate::from(b.lacp_rate.0)));
        v.push(InfoBond::AdSelect(BondAdSelect::from(b.ad_select.0)));
        if b.ad_actor_sys_prio != 0 {
            v.push(InfoBond::AdActorSysPrio(b.ad_actor_sys_prio));
        }
        v.push(InfoBond::AdUserPortKey(b.ad_user_port_key));
    }
    if arp_ok {
        v.push(InfoBond::ArpInterval(b.arp_interval));
        v.push(InfoBond::ArpValidate(BondArpValidate::from(b.arp_validate.0)));
        if b.missed_max != 0 {
            v.push(InfoBond::MissedMax(b.missed_max));
        }
        if !b.arp_ip_targets.is_empty() {
            v.push(InfoBond::ArpIpTarget(b.arp_ip_targets.clone()));
        }
    }
    if tlb_alb {
        v.push(InfoBond::TlbDynamicLb(b.tlb_dynamic_lb != 0));
    }
    if mode == BondMode::BALANCE_RR {
        v.push(InfoBond::PacketsPerPort(b.packets_per_slave));
    }
    if let Some(p) = primary_index {
        if mode == BondMode::ACTIVE_BACKUP || tlb_alb {
            v.push(InfoBond::Primary(p));
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_round_trip() {
        let mut spec = BondMasterSpec {
            mode: BondMode::LACP,
            lacp_rate: LacpRate::FAST,
            xmit_hash_policy: Xmit::LAYER34,
            mii_mon: 100,
            up_delay: 200,
            down_delay: 200,
            ..BondMasterSpec::default()
        };
        spec.fill_defaults();
        let (back, primary) = decode(encode(&spec, None));
        assert_eq!(primary, None);
        // LACP mode does not send the ARP and tlb settings, so they decode as zero.
        let mut want = spec.clone();
        want.tlb_dynamic_lb = 0;
        want.packets_per_slave = 0;
        want.use_carrier = false;
        assert_eq!(back, want);
        let ab = BondMasterSpec { mode: BondMode::ACTIVE_BACKUP, ..BondMasterSpec::default() };
        assert!(encode(&ab, Some(7)).contains(&InfoBond::Primary(7)));
        assert!(!encode(&spec, Some(7)).contains(&InfoBond::Primary(7)));
    }
}
