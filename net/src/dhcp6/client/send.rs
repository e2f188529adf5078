// SPDX-License-Identifier: Apache-2.0
//! The sending half of [`Dhcp6Client`]: exchanges, retransmission (RFC 8415 §15) and the
//! messages of each state.

use super::*;
use crate::dhcp6::fqdn::encode_fqdn;

impl Dhcp6Client {
    pub(super) fn next_random(&mut self) -> u64 {
        // splitmix64: tiny, good enough for xids and jitter, and deterministic under test.
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub(super) fn new_exchange(&mut self, now: Instant) {
        self.xid = (self.next_random() & 0x00ff_ffff) as u32;
        self.attempt = 0;
        self.rt = None;
        self.started_at = now;
        self.reported_no_addrs = false;
    }

    /// Back to SOLICIT after a server refused us: after SOL_TIMEOUT rather than at once, so
    /// a server that refuses every time does not get a packet storm.
    pub(super) fn solicit_later(&mut self, now: Instant) {
        self.new_exchange(now);
        self.state = Dhcp6State::Soliciting;
        self.advert = None;
        self.requested = None;
        self.deadline = Some(now + SOLICIT.initial);
    }

    /// Start a new exchange in `state` and send its first message.
    pub(super) fn begin(&mut self, now: Instant, state: Dhcp6State, out: &mut Vec<Output>) {
        self.new_exchange(now);
        self.state = state;
        self.advert = None;
        self.transmit(now, out);
    }

    pub(super) fn request(&mut self, now: Instant, advert: Advert, out: &mut Vec<Output>) {
        self.advert = None;
        self.requested = Some(advert);
        self.begin(now, Dhcp6State::Requesting, out);
    }

    pub(super) fn params(&self) -> Retransmission {
        match self.state {
            Dhcp6State::Soliciting => Retransmission { max_rt: Some(self.sol_max_rt), ..SOLICIT },
            Dhcp6State::Requesting => REQUEST,
            Dhcp6State::Renewing => RENEW,
            _ => REBIND,
        }
    }

    /// Send (or resend) the message of the current state and arm the next retransmission,
    /// never past the end of the phase (MRD: T2 for RENEW, the expiry for REBIND).
    pub(super) fn transmit(&mut self, now: Instant, out: &mut Vec<Output>) {
        if self.attempt == 0 {
            // The exchange starts with its first transmission (elapsed time 0, §21.9).
            self.started_at = now;
        }
        let Some(msg) = self.state_message(now) else {
            self.deadline = None;
            return;
        };
        self.push_send(out, &msg);
        let jitter = self.next_random() % 201;
        let params = self.params();
        let rt = next_rt(&params, self.rt, jitter, self.state == Dhcp6State::Soliciting);
        self.rt = Some(rt);
        self.attempt += 1;
        let mut at = now + rt;
        let phase_end = match self.state {
            Dhcp6State::Renewing => self.lease.as_ref().and_then(Lease6::t2_at),
            Dhcp6State::Rebinding => self.lease.as_ref().and_then(Lease6::expires_at),
            _ => None,
        };
        if let Some(end) = phase_end {
            at = at.min(end.max(now));
        }
        self.deadline = Some(at);
    }

    /// The message the current state sends (RFC 8415 §18.2.1, .2, .4, .5).
    pub(super) fn state_message(&self, now: Instant) -> Option<Message> {
        let (kind, server, hint) = match self.state {
            Dhcp6State::Soliciting => (MessageType::Solicit, None, None),
            Dhcp6State::Requesting => {
                let r = self.requested.as_ref()?;
                let hint = (!r.address.is_unspecified()).then_some(r.address);
                (MessageType::Request, Some(r.server_id.clone()), hint)
            }
            Dhcp6State::Renewing => {
                let l = self.lease.as_ref()?;
                (MessageType::Renew, Some(l.server_id.clone()), Some(l.address))
            }
            Dhcp6State::Rebinding => {
                (MessageType::Rebind, None, Some(self.lease.as_ref()?.address))
            }
            _ => return None,
        };
        let mut msg = self.message(kind, now)?;
        if let Some(server) = server {
            msg.opts_mut().insert(DhcpOption::ServerId(server));
        }
        if kind == MessageType::Solicit && self.config.rapid_commit {
            msg.opts_mut().insert(DhcpOption::RapidCommit);
        }
        msg.opts_mut().insert(self.ia_na(hint));
        let mut oro = vec![
            OptionCode::DomainNameServers,
            OptionCode::DomainSearchList,
            OptionCode::SntpServers,
            OptionCode::NtpServer,
            OptionCode::SolMaxRt,
        ];
        if self.config.hostname.is_none() {
            oro.push(OptionCode::ClientFqdn);
        }
        msg.opts_mut().insert(DhcpOption::ORO(ORO { opts: oro }));
        if let Some(fqdn) = self.config.hostname.as_deref().and_then(encode_fqdn) {
            msg.opts_mut()
                .insert(DhcpOption::Unknown(UnknownOption::new(OptionCode::ClientFqdn, fqdn)));
        }
        Some(msg)
    }

    /// The header, client id and elapsed time every client message carries.
    ///
    /// The header is decoded from bytes rather than built with `Message::new*()`, which draw
    /// a random xid from the OS and so block early in boot until the kernel's entropy pool is
    /// ready; the client has its own xid. Four header bytes always decode; `None` is only a
    /// guard.
    pub(super) fn message(&self, kind: MessageType, now: Instant) -> Option<Message> {
        let [_, a, b, c] = self.xid.to_be_bytes();
        let mut msg = Message::from_bytes(&[u8::from(kind), a, b, c]).ok()?;
        msg.opts_mut().insert(DhcpOption::ClientId(self.duid.clone()));
        // RFC 8415 §21.9: hundredths of a second since the exchange began, capped.
        let centis = now.saturating_duration_since(self.started_at).as_millis() / 10;
        msg.opts_mut().insert(DhcpOption::ElapsedTime(u16::try_from(centis).unwrap_or(u16::MAX)));
        Some(msg)
    }

    /// IA_NA with T1/T2 0 (the server decides) and, when given, our address as a hint with
    /// lifetimes 0 (RFC 8415 §18.2.2, §18.2.4).
    pub(super) fn ia_na(&self, hint: Option<Ipv6Addr>) -> DhcpOption {
        let mut ia = IANA { id: self.iaid, t1: 0, t2: 0, opts: Default::default() };
        if let Some(addr) = hint {
            ia.opts.insert(DhcpOption::IAAddr(IAAddr {
                addr,
                preferred_life: 0,
                valid_life: 0,
                opts: Default::default(),
            }));
        }
        DhcpOption::IANA(ia)
    }

    pub(super) fn push_send(&self, out: &mut Vec<Output>, msg: &Message) {
        match msg.to_vec() {
            Ok(payload) => out.push(Output::Send { payload }),
            // Our own messages always encode; if one ever does not, say so and let the
            // retransmission timer try again rather than abort PID 1.
            Err(err) => log::warn!("dhcp6: cannot encode a client message: {err}"),
        }
    }
}
