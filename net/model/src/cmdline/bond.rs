// SPDX-License-Identifier: Apache-2.0
//! `bond=<name>[:<slaves>[:<options>[:<mtu>]]]` (docs/talos.md: Kernel command line).
//!
//! Slaves default to `eth0,eth1`. Options are `key=value` pairs separated by commas, with the
//! kernel's names (`mode=802.3ad,miimon=100,arp_ip_target=10.0.0.1;10.0.0.2`). Enumerated
//! options also take the kernel's number for a known value (`mode=4`), never an unknown one.
//! `use_carrier=0` is accepted but, as in Talos, `fill_defaults()` turns carrier use back on.

use std::fmt::Display;
use std::net::Ipv4Addr;
use std::str::FromStr;

use super::field::{
    check_link_ref, check_new_link_name, parse_digits, parse_mtu, Field, FieldError, Problem,
};
use crate::resource::{
    AdSelect, ArpAllTargets, ArpValidate, BondMasterSpec, BondMode, BondSlave, BondXmitHashPolicy,
    ConfigLayer, FailOverMac, LacpRate, LinkSpec, LinkType, PrimaryReselect,
};

/// The kernel keeps at most this many ARP targets (`BOND_MAX_ARP_TARGETS`).
const MAX_ARP_TARGETS: usize = 16;

const DEFAULT_SLAVES: [&str; 2] = ["eth0", "eth1"];

/// Parse one `bond=` value starting at byte `offset`; `existing` holds the links earlier
/// `bond=`/`vlan=` entries define, so that a clash rejects this entry alone.
pub(crate) fn parse(
    value: &str,
    offset: usize,
    existing: &[LinkSpec],
) -> Result<Vec<LinkSpec>, FieldError> {
    let fields = Field::new(value, offset).split(':');
    if let Some(extra) = fields.get(4) {
        return Err(FieldError::at(extra, Problem::TooManyFields(4)));
    }
    let name = fields.first().copied().unwrap_or(Field::EMPTY);
    check_new_link_name(&name, "bond name")?;
    if existing.iter().any(|l| l.name == name.text) {
        return Err(FieldError::at(
            &name,
            Problem::Conflict(format!("link {} is already defined", name.text)),
        ));
    }

    let mut bond = BondMasterSpec::default();
    if let Some(options) = fields.get(2) {
        parse_options(options, &mut bond)?;
    }
    bond.fill_defaults();
    let mtu = match fields.get(3) {
        Some(f) => parse_mtu(f)?.unwrap_or(0),
        None => 0,
    };

    let slave_fields = match fields.get(1).filter(|f| !f.is_empty()) {
        Some(f) => f.split(','),
        // Default slaves have no text of their own; errors about them point at the name.
        None => DEFAULT_SLAVES.iter().map(|s| Field::new(s, name.offset)).collect(),
    };
    let mut specs = vec![LinkSpec {
        name: name.text.to_owned(),
        logical: true,
        up: true,
        mtu,
        kind: "bond".into(),
        link_type: LinkType::ETHER,
        bond_master: Some(bond),
        layer: ConfigLayer::Cmdline,
        ..LinkSpec::default()
    }];
    for (index, slave) in slave_fields.iter().enumerate() {
        check_link_ref(slave, "bond slave")?;
        let clash = specs
            .iter()
            .chain(existing)
            .find(|l| l.name == slave.text && (l.bond_slave.is_some() || l.bond_master.is_some()));
        if let Some(other) = clash {
            let why = match other.master_name() {
                Some(master) => format!("{} is already a slave of {master}", slave.text),
                None => format!("{} is a bond itself", slave.text),
            };
            return Err(FieldError::at(slave, Problem::Conflict(why)));
        }
        specs.push(LinkSpec {
            name: slave.text.to_owned(),
            up: true,
            bond_slave: Some(BondSlave {
                master_name: name.text.to_owned(),
                slave_index: u32::try_from(index).unwrap_or(u32::MAX),
            }),
            layer: ConfigLayer::Cmdline,
            ..LinkSpec::default()
        });
    }
    Ok(specs)
}

fn parse_options(field: &Field<'_>, bond: &mut BondMasterSpec) -> Result<(), FieldError> {
    let mut seen: Vec<&str> = Vec::new();
    for option in field.split(',').into_iter().filter(|o| !o.is_empty()) {
        let Some((key, _)) = option.text.split_once('=') else {
            return Err(FieldError::invalid(&option, "bond option", "expected key=value"));
        };
        if seen.contains(&key) {
            return Err(FieldError::at(
                &option,
                Problem::Conflict(format!("bond option {key} is given twice")),
            ));
        }
        seen.push(key);
        let value = option.tail(key.len() + 1);
        set_option(key, &value, bond).map_err(|e| match e {
            // Point an unknown key at the key, everything else at the value.
            SetError::UnknownKey => FieldError::at(
                &option,
                Problem::Unknown { what: "bond option", value: key.to_owned() },
            ),
            SetError::Field(e) => e,
        })?;
    }
    Ok(())
}

enum SetError {
    UnknownKey,
    Field(FieldError),
}

impl From<FieldError> for SetError {
    fn from(e: FieldError) -> Self {
        SetError::Field(e)
    }
}

fn set_option(key: &str, v: &Field<'_>, b: &mut BondMasterSpec) -> Result<(), SetError> {
    match key {
        "mode" => b.mode = named::<BondMode>(v, "bond mode", MODES)?,
        "xmit_hash_policy" => {
            b.xmit_hash_policy = named::<BondXmitHashPolicy>(v, "xmit_hash_policy", HASHES)?
        }
        "lacp_rate" => b.lacp_rate = named::<LacpRate>(v, "lacp_rate", "slow, fast")?,
        "arp_validate" => b.arp_validate = named::<ArpValidate>(v, "arp_validate", VALIDATES)?,
        "arp_all_targets" => {
            b.arp_all_targets = named::<ArpAllTargets>(v, "arp_all_targets", "any, all")?
        }
        "primary" => {
            check_link_ref(v, "primary")?;
            b.primary = v.text.to_owned();
        }
        "primary_reselect" => {
            b.primary_reselect =
                named::<PrimaryReselect>(v, "primary_reselect", "always, better, failure")?
        }
        "fail_over_mac" => {
            b.fail_over_mac = named::<FailOverMac>(v, "fail_over_mac", "none, active, follow")?
        }
        "ad_select" => b.ad_select = named::<AdSelect>(v, "ad_select", "stable, bandwidth, count")?,
        "arp_ip_target" => b.arp_ip_targets = arp_targets(v)?,
        "miimon" => b.mii_mon = int(v, "miimon")?,
        "updelay" => b.up_delay = int(v, "updelay")?,
        "downdelay" => b.down_delay = int(v, "downdelay")?,
        "arp_interval" => b.arp_interval = int(v, "arp_interval")?,
        "resend_igmp" => b.resend_igmp = int(v, "resend_igmp")?,
        "min_links" => b.min_links = int(v, "min_links")?,
        "lp_interval" => b.lp_interval = int(v, "lp_interval")?,
        "packets_per_slave" => b.packets_per_slave = int(v, "packets_per_slave")?,
        // The kernel has one counter behind both names.
        "num_grat_arp" | "num_unsol_na" => b.num_peer_notif = int(v, "peer notification count")?,
        "all_slaves_active" => b.all_slaves_active = u8::from(flag(v, "all_slaves_active")?),
        "use_carrier" => b.use_carrier = flag(v, "use_carrier")?,
        _ => return Err(SetError::UnknownKey),
    }
    Ok(())
}

const MODES: &str =
    "balance-rr, active-backup, balance-xor, broadcast, 802.3ad, balance-tlb, balance-alb";
const HASHES: &str = "layer2, layer3+4, layer2+3, encap2+3, encap3+4, vlan+srcmac";
const VALIDATES: &str = "none, active, backup, all, filter, filter_active, filter_backup";

/// A kernel enum by name (or by the number of a known value).
fn named<T: FromStr + Display>(
    v: &Field<'_>,
    what: &'static str,
    names: &str,
) -> Result<T, FieldError> {
    let bad = || FieldError::invalid(v, what, format_args!("expected one of {names}"));
    let parsed: T = v.text.parse().map_err(|_| bad())?;
    // These types parse any number and print unknown ones as bare decimals: that is how an
    // unknown number shows itself.
    if parsed.to_string().bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    Ok(parsed)
}

fn int<T: FromStr>(v: &Field<'_>, what: &'static str) -> Result<T, FieldError> {
    parse_digits(v.text).ok_or_else(|| {
        FieldError::invalid(
            v,
            what,
            format_args!(
                "expected a non-negative integer that fits in {}",
                std::any::type_name::<T>()
            ),
        )
    })
}

fn flag(v: &Field<'_>, what: &'static str) -> Result<bool, FieldError> {
    match v.text {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => Err(FieldError::invalid(v, what, "expected 0 or 1")),
    }
}

fn arp_targets(v: &Field<'_>) -> Result<Vec<Ipv4Addr>, FieldError> {
    let targets = v.split(';');
    if let Some(extra) = targets.get(MAX_ARP_TARGETS) {
        return Err(FieldError::invalid(
            extra,
            "arp_ip_target",
            format_args!("the kernel takes at most {MAX_ARP_TARGETS} targets"),
        ));
    }
    targets
        .iter()
        .map(|t| t.text.parse().map_err(|e| FieldError::invalid(t, "arp_ip_target", e)))
        .collect()
}
