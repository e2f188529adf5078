// SPDX-License-Identifier: Apache-2.0
//! A deterministic mutation fuzzer for both DHCP parse boundaries and engines, run by
//! `cargo test` (`scripts/fuzz dhcp` runs it long, in release mode), on the mutator shared by
//! every fuzz target (`testkit::fuzzkit`, see docs/fuzzing.md).
//!
//! Seeds are valid server messages for a client in SELECTING/SOLICIT and one in RENEWING
//! (DHCPv4: OFFER, ACK with options 119/121, NAK, an ACK with option overload; DHCPv6:
//! ADVERTISE, REPLY with every option the client reads, Rapid Commit REPLY, status-code
//! REPLYs). Each iteration mutates one (bit flips, interesting bytes and integers, truncation,
//! length-field corruption found by walking the TLVs, splices between seeds, insertions,
//! deletions, duplications) and checks:
//! * the parse boundary never reports that the decoder panicked (its TLV walk must refuse
//!   every shape `dhcproto` panics on), and nothing panics in our code;
//! * a packet that is not a well-formed message for the client's transaction (xid, chaddr or
//!   client id, message type) leaves the client exactly as it was, with no output;
//! * a lease produced from a mutant is coherent: its address is the one in the packet, its
//!   server is the one the client renews with, T1 ≤ T2 ≤ the lifetime;
//! * the `/etc` files rendered from that lease's specs hold only lines made of whole, valid
//!   values: `nameserver <ip>`, `search <domains>`, `<ip> <names>`, one hostname; nothing the
//!   renderers had to leave out (the lease translation must have dropped it already).
//!
//! Besides the valid seeds, one DHCPv4 ACK and one DHCPv6 REPLY carry hostile names (a
//! newline, an escape sequence, a space in options 12, 15, 119, 24 and 39), so mutants
//! explore the name checks from both sides.
//!
//! `KEELSON_FUZZ_ITERS` sets the iterations per protocol (default 20 000) and
//! `KEELSON_FUZZ_SEED` the random seed (default fixed, so a failure reproduces); a failure prints
//! the iteration and the packet in hex.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::str::FromStr;
use std::time::{Duration, Instant};

use dhcproto::{v4, v6, Decodable, Encodable, Name};
use testkit::fuzzkit::{hex, LenField, Mutator, Rng};

use crate::resource::{HostnameStatus, LayerSpecs, ResolverStatus};
use crate::{dhcp4, dhcp6, etcfiles, names};

const DEFAULT_ITERS: u64 = 20_000;
const DEFAULT_SEED: u64 = 0x6b65_656c_736f_6e21;
const MAC: [u8; 6] = [0x52, 0x54, 0x00, 0xab, 0xcd, 0xef];
const SERVER4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const YIADDR: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 50);
const SERVER6: [u8; 10] = [0, 3, 0, 1, 0x02, 0, 0, 0, 0, 0x01];
const ADDR6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 1, 0, 0, 0, 0x50);

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Report a failing mutant so that it reproduces (and can become a regression test).
fn fail(proto: &str, i: u64, seed: u64, p: &[u8], what: &str) -> ! {
    panic!("{proto} fuzz iteration {i} (seed {seed:#x}): {what}\n{}", hex(p))
}

// ---------------------------------------------------------------------------------------
// Mutations

/// The option lengths (one byte) of options, `file` and `sname`.
fn v4_length_fields(p: &[u8]) -> Vec<LenField> {
    let mut fields = Vec::new();
    for (start, end) in [(240, p.len()), (108, 236.min(p.len())), (44, 108.min(p.len()))] {
        let mut pos = start;
        while pos + 1 < end {
            match p[pos] {
                0 => pos += 1,
                255 => break,
                _ => {
                    fields.push(LenField::be(pos + 1, 1));
                    pos += 2 + usize::from(p[pos + 1]);
                }
            }
        }
    }
    fields
}

/// The option lengths (two bytes), walking into the options that nest options.
fn v6_length_fields(p: &[u8]) -> Vec<LenField> {
    fn walk(p: &[u8], start: usize, end: usize, depth: u8, out: &mut Vec<LenField>) {
        let mut pos = start;
        while pos + 4 <= end {
            let code = u16::from_be_bytes([p[pos], p[pos + 1]]);
            let len = usize::from(u16::from_be_bytes([p[pos + 2], p[pos + 3]]));
            out.push(LenField::be(pos + 2, 2));
            let body = pos + 4;
            if body + len > end {
                break;
            }
            let head = match code {
                3 | 25 => Some(12),
                4 => Some(4),
                5 => Some(24),
                _ => None,
            };
            if let (Some(h), true) = (head, depth < 4) {
                if h <= len {
                    walk(p, body + h, body + len, depth + 1, out);
                }
            }
            pos = body + len;
        }
    }
    let mut out = Vec::new();
    walk(p, 4, p.len(), 0, &mut out);
    out
}

/// The shared mutator (`testkit::fuzzkit`) with each protocol's length fields.
const MUTATE4: Mutator<'static> =
    Mutator { dict: &[], lengths: Some(v4_length_fields), max_len: 0 };
const MUTATE6: Mutator<'static> =
    Mutator { dict: &[], lengths: Some(v6_length_fields), max_len: 0 };

// ---------------------------------------------------------------------------------------
// DHCPv4

fn v4_reply(xid: u32, kind: v4::MessageType) -> v4::Message {
    let mut m = v4::Message::default();
    m.set_opcode(v4::Opcode::BootReply).set_xid(xid).set_chaddr(&MAC);
    if kind != v4::MessageType::Nak {
        m.set_yiaddr(YIADDR);
    }
    let o = m.opts_mut();
    o.insert(v4::DhcpOption::MessageType(kind));
    o.insert(v4::DhcpOption::ServerIdentifier(SERVER4));
    if kind == v4::MessageType::Nak {
        return m;
    }
    o.insert(v4::DhcpOption::SubnetMask(Ipv4Addr::new(255, 255, 255, 0)));
    o.insert(v4::DhcpOption::Router(vec![SERVER4]));
    o.insert(v4::DhcpOption::DomainNameServer(vec![Ipv4Addr::new(10, 0, 0, 53)]));
    o.insert(v4::DhcpOption::DomainName("example.com".into()));
    o.insert(v4::DhcpOption::DomainSearch(vec![
        Name::from_str("corp.example.com.").unwrap_or_default(),
        Name::from_str("example.com.").unwrap_or_default(),
    ]));
    o.insert(v4::DhcpOption::NtpServers(vec![Ipv4Addr::new(10, 0, 0, 123)]));
    o.insert(v4::DhcpOption::Hostname("node1".into()));
    o.insert(v4::DhcpOption::InterfaceMtu(1400));
    o.insert(v4::DhcpOption::AddressLeaseTime(1000));
    o.insert(v4::DhcpOption::Renewal(500));
    o.insert(v4::DhcpOption::Rebinding(875));
    o.insert(v4::DhcpOption::ClasslessStaticRoute(vec![
        ("0.0.0.0/0".parse().unwrap_or_default(), SERVER4),
        ("172.16.0.0/12".parse().unwrap_or_default(), Ipv4Addr::new(10, 0, 0, 2)),
    ]));
    m
}

/// A name with raw label bytes (a newline, an escape, a space), as a rogue server sends it.
fn raw_name(labels: &[&[u8]]) -> Name {
    Name::from_labels(labels.iter().copied()).unwrap_or_default()
}

fn v4_seeds(xid: u32) -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for kind in [v4::MessageType::Offer, v4::MessageType::Ack, v4::MessageType::Nak] {
        seeds.push(v4_reply(xid, kind).to_vec().unwrap_or_default());
    }
    let mut hostile = v4_reply(xid, v4::MessageType::Ack);
    let o = hostile.opts_mut();
    o.insert(v4::DhcpOption::DomainName("x registry.local\nnameserver 6.6.6.6".into()));
    o.insert(v4::DhcpOption::Hostname("node\n10.0.0.66 registry.local\x1b[2J".into()));
    o.insert(v4::DhcpOption::DomainSearch(vec![
        raw_name(&[b"ok", b"example"]),
        raw_name(&[b"x\nnameserver 6.6.6.6", b"example"]),
    ]));
    seeds.push(hostile.to_vec().unwrap_or_default());
    // The lease options in file and sname (option 52 = 3).
    let mut m = v4::Message::default();
    m.set_opcode(v4::Opcode::BootReply).set_xid(xid).set_chaddr(&MAC).set_yiaddr(YIADDR);
    let mut file = vec![1, 4, 255, 255, 255, 0, 3, 4, 10, 0, 0, 1, 51, 4, 0, 0, 3, 0xe8];
    file.extend_from_slice(&[121, 5, 0, 10, 0, 0, 1, 255]);
    file.resize(128, 0);
    m.set_fname(&file).set_sname(&[6, 4, 10, 0, 0, 53, 42, 4, 10, 0, 0, 123, 255]);
    m.opts_mut().insert(v4::DhcpOption::MessageType(v4::MessageType::Ack));
    m.opts_mut().insert(v4::DhcpOption::ServerIdentifier(SERVER4));
    m.opts_mut().insert(v4::DhcpOption::OptionOverload(3));
    seeds.push(m.to_vec().unwrap_or_default());
    seeds
}

fn v4_sent_xid(out: &[dhcp4::Output]) -> u32 {
    out.iter()
        .find_map(|o| match o {
            dhcp4::Output::Send { packet, .. } => v4::Message::from_bytes(packet).ok(),
            _ => None,
        })
        .map_or(0, |m| m.xid())
}

struct Target4 {
    client: dhcp4::Dhcp4Client,
    now: Instant,
    xid: u32,
    seeds: Vec<Vec<u8>>,
}

fn v4_targets() -> Vec<Target4> {
    let t0 = Instant::now();
    let mut selecting = dhcp4::Dhcp4Client::new(dhcp4::ClientConfig::new(MAC), t0, 1);
    let xid = v4_sent_xid(&selecting.handle(t0, dhcp4::Input::Timer));

    let mut requesting = selecting.clone();
    let offer = v4_reply(xid, v4::MessageType::Offer).to_vec().unwrap_or_default();
    requesting.handle(t0, dhcp4::Input::Packet(&offer));
    let mut renewing = requesting.clone();
    let ack = v4_reply(xid, v4::MessageType::Ack).to_vec().unwrap_or_default();
    renewing.handle(t0, dhcp4::Input::Packet(&ack));
    let t1 = t0 + Duration::from_secs(500);
    let rxid = v4_sent_xid(&renewing.handle(t1, dhcp4::Input::Timer));
    let mut rebinding = renewing.clone();
    let t2 = t0 + Duration::from_secs(875);
    let bxid = v4_sent_xid(&rebinding.handle(t2, dhcp4::Input::Timer));
    assert_eq!(requesting.state(), dhcp4::Dhcp4State::Requesting, "fuzz target set-up");
    assert_eq!(renewing.state(), dhcp4::Dhcp4State::Renewing, "fuzz target set-up");
    assert_eq!(rebinding.state(), dhcp4::Dhcp4State::Rebinding, "fuzz target set-up");
    vec![
        Target4 { client: selecting, now: t0, xid, seeds: v4_seeds(xid) },
        Target4 { client: requesting, now: t0, xid, seeds: v4_seeds(xid) },
        Target4 { client: renewing, now: t1, xid: rxid, seeds: v4_seeds(rxid) },
        Target4 { client: rebinding, now: t2, xid: bxid, seeds: v4_seeds(bxid) },
    ]
}

/// Whether `p` is a well-formed reply for the client's transaction, per the parse boundary.
fn v4_acceptable(p: &[u8], xid: u32) -> Option<v4::Message> {
    let m = dhcp4::wire::decode(p).ok()?;
    let kind = m.opts().msg_type()?;
    let ours = m.opcode() == v4::Opcode::BootReply
        && m.xid() == xid
        && m.chaddr().get(..6) == Some(&MAC[..])
        && matches!(kind, v4::MessageType::Offer | v4::MessageType::Ack | v4::MessageType::Nak);
    ours.then_some(m)
}

#[derive(Default, Debug)]
struct Stats {
    parsed: u64,
    acceptable: u64,
    changed: u64,
    /// Leases whose `/etc` rendering was checked.
    etc_checked: u64,
}

fn fuzz_v4(iters: u64, seed: u64) -> Stats {
    let targets = v4_targets();
    let corpus: Vec<Vec<u8>> = targets.iter().flat_map(|t| t.seeds.clone()).collect();
    let mut rng = Rng(seed);
    let mut stats = Stats::default();
    for i in 0..iters {
        let target = &targets[rng.below(targets.len())];
        let base = &target.seeds[rng.below(target.seeds.len())];
        let p = MUTATE4.mutate(base, &corpus, &mut rng);
        let fail = |what: &str| -> ! { fail("dhcp4", i, seed, &p, what) };

        let parsed = catch_unwind(|| dhcp4::wire::decode(&p));
        match parsed {
            Err(_) => fail("the parse boundary panicked"),
            Ok(Err(dhcp4::wire::Wire4Error::Panicked)) => {
                fail("dhcproto panicked behind the TLV walk")
            }
            Ok(Ok(_)) => stats.parsed += 1,
            Ok(Err(_)) => {}
        }

        let mut c = target.client.clone();
        let Ok(out) =
            catch_unwind(AssertUnwindSafe(|| c.handle(target.now, dhcp4::Input::Packet(&p))))
        else {
            fail("the engine panicked")
        };
        match v4_acceptable(&p, target.xid) {
            None => {
                if !out.is_empty()
                    || c.state() != target.client.state()
                    || c.lease() != target.client.lease()
                {
                    fail(&format!("a packet not for us changed the client: {out:?}"));
                }
            }
            Some(m) => {
                stats.acceptable += 1;
                if c.lease() != target.client.lease() {
                    stats.changed += 1;
                }
                for o in &out {
                    let dhcp4::Output::Bound(lease) = o else { continue };
                    let ok = lease.address == m.yiaddr()
                        && !lease.address.is_unspecified()
                        && !lease.address.is_broadcast()
                        // REQUESTING and RENEWING only take the server they talk to.
                        && (target.client.state() == dhcp4::Dhcp4State::Rebinding
                            || lease.server_id == SERVER4)
                        && (lease.is_infinite()
                            || (lease.t1 <= lease.t2 && lease.t2 <= lease.lease_time));
                    if !ok {
                        fail(&format!("incoherent lease {lease:?}"));
                    }
                    stats.etc_checked += 1;
                    let specs = dhcp4::lease_to_specs(lease, "eth0", 1024, target.now);
                    if let Err(e) = etc_oracle(&specs, IpAddr::V4(lease.address)) {
                        fail(&format!("{e}\nfrom lease {lease:?}"));
                    }
                }
            }
        }
    }
    stats
}

// ---------------------------------------------------------------------------------------
// The /etc oracle

/// Render `/etc/resolv.conf`, `/etc/hosts` and `/etc/hostname` from a lease's specs as the
/// node would, and check that every line is made of whole, valid values.
fn etc_oracle(specs: &LayerSpecs, address: IpAddr) -> Result<(), String> {
    let resolvers = ResolverStatus {
        dns_servers: specs.resolvers.iter().flat_map(|r| r.dns_servers.clone()).collect(),
        search_domains: specs.resolvers.iter().flat_map(|r| r.search_domains.clone()).collect(),
    };
    let host = specs
        .hostnames
        .first()
        .map(|h| HostnameStatus { hostname: h.hostname.clone(), domainname: h.domainname.clone() });
    let resolv = etcfiles::resolv_conf(&resolvers);
    let hosts = etcfiles::hosts(Some(address), host.as_ref(), &[]);
    if let Some(skipped) = resolv.skipped.iter().chain(&hosts.skipped).next() {
        return Err(format!("an invalid name reached the renderers: {skipped}"));
    }
    let plain = |line: &str| line.chars().all(|c| c == ' ' || c.is_ascii_graphic());
    for line in resolv.text.lines() {
        let ok = plain(line)
            && (line.is_empty()
                || line.strip_prefix("nameserver ").is_some_and(|ip| ip.parse::<IpAddr>().is_ok())
                || line
                    .strip_prefix("search ")
                    .is_some_and(|list| list.split(' ').all(names::is_domain)));
        if !ok {
            return Err(format!("resolv.conf line {line:?}:\n{}", resolv.text));
        }
    }
    for line in hosts.text.lines() {
        let mut tokens = line.split_whitespace();
        let ok = plain(line)
            && tokens.next().is_some_and(|ip| ip.parse::<IpAddr>().is_ok())
            && tokens.clone().next().is_some()
            && tokens.all(names::is_domain);
        if !ok {
            return Err(format!("hosts line {line:?}:\n{}", hosts.text));
        }
    }
    if let Some(h) = &host {
        let Some(text) = etcfiles::hostname(h) else {
            return Err(format!("a hostname spec the renderer refuses: {h:?}"));
        };
        let name = text.strip_suffix('\n').unwrap_or_default();
        if !plain(name) || names::split_hostname(name).is_err() {
            return Err(format!("/etc/hostname {text:?}"));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// DHCPv6

fn v6_reply(xid: [u8; 3], client_id: &[u8], iaid: u32, kind: v6::MessageType) -> v6::Message {
    let mut m = v6::Message::new_with_id(kind, xid);
    let o = m.opts_mut();
    o.insert(v6::DhcpOption::ClientId(client_id.to_vec()));
    o.insert(v6::DhcpOption::ServerId(SERVER6.to_vec()));
    let mut addr_opts = v6::DhcpOptions::new();
    addr_opts.insert(v6::DhcpOption::StatusCode(v6::StatusCode {
        status: v6::Status::Success,
        msg: "ok".into(),
    }));
    let mut ia = v6::IANA { id: iaid, t1: 300, t2: 480, opts: Default::default() };
    ia.opts.insert(v6::DhcpOption::IAAddr(v6::IAAddr {
        addr: ADDR6,
        preferred_life: 600,
        valid_life: 1000,
        opts: addr_opts,
    }));
    o.insert(v6::DhcpOption::IANA(ia));
    o.insert(v6::DhcpOption::Preference(7));
    o.insert(v6::DhcpOption::DomainNameServers(vec![Ipv6Addr::new(
        0x2001, 0xdb8, 0, 1, 0, 0, 0, 0x53,
    )]));
    o.insert(v6::DhcpOption::DomainSearchList(vec![
        Name::from_str("corp.example.com.").unwrap_or_default()
    ]));
    o.insert(v6::DhcpOption::NtpServer(vec![
        v6::NtpSuboption::ServerAddress(Ipv6Addr::new(0x2001, 0xdb8, 0, 1, 0, 0, 0, 0x123)),
        v6::NtpSuboption::FQDN(Name::from_str("time.example.com.").unwrap_or_default()),
    ]));
    o.insert(v6::DhcpOption::Unknown(v6::UnknownOption::new(
        v6::OptionCode::SntpServers,
        Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x31).octets().to_vec(),
    )));
    o.insert(v6::DhcpOption::Unknown(v6::UnknownOption::new(
        v6::OptionCode::ClientFqdn,
        vec![1, 5, b'n', b'o', b'd', b'e', b'1', 7, b'e', b'x', b'a', b'm', b'p', b'l', b'e', 0],
    )));
    o.insert(v6::DhcpOption::Unknown(v6::UnknownOption::new(
        v6::OptionCode::SolMaxRt,
        120u32.to_be_bytes().to_vec(),
    )));
    m
}

fn v6_seeds(xid: [u8; 3], client_id: &[u8], iaid: u32) -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    seeds.push(v6_reply(xid, client_id, iaid, v6::MessageType::Advertise));
    seeds.push(v6_reply(xid, client_id, iaid, v6::MessageType::Reply));
    let mut rapid = v6_reply(xid, client_id, iaid, v6::MessageType::Reply);
    rapid.opts_mut().insert(v6::DhcpOption::RapidCommit);
    seeds.push(rapid);
    for status in [v6::Status::NoBinding, v6::Status::NoAddrsAvail] {
        let mut m = v6_reply(xid, client_id, iaid, v6::MessageType::Reply);
        m.opts_mut().remove(v6::OptionCode::IANA);
        let mut ia = v6::IANA { id: iaid, t1: 0, t2: 0, opts: Default::default() };
        ia.opts.insert(v6::DhcpOption::StatusCode(v6::StatusCode { status, msg: "no".into() }));
        m.opts_mut().insert(v6::DhcpOption::IANA(ia));
        seeds.push(m);
    }
    let mut hostile = v6_reply(xid, client_id, iaid, v6::MessageType::Reply);
    hostile.opts_mut().remove(v6::OptionCode::DomainSearchList);
    hostile.opts_mut().insert(v6::DhcpOption::DomainSearchList(vec![
        raw_name(&[b"ok", b"example"]),
        raw_name(&[b"x\nnameserver 6.6.6.6", b"example"]),
    ]));
    let mut fqdn = vec![1, 27];
    fqdn.extend_from_slice(b"node\n10.0.0.66 registry\x1b[2J");
    fqdn.extend_from_slice(&[7, b'e', b'x', b'a', b'm', b'p', b'l', b'e', 0]);
    hostile.opts_mut().remove(v6::OptionCode::ClientFqdn);
    hostile
        .opts_mut()
        .insert(v6::DhcpOption::Unknown(v6::UnknownOption::new(v6::OptionCode::ClientFqdn, fqdn)));
    seeds.push(hostile);
    let mut fail = v6_reply(xid, client_id, iaid, v6::MessageType::Reply);
    fail.opts_mut().insert(v6::DhcpOption::StatusCode(v6::StatusCode {
        status: v6::Status::UnspecFail,
        msg: "busy".into(),
    }));
    seeds.push(fail);
    seeds.into_iter().filter_map(|m| m.to_vec().ok()).collect()
}

fn v6_sent_xid(out: &[dhcp6::Output]) -> [u8; 3] {
    out.iter()
        .find_map(|o| match o {
            dhcp6::Output::Send { payload } => v6::Message::from_bytes(payload).ok(),
            _ => None,
        })
        .map_or([0; 3], |m| m.xid())
}

struct Target6 {
    client: dhcp6::Dhcp6Client,
    now: Instant,
    xid: [u8; 3],
    seeds: Vec<Vec<u8>>,
}

fn v6_targets() -> Vec<Target6> {
    let t0 = Instant::now();
    let mut soliciting = dhcp6::Dhcp6Client::new(dhcp6::ClientConfig::new(MAC), t0, 1);
    let xid = v6_sent_xid(&soliciting.handle(t0, dhcp6::Input::LinkLocalReady));
    let duid = soliciting.duid().to_vec();
    let iaid = soliciting.iaid();
    let solicit_seeds = v6_seeds(xid, &duid, iaid);

    let mut requesting = soliciting.clone();
    let mut top = v6_reply(xid, &duid, iaid, v6::MessageType::Advertise);
    top.opts_mut().remove(v6::OptionCode::Preference);
    top.opts_mut().insert(v6::DhcpOption::Preference(255));
    let qxid = v6_sent_xid(
        &requesting.handle(t0, dhcp6::Input::Packet(&top.to_vec().unwrap_or_default())),
    );
    let mut renewing = soliciting.clone();
    let mut rapid = v6_reply(xid, &duid, iaid, v6::MessageType::Reply);
    rapid.opts_mut().insert(v6::DhcpOption::RapidCommit);
    renewing.handle(t0, dhcp6::Input::Packet(&rapid.to_vec().unwrap_or_default()));
    let t1 = t0 + Duration::from_secs(300);
    let rxid = v6_sent_xid(&renewing.handle(t1, dhcp6::Input::Timer));
    let mut rebinding = renewing.clone();
    let t2 = t0 + Duration::from_secs(480);
    let bxid = v6_sent_xid(&rebinding.handle(t2, dhcp6::Input::Timer));
    assert_eq!(requesting.state(), dhcp6::Dhcp6State::Requesting, "fuzz target set-up");
    assert_eq!(renewing.state(), dhcp6::Dhcp6State::Renewing, "fuzz target set-up");
    assert_eq!(rebinding.state(), dhcp6::Dhcp6State::Rebinding, "fuzz target set-up");
    vec![
        Target6 { client: soliciting, now: t0, xid, seeds: solicit_seeds },
        Target6 { client: requesting, now: t0, xid: qxid, seeds: v6_seeds(qxid, &duid, iaid) },
        Target6 { client: renewing, now: t1, xid: rxid, seeds: v6_seeds(rxid, &duid, iaid) },
        Target6 { client: rebinding, now: t2, xid: bxid, seeds: v6_seeds(bxid, &duid, iaid) },
    ]
}

fn v6_acceptable(p: &[u8], t: &Target6) -> Option<v6::Message> {
    let m = dhcp6::wire::decode(p).ok()?;
    let client_ok = matches!(m.opts().get(v6::OptionCode::ClientId),
        Some(v6::DhcpOption::ClientId(id)) if id == t.client.duid());
    let server_ok = matches!(m.opts().get(v6::OptionCode::ServerId),
        Some(v6::DhcpOption::ServerId(id)) if !id.is_empty());
    let kind_ok = match t.client.state() {
        dhcp6::Dhcp6State::Soliciting => {
            matches!(m.msg_type(), v6::MessageType::Advertise | v6::MessageType::Reply)
        }
        _ => m.msg_type() == v6::MessageType::Reply,
    };
    (m.xid() == t.xid && client_ok && server_ok && kind_ok).then_some(m)
}

fn fuzz_v6(iters: u64, seed: u64) -> Stats {
    let targets = v6_targets();
    let corpus: Vec<Vec<u8>> = targets.iter().flat_map(|t| t.seeds.clone()).collect();
    let mut rng = Rng(seed);
    let mut stats = Stats::default();
    for i in 0..iters {
        let target = &targets[rng.below(targets.len())];
        let base = &target.seeds[rng.below(target.seeds.len())];
        let p = MUTATE6.mutate(base, &corpus, &mut rng);
        let fail = |what: &str| -> ! { fail("dhcp6", i, seed, &p, what) };

        match catch_unwind(|| dhcp6::wire::decode(&p)) {
            Err(_) => fail("the parse boundary panicked"),
            Ok(Err(dhcp6::wire::Wire6Error::Panicked)) => {
                fail("dhcproto panicked behind the TLV walk")
            }
            Ok(Ok(_)) => stats.parsed += 1,
            Ok(Err(_)) => {}
        }

        let mut c = target.client.clone();
        let Ok(out) =
            catch_unwind(AssertUnwindSafe(|| c.handle(target.now, dhcp6::Input::Packet(&p))))
        else {
            fail("the engine panicked")
        };
        match v6_acceptable(&p, target) {
            None => {
                if !out.is_empty()
                    || c.state() != target.client.state()
                    || c.lease() != target.client.lease()
                {
                    fail(&format!("a packet not for us changed the client: {out:?}"));
                }
            }
            Some(m) => {
                stats.acceptable += 1;
                if c.lease() != target.client.lease() {
                    stats.changed += 1;
                }
                let offered: Vec<(Ipv6Addr, u32, u32)> = m
                    .opts()
                    .iter()
                    .filter_map(|o| match o {
                        v6::DhcpOption::IANA(ia) => Some(ia),
                        _ => None,
                    })
                    .flat_map(|ia| ia.opts.iter())
                    .filter_map(|o| match o {
                        v6::DhcpOption::IAAddr(a) => Some((a.addr, a.preferred_life, a.valid_life)),
                        _ => None,
                    })
                    .collect();
                for o in &out {
                    let dhcp6::Output::Bound(lease) = o else { continue };
                    let ok = offered.contains(&(
                        lease.address,
                        lease.preferred_lifetime,
                        lease.valid_lifetime,
                    )) && lease.valid_lifetime > 0
                        && lease.preferred_lifetime <= lease.valid_lifetime
                        && lease.t1 <= lease.t2
                        // REQUESTING and RENEWING only take the server they talk to.
                        && (!matches!(
                            target.client.state(),
                            dhcp6::Dhcp6State::Requesting | dhcp6::Dhcp6State::Renewing
                        ) || lease.server_id == SERVER6);
                    if !ok {
                        fail(&format!("incoherent lease {lease:?}"));
                    }
                    stats.etc_checked += 1;
                    let specs = dhcp6::lease_to_specs(lease, "eth0", target.now);
                    if let Err(e) = etc_oracle(&specs, IpAddr::V6(lease.address)) {
                        fail(&format!("{e}\nfrom lease {lease:?}"));
                    }
                }
            }
        }
    }
    stats
}

// ---------------------------------------------------------------------------------------
// Tests

fn run(name: &str, fuzz: fn(u64, u64) -> Stats) {
    let iters = env_u64("KEELSON_FUZZ_ITERS", DEFAULT_ITERS);
    let seed = env_u64("KEELSON_FUZZ_SEED", DEFAULT_SEED);
    let started = Instant::now();
    let stats = fuzz(iters, seed);
    eprintln!(
        "{name}: {iters} mutants in {:.2?}: {} parsed, {} well-formed for the transaction, {} changed the lease, {} leases' /etc checked",
        started.elapsed(),
        stats.parsed,
        stats.acceptable,
        stats.changed,
        stats.etc_checked
    );
    // The mutations must reach past the parser, or the engine checks test nothing.
    if iters >= 1000 {
        assert!(stats.parsed * 20 > iters, "{name}: under 5 % of mutants parse: {stats:?}");
        assert!(
            stats.acceptable > 0 && stats.changed > 0 && stats.etc_checked > 0,
            "{name}: no mutant reached the engine: {stats:?}"
        );
    }
}

#[test]
fn fuzz_dhcp4_parser_and_engine() {
    run("dhcp4", fuzz_v4);
}

#[test]
fn fuzz_dhcp6_parser_and_engine() {
    run("dhcp6", fuzz_v6);
}

// ---------------------------------------------------------------------------------------
// Regressions: inputs the fuzzer found, and the option shapes `dhcproto` panics on.

/// Found by `fuzz_dhcp4_parser_and_engine` (iteration 2727 of the default seed): an ACK with
/// `hlen` 22, whose `chaddr()` panics in `dhcproto` in every build.
const V4_HLEN_22: &str = "02011600dbf682c90000000000000000000000000000000000000000525400abcdef000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000006382536335010636040a000001ff";

/// Found by `fuzz_dhcp6_parser_and_engine` with the TLV walk disabled (iteration 18): a
/// status code of length 0 inside the IA_NA, which `dhcproto` decodes as `len - 2`.
const V6_STATUS_LEN_0: &str = "075f85130001000a00030001525400abcdef0002000a000300010200000000010003001400abcdef0000000000000000000d000000036e6f00070001070017001020010db80000000100000000000000530018001204636f7270076578616d706c6503636f6d00001f001020010db80000000000000000000000310027001001056e6f646531076578616d706c65000038002a0001001020010db8000000010000000000000123000300120474696d65076578616d706c6503636f6d000052000400000078";

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .filter_map(|i| s.get(2 * i..2 * i + 2))
        .filter_map(|b| u8::from_str_radix(b, 16).ok())
        .collect()
}

#[test]
fn regression_inputs_found_by_the_fuzzer() {
    let v4 = unhex(V4_HLEN_22);
    assert!(
        catch_unwind(|| v4::Message::from_bytes(&v4).map(|m| m.chaddr().len())).is_err(),
        "dhcproto still panics here"
    );
    assert_eq!(dhcp4::wire::decode(&v4), Err(dhcp4::wire::Wire4Error::HardwareLength(22)));
    for t in v4_targets() {
        let mut c = t.client.clone();
        assert!(c.handle(t.now, dhcp4::Input::Packet(&v4)).is_empty());
        assert_eq!((c.state(), c.lease()), (t.client.state(), t.client.lease()));
    }

    let v6 = unhex(V6_STATUS_LEN_0);
    if cfg!(debug_assertions) {
        assert!(
            catch_unwind(|| v6::Message::from_bytes(&v6)).is_err(),
            "dhcproto still panics here"
        );
    }
    assert!(matches!(
        dhcp6::wire::decode(&v6),
        Err(dhcp6::wire::Wire6Error::BadLength { code: 13, .. })
    ));
    for t in v6_targets() {
        let mut c = t.client.clone();
        assert!(c.handle(t.now, dhcp6::Input::Packet(&v6)).is_empty());
        assert_eq!((c.state(), c.lease()), (t.client.state(), t.client.lease()));
    }
}

#[test]
fn option_shapes_dhcproto_panics_on_are_refused() {
    // DHCPv4: (code, length) after a valid ACK's options.
    let ack = v4_reply(1, v4::MessageType::Ack).to_vec().unwrap_or_default();
    let end = ack.iter().rposition(|b| *b == 255).unwrap_or(ack.len());
    for (code, len) in [(80u8, 1u8), (81, 1), (94, 2), (152, 1)] {
        let mut p = ack[..end].to_vec();
        p.extend([code, len]);
        p.extend(std::iter::repeat_n(0xaa, usize::from(len)));
        p.push(255);
        if cfg!(debug_assertions) {
            assert!(catch_unwind(|| v4::Message::from_bytes(&p)).is_err(), "option {code}/{len}");
        }
        assert_eq!(
            dhcp4::wire::decode(&p),
            Err(dhcp4::wire::Wire4Error::BadLength {
                code,
                offset: end,
                len,
                area: dhcp4::wire::Area::Options
            })
        );
    }
    // DHCPv6: (code, length) followed by enough bytes for the decoder to read past it.
    for (code, len) in [(13u16, 0u16), (13, 1), (16, 2), (17, 3)] {
        let mut p = vec![7, 0, 0, 1, 0, 1, 0, 2, 0xaa, 0xbb];
        let offset = p.len();
        p.extend(code.to_be_bytes());
        p.extend(len.to_be_bytes());
        p.extend(std::iter::repeat_n(0xaa, usize::from(len)));
        p.extend([0xff, 0xf0, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8]);
        if cfg!(debug_assertions) {
            assert!(catch_unwind(|| v6::Message::from_bytes(&p)).is_err(), "option {code}/{len}");
        }
        assert_eq!(
            dhcp6::wire::decode(&p),
            Err(dhcp6::wire::Wire6Error::BadLength { code, offset, len: usize::from(len) })
        );
    }
}

#[test]
fn etc_oracle_catches_an_injected_line() {
    use crate::resource::{ConfigLayer, HostnameSpec, ResolverSpec};
    let addr = IpAddr::V4(YIADDR);
    let mut specs = LayerSpecs::default();
    specs.resolvers.push(ResolverSpec {
        dns_servers: vec![IpAddr::V4(Ipv4Addr::new(10, 0, 0, 53))],
        search_domains: vec!["ok.example".into()],
        search_domains_overridden: false,
        layer: ConfigLayer::Operator,
    });
    specs.hostnames.push(HostnameSpec {
        hostname: "node1".into(),
        domainname: "example".into(),
        layer: ConfigLayer::Operator,
    });
    assert_eq!(etc_oracle(&specs, addr), Ok(()));
    let mut bad = specs.clone();
    bad.resolvers[0].search_domains.push("x registry.local\nnameserver 6.6.6.6".into());
    assert!(etc_oracle(&bad, addr).is_err());
    let mut bad = specs;
    bad.hostnames[0].hostname = "node\n10.0.0.66 registry.local".into();
    assert!(etc_oracle(&bad, addr).is_err());
}

#[test]
fn hostile_seeds_bind_without_their_names() {
    let targets = v4_targets();
    let t = &targets[1];
    let hostile = t.seeds[3].clone();
    let mut c = t.client.clone();
    let out = c.handle(t.now, dhcp4::Input::Packet(&hostile));
    let Some(dhcp4::Output::Bound(lease)) =
        out.iter().find(|o| matches!(o, dhcp4::Output::Bound(_)))
    else {
        panic!("the hostile ACK must still bind: {out:?}")
    };
    let specs = dhcp4::lease_to_specs(lease, "eth0", 1024, t.now);
    assert_eq!(specs.resolvers[0].search_domains, ["ok.example"]);
    assert!(specs.hostnames.is_empty());
    assert_eq!(etc_oracle(&specs, IpAddr::V4(lease.address)), Ok(()));

    let targets = v6_targets();
    let t = &targets[2];
    let hostile = t.seeds.iter().rev().nth(1).cloned().unwrap_or_default();
    let mut c = t.client.clone();
    let out = c.handle(t.now, dhcp6::Input::Packet(&hostile));
    let Some(dhcp6::Output::Bound(lease)) =
        out.iter().find(|o| matches!(o, dhcp6::Output::Bound(_)))
    else {
        panic!("the hostile REPLY must still bind: {out:?}")
    };
    assert!(lease.fqdn.as_deref().is_some_and(|f| f.contains('\n')), "{lease:?}");
    let specs = dhcp6::lease_to_specs(lease, "eth0", t.now);
    assert_eq!(specs.resolvers[0].search_domains, ["ok.example"]);
    assert!(specs.hostnames.is_empty());
    assert_eq!(etc_oracle(&specs, IpAddr::V6(lease.address)), Ok(()));
}
