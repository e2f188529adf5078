// SPDX-License-Identifier: Apache-2.0
//! One DHCP client with its sockets, DHCPv4 or DHCPv6 behind one interface, so the manager
//! treats both alike: feed an [`Input`], get [`Event`]s, send what they say.

use std::net::{IpAddr, Ipv4Addr};
use std::ops::Range;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::Instant;

use ipnet::{IpNet, Ipv6Net};

use super::dhcp4_socket::{PacketSocket, SocketError, UdpSender};
use super::dhcp6_socket::Dhcp6Socket;
use super::frame;
use crate::dhcp4::{self, Destination, Dhcp4Client, Dhcp4State};
use crate::dhcp6::{self, Dhcp6Client, Dhcp6State};
use crate::resource::LayerSpecs;

/// Something that happened to a client, for either protocol.
#[derive(Clone, Copy, Debug)]
pub enum Input<'a> {
    /// Its deadline passed.
    Timer,
    /// A received DHCP payload.
    Packet(&'a [u8]),
    /// Carrier came back.
    LinkUp,
    /// Carrier went away.
    LinkDown,
    /// The link-local address left DAD (DHCPv6 only).
    LinkLocalReady,
    /// Orderly shutdown.
    Shutdown {
        /// Give the lease back.
        release: bool,
    },
}

/// What a client asks for, for either protocol.
#[derive(Debug)]
pub enum Event {
    /// Send a DHCPv4 payload.
    Send4 {
        /// The payload.
        packet: Vec<u8>,
        /// Where to.
        to: Destination,
    },
    /// Send a DHCPv6 payload to all servers.
    Send6(Vec<u8>),
    /// A new or renewed lease.
    Bound(Lease),
    /// The lease ended.
    Expired,
    /// Why there is no lease.
    Status(&'static str),
}

/// A lease of either protocol.
#[derive(Clone, Debug)]
pub enum Lease {
    /// DHCPv4.
    V4(dhcp4::Lease),
    /// DHCPv6 (IA_NA).
    V6(dhcp6::Lease6),
}

impl Lease {
    /// The leased prefix.
    pub fn network(&self) -> IpNet {
        match self {
            Lease::V4(l) => IpNet::V4(l.network()),
            Lease::V6(l) => IpNet::V6(Ipv6Net::from(l.address)),
        }
    }

    /// The server's address, when the protocol says it (DHCPv6 identifies servers by DUID).
    pub fn server(&self) -> Option<IpAddr> {
        match self {
            Lease::V4(l) => Some(IpAddr::V4(l.server_id)),
            Lease::V6(_) => None,
        }
    }

    /// The lease time in seconds; `None` when infinite.
    pub fn seconds(&self) -> Option<u32> {
        match self {
            Lease::V4(l) => (!l.is_infinite()).then_some(l.lease_time),
            Lease::V6(l) => (l.valid_lifetime != dhcp6::INFINITY).then_some(l.valid_lifetime),
        }
    }

    /// The operator-layer specs this lease gives; none of its routes with `skip_routes`
    /// (Talos's `DHCPv4Config.ignoreRoutes`: the address, DNS and NTP still apply).
    pub fn specs(
        &self,
        link: &str,
        route_metric: u32,
        skip_routes: bool,
        now: Instant,
    ) -> LayerSpecs {
        let mut specs = match self {
            Lease::V4(l) => dhcp4::lease_to_specs(l, link, route_metric, now),
            Lease::V6(l) => dhcp6::lease_to_specs(l, link, now),
        };
        if skip_routes {
            specs.routes.clear();
        }
        specs
    }
}

/// A running client and its sockets.
#[derive(Debug)]
pub enum Engine {
    /// DHCPv4: a packet socket until bound, a UDP sender from the lease after.
    V4 {
        /// The state machine.
        client: Box<Dhcp4Client>,
        /// Frames in and broadcasts out.
        socket: PacketSocket,
        /// Unicast (and REBINDING broadcasts) from the lease.
        sender: Option<UdpSender>,
    },
    /// DHCPv6: one UDP socket on the link-local address.
    V6 {
        /// The state machine.
        client: Box<Dhcp6Client>,
        /// The socket.
        socket: Dhcp6Socket,
        /// Whether [`Input::LinkLocalReady`] was given since the last carrier change.
        link_local_ready: bool,
    },
}

impl Engine {
    /// The socket to watch.
    pub fn fd(&self) -> BorrowedFd<'_> {
        match self {
            Engine::V4 { socket, .. } => socket.as_fd(),
            Engine::V6 { socket, .. } => socket.as_fd(),
        }
    }

    /// When the client wants [`Input::Timer`].
    pub fn poll_at(&self) -> Option<Instant> {
        match self {
            Engine::V4 { client, .. } => client.poll_at(),
            Engine::V6 { client, .. } => client.poll_at(),
        }
    }

    /// The protocol state, for the operator status.
    pub fn state_name(&self) -> &'static str {
        match self {
            Engine::V4 { client, .. } => match client.state() {
                Dhcp4State::Init => "init",
                Dhcp4State::Selecting => "selecting",
                Dhcp4State::Requesting => "requesting",
                Dhcp4State::Bound => "bound",
                Dhcp4State::Renewing => "renewing",
                Dhcp4State::Rebinding => "rebinding",
                Dhcp4State::InitReboot => "init-reboot",
                Dhcp4State::Rebooting => "rebooting",
                Dhcp4State::LinkDown => "link-down",
                Dhcp4State::Stopped => "stopped",
            },
            Engine::V6 { client, .. } => match client.state() {
                Dhcp6State::WaitingLinkLocal => "waiting-link-local",
                Dhcp6State::Soliciting => "soliciting",
                Dhcp6State::Requesting => "requesting",
                Dhcp6State::Bound => "bound",
                Dhcp6State::Renewing => "renewing",
                Dhcp6State::Rebinding => "rebinding",
                Dhcp6State::LinkDown => "link-down",
                Dhcp6State::Stopped => "stopped",
            },
        }
    }

    /// Whether the client started from a saved lease.
    pub fn rebooting(&self) -> bool {
        matches!(self, Engine::V4 { client, .. } if client.state() == Dhcp4State::InitReboot)
    }

    /// The route metric for the lease's routes.
    pub fn route_metric(&self) -> u32 {
        match self {
            Engine::V4 { client, .. } => client.route_metric(),
            Engine::V6 { .. } => crate::resource::DEFAULT_ROUTE_METRIC,
        }
    }

    /// One step of the state machine (no I/O).
    pub fn handle(&mut self, now: Instant, input: Input<'_>) -> Vec<Event> {
        match self {
            Engine::V4 { client, .. } => {
                let input = match input {
                    Input::Timer => dhcp4::Input::Timer,
                    Input::Packet(p) => dhcp4::Input::Packet(p),
                    Input::LinkUp => dhcp4::Input::LinkUp,
                    Input::LinkDown => dhcp4::Input::LinkDown,
                    Input::LinkLocalReady => return Vec::new(),
                    Input::Shutdown { release } => dhcp4::Input::Shutdown { release },
                };
                client.handle(now, input).into_iter().map(from4).collect()
            }
            Engine::V6 { client, link_local_ready, .. } => {
                let input = match input {
                    Input::Timer => dhcp6::Input::Timer,
                    Input::Packet(p) => dhcp6::Input::Packet(p),
                    Input::LinkUp => {
                        *link_local_ready = false;
                        dhcp6::Input::LinkUp
                    }
                    Input::LinkDown => {
                        *link_local_ready = false;
                        dhcp6::Input::LinkDown
                    }
                    Input::LinkLocalReady => {
                        *link_local_ready = true;
                        dhcp6::Input::LinkLocalReady
                    }
                    Input::Shutdown { release } => dhcp6::Input::Shutdown { release },
                };
                client.handle(now, input).into_iter().map(from6).collect()
            }
        }
    }

    /// Whether the engine still waits for its link-local address.
    pub fn needs_link_local(&self) -> bool {
        matches!(self, Engine::V6 { link_local_ready: false, .. })
    }

    /// Send what a [`Event::Send4`]/[`Event::Send6`] says; other events are ignored.
    pub fn send(&mut self, link: &str, event: &Event) -> Result<(), SocketError> {
        match (self, event) {
            (Engine::V4 { client, socket, sender }, Event::Send4 { packet, to }) => {
                // Only a client that holds its address sends from it: RENEWING to the server,
                // REBINDING to everyone (RFC 2131 §4.1). The rest goes out from 0.0.0.0.
                let from_lease = match *to {
                    Destination::Unicast(server) => Some(server),
                    Destination::Broadcast if client.state() == Dhcp4State::Rebinding => {
                        Some(Ipv4Addr::BROADCAST)
                    }
                    Destination::Broadcast => None,
                };
                let Some(dst) = from_lease else { return socket.send_broadcast(packet) };
                let lease_addr = client.lease().map(|l| l.address);
                if sender.as_ref().map(|s| s.addr) != lease_addr {
                    *sender = match lease_addr {
                        Some(a) => Some(UdpSender::open(link, a)?),
                        None => None,
                    };
                }
                match sender {
                    Some(s) => s.send_to(dst, packet),
                    None => socket.send_broadcast(packet),
                }
            }
            (Engine::V6 { socket, .. }, Event::Send6(payload)) => socket.send(payload),
            _ => Ok(()),
        }
    }

    /// The lease ended: close the sender bound to it.
    pub fn lease_gone(&mut self) {
        if let Engine::V4 { sender, .. } = self {
            *sender = None;
        }
    }

    /// Receive one datagram into `buf` and return where its DHCP payload is; `Ok(None)` when
    /// nothing is queued, `Err(Some(reason))` for a frame to skip.
    pub fn recv(&mut self, buf: &mut [u8]) -> Result<Option<Range<usize>>, Recv> {
        match self {
            Engine::V4 { socket, .. } => {
                let Some((len, checksum_ready)) = socket.recv(buf).map_err(Recv::Socket)? else {
                    return Ok(None);
                };
                let frame = buf.get(..len).unwrap_or_default();
                let payload = frame::dhcp_payload(frame, checksum_ready)
                    .map_err(|e| Recv::Skip(format!("a {len}-byte frame: {e}")))?;
                // The payload is a subslice of the frame; find its offset.
                let start = payload.as_ptr() as usize - frame.as_ptr() as usize;
                Ok(Some(start..start + payload.len()))
            }
            Engine::V6 { socket, .. } => {
                Ok(socket.recv(buf).map_err(Recv::Socket)?.map(|n| 0..n.min(buf.len())))
            }
        }
    }
}

/// Why [`Engine::recv`] produced no payload.
#[derive(Debug)]
pub enum Recv {
    /// The socket failed.
    Socket(SocketError),
    /// A frame that is not a DHCP reply for us.
    Skip(String),
}

fn from4(o: dhcp4::Output) -> Event {
    match o {
        dhcp4::Output::Send { packet, to } => Event::Send4 { packet, to },
        dhcp4::Output::Bound(l) => Event::Bound(Lease::V4(l)),
        dhcp4::Output::Expired => Event::Expired,
        dhcp4::Output::Status(s) => Event::Status(s),
    }
}

fn from6(o: dhcp6::Output) -> Event {
    match o {
        dhcp6::Output::Send { payload } => Event::Send6(payload),
        dhcp6::Output::Bound(l) => Event::Bound(Lease::V6(l)),
        dhcp6::Output::Expired => Event::Expired,
        dhcp6::Output::Status(s) => Event::Status(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(now: Instant) -> Lease {
        Lease::V4(dhcp4::Lease {
            address: Ipv4Addr::new(10, 0, 0, 50),
            prefix_len: 24,
            server_id: Ipv4Addr::new(10, 0, 0, 1),
            routers: vec![Ipv4Addr::new(10, 0, 0, 1)],
            // A static route via a gateway outside the prefix: it also gets an on-link route.
            classless_routes: vec![
                ("0.0.0.0/0".parse().unwrap(), Ipv4Addr::new(10, 0, 0, 1)),
                ("192.168.0.0/16".parse().unwrap(), Ipv4Addr::new(10, 9, 0, 1)),
            ],
            dns: vec![Ipv4Addr::new(10, 0, 0, 53)],
            domain: None,
            search: Vec::new(),
            ntp: vec![Ipv4Addr::new(10, 0, 0, 123)],
            hostname: None,
            mtu: None,
            broadcast: None,
            lease_time: 1000,
            t1: 500,
            t2: 875,
            acquired_at: Some(now),
        })
    }

    #[test]
    fn skip_routes_drops_every_route_of_the_lease_and_nothing_else() {
        let now = Instant::now();
        let all = lease(now).specs("eth0", 1024, false, now);
        assert_eq!(all.routes.len(), 3, "{:?}", all.routes);
        let none = lease(now).specs("eth0", 1024, true, now);
        assert!(none.routes.is_empty(), "{:?}", none.routes);
        // The address (with its prefix route's metric), DNS and NTP still apply.
        assert_eq!(none.addresses, all.addresses);
        assert_eq!(none.addresses[0].priority, 1024);
        assert_eq!((none.resolvers, none.time_servers), (all.resolvers, all.time_servers));
    }
}
