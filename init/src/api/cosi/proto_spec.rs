// SPDX-License-Identifier: Apache-2.0
//! The protobuf spec (`proto_spec`) of the resource types talosctl decodes from protobuf:
//! AddressStatus, LinkStatus, RouteStatus, HostnameStatus, NodeAddress, MachineStatus, in
//! Talos's messages (`talos_api::definitions`). Other types go out with `yaml_spec` only.
//! Pure.

use std::net::IpAddr;

use ipnet::IpNet;
use net::resource::{
    AddressStatus, Family, HostnameStatus, LinkStatus, MachineStage, MachineStatus, NodeAddress,
    Resource, RouteStatus,
};
use talos_api::definitions as d;
use talos_api::Message;

/// `r`'s spec in Talos's protobuf, when keelson has its message.
pub fn encode(r: &Resource) -> Option<Vec<u8>> {
    if let Some(s) = r.spec_as::<AddressStatus>() {
        return Some(address(s).encode_to_vec());
    }
    if let Some(s) = r.spec_as::<LinkStatus>() {
        return Some(link(s).encode_to_vec());
    }
    if let Some(s) = r.spec_as::<RouteStatus>() {
        return Some(route(s).encode_to_vec());
    }
    if let Some(s) = r.spec_as::<HostnameStatus>() {
        let m = d::HostnameStatusSpec {
            hostname: s.hostname.clone(),
            domainname: s.domainname.clone(),
        };
        return Some(m.encode_to_vec());
    }
    if let Some(s) = r.spec_as::<NodeAddress>() {
        let m = d::NodeAddressSpec { addresses: s.addresses.iter().map(prefix).collect() };
        return Some(m.encode_to_vec());
    }
    if let Some(s) = r.spec_as::<MachineStatus>() {
        return Some(machine(s).encode_to_vec());
    }
    None
}

fn ip(a: &IpAddr) -> d::NetIp {
    d::NetIp {
        ip: match a {
            IpAddr::V4(v4) => v4.octets().to_vec(),
            IpAddr::V6(v6) => v6.octets().to_vec(),
        },
    }
}

fn prefix(n: &IpNet) -> d::NetIpPrefix {
    d::NetIpPrefix { ip: ip(&n.addr()).ip, prefix_length: i32::from(n.prefix_len()) }
}

/// `nethelpers.Family`: AF_INET, AF_INET6.
fn family(f: Family) -> i32 {
    match f {
        Family::Inet4 => 2,
        Family::Inet6 => 10,
    }
}

fn address(s: &AddressStatus) -> d::AddressStatusSpec {
    d::AddressStatusSpec {
        address: Some(prefix(&s.address)),
        local: s.local.as_ref().map(ip),
        broadcast: s.broadcast.as_ref().map(ip),
        anycast: s.anycast.as_ref().map(ip),
        multicast: s.multicast.as_ref().map(ip),
        link_index: s.link_index,
        link_name: s.link_name.clone(),
        family: family(s.family),
        scope: i32::from(s.scope.0),
        flags: s.flags.0,
    }
}

/// Interface flags by name (`IFF_*`, netdevice(7)), as keelson lists them.
fn link_flags(names: &str) -> u32 {
    const FLAGS: [(&str, u32); 19] = [
        ("UP", 0x1),
        ("BROADCAST", 0x2),
        ("DEBUG", 0x4),
        ("LOOPBACK", 0x8),
        ("POINTOPOINT", 0x10),
        ("NOTRAILERS", 0x20),
        ("RUNNING", 0x40),
        ("NOARP", 0x80),
        ("PROMISC", 0x100),
        ("ALLMULTI", 0x200),
        ("MASTER", 0x400),
        ("SLAVE", 0x800),
        ("MULTICAST", 0x1000),
        ("PORTSEL", 0x2000),
        ("AUTOMEDIA", 0x4000),
        ("DYNAMIC", 0x8000),
        ("LOWER_UP", 0x10000),
        ("DORMANT", 0x20000),
        ("ECHO", 0x40000),
    ];
    names
        .split(',')
        .map(str::trim)
        .filter_map(|n| FLAGS.iter().find(|(f, _)| f.eq_ignore_ascii_case(n)).map(|(_, b)| b))
        .fold(0, |a, b| a | b)
}

/// `nethelpers.OperationalState` (`IF_OPER_*`) from its name.
fn oper_state(name: &str) -> i32 {
    let n: String = name.chars().filter(|c| c.is_ascii_alphabetic()).collect();
    match n.to_ascii_lowercase().as_str() {
        "notpresent" => 1,
        "down" => 2,
        "lowerlayerdown" => 3,
        "testing" => 4,
        "dormant" => 5,
        "up" => 6,
        _ => 0,
    }
}

fn link(s: &LinkStatus) -> d::LinkStatusSpec {
    d::LinkStatusSpec {
        index: s.index,
        r#type: i32::from(s.link_type.0),
        link_index: s.link_index,
        flags: link_flags(&s.flags),
        hardware_addr: s.hardware_addr.0.clone(),
        broadcast_addr: s.broadcast_addr.0.clone(),
        mtu: s.mtu,
        master_index: s.master_index,
        operational_state: oper_state(&s.operational_state),
        kind: s.kind.clone(),
        slave_kind: s.slave_kind.clone(),
        bus_path: s.bus_path.clone(),
        driver: s.driver.clone(),
        link_state: s.link_state,
        permanent_addr: s.permanent_addr.as_ref().map(|a| a.0.clone()).unwrap_or_default(),
    }
}

fn route(s: &RouteStatus) -> d::RouteStatusSpec {
    d::RouteStatusSpec {
        family: family(s.family),
        destination: s.dst.as_ref().map(prefix),
        source: s.src.as_ref().map(ip),
        gateway: s.gateway.as_ref().map(ip),
        out_link_index: s.out_link_index,
        out_link_name: s.out_link_name.clone(),
        table: i32::try_from(s.table.0).unwrap_or(i32::MAX),
        priority: s.priority,
        scope: i32::from(s.scope.0),
        r#type: i32::from(s.kind.0),
        flags: s.flags.0,
        protocol: i32::from(s.protocol.0),
        mtu: s.mtu,
    }
}

/// `runtime.MachineStage`'s numbers.
fn stage(s: MachineStage) -> i32 {
    match s {
        MachineStage::Booting => 1,
        MachineStage::Installing => 2,
        MachineStage::Maintenance => 3,
        MachineStage::Running => 4,
        MachineStage::Rebooting => 5,
        MachineStage::ShuttingDown => 6,
        MachineStage::Upgrading => 8,
    }
}

fn machine(s: &MachineStatus) -> d::MachineStatusSpec {
    d::MachineStatusSpec {
        stage: stage(s.stage),
        status: Some(d::MachineStatusStatus {
            ready: s.status.ready,
            unmet_conditions: s
                .status
                .unmet_conditions
                .iter()
                .map(|c| d::UnmetCondition { name: c.name.clone(), reason: c.reason.clone() })
                .collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_and_states_by_name() {
        assert_eq!(link_flags("UP,BROADCAST,RUNNING,MULTICAST,LOWER_UP"), 0x11043);
        assert_eq!(link_flags(""), 0);
        assert_eq!(oper_state("up"), 6);
        assert_eq!(oper_state("lowerLayerDown"), 3);
        assert_eq!(oper_state("LOWER_LAYER_DOWN"), 3);
        assert_eq!(oper_state("whatever"), 0);
    }

    #[test]
    fn an_address_in_talos_protobuf() {
        let a = AddressStatus {
            address: "10.0.0.1/24".parse().unwrap_or_else(|e| unreachable!("{e}")),
            local: "10.0.0.1".parse().ok(),
            broadcast: None,
            anycast: None,
            multicast: None,
            link_index: 2,
            link_name: "eth0".into(),
            family: Family::Inet4,
            scope: net::resource::Scope(0),
            flags: net::resource::AddressFlags(0x80),
            priority: 0,
        };
        let m = address(&a);
        assert_eq!(m.address, Some(d::NetIpPrefix { ip: vec![10, 0, 0, 1], prefix_length: 24 }));
        assert_eq!((m.family, m.flags, m.link_name.as_str()), (2, 0x80, "eth0"));
    }
}
