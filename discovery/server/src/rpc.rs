// SPDX-License-Identifier: Apache-2.0
//! The five methods of `sidero.discovery.server.Cluster`, from a decoded request to its
//! answer, with no I/O: the network loop frames and sends what comes out.

use std::net::IpAddr;
use std::time::Instant;

use discovery::proto::{
    AffiliateDeleteRequest, AffiliateUpdateRequest, Empty, HelloRequest, HelloResponse,
    ListRequest, Message, RedirectMessage, ServerAffiliate, WatchRequest, WatchResponse,
};

use crate::registry::{Event, Registry, RegistryError, Update, WatchId};

pub use grpc::code as status;

pub const PREFIX: &str = "/sidero.discovery.server.Cluster/";

/// What a call comes to.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// One response message, then status OK.
    Unary(Vec<u8>),
    /// A Watch: the snapshot message, then the subscription's events.
    Watch(WatchId, Vec<u8>),
    /// No message, this status.
    Status(u32, String),
}

/// What a call needs besides its request.
#[derive(Debug)]
pub struct Context<'a> {
    pub client_ip: Option<IpAddr>,
    pub redirect: Option<&'a str>,
    pub now: Instant,
}

fn refused(e: RegistryError) -> Outcome {
    Outcome::Status(e.code() as u32, e.to_string())
}

fn bad_message(e: discovery::proto::ProtoError) -> Outcome {
    Outcome::Status(status::INVALID_ARGUMENT, format!("bad request message: {e}"))
}

/// Whether `path` names a method of the service (others are answered Unimplemented).
pub fn known(path: &str) -> bool {
    matches!(
        path.strip_prefix(PREFIX),
        Some("Hello" | "AffiliateUpdate" | "AffiliateDelete" | "List" | "Watch")
    )
}

/// The client's address in Go's `netip` binary form: 4 bytes for IPv4, 16 for IPv6.
pub fn ip_bytes(ip: IpAddr) -> Vec<u8> {
    match ip.to_canonical() {
        IpAddr::V4(v4) => v4.octets().to_vec(),
        IpAddr::V6(v6) => v6.octets().to_vec(),
    }
}

fn affiliate(e: &Event) -> ServerAffiliate {
    ServerAffiliate { id: e.id.clone(), data: e.data.clone(), endpoints: e.endpoints.clone() }
}

/// A Watch message for one event: the whole affiliate, or only its ID when deleted.
pub fn watch_message(e: &Event) -> Vec<u8> {
    WatchResponse { affiliates: vec![affiliate(e)], deleted: e.deleted }.encode()
}

/// Run one call.
pub fn call(path: &str, request: &[u8], reg: &mut Registry, ctx: &Context<'_>) -> Outcome {
    let method = path.strip_prefix(PREFIX).unwrap_or_default();
    match method {
        "Hello" => {
            let req = match HelloRequest::decode(request) {
                Ok(r) => r,
                Err(e) => return bad_message(e),
            };
            if let Err(e) = reg.check_cluster_id(&req.cluster_id) {
                return refused(e);
            }
            Outcome::Unary(
                HelloResponse {
                    redirect: ctx.redirect.map(|r| RedirectMessage { endpoint: r.to_owned() }),
                    client_ip: ctx.client_ip.map(ip_bytes).unwrap_or_default(),
                }
                .encode(),
            )
        }
        "AffiliateUpdate" => {
            let req = match AffiliateUpdateRequest::decode(request) {
                Ok(r) => r,
                Err(e) => return bad_message(e),
            };
            let update = Update {
                cluster: &req.cluster_id,
                affiliate: &req.affiliate_id,
                data: req.affiliate_data.as_deref().unwrap_or_default(),
                endpoints: &req.affiliate_endpoints,
                // A missing TTL is zero; a negative one is zero too.
                ttl: req.ttl.map(|d| d.to_std()).unwrap_or_default(),
            };
            // A huge TTL is refused by the registry before it is added to the clock.
            match reg.update(&update, ctx.now) {
                Ok(()) => Outcome::Unary(Empty.encode()),
                Err(e) => refused(e),
            }
        }
        "AffiliateDelete" => match AffiliateDeleteRequest::decode(request) {
            Ok(req) => match reg.delete(&req.cluster_id, &req.affiliate_id) {
                Ok(()) => Outcome::Unary(Empty.encode()),
                Err(e) => refused(e),
            },
            Err(e) => bad_message(e),
        },
        "List" => match ListRequest::decode(request) {
            Ok(req) => match reg.list(&req.cluster_id) {
                Ok(list) => Outcome::Unary(
                    WatchResponse {
                        affiliates: list.iter().map(affiliate).collect(),
                        deleted: false,
                    }
                    .encode(),
                ),
                Err(e) => refused(e),
            },
            Err(e) => bad_message(e),
        },
        "Watch" => match WatchRequest::decode(request) {
            Ok(req) => match reg.watch(&req.cluster_id) {
                Ok((id, snapshot)) => Outcome::Watch(
                    id,
                    WatchResponse {
                        affiliates: snapshot.iter().map(affiliate).collect(),
                        deleted: false,
                    }
                    .encode(),
                ),
                Err(e) => refused(e),
            },
            Err(e) => bad_message(e),
        },
        _ => Outcome::Status(status::UNIMPLEMENTED, format!("unknown method {method}")),
    }
}

/// The client address a call is accounted to: the peer's, or with `trust` the first
/// `x-real-ip`, else the first element of the first `x-forwarded-for`, when they parse.
pub fn client_ip(
    peer: IpAddr,
    real_ip: Option<&[u8]>,
    forwarded_for: Option<&[u8]>,
    trust: bool,
) -> IpAddr {
    let parse =
        |b: &[u8]| std::str::from_utf8(b).ok().and_then(|s| s.trim().parse::<IpAddr>().ok());
    if trust {
        if let Some(ip) = real_ip.and_then(parse) {
            return ip.to_canonical();
        }
        if let Some(ip) = forwarded_for.and_then(|v| v.split(|&b| b == b',').next()).and_then(parse)
        {
            return ip.to_canonical();
        }
    }
    peer.to_canonical()
}

#[cfg(test)]
mod tests {
    use super::*;
    use discovery::proto::Duration as PbDuration;

    #[test]
    fn client_address_choice() {
        let peer: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        let local = IpAddr::from([127, 0, 0, 1]);
        assert_eq!(client_ip(peer, Some(b"1.2.3.4"), None, false), local);
        assert_eq!(client_ip(peer, Some(b"1.2.3.4"), None, true), IpAddr::from([1, 2, 3, 4]));
        assert_eq!(
            client_ip(peer, Some(b"junk"), Some(b"5.6.7.8,192.168.0.0.1"), true),
            IpAddr::from([5, 6, 7, 8])
        );
        assert_eq!(client_ip(peer, None, Some(b"junk, 1.1.1.1"), true), local);
        assert_eq!(ip_bytes(peer), vec![127, 0, 0, 1]);
        assert_eq!(ip_bytes("2001:db8::1".parse().unwrap()).len(), 16);
    }

    #[test]
    fn calls() {
        let mut reg = Registry::default();
        let ctx = Context {
            client_ip: Some(IpAddr::from([127, 0, 0, 1])),
            redirect: Some("new.example.com:443"),
            now: Instant::now(),
        };
        let hello = HelloRequest { cluster_id: "c".into(), client_version: "v1".into() };
        let Outcome::Unary(r) = call(&format!("{PREFIX}Hello"), &hello.encode(), &mut reg, &ctx)
        else {
            panic!("hello failed");
        };
        let r = HelloResponse::decode(&r).unwrap();
        assert_eq!(r.client_ip, vec![127, 0, 0, 1]);
        assert_eq!(r.redirect.unwrap().endpoint, "new.example.com:443");

        let huge = AffiliateUpdateRequest {
            cluster_id: "c".into(),
            affiliate_id: "a".into(),
            ttl: Some(PbDuration { seconds: i64::MAX, nanos: 0 }),
            ..Default::default()
        };
        assert_eq!(
            call(&format!("{PREFIX}AffiliateUpdate"), &huge.encode(), &mut reg, &ctx),
            Outcome::Status(status::INVALID_ARGUMENT, "ttl is too large".into())
        );
        assert_eq!(
            call(&format!("{PREFIX}Nope"), b"", &mut reg, &ctx),
            Outcome::Status(status::UNIMPLEMENTED, "unknown method Nope".into())
        );
        assert!(!known("/other.Service/Hello"));
        assert!(known(&discovery::service::path("Watch")));
        assert!(matches!(
            call(&format!("{PREFIX}List"), b"\xff", &mut reg, &ctx),
            Outcome::Status(status::INVALID_ARGUMENT, _)
        ));
    }
}
