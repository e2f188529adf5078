// SPDX-License-Identifier: Apache-2.0
//! Tests of the kinds' IDs, name rules and serialization.

use std::net::IpAddr;

use ipnet::IpNet;

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
    let mut reused = String::from("left over from an earlier, longer ID");
    layered_id_into(&mut reused, ConfigLayer::Configuration, "inet4/10.0.0.1//1024");
    assert_eq!(reused, layered_id(ConfigLayer::Configuration, "inet4/10.0.0.1//1024"));
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
    assert!(long.starts_with("enp0") && long.ends_with(".5") && long.len() == 4 + 6 + 2, "{long}");
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
