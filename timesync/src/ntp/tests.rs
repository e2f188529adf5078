// SPDX-License-Identifier: Apache-2.0
//! The engine as a table of (time, packet) -> action, against simulated servers.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::wire::{Header, NtpTime, MODE_SERVER};
use super::*;

const MS: i64 = 1_000_000;

fn addr(n: u8) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, n], 123))
}

/// A simulated world: the local clock is `local_error_ns` behind true time.
struct World {
    t0: Instant,
    true0: NtpTime,
    local_error_ns: i64,
    now: Instant,
}

impl World {
    fn new(local_error_ns: i64) -> Self {
        let t0 = Instant::now();
        Self {
            t0,
            true0: NtpTime::from_unix(Duration::from_secs(1_750_000_000)),
            local_error_ns,
            now: t0,
        }
    }
    fn true_wall(&self) -> NtpTime {
        self.true0.add_ns((self.now - self.t0).as_nanos() as i64)
    }
    fn local_wall(&self) -> NtpTime {
        self.true_wall().add_ns(-self.local_error_ns)
    }
    fn advance(&mut self, d: Duration) {
        self.now += d;
    }
}

/// A server whose clock is `lie_ns` off true time, with a fixed one-way delay.
fn reply(
    w: &World,
    request: &[u8; 48],
    lie_ns: i64,
    one_way: i64,
    f: impl FnOnce(&mut Header),
) -> [u8; 48] {
    let req = Header::parse(request).unwrap();
    let t = w.true_wall().add_ns(lie_ns);
    let mut h = Header {
        leap: 0,
        version: 4,
        mode: MODE_SERVER,
        stratum: 2,
        poll: 6,
        precision: -20,
        root_delay: 0x20,
        root_dispersion: 0x20,
        ref_id: *b"TEST",
        reference: t.add_ns(-10_000 * MS),
        origin: req.transmit,
        receive: t.add_ns(-one_way),
        transmit: t.add_ns(-one_way),
    };
    f(&mut h);
    h.encode()
}

fn sends(out: &[Output]) -> Vec<(SocketAddr, [u8; 48])> {
    out.iter()
        .filter_map(|o| match o {
            Output::Send { to, packet } => Some((*to, packet[..48].try_into().unwrap())),
            _ => None,
        })
        .collect()
}

fn client(servers: &[SocketAddr], adjust: bool, w: &World) -> NtpClient {
    NtpClient::new(ClientConfig { servers: servers.to_vec(), adjust_clock: adjust }, w.now, 7)
}

/// One poll round: timer, then every server answers (by `lie(i)`) after 1 ms. Returns the
/// outputs of the replies.
fn round(c: &mut NtpClient, w: &mut World, lie: &dyn Fn(usize) -> Option<i64>) -> Vec<Output> {
    if let Some(at) = c.poll_at() {
        if at > w.now {
            w.now = at;
        }
    }
    let out = c.handle(w.now, w.local_wall(), Input::Timer);
    w.advance(Duration::from_millis(1));
    let mut result = Vec::new();
    for (to, req) in sends(&out) {
        let i = c.servers().position(|a| a == to).unwrap();
        if let Some(l) = lie(i) {
            let bytes = reply(w, &req, l, MS / 2, |_| {});
            result.extend(c.handle(
                w.now,
                w.local_wall(),
                Input::Packet { from: to, bytes: &bytes },
            ));
        }
    }
    result
}

/// The seconds between successive requests over `n` rounds.
fn gaps(
    c: &mut NtpClient,
    w: &mut World,
    n: usize,
    lie: &dyn Fn(usize) -> Option<i64>,
) -> Vec<u64> {
    let mut at = Vec::new();
    for _ in 0..=n {
        at.push(c.poll_at().unwrap());
        round(c, w, lie);
    }
    at.windows(2).map(|p| (p[1] - p[0]).as_secs()).collect()
}

#[test]
fn table_of_replies_and_actions() {
    // Each row: what the server does to its reply, and whether the engine takes a sample
    // (measure-only, one server, clock right: a valid sample makes it synced).
    type Tweak = fn(&mut Header);
    let rows: [(&str, Tweak, bool); 11] = [
        ("valid", |_| {}, true),
        ("mode 3 (a client)", |h| h.mode = 3, false),
        ("version 0", |h| h.version = 0, false),
        ("version 3", |h| h.version = 3, true),
        ("stratum 16", |h| h.stratum = 16, false),
        ("leap 3: unsynchronised", |h| h.leap = 3, false),
        ("origin not ours", |h| h.origin = NtpTime(h.origin.0 ^ 1), false),
        ("transmit zero", |h| h.transmit = NtpTime(0), false),
        ("reference zero", |h| h.reference = NtpTime(0), false),
        ("root dispersion 2 s", |h| h.root_dispersion = 2 << 16, false),
        (
            "unknown kiss code",
            |h| {
                h.stratum = 0;
                h.ref_id = *b"XXXX"
            },
            false,
        ),
    ];
    for (name, tweak, accepted) in rows {
        let mut w = World::new(0);
        let mut c = client(&[addr(1)], false, &w);
        let out = c.handle(w.now, w.local_wall(), Input::Timer);
        let [(to, req)] = sends(&out)[..] else { panic!("{name}: one request expected: {out:?}") };
        assert_eq!(to, addr(1));
        w.advance(Duration::from_millis(1));
        let bytes = reply(&w, &req, 0, MS / 2, tweak);
        let out = c.handle(w.now, w.local_wall(), Input::Packet { from: to, bytes: &bytes });
        assert!(out.is_empty(), "{name}: measuring never adjusts: {out:?}");
        assert_eq!(c.report().synced, accepted, "{name}: {:?}", c.report());
        // A second copy of the same reply is never used again (the request is answered).
        let again = c.handle(w.now, w.local_wall(), Input::Packet { from: to, bytes: &bytes });
        assert!(again.is_empty());
    }
}

#[test]
fn replies_from_elsewhere_or_truncated_are_ignored() {
    let mut w = World::new(0);
    let mut c = client(&[addr(1)], true, &w);
    let out = c.handle(w.now, w.local_wall(), Input::Timer);
    let (_, req) = sends(&out)[0];
    w.advance(Duration::from_millis(1));
    let bytes = reply(&w, &req, 0, MS / 2, |_| {});
    let spoofed = c.handle(w.now, w.local_wall(), Input::Packet { from: addr(9), bytes: &bytes });
    assert!(spoofed.is_empty());
    let short =
        c.handle(w.now, w.local_wall(), Input::Packet { from: addr(1), bytes: &bytes[..40] });
    assert!(short.is_empty());
    assert!(!c.report().synced);
    // The genuine reply still counts after both.
    let out = c.handle(w.now, w.local_wall(), Input::Packet { from: addr(1), bytes: &bytes });
    assert!(matches!(out[..], [Output::Slew { .. }]), "{out:?}");
}

#[test]
fn a_large_first_offset_is_stepped_then_confirmed_and_slewed() {
    // The local clock is ten years behind (a dead RTC battery).
    let ten_years = 10 * 365 * 86_400 * 1_000 * MS;
    let mut w = World::new(ten_years);
    let mut c = client(&[addr(1)], true, &w);
    let out = round(&mut c, &mut w, &|_| Some(0));
    let [Output::Step { offset_ns }] = out[..] else { panic!("a step expected: {out:?}") };
    assert!((offset_ns - ten_years).abs() < MS, "{offset_ns}");
    assert_eq!(c.report().reason, Some(Unsynced::Stepped));
    assert!(!c.report().synced);
    // The caller steps the clock.
    w.local_error_ns -= offset_ns;
    // A new burst starts at once; its first sample confirms with a slew.
    assert_eq!(c.poll_at(), Some(w.now));
    let out = round(&mut c, &mut w, &|_| Some(0));
    let [Output::Slew { offset_ns, max_error_us, .. }] = out[..] else { panic!("{out:?}") };
    assert!(offset_ns.abs() < MS, "{offset_ns}");
    assert!(max_error_us >= 5_000, "{max_error_us}");
    let r = c.report();
    assert!(r.synced && r.reason.is_none() && r.steps == 1);
    assert_eq!(r.selected, Some(addr(1)));
    assert!(r.last_sync.is_some());
}

#[test]
fn a_small_first_offset_is_slewed_and_later_large_ones_are_never_stepped() {
    let mut w = World::new(50 * MS);
    let mut c = client(&[addr(1)], true, &w);
    let out = round(&mut c, &mut w, &|_| Some(0));
    let [Output::Slew { offset_ns, .. }] = out[..] else { panic!("{out:?}") };
    assert!((offset_ns - 50 * MS).abs() < MS);
    // The clock jumps by 3 s later: slewed (clamped to the kernel's ±0.5 s), not stepped.
    w.local_error_ns = 3_000 * MS;
    let mut slews = Vec::new();
    for _ in 0..BURST + 4 {
        for o in round(&mut c, &mut w, &|_| Some(0)) {
            assert!(!matches!(o, Output::Step { .. }), "{o:?}");
            if let Output::Slew { offset_ns, .. } = o {
                slews.push(offset_ns);
            }
        }
    }
    assert!(slews.contains(&500_000_000), "{slews:?}");
}

#[test]
fn measuring_only_reports_the_offset_and_is_unsynced_beyond_the_threshold() {
    let mut w = World::new(-2_000 * MS);
    let mut c = client(&[addr(1)], false, &w);
    let out = round(&mut c, &mut w, &|_| Some(0));
    assert!(out.is_empty());
    let r = c.report();
    assert!(!r.synced);
    assert_eq!(r.reason, Some(Unsynced::Offset));
    assert!((r.offset_ns + 2_000 * MS).abs() < MS, "{}", r.offset_ns);
}

#[test]
fn a_liar_among_three_is_rejected() {
    let hour = 3_600_000 * MS;
    let mut w = World::new(0);
    let servers = [addr(1), addr(2), addr(3)];
    let mut c = client(&servers, true, &w);
    let lie = |i: usize| Some(if i == 1 { hour } else { 0 });
    let mut out = Vec::new();
    for _ in 0..BURST {
        out.extend(round(&mut c, &mut w, &lie));
    }
    assert!(out.iter().all(|o| !matches!(o, Output::Step { .. })), "{out:?}");
    assert!(out.iter().any(|o| matches!(o, Output::Slew { .. })));
    let r = c.report();
    assert!(r.synced);
    assert_eq!(r.falsetickers, [addr(2)]);
    assert_ne!(r.selected, Some(addr(2)));
    assert!(r.offset_ns.abs() < MS);
}

#[test]
fn the_first_reply_alone_is_not_trusted_while_others_are_in_their_burst() {
    let hour = 3_600_000 * MS;
    let mut w = World::new(0);
    let mut c = client(&[addr(1), addr(2), addr(3)], true, &w);
    // Only the liar answers the first round.
    let out = round(&mut c, &mut w, &|i| (i == 1).then_some(hour));
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(c.report().reason, Some(Unsynced::Waiting));
    // One honest server joins: one against one, no majority.
    let out = round(&mut c, &mut w, &|i| match i {
        1 => Some(hour),
        0 => Some(0),
        _ => None,
    });
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(c.report().reason, Some(Unsynced::Falsetickers));
}

#[test]
fn two_servers_disagreeing_are_both_rejected_after_their_bursts() {
    let mut w = World::new(0);
    let mut c = client(&[addr(1), addr(2)], true, &w);
    for _ in 0..BURST + 1 {
        let out = round(&mut c, &mut w, &|i| Some(if i == 0 { 0 } else { 3_600_000 * MS }));
        assert!(out.is_empty(), "{out:?}");
    }
    let r = c.report();
    assert_eq!(r.reason, Some(Unsynced::Falsetickers));
    assert_eq!(r.falsetickers.len(), 2);
}

#[test]
fn silent_servers_back_off_and_are_reported_unreachable() {
    let mut w = World::new(0);
    let mut c = client(&[addr(1)], true, &w);
    let secs = gaps(&mut c, &mut w, 12, &|_| None);
    // The burst, then a doubling backoff capped at the longest poll interval.
    assert_eq!(secs, [2, 2, 2, 16, 32, 64, 128, 256, 512, 1024, 1024, 1024]);
    assert_eq!(c.report().reason, Some(Unsynced::Unreachable));
}

#[test]
fn no_servers_is_a_reason_and_no_timer() {
    let w = World::new(0);
    let c = client(&[], true, &w);
    assert_eq!(c.report().reason, Some(Unsynced::NoServers));
    assert_eq!(c.poll_at(), None);
}

#[test]
fn kiss_of_death_rate_slows_down_and_deny_stops_asking() {
    let mut w = World::new(0);
    let mut c = client(&[addr(1), addr(2)], true, &w);
    let out = c.handle(w.now, w.local_wall(), Input::Timer);
    let reqs = sends(&out);
    w.advance(Duration::from_millis(1));
    let rate = reply(&w, &reqs[0].1, 0, 0, |h| {
        h.stratum = 0;
        h.ref_id = *b"RATE";
        h.poll = 8;
    });
    let deny = reply(&w, &reqs[1].1, 0, 0, |h| {
        h.stratum = 0;
        h.ref_id = *b"DENY";
    });
    // A forged kiss (wrong origin) is ignored.
    let mut forged = deny;
    forged[31] ^= 1;
    c.handle(w.now, w.local_wall(), Input::Packet { from: addr(2), bytes: &forged });
    c.handle(w.now, w.local_wall(), Input::Packet { from: addr(1), bytes: &rate });
    c.handle(w.now, w.local_wall(), Input::Packet { from: addr(2), bytes: &deny });
    // Server 1 waits 2^8 s; server 2 is never asked again.
    assert_eq!(c.poll_at(), Some(w.now + Duration::from_secs(256)));
    w.advance(Duration::from_secs(256));
    let out = c.handle(w.now, w.local_wall(), Input::Timer);
    assert_eq!(sends(&out).iter().map(|s| s.0).collect::<Vec<_>>(), [addr(1)]);

    let mut w = World::new(0);
    let mut c = client(&[addr(1)], true, &w);
    let out = c.handle(w.now, w.local_wall(), Input::Timer);
    let rstr = reply(&w, &sends(&out)[0].1, 0, 0, |h| {
        h.stratum = 0;
        h.ref_id = *b"RSTR";
    });
    c.handle(w.now, w.local_wall(), Input::Packet { from: addr(1), bytes: &rstr });
    assert_eq!(c.poll_at(), None);
    w.advance(Duration::from_secs(5));
    c.handle(w.now, w.local_wall(), Input::Timer);
    assert_eq!(c.report().reason, Some(Unsynced::Denied));
}

#[test]
fn poll_interval_grows_after_the_burst() {
    let mut w = World::new(0);
    let mut c = client(&[addr(1)], true, &w);
    let secs = gaps(&mut c, &mut w, 10, &|_| Some(0));
    assert_eq!(secs, [2, 2, 2, 64, 128, 256, 512, 1024, 1024, 1024]);
    assert_eq!(1 << MIN_POLL, 64);
    assert_eq!(1 << MAX_POLL, 1024);
}

mod nts {
    //! NTS servers in the engine: keys first, authenticated replies only, new keys asked for
    //! when the cookies run out or the server refuses them.

    use super::*;
    use crate::nts::session::serve_for_tests;
    use crate::nts::{Keys, Session};

    fn keys() -> Keys {
        Keys { c2s: [3; 32], s2c: [4; 32] }
    }

    fn session(cookies: usize) -> Session {
        Session::new(keys(), (0..cookies).map(|i| vec![i as u8; 64]).collect(), [1; 32])
    }

    fn packets(out: &[Output]) -> Vec<Vec<u8>> {
        out.iter()
            .filter_map(|o| match o {
                Output::Send { packet, .. } => Some(packet.clone()),
                _ => None,
            })
            .collect()
    }

    fn rekeys(out: &[Output]) -> Vec<&'static str> {
        out.iter()
            .filter_map(|o| match o {
                Output::Rekey { why, .. } => Some(*why),
                _ => None,
            })
            .collect()
    }

    /// A measuring engine with one NTS server holding `cookies` cookies.
    fn nts_client(w: &World, cookies: usize) -> NtpClient {
        let mut c = client(&[], false, w);
        c.set_servers(&[addr(1)], &[addr(1)], w.now);
        assert_eq!(c.poll_at(), None, "nothing is sent before the keys come");
        assert!(c.set_session(addr(1), session(cookies), w.now));
        c
    }

    /// How the test server turns a request and a valid reply header into its answer.
    type Answer = dyn Fn(&[u8], [u8; 48]) -> Vec<u8>;

    /// Ask once and answer with what `f` makes of the request.
    fn ask(c: &mut NtpClient, w: &mut World, f: &Answer) -> (Vec<Output>, Vec<Output>) {
        if let Some(at) = c.poll_at() {
            w.now = w.now.max(at);
        }
        let sent = c.handle(w.now, w.local_wall(), Input::Timer);
        let Some(req) = packets(&sent).pop() else { return (sent, Vec::new()) };
        w.advance(Duration::from_millis(1));
        let header = reply(w, req[..48].try_into().unwrap(), 0, 0, |_| {});
        let bytes = f(&req, header);
        let got = c.handle(w.now, w.local_wall(), Input::Packet { from: addr(1), bytes: &bytes });
        w.advance(BURST_INTERVAL);
        (sent, got)
    }

    #[test]
    fn authenticated_replies_sync_and_report_nts() {
        let mut w = World::new(0);
        let mut c = nts_client(&w, 8);
        for _ in 0..BURST {
            let (sent, _) = ask(&mut c, &mut w, &|req, h| serve_for_tests(&keys(), req, h, 1));
            assert!(packets(&sent)[0].len() > 48, "extension fields follow the header");
        }
        let r = c.report();
        assert!(r.synced, "{r:?}");
        assert!(r.selected_nts);
        assert_eq!(r.selected, Some(addr(1)));
    }

    #[test]
    fn unauthenticated_or_tampered_replies_are_ignored_and_a_run_of_them_asks_for_new_keys() {
        let mut w = World::new(0);
        let mut c = nts_client(&w, 8);
        // A plain NTP reply with the right origin: dropped.
        let (_, got) = ask(&mut c, &mut w, &|_, h| h.to_vec());
        assert!(got.is_empty());
        assert!(!c.report().synced);
        // A valid reply with one bit of the server's timestamp changed: dropped.
        let tamper = |req: &[u8], h: [u8; 48]| {
            let mut r = serve_for_tests(&keys(), req, h, 1);
            r[41] ^= 1;
            r
        };
        let (_, got) = ask(&mut c, &mut w, &tamper);
        assert!(got.is_empty());
        let (_, got) = ask(&mut c, &mut w, &tamper);
        assert_eq!(rekeys(&got), [REKEY_AUTH_FAILED], "{MAX_BAD_AUTH} in a row");
        assert!(!c.report().synced);
        assert_eq!(c.poll_at(), None, "silent until new keys");
        assert!(c.set_session(addr(1), session(8), w.now));
        let (_, got) = ask(&mut c, &mut w, &|req, h| serve_for_tests(&keys(), req, h, 1));
        assert!(rekeys(&got).is_empty());
    }

    #[test]
    fn spent_cookies_and_a_nak_ask_for_new_keys() {
        let mut w = World::new(0);
        let mut c = nts_client(&w, 2);
        // Two unanswered requests spend both cookies; the third timer asks for keys.
        for _ in 0..2 {
            let out = c.handle(w.now, w.local_wall(), Input::Timer);
            assert_eq!(packets(&out).len(), 1);
            w.advance(Duration::from_secs(60));
        }
        let out = c.handle(w.now, w.local_wall(), Input::Timer);
        assert!(packets(&out).is_empty());
        assert_eq!(rekeys(&out), ["out of NTS cookies"]);
        assert_eq!(c.poll_at(), None);

        // NTSN with the request's unique identifier.
        c.set_session(addr(1), session(8), w.now);
        let nak = |req: &[u8], mut h: [u8; 48]| {
            h[1] = 0;
            h[12..16].copy_from_slice(b"NTSN");
            let uid = crate::nts::fields::iter(req, 48).next().unwrap();
            let mut r = h.to_vec();
            r.extend_from_slice(&req[uid.at..uid.at + 4 + uid.value.len()]);
            r
        };
        let (_, got) = ask(&mut c, &mut w, &nak);
        assert_eq!(rekeys(&got), ["server refused the NTS cookie (NTSN)"]);
    }

    #[test]
    fn set_servers_keeps_what_stays_and_drops_what_goes() {
        let mut w = World::new(0);
        let mut c = client(&[addr(1), addr(2)], false, &w);
        for _ in 0..BURST {
            round(&mut c, &mut w, &|_| Some(0));
        }
        assert!(c.report().synced);
        let selected = c.report().selected.unwrap();
        c.set_servers(&[selected, addr(3)], &[], w.now);
        assert!(c.report().synced, "the selected server stayed");
        assert_eq!(c.servers().collect::<Vec<_>>(), [selected, addr(3)]);
        c.set_servers(&[addr(3)], &[], w.now);
        assert!(!c.report().synced);
        assert_eq!(c.report().reason, Some(Unsynced::Waiting));
    }
}
