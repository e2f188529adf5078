// SPDX-License-Identifier: Apache-2.0
//! `vlan=<name>:<link>` (docs/talos.md: Kernel command line).
//!
//! The VLAN ID is the text after the first `.` of the name, or after a `vlan` prefix
//! (`vlan0008` is 8). As in Talos, the link is then named `vlan_link_name(<link>, id)` whatever
//! the name said: `vlan=vlan5:eth0` creates `eth0.5`. The parent is the link as written; it
//! is alias-resolved when the specs are built.

use super::field::{check_link_ref, parse_digits, Field, FieldError, Problem};
use crate::resource::{vlan_link_name, ConfigLayer, LinkSpec, LinkType, VlanProtocol, VlanSpec};

/// Parse one `vlan=` value starting at byte `offset`; `existing` holds the links earlier
/// `bond=`/`vlan=` entries define.
pub(crate) fn parse(
    value: &str,
    offset: usize,
    existing: &[LinkSpec],
) -> Result<LinkSpec, FieldError> {
    let fields = Field::new(value, offset).split(':');
    let (name, parent) = match fields.as_slice() {
        [name, parent] => (*name, *parent),
        [name] => {
            let end = name.tail(name.text.len());
            return Err(FieldError::at(&end, Problem::Missing("parent link (vlan=<name>:<link>)")));
        }
        [_, _, extra, ..] => return Err(FieldError::at(extra, Problem::TooManyFields(2))),
        [] => return Err(FieldError::at(&Field::new("", offset), Problem::Missing("value"))),
    };
    if name.is_empty() {
        return Err(FieldError::at(&name, Problem::Missing("VLAN name")));
    }
    let id = if let Some(dot) = name.text.find('.') {
        name.tail(dot + 1)
    } else if name.text.starts_with("vlan") {
        name.tail("vlan".len())
    } else {
        return Err(FieldError::invalid(&name, "VLAN name", "expected <link>.<id> or vlan<id>"));
    };
    let vid = parse_digits::<u16>(id.text)
        .filter(|vid| (1..=4094).contains(vid))
        .ok_or_else(|| FieldError::invalid(&id, "VLAN ID", "expected an integer from 1 to 4094"))?;
    check_link_ref(&parent, "parent link")?;

    let link_name = vlan_link_name(parent.text, vid);
    if let Some(other) = existing.iter().find(|l| l.name == link_name && l.bond_slave.is_none()) {
        return Err(FieldError::at(
            &name,
            Problem::Conflict(format!(
                "link {link_name} is already defined (kind {:?})",
                other.kind
            )),
        ));
    }
    Ok(LinkSpec {
        name: link_name,
        logical: true,
        up: true,
        kind: "vlan".into(),
        link_type: LinkType::ETHER,
        parent_name: parent.text.to_owned(),
        vlan: Some(VlanSpec { vid, protocol: VlanProtocol::DOT1Q }),
        layer: ConfigLayer::Cmdline,
        ..LinkSpec::default()
    })
}
