// SPDX-License-Identifier: Apache-2.0
//! The DHCPv4 operator against real servers: `keelson run` in one namespace, dnsmasq or Kea
//! in another, joined by a veth pair. What crossed the wire is read from tcpdump on the
//! server side; what happened to the address from `ip monitor` on the client side.
#![allow(clippy::disallowed_methods)] // Tests and examples drive keelson from outside: plain threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::path::{Path, PathBuf};

use common::{require_root, t, wait_for, Background, Netns, Node, TempDir};

const SERVER: &str = "10.77.0.1";
const MAC: &str = "02:4b:65:00:00:01";

/// A server namespace with `s0` (10.77.0.1/24) and a client namespace with `v0`.
struct Lab {
    server: Netns,
    client: Netns,
    dir: TempDir,
}

impl Lab {
    fn new() -> Self {
        let server = Netns::new();
        let client = Netns::new();
        client.veth("v0", &server, "s0");
        client.ip(&["link", "set", "v0", "address", MAC]);
        server.ip(&["addr", "add", &format!("{SERVER}/24"), "dev", "s0"]);
        Self { server, client, dir: TempDir::new() }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// dnsmasq serving 10.77.0.50-99 with a 2 minute lease (its minimum) and `extra` options.
    fn dnsmasq(&self, extra: &[&str]) -> Background {
        let leases = self.file("dnsmasq.leases");
        let mut args = vec![
            "dnsmasq".to_owned(),
            "--no-daemon".into(),
            "--conf-file=/dev/null".into(),
            "--port=0".into(),
            "--interface=s0".into(),
            "--bind-interfaces".into(),
            "--dhcp-range=10.77.0.50,10.77.0.99,255.255.255.0,2m".into(),
            "--log-dhcp".into(),
            // No ICMP probe before an offer: it costs 3 s per lease and tests nothing of ours.
            "--no-ping".into(),
            format!("--dhcp-leasefile={}", leases.display()),
            format!("--pid-file={}", self.file("dnsmasq.pid").display()),
        ];
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        Background::start(&self.server, &refs, self.file("dnsmasq.log"))
    }

    /// tcpdump of DHCP on the server side, verbose enough to show ciaddr and options.
    fn capture(&self) -> Background {
        let args = ["tcpdump", "-i", "s0", "-n", "-l", "-vv", "-s0", "udp port 67 or udp port 68"];
        let cap = Background::start(&self.server, &args, self.file("tcpdump.log"));
        wait_for("tcpdump to listen", t(10), || cap.text().contains("listening on"), || cap.text());
        cap
    }

    /// A Kea server (`kea-dhcp4` or `kea-dhcp6`) with its pid and lock files in the lab.
    fn kea(&self, program: &str, conf: &Path) -> Background {
        let dir = self.dir.path().display().to_string();
        let args = [
            "env",
            &format!("KEA_PIDFILE_DIR={dir}"),
            &format!("KEA_LOCKFILE_DIR={dir}"),
            program,
            "-c",
            conf.to_str().unwrap(),
        ];
        Background::start(&self.server, &args, self.file(&format!("{program}.log")))
    }

    fn config(&self, extra_machine: &str) -> PathBuf {
        let path = self.file("config.yaml");
        let text = format!(
            "version: v1alpha1\nmachine:\n  network:\n{extra_machine}    interfaces:\n      - interface: v0\n        dhcp: true\n"
        );
        std::fs::write(&path, text).unwrap();
        path
    }

    /// The leased IPv4 address on `v0`, if any.
    fn leased(&self) -> Option<String> {
        self.client
            .addresses()
            .into_iter()
            .find(|a| a.starts_with("v0/10.77.0."))
            .map(|a| a.split('/').nth(1).unwrap().to_owned())
    }

    fn wait_leased(&self, node: &Node) -> String {
        wait_for("a lease", t(20), || self.leased().is_some(), || node.log_text());
        self.leased().unwrap()
    }
}

/// `keelson get KIND -o yaml` through the node's API socket.
fn get(node: &Node, kind: &str) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_keelson"))
        .args(["get", kind, "-o", "yaml", "--socket"])
        .arg(node.api.as_ref().expect("started with an API socket"))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// No RTM_DELADDR for `addr` in an `ip -ts monitor address` log.
fn assert_never_deleted(monitor: &Background, addr: &str) {
    let events = monitor.text();
    assert!(
        !events.lines().any(|l| l.contains("Deleted") && l.contains(addr)),
        "the address was deleted during renewal:\n{events}"
    );
}

/// Bound, renewed by unicast from the leased address with `ciaddr`, rebound by broadcast
/// when the server stops answering unicast: and the kernel address is never deleted.
#[test]
fn renewal_is_unicast_rebinding_broadcast_and_the_address_stays() {
    if !require_root("renewal_is_unicast_rebinding_broadcast_and_the_address_stays") {
        return;
    }
    let lab = Lab::new();
    let _server = lab.dnsmasq(&["--dhcp-option=58,4", "--dhcp-option=59,8"]);
    let cap = lab.capture();
    let monitor = Background::start(
        &lab.client,
        &["ip", "-ts", "monitor", "address", "dev", "v0"],
        lab.file("monitor.log"),
    );
    let config = lab.config("");
    let node = Node::start(&lab.client, "", Some(&config));
    let addr = lab.wait_leased(&node);

    // RENEWING: unicast to the server, from the lease, with ciaddr (RFC 2131 §4.4.5).
    let unicast = format!("{addr}.68 > {SERVER}.67");
    wait_for("a unicast renewal", t(20), || cap.text().contains(&unicast), || cap.text());
    let text = cap.text();
    let renewal = text.split(&unicast).nth(1).unwrap();
    assert!(renewal.contains(&format!("Client-IP {addr}")), "ciaddr must be set:\n{renewal}");
    wait_for(
        "the renewal's ACK",
        t(10),
        || node.log_text().contains("renewed"),
        || node.log_text(),
    );

    // The server stops answering unicast: REBINDING broadcasts with ciaddr at T2.
    lab.server.sh(&[
        "nft", "add table inet block; add chain inet block in { type filter hook input priority 0; }; add rule inet block in ip daddr 10.77.0.1 udp dport 67 drop",
    ]);
    let before = cap.text().len();
    let broadcast = format!("{addr}.68 > 255.255.255.255.67");
    wait_for(
        "a broadcast rebind",
        t(30),
        || cap.text().get(before..).is_some_and(|s| s.contains(&broadcast)),
        || cap.text(),
    );
    let renewed_before = node.log_text().matches("renewed").count();
    wait_for(
        "the rebind's ACK",
        t(10),
        || node.log_text().matches("renewed").count() > renewed_before,
        || node.log_text(),
    );
    assert_eq!(lab.leased().as_deref(), Some(addr.as_str()));
    assert_never_deleted(&monitor, &addr);
    node.stop();
}

/// A restart and a link flap ask for the same address with option 50 (INIT-REBOOT), without
/// a new DISCOVER.
#[test]
fn restart_and_link_flap_reboot_into_the_same_lease() {
    if !require_root("restart_and_link_flap_reboot_into_the_same_lease") {
        return;
    }
    let lab = Lab::new();
    let server = lab.dnsmasq(&[]);
    let cap = lab.capture();
    let config = lab.config("");
    let node = Node::start(&lab.client, "", Some(&config));
    let addr = lab.wait_leased(&node);
    let discovers = |s: &Background| s.text().matches("DHCPDISCOVER").count();
    let (_, root) = node.stop_keeping_root();
    assert!(root.path().join("state/dhcp4-v0.json").exists(), "the lease is saved");
    let before = discovers(&server);
    let acks = server.text().matches("DHCPACK").count();

    let node = Node::start_in(&lab.client, "", Some(&config), root);
    wait_for(
        "an ACK after restart",
        t(20),
        || server.text().matches("DHCPACK").count() > acks,
        || server.text(),
    );
    assert_eq!(discovers(&server), before, "INIT-REBOOT sends no DISCOVER");
    assert!(cap.text().contains(&format!("Requested-IP (50), length 4: {addr}")), "{}", cap.text());
    assert!(node.log_text().contains("INIT-REBOOT"), "{}", node.log_text());

    // A link flap: carrier down and up, then the same again.
    let acks = server.text().matches("DHCPACK").count();
    lab.server.ip(&["link", "set", "s0", "down"]);
    wait_for("carrier loss", t(10), || node.log_text().contains("link down"), || node.log_text());
    lab.server.ip(&["link", "set", "s0", "up"]);
    wait_for(
        "an ACK after the flap",
        t(20),
        || server.text().matches("DHCPACK").count() > acks,
        || server.text(),
    );
    assert_eq!(discovers(&server), before, "a flap sends no DISCOVER");
    assert_eq!(lab.leased().as_deref(), Some(addr.as_str()));
    node.stop();
}

/// Options 121 (over 3), 26, 42, 15, 119 and 12 land in the kernel and the /etc files.
#[test]
fn lease_options_become_routes_mtu_resolvers_and_hostname() {
    if !require_root("lease_options_become_routes_mtu_resolvers_and_hostname") {
        return;
    }
    let lab = Lab::new();
    let _server = lab.dnsmasq(&[
        "--dhcp-option=3,10.77.0.2",
        "--dhcp-option=121,10.99.0.0/16,10.77.0.254,0.0.0.0/0,10.77.0.1",
        "--dhcp-option=26,1400",
        "--dhcp-option=42,10.77.0.123",
        "--dhcp-option=6,10.77.0.53",
        "--dhcp-option=15,example.test",
        "--dhcp-option=119,a.test,b.test",
        &format!("--dhcp-host={MAC},leased-name"),
    ]);
    let config = lab.config("");
    let node = Node::start_api(&lab.client, "", Some(&config));
    lab.wait_leased(&node);
    let routes = lab.client.ip(&["route", "show"]);
    wait_for(
        "option 121 routes",
        t(10),
        || lab.client.ip(&["route", "show"]).contains("10.99.0.0/16 via 10.77.0.254"),
        || routes.clone(),
    );
    let routes = lab.client.ip(&["route", "show"]);
    assert!(routes.contains("default via 10.77.0.1"), "{routes}");
    assert!(!routes.contains("via 10.77.0.2 "), "option 121 overrides option 3:\n{routes}");
    assert!(routes.contains("metric 1024"), "{routes}");
    wait_for(
        "MTU 1400",
        t(10),
        || lab.client.ip(&["link", "show", "v0"]).contains("mtu 1400"),
        || lab.client.ip(&["link", "show", "v0"]),
    );
    let etc = node.root.path().join("etc");
    wait_for(
        "resolv.conf from the lease",
        t(10),
        || std::fs::read_to_string(etc.join("resolv.conf")).is_ok_and(|r| r.contains("10.77.0.53")),
        || node.log_text(),
    );
    let resolv = std::fs::read_to_string(etc.join("resolv.conf")).unwrap();
    assert!(
        resolv.contains("a.test") && resolv.contains("b.test") && resolv.contains("example.test"),
        "{resolv}"
    );
    wait_for(
        "the leased hostname",
        t(10),
        || {
            std::fs::read_to_string(etc.join("hostname"))
                .is_ok_and(|h| h.trim() == "leased-name.example.test")
        },
        || node.log_text(),
    );
    let ts = get(&node, "timeserverstatus");
    assert!(ts.contains("10.77.0.123"), "NTP from option 42:\n{ts}");
    let st = get(&node, "operatorstatus");
    assert!(st.contains("state: bound") && st.contains("server: 10.77.0.1"), "{st}");
    node.stop();
}

/// A configured hostname goes to the server as option 12.
#[test]
fn configured_hostname_is_sent() {
    if !require_root("configured_hostname_is_sent") {
        return;
    }
    let lab = Lab::new();
    let server = lab.dnsmasq(&[]);
    let config = lab.config("    hostname: sender-node\n");
    let node = Node::start(&lab.client, "", Some(&config));
    lab.wait_leased(&node);
    wait_for(
        "option 12 at the server",
        t(10),
        || server.text().contains("sender-node"),
        || server.text(),
    );
    node.stop();
}

/// Garbage sent into the client's link is ignored with a debug line; the lease is unharmed
/// and the client keeps renewing.
#[test]
fn garbage_packets_are_ignored() {
    if !require_root("garbage_packets_are_ignored") {
        return;
    }
    let lab = Lab::new();
    let _server = lab.dnsmasq(&["--dhcp-option=58,4", "--dhcp-option=59,8"]);
    let config = lab.config("");
    let node = Node::start(&lab.client, "", Some(&config));
    let addr = lab.wait_leased(&node);
    let script = lab.file("garbage.py");
    std::fs::write(&script, GARBAGE).unwrap();
    lab.server.sh(&["python3", script.to_str().unwrap(), MAC, &addr]);
    let renewed = node.log_text().matches("renewed").count();
    wait_for(
        "a renewal after the garbage",
        t(20),
        || node.log_text().matches("renewed").count() > renewed,
        || node.log_text(),
    );
    let log = node.log_text();
    let ignored = log.matches("ignoring").count();
    assert!(ignored >= 5, "each bad packet gets a debug line ({ignored}):\n{log}");
    assert_eq!(lab.leased().as_deref(), Some(addr.as_str()));
    assert!(!log.contains("panic"), "{log}");
    node.stop();
}

/// Sends malformed DHCP replies to 255.255.255.255:68 on s0: truncated, a bad option length,
/// a wrong xid, a wrong chaddr, option overload pointing at garbage, a NAK from a stranger.
const GARBAGE: &str = r#"
import socket, struct, sys
mac = bytes.fromhex(sys.argv[1].replace(":", ""))
addr = socket.inet_aton(sys.argv[2])
def reply(xid, chaddr, options, sname=b"", file=b""):
    head = struct.pack("!BBBBIHH4s4s4s4s", 2, 1, 6, 0, xid, 0, 0, b"\0"*4, addr, b"\0"*4, b"\0"*4)
    return head + chaddr.ljust(16, b"\0") + sname.ljust(64, b"\0") + file.ljust(128, b"\0") + b"\x63\x82\x53\x63" + options
ack = bytes([53, 1, 5, 54, 4]) + socket.inet_aton("10.77.0.1") + bytes([51, 4, 0, 0, 0, 60, 1, 4, 255, 255, 255, 0, 255])
packets = [
    reply(0x1234, mac, ack)[:40],                                  # truncated
    reply(0x1234, mac, bytes([53, 1, 5, 54, 200, 1, 2]) + b"\xff"), # option length past the end
    reply(0xdeadbeef, mac, ack),                                   # wrong xid
    reply(0x1234, b"\x02\x99\x99\x99\x99\x99", ack),               # wrong chaddr
    reply(0x1234, mac, bytes([53, 1, 5, 52, 1, 3, 255]), sname=b"\x35\x09", file=b"\x01\xff\x07"),  # overload into garbage
    reply(0x1234, mac, bytes([53, 1, 6, 54, 4]) + socket.inet_aton("10.77.0.200") + b"\xff"),  # NAK from a stranger
    b"\x00" * 3,                                                   # not even a header
]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, b"s0")
s.bind(("10.77.0.1", 0))
for p in packets:
    s.sendto(p, ("255.255.255.255", 68))
"#;

/// The lease ends while the server is gone: address and routes are removed at expiry.
/// Kea, because dnsmasq will not lease for less than two minutes.
#[test]
fn expired_lease_removes_address_and_routes() {
    if !require_root("expired_lease_removes_address_and_routes") {
        return;
    }
    let lab = Lab::new();
    let kea_conf = lab.file("kea.json");
    std::fs::write(
        &kea_conf,
        r#"{"Dhcp4": {
  "interfaces-config": {"interfaces": ["s0"]},
  "lease-database": {"type": "memfile", "persist": false},
  "valid-lifetime": 8, "min-valid-lifetime": 8, "renew-timer": 3, "rebind-timer": 5,
  "subnet4": [{"id": 1, "subnet": "10.77.0.0/24",
    "pools": [{"pool": "10.77.0.100-10.77.0.150"}],
    "option-data": [{"name": "routers", "data": "10.77.0.1"}]}]
}}"#,
    )
    .unwrap();
    let mut kea = lab.kea("kea-dhcp4", &kea_conf);
    let config = lab.config("");
    let node = Node::start(&lab.client, "", Some(&config));
    wait_for(
        "a lease from Kea",
        t(30),
        || lab.leased().is_some(),
        || format!("{}\n{}", kea.text(), node.log_text()),
    );
    assert!(lab.client.ip(&["route", "show"]).contains("default via 10.77.0.1"));
    wait_for("a renewal", t(15), || node.log_text().contains("renewed"), || node.log_text());
    kea.stop();
    wait_for("expiry", t(20), || lab.leased().is_none(), || node.log_text());
    // The address and the routes are separate kernel objects, removed in one pass but not at
    // one instant.
    wait_for(
        "the lease's routes go with it",
        t(10),
        || !lab.client.ip(&["route", "show"]).contains("default"),
        || format!("{}\n{}", lab.client.ip(&["route", "show"]), node.log_text()),
    );
    assert!(node.log_text().contains("ended"), "{}", node.log_text());
    node.stop();
}

/// With no server, the operator and the network status say why there is no address.
#[test]
fn no_server_is_reported_as_no_offer() {
    if !require_root("no_server_is_reported_as_no_offer") {
        return;
    }
    let lab = Lab::new();
    let config = lab.config("");
    let node = Node::start_api(&lab.client, "", Some(&config));
    let get = |kind: &str| get(&node, kind);
    wait_for(
        "NetworkStatus to say why",
        t(40),
        || get("networkstatus").contains("dhcp4/v0: no offer"),
        || format!("{}\n{}", get("networkstatus"), node.log_text()),
    );
    let op = get("operatorstatus");
    assert!(op.contains("reason: no offer") && op.contains("state: selecting"), "{op}");
    node.stop();
}

impl Lab {
    /// The server side gets fd77::1/64 for DHCPv6.
    fn with_v6(self) -> Self {
        self.server.ip(&["addr", "add", "fd77::1/64", "dev", "s0", "nodad"]);
        self
    }

    fn config_v6(&self) -> PathBuf {
        let path = self.file("config6.yaml");
        let text = "version: v1alpha1\nmachine:\n  network:\n    interfaces:\n      - interface: v0\n        dhcp: true\n        dhcpOptions: {ipv4: false, ipv6: true}\n";
        std::fs::write(&path, text).unwrap();
        path
    }

    fn leased6(&self) -> Option<String> {
        self.client
            .addresses()
            .into_iter()
            .find(|a| a.starts_with("v0/fd77:"))
            .map(|a| a.split('/').nth(1).unwrap().to_owned())
    }
}

/// DHCPv6 from dnsmasq: an IA_NA address, DNS (23), search list (24) and NTP (56).
#[test]
fn dhcpv6_lease_brings_dns_search_and_ntp() {
    if !require_root("dhcpv6_lease_brings_dns_search_and_ntp") {
        return;
    }
    let lab = Lab::new().with_v6();
    let _server = lab.dnsmasq(&[
        "--dhcp-range=fd77::100,fd77::1ff,64,2m",
        "--dhcp-option=option6:dns-server,[fd77::53]",
        "--dhcp-option=option6:ntp-server,[fd77::123]",
        "--dhcp-option=option6:domain-search,v6.test",
    ]);
    let config = lab.config_v6();
    let node = Node::start_api(&lab.client, "", Some(&config));
    wait_for("a DHCPv6 lease", t(20), || lab.leased6().is_some(), || node.log_text());
    let addr = lab.leased6().unwrap();
    assert!(
        lab.client.addresses().contains(&format!("v0/{addr}/128")),
        "{:?}",
        lab.client.addresses()
    );
    let etc = node.root.path().join("etc");
    wait_for(
        "resolv.conf from the lease",
        t(10),
        || {
            std::fs::read_to_string(etc.join("resolv.conf"))
                .is_ok_and(|r| r.contains("fd77::53") && r.contains("v6.test"))
        },
        || node.log_text(),
    );
    let ts = get(&node, "timeserverstatus");
    assert!(ts.contains("fd77::123"), "NTP from option 56:\n{ts}");
    node.stop();
}

/// DHCPv6 from Kea with short lifetimes: RENEW at T1 keeps the address in place (no
/// RTM_DELADDR), and when the server goes the address leaves at the end of its valid lifetime.
#[test]
fn dhcpv6_renews_in_place_and_expires() {
    if !require_root("dhcpv6_renews_in_place_and_expires") {
        return;
    }
    let lab = Lab::new().with_v6();
    let kea_conf = lab.file("kea6.json");
    std::fs::write(
        &kea_conf,
        r#"{"Dhcp6": {
  "interfaces-config": {"interfaces": ["s0"]},
  "lease-database": {"type": "memfile", "persist": false},
  "server-id": {"type": "LL", "persist": false},
  "preferred-lifetime": 6, "min-preferred-lifetime": 6, "valid-lifetime": 10, "min-valid-lifetime": 10,
  "renew-timer": 3, "rebind-timer": 5,
  "subnet6": [{"id": 1, "subnet": "fd77::/64", "interface": "s0",
    "pools": [{"pool": "fd77::1000-fd77::1fff"}]}]
}}"#,
    )
    .unwrap();
    let mut kea = lab.kea("kea-dhcp6", &kea_conf);
    let monitor = Background::start(
        &lab.client,
        &["ip", "-ts", "monitor", "address", "dev", "v0"],
        lab.file("monitor6.log"),
    );
    let config = lab.config_v6();
    let node = Node::start(&lab.client, "", Some(&config));
    wait_for(
        "a lease from Kea",
        t(30),
        || lab.leased6().is_some(),
        || format!("{}\n{}", kea.text(), node.log_text()),
    );
    let addr = lab.leased6().unwrap();
    wait_for("a renewal", t(15), || node.log_text().contains("renewed"), || node.log_text());
    assert_eq!(lab.leased6().as_deref(), Some(addr.as_str()));
    assert_never_deleted(&monitor, &addr);
    kea.stop();
    wait_for("expiry", t(25), || lab.leased6().is_none(), || node.log_text());
    assert!(node.log_text().contains("ended"), "{}", node.log_text());
    node.stop();
}
