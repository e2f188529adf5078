// SPDX-License-Identifier: Apache-2.0
//! The NTP client engine (RFC 5905 client mode): polls, validation, selection and the clock
//! decisions. Sans-IO: the caller passes the monotonic time, the wall clock and packets in,
//! and sends, steps and slews as told.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::select::{self, Candidate, Sample, SampleFilter, Selection};
use super::wire::{short_to_ns, Header, NtpTime, LEAP_UNSYNC, MODE_SERVER};
use crate::nts::session::{is_nak, AuthError, Sent, Session};

/// Requests of the initial burst, 2 s apart (like ntpd's and chrony's `iburst`): enough
/// samples for the filter within seconds of boot.
pub const BURST: u32 = 4;
/// The interval inside a burst and the first retry of an unanswered server.
pub const BURST_INTERVAL: Duration = Duration::from_secs(2);
/// The poll exponent after the burst: 2^6 = 64 s (RFC 5905 §7.2 MINPOLL).
pub const MIN_POLL: u8 = 6;
/// The largest poll exponent: 2^10 = 1024 s (RFC 5905 §7.2 MAXPOLL is 17; ntpd and chrony
/// default to 10).
pub const MAX_POLL: u8 = 10;
/// Offsets beyond this are stepped on the first correction, smaller ones slewed: 128 ms, the
/// step threshold of ntpd (RFC 5905 §11.3 STEPT) and of chrony's usual `makestep 0.128 ...`.
pub const STEP_THRESHOLD: Duration = Duration::from_millis(128);
/// A server whose own distance to its reference is larger is not used (ntpd's `maxdist`).
pub const MAX_SERVER_ERROR: Duration = Duration::from_millis(1500);
/// The kernel PLL takes at most ±0.5 s per offset update (kernel `MAXPHASE`).
const MAX_SLEW_NS: i64 = 500_000_000;
/// Replies in a row that echo the request but fail NTS authentication before the keys are
/// thrown away and exchanged again (one could be forged; a run of them means the keys or the
/// server changed).
pub const MAX_BAD_AUTH: u32 = 3;
/// The [`Output::Rekey`] reason after [`MAX_BAD_AUTH`] failed replies.
pub const REKEY_AUTH_FAILED: &str = "replies fail NTS authentication";

/// What the engine is configured with.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// The servers, each polled on its own schedule.
    pub servers: Vec<SocketAddr>,
    /// Emit [`Output::Step`] and [`Output::Slew`]. Without it the engine only measures; it
    /// then calls itself synced when the selected offset is within [`STEP_THRESHOLD`].
    pub adjust_clock: bool,
}

/// Something that happened.
#[derive(Debug)]
pub enum Input<'a> {
    /// [`NtpClient::poll_at`] has passed.
    Timer,
    /// A datagram arrived.
    Packet {
        /// Its source.
        from: SocketAddr,
        /// The UDP payload.
        bytes: &'a [u8],
    },
}

/// What the caller must do.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Output {
    /// Send this request.
    Send {
        /// The server.
        to: SocketAddr,
        /// The NTP header, and for an NTS server its extension fields.
        packet: Vec<u8>,
    },
    /// This NTS server needs new keys and cookies (RFC 8915 §5.7): it sends nothing until
    /// [`NtpClient::set_session`] gives them.
    Rekey {
        /// The server.
        server: SocketAddr,
        /// Why.
        why: &'static str,
    },
    /// Add `offset_ns` to the clock at once (the first correction of a large error).
    Step {
        /// Nanoseconds to add.
        offset_ns: i64,
    },
    /// Hand `offset_ns` to the kernel's PLL (`adjtimex` `ADJ_OFFSET`), mark the clock
    /// synchronised and set its error bounds.
    Slew {
        /// Nanoseconds to slew (within ±0.5 s).
        offset_ns: i64,
        /// The kernel's `maxerror`: the selected server's root distance, microseconds.
        max_error_us: i64,
        /// The kernel's `esterror`: the server's jitter, microseconds.
        est_error_us: i64,
        /// The PLL time constant (follows the poll interval, as ntpd does).
        time_constant: i64,
    },
}

/// Why the clock is not synced.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Unsynced {
    /// No server to ask.
    NoServers,
    /// No usable answer yet, and some servers have not finished their first burst.
    Waiting,
    /// No server answered a usable reply.
    Unreachable,
    /// Servers answered but no majority agrees.
    Falsetickers,
    /// Every server sent a DENY or RSTR kiss-o'-death.
    Denied,
    /// The clock was stepped; waiting for a sample to confirm it.
    Stepped,
    /// Measuring only, and the clock is off by more than [`STEP_THRESHOLD`].
    Offset,
}

impl Unsynced {
    /// How `TimeStatus` words it.
    pub fn as_str(self) -> &'static str {
        match self {
            Unsynced::NoServers => "no servers",
            Unsynced::Waiting => "waiting for replies",
            Unsynced::Unreachable => "unreachable",
            Unsynced::Falsetickers => "rejected as falsetickers: no majority of servers agrees",
            Unsynced::Denied => "denied by every server (kiss-o'-death)",
            Unsynced::Stepped => "clock stepped, confirming",
            Unsynced::Offset => "clock off by more than the step threshold",
        }
    }
}

/// What the engine knows, for the status resource.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Report {
    /// The clock is synced (or, measuring only, right within the step threshold).
    pub synced: bool,
    /// Why not, when not.
    pub reason: Option<Unsynced>,
    /// The selected server.
    pub selected: Option<SocketAddr>,
    /// The selected server's replies are authenticated with NTS.
    pub selected_nts: bool,
    /// Its offset (server minus local) at the last update.
    pub offset_ns: i64,
    /// Its round trip.
    pub delay_ns: i64,
    /// Its stratum.
    pub stratum: u8,
    /// The wall time (after correction) of the last clock update.
    pub last_sync: Option<NtpTime>,
    /// Servers rejected by the last selection.
    pub falsetickers: Vec<SocketAddr>,
    /// Clock steps so far.
    pub steps: u32,
}

#[derive(Clone, Copy, Debug)]
struct Pending {
    cookie: u64,
    /// The local wall time when the request went out (T1).
    sent: NtpTime,
    /// The NTS request's identity.
    nts: Option<Sent>,
}

/// An NTS server's keys and how its replies have fared.
#[derive(Clone, Debug, Default)]
struct Nts {
    /// `None` while waiting for a key exchange.
    session: Option<Session>,
    /// Replies in a row that failed authentication.
    bad_auth: u32,
}

#[derive(Clone, Debug)]
struct Server {
    addr: SocketAddr,
    next_at: Option<Instant>,
    pending: Option<Pending>,
    /// Requests sent since the last valid reply.
    unanswered: u32,
    /// Requests sent in total (the burst is the first [`BURST`]).
    sent: u32,
    poll: u8,
    filter: SampleFilter,
    /// DENY or RSTR: never asked again (RFC 5905 §7.4).
    denied: bool,
    /// Ever answered validly.
    answered: bool,
    /// Authenticated with NTS: nothing is sent without keys, nothing taken unauthenticated.
    nts: Option<Nts>,
}

impl Server {
    fn new(addr: SocketAddr, now: Instant) -> Self {
        Self {
            addr,
            next_at: Some(now),
            pending: None,
            unanswered: 0,
            sent: 0,
            poll: MIN_POLL,
            filter: SampleFilter::default(),
            denied: false,
            answered: false,
            nts: None,
        }
    }

    /// Drop the NTS keys and ask for new ones.
    fn rekey(&mut self, why: &'static str, out: &mut Vec<Output>) {
        if let Some(n) = &mut self.nts {
            n.session = None;
            n.bad_auth = 0;
            self.pending = None;
            self.next_at = None;
            out.push(Output::Rekey { server: self.addr, why });
        }
    }

    fn in_burst(&self) -> bool {
        self.filter.len() < BURST as usize && self.sent < BURST
    }

    /// The wait before the next request: the burst interval while filling the filter, a
    /// doubling backoff from 2 s while unanswered, then the poll interval.
    fn interval(&self) -> Duration {
        let poll = Duration::from_secs(1 << self.poll);
        if self.in_burst() {
            return BURST_INTERVAL;
        }
        if self.unanswered > 0 {
            let backoff = BURST_INTERVAL * (1u32 << self.unanswered.min(10));
            return backoff.min(Duration::from_secs(1 << MAX_POLL));
        }
        poll
    }
}

/// The NTP client.
#[derive(Clone, Debug)]
pub struct NtpClient {
    adjust: bool,
    servers: Vec<Server>,
    rng: u64,
    next_seq: u64,
    /// The sample the clock was last corrected from.
    used_seq: Option<u64>,
    /// The first correction has happened (only it may step).
    corrected: bool,
    report: Report,
}

impl NtpClient {
    /// A client that sends its first requests at the first [`Input::Timer`] (due at `now`).
    pub fn new(config: ClientConfig, now: Instant, rng_seed: u64) -> Self {
        let mut servers: Vec<Server> = Vec::new();
        for addr in config.servers {
            if !servers.iter().any(|s| s.addr == addr) {
                servers.push(Server::new(addr, now));
            }
        }
        let reason = if servers.is_empty() { Unsynced::NoServers } else { Unsynced::Waiting };
        Self {
            adjust: config.adjust_clock,
            servers,
            rng: rng_seed ^ 0x9e37_79b9_7f4a_7c15,
            next_seq: 0,
            used_seq: None,
            corrected: false,
            report: Report { reason: Some(reason), ..Report::default() },
        }
    }

    /// The servers, in order.
    pub fn servers(&self) -> impl Iterator<Item = SocketAddr> + '_ {
        self.servers.iter().map(|s| s.addr)
    }

    /// Follow a new server list: servers still listed keep their samples and schedule, new
    /// ones start with a burst, others are dropped. Those in `nts` authenticate with NTS and
    /// send nothing until [`NtpClient::set_session`] gives them keys.
    pub fn set_servers(&mut self, servers: &[SocketAddr], nts: &[SocketAddr], now: Instant) {
        let mut next: Vec<Server> = Vec::with_capacity(servers.len());
        for addr in servers {
            if next.iter().any(|s| s.addr == *addr) {
                continue;
            }
            let wants_nts = nts.contains(addr);
            let kept = self.servers.iter().position(|s| s.addr == *addr);
            let mut s = match kept {
                Some(i) if self.servers.get(i).is_some_and(|s| s.nts.is_some() == wants_nts) => {
                    self.servers.swap_remove(i)
                }
                _ => Server::new(*addr, now),
            };
            if wants_nts && s.nts.is_none() {
                s.nts = Some(Nts::default());
                s.next_at = None;
            }
            next.push(s);
        }
        self.servers = next;
        if self.report.selected.is_some_and(|a| !self.servers.iter().any(|s| s.addr == a)) {
            self.report.selected = None;
            self.report.selected_nts = false;
            self.unsync(Unsynced::Waiting);
        }
        self.update_reason();
    }

    /// Give an NTS server new keys and cookies; it polls at once if it was waiting for them.
    /// False when `addr` is not an NTS server of this engine.
    pub fn set_session(&mut self, addr: SocketAddr, session: Session, now: Instant) -> bool {
        let Some(s) = self.servers.iter_mut().find(|s| s.addr == addr) else { return false };
        let Some(n) = &mut s.nts else { return false };
        n.session = Some(session);
        n.bad_auth = 0;
        if s.next_at.is_none() && !s.denied {
            s.next_at = Some(now);
        }
        true
    }

    /// The state for `TimeStatus`.
    pub fn report(&self) -> &Report {
        &self.report
    }

    /// When the engine wants an [`Input::Timer`].
    pub fn poll_at(&self) -> Option<Instant> {
        self.servers.iter().filter_map(|s| s.next_at).min()
    }

    /// Feed one input at monotonic time `now` and local wall time `wall`; what to do, in order.
    pub fn handle(&mut self, now: Instant, wall: NtpTime, input: Input<'_>) -> Vec<Output> {
        let mut out = Vec::new();
        match input {
            Input::Timer => self.on_timer(now, wall, &mut out),
            Input::Packet { from, bytes } => {
                if let Err(why) = self.on_packet(now, wall, from, bytes, &mut out) {
                    log::debug!(target: "ntp", "{from}: reply dropped: {why}");
                }
            }
        }
        out
    }

    fn random(&mut self) -> u64 {
        // xorshift64*: the cookie only has to be unpredictable off-path, not cryptographic.
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn on_timer(&mut self, now: Instant, wall: NtpTime, out: &mut Vec<Output>) {
        for i in 0..self.servers.len() {
            let due = self.servers.get(i).and_then(|s| s.next_at).is_some_and(|at| at <= now);
            if !due {
                continue;
            }
            let cookie = self.random().max(1);
            let Some(s) = self.servers.get_mut(i) else { continue };
            if s.pending.take().is_some() {
                s.unanswered = s.unanswered.saturating_add(1);
            }
            let header = Header::request(cookie);
            let (packet, nts) = match &mut s.nts {
                None => (header.to_vec(), None),
                Some(n) => match n.session.as_mut().and_then(|k| k.request(&header)) {
                    Some((packet, sent)) => (packet, Some(sent)),
                    None => {
                        // Every cookie spent (each unanswered request costs one).
                        s.rekey("out of NTS cookies", out);
                        continue;
                    }
                },
            };
            s.pending = Some(Pending { cookie, sent: wall, nts });
            s.sent = s.sent.saturating_add(1);
            out.push(Output::Send { to: s.addr, packet });
            s.next_at = Some(now + s.interval());
        }
        self.update_reason();
    }

    fn on_packet(
        &mut self,
        now: Instant,
        wall: NtpTime,
        from: SocketAddr,
        bytes: &[u8],
        out: &mut Vec<Output>,
    ) -> Result<(), &'static str> {
        let seq = self.next_seq;
        let s = self.servers.iter_mut().find(|s| s.addr == from).ok_or("not a server of ours")?;
        let pending = s.pending.ok_or("no request outstanding")?;
        let h = Header::parse(bytes).ok_or("shorter than an NTP header")?;
        // The origin check comes first: anything else (a kiss-o'-death included) from a
        // sender that cannot echo our random cookie is forged or stale (RFC 5905 §8).
        if h.origin.0 != pending.cookie {
            return Err("origin timestamp does not match the request");
        }
        if h.mode != MODE_SERVER {
            return Err("not a server-mode reply");
        }
        if !(1..=4).contains(&h.version) {
            return Err("unknown NTP version");
        }
        if let Some(n) = &mut s.nts {
            let sent = pending.nts.ok_or("no NTS request outstanding")?;
            // A NAK is unauthenticated by nature (the server lost the key); it must carry the
            // request's unique identifier, which only an on-path party has seen.
            if is_nak(bytes, &sent) {
                s.rekey("server refused the NTS cookie (NTSN)", out);
                return Ok(());
            }
            let session = n.session.as_mut().ok_or("no NTS keys")?;
            if let Err(e) = session.verify(bytes, &sent) {
                n.bad_auth += 1;
                if n.bad_auth >= MAX_BAD_AUTH {
                    s.rekey(REKEY_AUTH_FAILED, out);
                }
                return Err(auth_error(e));
            }
            n.bad_auth = 0;
        }
        s.pending = None;
        if h.stratum == 0 {
            return on_kiss(s, now, &h);
        }
        if h.leap == LEAP_UNSYNC || h.stratum >= 16 {
            return Err("server is unsynchronised");
        }
        if h.transmit.0 == 0 || h.receive.0 == 0 || h.reference.0 == 0 {
            return Err("zero timestamp");
        }
        let server_error = short_to_ns(h.root_delay) / 2 + short_to_ns(h.root_dispersion);
        if server_error > MAX_SERVER_ERROR.as_nanos() as i64 {
            return Err("server's root distance too large");
        }
        // RFC 5905 §8: offset = ((T2 - T1) + (T3 - T4)) / 2, delay = (T4 - T1) - (T3 - T2).
        let (t1, t2, t3, t4) = (pending.sent, h.receive, h.transmit, wall);
        let offset = (i128::from(t2.diff_ns(t1)) + i128::from(t3.diff_ns(t4))) / 2;
        let delay = t4.diff_ns(t1).saturating_sub(t3.diff_ns(t2));
        if delay < -1_000_000 {
            return Err("negative round trip");
        }
        let offset = i64::try_from(offset).map_err(|_| "offset out of range")?;
        s.unanswered = 0;
        s.answered = true;
        s.filter.push(Sample {
            offset_ns: offset,
            delay_ns: delay.max(0),
            server_error_ns: server_error,
            stratum: h.stratum,
            seq,
        });
        self.next_seq = seq + 1;
        self.update(now, wall, out);
        Ok(())
    }

    /// Select and, with a new sample from the selected server, correct the clock.
    fn update(&mut self, now: Instant, wall: NtpTime, out: &mut Vec<Output>) {
        let candidates: Vec<Candidate> = self
            .servers
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.denied)
            .filter_map(|(index, s)| s.filter.best().map(|b| Candidate { index, sample: *b }))
            .collect();
        let usable = self.servers.iter().filter(|s| !s.denied).count();
        // Until a majority of the servers has answered, wait for the others' bursts to end:
        // the first reply alone could be the liar.
        let bursting =
            self.servers.iter().any(|s| !s.denied && s.in_burst() && s.filter.is_empty());
        if candidates.len() * 2 <= usable && bursting {
            self.update_reason();
            return;
        }
        let (peer, falsetickers) = match select::select(&candidates) {
            Selection::Selected { peer, falsetickers } => (peer, falsetickers),
            Selection::NoMajority => {
                self.unsync(Unsynced::Falsetickers);
                self.report.falsetickers = candidates
                    .iter()
                    .filter_map(|c| self.servers.get(c.index))
                    .map(|s| s.addr)
                    .collect();
                return;
            }
            Selection::Empty => {
                self.update_reason();
                return;
            }
        };
        self.report.falsetickers =
            falsetickers.iter().filter_map(|i| self.servers.get(*i)).map(|s| s.addr).collect();
        let Some(server) = self.servers.get(peer) else { return };
        let Some(best) = server.filter.best().copied() else { return };
        if self.used_seq == Some(best.seq) {
            return;
        }
        self.used_seq = Some(best.seq);
        let jitter = server.filter.jitter_ns();
        let poll = server.poll;
        self.report.selected = Some(server.addr);
        self.report.selected_nts = server.nts.is_some();
        self.report.offset_ns = best.offset_ns;
        self.report.delay_ns = best.delay_ns;
        self.report.stratum = best.stratum;
        let large = best.offset_ns.unsigned_abs() > STEP_THRESHOLD.as_nanos() as u64;
        if !self.adjust {
            if large {
                self.unsync(Unsynced::Offset);
            } else {
                self.synced(wall);
            }
        } else if large && !self.corrected {
            out.push(Output::Step { offset_ns: best.offset_ns });
            self.corrected = true;
            self.report.steps = self.report.steps.saturating_add(1);
            // Every sample and outstanding T1 was taken on the old timescale: start over with
            // a fresh burst, at once, so the step is confirmed within a round trip.
            for s in &mut self.servers {
                s.filter.clear();
                s.pending = None;
                s.sent = 0;
                if !s.denied {
                    s.next_at = Some(now);
                }
            }
            self.unsync(Unsynced::Stepped);
        } else {
            self.corrected = true;
            out.push(Output::Slew {
                offset_ns: best.offset_ns.clamp(-MAX_SLEW_NS, MAX_SLEW_NS),
                max_error_us: best.root_distance_ns() / 1000,
                est_error_us: jitter / 1000,
                time_constant: i64::from(poll.saturating_sub(4)),
            });
            self.synced(wall.add_ns(best.offset_ns));
            if let Some(s) = self.servers.get_mut(peer) {
                if !s.in_burst() {
                    s.poll = (s.poll + 1).min(MAX_POLL);
                }
            }
        }
    }

    fn synced(&mut self, wall: NtpTime) {
        self.report.synced = true;
        self.report.reason = None;
        self.report.last_sync = Some(wall);
    }

    fn unsync(&mut self, why: Unsynced) {
        self.report.synced = false;
        self.report.reason = Some(why);
    }

    /// The reason while nothing is selected: from what the servers did. A synced clock stays
    /// synced between updates (the kernel's maxerror ages it meanwhile).
    fn update_reason(&mut self) {
        if self.report.synced {
            return;
        }
        let live: Vec<&Server> = self.servers.iter().filter(|s| !s.denied).collect();
        let why = if self.servers.is_empty() {
            Unsynced::NoServers
        } else if live.is_empty() {
            Unsynced::Denied
        } else if self.report.reason == Some(Unsynced::Falsetickers)
            || self.report.reason == Some(Unsynced::Stepped)
            || self.report.reason == Some(Unsynced::Offset)
        {
            return;
        } else if live.iter().any(|s| s.answered || s.in_burst()) {
            Unsynced::Waiting
        } else {
            Unsynced::Unreachable
        };
        self.report.reason = Some(why);
    }
}

fn auth_error(e: AuthError) -> &'static str {
    match e {
        AuthError::UniqueId => "NTS: unique identifier missing or wrong",
        AuthError::NoAuthenticator => "NTS: no authenticator",
        AuthError::Malformed => "NTS: malformed authenticator",
        AuthError::BadTag => "NTS: authenticator does not verify",
    }
}

/// A kiss-o'-death (RFC 5905 §7.4): RATE slows down, DENY and RSTR end the association,
/// anything else is ignored.
fn on_kiss(s: &mut Server, now: Instant, h: &Header) -> Result<(), &'static str> {
    match &h.ref_id {
        b"RATE" => {
            let asked = u8::try_from(h.poll).unwrap_or(0).min(MAX_POLL);
            s.poll = (s.poll + 1).max(asked).min(MAX_POLL);
            s.sent = s.sent.max(BURST);
            s.next_at = Some(now + Duration::from_secs(1 << s.poll));
            log::info!(target: "ntp", "{}: rate limited (kiss-o'-death RATE), polling every {} s", s.addr, 1u32 << s.poll);
            Ok(())
        }
        b"DENY" | b"RSTR" => {
            s.denied = true;
            s.next_at = None;
            log::warn!(target: "ntp", "{}: refused service (kiss-o'-death {}), not asked again", s.addr, String::from_utf8_lossy(&h.ref_id));
            Ok(())
        }
        _ => Err("kiss-o'-death with an unknown code"),
    }
}
