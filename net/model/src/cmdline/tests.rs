// SPDX-License-Identifier: Apache-2.0
//! Parser tests: the Talos vectors (docs/talos.md: Kernel command line), the forms Talos rejects
//! and keelson accepts, and one test per class of error, each checking that only the bad entry is
//! skipped.

use std::net::IpAddr;

use ipnet::IpNet;

use super::*;
use crate::resource::{
    BondMode, BondXmitHashPolicy, HardwareAddr, LacpRate, LinkType, VlanProtocol,
};

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

/// Parse and insist there were no errors.
fn clean(cmdline: &str) -> CmdlineNetwork {
    let n = parse(cmdline);
    assert!(n.errors.is_empty(), "{cmdline}: {:#?}", n.errors);
    n
}

/// Parse and return the single error.
fn one_error(cmdline: &str) -> (CmdlineNetwork, CmdlineError) {
    let n = parse(cmdline);
    assert_eq!(n.errors.len(), 1, "{cmdline}: {:#?}", n.errors);
    let e = n.errors[0].clone();
    (n, e)
}

// ---------------------------------------------------------------------------------------------
// ip=: Talos vectors and the issue example

#[test]
fn talos_vector_static_ipv4() {
    let n = clean("ip=172.20.0.2::172.20.0.1:255.255.255.0::eth1:::::");
    assert_eq!(
        n.link_configs,
        [LinkConfig {
            link_name: "eth1".into(),
            address: Some(net("172.20.0.2/24")),
            gateway: Some(ip("172.20.0.1")),
            ..LinkConfig::default()
        }]
    );
    assert!(n.default_dhcp4 && !n.default_dhcp6);
}

#[test]
fn talos_vector_ipv6_with_dns_and_ntp() {
    let n = clean(
        "ip=[2a03:1:2::12]::[2a03:1:2::11]:125:master:eth0:off:[2001:4860:4860::8888]:[2606:4700::1111]:[2606:4700:f1::1]",
    );
    assert_eq!(
        n.link_configs,
        [LinkConfig {
            link_name: "eth0".into(),
            address: Some(net("2a03:1:2::12/125")),
            gateway: Some(ip("2a03:1:2::11")),
            ..LinkConfig::default()
        }]
    );
    assert_eq!(n.dns_servers, [ip("2001:4860:4860::8888"), ip("2606:4700::1111")]);
    assert_eq!(n.ntp_servers, [ip("2606:4700:f1::1")]);
    assert_eq!(n.hostname.as_deref(), Some("master"));
}

#[test]
fn talos_vector_three_entries() {
    let n = clean(
        "ip=172.20.0.2::172.20.0.1:255.255.255.0::eth1::::: ip=eth3:dhcp ip=:::::eth4:dhcp::::",
    );
    let summary: Vec<_> = n
        .link_configs
        .iter()
        .map(|c| (c.link_name.as_str(), c.address.is_some(), c.dhcp4))
        .collect();
    assert_eq!(summary, [("eth1", true, false), ("eth3", false, true), ("eth4", false, true)]);
}

#[test]
fn issue_example_with_talos_hostname() {
    let n = clean(
        "ip=172.20.0.2::172.20.0.1:255.255.255.0::eth1::::: talos.hostname=node-1.example.org",
    );
    assert_eq!(n.link_configs[0].address, Some(net("172.20.0.2/24")));
    assert_eq!(n.link_configs[0].gateway, Some(ip("172.20.0.1")));
    assert_eq!(n.hostname.as_deref(), Some("node-1.example.org"));
}

#[test]
fn device_dhcp_form() {
    let n = clean("ip=eth3:dhcp");
    assert_eq!(
        n.link_configs,
        [LinkConfig { link_name: "eth3".into(), dhcp4: true, ..LinkConfig::default() }]
    );
}

#[test]
fn address_alone_is_a_host_prefix_on_the_default_link() {
    let n = clean("ip=10.0.0.5 ip=[2001:db8::5]");
    assert_eq!(n.link_configs[0].address, Some(net("10.0.0.5/32")));
    assert_eq!(n.link_configs[1].address, Some(net("2001:db8::5/128")));
    assert_eq!(n.link_configs[0].link_name, "");
}

// ---------------------------------------------------------------------------------------------
// ip=: bare forms (keelson choices)

#[test]
fn bare_dhcp_is_a_no_op() {
    for v in ["dhcp", "on", "any"] {
        let n = clean(&format!("ip={v}"));
        assert_eq!(n, parse(""), "ip={v}");
        assert!(n.default_dhcp4);
    }
}

#[test]
fn bare_off_disables_default_dhcp() {
    for v in ["off", "none"] {
        let n = clean(&format!("ip={v}"));
        assert!(!n.default_dhcp4, "ip={v}");
        assert!(n.link_configs.is_empty());
    }
    // A later bare `ip=dhcp` does not undo it.
    assert!(!clean("ip=off ip=dhcp").default_dhcp4);
}

#[test]
fn bare_dhcp6_and_auto6() {
    let n = clean("ip=dhcp6");
    assert!(n.default_dhcp6 && n.default_dhcp4);
    assert!(clean("ip=dhcp,dhcp6").default_dhcp6);
    assert_eq!(clean("ip=auto6"), parse(""));
    let (_, e) = one_error("ip=static");
    assert_eq!(e.column, 4);
}

// ---------------------------------------------------------------------------------------------
// ip=: netmasks, autoconf lists, dracut tails

#[test]
fn dotted_prefix_and_ipv6_masks() {
    let dotted = clean("ip=10.1.2.3:::255.255.240.0::eth0");
    let prefix = clean("ip=10.1.2.3:::20::eth0");
    assert_eq!(dotted.link_configs[0].address, Some(net("10.1.2.3/20")));
    assert_eq!(dotted.link_configs, prefix.link_configs);
    let v6 = clean("ip=[2001:db8::7]:::[ffff:ffff:ffff:ffc0::]::eth0");
    assert_eq!(v6.link_configs[0].address, Some(net("2001:db8::7/58")));
    let zero = clean("ip=10.1.2.3:::0.0.0.0::eth0");
    assert_eq!(zero.link_configs[0].address, Some(net("10.1.2.3/0")));
}

#[test]
fn bad_masks_are_rejected() {
    let (n, e) = one_error("ip=10.1.2.3:::255.0.255.0::eth0");
    assert!(n.link_configs.is_empty());
    assert_eq!(e.column, 15);
    assert!(e.message.contains("not contiguous"), "{}", e.message);

    let (_, e) = one_error("ip=10.1.2.3:::33::eth0");
    assert!(e.message.contains("above 32"), "{}", e.message);
    let (_, e) = one_error("ip=10.1.2.3:::[ffff::]::eth0");
    assert!(e.message.contains("family"), "{}", e.message);
    let (_, e) = one_error("ip=10.1.2.3:::twenty::eth0");
    assert!(e.message.starts_with("invalid netmask \"twenty\""));
}

#[test]
fn autoconf_lists() {
    let n = clean("ip=eth0:dhcp,dhcp6 ip=:::::eth1:dhcp6,dhcp ip=eth2:auto6 ip=eth3:off");
    let flags: Vec<_> =
        n.link_configs.iter().map(|c| (c.link_name.as_str(), c.dhcp4, c.dhcp6)).collect();
    assert_eq!(
        flags,
        [
            ("eth0", true, true),
            ("eth1", true, true),
            ("eth2", false, false),
            ("eth3", false, false)
        ]
    );
    let (_, e) = one_error("ip=eth0:off,dhcp");
    assert!(e.message.contains("cannot be combined"), "{}", e.message);
    let (_, e) = one_error("ip=eth0:dhcp,bootp");
    assert_eq!(
        e.to_string(),
        "ip=eth0:dhcp,bootp: column 14: invalid autoconf method \"bootp\": \
         expected one of dhcp, on, any, dhcp6, auto6, off, none, static"
    );
}

#[test]
fn dracut_mtu_and_mac_tail() {
    let mac: HardwareAddr = "02:00:5e:10:00:01".parse().unwrap();
    let n = clean("ip=10.0.0.2::10.0.0.1:24::eth0:none:9000:02:00:5e:10:00:01");
    let c = &n.link_configs[0];
    assert_eq!((c.mtu, c.hardware_addr.as_ref()), (Some(9000), Some(&mac)));
    assert!(n.dns_servers.is_empty());

    for form in [
        "ip=eth0:dhcp:1500:[02:00:5e:10:00:01]",
        "ip=eth0:dhcp:1500:02:00:5e:10:00:01",
        "ip=eth0:dhcp:1500:02-00-5e-10-00-01",
    ] {
        let c = &clean(form).link_configs[0];
        assert_eq!(
            (c.mtu, c.hardware_addr.as_ref(), c.dhcp4),
            (Some(1500), Some(&mac), true),
            "{form}"
        );
    }
    // An empty MTU followed by a MAC, in both forms.
    let c = &clean("ip=eth0:dhcp::02:00:5e:10:00:01").link_configs[0];
    assert_eq!((c.mtu, c.hardware_addr.as_ref()), (None, Some(&mac)));
    let c = &clean("ip=10.0.0.2:::24::eth0:off::02:00:5e:10:00:01").link_configs[0];
    assert_eq!((c.mtu, c.hardware_addr.as_ref()), (None, Some(&mac)));
    // An integer alone is an MTU, not a DNS server.
    assert_eq!(clean("ip=eth0:dhcp:9000").link_configs[0].mtu, Some(9000));
}

#[test]
fn bad_mtu_and_mac() {
    let (_, e) = one_error("ip=eth0:dhcp:20");
    assert!(e.message.starts_with("invalid MTU \"20\""), "{}", e.message);
    let (_, e) = one_error("ip=eth0:dhcp:1500:01:00:5e:10:00:01");
    assert_eq!(e.column, 19);
    assert!(e.message.contains("multicast"), "{}", e.message);
    let (_, e) = one_error("ip=eth0:dhcp:1500:02:00:5e");
    assert!(e.message.contains("6 octets"), "{}", e.message);
    // Below 1280 only where IPv6 is wanted.
    assert_eq!(clean("ip=eth0:dhcp:1200").link_configs[0].mtu, Some(1200));
    for cmdline in
        ["ip=eth0:dhcp6:1200", "ip=eth0:auto6:1200", "ip=[2001:db8::2]:::64::eth0:off:1200"]
    {
        let (_, e) = one_error(cmdline);
        assert!(e.message.contains("IPv6 minimum"), "{cmdline}: {}", e.message);
        assert_eq!(e.column, cmdline.find(":1200").unwrap() + 2, "{cmdline}");
    }
}

#[test]
fn same_link_may_repeat_but_not_contradict() {
    let n = clean("ip=10.0.0.2:::24::eth0:off:1500 ip=[2001:db8::2]:::64::eth0:off:1500");
    assert_eq!(n.link_configs.len(), 2);
    let (n, e) = one_error("ip=eth0:dhcp:1500 ip=eth0:dhcp6:9000");
    assert_eq!(n.link_configs.len(), 1);
    assert_eq!(e.column, 33);
    assert!(e.message.contains("contradicts MTU 1500"), "{}", e.message);
}

// ---------------------------------------------------------------------------------------------
// ip=: errors and their columns

#[test]
fn malformed_entry_is_skipped_alone_with_its_column() {
    let (n, e) = one_error("rw ip=10.0.0.1::bad:24::eth0 ip=10.0.0.2::10.0.0.1:24::eth1");
    assert_eq!(
        e.to_string(),
        "ip=10.0.0.1::bad:24::eth0: column 17: invalid gateway \"bad\": invalid IP address syntax"
    );
    assert_eq!((e.param.as_str(), e.column), ("ip", 17));
    assert_eq!(n.link_configs.len(), 1);
    assert_eq!(n.link_configs[0].link_name, "eth1");
}

#[test]
fn columns_count_characters_not_bytes() {
    let (_, e) = one_error("x=héllo ip=10.0.0.300");
    assert_eq!(e.column, 12);
    assert!(e.message.starts_with("invalid client address"));
}

#[test]
fn each_field_is_checked() {
    let cases = [
        ("ip=10.0.0.2:x", 13, "invalid server address"),
        ("ip=10.0.0.2::[2001:db8::1]", 15, "invalid gateway"),
        (&format!("ip=10.0.0.2::::{}:eth0", "h".repeat(64)), 16, "invalid hostname"),
        (r#""ip=10.0.0.2::::a b:eth0""#, 17, "invalid hostname"),
        ("ip=10.0.0.2:::::eth/0", 17, "invalid device"),
        ("ip=10.0.0.2:::::eth0:bootp", 22, "invalid autoconf method"),
        ("ip=10.0.0.2:::::eth0:off:1.1.1.1:nope", 34, "invalid DNS server"),
        ("ip=10.0.0.2:::::eth0:off:::ntp", 28, "invalid NTP server"),
        ("ip=10.0.0.2:::::eth0:off:1.1.1.1:::9.9.9.9", 36, "too many fields"),
        ("ip=[2001:db8::1:::eth0", 4, "'[' is never closed"),
        ("ip=eth0:", 9, "missing autoconf method"),
        ("ip=", 4, "missing value"),
        ("ip", 1, "missing value"),
    ];
    for (cmdline, column, start) in cases {
        let (n, e) = one_error(cmdline);
        assert!(n.link_configs.is_empty(), "{cmdline}");
        assert_eq!(e.column, column, "{cmdline}: {e}");
        assert!(e.message.starts_with(start), "{cmdline}: {e}");
    }
}

// ---------------------------------------------------------------------------------------------
// Hostname precedence

#[test]
fn talos_hostname_wins_regardless_of_order() {
    let n = clean("ip=1.2.3.4::::from-ip:eth0 talos.hostname=from-talos");
    assert_eq!(n.hostname.as_deref(), Some("from-talos"));
    let n = clean("ip=1.2.3.4::::first:eth0 ip=1.2.3.5::::second:eth1");
    assert_eq!(n.hostname.as_deref(), Some("first"));
    let n = clean("talos.hostname=a talos.hostname=b");
    assert_eq!(n.hostname.as_deref(), Some("a"));
    assert_eq!(n.warnings.len(), 1);
    // An invalid talos.hostname is an error and leaves the ip= hostname in force.
    let (n, e) =
        one_error(&format!("talos.hostname={} ip=1.2.3.4::::fallback:eth0", "x".repeat(70)));
    assert_eq!((e.param.as_str(), e.column), ("talos.hostname", 16));
    assert_eq!(n.hostname.as_deref(), Some("fallback"));
}

#[test]
fn talos_hostname_with_a_domain_setdomainname_refuses() {
    // 64 bytes is what setdomainname(2) takes; 65 would stop the hostname being applied.
    let domain = |len: usize| format!("{}.org", "d".repeat(len - 4));
    let n = clean(&format!("talos.hostname=node-1.{}", domain(64)));
    assert_eq!(n.hostname, Some(format!("node-1.{}", domain(64))));
    let (n, e) =
        one_error(&format!("ip=1.2.3.4::::fallback:eth0 talos.hostname=node-1.{}", domain(65)));
    assert_eq!((e.param.as_str(), e.column), ("talos.hostname", 44));
    assert!(e.to_string().contains("domain part is 65 bytes"), "{e}");
    assert_eq!(n.hostname.as_deref(), Some("fallback"));
}

// ---------------------------------------------------------------------------------------------
// bond=

#[test]
fn bond_with_options() {
    let n = clean(
        "bond=bond0:eth1,eth2:mode=802.3ad,lacp_rate=fast,miimon=100,\
         xmit_hash_policy=layer3+4,arp_ip_target=10.0.0.1;10.0.0.2,num_unsol_na=3:9000",
    );
    let [master, s1, s2] = n.link_specs.as_slice() else { panic!("{:#?}", n.link_specs) };
    assert_eq!(
        (master.name.as_str(), master.kind.as_str(), master.logical, master.up, master.mtu),
        ("bond0", "bond", true, true, 9000)
    );
    let b = master.bond_master.as_ref().unwrap();
    assert_eq!(b.mode, BondMode::LACP);
    assert_eq!(b.lacp_rate, LacpRate::FAST);
    assert_eq!(b.xmit_hash_policy, BondXmitHashPolicy::LAYER34);
    assert_eq!((b.mii_mon, b.num_peer_notif), (100, 3));
    assert_eq!(
        b.arp_ip_targets,
        ["10.0.0.1".parse::<std::net::Ipv4Addr>().unwrap(), "10.0.0.2".parse().unwrap()]
    );
    // fill_defaults() ran.
    assert!(b.use_carrier);
    assert_eq!(b.ad_actor_sys_prio, 65535);
    let slaves: Vec<_> = [s1, s2]
        .iter()
        .map(|s| {
            let slave = s.bond_slave.as_ref().unwrap();
            (s.name.as_str(), slave.master_name.as_str(), slave.slave_index, s.up)
        })
        .collect();
    assert_eq!(slaves, [("eth1", "bond0", 0, true), ("eth2", "bond0", 1, true)]);
}

#[test]
fn bond_defaults() {
    let n = clean("bond=bond0");
    let names: Vec<_> = n.link_specs.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["bond0", "eth0", "eth1"]);
    let b = n.link_specs[0].bond_master.as_ref().unwrap();
    assert_eq!((b.mode, b.missed_max, b.tlb_dynamic_lb), (BondMode::BALANCE_RR, 2, 1));
    assert_eq!(n.link_specs[0].mtu, 0);
    // The kernel's number of a known mode is fine.
    let n = clean("bond=bond0:eth0:mode=4");
    assert_eq!(n.link_specs[0].bond_master.as_ref().unwrap().mode, BondMode::LACP);
}

#[test]
fn several_bonds_but_no_shared_slaves() {
    let n = clean("bond=bond0:eth0,eth1 bond=bond1:eth2,eth3");
    assert_eq!(n.link_specs.len(), 6);
    let (n, e) = one_error("bond=bond0:eth0,eth1 bond=bond1:eth1,eth3");
    assert_eq!(n.link_specs.len(), 3);
    assert_eq!(e.column, 33);
    assert!(e.message.contains("already a slave of bond0"), "{e}");
    let (_, e) = one_error("bond=bond0:eth0,eth0");
    assert_eq!(e.column, 17);
}

#[test]
fn bad_bond_options() {
    let cases = [
        ("bond=bond0:eth0:foo=1", 17, "unknown bond option \"foo\""),
        ("bond=bond0:eth0:miimon=abc", 24, "invalid miimon \"abc\""),
        ("bond=bond0:eth0:num_grat_arp=300", 30, "invalid peer notification count"),
        ("bond=bond0:eth0:mode=fast", 22, "invalid bond mode \"fast\": expected one of"),
        ("bond=bond0:eth0:mode=9", 22, "invalid bond mode \"9\""),
        ("bond=bond0:eth0:lacp_rate=medium", 27, "invalid lacp_rate"),
        ("bond=bond0:eth0:miimon", 17, "invalid bond option \"miimon\": expected key=value"),
        ("bond=bond0:eth0:miimon=1,miimon=2", 26, "bond option miimon is given twice"),
        ("bond=bond0:eth0:arp_ip_target=10.0.0.1;x", 40, "invalid arp_ip_target \"x\""),
        ("bond=bond0:eth0:use_carrier=2", 29, "invalid use_carrier"),
        ("bond=bond0:eth0::50", 18, "invalid MTU"),
        ("bond=bond0:eth0:::x", 19, "too many fields"),
        ("bond=averyveryverylongbond", 6, "invalid bond name"),
    ];
    for (cmdline, column, start) in cases {
        let (n, e) = one_error(&format!("{cmdline} bond=bond9:eth9"));
        assert_eq!(e.column, column, "{cmdline}: {e}");
        assert!(e.message.starts_with(start), "{cmdline}: {e}");
        assert_eq!(e.param, "bond");
        // The good bond still applies.
        assert_eq!(n.link_specs.len(), 2, "{cmdline}");
    }
}

// ---------------------------------------------------------------------------------------------
// vlan=

#[test]
fn vlan_names_and_ids() {
    let n =
        clean("vlan=eth0.100:eth0 vlan=vlan0008:eth1 vlan=vlan4094:enxa vlan=x.5:enp0s31f6abcd");
    let got: Vec<_> = n
        .link_specs
        .iter()
        .map(|l| {
            let v = l.vlan.as_ref().unwrap();
            (l.name.clone(), l.parent_name.as_str(), v.vid, v.protocol)
        })
        .collect();
    let hashed = crate::resource::vlan_link_name("enp0s31f6abcd", 5);
    assert!(hashed.starts_with("enp0") && hashed.len() == 12, "{hashed}");
    assert_eq!(
        got,
        [
            ("eth0.100".to_owned(), "eth0", 100, VlanProtocol::DOT1Q),
            ("eth1.8".to_owned(), "eth1", 8, VlanProtocol::DOT1Q),
            ("enxa.4094".to_owned(), "enxa", 4094, VlanProtocol::DOT1Q),
            (hashed, "enp0s31f6abcd", 5, VlanProtocol::DOT1Q),
        ]
    );
    let l = &n.link_specs[0];
    assert_eq!(
        (l.kind.as_str(), l.logical, l.up, l.link_type),
        ("vlan", true, true, LinkType::ETHER)
    );
}

#[test]
fn bad_vlans() {
    let cases = [
        ("vlan=eth0.0:eth0", 11, "invalid VLAN ID \"0\""),
        ("vlan=eth0.4096:eth0", 11, "invalid VLAN ID \"4096\""),
        ("vlan=vlanx:eth0", 10, "invalid VLAN ID \"x\""),
        ("vlan=foo:eth0", 6, "invalid VLAN name \"foo\""),
        ("vlan=eth0.100", 14, "missing parent link"),
        ("vlan=eth0.100:eth0:x", 20, "too many fields"),
        ("vlan=eth0.100:", 15, "missing parent link"),
    ];
    for (cmdline, column, start) in cases {
        let (n, e) = one_error(&format!("{cmdline} vlan=eth9.9:eth9"));
        assert_eq!(e.column, column, "{cmdline}: {e}");
        assert!(e.message.starts_with(start), "{cmdline}: {e}");
        assert_eq!(n.link_specs.len(), 1, "{cmdline}");
    }
    let (_, e) = one_error("vlan=eth0.7:eth0 vlan=vlan7:eth0");
    assert!(e.message.contains("already defined"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// Tokenizing, Talos and keelson keys

#[test]
fn quoted_values() {
    let n = clean(r#"talos.hostname="node-1.example.org" "ip=eth0:dhcp""#);
    assert_eq!(n.hostname.as_deref(), Some("node-1.example.org"));
    assert_eq!(n.link_configs[0].link_name, "eth0");
    // Columns still point into the line as written, quotes included.
    let (_, e) = one_error(r#"a="x y" "ip=eth0:nope""#);
    assert_eq!(e.column, 18);
    let (_, e) = one_error(r#"talos.hostname="a b""#);
    assert_eq!(e.column, 17);
}

#[test]
fn talos_and_keelson_keys() {
    let n = clean(
        "console=ttyS0 talos.platform=metal talos.foo=1 talos.config=https://x/y \
         talos.network.interface.ignore=eth5 talos.network.interface.ignore=eth6 keelson.debug \
         keelson.bar",
    );
    assert_eq!(
        n.warnings,
        [
            "column 36: unknown parameter \"talos.foo\" ignored",
            "column 159: unknown parameter \"keelson.bar\" ignored",
        ]
    );
    assert_eq!(n.config_url.as_deref(), Some("https://x/y"));
    assert_eq!(clean("talos.config.inline=dmVy").config_inline.as_deref(), Some("dmVy"));
    let shown =
        serde_json::to_string(&clean("talos.config=https://x/y?t=s talos.config.inline=dmVy"))
            .unwrap_or_default();
    assert!(!shown.contains("t=s") && !shown.contains("dmVy"), "{shown}");
    assert_eq!(n.ignore_interfaces, ["eth5", "eth6"]);
    assert!(n.debug);
    assert!(!clean("keelson.debug=0").debug);
    assert!(!clean("").debug);
}

#[test]
fn keelson_modules_and_ifnames() {
    let n = clean("keelson.modules=e1000,igb, keelson.modules=igb,r8169 net.ifnames=1");
    assert_eq!(n.modules, ["e1000", "igb", "r8169"]);
    assert!(n.predictable_names);
    assert!(!clean("net.ifnames=0").predictable_names);
    assert!(clean("").predictable_names);
    // One bad name rejects the entry with the column of that name; the rest of the line holds.
    let (n, e) = one_error("keelson.modules=e1000,../x talos.hostname=a");
    assert_eq!(e.column, 23);
    assert!(e.message.contains("invalid module name"), "{}", e.message);
    assert_eq!(n.hostname.as_deref(), Some("a"));
}

#[test]
fn double_dash_ends_network_params() {
    let n = clean("ip=eth0:dhcp -- ip=eth1:dhcp talos.foo");
    assert_eq!(n.link_configs.len(), 1);
    assert!(n.warnings.is_empty());
}

#[test]
fn unterminated_quote_is_reported() {
    let n = parse(r#"talos.hostname="node-1"#);
    assert_eq!(n.hostname.as_deref(), Some("node-1"));
    assert_eq!(n.warnings.len(), 1);
    assert!(n.warnings[0].starts_with("column 1: unterminated quote"));
}

/// PID 1 must not panic on any command line: feed the parser and `to_specs` many random lines
/// built from the characters the grammar cares about (deterministic, no extra crates).
#[test]
fn never_panics_on_noise() {
    const ALPHABET: &[&str] = &[
        "ip=",
        "bond=",
        "vlan=",
        "talos.hostname=",
        ":",
        "::",
        "[",
        "]",
        "\"",
        "=",
        " ",
        ",",
        ";",
        ".",
        "1",
        "10.0.0.1",
        "2001:db8::1",
        "255.255.255.0",
        "eth0",
        "dhcp",
        "off",
        "vlan",
        "mode=",
        "é",
        "--",
        "9000",
        "02:00:5e:10:00:01",
        "\t",
    ];
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        // xorshift64: enough variety for a smoke test.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let view = crate::resource::LinkView::default();
    for _ in 0..3000 {
        let len = next() % 24;
        let line: String =
            (0..len).map(|_| ALPHABET[(next() % ALPHABET.len() as u64) as usize]).collect();
        let n = parse(&line);
        for e in &n.errors {
            assert!(e.column >= 1 && e.column <= line.chars().count() + 1, "{line:?}: {e}");
        }
        let _ = to_specs(&n, &view);
    }
}

#[test]
fn boot_mac_and_image_of_a_network_boot() {
    let n = clean("console=ttyS0 BOOTIF=01-52-54-00-A1-b2-c3 keelson.image=v1.7.0+pxe");
    assert_eq!(n.boot_mac.as_deref(), Some("52:54:00:a1:b2:c3"));
    assert_eq!(n.image.as_deref(), Some("v1.7.0+pxe"));
    let n = parse(
        "BOOTIF=01-52-54-00-a1-b2-c3 BOOTIF=01-00-00-00-00-00-01 keelson.image=a keelson.image=b",
    );
    assert_eq!(n.boot_mac.as_deref(), Some("52:54:00:a1:b2:c3"));
    assert_eq!(n.image.as_deref(), Some("a"));
    assert_eq!(n.warnings.len(), 2, "{:?}", n.warnings);
    for bad in [
        "BOOTIF=52-54-00-a1-b2-c3",
        "BOOTIF=06-52-54-00-a1-b2-c3",
        "BOOTIF=01-52-54-00-a1-b2",
        "BOOTIF=01-52-54-00-a1-b2-c3-d4",
        "BOOTIF=01-5g-54-00-a1-b2-c3",
        "BOOTIF=01-525-4-00-a1-b2-c3",
        "BOOTIF",
    ] {
        let (n, e) = one_error(bad);
        assert_eq!(n.boot_mac, None, "{bad}");
        assert_eq!(e.param, "BOOTIF", "{bad}");
        assert_eq!(e.column, if bad == "BOOTIF" { 1 } else { 8 }, "{bad}: {e}");
    }
    for bad in ["keelson.image=.x", "keelson.image=a/b", "keelson.image=", "keelson.image=a$b"] {
        let (n, e) = one_error(bad);
        assert_eq!(n.image, None, "{bad}");
        assert_eq!(e.param, "keelson.image", "{bad}");
    }
    assert_eq!(
        clean(&format!("keelson.image={}", "a".repeat(64))).image.map(|i| i.len()),
        Some(64)
    );
    assert_eq!(one_error(&format!("keelson.image={}", "a".repeat(65))).0.image, None);
}
