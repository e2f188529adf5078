// SPDX-License-Identifier: Apache-2.0
//! Unit tests: server messages are built with `dhcproto`, client messages decoded with it.

use std::net::{IpAddr, Ipv6Addr};
use std::str::FromStr;
use std::time::{Duration, Instant};

use dhcproto::v6::{
    DhcpOption, IAAddr, Message, MessageType, NtpSuboption, OptionCode, Status, StatusCode,
    UnknownOption, IANA,
};
use dhcproto::{Decodable, Encodable, Name};

use super::fqdn::{decode_fqdn, encode_fqdn};
use super::*;
use crate::resource::{ClientIdentifier, ConfigLayer};

const MAC: [u8; 6] = [0x52, 0x54, 0x00, 0x12, 0x34, 0x56];
const SERVER_DUID: [u8; 10] = [0, 3, 0, 1, 0x02, 0, 0, 0, 0, 0x01];
const OTHER_DUID: [u8; 10] = [0, 3, 0, 1, 0x02, 0, 0, 0, 0, 0x02];
const ADDR: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 1, 0, 0, 0, 0x50);
const DNS: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 1, 0, 0, 0, 0x53);
const NTP: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 1, 0, 0, 0, 0x123);
/// Lifetimes of the sample lease: preferred 800 s, valid 1000 s, T1 400, T2 640.
const PREFERRED: u32 = 800;
const VALID: u32 = 1000;

fn client(now: Instant) -> Dhcp6Client {
    Dhcp6Client::new(ClientConfig::new(MAC), now, 7)
}

fn sends(out: &[Output]) -> Vec<Message> {
    out.iter()
        .filter_map(|o| match o {
            Output::Send { payload } => Some(Message::from_bytes(payload).unwrap()),
            _ => None,
        })
        .collect()
}

fn only_send(out: &[Output]) -> Message {
    let s = sends(out);
    assert_eq!(s.len(), 1, "{out:?}");
    s.into_iter().next().unwrap()
}

fn opt(m: &Message, code: OptionCode) -> Option<&DhcpOption> {
    m.opts().get(code)
}

fn client_ia(m: &Message) -> &IANA {
    match opt(m, OptionCode::IANA) {
        Some(DhcpOption::IANA(ia)) => ia,
        other => panic!("no IA_NA: {other:?}"),
    }
}

/// The server's answer to `req`: IA_NA with ADDR (T1/T2 0 so the client's defaults apply,
/// unless `t` says otherwise), DNS, search list, NTP.
struct Answer {
    kind: MessageType,
    server: Vec<u8>,
    addr: Ipv6Addr,
    preferred: u32,
    valid: u32,
    t: (u32, u32),
    preference: Option<u8>,
    rapid_commit: bool,
    top_status: Option<Status>,
    ia_status: Option<Status>,
}

impl Answer {
    fn new(kind: MessageType) -> Self {
        Self {
            kind,
            server: SERVER_DUID.to_vec(),
            addr: ADDR,
            preferred: PREFERRED,
            valid: VALID,
            t: (0, 0),
            preference: None,
            rapid_commit: false,
            top_status: None,
            ia_status: None,
        }
    }

    fn to(&self, req: &Message) -> Vec<u8> {
        let mut m = Message::new_with_id(self.kind, req.xid());
        let o = m.opts_mut();
        if let Some(id) = opt(req, OptionCode::ClientId) {
            o.insert(id.clone());
        }
        o.insert(DhcpOption::ServerId(self.server.clone()));
        let mut ia =
            IANA { id: client_ia(req).id, t1: self.t.0, t2: self.t.1, opts: Default::default() };
        if let Some(status) = self.ia_status {
            ia.opts.insert(DhcpOption::StatusCode(StatusCode { status, msg: "x".into() }));
        } else {
            ia.opts.insert(DhcpOption::IAAddr(IAAddr {
                addr: self.addr,
                preferred_life: self.preferred,
                valid_life: self.valid,
                opts: Default::default(),
            }));
        }
        o.insert(DhcpOption::IANA(ia));
        if let Some(status) = self.top_status {
            o.insert(DhcpOption::StatusCode(StatusCode { status, msg: "top".into() }));
        }
        if let Some(p) = self.preference {
            o.insert(DhcpOption::Preference(p));
        }
        if self.rapid_commit {
            o.insert(DhcpOption::RapidCommit);
        }
        o.insert(DhcpOption::DomainNameServers(vec![DNS]));
        o.insert(DhcpOption::DomainSearchList(vec![Name::from_str("corp.example.com.").unwrap()]));
        o.insert(DhcpOption::NtpServer(vec![
            NtpSuboption::ServerAddress(NTP),
            NtpSuboption::FQDN(Name::from_str("time.example.com.").unwrap()),
        ]));
        m.to_vec().unwrap()
    }
}

fn advertise(req: &Message) -> Vec<u8> {
    Answer::new(MessageType::Advertise).to(req)
}

fn reply(req: &Message) -> Vec<u8> {
    Answer::new(MessageType::Reply).to(req)
}

/// LinkLocalReady → SOLICIT → (first RT) → ADVERTISE → REQUEST → REPLY.
fn bound() -> (Dhcp6Client, Instant, Lease6) {
    let t0 = Instant::now();
    let mut c = client(t0);
    let solicit = only_send(&c.handle(t0, Input::LinkLocalReady));
    assert!(c.handle(t0, Input::Packet(&advertise(&solicit))).is_empty(), "collects for one RT");
    let t = c.poll_at().unwrap();
    let request = only_send(&c.handle(t, Input::Timer));
    let out = c.handle(t, Input::Packet(&reply(&request)));
    let [Output::Bound(lease)] = out.as_slice() else { panic!("{out:?}") };
    (c, t, lease.clone())
}

fn duid_ll() -> Vec<u8> {
    let mut d = vec![0, 3, 0, 1];
    d.extend_from_slice(&MAC);
    d
}

#[test]
fn waits_for_the_link_local_address() {
    let t0 = Instant::now();
    let mut c = client(t0);
    assert_eq!(c.state(), Dhcp6State::WaitingLinkLocal);
    assert_eq!(c.poll_at(), None);
    assert!(c.handle(t0, Input::Timer).is_empty());
    assert!(c.handle(t0, Input::LinkUp).is_empty());
    let out = c.handle(t0, Input::LinkLocalReady);
    assert_eq!(sends(&out).len(), 1);
    assert_eq!(c.state(), Dhcp6State::Soliciting);
}

#[test]
fn full_exchange_golden_fields() {
    let t0 = Instant::now();
    let mut c = client(t0);
    let solicit = only_send(&c.handle(t0, Input::LinkLocalReady));
    assert_eq!(solicit.msg_type(), MessageType::Solicit);
    assert!(solicit.xid_num() <= 0x00ff_ffff);
    assert_eq!(opt(&solicit, OptionCode::ClientId), Some(&DhcpOption::ClientId(duid_ll())));
    assert_eq!(opt(&solicit, OptionCode::ElapsedTime), Some(&DhcpOption::ElapsedTime(0)));
    assert_eq!(opt(&solicit, OptionCode::RapidCommit), Some(&DhcpOption::RapidCommit));
    assert!(opt(&solicit, OptionCode::ServerId).is_none());
    let ia = client_ia(&solicit);
    assert_eq!((ia.id, ia.t1, ia.t2), (0x0012_3456, 0, 0), "IAID = last 4 bytes of the MAC");
    let Some(DhcpOption::ORO(oro)) = opt(&solicit, OptionCode::ORO) else { panic!("no ORO") };
    let codes: Vec<u16> = oro.opts.iter().map(|c| u16::from(*c)).collect();
    assert_eq!(codes, [23, 24, 31, 56, 82, 39]);
    assert!(opt(&solicit, OptionCode::ClientFqdn).is_none(), "no hostname to send");

    // An ADVERTISE in the first RT is held; the RT timer then picks it.
    assert!(c.handle(t0, Input::Packet(&advertise(&solicit))).is_empty());
    assert_eq!(c.state(), Dhcp6State::Soliciting);
    let rt = c.poll_at().unwrap() - t0;
    assert!(rt > Duration::from_secs(1) && rt <= Duration::from_millis(1100), "{rt:?}");
    let t = t0 + rt;
    let request = only_send(&c.handle(t, Input::Timer));
    assert_eq!(c.state(), Dhcp6State::Requesting);
    assert_eq!(request.msg_type(), MessageType::Request);
    assert_ne!(request.xid(), solicit.xid(), "REQUEST is a new exchange");
    assert_eq!(
        opt(&request, OptionCode::ServerId),
        Some(&DhcpOption::ServerId(SERVER_DUID.to_vec()))
    );
    assert_eq!(opt(&request, OptionCode::ElapsedTime), Some(&DhcpOption::ElapsedTime(0)));
    let hint = client_ia(&request).opts.get(OptionCode::IAAddr);
    assert!(matches!(hint, Some(DhcpOption::IAAddr(a)) if a.addr == ADDR), "{hint:?}");

    let out = c.handle(t, Input::Packet(&reply(&request)));
    let [Output::Bound(lease)] = out.as_slice() else { panic!("{out:?}") };
    assert_eq!(c.state(), Dhcp6State::Bound);
    assert_eq!(lease.address, ADDR);
    assert_eq!(lease.server_id, SERVER_DUID);
    assert_eq!((lease.preferred_lifetime, lease.valid_lifetime), (PREFERRED, VALID));
    assert_eq!((lease.t1, lease.t2), (400, 640), "RFC 8415 §18.2.4: 0.5 and 0.8 × preferred");
    assert_eq!(lease.dns, [DNS]);
    assert_eq!(lease.search, ["corp.example.com"]);
    assert_eq!(lease.ntp, [NTP.to_string(), "time.example.com".to_owned()]);
    assert_eq!(lease.acquired_at, Some(t));
    assert_eq!(c.poll_at(), Some(t + Duration::from_secs(400)));
}

#[test]
fn rapid_commit_reply_binds_at_once() {
    let t0 = Instant::now();
    let mut c = client(t0);
    let solicit = only_send(&c.handle(t0, Input::LinkLocalReady));
    let mut a = Answer::new(MessageType::Reply);
    // A REPLY without Rapid Commit does not answer a SOLICIT.
    assert!(c.handle(t0, Input::Packet(&a.to(&solicit))).is_empty());
    a.rapid_commit = true;
    let out = c.handle(t0, Input::Packet(&a.to(&solicit)));
    assert!(matches!(out.as_slice(), [Output::Bound(l)] if l.address == ADDR), "{out:?}");
    assert_eq!(c.state(), Dhcp6State::Bound);

    // Without Rapid Commit in the config, even a Rapid Commit REPLY is ignored.
    let mut config = ClientConfig::new(MAC);
    config.rapid_commit = false;
    let mut c = Dhcp6Client::new(config, t0, 1);
    let solicit = only_send(&c.handle(t0, Input::LinkLocalReady));
    assert!(opt(&solicit, OptionCode::RapidCommit).is_none());
    assert!(c.handle(t0, Input::Packet(&a.to(&solicit))).is_empty());
}

#[test]
fn advertise_selection_prefers_the_highest_preference_and_255_at_once() {
    let t0 = Instant::now();
    let mut c = client(t0);
    let solicit = only_send(&c.handle(t0, Input::LinkLocalReady));
    let mut low = Answer::new(MessageType::Advertise);
    low.preference = Some(10);
    low.server = OTHER_DUID.to_vec();
    let mut high = Answer::new(MessageType::Advertise);
    high.preference = Some(20);
    let mut first = Answer::new(MessageType::Advertise);
    first.preference = Some(20);
    first.server = vec![0, 2, 0, 0, 0, 9, 1];
    assert!(c.handle(t0, Input::Packet(&low.to(&solicit))).is_empty());
    assert!(c.handle(t0, Input::Packet(&high.to(&solicit))).is_empty());
    assert!(c.handle(t0, Input::Packet(&first.to(&solicit))).is_empty(), "a tie keeps the first");
    let request = only_send(&c.handle(c.poll_at().unwrap(), Input::Timer));
    assert_eq!(
        opt(&request, OptionCode::ServerId),
        Some(&DhcpOption::ServerId(SERVER_DUID.to_vec()))
    );

    let mut c = client(t0);
    let solicit = only_send(&c.handle(t0, Input::LinkLocalReady));
    let mut top = Answer::new(MessageType::Advertise);
    top.preference = Some(255);
    top.server = OTHER_DUID.to_vec();
    let request = only_send(&c.handle(t0, Input::Packet(&top.to(&solicit))));
    assert_eq!(c.state(), Dhcp6State::Requesting);
    assert_eq!(
        opt(&request, OptionCode::ServerId),
        Some(&DhcpOption::ServerId(OTHER_DUID.to_vec()))
    );
}

#[test]
fn after_the_first_rt_the_first_advertise_is_taken() {
    let t0 = Instant::now();
    let mut c = client(t0);
    c.handle(t0, Input::LinkLocalReady);
    let t = c.poll_at().unwrap();
    let again = only_send(&c.handle(t, Input::Timer));
    assert_eq!(again.msg_type(), MessageType::Solicit);
    assert!(
        matches!(opt(&again, OptionCode::ElapsedTime), Some(DhcpOption::ElapsedTime(e)) if *e >= 100)
    );
    let request = only_send(&c.handle(t, Input::Packet(&advertise(&again))));
    assert_eq!(request.msg_type(), MessageType::Request);
}

#[test]
fn hostname_is_sent_as_fqdn_and_not_requested() {
    let t0 = Instant::now();
    let mut config = ClientConfig::new(MAC);
    config.hostname = Some("node1".into());
    let mut c = Dhcp6Client::new(config, t0, 1);
    let solicit = only_send(&c.handle(t0, Input::LinkLocalReady));
    let Some(DhcpOption::Unknown(fqdn)) = opt(&solicit, OptionCode::ClientFqdn) else {
        panic!("no FQDN")
    };
    assert_eq!(fqdn.data(), [1, 5, b'n', b'o', b'd', b'e', b'1'], "S flag, partial name");
    let Some(DhcpOption::ORO(oro)) = opt(&solicit, OptionCode::ORO) else { panic!() };
    assert!(!oro.opts.contains(&OptionCode::ClientFqdn));
}

#[test]
fn fqdn_from_the_server_becomes_the_hostname() {
    let t0 = Instant::now();
    let mut c = client(t0);
    let solicit = only_send(&c.handle(t0, Input::LinkLocalReady));
    let mut a = Answer::new(MessageType::Reply);
    a.rapid_commit = true;
    let mut bytes = Message::from_bytes(&a.to(&solicit)).unwrap();
    bytes.opts_mut().insert(DhcpOption::Unknown(UnknownOption::new(
        OptionCode::ClientFqdn,
        encode_fqdn("node7.example.org").unwrap(),
    )));
    let out = c.handle(t0, Input::Packet(&bytes.to_vec().unwrap()));
    let [Output::Bound(lease)] = out.as_slice() else { panic!("{out:?}") };
    assert_eq!(lease.fqdn.as_deref(), Some("node7.example.org"));
    let specs = lease_to_specs(lease, "eth0", t0);
    let [host] = specs.hostnames.as_slice() else { panic!("{specs:?}") };
    assert_eq!((host.hostname.as_str(), host.domainname.as_str()), ("node7", "example.org"));
}

#[test]
fn fqdn_codec() {
    assert_eq!(
        encode_fqdn("a.bc.").unwrap(),
        [1, 1, b'a', 2, b'b', b'c', 0],
        "a full name ends with the root label"
    );
    assert_eq!(encode_fqdn("a..b"), None);
    assert_eq!(encode_fqdn(&"x".repeat(64)), None);
    assert_eq!(decode_fqdn(&[0, 1, b'a', 2, b'b', b'c', 0]).as_deref(), Some("a.bc"));
    assert_eq!(decode_fqdn(&[0, 1, b'a']).as_deref(), Some("a"), "partial name");
    assert_eq!(decode_fqdn(&[0, 5, b'a']), None, "label past the end");
    assert_eq!(decode_fqdn(&[0, 0xc0, 0x0c]), None, "compression pointer");
    assert_eq!(decode_fqdn(&[0]), None);
    assert_eq!(decode_fqdn(&[]), None);
}

#[test]
fn renew_at_t1_names_the_server_and_keeps_the_address() {
    let (mut c, t, _) = bound();
    let t1 = t + Duration::from_secs(400);
    assert!(c.handle(t1 - Duration::from_secs(1), Input::Timer).is_empty(), "early wake-up");
    let renew = only_send(&c.handle(t1, Input::Timer));
    assert_eq!(c.state(), Dhcp6State::Renewing);
    assert_eq!(renew.msg_type(), MessageType::Renew);
    assert_eq!(
        opt(&renew, OptionCode::ServerId),
        Some(&DhcpOption::ServerId(SERVER_DUID.to_vec()))
    );
    let Some(DhcpOption::IAAddr(a)) = client_ia(&renew).opts.get(OptionCode::IAAddr) else {
        panic!("no IAADDR in RENEW")
    };
    assert_eq!((a.addr, a.preferred_life, a.valid_life), (ADDR, 0, 0));
    let rt = c.poll_at().unwrap() - t1;
    assert!(rt >= Duration::from_secs(9) && rt <= Duration::from_secs(11), "REN_TIMEOUT: {rt:?}");

    // A REPLY from another server to our RENEW is not ours.
    let mut stranger = Answer::new(MessageType::Reply);
    stranger.server = OTHER_DUID.to_vec();
    assert!(c.handle(t1, Input::Packet(&stranger.to(&renew))).is_empty());

    let out = c.handle(t1, Input::Packet(&reply(&renew)));
    let [Output::Bound(lease)] = out.as_slice() else { panic!("{out:?}") };
    assert_eq!(lease.address, ADDR, "same address: no Expired, lifetimes only");
    assert_eq!(lease.acquired_at, Some(t1));
    assert_eq!(c.state(), Dhcp6State::Bound);
    assert_eq!(c.poll_at(), Some(t1 + Duration::from_secs(400)));
}

#[test]
fn renew_retransmits_up_to_t2_then_rebinds_without_server_id() {
    let (mut c, t, _) = bound();
    let t1 = t + Duration::from_secs(400);
    let t2 = t + Duration::from_secs(640);
    let first = only_send(&c.handle(t1, Input::Timer));
    let mut now = t1;
    let mut prev_gap: Option<Duration> = None;
    let mut rebind = None;
    for _ in 0..50 {
        let next = c.poll_at().unwrap();
        assert!(next <= t2 || c.state() == Dhcp6State::Rebinding, "RENEW never passes T2");
        let gap = next - now;
        if let (Some(prev), true) = (prev_gap, next < t2) {
            // RT = 2·RTprev ± 10 %, capped at REN_MAX_RT 600 s ± 10 %.
            assert!(gap.as_secs_f64() >= prev.as_secs_f64() * 1.8 - 0.01, "{prev:?} → {gap:?}");
            assert!(gap <= Duration::from_secs(660), "{gap:?}");
        }
        prev_gap = Some(gap);
        now = next;
        let msg = only_send(&c.handle(now, Input::Timer));
        if msg.msg_type() == MessageType::Rebind {
            rebind = Some(msg);
            break;
        }
        assert_eq!(msg.xid(), first.xid(), "retransmissions keep the xid");
    }
    let rebind = rebind.expect("REBIND at T2");
    assert_eq!(now, t2);
    assert_eq!(c.state(), Dhcp6State::Rebinding);
    assert_ne!(rebind.xid(), first.xid());
    assert!(opt(&rebind, OptionCode::ServerId).is_none(), "RFC 8415 §18.2.5");
    // Any server may answer a REBIND.
    let mut other = Answer::new(MessageType::Reply);
    other.server = OTHER_DUID.to_vec();
    let out = c.handle(t2, Input::Packet(&other.to(&rebind)));
    let [Output::Bound(lease)] = out.as_slice() else { panic!("{out:?}") };
    assert_eq!(lease.server_id, OTHER_DUID);
}

#[test]
fn expiry_at_the_end_of_the_valid_lifetime() {
    let (mut c, t, _) = bound();
    let end = t + Duration::from_secs(u64::from(VALID));
    let mut out = Vec::new();
    for _ in 0..100 {
        if c.lease().is_none() {
            break;
        }
        let now = c.poll_at().unwrap();
        assert!(now <= end, "a timer past the expiry");
        out = c.handle(now, Input::Timer);
    }
    assert!(c.lease().is_none());
    assert_eq!(out.first(), Some(&Output::Expired), "{out:?}");
    assert!(out.contains(&Output::Status("lease expired")));
    assert_eq!(c.state(), Dhcp6State::Soliciting, "expiry starts over");
    assert_eq!(only_send(&out).msg_type(), MessageType::Solicit);
}

#[test]
fn link_flap_keeps_the_lease_and_rebinds() {
    let (mut c, t, _) = bound();
    let now = t + Duration::from_secs(10);
    assert!(c.handle(now, Input::LinkDown).is_empty(), "a flap must not remove the address");
    assert_eq!(c.state(), Dhcp6State::LinkDown);
    assert!(c.handle(now, Input::LinkLocalReady).is_empty(), "not before LinkUp");
    c.handle(now, Input::LinkUp);
    assert_eq!(c.state(), Dhcp6State::WaitingLinkLocal);
    let rebind = only_send(&c.handle(now, Input::LinkLocalReady));
    assert_eq!(rebind.msg_type(), MessageType::Rebind);
    assert!(c.lease().is_some());
    let again = only_send(&c.handle(c.poll_at().unwrap(), Input::Timer));
    assert_eq!(
        (again.msg_type(), again.xid()),
        (MessageType::Rebind, rebind.xid()),
        "retransmitted"
    );
    assert_eq!(c.state(), Dhcp6State::Rebinding);

    // Down until past the valid lifetime: expired without any packet.
    let (mut c, t, _) = bound();
    c.handle(t, Input::LinkDown);
    let end = c.poll_at().unwrap();
    assert_eq!(end, t + Duration::from_secs(u64::from(VALID)));
    let out = c.handle(end, Input::Timer);
    assert_eq!(out, vec![Output::Expired, Output::Status("lease expired")]);
    assert_eq!(c.poll_at(), None);
}

#[test]
fn request_gives_up_after_req_max_rc_with_no_reply() {
    let t0 = Instant::now();
    let mut c = client(t0);
    let solicit = only_send(&c.handle(t0, Input::LinkLocalReady));
    let mut top = Answer::new(MessageType::Advertise);
    top.preference = Some(255);
    c.handle(t0, Input::Packet(&top.to(&solicit)));
    let mut out = Vec::new();
    let mut requests = 1;
    for _ in 0..20 {
        if c.state() != Dhcp6State::Requesting {
            break;
        }
        let now = c.poll_at().unwrap();
        let o = c.handle(now, Input::Timer);
        requests += sends(&o).iter().filter(|m| m.msg_type() == MessageType::Request).count();
        out.extend(o);
    }
    assert_eq!(requests, 10, "REQ_MAX_RC");
    assert!(out.contains(&Output::Status("no reply")));
    assert_eq!(c.state(), Dhcp6State::Soliciting);
}

#[test]
fn solicit_retransmits_per_rfc_8415_and_reports_no_advertise() {
    let t0 = Instant::now();
    let mut c = client(t0);
    let first = only_send(&c.handle(t0, Input::LinkLocalReady));
    let mut now = t0;
    let mut prev: Option<Duration> = None;
    let mut statuses = Vec::new();
    for _ in 0..30 {
        let next = c.poll_at().unwrap();
        let rt = next - now;
        match prev {
            None => assert!(rt > Duration::from_secs(1) && rt <= Duration::from_millis(1100)),
            Some(p) => {
                let lo = (p.as_secs_f64() * 1.9).min(3240.0) - 0.01; // RT·(2 ± 0.1), or MRT·(1 ± 0.1)
                let hi = (p.as_secs_f64() * 2.1).min(3960.0) + 0.01;
                assert!(rt.as_secs_f64() >= lo && rt.as_secs_f64() <= hi, "{p:?} → {rt:?}");
            }
        }
        assert!(rt <= Duration::from_secs(3960), "SOL_MAX_RT + 10 %");
        prev = Some(rt);
        now = next;
        let out = c.handle(now, Input::Timer);
        assert_eq!(only_send(&out).xid(), first.xid());
        statuses.extend(out.into_iter().filter(|o| matches!(o, Output::Status(_))));
    }
    assert!(prev.unwrap() >= Duration::from_secs(3240), "reaches the cap: {prev:?}");
    assert_eq!(statuses, vec![Output::Status("no advertise")]);
}

#[test]
fn retransmission_bounds_per_message_type() {
    for (params, irt, mrt) in
        [(SOLICIT, 1, 3600), (REQUEST, 1, 30), (RENEW, 10, 600), (REBIND, 10, 600)]
    {
        let irt = Duration::from_secs(irt);
        let mrt = Duration::from_secs(mrt);
        assert_eq!(next_rt(&params, None, 0, false), irt * 9 / 10);
        assert_eq!(next_rt(&params, None, 200, false), irt * 11 / 10);
        assert_eq!(next_rt(&params, None, 100, false), irt);
        assert_eq!(next_rt(&params, Some(irt), 100, false), irt * 2);
        assert_eq!(next_rt(&params, Some(mrt), 0, false), mrt * 9 / 10);
        assert_eq!(next_rt(&params, Some(mrt), 200, false), mrt * 11 / 10);
    }
    // The first SOLICIT RT is strictly greater than IRT for every RAND.
    for j in [0, 1, 100, 199, 200, 500] {
        let rt = next_rt(&SOLICIT, None, j, true);
        assert!(rt > Duration::from_secs(1) && rt <= Duration::from_millis(1100), "{j}: {rt:?}");
    }
}

#[test]
fn renewal_time_defaults() {
    assert_eq!(renewal_times(0, 0, 1000), (500, 800));
    assert_eq!(renewal_times(100, 200, 1000), (100, 200));
    assert_eq!(renewal_times(2000, 3000, 1000), (1000, 1000), "clamped to preferred");
    assert_eq!(renewal_times(0, 0, INFINITY), (INFINITY, INFINITY));
}

#[test]
fn status_codes() {
    // NoAddrsAvail in an ADVERTISE: ignored, reported once.
    let t0 = Instant::now();
    let mut c = client(t0);
    let solicit = only_send(&c.handle(t0, Input::LinkLocalReady));
    let mut none = Answer::new(MessageType::Advertise);
    none.ia_status = Some(Status::NoAddrsAvail);
    assert_eq!(
        c.handle(t0, Input::Packet(&none.to(&solicit))),
        vec![Output::Status("NoAddrsAvail")]
    );
    assert!(c.handle(t0, Input::Packet(&none.to(&solicit))).is_empty(), "reported once");
    let mut top = Answer::new(MessageType::Advertise);
    top.top_status = Some(Status::NoAddrsAvail);
    assert!(c.handle(t0, Input::Packet(&top.to(&solicit))).is_empty());
    assert_eq!(c.state(), Dhcp6State::Soliciting);
    let again = only_send(&c.handle(c.poll_at().unwrap(), Input::Timer));
    assert_eq!(again.msg_type(), MessageType::Solicit, "nothing was selected");

    // NoAddrsAvail in the REPLY to REQUEST: back to SOLICIT after SOL_TIMEOUT, not at once.
    let mut c = client(t0);
    let solicit = only_send(&c.handle(t0, Input::LinkLocalReady));
    let mut pick = Answer::new(MessageType::Advertise);
    pick.preference = Some(255);
    let request = only_send(&c.handle(t0, Input::Packet(&pick.to(&solicit))));
    let mut refuse = Answer::new(MessageType::Reply);
    refuse.ia_status = Some(Status::NoAddrsAvail);
    assert_eq!(
        c.handle(t0, Input::Packet(&refuse.to(&request))),
        vec![Output::Status("NoAddrsAvail")]
    );
    assert_eq!(c.state(), Dhcp6State::Soliciting);
    assert_eq!(c.poll_at(), Some(t0 + Duration::from_secs(1)));
    // The same as a top-level status with no IA at all.
    let mut c = client(t0);
    let solicit = only_send(&c.handle(t0, Input::LinkLocalReady));
    let request = only_send(&c.handle(t0, Input::Packet(&pick.to(&solicit))));
    let mut m = Message::from_bytes(&reply(&request)).unwrap();
    m.opts_mut().remove(OptionCode::IANA);
    m.opts_mut().insert(DhcpOption::StatusCode(StatusCode {
        status: Status::NoAddrsAvail,
        msg: String::new(),
    }));
    assert_eq!(
        c.handle(t0, Input::Packet(&m.to_vec().unwrap())),
        vec![Output::Status("NoAddrsAvail")]
    );
    assert_eq!(c.state(), Dhcp6State::Soliciting);

    // UnspecFail at the top: keep waiting, lease unharmed.
    let (mut c, t, lease) = bound();
    let t1 = t + Duration::from_secs(400);
    let renew = only_send(&c.handle(t1, Input::Timer));
    let mut fail = Answer::new(MessageType::Reply);
    fail.top_status = Some(Status::UnspecFail);
    assert_eq!(c.handle(t1, Input::Packet(&fail.to(&renew))), vec![Output::Status("UnspecFail")]);
    assert_eq!(c.lease(), Some(&lease));
    assert_eq!(c.state(), Dhcp6State::Renewing);
    // Some other status in the IA: ignored.
    let mut odd = Answer::new(MessageType::Reply);
    odd.ia_status = Some(Status::NotAllowed);
    assert!(c.handle(t1, Input::Packet(&odd.to(&renew))).is_empty());
    // NoBinding: reinstate with a REQUEST to that server, keeping the lease meanwhile.
    let mut nobind = Answer::new(MessageType::Reply);
    nobind.ia_status = Some(Status::NoBinding);
    let request = only_send(&c.handle(t1, Input::Packet(&nobind.to(&renew))));
    assert_eq!(request.msg_type(), MessageType::Request);
    assert_eq!(
        opt(&request, OptionCode::ServerId),
        Some(&DhcpOption::ServerId(SERVER_DUID.to_vec()))
    );
    assert_eq!(c.lease(), Some(&lease));
    let out = c.handle(t1, Input::Packet(&reply(&request)));
    assert!(matches!(out.as_slice(), [Output::Bound(l)] if l.address == ADDR), "{out:?}");

    // NotOnLink for the IA during RENEW, or our address at valid lifetime 0: gone.
    let (mut c, t, _) = bound();
    let t1 = t + Duration::from_secs(400);
    let renew = only_send(&c.handle(t1, Input::Timer));
    let mut gone = Answer::new(MessageType::Reply);
    gone.valid = 0;
    gone.preferred = 0;
    let out = c.handle(t1, Input::Packet(&gone.to(&renew)));
    assert_eq!(out, vec![Output::Status("address withdrawn"), Output::Expired]);
    assert_eq!(c.state(), Dhcp6State::Soliciting);
}

#[test]
fn a_new_address_on_renew_replaces_the_old_one() {
    let (mut c, t, _) = bound();
    let t1 = t + Duration::from_secs(400);
    let renew = only_send(&c.handle(t1, Input::Timer));
    let mut moved = Answer::new(MessageType::Reply);
    moved.addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 1, 0, 0, 0, 0x99);
    let out = c.handle(t1, Input::Packet(&moved.to(&renew)));
    assert!(
        matches!(out.as_slice(), [Output::Expired, Output::Bound(l)] if l.address == moved.addr),
        "{out:?}"
    );
}

#[test]
fn garbage_is_ignored_and_the_lease_unharmed() {
    let (mut c, t, lease) = bound();
    let t1 = t + Duration::from_secs(400);
    let renew = only_send(&c.handle(t1, Input::Timer));
    let good = reply(&renew);

    let mut wrong_xid = Message::from_bytes(&good).unwrap();
    wrong_xid.set_xid_num(renew.xid_num() ^ 1);
    let mut wrong_client = Message::from_bytes(&good).unwrap();
    wrong_client.opts_mut().remove(OptionCode::ClientId);
    wrong_client.opts_mut().insert(DhcpOption::ClientId(vec![0, 3, 0, 1, 2, 2, 2, 2, 2, 2]));
    let mut no_client = Message::from_bytes(&good).unwrap();
    no_client.opts_mut().remove(OptionCode::ClientId);
    let mut no_server = Message::from_bytes(&good).unwrap();
    no_server.opts_mut().remove(OptionCode::ServerId);
    let mut as_advertise = Message::from_bytes(&good).unwrap();
    as_advertise.set_msg_type(MessageType::Advertise);
    let mut bad_t = Answer::new(MessageType::Reply);
    bad_t.t = (500, 100);
    let mut pref_over_valid = Answer::new(MessageType::Reply);
    pref_over_valid.preferred = VALID + 1;
    // The first option's length claims more than there is.
    let mut overrun = good.clone();
    overrun[6] = 0xff;
    // A status code option (13) of length 0 inside the IA_NA: dhcproto would compute len - 2.
    let mut short_status = good[..4].to_vec();
    let ia_na: [u8; 20] = [0, 3, 0, 16, 0, 0x12, 0x34, 0x56, 0, 0, 0, 0, 0, 0, 0, 0, 0, 13, 0, 0];
    short_status.extend_from_slice(&good[4..]);
    short_status.extend_from_slice(&ia_na);
    let mut relay = good.clone();
    relay[0] = 13;

    let inputs: Vec<Vec<u8>> = vec![
        vec![],
        vec![7],
        good[..3].to_vec(),
        good[..good.len() - 1].to_vec(),
        good[..20].to_vec(),
        wrong_xid.to_vec().unwrap(),
        wrong_client.to_vec().unwrap(),
        no_client.to_vec().unwrap(),
        no_server.to_vec().unwrap(),
        as_advertise.to_vec().unwrap(),
        bad_t.to(&renew),
        pref_over_valid.to(&renew),
        overrun,
        short_status,
        relay,
    ];
    for (i, bytes) in inputs.iter().enumerate() {
        let out = c.handle(t1, Input::Packet(bytes));
        assert!(out.is_empty(), "input {i}: {out:?}");
        assert_eq!(c.state(), Dhcp6State::Renewing, "input {i}");
        assert_eq!(c.lease(), Some(&lease), "input {i}");
    }
    // The genuine REPLY still works afterwards, so the inputs above were really refused.
    assert!(matches!(c.handle(t1, Input::Packet(&good)).as_slice(), [Output::Bound(_)]));
}

#[test]
fn wire_check_names_the_position() {
    let mut m = Message::new_with_id(MessageType::Reply, [1, 2, 3]);
    m.opts_mut().insert(DhcpOption::ServerId(SERVER_DUID.to_vec()));
    let mut bytes = m.to_vec().unwrap();
    assert_eq!(wire::check(&bytes), Ok(()));
    bytes.extend_from_slice(&[0, 13, 0, 1, 0]);
    assert_eq!(
        wire::check(&bytes),
        Err(wire::Wire6Error::BadLength { code: 13, offset: 18, len: 1 })
    );
    bytes.truncate(18);
    bytes.extend_from_slice(&[0, 23, 0, 32, 0]);
    assert_eq!(
        wire::check(&bytes),
        Err(wire::Wire6Error::Overrun { code: 23, offset: 18, len: 32, left: 1 })
    );
    bytes.truncate(18);
    bytes.extend_from_slice(&[0, 23]);
    assert_eq!(wire::check(&bytes), Err(wire::Wire6Error::TruncatedHeader { offset: 18 }));
}

#[test]
fn shutdown_releases_only_when_asked() {
    let (mut c, t, _) = bound();
    let out = c.handle(t, Input::Shutdown { release: true });
    let release = only_send(&out);
    assert_eq!(release.msg_type(), MessageType::Release);
    assert_eq!(
        opt(&release, OptionCode::ServerId),
        Some(&DhcpOption::ServerId(SERVER_DUID.to_vec()))
    );
    assert!(
        matches!(client_ia(&release).opts.get(OptionCode::IAAddr), Some(DhcpOption::IAAddr(a)) if a.addr == ADDR)
    );
    assert!(out.contains(&Output::Expired));
    assert_eq!((c.state(), c.poll_at()), (Dhcp6State::Stopped, None));
    assert!(c.handle(t, Input::LinkLocalReady).is_empty());

    let (mut c, t, _) = bound();
    assert!(c.handle(t, Input::Shutdown { release: false }).is_empty());
    assert_eq!(c.state(), Dhcp6State::Stopped);
}

#[test]
fn duid_encodings() {
    let mac = [0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff];
    assert_eq!(DuidConfig::LinkLayer.build(&mac), [0, 3, 0, 1, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff]);
    assert_eq!(
        DuidConfig::LinkLayerTime(0x2a2b_2c2d).build(&mac),
        [0, 1, 0, 1, 0x2a, 0x2b, 0x2c, 0x2d, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff]
    );
    let en = vec![0, 2, 0, 0, 0x7f, 0x3b, 1, 2];
    assert_eq!(DuidConfig::Raw(en.clone()).build(&mac), en);
    // Invalid configured DUIDs fall back to DUID-LL.
    for bad in [vec![0, 3], vec![0, 4, 1, 2, 3], vec![0, 0, 1, 2], vec![9; 131]] {
        assert_eq!(
            DuidConfig::Raw(bad.clone()).build(&mac),
            DuidConfig::LinkLayer.build(&mac),
            "{bad:?}"
        );
    }
    assert_eq!(
        DuidConfig::from_client_identifier(&ClientIdentifier::Duid("00020000".into())),
        DuidConfig::Raw(vec![0, 2, 0, 0])
    );
    assert_eq!(DuidConfig::from_client_identifier(&ClientIdentifier::None), DuidConfig::LinkLayer);
    assert_eq!(DuidConfig::from_client_identifier(&ClientIdentifier::Mac), DuidConfig::LinkLayer);
    assert_eq!(
        DuidConfig::from_client_identifier(&ClientIdentifier::Duid("0g".into())),
        DuidConfig::LinkLayer
    );
    assert_eq!(iaid_from_mac(&mac), 0xccdd_eeff);

    // The configured DUID and IAID are what goes on the wire, and stable across restarts.
    let t0 = Instant::now();
    let mut config = ClientConfig::new(mac);
    config.duid = DuidConfig::Raw(en.clone());
    config.iaid = Some(42);
    let mut c = Dhcp6Client::new(config.clone(), t0, 1);
    let solicit = only_send(&c.handle(t0, Input::LinkLocalReady));
    assert_eq!(opt(&solicit, OptionCode::ClientId), Some(&DhcpOption::ClientId(en)));
    assert_eq!(client_ia(&solicit).id, 42);
    let mut again = Dhcp6Client::new(config, t0 + Duration::from_secs(99), 2);
    assert_eq!(again.duid(), c.duid());
    let second = only_send(&again.handle(t0, Input::LinkLocalReady));
    assert_ne!(second.xid(), solicit.xid(), "another seed, another xid");
}

#[test]
fn sntp_and_sol_max_rt_are_read_from_the_server() {
    let t0 = Instant::now();
    let mut c = client(t0);
    let solicit = only_send(&c.handle(t0, Input::LinkLocalReady));
    let mut m = Message::from_bytes(&Answer::new(MessageType::Advertise).to(&solicit)).unwrap();
    m.opts_mut().remove(OptionCode::NtpServer);
    let sntp = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x31);
    m.opts_mut().insert(DhcpOption::Unknown(UnknownOption::new(
        OptionCode::SntpServers,
        sntp.octets().to_vec(),
    )));
    m.opts_mut().insert(DhcpOption::Unknown(UnknownOption::new(
        OptionCode::SolMaxRt,
        120u32.to_be_bytes().to_vec(),
    )));
    // The ADVERTISE is held for the first RT; SOL_MAX_RT is learnt at once.
    assert!(c.handle(t0, Input::Packet(&m.to_vec().unwrap())).is_empty());
    m.set_msg_type(MessageType::Reply);
    m.opts_mut().insert(DhcpOption::RapidCommit);
    let out = c.handle(t0, Input::Packet(&m.to_vec().unwrap()));
    let [Output::Bound(lease)] = out.as_slice() else { panic!("{out:?}") };
    assert_eq!(lease.ntp, [sntp.to_string()]);

    // SOL_MAX_RT 120 s (RFC 8415 §21.24) caps the SOLICIT retransmissions of the next run.
    c.handle(t0, Input::LinkDown);
    let end = c.poll_at().unwrap();
    c.handle(end, Input::Timer);
    c.handle(end, Input::LinkUp);
    c.handle(end, Input::LinkLocalReady);
    let mut now = end;
    let mut max = Duration::ZERO;
    for _ in 0..20 {
        let next = c.poll_at().unwrap();
        max = max.max(next - now);
        now = next;
        c.handle(now, Input::Timer);
    }
    assert!(max >= Duration::from_secs(108) && max <= Duration::from_secs(132), "{max:?}");
}

fn sample_lease(now: Instant) -> Lease6 {
    Lease6 {
        address: ADDR,
        iaid: 1,
        server_id: SERVER_DUID.to_vec(),
        preferred_lifetime: PREFERRED,
        valid_lifetime: VALID,
        t1: 400,
        t2: 640,
        dns: vec![DNS],
        search: vec!["corp.example.com".into()],
        ntp: vec![NTP.to_string()],
        fqdn: None,
        acquired_at: Some(now),
    }
}

#[test]
fn lease_to_specs_ids_and_values() {
    let t0 = Instant::now();
    let lease = sample_lease(t0);
    let specs = lease_to_specs(&lease, "eth0", t0 + Duration::from_secs(100));
    let [addr] = specs.addresses.as_slice() else { panic!("{specs:?}") };
    assert_eq!(addr.id(), "eth0/2001:db8:0:1::50/128");
    assert_eq!(addr.layer, ConfigLayer::Operator);
    assert_eq!((addr.valid_lifetime, addr.preferred_lifetime), (Some(900), Some(700)));
    assert!(specs.routes.is_empty(), "IPv6 routes come from RAs (docs/talos.md: DHCPv6)");
    let [res] = specs.resolvers.as_slice() else { panic!() };
    assert_eq!(res.dns_servers, [IpAddr::V6(DNS)]);
    assert_eq!(res.search_domains, ["corp.example.com"]);
    let [ts] = specs.time_servers.as_slice() else { panic!() };
    assert_eq!(ts.time_servers, [NTP.to_string()]);
    assert!(specs.hostnames.is_empty());
    assert!(specs.links.is_empty());

    // A renewal of the same address yields the same ID with fresh lifetimes: an in-place
    // update, not a new address.
    let mut renewed = lease.clone();
    renewed.acquired_at = Some(t0 + Duration::from_secs(400));
    let later = lease_to_specs(&renewed, "eth0", t0 + Duration::from_secs(400));
    assert_eq!(later.addresses[0].id(), addr.id());
    assert_eq!(later.addresses[0].valid_lifetime, Some(VALID));

    let mut forever = lease;
    forever.valid_lifetime = INFINITY;
    forever.preferred_lifetime = INFINITY;
    let specs = lease_to_specs(&forever, "eth0", t0 + Duration::from_secs(5000));
    assert_eq!(
        (specs.addresses[0].valid_lifetime, specs.addresses[0].preferred_lifetime),
        (None, None)
    );
}

#[test]
fn persisted_lease_round_trips_without_its_instant() {
    let t0 = Instant::now();
    let lease = sample_lease(t0);
    let back: Lease6 = serde_json::from_str(&serde_json::to_string(&lease).unwrap()).unwrap();
    assert_eq!(back.acquired_at, None);
    assert_eq!(Lease6 { acquired_at: Some(t0), ..back }, lease);
}

#[test]
fn lease_to_specs_drops_names_that_are_not_valid_and_keeps_the_rest() {
    let t0 = Instant::now();
    let mut lease = sample_lease(t0);
    lease.search = vec!["x registry.local\nnameserver 6.6.6.6".into(), "ok.example".into()];
    lease.fqdn = Some("node\n10.0.0.66 registry.local".into());
    let specs = lease_to_specs(&lease, "eth0", t0);
    assert_eq!(specs.addresses.len(), 1, "the address still applies");
    let [res] = specs.resolvers.as_slice() else { panic!("{specs:?}") };
    assert_eq!(res.search_domains, ["ok.example"]);
    assert!(specs.hostnames.is_empty(), "{specs:?}");
}

#[test]
fn fqdn_with_a_newline_in_a_label_is_not_a_hostname() {
    let t0 = Instant::now();
    let mut c = client(t0);
    let solicit = only_send(&c.handle(t0, Input::LinkLocalReady));
    let mut a = Answer::new(MessageType::Reply);
    a.rapid_commit = true;
    let mut bytes = Message::from_bytes(&a.to(&solicit)).unwrap();
    let mut data = vec![0, 12];
    data.extend_from_slice(b"node\n6.6.6.6");
    data.extend_from_slice(&[7, b'e', b'x', b'a', b'm', b'p', b'l', b'e', 0]);
    bytes.opts_mut().insert(DhcpOption::Unknown(UnknownOption::new(OptionCode::ClientFqdn, data)));
    let out = c.handle(t0, Input::Packet(&bytes.to_vec().unwrap()));
    let [Output::Bound(lease)] = out.as_slice() else { panic!("{out:?}") };
    assert_eq!(lease.fqdn.as_deref(), Some("node\n6.6.6.6.example"));
    let specs = lease_to_specs(lease, "eth0", t0);
    assert!(specs.hostnames.is_empty(), "{specs:?}");
    assert_eq!(specs.addresses.len(), 1);
}
