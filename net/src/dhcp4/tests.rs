// SPDX-License-Identifier: Apache-2.0
//! Unit tests: server messages are built with `dhcproto`, client messages decoded with it.

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use dhcproto::v4::{DhcpOption, Message, MessageType, Opcode, OptionCode};
use dhcproto::{Decodable, Encodable};
use ipnet::Ipv4Net;

use super::time::renewal_times;
use super::*;
use crate::resource::{ClientIdentifier, ConfigLayer, RouteProtocol, Scope};

const MAC: [u8; 6] = [0x52, 0x54, 0x00, 0x12, 0x34, 0x56];
const SERVER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const YIADDR: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 50);
const LEASE_SECS: u32 = 1000;

fn client(now: Instant) -> Dhcp4Client {
    Dhcp4Client::new(ClientConfig::new(MAC), now, 7)
}

fn sends(out: &[Output]) -> Vec<(Message, Destination)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Send { packet, to } => Some((Message::from_bytes(packet).unwrap(), *to)),
            _ => None,
        })
        .collect()
}

fn only_send(out: &[Output]) -> (Message, Destination) {
    let s = sends(out);
    assert_eq!(s.len(), 1, "{out:?}");
    s.into_iter().next().unwrap()
}

fn reply(req: &Message, kind: MessageType, server: Ipv4Addr) -> Vec<u8> {
    let mut m = Message::default();
    m.set_opcode(Opcode::BootReply).set_xid(req.xid()).set_chaddr(req.chaddr());
    if kind != MessageType::Nak {
        m.set_yiaddr(YIADDR);
    }
    let o = m.opts_mut();
    o.insert(DhcpOption::MessageType(kind));
    o.insert(DhcpOption::ServerIdentifier(server));
    if kind != MessageType::Nak {
        o.insert(DhcpOption::SubnetMask(Ipv4Addr::new(255, 255, 255, 0)));
        o.insert(DhcpOption::Router(vec![SERVER]));
        o.insert(DhcpOption::DomainNameServer(vec![Ipv4Addr::new(10, 0, 0, 53)]));
        o.insert(DhcpOption::AddressLeaseTime(LEASE_SECS));
    }
    m.to_vec().unwrap()
}

fn opt(m: &Message, code: OptionCode) -> Option<&DhcpOption> {
    m.opts().get(code)
}

/// Runs DISCOVER → OFFER → REQUEST → ACK and returns the client, the start time and lease.
fn bound() -> (Dhcp4Client, Instant, Lease) {
    let t0 = Instant::now();
    let mut c = client(t0);
    let (discover, _) = only_send(&c.handle(t0, Input::Timer));
    let (request, _) =
        only_send(&c.handle(t0, Input::Packet(&reply(&discover, MessageType::Offer, SERVER))));
    let out = c.handle(t0, Input::Packet(&reply(&request, MessageType::Ack, SERVER)));
    let Some(Output::Bound(lease)) = out.first() else { panic!("{out:?}") };
    (c, t0, lease.clone())
}

#[test]
fn full_exchange_golden_fields() {
    let t0 = Instant::now();
    let mut c = client(t0);
    assert_eq!(c.poll_at(), Some(t0));
    assert_eq!(c.state(), Dhcp4State::Init);

    let (discover, to) = only_send(&c.handle(t0, Input::Timer));
    assert_eq!(to, Destination::Broadcast);
    assert_eq!(c.state(), Dhcp4State::Selecting);
    assert_eq!(discover.opts().msg_type(), Some(MessageType::Discover));
    assert_eq!(discover.opcode(), Opcode::BootRequest);
    assert_eq!(discover.chaddr(), &MAC);
    assert!(!discover.flags().broadcast());
    assert_eq!(discover.ciaddr(), Ipv4Addr::UNSPECIFIED);
    let mut id = vec![1];
    id.extend_from_slice(&MAC);
    assert_eq!(
        opt(&discover, OptionCode::ClientIdentifier),
        Some(&DhcpOption::ClientIdentifier(id.clone()))
    );
    assert_eq!(opt(&discover, OptionCode::MaxMessageSize), Some(&DhcpOption::MaxMessageSize(1500)));
    let Some(DhcpOption::ParameterRequestList(prl)) =
        opt(&discover, OptionCode::ParameterRequestList)
    else {
        panic!("no PRL")
    };
    let prl: Vec<u8> = prl.iter().map(|c| u8::from(*c)).collect();
    assert_eq!(prl, [1, 3, 6, 12, 15, 26, 28, 42, 51, 54, 58, 59, 119, 121]);
    assert!(opt(&discover, OptionCode::Hostname).is_none());

    let (request, to) =
        only_send(&c.handle(t0, Input::Packet(&reply(&discover, MessageType::Offer, SERVER))));
    assert_eq!(to, Destination::Broadcast);
    assert_eq!(c.state(), Dhcp4State::Requesting);
    assert_eq!(request.opts().msg_type(), Some(MessageType::Request));
    assert_eq!(request.xid(), discover.xid(), "RFC 2131 §4.4.1: same xid as the DISCOVER");
    assert_eq!(request.ciaddr(), Ipv4Addr::UNSPECIFIED);
    assert!(!request.flags().broadcast());
    assert_eq!(
        opt(&request, OptionCode::RequestedIpAddress),
        Some(&DhcpOption::RequestedIpAddress(YIADDR))
    );
    assert_eq!(
        opt(&request, OptionCode::ServerIdentifier),
        Some(&DhcpOption::ServerIdentifier(SERVER))
    );
    assert_eq!(
        opt(&request, OptionCode::ClientIdentifier),
        Some(&DhcpOption::ClientIdentifier(id))
    );

    let out = c.handle(t0, Input::Packet(&reply(&request, MessageType::Ack, SERVER)));
    let [Output::Bound(lease)] = out.as_slice() else { panic!("{out:?}") };
    assert_eq!(c.state(), Dhcp4State::Bound);
    assert_eq!(lease.address, YIADDR);
    assert_eq!(lease.prefix_len, 24);
    assert_eq!(lease.server_id, SERVER);
    assert_eq!((lease.lease_time, lease.t1, lease.t2), (1000, 500, 875));
    assert_eq!(c.poll_at(), Some(t0 + Duration::from_secs(500)));
}

#[test]
fn hostname_is_sent_and_not_requested_when_the_node_has_one() {
    let t0 = Instant::now();
    let mut config = ClientConfig::new(MAC);
    config.hostname = Some("node1".into());
    config.client_id = ClientIdentifier::None;
    let mut c = Dhcp4Client::new(config, t0, 1);
    let (discover, _) = only_send(&c.handle(t0, Input::Timer));
    assert_eq!(opt(&discover, OptionCode::Hostname), Some(&DhcpOption::Hostname("node1".into())));
    let Some(DhcpOption::ParameterRequestList(prl)) =
        opt(&discover, OptionCode::ParameterRequestList)
    else {
        panic!("no PRL")
    };
    assert!(!prl.contains(&OptionCode::Hostname));
    assert!(opt(&discover, OptionCode::ClientIdentifier).is_none());
}

#[test]
fn skip_hostname_request_neither_asks_nor_sends() {
    let t0 = Instant::now();
    let mut config = ClientConfig::new(MAC);
    config.skip_hostname_request = true;
    let mut c = Dhcp4Client::new(config, t0, 1);
    let (discover, _) = only_send(&c.handle(t0, Input::Timer));
    assert!(opt(&discover, OptionCode::Hostname).is_none());
    let Some(DhcpOption::ParameterRequestList(prl)) =
        opt(&discover, OptionCode::ParameterRequestList)
    else {
        panic!("no PRL")
    };
    assert!(!prl.contains(&OptionCode::Hostname));
}

#[test]
fn duid_client_identifier_is_raw_bytes() {
    let t0 = Instant::now();
    let mut config = ClientConfig::new(MAC);
    config.client_id = ClientIdentifier::Duid("00030001aabbccddeeff".into());
    let mut c = Dhcp4Client::new(config, t0, 1);
    let (discover, _) = only_send(&c.handle(t0, Input::Timer));
    assert_eq!(
        opt(&discover, OptionCode::ClientIdentifier),
        Some(&DhcpOption::ClientIdentifier(vec![0, 3, 0, 1, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff]))
    );
}

#[test]
fn renewal_at_t1_is_unicast_with_ciaddr_and_keeps_the_address() {
    let (mut c, t0, _) = bound();
    let t1 = t0 + Duration::from_secs(500);
    assert!(c.handle(t1 - Duration::from_secs(1), Input::Timer).is_empty(), "early wake-up");
    let (renew, to) = only_send(&c.handle(t1, Input::Timer));
    assert_eq!(c.state(), Dhcp4State::Renewing);
    assert_eq!(to, Destination::Unicast(SERVER));
    assert_eq!(renew.opts().msg_type(), Some(MessageType::Request));
    assert_eq!(renew.ciaddr(), YIADDR);
    assert!(opt(&renew, OptionCode::RequestedIpAddress).is_none(), "RFC 2131 Table 5");
    assert!(opt(&renew, OptionCode::ServerIdentifier).is_none(), "RFC 2131 Table 5");
    // Half the time to T2 (187 s) is above the 60 s floor.
    assert_eq!(c.poll_at(), Some(t1 + Duration::from_millis(187_500)));

    let out = c.handle(t1, Input::Packet(&reply(&renew, MessageType::Ack, SERVER)));
    let [Output::Bound(lease)] = out.as_slice() else { panic!("{out:?}") };
    assert_eq!(lease.address, YIADDR);
    assert_eq!(lease.acquired_at, Some(t1), "the renewed lease runs from the REQUEST");
    assert_eq!(c.state(), Dhcp4State::Bound);
    assert_eq!(c.poll_at(), Some(t1 + Duration::from_secs(500)));
}

#[test]
fn renewing_retransmits_at_half_the_time_to_t2_with_a_60s_floor() {
    let (mut c, t0, _) = bound();
    c.handle(t0 + Duration::from_secs(500), Input::Timer);
    let mut now = t0 + Duration::from_secs(500);
    let t2 = t0 + Duration::from_secs(875);
    for _ in 0..20 {
        if now >= t2 {
            break;
        }
        let next = c.poll_at().unwrap();
        let gap = next - now;
        assert!(gap >= Duration::from_secs(60) || next == t2, "{gap:?}");
        now = next;
        c.handle(now, Input::Timer);
    }
    assert_eq!(c.state(), Dhcp4State::Rebinding);
}

#[test]
fn rebinding_at_t2_is_broadcast_and_expiry_emits_expired() {
    let (mut c, t0, _) = bound();
    c.handle(t0 + Duration::from_secs(500), Input::Timer);
    let t2 = t0 + Duration::from_secs(875);
    let (rebind, to) = only_send(&c.handle(t2, Input::Timer));
    assert_eq!(c.state(), Dhcp4State::Rebinding);
    assert_eq!(to, Destination::Broadcast);
    assert_eq!(rebind.ciaddr(), YIADDR);
    assert!(opt(&rebind, OptionCode::ServerIdentifier).is_none());
    assert!(opt(&rebind, OptionCode::RequestedIpAddress).is_none());
    // 125 s left: retransmit after 62.5 s, then the floor hits the expiry.
    assert_eq!(c.poll_at(), Some(t2 + Duration::from_millis(62_500)));

    let end = t0 + Duration::from_secs(u64::from(LEASE_SECS));
    let mut out = Vec::new();
    for _ in 0..20 {
        if c.lease().is_none() {
            break;
        }
        let now = c.poll_at().unwrap();
        assert!(now <= end);
        out = c.handle(now, Input::Timer);
    }
    assert!(out.contains(&Output::Expired), "{out:?}");
    assert_eq!(c.state(), Dhcp4State::Selecting, "expiry restarts with a DISCOVER");
    let (discover, _) = only_send(&out);
    assert_eq!(discover.opts().msg_type(), Some(MessageType::Discover));
}

#[test]
fn rebinding_accepts_an_ack_from_another_server() {
    let (mut c, t0, _) = bound();
    c.handle(t0 + Duration::from_secs(500), Input::Timer);
    let t2 = t0 + Duration::from_secs(875);
    let (rebind, _) = only_send(&c.handle(t2, Input::Timer));
    let other = Ipv4Addr::new(10, 0, 0, 2);
    let out = c.handle(t2, Input::Packet(&reply(&rebind, MessageType::Ack, other)));
    let [Output::Bound(lease)] = out.as_slice() else { panic!("{out:?}") };
    assert_eq!(lease.server_id, other);
}

#[test]
fn init_reboot_sends_option_50_and_no_54() {
    let (_, t0, lease) = bound();
    let mut config = ClientConfig::new(MAC);
    let persisted: Lease = serde_json::from_str(&serde_json::to_string(&lease).unwrap()).unwrap();
    assert_eq!(persisted.acquired_at, None);
    config.previous_lease = Some(persisted);
    let mut c = Dhcp4Client::new(config, t0, 3);
    assert_eq!(c.state(), Dhcp4State::InitReboot);
    let (req, to) = only_send(&c.handle(t0, Input::Timer));
    assert_eq!(c.state(), Dhcp4State::Rebooting);
    assert_eq!(to, Destination::Broadcast);
    assert_eq!(req.opts().msg_type(), Some(MessageType::Request));
    assert_eq!(req.ciaddr(), Ipv4Addr::UNSPECIFIED);
    assert_eq!(
        opt(&req, OptionCode::RequestedIpAddress),
        Some(&DhcpOption::RequestedIpAddress(YIADDR))
    );
    assert!(opt(&req, OptionCode::ServerIdentifier).is_none());
    let out = c.handle(t0, Input::Packet(&reply(&req, MessageType::Ack, SERVER)));
    assert!(matches!(out.as_slice(), [Output::Bound(l)] if l.address == YIADDR), "{out:?}");
}

#[test]
fn link_flap_reboots_with_the_lease_and_keeps_it() {
    let (mut c, t0, _) = bound();
    let t = t0 + Duration::from_secs(10);
    assert!(c.handle(t, Input::LinkDown).is_empty(), "a flap must not remove the address");
    assert_eq!(c.state(), Dhcp4State::LinkDown);
    c.handle(t, Input::LinkUp);
    assert_eq!(c.state(), Dhcp4State::InitReboot);
    let (req, _) = only_send(&c.handle(t, Input::Timer));
    assert_eq!(
        opt(&req, OptionCode::RequestedIpAddress),
        Some(&DhcpOption::RequestedIpAddress(YIADDR))
    );
    // No answer: keep using the unexpired lease (RFC 2131 §3.2), no Expired.
    let mut outs = Vec::new();
    for _ in 0..20 {
        if c.state() != Dhcp4State::Rebooting {
            break;
        }
        let now = c.poll_at().unwrap();
        outs.extend(c.handle(now, Input::Timer));
    }
    assert_eq!(c.state(), Dhcp4State::Bound);
    assert!(!outs.contains(&Output::Expired), "{outs:?}");
    assert_eq!(c.lease().map(|l| l.address), Some(YIADDR));
}

#[test]
fn nak_in_requesting_goes_to_init() {
    let t0 = Instant::now();
    let mut c = client(t0);
    let (discover, _) = only_send(&c.handle(t0, Input::Timer));
    let (request, _) =
        only_send(&c.handle(t0, Input::Packet(&reply(&discover, MessageType::Offer, SERVER))));
    let out = c.handle(t0, Input::Packet(&reply(&request, MessageType::Nak, SERVER)));
    assert_eq!(out, vec![Output::Status("NAK")]);
    assert_eq!(c.state(), Dhcp4State::Init);
    assert_eq!(c.poll_at(), Some(t0));
}

#[test]
fn nak_in_renewing_expires_the_lease() {
    let (mut c, t0, _) = bound();
    let t1 = t0 + Duration::from_secs(500);
    let (renew, _) = only_send(&c.handle(t1, Input::Timer));
    let out = c.handle(t1, Input::Packet(&reply(&renew, MessageType::Nak, SERVER)));
    assert_eq!(out, vec![Output::Expired, Output::Status("NAK")]);
    assert_eq!(c.state(), Dhcp4State::Init);
    // The refused address is not hinted again.
    let (discover, _) = only_send(&c.handle(t1, Input::Timer));
    assert!(opt(&discover, OptionCode::RequestedIpAddress).is_none());
}

#[test]
fn garbage_is_ignored_and_the_lease_unharmed() {
    let (mut c, t0, lease) = bound();
    let t1 = t0 + Duration::from_secs(500);
    let (renew, _) = only_send(&c.handle(t1, Input::Timer));
    let good_nak = reply(&renew, MessageType::Nak, SERVER);

    let mut wrong_xid = Message::from_bytes(&reply(&renew, MessageType::Nak, SERVER)).unwrap();
    wrong_xid.set_xid(renew.xid().wrapping_add(1));
    let mut wrong_chaddr = Message::from_bytes(&good_nak).unwrap();
    wrong_chaddr.set_chaddr(&[2, 0, 0, 0, 0, 1]);
    let stranger_nak = reply(&renew, MessageType::Nak, Ipv4Addr::new(192, 0, 2, 66));
    let mut zero_ack = Message::from_bytes(&reply(&renew, MessageType::Ack, SERVER)).unwrap();
    zero_ack.set_yiaddr(Ipv4Addr::UNSPECIFIED);
    let mut as_request = Message::from_bytes(&good_nak).unwrap();
    as_request.set_opcode(Opcode::BootRequest);
    let mut bad_option_len = reply(&renew, MessageType::Ack, SERVER);
    // Option 51 after the magic cookie claims 200 bytes that are not there.
    let pos = bad_option_len.iter().skip(240).position(|b| *b == 51).map(|p| p + 240).unwrap();
    bad_option_len[pos + 1] = 200;

    let inputs: Vec<Vec<u8>> = vec![
        vec![],
        vec![0xff; 7],
        good_nak[..100].to_vec(),
        good_nak[..239].to_vec(),
        wrong_xid.to_vec().unwrap(),
        wrong_chaddr.to_vec().unwrap(),
        stranger_nak,
        zero_ack.to_vec().unwrap(),
        as_request.to_vec().unwrap(),
        bad_option_len,
    ];
    for (i, bytes) in inputs.iter().enumerate() {
        let out = c.handle(t1, Input::Packet(bytes));
        assert!(out.is_empty(), "input {i}: {out:?}");
        assert_eq!(c.state(), Dhcp4State::Renewing, "input {i}");
        assert_eq!(c.lease(), Some(&lease), "input {i}");
    }
    // The genuine NAK still works afterwards, so the inputs above were really refused.
    assert_eq!(c.handle(t1, Input::Packet(&good_nak)).first(), Some(&Output::Expired));
}

#[test]
fn offer_and_ack_mismatches_are_ignored() {
    let t0 = Instant::now();
    let mut c = client(t0);
    let (discover, _) = only_send(&c.handle(t0, Input::Timer));
    // An ACK in SELECTING is not an OFFER.
    assert!(c.handle(t0, Input::Packet(&reply(&discover, MessageType::Ack, SERVER))).is_empty());
    let (request, _) =
        only_send(&c.handle(t0, Input::Packet(&reply(&discover, MessageType::Offer, SERVER))));
    // An ACK from a server we did not select.
    let other = Ipv4Addr::new(10, 0, 0, 9);
    assert!(c.handle(t0, Input::Packet(&reply(&request, MessageType::Ack, other))).is_empty());
    assert_eq!(c.state(), Dhcp4State::Requesting);
}

#[test]
fn selecting_retransmits_with_rfc_backoff_and_reports_no_offer() {
    let t0 = Instant::now();
    let mut c = client(t0);
    let (first, _) = only_send(&c.handle(t0, Input::Timer));
    let mut now = t0;
    let mut statuses = Vec::new();
    for attempt in 0..8u32 {
        let next = c.poll_at().unwrap();
        let base = 4u64 << attempt.min(4);
        let gap = next - now;
        assert!(gap >= Duration::from_secs(base - 1), "attempt {attempt}: {gap:?}");
        assert!(gap <= Duration::from_secs(base + 1), "attempt {attempt}: {gap:?}");
        now = next;
        let out = c.handle(now, Input::Timer);
        let (again, _) = only_send(&out);
        assert_eq!(again.xid(), first.xid(), "retransmissions keep the xid");
        assert_eq!(u64::from(again.secs()), (now - t0).as_secs());
        statuses.extend(out.into_iter().filter(|o| matches!(o, Output::Status(_))));
    }
    assert_eq!(statuses, vec![Output::Status("no offer")]);
}

#[test]
fn requesting_gives_up_with_no_ack() {
    let t0 = Instant::now();
    let mut c = client(t0);
    let (discover, _) = only_send(&c.handle(t0, Input::Timer));
    c.handle(t0, Input::Packet(&reply(&discover, MessageType::Offer, SERVER)));
    let mut out = Vec::new();
    for _ in 0..20 {
        if c.state() != Dhcp4State::Requesting {
            break;
        }
        let now = c.poll_at().unwrap();
        out.extend(c.handle(now, Input::Timer));
    }
    assert_eq!(sends(&out).len(), 3, "three retransmissions after the first REQUEST");
    assert!(out.contains(&Output::Status("no ACK")));
    assert_eq!(c.state(), Dhcp4State::Init);
}

#[test]
fn shutdown_releases_only_when_asked() {
    let (mut c, t0, _) = bound();
    let out = c.handle(t0, Input::Shutdown { release: true });
    let (release, to) = only_send(&out);
    assert_eq!(to, Destination::Unicast(SERVER));
    assert_eq!(release.opts().msg_type(), Some(MessageType::Release));
    assert_eq!(release.ciaddr(), YIADDR);
    assert!(out.contains(&Output::Expired));
    assert_eq!(c.poll_at(), None);

    let (mut c, t0, _) = bound();
    assert!(c.handle(t0, Input::Shutdown { release: false }).is_empty());
    assert_eq!(c.state(), Dhcp4State::Stopped);
}

#[test]
fn backoff_bounds() {
    for attempt in 0..10 {
        let base = Duration::from_secs(4 << attempt.min(4));
        assert_eq!(backoff_delay(attempt, 0), base - Duration::from_secs(1));
        assert_eq!(backoff_delay(attempt, 2000), base + Duration::from_secs(1));
        assert_eq!(backoff_delay(attempt, 1000), base);
    }
    assert_eq!(backoff_delay(30, 5000), BACKOFF_MAX + Duration::from_secs(1));
}

#[test]
fn renewal_time_defaults_and_retransmit_floor() {
    assert_eq!(renewal_times(1000, None, None), (500, 875));
    assert_eq!(renewal_times(1000, Some(100), Some(200)), (100, 200));
    assert_eq!(renewal_times(1000, Some(900), Some(200)), (500, 875), "T1 > T2 is insane");
    let now = Instant::now();
    let t2 = now + Duration::from_secs(1000);
    assert_eq!(renewal_retransmit_at(now, t2), now + Duration::from_secs(500));
    let t2 = now + Duration::from_secs(100);
    assert_eq!(renewal_retransmit_at(now, t2), now + Duration::from_secs(60));
    let t2 = now + Duration::from_secs(30);
    assert_eq!(renewal_retransmit_at(now, t2), t2, "never past the deadline");
}

fn sample_lease(now: Instant) -> Lease {
    Lease {
        address: YIADDR,
        prefix_len: 24,
        server_id: SERVER,
        routers: vec![SERVER],
        classless_routes: Vec::new(),
        dns: vec![Ipv4Addr::new(10, 0, 0, 53)],
        domain: Some("example.com".into()),
        search: vec!["corp.example.com".into()],
        ntp: vec![Ipv4Addr::new(10, 0, 0, 123)],
        hostname: Some("node7.ignored.example".into()),
        mtu: Some(9000),
        broadcast: None,
        lease_time: 1000,
        t1: 500,
        t2: 875,
        acquired_at: Some(now),
    }
}

#[test]
fn lease_to_specs_ids_and_values() {
    let t0 = Instant::now();
    let lease = sample_lease(t0);
    let specs = lease_to_specs(&lease, "eth0", 1024, t0 + Duration::from_secs(100));

    let [addr] = specs.addresses.as_slice() else { panic!("{specs:?}") };
    assert_eq!(addr.id(), "eth0/10.0.0.50/24");
    assert_eq!(addr.layer, ConfigLayer::Operator);
    assert_eq!(addr.priority, 1024);
    assert_eq!((addr.valid_lifetime, addr.preferred_lifetime), (Some(900), Some(900)));

    let ids: Vec<String> = specs.routes.iter().map(|r| r.id()).collect();
    assert_eq!(ids, ["inet4/10.0.0.1//1024"]);
    let r = &specs.routes[0];
    assert_eq!(r.src, Some(IpAddr::V4(YIADDR)));
    assert_eq!(r.protocol, RouteProtocol::BOOT);
    assert_eq!(r.out_link_name, "eth0");

    let [res] = specs.resolvers.as_slice() else { panic!() };
    assert_eq!(res.dns_servers, [IpAddr::V4(Ipv4Addr::new(10, 0, 0, 53))]);
    assert_eq!(res.search_domains, ["corp.example.com", "example.com"]);
    let [ts] = specs.time_servers.as_slice() else { panic!() };
    assert_eq!((ts.time_servers.as_slice(), ts.use_nts), (&["10.0.0.123".to_owned()][..], false));
    let [host] = specs.hostnames.as_slice() else { panic!() };
    assert_eq!((host.hostname.as_str(), host.domainname.as_str()), ("node7", "example.com"));

    let [link] = specs.links.as_slice() else { panic!() };
    assert_eq!((link.id().as_str(), link.mtu, link.layer), ("eth0", 9000, ConfigLayer::Default));
}

#[test]
fn lease_to_specs_121_overrides_3_and_adds_on_link_routes_once() {
    let t0 = Instant::now();
    let mut lease = sample_lease(t0);
    let gw = Ipv4Addr::new(192, 168, 7, 1); // outside 10.0.0.0/24
    lease.classless_routes = vec![
        (Ipv4Net::new(Ipv4Addr::UNSPECIFIED, 0).unwrap(), gw),
        (Ipv4Net::new(Ipv4Addr::new(172, 16, 5, 9), 16).unwrap(), gw),
        (Ipv4Net::new(Ipv4Addr::new(10, 9, 0, 0), 16).unwrap(), Ipv4Addr::UNSPECIFIED),
    ];
    lease.mtu = None;
    let specs = lease_to_specs(&lease, "eth0", 50, t0);
    let ids: Vec<String> = specs.routes.iter().map(|r| r.id()).collect();
    assert_eq!(
        ids,
        [
            "inet4//192.168.7.1/32/50",
            "inet4/192.168.7.1//50",
            "inet4/192.168.7.1/172.16.0.0/16/50",
            "inet4//10.9.0.0/16/50",
        ]
    );
    assert!(!ids.iter().any(|id| id.starts_with("inet4/10.0.0.1/")), "option 3 ignored");
    assert_eq!(specs.routes[0].scope, Scope::LINK);
    assert_eq!(specs.routes[3].scope, Scope::LINK);
    assert!(specs.routes.iter().all(|r| r.src == Some(IpAddr::V4(YIADDR))));
    assert!(specs.links.is_empty());
}

#[test]
fn lease_to_specs_infinite_lease_is_permanent() {
    let t0 = Instant::now();
    let mut lease = sample_lease(t0);
    lease.lease_time = u32::MAX;
    let specs = lease_to_specs(&lease, "eth0", 1024, t0 + Duration::from_secs(5000));
    assert_eq!(specs.addresses[0].valid_lifetime, None);
}

/// An ACK whose lease options live in `file` and `sname` (option 52 = 3, RFC 2132 §9.3).
fn overloaded_ack(req: &Message, overload: u8) -> Vec<u8> {
    let mut m = Message::default();
    m.set_opcode(Opcode::BootReply).set_xid(req.xid()).set_chaddr(req.chaddr()).set_yiaddr(YIADDR);
    // file: subnet mask, router, lease time 1000; then end.
    let mut file = vec![1, 4, 255, 255, 255, 0, 3, 4, 10, 0, 0, 1, 51, 4, 0, 0, 0x03, 0xe8, 255];
    file.resize(128, 0);
    // sname: DNS, and a second message type that must not override the real one.
    let sname = vec![6, 4, 10, 0, 0, 53, 53, 1, 6, 255];
    m.set_fname(&file).set_sname(&sname);
    let o = m.opts_mut();
    o.insert(DhcpOption::MessageType(MessageType::Ack));
    o.insert(DhcpOption::ServerIdentifier(SERVER));
    o.insert(DhcpOption::OptionOverload(overload));
    m.to_vec().unwrap()
}

#[test]
fn option_overload_is_honoured() {
    let t0 = Instant::now();
    let mut c = client(t0);
    let (discover, _) = only_send(&c.handle(t0, Input::Timer));
    let (request, _) =
        only_send(&c.handle(t0, Input::Packet(&reply(&discover, MessageType::Offer, SERVER))));
    // A bad overload value is refused as a whole.
    assert!(c.handle(t0, Input::Packet(&overloaded_ack(&request, 7))).is_empty());
    assert_eq!(c.state(), Dhcp4State::Requesting);
    let out = c.handle(t0, Input::Packet(&overloaded_ack(&request, 3)));
    let [Output::Bound(lease)] = out.as_slice() else { panic!("{out:?}") };
    assert_eq!(lease.prefix_len, 24, "subnet mask from file");
    assert_eq!(lease.routers, [SERVER], "router from file");
    assert_eq!(lease.lease_time, 1000, "lease time from file");
    assert_eq!(lease.dns, [Ipv4Addr::new(10, 0, 0, 53)], "DNS from sname");

    // Overload 1 (file only): the sname options are not read.
    let mut c = client(t0);
    let (discover, _) = only_send(&c.handle(t0, Input::Timer));
    let (request, _) =
        only_send(&c.handle(t0, Input::Packet(&reply(&discover, MessageType::Offer, SERVER))));
    let out = c.handle(t0, Input::Packet(&overloaded_ack(&request, 1)));
    let [Output::Bound(lease)] = out.as_slice() else { panic!("{out:?}") };
    assert_eq!(lease.lease_time, 1000);
    assert!(lease.dns.is_empty());
}

#[test]
fn wire_check_names_the_position() {
    let mut m = Message::default();
    m.opts_mut().insert(DhcpOption::MessageType(MessageType::Ack));
    let mut bytes = m.to_vec().unwrap();
    assert_eq!(wire::check(&bytes), Ok(()));
    let end = bytes.iter().rposition(|b| *b == 255).unwrap();
    bytes.truncate(end);
    bytes.extend_from_slice(&[81, 1, 0, 255]);
    assert_eq!(
        wire::check(&bytes),
        Err(wire::Wire4Error::BadLength {
            code: 81,
            offset: end,
            len: 1,
            area: wire::Area::Options
        })
    );
    bytes.truncate(end);
    bytes.extend_from_slice(&[6, 8, 1, 2]);
    assert_eq!(
        wire::check(&bytes),
        Err(wire::Wire4Error::Overrun {
            code: 6,
            offset: end,
            len: Some(8),
            area: wire::Area::Options
        })
    );
    bytes[236] = 0;
    assert_eq!(wire::check(&bytes), Err(wire::Wire4Error::Cookie([0, 130, 83, 99])));
    assert_eq!(wire::check(&bytes[..239]), Err(wire::Wire4Error::Short { len: 239 }));
}

#[test]
fn lease_to_specs_drops_names_that_are_not_valid_and_keeps_the_rest() {
    let t0 = Instant::now();
    let mut lease = sample_lease(t0);
    lease.domain = Some("x registry.local\nnameserver 6.6.6.6".into());
    lease.search = vec!["ok.example".into(), "bad\\010name.example".into()];
    lease.hostname = Some("node\n10.0.0.66 registry.local".into());
    let specs = lease_to_specs(&lease, "eth0", 1024, t0);
    assert_eq!(specs.addresses.len(), 1, "the address still applies");
    let [res] = specs.resolvers.as_slice() else { panic!("{specs:?}") };
    assert_eq!(res.search_domains, ["ok.example"]);
    assert_eq!(res.dns_servers, [IpAddr::V4(Ipv4Addr::new(10, 0, 0, 53))]);
    assert!(specs.hostnames.is_empty(), "{specs:?}");

    // An escape sequence in option 12; a valid hostname with a bad option 15 keeps no domain.
    lease.hostname = Some("\u{1b}]0;owned\u{7}".into());
    assert!(lease_to_specs(&lease, "eth0", 1024, t0).hostnames.is_empty());
    lease.hostname = Some("node7".into());
    let specs = lease_to_specs(&lease, "eth0", 1024, t0);
    let [host] = specs.hostnames.as_slice() else { panic!("{specs:?}") };
    assert_eq!((host.hostname.as_str(), host.domainname.as_str()), ("node7", ""));

    // A search domain may be long; the hostname's domain must fit setdomainname(2).
    let long = format!("{}.{}", "d".repeat(40), "e".repeat(24));
    lease.domain = Some(long.clone());
    let specs = lease_to_specs(&lease, "eth0", 1024, t0);
    assert_eq!(specs.resolvers[0].search_domains, ["ok.example".to_owned(), long]);
    assert_eq!(specs.hostnames[0].domainname, "");
}
