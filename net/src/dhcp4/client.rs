// SPDX-License-Identifier: Apache-2.0
//! The DHCPv4 client state machine (RFC 2131 §4.4, Figure 5; messages per state in Table 5).

use std::net::Ipv4Addr;
use std::time::Instant;

use dhcproto::v4::{DhcpOption, Flags, Message, MessageType, Opcode, OptionCode};
use dhcproto::{Decodable, Encodable};

use super::lease::Lease;
use super::time::{backoff_delay, renewal_retransmit_at, renewal_times};
use crate::resource::{ClientIdentifier, DEFAULT_ROUTE_METRIC};
use base::hex::decode_hex;

/// How many REQUESTs REQUESTING and REBOOTING send before giving up (the first plus three
/// retransmissions, 4 + 8 + 16 s ≈ half a minute at the RFC 2131 §4.1 backoff).
const MAX_REQUESTS: u32 = 4;
/// After this many unanswered DISCOVERs the client reports "no offer" (and keeps trying).
const NO_OFFER_AFTER: u32 = 3;
/// Option 57: the largest message keelson accepts (RFC 2132 §9.10), a standard Ethernet MTU.
const MAX_MESSAGE_SIZE: u16 = 1500;
/// Option 51 when the server omits it in an ACK (RFC 2131 §3.1 makes it mandatory; Talos
/// uses the same 30 minute fallback, docs/talos.md: DHCPv4).
const DEFAULT_LEASE_TIME: u32 = 30 * 60;

/// What the client needs to know about its link and policy.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// The link's hardware address (`chaddr`).
    pub mac: [u8; 6],
    /// Option 61 policy (RFC 4361 / RFC 2132 §9.14).
    pub client_id: ClientIdentifier,
    /// The node's hostname: sent as option 12 when set; otherwise option 12 is requested.
    pub hostname: Option<String>,
    /// The route metric for the lease's routes (default [`DEFAULT_ROUTE_METRIC`]).
    pub route_metric: u32,
    /// Never ask for (or take) a hostname (`skipHostnameRequest`).
    pub skip_hostname_request: bool,
    /// A persisted lease: the client starts in INIT-REBOOT with it (RFC 2131 §3.2).
    pub previous_lease: Option<Lease>,
}

impl ClientConfig {
    /// A config with the given MAC, `0x01`+MAC client identifier and default metric.
    pub fn new(mac: [u8; 6]) -> Self {
        Self {
            mac,
            client_id: ClientIdentifier::Mac,
            hostname: None,
            route_metric: DEFAULT_ROUTE_METRIC,
            skip_hostname_request: false,
            previous_lease: None,
        }
    }
}

/// The RFC 2131 Figure 5 states, plus `Stopped` after [`Input::Shutdown`] and `LinkDown`
/// while the link has no carrier.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Dhcp4State {
    /// About to broadcast a DISCOVER.
    Init,
    /// DISCOVER sent, waiting for an OFFER.
    Selecting,
    /// REQUEST for an offer sent, waiting for the ACK.
    Requesting,
    /// Lease held, waiting for T1.
    Bound,
    /// Past T1: unicast REQUESTs to the leasing server.
    Renewing,
    /// Past T2: broadcast REQUESTs to any server.
    Rebinding,
    /// About to broadcast a REQUEST for a previously held address.
    InitReboot,
    /// REQUEST for a previous address sent, waiting for ACK or NAK.
    Rebooting,
    /// The link is down; the lease (if any) is kept until it expires.
    LinkDown,
    /// Shut down; the engine does nothing more.
    Stopped,
}

/// Something that happened to the client.
#[derive(Debug)]
pub enum Input<'a> {
    /// [`Dhcp4Client::poll_at`] has passed.
    Timer,
    /// A received DHCP payload (the UDP body). Anything malformed or not for us is ignored.
    Packet(&'a [u8]),
    /// The link lost its carrier.
    LinkDown,
    /// The link came back: INIT-REBOOT with the last lease (RFC 2131 §3.2).
    LinkUp,
    /// Orderly shutdown; `release` sends a DHCPRELEASE (RFC 2131 §4.4.6).
    Shutdown {
        /// Give the address back to the server.
        release: bool,
    },
}

/// Where a packet goes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Destination {
    /// `255.255.255.255:67` from `0.0.0.0:68` over the packet socket.
    Broadcast,
    /// `server:67` from the leased address over UDP.
    Unicast(Ipv4Addr),
}

/// What the event loop must do.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Output {
    /// Send this DHCP payload.
    Send {
        /// The encoded DHCP message.
        packet: Vec<u8>,
        /// Where to.
        to: Destination,
    },
    /// A new or renewed lease: apply it (a renewal with the same address updates lifetimes in
    /// place).
    Bound(Lease),
    /// The lease is gone (expiry, NAK or release): remove its address and routes.
    Expired,
    /// Why no lease is coming, for `NetworkStatus` and the operator status.
    Status(&'static str),
}

/// A sans-IO DHCPv4 client: the caller passes time and packets in and does the I/O.
#[derive(Clone, Debug)]
pub struct Dhcp4Client {
    config: ClientConfig,
    state: Dhcp4State,
    rng: u64,
    xid: u32,
    /// The next timer; `None` when nothing is scheduled.
    deadline: Option<Instant>,
    /// Transmissions of the current message so far.
    attempt: u32,
    /// When the current exchange started: the `secs` field and the lease start.
    started_at: Instant,
    /// The offer chosen in SELECTING.
    offer: Option<(Ipv4Addr, Ipv4Addr)>,
    /// The lease in use (BOUND, RENEWING, REBINDING, and across link flaps).
    lease: Option<Lease>,
    /// An address to ask for again in INIT-REBOOT, or as a hint in DISCOVER.
    previous: Option<Lease>,
}

impl Dhcp4Client {
    /// A client that starts at `now`: INIT-REBOOT when `config.previous_lease` is set,
    /// otherwise INIT. The first packet goes out at the first [`Input::Timer`].
    pub fn new(mut config: ClientConfig, now: Instant, rng_seed: u64) -> Self {
        let previous = config.previous_lease.take();
        let state = if previous.is_some() { Dhcp4State::InitReboot } else { Dhcp4State::Init };
        Self {
            config,
            state,
            // Mixed so that small seeds (0, 1, a link index) do not give related xid streams.
            rng: rng_seed ^ 0x9e37_79b9_7f4a_7c15,
            xid: 0,
            deadline: Some(now),
            attempt: 0,
            started_at: now,
            offer: None,
            lease: None,
            previous,
        }
    }

    /// The current RFC 2131 state.
    pub fn state(&self) -> Dhcp4State {
        self.state
    }

    /// The lease in use, if any.
    pub fn lease(&self) -> Option<&Lease> {
        self.lease.as_ref()
    }

    /// The route metric from the config, for [`super::lease_to_specs`].
    pub fn route_metric(&self) -> u32 {
        self.config.route_metric
    }

    /// When the engine wants an [`Input::Timer`].
    pub fn poll_at(&self) -> Option<Instant> {
        self.deadline
    }

    /// Feed one input; returns what to do, in order.
    pub fn handle(&mut self, now: Instant, input: Input<'_>) -> Vec<Output> {
        let mut out = Vec::new();
        if self.state == Dhcp4State::Stopped {
            return out;
        }
        match input {
            Input::Timer => self.on_timer(now, &mut out),
            Input::Packet(bytes) => self.on_packet(now, bytes, &mut out),
            Input::LinkDown => {
                // Keep the lease: RFC 2131 §3.2 lets the client reuse it after a flap, and
                // removing the address would break traffic that survives a short flap.
                if let Some(lease) = &self.lease {
                    self.previous = Some(lease.clone());
                }
                self.state = Dhcp4State::LinkDown;
                self.offer = None;
                self.deadline = self.lease.as_ref().and_then(Lease::expires_at);
            }
            Input::LinkUp => {
                if self.state == Dhcp4State::LinkDown {
                    self.state = if self.previous.is_some() {
                        Dhcp4State::InitReboot
                    } else {
                        Dhcp4State::Init
                    };
                    self.deadline = Some(now);
                }
            }
            Input::Shutdown { release } => {
                if let (true, Some(lease)) = (release, self.lease.take()) {
                    self.new_exchange(now);
                    let mut msg = self.request_base(MessageType::Release, now, lease.address);
                    msg.opts_mut().insert(DhcpOption::ServerIdentifier(lease.server_id));
                    self.push_send(&mut out, &msg, Destination::Unicast(lease.server_id));
                    out.push(Output::Expired);
                }
                self.state = Dhcp4State::Stopped;
                self.deadline = None;
            }
        }
        out
    }

    // -----------------------------------------------------------------------------------
    // Timers

    fn on_timer(&mut self, now: Instant, out: &mut Vec<Output>) {
        if self.deadline.is_none_or(|d| now < d) {
            return; // a spurious or early wake-up
        }
        // Expiry comes first in every state that holds a lease (RFC 2131 §4.4.5: at expiry
        // the client "MUST immediately stop any other network processing", and it restarts).
        if self.lease.as_ref().and_then(Lease::expires_at).is_some_and(|end| now >= end) {
            self.lease = None;
            self.previous = None;
            out.push(Output::Expired);
            out.push(Output::Status("lease expired"));
            if self.state == Dhcp4State::LinkDown {
                self.deadline = None;
                return;
            }
            self.state = Dhcp4State::Init;
        }
        match self.state {
            Dhcp4State::Init => self.send_discover(now, out),
            Dhcp4State::Selecting => {
                self.attempt += 1;
                if self.attempt == NO_OFFER_AFTER {
                    out.push(Output::Status("no offer"));
                }
                self.send_discover_again(now, out);
            }
            Dhcp4State::Requesting | Dhcp4State::Rebooting => {
                if self.attempt + 1 >= MAX_REQUESTS {
                    out.push(Output::Status("no ACK"));
                    self.give_up_request(now);
                } else {
                    self.attempt += 1;
                    self.send_request(now, out);
                }
            }
            Dhcp4State::InitReboot => {
                self.new_exchange(now);
                self.state = Dhcp4State::Rebooting;
                self.send_request(now, out);
            }
            Dhcp4State::Bound | Dhcp4State::Renewing | Dhcp4State::Rebinding => {
                self.renew_or_rebind(now, out)
            }
            Dhcp4State::LinkDown | Dhcp4State::Stopped => self.deadline = None,
        }
    }

    /// REQUESTING/REBOOTING got no answer: back to INIT, or (after a link flap with a lease
    /// still valid) back to BOUND, which RFC 2131 §3.2 allows ("MAY choose to use the
    /// previously allocated network address ... for the remainder of the unexpired lease").
    fn give_up_request(&mut self, now: Instant) {
        self.offer = None;
        if self.state == Dhcp4State::Rebooting && self.lease.is_some() {
            self.state = Dhcp4State::Bound;
            self.deadline = Some(now);
            return;
        }
        self.state = Dhcp4State::Init;
        self.deadline = Some(now);
    }

    fn renew_or_rebind(&mut self, now: Instant, out: &mut Vec<Output>) {
        let Some(lease) = self.lease.clone() else {
            self.state = Dhcp4State::Init;
            self.deadline = Some(now);
            return;
        };
        let (Some(t1), Some(t2), Some(end)) = (lease.t1_at(), lease.t2_at(), lease.expires_at())
        else {
            self.deadline = None; // an infinite lease never renews
            return;
        };
        if now < t1 {
            self.state = Dhcp4State::Bound;
            self.deadline = Some(t1);
            return;
        }
        let (state, deadline) =
            if now < t2 { (Dhcp4State::Renewing, t2) } else { (Dhcp4State::Rebinding, end) };
        if state != self.state {
            // Each phase is a new exchange with its own xid (RFC 2131 §4.4.5).
            self.new_exchange(now);
            self.state = state;
        } else {
            self.attempt += 1;
        }
        self.send_request(now, out);
        self.deadline = Some(renewal_retransmit_at(now, deadline));
    }

    // -----------------------------------------------------------------------------------
    // Packets

    fn on_packet(&mut self, now: Instant, bytes: &[u8], out: &mut Vec<Output>) {
        let msg = match super::wire::decode(bytes) {
            Ok(msg) => msg,
            Err(err) => {
                log::debug!("dhcp4: ignoring a packet of {} bytes: {err}", bytes.len());
                return;
            }
        };
        if msg.opcode() != Opcode::BootReply {
            log::debug!("dhcp4: ignoring a BOOTREQUEST");
            return;
        }
        if msg.xid() != self.xid {
            log::debug!("dhcp4: ignoring xid {:#010x}, expecting {:#010x}", msg.xid(), self.xid);
            return;
        }
        if msg.chaddr().get(..6) != Some(&self.config.mac[..]) {
            log::debug!("dhcp4: ignoring a reply for another chaddr");
            return;
        }
        let server_id = match msg.opts().get(OptionCode::ServerIdentifier) {
            Some(DhcpOption::ServerIdentifier(ip)) => Some(*ip),
            _ => None,
        };
        match (self.state, msg.opts().msg_type()) {
            (Dhcp4State::Selecting, Some(MessageType::Offer)) => {
                let Some(server) = server_id else {
                    log::debug!("dhcp4: ignoring an OFFER without server identifier");
                    return;
                };
                if msg.yiaddr().is_unspecified() || msg.yiaddr().is_broadcast() {
                    log::debug!("dhcp4: ignoring an OFFER of {}", msg.yiaddr());
                    return;
                }
                // RFC 2131 §4.4.1: REQUEST with the same xid, broadcast, options 50 and 54.
                self.offer = Some((msg.yiaddr(), server));
                self.state = Dhcp4State::Requesting;
                self.attempt = 0;
                self.send_request(now, out);
            }
            (
                Dhcp4State::Requesting
                | Dhcp4State::Rebooting
                | Dhcp4State::Renewing
                | Dhcp4State::Rebinding,
                Some(MessageType::Ack),
            ) => self.on_ack(&msg, server_id, out),
            (
                Dhcp4State::Requesting
                | Dhcp4State::Rebooting
                | Dhcp4State::Renewing
                | Dhcp4State::Rebinding,
                Some(MessageType::Nak),
            ) => self.on_nak(now, server_id, out),
            (state, kind) => {
                log::debug!("dhcp4: ignoring {kind:?} in state {state:?}");
            }
        }
    }

    /// The server we are talking to, when the state has one: NAKs and ACKs from others are
    /// not ours. REBOOTING and REBINDING broadcast to any server, so any may answer.
    fn expected_server(&self) -> Option<Ipv4Addr> {
        match self.state {
            Dhcp4State::Requesting => self.offer.map(|(_, server)| server),
            Dhcp4State::Renewing => self.lease.as_ref().map(|l| l.server_id),
            _ => None,
        }
    }

    fn on_ack(&mut self, msg: &Message, server_id: Option<Ipv4Addr>, out: &mut Vec<Output>) {
        if let (Some(expected), Some(got)) = (self.expected_server(), server_id) {
            if expected != got {
                log::debug!("dhcp4: ignoring an ACK from {got}, expecting {expected}");
                return;
            }
        }
        let Some(server) = server_id
            .or_else(|| self.expected_server())
            .or_else(|| self.lease.as_ref().or(self.previous.as_ref()).map(|l| l.server_id))
        else {
            log::debug!("dhcp4: ignoring an ACK without server identifier");
            return;
        };
        let address = msg.yiaddr();
        if address.is_unspecified() || address.is_broadcast() {
            // A renewal to 0.0.0.0 has been seen in the wild: never accept that.
            log::debug!("dhcp4: ignoring an ACK for {address}");
            return;
        }
        if let Some((offered, _)) = self.offer.filter(|_| self.state == Dhcp4State::Requesting) {
            if offered != address {
                log::debug!("dhcp4: ignoring an ACK for {address}, requested {offered}");
                return;
            }
        }
        let lease = self.lease_from_ack(msg, server, address);
        if self.lease.as_ref().is_some_and(|old| old.address != lease.address) {
            // A different address replaces the old one: remove it first.
            out.push(Output::Expired);
        }
        self.state = Dhcp4State::Bound;
        self.offer = None;
        self.attempt = 0;
        self.deadline = lease.t1_at();
        self.previous = Some(lease.clone());
        self.lease = Some(lease.clone());
        out.push(Output::Bound(lease));
    }

    fn on_nak(&mut self, now: Instant, server_id: Option<Ipv4Addr>, out: &mut Vec<Output>) {
        if let Some(expected) = self.expected_server() {
            if server_id != Some(expected) {
                log::debug!("dhcp4: ignoring a NAK from {server_id:?}, expecting {expected}");
                return;
            }
        }
        // RFC 2131 §4.4.3/§3.2: on DHCPNAK the client restarts in INIT and must not keep
        // using (or hint at) the refused address.
        if self.lease.take().is_some() {
            out.push(Output::Expired);
        }
        self.previous = None;
        self.offer = None;
        out.push(Output::Status("NAK"));
        self.state = Dhcp4State::Init;
        self.deadline = Some(now);
    }

    fn lease_from_ack(&self, msg: &Message, server_id: Ipv4Addr, address: Ipv4Addr) -> Lease {
        let mut lease = Lease {
            address,
            prefix_len: 32,
            server_id,
            routers: Vec::new(),
            classless_routes: Vec::new(),
            dns: Vec::new(),
            domain: None,
            search: Vec::new(),
            ntp: Vec::new(),
            hostname: None,
            mtu: None,
            broadcast: None,
            lease_time: DEFAULT_LEASE_TIME,
            t1: 0,
            t2: 0,
            acquired_at: Some(self.started_at),
        };
        let (mut t1, mut t2) = (None, None);
        for (_, opt) in msg.opts().iter() {
            match opt {
                DhcpOption::SubnetMask(mask) => {
                    let bits = u32::from(*mask);
                    // Only a contiguous mask is a prefix; anything else keeps /32, and the
                    // on-link gateway route of lease_to_specs keeps routing working.
                    if bits.leading_ones() + bits.trailing_zeros() == 32 {
                        lease.prefix_len = bits.leading_ones() as u8;
                    }
                }
                DhcpOption::Router(r) => lease.routers.clone_from(r),
                DhcpOption::ClasslessStaticRoute(r) => lease.classless_routes.clone_from(r),
                DhcpOption::DomainNameServer(d) => lease.dns.clone_from(d),
                DhcpOption::DomainName(d) => {
                    let d = d.trim_matches('\0').trim_end_matches('.');
                    lease.domain = (!d.is_empty()).then(|| d.to_owned());
                }
                DhcpOption::DomainSearch(names) => {
                    lease.search = names
                        .iter()
                        .map(|n| n.to_string().trim_end_matches('.').to_owned())
                        .filter(|n| !n.is_empty())
                        .collect();
                }
                DhcpOption::NtpServers(n) => lease.ntp.clone_from(n),
                // Only a hostname we asked for (docs/talos.md: DHCPv4: never send and accept at
                // once).
                DhcpOption::Hostname(h)
                    if self.config.hostname.is_none() && !self.config.skip_hostname_request =>
                {
                    lease.hostname = Some(h.clone());
                }
                DhcpOption::InterfaceMtu(m) => lease.mtu = Some(*m),
                DhcpOption::BroadcastAddr(b) => lease.broadcast = Some(*b),
                DhcpOption::AddressLeaseTime(t) => lease.lease_time = *t,
                DhcpOption::Renewal(t) => t1 = Some(*t),
                DhcpOption::Rebinding(t) => t2 = Some(*t),
                _ => {}
            }
        }
        (lease.t1, lease.t2) = renewal_times(lease.lease_time, t1, t2);
        lease
    }

    // -----------------------------------------------------------------------------------
    // Sending

    fn next_random(&mut self) -> u64 {
        // splitmix64: tiny, good enough for xids and jitter, and deterministic under test.
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn new_exchange(&mut self, now: Instant) {
        self.xid = self.next_random() as u32;
        self.attempt = 0;
        self.started_at = now;
    }

    fn backoff(&mut self, now: Instant) -> Instant {
        let jitter = self.next_random() % 2001;
        now + backoff_delay(self.attempt, jitter)
    }

    fn send_discover(&mut self, now: Instant, out: &mut Vec<Output>) {
        self.new_exchange(now);
        self.offer = None;
        self.state = Dhcp4State::Selecting;
        self.send_discover_again(now, out);
    }

    fn send_discover_again(&mut self, now: Instant, out: &mut Vec<Output>) {
        let mut msg = self.request_base(MessageType::Discover, now, Ipv4Addr::UNSPECIFIED);
        // RFC 2131 §4.4.1: the client MAY suggest its last address in a DISCOVER.
        if let Some(prev) = &self.previous {
            msg.opts_mut().insert(DhcpOption::RequestedIpAddress(prev.address));
        }
        self.add_parameters(&mut msg);
        self.push_send(out, &msg, Destination::Broadcast);
        self.deadline = Some(self.backoff(now));
    }

    /// The REQUEST of the current state, per RFC 2131 Table 5 (§4.3.2/§4.4.5).
    fn send_request(&mut self, now: Instant, out: &mut Vec<Output>) {
        let (ciaddr, requested, server, to) = match self.state {
            Dhcp4State::Requesting => match self.offer {
                Some((ip, server)) => {
                    (Ipv4Addr::UNSPECIFIED, Some(ip), Some(server), Destination::Broadcast)
                }
                None => return,
            },
            Dhcp4State::Rebooting => match &self.previous {
                Some(prev) => {
                    (Ipv4Addr::UNSPECIFIED, Some(prev.address), None, Destination::Broadcast)
                }
                None => return,
            },
            Dhcp4State::Renewing => match &self.lease {
                Some(l) => (l.address, None, None, Destination::Unicast(l.server_id)),
                None => return,
            },
            Dhcp4State::Rebinding => match &self.lease {
                Some(l) => (l.address, None, None, Destination::Broadcast),
                None => return,
            },
            _ => return,
        };
        let mut msg = self.request_base(MessageType::Request, now, ciaddr);
        if let Some(ip) = requested {
            msg.opts_mut().insert(DhcpOption::RequestedIpAddress(ip));
        }
        if let Some(server) = server {
            msg.opts_mut().insert(DhcpOption::ServerIdentifier(server));
        }
        self.add_parameters(&mut msg);
        self.push_send(out, &msg, to);
        if matches!(self.state, Dhcp4State::Requesting | Dhcp4State::Rebooting) {
            self.deadline = Some(self.backoff(now));
        }
    }

    /// The fixed header and options every client message carries.
    fn request_base(&self, kind: MessageType, now: Instant, ciaddr: Ipv4Addr) -> Message {
        let mut msg = blank_message();
        msg.set_opcode(Opcode::BootRequest)
            .set_xid(self.xid)
            .set_chaddr(&self.config.mac)
            .set_ciaddr(ciaddr)
            // Broadcast flag off: the packet socket receives replies to our MAC (docs/talos.md:
            // DHCPv4).
            .set_flags(Flags::default())
            .set_secs(
                u16::try_from(now.saturating_duration_since(self.started_at).as_secs())
                    .unwrap_or(u16::MAX),
            );
        msg.opts_mut().insert(DhcpOption::MessageType(kind));
        if let Some(id) = self.client_id_bytes() {
            msg.opts_mut().insert(DhcpOption::ClientIdentifier(id));
        }
        msg
    }

    fn add_parameters(&self, msg: &mut Message) {
        let mut prl: Vec<u8> = vec![1, 3, 6];
        match &self.config.hostname {
            Some(name) => {
                msg.opts_mut().insert(DhcpOption::Hostname(name.clone()));
            }
            None if self.config.skip_hostname_request => {}
            None => prl.push(12),
        }
        prl.extend([15, 26, 28, 42, 51, 54, 58, 59, 119, 121]);
        msg.opts_mut().insert(DhcpOption::ParameterRequestList(
            prl.into_iter().map(OptionCode::from).collect(),
        ));
        msg.opts_mut().insert(DhcpOption::MaxMessageSize(MAX_MESSAGE_SIZE));
    }

    /// Option 61: `0x01` + MAC (RFC 2132 §9.14), raw DUID bytes (RFC 4361 builds them), or
    /// nothing.
    fn client_id_bytes(&self) -> Option<Vec<u8>> {
        match &self.config.client_id {
            ClientIdentifier::None => None,
            ClientIdentifier::Mac => {
                let mut id = vec![1];
                id.extend_from_slice(&self.config.mac);
                Some(id)
            }
            ClientIdentifier::Duid(hex) => decode_hex(hex),
        }
    }

    fn push_send(&self, out: &mut Vec<Output>, msg: &Message, to: Destination) {
        match msg.to_vec() {
            Ok(packet) => out.push(Output::Send { packet, to }),
            // Our own messages always encode; if one ever does not, say so and let the
            // retransmission timer try again rather than abort PID 1.
            Err(err) => log::warn!("dhcp4: cannot encode a client message: {err}"),
        }
    }
}

/// An empty BOOTREQUEST. Decoded from bytes rather than `Message::default()`/`new*()`, which
/// draw a random xid from the OS and so block early in boot until the kernel's entropy pool
/// is ready (seconds under QEMU); the client has its own xid.
fn blank_message() -> Message {
    let mut bytes = [0u8; 241];
    bytes[..3].copy_from_slice(&[1, 1, 6]); // BOOTREQUEST, Ethernet, 6-byte hardware address
    bytes[236..240].copy_from_slice(&[99, 130, 83, 99]); // the magic cookie
    bytes[240] = 255; // end of options
    Message::from_bytes(&bytes).unwrap_or_default()
}
