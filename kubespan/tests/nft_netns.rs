// SPDX-License-Identifier: Apache-2.0
//! `kubespan::nft` against the real kernel, each test in a network namespace of its own,
//! checked with the kernel's view through `nft -j` (nft 1.0.6 is used for checking only).
#![allow(clippy::disallowed_methods)] // Tests and examples drive keelson from outside: plain threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::process::{Command, Stdio};

use kubespan::nft::{Applied, Nft, NftPlan};
use serde_json::Value;
use testkit::in_netns;

/// Runs `nft` with `args` (and `stdin` as `-f -` input when given) in this thread's namespace.
fn nft(args: &[&str], stdin: Option<&str>) -> String {
    let mut cmd = Command::new("nft");
    cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    if stdin.is_some() {
        cmd.stdin(Stdio::piped());
    }
    let mut child = cmd.spawn().expect("nft (the nftables package) must be installed");
    if let Some(text) = stdin {
        child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "nft {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// `nft -j list table inet <t>` without the handles, which differ between any two loads.
fn table_json(table: &str) -> Value {
    let mut v: Value =
        serde_json::from_str(&nft(&["-j", "list", "table", "inet", table], None)).unwrap();
    fn strip(v: &mut Value) {
        match v {
            Value::Object(m) => {
                m.remove("handle");
                m.remove("metainfo");
                m.values_mut().for_each(strip);
            }
            Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut v);
    v
}

fn objects<'a>(v: &'a Value, kind: &str) -> Vec<&'a Value> {
    v["nftables"].as_array().unwrap().iter().filter_map(|o| o.get(kind)).collect()
}

/// Set contents as `nft` prints them (prefixes, ranges or addresses), in kernel order.
fn set_elements(table: &str, set: &str) -> Vec<String> {
    let v = table_json(table);
    let s = objects(&v, "set").into_iter().find(|s| s["name"] == set).unwrap().clone();
    let Some(elems) = s.get("elem").and_then(Value::as_array) else { return Vec::new() };
    elems
        .iter()
        .map(|e| match e {
            Value::String(a) => a.clone(),
            Value::Object(m) if m.contains_key("prefix") => {
                format!("{}/{}", m["prefix"]["addr"].as_str().unwrap(), m["prefix"]["len"])
            }
            Value::Object(m) if m.contains_key("range") => {
                format!("{}-{}", m["range"][0].as_str().unwrap(), m["range"][1].as_str().unwrap())
            }
            other => panic!("unexpected element {other}"),
        })
        .collect()
}

fn plan(v4: &[&str], v6: &[&str]) -> NftPlan {
    NftPlan {
        targets_v4: v4.iter().map(|s| s.parse().unwrap()).collect(),
        targets_v6: v6.iter().map(|s| s.parse().unwrap()).collect(),
        ..NftPlan::default()
    }
}

const FOREIGN: &str = "table inet foreign {\n  chain c { type filter hook output priority 10; policy accept;\n    counter\n  }\n}\n";

#[test]
fn table_matches_nft_and_the_seed() {
    let p = plan(
        &["10.0.0.0/8", "192.168.1.0/24", "192.168.2.0/24", "255.255.255.255/32"],
        &["fd00::/8", "2001:db8::1/128"],
    );
    let resolved = p.resolve().unwrap();
    let Some(ours) = in_netns(move || {
        let mut n = Nft::new().unwrap();
        assert!(matches!(n.apply(&p).unwrap(), Applied::Full { .. }));
        (table_json("talos_kubespan"), nft(&["list", "table", "inet", "talos_kubespan"], None))
    }) else {
        return;
    };
    let reference = in_netns(move || {
        nft(&["-f", "-"], Some(&kubespan::nft::script::nft_script(&resolved)));
        table_json("talos_kubespan")
    })
    .unwrap();
    // The same table as nft builds from the equivalent ruleset text, object for object.
    assert_eq!(ours.0, reference, "ours:\n{}\nnft:\n{}", ours.0, reference);

    // And Talos's KubeSpan structure, spelled out.
    let v = &ours.0;
    let chains = objects(v, "chain");
    assert_eq!(chains.len(), 2);
    let shape = |c: &Value| {
        [&c["type"], &c["hook"], &c["prio"], &c["policy"]].map(|x| x.to_string()).join(" ")
    };
    let pre = chains.iter().find(|c| c["name"] == "kubespan_prerouting").unwrap();
    assert_eq!(shape(pre), r#""filter" "prerouting" 0 "accept""#);
    let out = chains.iter().find(|c| c["name"] == "kubespan_outgoing").unwrap();
    assert_eq!(shape(out), r#""route" "output" 0 "accept""#);
    let sets = objects(v, "set");
    assert_eq!(sets.len(), 2);
    for s in sets {
        assert_eq!(s["flags"], serde_json::json!(["interval"]));
    }
    assert_eq!(
        set_elements_of(v, "kubespan_targets_ipv4"),
        ["10.0.0.0/8", "192.168.1.0-192.168.2.255", "255.255.255.255"]
    );
    assert_eq!(set_elements_of(v, "kubespan_targets_ipv6"), ["2001:db8::1", "fd00::/8"]);

    let text = ours.1;
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let mark = "meta mark set meta mark & 0xffffffdf | 0x00000040 accept";
    let syn = "tcp flags syn / syn,rst";
    for want in [
        "meta mark & 0x00000060 == 0x00000020 accept".to_owned(),
        format!("ip daddr @kubespan_targets_ipv4 {mark}"),
        format!("ip6 daddr @kubespan_targets_ipv6 {mark}"),
        "oifname \"lo\" accept".to_owned(),
        "icmpv6 type nd-neighbor-solicit accept".to_owned(),
        "icmpv6 type nd-neighbor-advert accept".to_owned(),
        format!("ip daddr @kubespan_targets_ipv4 {syn} tcp option maxseg size > 1368 tcp option maxseg size set 1368"),
        format!("ip6 daddr @kubespan_targets_ipv6 {syn} tcp option maxseg size > 1348 tcp option maxseg size set 1348"),
    ] {
        assert!(lines.contains(&want.as_str()), "missing {want:?} in\n{text}");
    }
    // Rule order in the output chain: accept WireGuard's, accept lo, accept neighbour
    // discovery, clamp, then mark.
    let outgoing: Vec<&str> = lines
        .iter()
        .skip_while(|l| !l.starts_with("chain kubespan_outgoing"))
        .skip(2)
        .take(8)
        .copied()
        .collect();
    assert!(outgoing[0].starts_with("meta mark & 0x00000060"), "{outgoing:?}");
    assert!(outgoing[1].starts_with("oifname"), "{outgoing:?}");
    assert!(outgoing[2].starts_with("icmpv6 type nd-neighbor-solicit"), "{outgoing:?}");
    assert!(outgoing[3].starts_with("icmpv6 type nd-neighbor-advert"), "{outgoing:?}");
    assert!(outgoing[4].contains("maxseg") && outgoing[5].contains("maxseg"), "{outgoing:?}");
    assert!(outgoing[6].ends_with(mark) && outgoing[7].ends_with(mark), "{outgoing:?}");
}

fn set_elements_of(v: &Value, set: &str) -> Vec<String> {
    let s = objects(v, "set").into_iter().find(|s| s["name"] == set).unwrap();
    s["elem"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| match e {
            Value::String(a) => a.clone(),
            Value::Object(m) if m.contains_key("prefix") => {
                format!("{}/{}", m["prefix"]["addr"].as_str().unwrap(), m["prefix"]["len"])
            }
            Value::Object(m) => {
                format!("{}-{}", m["range"][0].as_str().unwrap(), m["range"][1].as_str().unwrap())
            }
            other => panic!("unexpected element {other}"),
        })
        .collect()
}

#[test]
fn updates_touch_only_our_sets_and_repair() {
    in_netns(|| {
        nft(&["-f", "-"], Some(FOREIGN));
        let foreign_before = table_json("foreign");
        let mut n = Nft::new().unwrap();

        let first = plan(&["10.1.0.0/16", "10.3.0.0/16"], &["fd01::/64"]);
        assert!(matches!(n.apply(&first).unwrap(), Applied::Full { .. }));
        assert_eq!(
            set_elements("talos_kubespan", "kubespan_targets_ipv4"),
            ["10.1.0.0/16", "10.3.0.0/16"]
        );

        // Same plan: nothing sent.
        assert_eq!(n.apply(&first).unwrap(), Applied::Unchanged);

        // One prefix out, one in, one grown into its neighbour: a set delta only.
        let second =
            plan(&["10.1.0.0/16", "10.2.0.0/16", "10.9.9.9/32"], &["fd01::/64", "fd02::/64"]);
        assert_eq!(n.apply(&second).unwrap(), Applied::Delta { removed: 2, added: 3 });
        assert_eq!(
            set_elements("talos_kubespan", "kubespan_targets_ipv4"),
            ["10.1.0.0-10.2.255.255", "10.9.9.9"]
        );
        assert_eq!(
            set_elements("talos_kubespan", "kubespan_targets_ipv6"),
            ["fd01::/64", "fd02::/64"]
        );

        // Deleted behind our back: the next apply notices and rebuilds.
        nft(&["delete", "table", "inet", "talos_kubespan"], None);
        assert!(matches!(n.apply(&second).unwrap(), Applied::Full { .. }));
        assert_eq!(
            set_elements("talos_kubespan", "kubespan_targets_ipv6"),
            ["fd01::/64", "fd02::/64"]
        );

        // A chain deleted behind our back: rebuilt too.
        nft(&["delete", "chain", "inet", "talos_kubespan", "kubespan_outgoing"], None);
        assert!(matches!(n.apply(&second).unwrap(), Applied::Full { .. }));
        assert_eq!(objects(&table_json("talos_kubespan"), "chain").len(), 2);

        // A set emptied behind our back is not visible to the cheap check, but the delta that
        // deletes its vanished elements fails and falls back to a rebuild.
        nft(&["flush", "set", "inet", "talos_kubespan", "kubespan_targets_ipv4"], None);
        let third = plan(&["10.2.0.0/16"], &[]);
        assert!(matches!(n.apply(&third).unwrap(), Applied::Full { .. }));
        assert_eq!(set_elements("talos_kubespan", "kubespan_targets_ipv4"), ["10.2.0.0/16"]);
        assert!(set_elements("talos_kubespan", "kubespan_targets_ipv6").is_empty());

        // A new MTU changes the rules: rebuilt.
        let mtu = NftPlan { mtu: 1500, ..third.clone() };
        assert!(matches!(n.apply(&mtu).unwrap(), Applied::Full { .. }));
        assert!(nft(&["list", "table", "inet", "talos_kubespan"], None)
            .contains("maxseg size set 1448"));

        // A renamed table replaces the old one.
        let renamed = NftPlan { table: "ks2".into(), ..mtu.clone() };
        assert!(matches!(n.apply(&renamed).unwrap(), Applied::Full { .. }));
        let tables = nft(&["list", "tables"], None);
        assert!(
            tables.contains("table inet ks2") && !tables.contains("talos_kubespan"),
            "{tables}"
        );

        assert!(n.remove().unwrap(), "the table was there");
        // Absent is fine: a lookup finds nothing, and nothing is sent or changed.
        let ruleset = nft(&["list", "ruleset"], None);
        assert!(!n.remove().unwrap(), "nothing left to remove");
        assert_eq!(nft(&["list", "ruleset"], None), ruleset);
        let tables = nft(&["list", "tables"], None);
        assert_eq!(tables.trim(), "table inet foreign");
        // The foreign table went through all of it untouched (its counter only counts).
        let mut after = table_json("foreign");
        let mut before = foreign_before;
        for v in [&mut after, &mut before] {
            v["nftables"].as_array_mut().unwrap().iter_mut().for_each(|o| {
                if let Some(r) = o.get_mut("rule") {
                    r["expr"] = Value::Null;
                }
            });
        }
        assert_eq!(after, before);
        assert_eq!(objects(&after, "rule").len(), 1);
    });
}

#[test]
fn invalid_plan_sends_nothing() {
    in_netns(|| {
        let mut n = Nft::new().unwrap();
        let bad = NftPlan { mtu: 100, ..NftPlan::default() };
        let e = n.apply(&bad).unwrap_err();
        assert_eq!(e.to_string(), "kubespan mtu 100: must be between 1280 and 65587");
        assert_eq!(nft(&["list", "tables"], None).trim(), "");
    });
}

/// Packets through the output chain: a foreign mark bit survives, WireGuard's mark is left
/// alone, and untargeted destinations are not marked. A foreign table counts marks after ours.
#[test]
fn marking_preserves_foreign_bits() {
    in_netns(|| {
        let ip = |args: &[&str]| {
            let st = Command::new("ip").args(args).status().unwrap();
            assert!(st.success(), "ip {args:?}");
        };
        ip(&["link", "add", "ks0", "type", "veth", "peer", "name", "ks1"]);
        ip(&["link", "set", "ks0", "up"]);
        ip(&["link", "set", "ks1", "up"]);
        ip(&["addr", "add", "10.50.0.1/24", "dev", "ks0"]);
        ip(&["addr", "add", "10.60.0.1/24", "dev", "ks0"]);
        let counters = "table inet watch {\n  chain c { type filter hook output priority 100; policy accept;\n    ip daddr 10.50.0.2 meta mark 0x1040 counter\n    ip daddr 10.50.0.2 meta mark 0x1020 counter\n    ip daddr 10.50.0.2 meta mark 0x1060 counter\n    ip daddr 10.60.0.2 meta mark 0x1000 counter\n    ip daddr 10.60.0.2 meta mark 0x1040 counter\n  }\n}\n";
        nft(&["-f", "-"], Some(counters));
        let mut n = Nft::new().unwrap();
        n.apply(&plan(&["10.50.0.0/24"], &[])).unwrap();

        let send = |mark: u32, to: Ipv4Addr| {
            let s = UdpSocket::bind("0.0.0.0:0").unwrap();
            nix::sys::socket::setsockopt(&s, nix::sys::socket::sockopt::Mark, &mark).unwrap();
            s.send_to(b"x", SocketAddrV4::new(to, 9)).unwrap();
        };
        let target = Ipv4Addr::new(10, 50, 0, 2);
        let other = Ipv4Addr::new(10, 60, 0, 2);
        send(0x1000, target); // -> 0x1040: ours set, the foreign bit kept
        send(0x1060, target); // -> 0x1040: 0x20 cleared, 0x40 set
        send(0x1060, target);
        send(0x1020, target); // WireGuard's own: untouched
        send(0x1000, other); // not a target: untouched
        let v: Value =
            serde_json::from_str(&nft(&["-j", "list", "table", "inet", "watch"], None)).unwrap();
        let packets: Vec<u64> = objects(&v, "rule")
            .iter()
            .map(|r| {
                let e = r["expr"].as_array().unwrap();
                e.iter().find_map(|e| e.get("counter")).unwrap()["packets"].as_u64().unwrap()
            })
            .collect();
        // Counted after our chain: 0x1040, 0x1020, 0x1060 to the target; 0x1000, 0x1040 to
        // the other address.
        assert_eq!(packets, [3, 1, 0, 1, 0]);
    });
}

/// 10,000 ranges need several element messages per set (one element list is limited to
/// 64 KiB); the kernel must end up with every one of them, and a delta must still apply.
#[test]
fn large_sets_split_across_messages() {
    in_netns(|| {
        let v4: Vec<String> =
            (0..5000u32).map(|i| format!("{}/30", Ipv4Addr::from(0x0a00_0000 + i * 8))).collect();
        let v6: Vec<String> = (0..5000u32).map(|i| format!("fd00:0:{:x}::/64", i * 2)).collect();
        let v4r: Vec<&str> = v4.iter().map(String::as_str).collect();
        let v6r: Vec<&str> = v6.iter().map(String::as_str).collect();
        let mut n = Nft::new().unwrap();
        let Applied::Full { messages } = n.apply(&plan(&v4r, &v6r)).unwrap() else { panic!() };
        // 18 fixed messages (tables, sets, chains, rules), then elements under 60,000 bytes
        // a message: 1,500 IPv4 ranges (4 messages) and 937 IPv6 ranges (6 messages).
        assert_eq!(messages, 18 + 4 + 6);
        let got4 = set_elements("talos_kubespan", "kubespan_targets_ipv4");
        let got6 = set_elements("talos_kubespan", "kubespan_targets_ipv6");
        assert_eq!((got4.len(), got6.len()), (5000, 5000));
        assert_eq!(got4[4999], "10.0.156.56/30");
        assert!(got6.contains(&"fd00:0:270e::/64".to_owned()), "{:?}", &got6[..3]);

        let fewer = plan(&v4r[1..], &v6r[..4999]);
        assert_eq!(n.apply(&fewer).unwrap(), Applied::Delta { removed: 2, added: 0 });
        let got4 = set_elements("talos_kubespan", "kubespan_targets_ipv4");
        assert_eq!(got4.len(), 4999);
        assert_eq!(got4[0], "10.0.0.8/30");
    });
}

/// A batch the kernel refuses is rolled back whole, and the error names the message it
/// refused, through the shared netlink socket's batch call.
#[test]
fn a_refused_message_is_named() {
    in_netns(|| {
        use kubespan::nft::compile::delta_batch;
        use kubespan::nft::wire::NETLINK_NETFILTER;
        use kubespan::nft::NftError;
        use net::netlink::{NlError, NlOptions, NlSocket};

        let mut n = Nft::new().unwrap();
        n.apply(&plan(&["10.1.0.0/16"], &[])).unwrap();
        // Deleting a range the set does not hold fails; the addition after it is undone.
        let old = plan(&["10.1.0.0/16", "10.7.0.0/16"], &[]).resolve().unwrap().targets;
        let new = plan(&["10.1.0.0/16", "10.8.0.0/16"], &[]).resolve().unwrap().targets;
        let options = NlOptions {
            recv_timeout: Some(std::time::Duration::from_secs(5)),
            ..NlOptions::new(false)
        };
        let mut sock = NlSocket::with_options(NETLINK_NETFILTER, &options).unwrap();
        let batch = delta_batch("talos_kubespan", &old, &new, sock.next_seq()).unwrap();
        let (bytes, sent, next) = batch.finish().unwrap();
        let e = sock.send_batch("nftables", &bytes, &sent, next).unwrap_err();
        assert!(
            matches!(&e, NlError::Kernel { target, errno: nix::errno::Errno::ENOENT, .. }
                if target == "DELSETELEM kubespan_targets_ipv4 (1 ranges)"),
            "{e}"
        );
        let text = NftError::from(e).to_string();
        assert!(
            text.starts_with("nftables DELSETELEM kubespan_targets_ipv4 (1 ranges): ENOENT"),
            "{text}"
        );
        assert_eq!(set_elements("talos_kubespan", "kubespan_targets_ipv4"), ["10.1.0.0/16"]);
    });
}
