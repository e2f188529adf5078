// SPDX-License-Identifier: Apache-2.0
//! `keelson run` against the real kernel, in namespaces these tests create. Verified with the
//! kernel's own view (`ip -j`), never only with our resources.
#![allow(clippy::disallowed_methods)] // Tests and examples drive keelson from outside: plain threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{require_full_kernel, require_root, sh, wait_for, Netns, Node, TempDir};

/// How long a change may take to show. Under software emulation (the VM suite, where
/// `KEELSON_FULL_KERNEL=1`) everything is ten times slower.
fn t() -> Duration {
    if std::env::var("KEELSON_FULL_KERNEL").as_deref() == Ok("1") {
        Duration::from_secs(90)
    } else {
        Duration::from_secs(15)
    }
}

fn has_route(ns: &Netns, table: &str, pred: impl Fn(&serde_json::Value) -> bool) -> bool {
    ns.routes(table).iter().any(pred)
}

#[test]
fn static_network_from_cmdline() {
    if !require_root("static_network_from_cmdline") {
        return;
    }
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.veth("eth1", &peer, "up1");
    peer.ip(&["addr", "add", "172.20.0.1/24", "dev", "up1"]);
    let node = Node::start(
        &ns,
        "ip=172.20.0.2::172.20.0.1:255.255.255.0::eth1:off:172.20.0.53 talos.hostname=node-1.example.org",
        None,
    );
    wait_for(
        "address, default route and files",
        t(),
        || {
            ns.addresses().contains(&"eth1/172.20.0.2/24".to_owned())
                && has_route(&ns, "main", |r| r["dst"] == "default" && r["gateway"] == "172.20.0.1")
                && node.root.path().join("etc/resolv.conf").exists()
        },
        || format!("{:?}\n{}", ns.addresses(), node.log_text()),
    );
    // `ip -j route` hides `proto boot` unless asked for details.
    let detailed = ns.ip_json(&["-d", "route", "show", "table", "main"]);
    let default =
        detailed.as_array().unwrap().iter().find(|r| r["dst"] == "default").unwrap().clone();
    assert_eq!(
        (default["metric"].as_u64(), default["protocol"].as_str()),
        (Some(1024), Some("boot"))
    );
    assert!(ns.addresses().contains(&"lo/127.0.0.1/8".to_owned()));
    let link = &ns.ip_json(&["link", "show", "eth1"])[0];
    assert!(link["flags"].as_array().unwrap().iter().any(|f| f == "UP"), "{link}");
    let resolv = std::fs::read_to_string(node.root.path().join("etc/resolv.conf")).unwrap();
    assert_eq!(resolv, "nameserver 172.20.0.53\n");
    let hosts = std::fs::read_to_string(node.root.path().join("etc/hosts")).unwrap();
    assert!(hosts.contains("172.20.0.2 node-1.example.org node-1"), "{hosts}");
    let uts = sh(&["nsenter", "-t", &node.pid().to_string(), "-u", "hostname"]);
    assert_eq!(uts.trim(), "node-1");
    // Traffic actually flows through what we configured.
    ns.sh(&["ping", "-c1", "-W2", "172.20.0.1"]);
    let log = node.stop();
    assert!(!log.contains(" error "), "{log}");
    // KubeSpan was never enabled: nothing about nf_tables happens or is said.
    assert!(!log.contains("kubespan.nft"), "{log}");
}

fn write_config(dir: &TempDir, body: &str) -> std::path::PathBuf {
    let path = dir.path().join("config.yaml");
    let tmp = dir.path().join(".config.yaml.tmp");
    std::fs::write(&tmp, format!("version: v1alpha1\nmachine:\n  network:\n{body}")).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    path
}

#[test]
fn config_file_routes_tables_mtu_and_hot_changes() {
    if !require_root("config_file_routes_tables_mtu_and_hot_changes") {
        return;
    }
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.veth("eth0", &peer, "up0");
    let dir = TempDir::new();
    let first = "    interfaces:\n      - interface: eth0\n        mtu: 1400\n        addresses: [10.0.0.2/24, 10.0.0.3/24]\n        routes:\n          - {network: 10.50.0.0/16, gateway: 10.0.0.1}\n          - {network: 10.60.0.0/16, gateway: 10.0.0.1, table: 100, metric: 50}\n";
    let config = write_config(&dir, first);
    let node = Node::start(&ns, "", Some(&config));
    wait_for(
        "config applied",
        t(),
        || {
            ns.addresses().contains(&"eth0/10.0.0.3/24".to_owned())
                && has_route(&ns, "100", |r| r["dst"] == "10.60.0.0/16" && r["metric"] == 50)
                && has_route(&ns, "main", |r| r["dst"] == "10.50.0.0/16")
        },
        || format!("{:?}\n{}", ns.addresses(), node.log_text()),
    );
    assert_eq!(ns.ip_json(&["link", "show", "eth0"])[0]["mtu"], 1400);

    // Foreign state, added behind our back, must survive every change.
    ns.ip(&["addr", "add", "192.0.2.9/24", "dev", "eth0"]);
    ns.ip(&["route", "add", "10.70.0.0/16", "via", "10.0.0.1"]);

    let second = "    interfaces:\n      - interface: eth0\n        mtu: 1400\n        addresses: [10.0.0.2/24, 10.0.0.4/24]\n        routes:\n          - {network: 10.51.0.0/16, gateway: 10.0.0.1}\n          - {network: 10.60.0.0/16, gateway: 10.0.0.1, table: 100, metric: 50}\n";
    write_config(&dir, second);
    wait_for(
        "hot change applied",
        t(),
        || {
            let a = ns.addresses();
            a.contains(&"eth0/10.0.0.4/24".to_owned())
                && !a.contains(&"eth0/10.0.0.3/24".to_owned())
                && has_route(&ns, "main", |r| r["dst"] == "10.51.0.0/16")
                && !has_route(&ns, "main", |r| r["dst"] == "10.50.0.0/16")
        },
        || format!("{:?}\n{:?}\n{}", ns.addresses(), ns.routes("main"), node.log_text()),
    );
    assert!(ns.addresses().contains(&"eth0/192.0.2.9/24".to_owned()), "foreign address kept");
    assert!(has_route(&ns, "main", |r| r["dst"] == "10.70.0.0/16"), "foreign route kept");
    assert!(has_route(&ns, "100", |r| r["dst"] == "10.60.0.0/16"), "unchanged route kept");

    // An invalid entry is reported with its line and dropped; the rest of the file applies,
    // so what it still says stays.
    let with_bogus = format!("    bogus: 1\n{second}");
    write_config(&dir, &with_bogus);
    wait_for(
        "invalid entry logged",
        t(),
        || node.log_text().contains("machine.network.bogus (line 4"),
        || node.log_text(),
    );
    assert!(ns.addresses().contains(&"eth0/10.0.0.4/24".to_owned()));
    assert!(has_route(&ns, "main", |r| r["dst"] == "10.51.0.0/16"));
    // A file of which nothing is valid is reported and changes nothing.
    std::fs::write(&config, "version: v1alpha1\nmachine: [bogus\n").unwrap();
    wait_for(
        "rejection logged",
        t(),
        || node.log_text().contains("keeping the running configuration"),
        || node.log_text(),
    );
    assert!(ns.addresses().contains(&"eth0/10.0.0.4/24".to_owned()));
    node.stop();
}

/// Count rtnetlink change events in a namespace while `f` runs.
fn count_kernel_events(ns: &Netns, f: impl FnOnce()) -> Vec<String> {
    let mut mon = Command::new("ip")
        .args(["-n", &ns.name, "monitor", "link", "address", "route", "rule"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    f();
    std::thread::sleep(Duration::from_millis(500));
    let _ = mon.kill();
    let out = mon.stdout.take().unwrap();
    let _ = mon.wait();
    BufReader::new(out).lines().map_while(Result::ok).collect()
}

#[test]
fn restart_adopts_the_configured_kernel_without_changes() {
    if !require_root("restart_adopts_the_configured_kernel_without_changes") {
        return;
    }
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.veth("eth1", &peer, "up1");
    peer.ip(&["addr", "add", "172.21.0.1/24", "dev", "up1"]);
    let cmdline = "ip=172.21.0.2::172.21.0.1:24::eth1 talos.hostname=r1";
    let node = Node::start(&ns, cmdline, None);
    wait_for(
        "first run converged",
        t(),
        || {
            // The kernel's own IPv6 work on the link (duplicate address detection of the
            // link-local address, then its routes and a link notice) is not keelson's: it
            // must be over before the second run's window opens, or it is counted as a change.
            // The address itself comes only once the link is operationally up (the kernel's
            // link watcher, up to a second after carrier), so wait for it to exist as well.
            has_route(&ns, "main", |r| r["dst"] == "default")
                && node.root.path().join("etc/hosts").exists()
                && !ns.ip(&["-6", "addr", "show", "dev", "eth1", "scope", "link"]).trim().is_empty()
                && ns.ip(&["-6", "addr", "show", "tentative"]).trim().is_empty()
        },
        || node.log_text(),
    );
    std::thread::sleep(Duration::from_millis(500));
    let (_, root) = node.stop_keeping_root();
    let events = count_kernel_events(&ns, || {
        let second = Node::start_in(&ns, cmdline, None, root);
        wait_for(
            "second run settled",
            t(),
            || second.log_text().contains("settled"),
            || second.log_text(),
        );
        std::thread::sleep(Duration::from_secs(2));
        let log = second.stop();
        assert!(!log.contains("wrote /etc"), "files were already right:\n{log}");
    });
    assert!(events.is_empty(), "a restart changed the kernel:\n{}", events.join("\n"));
}

#[test]
fn bad_input_waits_and_reports_without_looping() {
    if !require_root("bad_input_waits_and_reports_without_looping") {
        return;
    }
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.veth("eth0", &peer, "up0");
    let dir = TempDir::new();
    let body = "    interfaces:\n      - interface: eth0\n        addresses: [10.0.0.2/24]\n        routes:\n          - {network: 10.9.0.0/16, gateway: 192.0.2.1}\n          - {network: 10.8.0.0/16, gateway: 10.0.0.1}\n      - interface: eth9\n        addresses: [10.9.9.9/24]\n";
    let config = write_config(&dir, body);
    let node = Node::start(&ns, "", Some(&config));
    wait_for(
        "good route applied",
        t(),
        || has_route(&ns, "main", |r| r["dst"] == "10.8.0.0/16"),
        || node.log_text(),
    );
    std::thread::sleep(Duration::from_secs(3));
    let log = node.stop();
    // Console-level lines only: debug lines never reach the console in init mode.
    let console: Vec<&str> =
        log.lines().filter(|l| l.starts_with("warn") || l.starts_with("error")).collect();
    let waiting =
        console.iter().filter(|l| l.contains("waiting for link") && l.contains("eth9")).count();
    assert_eq!(waiting, 1, "one line for the missing link, not a loop:\n{log}");
    let unreachable: Vec<&&str> = console.iter().filter(|l| l.contains("10.9.0.0/16")).collect();
    assert_eq!(unreachable.len(), 1, "the kernel's reason, once:\n{log}");
    assert!(unreachable[0].contains("gateway"), "{}", unreachable[0]);
    assert!(ns.addresses().contains(&"eth0/10.0.0.2/24".to_owned()));
}

#[test]
fn vlan_on_bond_and_bridge_from_config() {
    if !require_root("vlan_on_bond_and_bridge_from_config")
        || !require_full_kernel("vlan_on_bond_and_bridge_from_config")
    {
        return;
    }
    let (ns, peer) = (Netns::new(), Netns::new());
    for (i, o) in [("eth1", "p1"), ("eth2", "p2"), ("eth3", "p3"), ("eth4", "p4")] {
        ns.veth(i, &peer, o);
    }
    let dir = TempDir::new();
    let body = "    interfaces:\n      - interface: bond0\n        bond: {interfaces: [eth1, eth2], mode: active-backup, miimon: 100}\n        vlans:\n          - {vlanId: 42, addresses: [10.42.0.2/24]}\n      - interface: br0\n        bridge: {interfaces: [eth3, eth4], stp: {enabled: false}}\n        addresses: [10.43.0.2/24]\n";
    let config = write_config(&dir, body);
    let node = Node::start(&ns, "", Some(&config));
    wait_for(
        "vlan on bond and bridge up",
        t(),
        || {
            let a = ns.addresses();
            a.contains(&"bond0.42/10.42.0.2/24".to_owned())
                && a.contains(&"br0/10.43.0.2/24".to_owned())
        },
        || format!("{:?}\n{}", ns.addresses(), node.log_text()),
    );
    let links = ns.ip_json(&["-d", "link", "show"]);
    let find = |name: &str| {
        links.as_array().unwrap().iter().find(|l| l["ifname"] == name).cloned().unwrap()
    };
    assert_eq!(find("eth1")["master"], "bond0");
    assert_eq!(find("eth2")["master"], "bond0");
    assert_eq!(find("eth3")["master"], "br0");
    assert_eq!(find("eth4")["master"], "br0");
    assert_eq!(find("bond0.42")["linkinfo"]["info_data"]["id"], 42);
    assert_eq!(find("bond0")["linkinfo"]["info_data"]["mode"], "active-backup");
    for l in ["bond0", "bond0.42", "br0"] {
        assert!(find(l)["flags"].as_array().unwrap().iter().any(|f| f == "UP"), "{l} up");
    }
    node.stop();
}

/// The same kind of node as above, configured only with typed documents (the Talos 1.12
/// form): a bond with a VLAN on it, a static route, a blackhole route, name servers and a
/// hostname.
#[test]
fn multi_document_config_bond_vlan_routes_resolvers_hostname() {
    let name = "multi_document_config_bond_vlan_routes_resolvers_hostname";
    if !require_root(name) || !require_full_kernel(name) {
        return;
    }
    let (ns, peer) = (Netns::new(), Netns::new());
    for (i, o) in [("eth1", "p1"), ("eth2", "p2")] {
        ns.veth(i, &peer, o);
    }
    let dir = TempDir::new();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        "apiVersion: v1alpha1\nkind: BondConfig\nname: bond0\nlinks: [eth1, eth2]\n\
         bondMode: active-backup\nmiimon: 100\naddresses:\n  - address: 10.44.0.2/24\n\
         routes:\n  - destination: 10.99.0.0/16\n    gateway: 10.44.0.1\n\
         ---\napiVersion: v1alpha1\nkind: VLANConfig\nname: bond0.42\nvlanID: 42\nparent: bond0\n\
         addresses:\n  - address: 10.42.0.2/24\n\
         ---\napiVersion: v1alpha1\nkind: BlackholeRouteConfig\nname: 10.66.0.0/16\n\
         ---\napiVersion: v1alpha1\nkind: ResolverConfig\nnameservers:\n  - address: 10.44.0.53\n\
         searchDomains:\n  domains: [corp.example]\n\
         ---\napiVersion: v1alpha1\nkind: HostnameConfig\nhostname: mdoc-node.example.org\n",
    )
    .unwrap();
    let node = Node::start(&ns, "", Some(&config));
    let etc = node.root.path().join("etc");
    wait_for(
        "bond, VLAN, routes and /etc from typed documents",
        t(),
        || {
            let a = ns.addresses();
            a.contains(&"bond0/10.44.0.2/24".to_owned())
                && a.contains(&"bond0.42/10.42.0.2/24".to_owned())
                && has_route(&ns, "main", |r| r["dst"] == "10.99.0.0/16")
                && has_route(&ns, "main", |r| r["dst"] == "10.66.0.0/16")
                && std::fs::read_to_string(etc.join("resolv.conf"))
                    .is_ok_and(|r| r.contains("10.44.0.53"))
                && std::fs::read_to_string(etc.join("hostname"))
                    .is_ok_and(|h| h.contains("mdoc-node"))
        },
        || format!("{:?}\n{:?}\n{}", ns.addresses(), ns.routes("main"), node.log_text()),
    );
    let links = ns.ip_json(&["-d", "link", "show"]);
    let find = |name: &str| {
        links.as_array().unwrap().iter().find(|l| l["ifname"] == name).cloned().unwrap()
    };
    assert_eq!(find("eth1")["master"], "bond0");
    assert_eq!(find("eth2")["master"], "bond0");
    assert_eq!(find("bond0")["linkinfo"]["info_data"]["mode"], "active-backup");
    assert_eq!(find("bond0.42")["linkinfo"]["info_data"]["id"], 42);
    let routes = ns.routes("main");
    let via = routes.iter().find(|r| r["dst"] == "10.99.0.0/16").unwrap();
    assert_eq!((via["gateway"].as_str(), via["dev"].as_str()), (Some("10.44.0.1"), Some("bond0")));
    let hole = routes.iter().find(|r| r["dst"] == "10.66.0.0/16").unwrap();
    assert_eq!(hole["type"], "blackhole");
    let resolv = std::fs::read_to_string(etc.join("resolv.conf")).unwrap();
    assert!(resolv.contains("search corp.example"), "{resolv}");
    // Link documents take links over: the defaults run no DHCP on the bond's members.
    let log = node.stop();
    assert!(!log.contains("dhcp4/eth1"), "{log}");
}

/// A VRF from typed documents: the VRF link bound to its table, a member enslaved to it, the
/// member's address and routes in the VRF's table, a dummy link and a link found by an alias.
#[test]
fn vrf_dummy_and_alias_from_typed_documents() {
    let name = "vrf_dummy_and_alias_from_typed_documents";
    if !require_root(name) || !require_full_kernel(name) {
        return;
    }
    let (ns, peer) = (Netns::new(), Netns::new());
    ns.veth("eth1", &peer, "p1");
    ns.veth("eth2", &peer, "p2");
    ns.ip(&["link", "set", "eth2", "address", "02:00:5e:00:53:42"]);
    let dir = TempDir::new();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        "apiVersion: v1alpha1\nkind: VRFConfig\nname: vrf-blue\nlinks: [eth1]\ntable: 123\n\
         ---\napiVersion: v1alpha1\nkind: LinkConfig\nname: eth1\naddresses:\n  - address: 10.61.0.2/24\n\
         routes:\n  - destination: 10.62.0.0/16\n    gateway: 10.61.0.1\n    table: 123\n\
         ---\napiVersion: v1alpha1\nkind: DummyLinkConfig\nname: dummy7\nhardwareAddr: 2e:3c:4d:5e:6f:70\n\
         addresses:\n  - address: 10.63.0.1/32\n\
         ---\napiVersion: v1alpha1\nkind: LinkAliasConfig\nname: uplink\nselector:\n  \
         match: mac(link.hardware_addr) == \"02:00:5e:00:53:42\"\n\
         ---\napiVersion: v1alpha1\nkind: LinkConfig\nname: uplink\nmtu: 1400\n",
    )
    .unwrap();
    let node = Node::start(&ns, "", Some(&config));
    wait_for(
        "VRF, dummy and alias from typed documents",
        t(),
        || {
            let a = ns.addresses();
            a.contains(&"eth1/10.61.0.2/24".to_owned())
                && a.contains(&"dummy7/10.63.0.1/32".to_owned())
                && has_route(&ns, "123", |r| r["dst"] == "10.62.0.0/16")
                && ns
                    .ip_json(&["link", "show"])
                    .as_array()
                    .is_some_and(|a| a.iter().any(|l| l["ifname"] == "vrf-blue"))
                && ns.ip_json(&["link", "show", "eth2"])[0]["mtu"] == 1400
        },
        || format!("{:?}\n{:?}\n{}", ns.addresses(), ns.routes("123"), node.log_text()),
    );
    let links = ns.ip_json(&["-d", "link", "show"]);
    let find = |name: &str| {
        links
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["ifname"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no link {name}: {links}\n{}", node.log_text()))
    };
    assert_eq!(find("vrf-blue")["linkinfo"]["info_kind"], "vrf");
    assert_eq!(find("vrf-blue")["linkinfo"]["info_data"]["table"], 123);
    assert_eq!(find("eth1")["master"], "vrf-blue");
    assert_eq!(find("dummy7")["address"], "2e:3c:4d:5e:6f:70");
    // The member's connected route lives in the VRF's table, not in main.
    assert!(has_route(&ns, "123", |r| r["dst"] == "10.61.0.0/24"), "{:?}", ns.routes("123"));
    assert!(!has_route(&ns, "main", |r| r["dst"] == "10.61.0.0/24"));
    node.stop();
}
