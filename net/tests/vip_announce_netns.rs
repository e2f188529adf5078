// SPDX-License-Identifier: Apache-2.0
//! VIP announcements on a real link: keelson's announcer in one namespace, tcpdump on the
//! other end of a veth pair. tcpdump (not our parser) says what crossed the wire.
#![allow(clippy::disallowed_methods)] // Tests drive the announcer from outside: plain threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

use std::fs;
use std::net::IpAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use net::operator::announce::{Announcer, Schedule};
use testkit::{require_root, Netns};

const VIP4: &str = "10.5.0.100";
const VIP6: &str = "2001:db8::100";

/// Seconds since the epoch from tcpdump's `-tt` line prefix.
fn stamp(line: &str) -> f64 {
    line.split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn garp_request_and_reply_and_unsolicited_na_three_times_each() {
    if !require_root("garp_request_and_reply_and_unsolicited_na_three_times_each") {
        return;
    }
    let node = Netns::new();
    let peer = Netns::new();
    node.veth("va", &peer, "vb");
    node.ip(&["link", "set", "va", "up"]);
    // The address goes on first, as the operator does.
    node.ip(&["addr", "add", &format!("{VIP4}/32"), "dev", "va"]);
    node.ip(&["addr", "add", &format!("{VIP6}/128"), "dev", "va", "nodad"]);
    let link = node.ip_json(&["link", "show", "va"]);
    let mac_text = link[0]["address"].as_str().unwrap().to_string();
    let mac: Vec<u8> = mac_text.split(':').map(|b| u8::from_str_radix(b, 16).unwrap()).collect();
    let mac: [u8; 6] = mac.try_into().unwrap();

    let dir = std::env::temp_dir().join(format!("keelson-garp-{}", testkit::tag()));
    fs::create_dir_all(&dir).unwrap();
    let out_path = dir.join("tcpdump.out");
    let err_path = dir.join("tcpdump.err");
    let mut tcpdump = Command::new("ip")
        .args(["netns", "exec", &peer.name, "tcpdump", "-i", "vb", "-e", "-n", "-l", "-tt", "-v"])
        .arg("arp or icmp6")
        .stdout(fs::File::create(&out_path).unwrap())
        .stderr(fs::File::create(&err_path).unwrap())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !fs::read_to_string(&err_path).unwrap().contains("listening on") {
        assert!(start.elapsed() < Duration::from_secs(10), "tcpdump did not start");
        std::thread::sleep(Duration::from_millis(50));
    }

    let name = node.name.clone();
    let sent = std::thread::spawn(move || {
        let f = fs::File::open(format!("/run/netns/{name}")).unwrap();
        nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        let ifindex = nix::net::if_::if_nametoindex("va").unwrap();
        let announcer = Announcer::open(ifindex, mac).unwrap();
        let origin = Instant::now();
        let mut schedule = Schedule::new(Duration::ZERO);
        let mut rounds = 0;
        while let Some(at) = schedule.deadline() {
            std::thread::sleep(at.saturating_sub(origin.elapsed()));
            if schedule.due(origin.elapsed()) {
                announcer.announce(VIP4.parse::<IpAddr>().unwrap()).unwrap();
                announcer.announce(VIP6.parse::<IpAddr>().unwrap()).unwrap();
                rounds += 1;
            }
        }
        rounds
    })
    .join()
    .unwrap();
    assert_eq!(sent, 3);
    std::thread::sleep(Duration::from_millis(500));
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(tcpdump.id()).unwrap()),
        nix::sys::signal::Signal::SIGINT,
    );
    let _ = tcpdump.wait();
    let text = fs::read_to_string(&out_path).unwrap();
    let _ = fs::remove_dir_all(&dir);
    let lines: Vec<&str> = text.lines().collect();
    eprintln!("{text}");

    let broadcast = format!("{mac_text} > ff:ff:ff:ff:ff:ff");
    let requests: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| {
            l.contains(&broadcast) && l.contains(&format!("Request who-has {VIP4} tell {VIP4}"))
        })
        .collect();
    let replies: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.contains(&broadcast) && l.contains(&format!("Reply {VIP4} is-at {mac_text}")))
        .collect();
    assert_eq!(requests.len(), 3, "gratuitous ARP requests in:\n{text}");
    assert_eq!(replies.len(), 3, "gratuitous ARP replies in:\n{text}");
    let spread = stamp(requests[2]) - stamp(requests[0]);
    assert!((1.8..3.0).contains(&spread), "the three requests span {spread} s, not about 2 s");

    // With -v tcpdump puts the NA's flags on its line and the option on the next.
    let nas: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| {
            l.contains(&format!("{mac_text} > 33:33:00:00:00:01"))
                && l.contains("hlim 255")
                && l.contains("neighbor advertisement")
                && l.contains(&format!("tgt is {VIP6}"))
                && l.contains("Flags [override]")
        })
        .map(|(i, _)| i)
        .collect();
    assert_eq!(nas.len(), 3, "unsolicited NAs with the override flag in:\n{text}");
    for i in nas {
        let option = lines.get(i + 1).copied().unwrap_or_default();
        assert!(
            option.contains("destination link-address option") && option.contains(&mac_text),
            "the NA carries our MAC as target link-layer address: {option}"
        );
    }
}
