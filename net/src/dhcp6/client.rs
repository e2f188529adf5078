// SPDX-License-Identifier: Apache-2.0
//! The DHCPv6 client state machine for one IA_NA (RFC 8415 §18.2: SOLICIT, ADVERTISE,
//! REQUEST, REPLY, RENEW, REBIND, RELEASE; §15 retransmission).

use std::net::Ipv6Addr;
use std::time::{Duration, Instant};

use dhcproto::v6::{
    DhcpOption, IAAddr, Message, MessageType, NtpSuboption, OptionCode, Status, UnknownOption,
    IANA, ORO,
};
use dhcproto::{Decodable, Encodable};

use super::duid::{iaid_from_mac, DuidConfig};
use super::fqdn::decode_fqdn;
use super::lease::Lease6;
use super::time::{next_rt, renewal_times, Retransmission, REBIND, RENEW, REQUEST, SOLICIT};
use super::wire;

mod send;

/// After this many unanswered SOLICITs the client reports "no advertise" (and keeps trying).
const NO_ADVERTISE_AFTER: u32 = 3;
/// RFC 8415 §21.24: SOL_MAX_RT values outside 60..=86400 are ignored.
const SOL_MAX_RT_RANGE: std::ops::RangeInclusive<u32> = 60..=86400;

/// What the client needs to know about its link and policy.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// The link's hardware address (DUID-LL/LLT and the default IAID).
    pub mac: [u8; 6],
    /// The DUID policy (default DUID-LL).
    pub duid: DuidConfig,
    /// The IAID; `None` derives it from the MAC.
    pub iaid: Option<u32>,
    /// The node's hostname: sent in option 39; otherwise the server's FQDN is accepted.
    pub hostname: Option<String>,
    /// Ask for Rapid Commit in SOLICIT (RFC 8415 §18.2.1).
    pub rapid_commit: bool,
}

impl ClientConfig {
    /// A config with the given MAC, DUID-LL, the MAC-derived IAID and Rapid Commit.
    pub fn new(mac: [u8; 6]) -> Self {
        Self { mac, duid: DuidConfig::LinkLayer, iaid: None, hostname: None, rapid_commit: true }
    }
}

/// The client states (RFC 8415 §18.2), plus the waits around them.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Dhcp6State {
    /// The link-local address is not usable yet (tentative): nothing may be sent.
    WaitingLinkLocal,
    /// SOLICIT sent, collecting ADVERTISEs (or a Rapid Commit REPLY).
    Soliciting,
    /// REQUEST sent to the chosen server, waiting for its REPLY.
    Requesting,
    /// Lease held, waiting for T1.
    Bound,
    /// Past T1: RENEW to the server that gave the lease.
    Renewing,
    /// Past T2 (or after a link flap): REBIND to any server.
    Rebinding,
    /// The link is down; the lease (if any) is kept until it expires.
    LinkDown,
    /// Shut down; the engine does nothing more.
    Stopped,
}

/// Something that happened to the client.
#[derive(Debug)]
pub enum Input<'a> {
    /// [`Dhcp6Client::poll_at`] has passed.
    Timer,
    /// A received UDP payload from port 547. Anything malformed or not for us is ignored.
    Packet(&'a [u8]),
    /// The link has carrier again; the client waits for [`Input::LinkLocalReady`].
    LinkUp,
    /// The link-local address is no longer tentative: packets can be sent from it.
    LinkLocalReady,
    /// The link lost its carrier.
    LinkDown,
    /// Orderly shutdown; `release` sends a RELEASE (RFC 8415 §18.2.7).
    Shutdown {
        /// Give the address back to the server.
        release: bool,
    },
}

/// What the event loop must do.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Output {
    /// Send this payload to `ff02::1:2` port 547 from the link-local address, port 546.
    Send {
        /// The encoded DHCPv6 message.
        payload: Vec<u8>,
    },
    /// A new or renewed lease: apply it (the same address only changes lifetimes).
    Bound(Lease6),
    /// The lease is gone (valid lifetime over, withdrawn, or released): remove the address.
    Expired,
    /// Why no lease is coming, for `NetworkStatus` and the operator status.
    Status(&'static str),
}

/// The best ADVERTISE seen in the current SOLICIT exchange.
#[derive(Clone, Debug)]
struct Advert {
    preference: u8,
    server_id: Vec<u8>,
    address: Ipv6Addr,
}

/// What a REPLY or ADVERTISE says about our IA_NA.
enum IaOutcome {
    /// A usable address with its lease.
    Lease(Lease6),
    /// Status NoAddrsAvail.
    NoAddrs,
    /// Status NoBinding (RENEW/REBIND for an IA the server does not know).
    NoBinding,
    /// Status NotOnLink, or our address came back with a valid lifetime of 0.
    Withdrawn,
    /// Nothing usable; already logged.
    Ignore,
}

/// A sans-IO DHCPv6 client: the caller passes time and packets in and does the I/O.
#[derive(Clone, Debug)]
pub struct Dhcp6Client {
    config: ClientConfig,
    duid: Vec<u8>,
    iaid: u32,
    state: Dhcp6State,
    rng: u64,
    /// The 24-bit transaction id of the current exchange.
    xid: u32,
    /// The next timer; `None` when nothing is scheduled.
    deadline: Option<Instant>,
    /// Transmissions of the current message so far.
    attempt: u32,
    /// The current retransmission time (RFC 8415 §15 RT).
    rt: Option<Duration>,
    /// When the current exchange started: elapsed time and the lease start.
    started_at: Instant,
    /// SOL_MAX_RT, possibly lowered or raised by the server (RFC 8415 §21.24).
    sol_max_rt: Duration,
    advert: Option<Advert>,
    /// The server and address of the REQUEST in flight.
    requested: Option<Advert>,
    /// The lease in use (BOUND, RENEWING, REBINDING, and across link flaps).
    lease: Option<Lease6>,
    /// NoAddrsAvail already reported in this exchange (one line, not one per packet).
    reported_no_addrs: bool,
}

impl Dhcp6Client {
    /// A client created at `now`. It sends nothing until [`Input::LinkLocalReady`].
    pub fn new(config: ClientConfig, now: Instant, rng_seed: u64) -> Self {
        let duid = config.duid.build(&config.mac);
        let iaid = config.iaid.unwrap_or_else(|| iaid_from_mac(&config.mac));
        Self {
            config,
            duid,
            iaid,
            state: Dhcp6State::WaitingLinkLocal,
            // Mixed so that small seeds (0, 1, a link index) do not give related xid streams.
            rng: rng_seed ^ 0x2545_f491_4f6c_dd1d,
            xid: 0,
            deadline: None,
            attempt: 0,
            rt: None,
            started_at: now,
            sol_max_rt: SOLICIT.max_rt.unwrap_or(Duration::from_secs(3600)),
            advert: None,
            requested: None,
            lease: None,
            reported_no_addrs: false,
        }
    }

    /// The current state.
    pub fn state(&self) -> Dhcp6State {
        self.state
    }

    /// The lease in use, if any.
    pub fn lease(&self) -> Option<&Lease6> {
        self.lease.as_ref()
    }

    /// The client's DUID as sent in option 1.
    pub fn duid(&self) -> &[u8] {
        &self.duid
    }

    /// The IAID of the IA_NA.
    pub fn iaid(&self) -> u32 {
        self.iaid
    }

    /// When the engine wants an [`Input::Timer`].
    pub fn poll_at(&self) -> Option<Instant> {
        self.deadline
    }

    /// Feed one input; returns what to do, in order.
    pub fn handle(&mut self, now: Instant, input: Input<'_>) -> Vec<Output> {
        let mut out = Vec::new();
        if self.state == Dhcp6State::Stopped {
            return out;
        }
        match input {
            Input::Timer => self.on_timer(now, &mut out),
            Input::Packet(bytes) => self.on_packet(now, bytes, &mut out),
            Input::LinkUp => {
                if self.state == Dhcp6State::LinkDown {
                    self.state = Dhcp6State::WaitingLinkLocal;
                }
            }
            Input::LinkLocalReady => {
                if self.state == Dhcp6State::WaitingLinkLocal {
                    self.start(now, &mut out);
                }
            }
            Input::LinkDown => {
                // Keep the lease: removing the address would break traffic that survives a
                // short flap; the expiry timer still runs.
                self.state = Dhcp6State::LinkDown;
                self.advert = None;
                self.requested = None;
                self.deadline = self.lease.as_ref().and_then(Lease6::expires_at);
            }
            Input::Shutdown { release } => {
                if let (true, Some(lease)) = (release, self.lease.take()) {
                    self.new_exchange(now);
                    if let Some(mut msg) = self.message(MessageType::Release, now) {
                        msg.opts_mut().insert(DhcpOption::ServerId(lease.server_id.clone()));
                        msg.opts_mut().insert(self.ia_na(Some(lease.address)));
                        // One RELEASE: REL_MAX_RC retransmissions would outlive the shutdown.
                        self.push_send(&mut out, &msg);
                    }
                    out.push(Output::Expired);
                }
                self.state = Dhcp6State::Stopped;
                self.deadline = None;
            }
        }
        out
    }

    /// The link-local address is ready: REBIND a lease we still hold (we may be on another
    /// link after a flap, and any server may confirm it, RFC 8415 §18.2.12), else SOLICIT.
    fn start(&mut self, now: Instant, out: &mut Vec<Output>) {
        let valid = self.lease.as_ref().is_some_and(|l| l.expires_at().is_none_or(|end| now < end));
        if valid {
            self.begin(now, Dhcp6State::Rebinding, out);
        } else {
            self.expire(out);
            self.begin(now, Dhcp6State::Soliciting, out);
        }
    }

    // -----------------------------------------------------------------------------------
    // Timers

    fn on_timer(&mut self, now: Instant, out: &mut Vec<Output>) {
        if self.deadline.is_none_or(|d| now < d) {
            return; // a spurious or early wake-up
        }
        // Expiry first in every state that holds a lease: the address must go at the end of
        // its valid lifetime (RFC 8415 §18.2.5), whatever else is in flight.
        if self.lease.as_ref().and_then(Lease6::expires_at).is_some_and(|end| now >= end) {
            self.expire(out);
            out.push(Output::Status("lease expired"));
            if matches!(self.state, Dhcp6State::LinkDown | Dhcp6State::WaitingLinkLocal) {
                self.deadline = None;
                return;
            }
            self.begin(now, Dhcp6State::Soliciting, out);
            return;
        }
        match self.state {
            Dhcp6State::Soliciting => {
                // The first RT is over: take the best ADVERTISE collected (RFC 8415 §18.2.1).
                if let Some(advert) = self.advert.take() {
                    self.request(now, advert, out);
                    return;
                }
                if self.attempt == NO_ADVERTISE_AFTER {
                    out.push(Output::Status("no advertise"));
                }
                self.transmit(now, out);
            }
            Dhcp6State::Requesting => {
                if REQUEST.max_count.is_some_and(|mrc| self.attempt >= mrc) {
                    out.push(Output::Status("no reply"));
                    self.requested = None;
                    self.resume(now, out);
                } else {
                    self.transmit(now, out);
                }
            }
            Dhcp6State::Bound | Dhcp6State::Renewing | Dhcp6State::Rebinding => {
                self.renew_or_rebind(now, out)
            }
            Dhcp6State::WaitingLinkLocal | Dhcp6State::LinkDown | Dhcp6State::Stopped => {
                self.deadline = None
            }
        }
    }

    /// A REQUEST exchange ended without a lease: back to the lease's timeline if one is still
    /// valid (a NoBinding REQUEST), otherwise a new SOLICIT.
    fn resume(&mut self, now: Instant, out: &mut Vec<Output>) {
        if self.lease.is_some() {
            self.state = Dhcp6State::Bound;
            self.renew_or_rebind(now, out);
        } else {
            self.begin(now, Dhcp6State::Soliciting, out);
        }
    }

    fn renew_or_rebind(&mut self, now: Instant, out: &mut Vec<Output>) {
        let Some(lease) = &self.lease else {
            self.begin(now, Dhcp6State::Soliciting, out);
            return;
        };
        if self.state == Dhcp6State::Rebinding {
            // REBIND runs until a REPLY or the expiry (RFC 8415 §18.2.5 MRD), also when a
            // link flap started it before T1: a RENEW goes to the same multicast group.
            self.transmit(now, out);
            return;
        }
        let (t1, t2) = (lease.t1_at(), lease.t2_at());
        if t1.is_none_or(|t1| now < t1) {
            self.state = Dhcp6State::Bound;
            self.deadline = t1.or_else(|| lease.expires_at());
            return;
        }
        let phase =
            if t2.is_none_or(|t2| now < t2) { Dhcp6State::Renewing } else { Dhcp6State::Rebinding };
        if phase == self.state {
            self.transmit(now, out);
        } else {
            // Each phase is a new exchange with its own transaction id (RFC 8415 §18.2.4/5).
            self.begin(now, phase, out);
        }
    }

    // -----------------------------------------------------------------------------------
    // Packets

    fn on_packet(&mut self, now: Instant, bytes: &[u8], out: &mut Vec<Output>) {
        let msg = match wire::decode(bytes) {
            Ok(msg) => msg,
            Err(err) => {
                log::debug!("dhcp6: ignoring a packet of {} bytes: {err}", bytes.len());
                return;
            }
        };
        let kind = msg.msg_type();
        if msg.xid_num() != self.xid {
            log::debug!(
                "dhcp6: ignoring {kind:?} with xid {:#08x}, expecting {:#08x}",
                msg.xid_num(),
                self.xid
            );
            return;
        }
        match msg.opts().get(OptionCode::ClientId) {
            Some(DhcpOption::ClientId(id)) if *id == self.duid => {}
            _ => {
                log::debug!("dhcp6: ignoring {kind:?} without our client id");
                return;
            }
        }
        let Some(DhcpOption::ServerId(server_id)) = msg.opts().get(OptionCode::ServerId) else {
            log::debug!("dhcp6: ignoring {kind:?} without server id");
            return;
        };
        if server_id.is_empty() {
            log::debug!("dhcp6: ignoring {kind:?} with an empty server id");
            return;
        }
        let server_id = server_id.clone();
        self.learn_sol_max_rt(&msg);
        match (self.state, kind) {
            (Dhcp6State::Soliciting, MessageType::Advertise) => {
                self.on_advertise(now, &msg, server_id, out)
            }
            (Dhcp6State::Soliciting, MessageType::Reply) => {
                // Only a Rapid Commit REPLY answers a SOLICIT (RFC 8415 §18.2.1).
                if !self.config.rapid_commit || msg.opts().get(OptionCode::RapidCommit).is_none() {
                    log::debug!("dhcp6: ignoring a REPLY to SOLICIT without Rapid Commit");
                    return;
                }
                self.on_reply(now, &msg, server_id, out);
            }
            (
                Dhcp6State::Requesting | Dhcp6State::Renewing | Dhcp6State::Rebinding,
                MessageType::Reply,
            ) => self.on_reply(now, &msg, server_id, out),
            (state, kind) => log::debug!("dhcp6: ignoring {kind:?} in state {state:?}"),
        }
    }

    fn on_advertise(
        &mut self,
        now: Instant,
        msg: &Message,
        server_id: Vec<u8>,
        out: &mut Vec<Output>,
    ) {
        if let Some(status) = top_status(msg) {
            if status != Status::Success {
                log::debug!("dhcp6: ignoring an ADVERTISE with status {status:?}");
                self.report_no_addrs(status, out);
                return;
            }
        }
        let address = match self.ia_outcome(msg, &server_id, now) {
            IaOutcome::Lease(lease) => lease.address,
            IaOutcome::NoAddrs => {
                // RFC 8415 §18.2.9: an ADVERTISE without addresses is ignored.
                self.report_no_addrs(Status::NoAddrsAvail, out);
                return;
            }
            _ => {
                log::debug!("dhcp6: ignoring an ADVERTISE without a usable address");
                return;
            }
        };
        let preference = match msg.opts().get(OptionCode::Preference) {
            Some(DhcpOption::Preference(p)) => *p,
            _ => 0,
        };
        let advert = Advert { preference, server_id, address };
        // 255 is "take me now", and after the first RT the first ADVERTISE ends the wait
        // (RFC 8415 §18.2.1); before that, keep the most preferred (the first among equals).
        if preference == u8::MAX || self.attempt > 1 {
            self.request(now, advert, out);
        } else if self.advert.as_ref().is_none_or(|best| preference > best.preference) {
            self.advert = Some(advert);
        }
    }

    fn on_reply(&mut self, now: Instant, msg: &Message, server_id: Vec<u8>, out: &mut Vec<Output>) {
        let expected = match self.state {
            Dhcp6State::Requesting => self.requested.as_ref().map(|r| r.server_id.as_slice()),
            Dhcp6State::Renewing => self.lease.as_ref().map(|l| l.server_id.as_slice()),
            _ => None,
        };
        if expected.is_some_and(|id| id != server_id.as_slice()) {
            log::debug!("dhcp6: ignoring a REPLY from a server we did not ask");
            return;
        }
        match top_status(msg) {
            // A top-level NoAddrsAvail is read with the IA below.
            None | Some(Status::Success | Status::NoAddrsAvail) => {}
            Some(Status::NotOnLink) if self.state == Dhcp6State::Requesting => {
                // RFC 8415 §18.2.10.1: the addresses are not valid on this link; start over.
                out.push(Output::Status("NotOnLink"));
                self.expire(out);
                self.solicit_later(now);
                return;
            }
            Some(status) => {
                // UnspecFail, UseMulticast (we always multicast) and the rest: keep
                // retransmitting; the timers already run.
                if status == Status::UnspecFail {
                    out.push(Output::Status("UnspecFail"));
                }
                log::debug!("dhcp6: REPLY with status {status:?}; retransmitting");
                return;
            }
        }
        match self.ia_outcome(msg, &server_id, now) {
            IaOutcome::Lease(lease) => self.bind(lease, out),
            IaOutcome::NoAddrs => {
                self.report_no_addrs(Status::NoAddrsAvail, out);
                // SOLICIT keeps its schedule and RENEW/REBIND keep the lease until it
                // expires (RFC 8415 §18.2.10.1); a refused REQUEST waits a little before
                // trying again, so a server that always refuses gets no packet storm.
                if self.state == Dhcp6State::Requesting {
                    self.requested = None;
                    match self.lease.as_ref().and_then(Lease6::expires_at) {
                        Some(end) => {
                            self.state = Dhcp6State::Bound;
                            self.deadline = Some((now + RENEW.initial).min(end));
                        }
                        None if self.lease.is_some() => {
                            self.state = Dhcp6State::Bound;
                            self.deadline = Some(now + RENEW.initial);
                        }
                        None => self.solicit_later(now),
                    }
                }
            }
            IaOutcome::NoBinding => {
                if matches!(self.state, Dhcp6State::Renewing | Dhcp6State::Rebinding) {
                    // RFC 8415 §18.2.10.1: reinstate the IA with a REQUEST to that server.
                    let address = self.lease.as_ref().map_or(Ipv6Addr::UNSPECIFIED, |l| l.address);
                    self.request(now, Advert { preference: 0, server_id, address }, out);
                } else {
                    log::debug!("dhcp6: ignoring NoBinding in state {:?}", self.state);
                }
            }
            IaOutcome::Withdrawn => {
                out.push(Output::Status("address withdrawn"));
                self.expire(out);
                self.solicit_later(now);
            }
            IaOutcome::Ignore => {}
        }
    }

    fn bind(&mut self, lease: Lease6, out: &mut Vec<Output>) {
        if self.lease.as_ref().is_some_and(|old| old.address != lease.address) {
            // A different address replaces the old one: remove it first.
            out.push(Output::Expired);
        }
        self.state = Dhcp6State::Bound;
        self.advert = None;
        self.requested = None;
        self.attempt = 0;
        self.rt = None;
        self.deadline = lease.t1_at().or_else(|| lease.expires_at());
        self.lease = Some(lease.clone());
        out.push(Output::Bound(lease));
    }

    /// Read our IA_NA out of an ADVERTISE or REPLY (RFC 8415 §18.2.10.1, §21.4, §21.6).
    fn ia_outcome(&self, msg: &Message, server_id: &[u8], now: Instant) -> IaOutcome {
        let ours = msg.opts().iter().find_map(|o| match o {
            DhcpOption::IANA(ia) if ia.id == self.iaid => Some(ia),
            _ => None,
        });
        let Some(ia) = ours else {
            // NoAddrsAvail may also come as a top-level status with no IA at all.
            if top_status(msg) == Some(Status::NoAddrsAvail) {
                return IaOutcome::NoAddrs;
            }
            log::debug!("dhcp6: no IA_NA with IAID {:#x}", self.iaid);
            return IaOutcome::Ignore;
        };
        match ia_status(ia) {
            None | Some(Status::Success) => {}
            Some(Status::NoAddrsAvail) => return IaOutcome::NoAddrs,
            Some(Status::NoBinding) => return IaOutcome::NoBinding,
            Some(Status::NotOnLink) => return IaOutcome::Withdrawn,
            Some(other) => {
                log::debug!("dhcp6: ignoring IA_NA status {other:?}");
                return IaOutcome::Ignore;
            }
        }
        if ia.t1 > ia.t2 && ia.t2 > 0 {
            log::debug!("dhcp6: ignoring IA_NA with T1 {} > T2 {}", ia.t1, ia.t2);
            return IaOutcome::Ignore;
        }
        let current = self.lease.as_ref().map(|l| l.address);
        let mut usable: Vec<&IAAddr> = Vec::new();
        let mut withdrawn = false;
        for opt in ia.opts.iter() {
            let DhcpOption::IAAddr(a) = opt else { continue };
            if a.preferred_life > a.valid_life {
                log::debug!("dhcp6: ignoring {} with preferred > valid lifetime", a.addr);
            } else if a.valid_life == 0 {
                withdrawn |= Some(a.addr) == current;
            } else if a.addr.is_unspecified() || a.addr.is_multicast() || a.addr.is_loopback() {
                log::debug!("dhcp6: ignoring IA address {}", a.addr);
            } else if iaaddr_status(a).is_none_or(|s| s == Status::Success) {
                usable.push(a);
            }
        }
        // Keep the address we have when the server still gives it; otherwise the first.
        let chosen = usable.iter().find(|a| Some(a.addr) == current).or_else(|| usable.first());
        let Some(addr) = chosen else {
            return if withdrawn { IaOutcome::Withdrawn } else { IaOutcome::Ignore };
        };
        let (t1, t2) = renewal_times(ia.t1, ia.t2, addr.preferred_life);
        let mut lease = Lease6 {
            address: addr.addr,
            iaid: self.iaid,
            server_id: server_id.to_vec(),
            preferred_lifetime: addr.preferred_life,
            valid_lifetime: addr.valid_life,
            t1,
            t2,
            dns: Vec::new(),
            search: Vec::new(),
            ntp: Vec::new(),
            fqdn: None,
            acquired_at: Some(self.started_at.min(now)),
        };
        self.read_config(msg, &mut lease);
        IaOutcome::Lease(lease)
    }

    /// Options 23, 24, 31, 39 and 56 into the lease.
    fn read_config(&self, msg: &Message, lease: &mut Lease6) {
        let mut sntp = Vec::new();
        for opt in msg.opts().iter() {
            match opt {
                DhcpOption::DomainNameServers(d) => lease.dns.clone_from(d),
                DhcpOption::DomainSearchList(names) => {
                    lease.search = names
                        .iter()
                        .map(|n| n.to_string().trim_end_matches('.').to_owned())
                        .filter(|n| !n.is_empty())
                        .collect();
                }
                DhcpOption::NtpServer(subs) => {
                    for sub in subs {
                        let server = match sub {
                            NtpSuboption::ServerAddress(a) => a.to_string(),
                            NtpSuboption::FQDN(n) => n.to_string().trim_end_matches('.').to_owned(),
                            // A multicast group is not a server to configure.
                            NtpSuboption::MulticastAddress(_) => continue,
                        };
                        if !server.is_empty() && !lease.ntp.contains(&server) {
                            lease.ntp.push(server);
                        }
                    }
                }
                DhcpOption::Unknown(u) if u.code() == OptionCode::SntpServers => {
                    sntp.extend(u.data().chunks_exact(16).filter_map(|c| {
                        <[u8; 16]>::try_from(c).ok().map(|b| Ipv6Addr::from(b).to_string())
                    }));
                }
                DhcpOption::Unknown(u)
                    if u.code() == OptionCode::ClientFqdn && self.config.hostname.is_none() =>
                {
                    lease.fqdn = decode_fqdn(u.data());
                }
                _ => {}
            }
        }
        for server in sntp {
            if !lease.ntp.contains(&server) {
                lease.ntp.push(server);
            }
        }
    }

    fn learn_sol_max_rt(&mut self, msg: &Message) {
        if let Some(DhcpOption::Unknown(u)) = msg.opts().get(OptionCode::SolMaxRt) {
            if let Ok(b) = <[u8; 4]>::try_from(u.data()) {
                let secs = u32::from_be_bytes(b);
                if SOL_MAX_RT_RANGE.contains(&secs) {
                    self.sol_max_rt = Duration::from_secs(u64::from(secs));
                }
            }
        }
    }

    fn report_no_addrs(&mut self, status: Status, out: &mut Vec<Output>) {
        if status == Status::NoAddrsAvail && !self.reported_no_addrs {
            self.reported_no_addrs = true;
            out.push(Output::Status("NoAddrsAvail"));
        }
    }

    fn expire(&mut self, out: &mut Vec<Output>) {
        if self.lease.take().is_some() {
            out.push(Output::Expired);
        }
    }
}

fn top_status(msg: &Message) -> Option<Status> {
    match msg.opts().get(OptionCode::StatusCode) {
        Some(DhcpOption::StatusCode(s)) => Some(s.status),
        _ => None,
    }
}

fn ia_status(ia: &IANA) -> Option<Status> {
    match ia.opts.get(OptionCode::StatusCode) {
        Some(DhcpOption::StatusCode(s)) => Some(s.status),
        _ => None,
    }
}

fn iaaddr_status(a: &IAAddr) -> Option<Status> {
    match a.opts.get(OptionCode::StatusCode) {
        Some(DhcpOption::StatusCode(s)) => Some(s.status),
        _ => None,
    }
}
