// SPDX-License-Identifier: Apache-2.0
//! Names that reach `/etc` and the terminal: a rogue DHCPv4 server sending newlines and
//! escape sequences in options 12, 15 and 119 against `keelson run` over a veth, and a corpus
//! of hostile configs for `keelson plan`.
#![allow(clippy::disallowed_methods)] // Tests and examples drive keelson from outside: plain threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::net::{Ipv4Addr, UdpSocket};
use std::process::Command;
use std::time::Duration;

use common::{require_root, wait_for, Background, Netns, Node, TempDir};

const SERVER: Ipv4Addr = Ipv4Addr::new(10, 78, 0, 1);
const OFFERED: Ipv4Addr = Ipv4Addr::new(10, 78, 0, 60);
/// Set in the environment of the re-executed test binary that plays the rogue server.
const ROGUE_ENV: &str = "KEELSON_TEST_ROGUE_DHCP";

/// Option 15: a domain with a line of its own after it.
const DOMAIN: &[u8] = b"x registry.local\nnameserver 6.6.6.6";
/// Option 12: a hostname with a hosts line and a terminal escape.
const HOSTNAME: &[u8] = b"rogue\n10.0.0.66 registry.local\x1b]0;owned\x07";

/// Option 119 (RFC 3397, uncompressed): `x\nnameserver 6.6.6.6.example`, then `ok.example`.
fn search_option() -> Vec<u8> {
    let mut v = Vec::new();
    for labels in [&[&b"x\nnameserver 6.6.6.6"[..], b"example"][..], &[b"ok", b"example"]] {
        for l in labels {
            v.push(u8::try_from(l.len()).unwrap());
            v.extend_from_slice(l);
        }
        v.push(0);
    }
    v
}

/// A BOOTREPLY to `req` of DHCP type `kind` (2 OFFER, 5 ACK) with the hostile options.
fn reply(req: &[u8], kind: u8) -> Vec<u8> {
    let mut m = vec![0u8; 236];
    m[0] = 2; // BOOTREPLY
    m[1] = 1; // Ethernet
    m[2] = 6;
    m[4..8].copy_from_slice(&req[4..8]); // xid
    m[10] = 0x80; // broadcast flag
    m[16..20].copy_from_slice(&OFFERED.octets()); // yiaddr
    m[28..44].copy_from_slice(&req[28..44]); // chaddr
    m.extend_from_slice(&[99, 130, 83, 99]);
    let mut opt = |code: u8, data: &[u8]| {
        m.push(code);
        m.push(u8::try_from(data.len()).unwrap());
        m.extend_from_slice(data);
    };
    opt(53, &[kind]);
    opt(54, &SERVER.octets());
    opt(51, &3600u32.to_be_bytes());
    opt(1, &[255, 255, 255, 0]);
    opt(3, &SERVER.octets());
    opt(6, &[10, 78, 0, 53]);
    opt(15, DOMAIN);
    opt(12, HOSTNAME);
    opt(119, &search_option());
    m.push(255);
    m
}

/// The DHCP message type (option 53) of a BOOTREQUEST, if it is one.
fn message_type(p: &[u8]) -> Option<u8> {
    if p.len() < 240 || p[0] != 1 || p[236..240] != [99, 130, 83, 99] {
        return None;
    }
    let mut pos = 240;
    while pos + 1 < p.len() {
        match p[pos] {
            0 => pos += 1,
            255 => return None,
            53 => return p.get(pos + 2).copied(),
            _ => pos += 2 + usize::from(p[pos + 1]),
        }
    }
    None
}

/// The rogue server itself: this test binary re-executed inside the server namespace with
/// [`ROGUE_ENV`] set (a thread cannot enter another network namespace without `setns`).
/// Answers DISCOVER with OFFER and REQUEST with ACK, both to the subnet broadcast, until
/// killed. Without the variable it does nothing.
#[test]
fn rogue_dhcp_server() {
    match std::env::var(ROGUE_ENV).as_deref() {
        Ok("4") => {}
        Ok("6") => return rogue_dhcp6_server(),
        _ => return,
    }
    let sock = UdpSocket::bind("0.0.0.0:67").unwrap();
    sock.set_broadcast(true).unwrap();
    println!("rogue server listening");
    let mut buf = [0u8; 1500];
    loop {
        let Ok((n, _)) = sock.recv_from(&mut buf) else { continue };
        let req = &buf[..n];
        let kind = match message_type(req) {
            Some(1) => 2,
            Some(3) => 5,
            _ => continue,
        };
        println!("answering with DHCP message type {kind}");
        let to = (Ipv4Addr::new(10, 78, 0, 255), 68);
        sock.send_to(&reply(req, kind), to).unwrap();
    }
}

// ---------------------------------------------------------------------------------------
// DHCPv6

const SERVER6: &str = "fd78::1";
const OFFERED6: &str = "fd78::60";

/// DHCPv6 options (2-byte code and length) of a client message after its 4-byte header.
fn options6(p: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    let mut pos = 4;
    while pos + 4 <= p.len() {
        let code = u16::from_be_bytes([p[pos], p[pos + 1]]);
        let len = usize::from(u16::from_be_bytes([p[pos + 2], p[pos + 3]]));
        let Some(body) = p.get(pos + 4..pos + 4 + len) else { break };
        out.push((code, body));
        pos += 4 + len;
    }
    out
}

fn opt6(m: &mut Vec<u8>, code: u16, data: &[u8]) {
    m.extend_from_slice(&code.to_be_bytes());
    m.extend_from_slice(&u16::try_from(data.len()).unwrap().to_be_bytes());
    m.extend_from_slice(data);
}

/// The answer to a SOLICIT (REPLY with Rapid Commit, or ADVERTISE) or a REQUEST (REPLY),
/// with hostile options 24 and 39.
fn reply6(req: &[u8]) -> Option<Vec<u8>> {
    let opts = options6(req);
    let find = |code: u16| opts.iter().find(|(c, _)| *c == code).map(|(_, d)| *d);
    let rapid = find(14).is_some();
    let kind = match req.first()? {
        1 if rapid => 7,
        1 => 2,
        3 | 5 | 6 => 7,
        _ => return None,
    };
    let iaid = find(3)?.get(..4)?;
    let mut m = vec![kind];
    m.extend_from_slice(req.get(1..4)?);
    opt6(&mut m, 1, find(1)?);
    opt6(&mut m, 2, &[0, 3, 0, 1, 2, 0, 0, 0, 0, 1]);
    if kind == 7 && req.first() == Some(&1) {
        opt6(&mut m, 14, &[]);
    }
    let mut iaaddr = OFFERED6.parse::<std::net::Ipv6Addr>().unwrap().octets().to_vec();
    iaaddr.extend_from_slice(&3600u32.to_be_bytes());
    iaaddr.extend_from_slice(&7200u32.to_be_bytes());
    let mut ia = iaid.to_vec();
    ia.extend_from_slice(&1800u32.to_be_bytes());
    ia.extend_from_slice(&2880u32.to_be_bytes());
    opt6(&mut ia, 5, &iaaddr);
    opt6(&mut m, 3, &ia);
    opt6(&mut m, 23, &"fd78::53".parse::<std::net::Ipv6Addr>().unwrap().octets());
    opt6(&mut m, 24, &search_option());
    let mut fqdn = vec![0, u8::try_from(HOSTNAME.len()).unwrap()];
    fqdn.extend_from_slice(HOSTNAME);
    fqdn.extend_from_slice(b"\x07example\x00");
    opt6(&mut m, 39, &fqdn);
    Some(m)
}

/// The DHCPv6 half of [`rogue_dhcp_server`]: `[::]:547`, joined to `ff02::1:2` on `s0`.
fn rogue_dhcp6_server() {
    let ifindex: u32 =
        std::fs::read_to_string("/sys/class/net/s0/ifindex").unwrap().trim().parse().unwrap();
    let sock = UdpSocket::bind("[::]:547").unwrap();
    sock.join_multicast_v6(&"ff02::1:2".parse().unwrap(), ifindex).unwrap();
    println!("rogue server listening");
    let mut buf = [0u8; 1500];
    loop {
        let Ok((n, from)) = sock.recv_from(&mut buf) else { continue };
        if let Some(answer) = reply6(&buf[..n]) {
            println!("answering type {} with {}", buf[0], answer[0]);
            sock.send_to(&answer, from).unwrap();
        }
    }
}

/// Start this test binary as the rogue server (`proto` 4 or 6) in `ns`.
fn start_rogue(ns: &Netns, proto: &str, dir: &TempDir) -> Background {
    let exe = std::env::current_exe().unwrap();
    let rogue = Background::start(
        ns,
        &[
            "env",
            &format!("{ROGUE_ENV}={proto}"),
            exe.to_str().unwrap(),
            "rogue_dhcp_server",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ],
        dir.path().join(format!("rogue{proto}.log")),
    );
    wait_for(
        "the rogue server",
        Duration::from_secs(10),
        || rogue.text().contains("listening"),
        || rogue.text(),
    );
    rogue
}

/// A client namespace whose `v0` runs DHCP (`dhcp_options` appended to its interface entry)
/// against the rogue server (`proto` 4 or 6) in a server namespace whose `s0` gets `address`
/// (`ip addr add` arguments); returns once the client holds `leased` (`link/addr/len`).
fn leased_from_rogue(
    proto: &str,
    address: &[&str],
    dhcp_options: &str,
    leased: &str,
    within: Duration,
) -> (Netns, Netns, TempDir, Background, Node) {
    let server = Netns::new();
    let client = Netns::new();
    client.veth("v0", &server, "s0");
    server.ip(&[&["addr", "add"][..], address].concat());
    let dir = TempDir::new();
    let rogue = start_rogue(&server, proto, &dir);
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "version: v1alpha1\nmachine:\n  network:\n    interfaces:\n      - interface: v0\n        dhcp: true{dhcp_options}\n"
        ),
    )
    .unwrap();
    let node = Node::start_api(&client, "", Some(&config));
    let has_lease = || client.addresses().iter().any(|a| a == leased);
    wait_for("the lease from the rogue server", within, has_lease, || {
        format!("{}\n{}", node.log_text(), rogue.text())
    });
    (server, client, dir, rogue, node)
}

#[test]
fn rogue_dhcpv6_server_cannot_write_lines_into_etc() {
    if std::env::var(ROGUE_ENV).is_ok()
        || !require_root("rogue_dhcpv6_server_cannot_write_lines_into_etc")
    {
        return;
    }
    let leased = format!("v0/{OFFERED6}/128");
    let (_server, _client, _dir, _rogue, node) = leased_from_rogue(
        "6",
        &[&format!("{SERVER6}/64"), "dev", "s0", "nodad"],
        "\n        dhcpOptions: {ipv4: false, ipv6: true}",
        &leased,
        Duration::from_secs(30),
    );
    let etc = node.root.path().join("etc");
    let read = |f: &str| std::fs::read_to_string(etc.join(f)).unwrap_or_default();
    wait_for(
        "resolv.conf from the lease",
        Duration::from_secs(10),
        || read("resolv.conf").contains("fd78::53"),
        || format!("{}\n{}", node.log_text(), read("resolv.conf")),
    );
    let (resolv, hosts) = (read("resolv.conf"), read("hosts"));
    assert_valid_etc(&resolv, &hosts);
    // The valid part of the lease still applies (the defaults fill the IPv4 resolvers).
    assert!(resolv.starts_with("nameserver fd78::53\n"), "{resolv}");
    assert!(resolv.ends_with("\nsearch ok.example\n"), "{resolv}");
    assert!(!read("hostname").contains("rogue"), "{}", read("hostname"));
    let log = node.log_text();
    for what in ["option 24", "option 39"] {
        assert!(log.lines().any(|l| l.contains("ignoring") && l.contains(what)), "{what}:\n{log}");
    }
    assert!(!log.contains('\x1b') && !log.contains("\n10.0.0.66"), "{log}");
    node.stop();
}

/// Every line of the rendered files is one whole, valid value; the rogue lines are absent.
fn assert_valid_etc(resolv: &str, hosts: &str) {
    let valid_name = |n: &str| {
        !n.is_empty()
            && n.len() <= 253
            && n.split('.').all(|l| {
                (1..=63).contains(&l.len())
                    && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            })
    };
    for line in resolv.lines() {
        let ok = line.is_empty()
            || line
                .strip_prefix("nameserver ")
                .is_some_and(|ip| ip.parse::<std::net::IpAddr>().is_ok())
            || line.strip_prefix("search ").is_some_and(|l| l.split(' ').all(valid_name));
        assert!(ok, "resolv.conf line {line:?}:\n{resolv}");
    }
    for line in hosts.lines() {
        let mut t = line.split_whitespace();
        let ok = t.next().is_some_and(|ip| ip.parse::<std::net::IpAddr>().is_ok())
            && t.all(valid_name)
            && line.chars().all(|c| c == ' ' || c.is_ascii_graphic());
        assert!(ok, "hosts line {line:?}:\n{hosts}");
    }
    assert!(!resolv.contains("6.6.6.6") && !hosts.contains("registry.local"), "{resolv}{hosts}");
}

#[test]
fn rogue_dhcp_server_cannot_write_lines_into_etc() {
    if std::env::var(ROGUE_ENV).is_ok()
        || !require_root("rogue_dhcp_server_cannot_write_lines_into_etc")
    {
        return;
    }
    let leased = format!("v0/{OFFERED}/24");
    // `brd +`: the replies go to the subnet broadcast, which needs its broadcast route.
    let (_server, client, _dir, _rogue, node) = leased_from_rogue(
        "4",
        &[&format!("{SERVER}/24"), "brd", "+", "dev", "s0"],
        "",
        &leased,
        Duration::from_secs(20),
    );
    let etc = node.root.path().join("etc");
    let read = |f: &str| std::fs::read_to_string(etc.join(f)).unwrap_or_default();
    wait_for(
        "resolv.conf from the lease",
        Duration::from_secs(10),
        || {
            read("resolv.conf").contains("10.78.0.53")
                && read("hosts").contains(&OFFERED.to_string())
        },
        || format!("{}\n{}{}", node.log_text(), read("resolv.conf"), read("hosts")),
    );
    let (resolv, hosts) = (read("resolv.conf"), read("hosts"));
    assert_valid_etc(&resolv, &hosts);
    // The valid part of the lease still applies: its DNS server and the valid search domain.
    assert_eq!(resolv, "nameserver 10.78.0.53\n\nsearch ok.example\n");
    // Option 12 was refused: the node keeps the default name derived from its address.
    assert_eq!(read("hostname"), "talos-10-78-0-60\n");

    // The refusals are logged, escaped: one line each, no raw escape reaches the log.
    let log = node.log_text();
    for what in ["option 15", "option 12", "option 119"] {
        assert!(log.lines().any(|l| l.contains("ignoring") && l.contains(what)), "{what}:\n{log}");
    }
    assert!(!log.contains('\x1b') && !log.contains("\n10.0.0.66"), "{log}");

    // Nothing raw reaches the terminal through `keelson get` either, not even a link whose
    // name carries an escape sequence (the kernel allows anything but '/', ':' and blanks).
    client.ip(&["link", "add", "name", "x\x1b[2Jq", "type", "veth", "peer", "name", "y0"]);
    let api = node.api.clone().unwrap();
    let get = |kind: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_keelson"))
            .args(["get", kind, "--socket"])
            .arg(&api)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    wait_for(
        "the hostile link in the table",
        Duration::from_secs(10),
        || get("links").contains("x\\u{1b}[2Jq"),
        || get("links"),
    );
    for kind in ["links", "hostnamestatus", "resolverstatus", "operatorstatus"] {
        let text = get(kind);
        assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "{kind}: {text:?}");
    }
    node.stop();
}

/// One hostile config for `keelson plan`: refused (exit 1) with exactly one error line that
/// names `path`.
fn plan_refuses(yaml_network: &str, path: &str) {
    let dir = TempDir::new();
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, format!("version: v1alpha1\nmachine:\n  network:\n{yaml_network}"))
        .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_keelson"))
        .args(["plan", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{yaml_network}: {stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| !l.starts_with("warning:")).collect();
    assert_eq!(errors.len(), 1, "{yaml_network}: {stderr}");
    assert!(
        errors[0].starts_with("error: ") && errors[0].contains(&format!(": {path} (line ")),
        "{path}: {stderr}"
    );
    assert!(!stderr.contains('\x1b') && !stderr.contains("6.6.6.6 "), "{stderr:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("registry") && !stdout.contains("6.6.6.6"), "{stdout}");
}

#[test]
fn plan_refuses_hostile_names_with_their_path() {
    let label64 = "a".repeat(64);
    let domain65 = format!("{}.{}", "d".repeat(40), "e".repeat(24));
    let corpus: Vec<(String, &str)> = vec![
        (r#"    hostname: "node\n6.6.6.6 registry.local""#.into(), "machine.network.hostname"),
        (r#"    hostname: "node\e[2J""#.into(), "machine.network.hostname"),
        (r#"    hostname: "node\tx""#.into(), "machine.network.hostname"),
        (format!("    hostname: {label64}"), "machine.network.hostname"),
        (format!("    hostname: node.{label64}.example"), "machine.network.hostname"),
        (format!("    hostname: node.{domain65}"), "machine.network.hostname"),
        (
            r#"    searchDomains: ["ok.example\nnameserver 6.6.6.6"]"#.into(),
            "machine.network.searchDomains[0]",
        ),
        (
            r#"    searchDomains: [ok.example, "a\u0007b"]"#.into(),
            "machine.network.searchDomains[1]",
        ),
        (format!("    searchDomains: [{label64}.example]"), "machine.network.searchDomains[0]"),
        (
            r#"    extraHostEntries: [{ip: 10.0.0.9, aliases: ["x\n6.6.6.6 registry.local"]}]"#
                .into(),
            "machine.network.extraHostEntries[0].aliases[0]",
        ),
        (
            r#"    extraHostEntries: [{ip: 10.0.0.9, aliases: [ok, "a b"]}]"#.into(),
            "machine.network.extraHostEntries[0].aliases[1]",
        ),
        (
            format!("    extraHostEntries: [{{ip: 10.0.0.9, aliases: [{label64}]}}]"),
            "machine.network.extraHostEntries[0].aliases[0]",
        ),
    ];
    for (yaml, path) in &corpus {
        plan_refuses(&format!("{yaml}\n"), path);
    }
}
