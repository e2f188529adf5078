// SPDX-License-Identifier: Apache-2.0
//! [`Watcher`]: a non-blocking multicast socket that tells the event loop *which* kinds of
//! kernel objects changed. Events are triggers; the state comes from re-dumping.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};

use log::{debug, trace};
use netlink_sys::Socket;

use super::error::NlError;
use super::frame::frames;
use super::socket::{open, recv_datagram};

/// Multicast groups (`RTNLGRP_*`, `include/uapi/linux/rtnetlink.h`): link, IPv4/IPv6
/// addresses, IPv4/IPv6 routes, IPv4/IPv6 rules, and ND user options (the RA options the
/// kernel does not handle itself, RDNSS and DNSSL among them: [`crate::ra_dns`]).
const GROUPS: [u32; 8] = [1, 5, 9, 7, 11, 8, 19, RTNLGRP_ND_USEROPT];

/// `RTNLGRP_ND_USEROPT`.
const RTNLGRP_ND_USEROPT: u32 = 20;
/// `RTM_NEWNDUSEROPT`: one RA's user options.
const RTM_NEWNDUSEROPT: u16 = 68;
/// ND user option messages kept between two drains; more are dropped (and counted): routers
/// re-advertise, so a dropped one costs a delay, never a wrong state.
pub const MAX_PENDING_USEROPTS: usize = 16;
/// The largest ND user option message kept (an RA fits in one link MTU; 9000-byte jumbo
/// frames included).
pub const MAX_USEROPT_LEN: usize = 9216;

/// Events arrive in bursts (a link going down withdraws every route through it), so the
/// watcher gets a bigger buffer than the request socket: 4 MiB.
const WATCH_RCVBUF: usize = 4 << 20;

/// One notification, by message type. It carries no object data on purpose.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    /// `RTM_NEWLINK`: a link appeared or changed.
    LinkNew,
    /// `RTM_DELLINK`.
    LinkDel,
    /// `RTM_NEWADDR`: an address appeared or changed (lifetimes, flags).
    AddressNew,
    /// `RTM_DELADDR`.
    AddressDel,
    /// `RTM_NEWROUTE`.
    RouteNew,
    /// `RTM_DELROUTE`.
    RouteDel,
    /// `RTM_NEWRULE`.
    RuleNew,
    /// `RTM_DELRULE`.
    RuleDel,
    /// The socket overflowed (ENOBUFS): an unknown number of events was lost.
    Overrun,
}

impl Event {
    fn from_type(t: u16) -> Option<Self> {
        Some(match t {
            16 => Event::LinkNew,
            17 => Event::LinkDel,
            20 => Event::AddressNew,
            21 => Event::AddressDel,
            24 => Event::RouteNew,
            25 => Event::RouteDel,
            32 => Event::RuleNew,
            33 => Event::RuleDel,
            _ => return None,
        })
    }
}

/// What changed since the last [`Watcher::drain`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Links changed.
    pub links: bool,
    /// Addresses changed.
    pub addresses: bool,
    /// Routes changed.
    pub routes: bool,
    /// Rules changed.
    pub rules: bool,
    /// Events were lost (ENOBUFS): treat everything as changed and re-dump. The other four
    /// fields are set too.
    pub overrun: bool,
}

impl Changes {
    /// True when anything needs a re-dump.
    pub fn any(&self) -> bool {
        self.links || self.addresses || self.routes || self.rules || self.overrun
    }

    fn note(&mut self, e: Event) {
        match e {
            Event::LinkNew | Event::LinkDel => self.links = true,
            Event::AddressNew | Event::AddressDel => self.addresses = true,
            Event::RouteNew | Event::RouteDel => self.routes = true,
            Event::RuleNew | Event::RuleDel => self.rules = true,
            Event::Overrun => {
                *self = Changes {
                    links: true,
                    addresses: true,
                    routes: true,
                    rules: true,
                    overrun: true,
                }
            }
        }
    }
}

/// A non-blocking rtnetlink multicast socket for link, address, route and rule changes in the
/// network namespace of the thread that created it.
///
/// Register [`as_fd`](AsFd::as_fd) with epoll (level-triggered) and call
/// [`drain`](Watcher::drain) when it is readable.
#[derive(Debug)]
pub struct Watcher {
    sock: Socket,
    buf: Vec<u8>,
    /// `RTM_NEWNDUSEROPT` payloads (after the netlink header) read but not yet taken.
    useropts: Vec<Vec<u8>>,
    /// ND user option messages dropped since the last [`Watcher::take_useropts`].
    useropts_dropped: usize,
}

impl Watcher {
    /// Opens the socket in the calling thread's network namespace and joins the groups.
    pub fn new() -> Result<Self, NlError> {
        let op = "watch";
        let (sock, _) = open(op, netlink_sys::protocols::NETLINK_ROUTE, WATCH_RCVBUF)?;
        for g in GROUPS {
            sock.add_membership(g).map_err(|e| NlError::io(op, format!("group {g}"), e))?;
        }
        sock.set_non_blocking(true).map_err(|e| NlError::io(op, "O_NONBLOCK", e))?;
        Ok(Self {
            sock,
            buf: Vec::with_capacity(64 * 1024),
            useropts: Vec::new(),
            useropts_dropped: 0,
        })
    }

    /// The ND user option messages read by the drains since the last call (payloads after
    /// the netlink header, at most [`MAX_PENDING_USEROPTS`]), and how many were dropped.
    pub fn take_useropts(&mut self) -> (Vec<Vec<u8>>, usize) {
        (std::mem::take(&mut self.useropts), std::mem::take(&mut self.useropts_dropped))
    }

    /// Reads every pending notification without blocking and summarizes them.
    pub fn drain(&mut self) -> Result<Changes, NlError> {
        let mut c = Changes::default();
        self.drain_events(|e| c.note(e))?;
        Ok(c)
    }

    /// Reads every pending notification without blocking, calling `f` for each, in order.
    /// ENOBUFS is reported as [`Event::Overrun`] and reading goes on.
    pub fn drain_events(&mut self, mut f: impl FnMut(Event)) -> Result<(), NlError> {
        loop {
            let len = match recv_datagram(&self.sock, &mut self.buf) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.raw_os_error() == Some(nix::errno::Errno::ENOBUFS as i32) => {
                    debug!(target: "netlink", "watcher overrun (ENOBUFS): events lost");
                    f(Event::Overrun);
                    continue;
                }
                Err(e) => return Err(NlError::io("watch", "recv", e)),
            };
            for frame in frames(self.buf.get(..len).unwrap_or_default()) {
                let Ok(frame) = frame else {
                    // A malformed datagram carries nothing we could trust; the rest of it is
                    // dropped, and the caller learns the state from the next dump anyway.
                    trace!(target: "netlink", "watcher: malformed datagram");
                    break;
                };
                if frame.ty == RTM_NEWNDUSEROPT {
                    let payload = frame.payload();
                    if self.useropts.len() < MAX_PENDING_USEROPTS
                        && payload.len() <= MAX_USEROPT_LEN
                    {
                        self.useropts.push(payload.to_vec());
                    } else {
                        self.useropts_dropped += 1;
                    }
                    continue;
                }
                if let Some(e) = Event::from_type(frame.ty) {
                    trace!(target: "netlink", "watcher: {e:?}");
                    f(e);
                }
            }
        }
    }
}

impl AsFd for Watcher {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }
}

impl AsRawFd for Watcher {
    fn as_raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }
}
