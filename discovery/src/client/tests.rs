// SPDX-License-Identifier: Apache-2.0
//! The engine against an in-process server built on the h2 server role.

use std::collections::HashMap;
use std::net::SocketAddr;

use super::*;
use crate::proto::{Empty, RedirectMessage, ServerAffiliate};
use crate::KubeSpan;

const KEY: [u8; 32] = [9; 32];

fn settings() -> Settings {
    Settings {
        target: Target { host: "127.0.0.1".into(), port: 3000, tls: false },
        cluster_id: "cluster".into(),
        affiliate_id: "me".into(),
        client_version: "v0.1.0".into(),
        ttl: Duration::from_secs(600),
    }
}

/// A discovery server's wire side, driven by the test.
struct Fake {
    conn: Connection,
    heads: HashMap<u32, String>,
    bodies: HashMap<u32, Vec<u8>>,
}

#[derive(Debug)]
struct Req {
    stream: u32,
    path: String,
    body: Vec<u8>,
}

impl Fake {
    fn new() -> Self {
        Self {
            conn: Connection::new(Role::Server, h2::Config::default()),
            heads: HashMap::new(),
            bodies: HashMap::new(),
        }
    }

    fn unary(&mut self, stream: u32, msg: &[u8]) {
        self.conn.send_headers(stream, &grpc::response_headers(), false).unwrap();
        self.conn.send_data(stream, &grpc::frame_message(msg), false).unwrap();
        self.conn.send_headers(stream, &grpc::trailers(&Status::new(0, "")), true).unwrap();
    }

    fn fail(&mut self, stream: u32, code: u32, msg: &str) {
        let mut h = grpc::response_headers();
        h.extend(grpc::trailers(&Status::new(code, msg)));
        self.conn.send_headers(stream, &h, true).unwrap();
    }

    fn watch_send(&mut self, stream: u32, w: &WatchResponse, first: bool) {
        if first {
            self.conn.send_headers(stream, &grpc::response_headers(), false).unwrap();
        }
        self.conn.send_data(stream, &grpc::frame_message(&w.encode()), false).unwrap();
    }
}

/// Move bytes between engine and fake until quiet; return the requests the fake got.
fn pump(e: &mut Engine, f: &mut Fake, now: Instant) -> Vec<Req> {
    let mut reqs = Vec::new();
    for _ in 0..100 {
        let out = e.take_output();
        let back = f.conn.take_output();
        if out.is_empty() && back.is_empty() {
            break;
        }
        f.conn.recv(&out).unwrap();
        while let Some(ev) = f.conn.poll_event() {
            match ev {
                h2::Event::Headers { stream, fields, .. } => {
                    let p = h2::field(&fields, ":path").unwrap();
                    f.heads.insert(stream, String::from_utf8(p.to_vec()).unwrap());
                }
                h2::Event::Data { stream, data, end_stream } => {
                    f.bodies.entry(stream).or_default().extend(data);
                    if end_stream {
                        let mut msgs = Vec::new();
                        grpc::MessageDecoder::new(1 << 20)
                            .push(&f.bodies[&stream], &mut msgs)
                            .unwrap();
                        let path = f.heads[&stream].clone();
                        reqs.push(Req { stream, path, body: msgs.remove(0) });
                    }
                }
                _ => {}
            }
        }
        if !back.is_empty() {
            e.recv(now, &back);
        }
    }
    reqs
}

fn actions(e: &mut Engine) -> Vec<Action> {
    std::iter::from_fn(|| e.poll_action()).collect()
}

fn other(c: &Cipher, id: &str, ep: &str) -> ServerAffiliate {
    let a =
        Affiliate { node_id: id.into(), hostname: format!("{id}.example"), ..Default::default() };
    ServerAffiliate {
        id: id.into(),
        data: c.seal(&a.encode()).unwrap(),
        endpoints: vec![c.seal_endpoint(&ep.parse().unwrap()).unwrap()],
    }
}

fn local() -> LocalData {
    LocalData {
        affiliate: Affiliate {
            node_id: "me".into(),
            hostname: "me.example".into(),
            kubespan: Some(KubeSpan { public_key: "pk".into(), ..Default::default() }),
            ..Default::default()
        },
        endpoints: vec!["192.0.2.1:51820".parse().unwrap()],
        others: vec![("peer".into(), vec!["198.51.100.7:51820".parse().unwrap()])],
    }
}

/// Start, connect, answer Hello: returns the engine, the fake, the watch stream and now.
fn running() -> (Engine, Fake, u32, Instant) {
    let t0 = Instant::now();
    let mut e = Engine::new(settings(), &KEY, t0, 1).unwrap();
    assert!(actions(&mut e).is_empty());
    let now = e.next_deadline().unwrap();
    // The first attempt is at once; only failures wait a backoff.
    assert_eq!(now, t0);
    e.tick(now);
    assert_eq!(actions(&mut e), vec![Action::Connect(settings().target)]);
    e.connected(now);
    let mut f = Fake::new();
    let reqs = pump(&mut e, &mut f, now);
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].path, "/sidero.discovery.server.Cluster/Hello");
    let hello = HelloRequest::decode(&reqs[0].body).unwrap();
    assert_eq!((hello.cluster_id.as_str(), hello.client_version.as_str()), ("cluster", "v0.1.0"));
    f.unary(
        reqs[0].stream,
        &HelloResponse { redirect: None, client_ip: vec![203, 0, 113, 5] }.encode(),
    );
    let reqs = pump(&mut e, &mut f, now);
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].path, "/sidero.discovery.server.Cluster/Watch");
    assert_eq!(
        actions(&mut e),
        vec![
            Action::Notify(Event::PublicIp("203.0.113.5".parse().unwrap())),
            Action::Notify(Event::Connected { endpoint: "127.0.0.1:3000".into() }),
        ]
    );
    (e, f, reqs[0].stream, now)
}

#[test]
fn hello_watch_publish_and_members() {
    let (mut e, mut f, watch, now) = running();
    let c = Cipher::new(&KEY).unwrap();
    // The snapshot: another node, ourselves (filtered), and one sealed with another key.
    let stranger = Cipher::new(&[1; 32]).unwrap();
    let snap = WatchResponse {
        affiliates: vec![
            other(&c, "a", "10.0.0.1:51820"),
            other(&c, "me", "10.0.0.9:1"),
            other(&stranger, "x", "10.0.0.3:1"),
        ],
        deleted: false,
    };
    f.watch_send(watch, &snap, true);
    pump(&mut e, &mut f, now);
    let acts = actions(&mut e);
    assert!(
        matches!(&acts[0], Action::Notify(Event::Error(m)) if m.contains("affiliate x: authentication failed"))
    );
    match &acts[1] {
        Action::Notify(Event::Members(m)) => {
            assert_eq!(m.len(), 1);
            assert_eq!(m[0].id, "a");
            assert_eq!(m[0].affiliate.hostname, "a.example");
            assert_eq!(m[0].endpoints, vec!["10.0.0.1:51820".parse::<SocketAddr>().unwrap()]);
        }
        a => panic!("{a:?}"),
    }

    // Publishing: our update, then one endpoint-only update for the peer, one at a time.
    e.command(now, Command::Publish(local()));
    let reqs = pump(&mut e, &mut f, now);
    assert_eq!(reqs.len(), 1);
    let own = AffiliateUpdateRequest::decode(&reqs[0].body).unwrap();
    assert_eq!(own.affiliate_id, "me");
    assert_eq!(own.ttl, Some(crate::proto::Duration { seconds: 600, nanos: 0 }));
    let data = Affiliate::decode(&c.open(own.affiliate_data.as_ref().unwrap()).unwrap()).unwrap();
    assert_eq!(data, local().affiliate);
    assert_eq!(own.affiliate_endpoints, vec![c.seal_endpoint(&local().endpoints[0]).unwrap()]);
    f.unary(reqs[0].stream, &Empty.encode());
    let reqs = pump(&mut e, &mut f, now);
    assert_eq!(reqs.len(), 1);
    let peer = AffiliateUpdateRequest::decode(&reqs[0].body).unwrap();
    assert_eq!((peer.affiliate_id.as_str(), peer.affiliate_data.is_none()), ("peer", true));
    assert_eq!(c.open_endpoint(&peer.affiliate_endpoints[0]).unwrap(), local().others[0].1[0]);
    f.unary(reqs[0].stream, &Empty.encode());
    assert!(pump(&mut e, &mut f, now).is_empty());

    // The same data again: nothing is sent.
    e.command(now, Command::Publish(local()));
    assert!(pump(&mut e, &mut f, now).is_empty());

    // A change of one peer; then its deletion.
    f.watch_send(
        watch,
        &WatchResponse { affiliates: vec![other(&c, "b", "[fd00::2]:51820")], deleted: false },
        false,
    );
    pump(&mut e, &mut f, now);
    assert!(matches!(&actions(&mut e)[..], [Action::Notify(Event::Members(m))] if m.len() == 2));
    let gone = ServerAffiliate { id: "a".into(), ..Default::default() };
    f.watch_send(watch, &WatchResponse { affiliates: vec![gone], deleted: true }, false);
    pump(&mut e, &mut f, now);
    assert!(
        matches!(&actions(&mut e)[..], [Action::Notify(Event::Members(m))] if m.len() == 1 && m[0].id == "b")
    );

    // Undecryptable data for a known ID keeps the stale entry.
    let mut bad = other(&c, "b", "10.0.0.1:1");
    bad.data[20] ^= 1;
    f.watch_send(watch, &WatchResponse { affiliates: vec![bad], deleted: false }, false);
    pump(&mut e, &mut f, now);
    assert!(matches!(&actions(&mut e)[..], [Action::Notify(Event::Error(_))]));

    // TTL/2 later the refresh runs again, with the same ciphertext.
    let later = now + Duration::from_secs(300);
    e.tick(later);
    let reqs = pump(&mut e, &mut f, later);
    assert_eq!(AffiliateUpdateRequest::decode(&reqs[0].body).unwrap(), own);

    // Delete while the peer update is in flight: AffiliateDelete for ourselves follows it.
    f.unary(reqs[0].stream, &Empty.encode());
    let reqs = pump(&mut e, &mut f, later);
    assert!(reqs[0].path.ends_with("/AffiliateUpdate"));
    e.command(later, Command::Delete);
    assert!(pump(&mut e, &mut f, later).is_empty());
    f.unary(reqs[0].stream, &Empty.encode());
    let reqs = pump(&mut e, &mut f, later);
    assert!(reqs[0].path.ends_with("/AffiliateDelete"));
    let del = AffiliateDeleteRequest::decode(&reqs[0].body).unwrap();
    assert_eq!((del.cluster_id.as_str(), del.affiliate_id.as_str()), ("cluster", "me"));
}

#[test]
fn redirect_replaces_the_target() {
    let t0 = Instant::now();
    let mut e = Engine::new(settings(), &KEY, t0, 2).unwrap();
    let now = e.next_deadline().unwrap();
    e.tick(now);
    actions(&mut e);
    e.connected(now);
    let mut f = Fake::new();
    let reqs = pump(&mut e, &mut f, now);
    let redirect = HelloResponse {
        redirect: Some(RedirectMessage { endpoint: "127.0.0.2:3001".into() }),
        client_ip: vec![],
    };
    f.unary(reqs[0].stream, &redirect.encode());
    pump(&mut e, &mut f, now);
    let acts = actions(&mut e);
    assert!(
        matches!(&acts[0], Action::Notify(Event::Error(m)) if m.contains("redirected to 127.0.0.2:3001"))
    );
    assert_eq!(acts[1], Action::Disconnect);
    let next = e.next_deadline().unwrap();
    e.tick(next);
    assert_eq!(
        actions(&mut e),
        vec![Action::Connect(Target { host: "127.0.0.2".into(), port: 3001, tls: false })]
    );
}

#[test]
fn failures_back_off_and_republish() {
    let (mut e, mut f, watch, now) = running();
    e.command(now, Command::Publish(local()));
    let reqs = pump(&mut e, &mut f, now);
    // The service refuses: the connection is dropped and retried after a backoff.
    f.fail(reqs[0].stream, grpc::code::RESOURCE_EXHAUSTED, "rate limit exceeds request timeout");
    pump(&mut e, &mut f, now);
    let acts = actions(&mut e);
    assert!(matches!(&acts[0], Action::Notify(Event::Error(m)) if m.contains("ResourceExhausted")));
    assert_eq!(acts[1], Action::Disconnect);
    let wait = e.next_deadline().unwrap() - now;
    assert!(wait >= Duration::from_millis(375) && wait < Duration::from_millis(1125), "{wait:?}");
    let _ = watch;

    // Reconnect: Hello, Watch, and everything is published again.
    let now = now + wait;
    e.tick(now);
    assert!(matches!(&actions(&mut e)[..], [Action::Connect(_)]));
    e.connected(now);
    let mut f = Fake::new();
    let reqs = pump(&mut e, &mut f, now);
    f.unary(reqs[0].stream, &HelloResponse::default().encode());
    let reqs = pump(&mut e, &mut f, now);
    let paths: Vec<_> =
        reqs.iter().map(|r| r.path.rsplit('/').next().unwrap().to_string()).collect();
    assert_eq!(paths, ["Watch", "AffiliateUpdate"]);

    // The watch ending (server shutdown) is a failure too.
    let watch = reqs[0].stream;
    f.conn.send_headers(watch, &grpc::response_headers(), false).unwrap();
    f.conn.send_headers(watch, &grpc::trailers(&Status::new(0, "")), true).unwrap();
    pump(&mut e, &mut f, now);
    assert!(actions(&mut e)
        .iter()
        .any(|a| matches!(a, Action::Notify(Event::Error(m)) if m.contains("watch ended"))));
}

#[test]
fn keepalive_and_hello_timeout() {
    let (mut e, mut f, _, now) = running();
    // Pings every max(10 s, TTL/10) = 60 s; an unanswered one drops the connection 20 s later.
    let t = now + Duration::from_secs(60);
    e.tick(t);
    let out = e.take_output();
    assert_eq!(out[3], 0x6, "a PING frame");
    f.conn.recv(&out).unwrap();
    e.recv(t, &f.conn.take_output());
    assert!(actions(&mut e).is_empty());
    let t = t + Duration::from_secs(60);
    e.tick(t);
    e.take_output();
    e.tick(t + Duration::from_secs(20));
    assert!(actions(&mut e)
        .iter()
        .any(|a| matches!(a, Action::Notify(Event::Error(m)) if m.contains("PING"))));

    // No Hello answer within 10 s.
    let mut e = Engine::new(settings(), &KEY, now, 3).unwrap();
    let t = e.next_deadline().unwrap();
    e.tick(t);
    e.connected(t);
    e.tick(t + Duration::from_secs(10));
    assert!(actions(&mut e)
        .iter()
        .any(|a| matches!(a, Action::Notify(Event::Error(m)) if m.contains("no Hello answer"))));
}

#[test]
fn oversized_affiliate_is_not_published() {
    let (mut e, mut f, _, now) = running();
    let mut l = local();
    l.affiliate.hostname = "h".repeat(2100);
    e.command(now, Command::Publish(l));
    assert!(pump(&mut e, &mut f, now).is_empty());
    assert!(
        matches!(&actions(&mut e)[..], [Action::Notify(Event::Error(m))] if m.contains("2048-byte limit"))
    );
}

#[test]
fn a_flood_of_unreadable_affiliates_is_said_a_few_times_then_counted() {
    let (mut e, mut f, watch, now) = running();
    let c = Cipher::new(&KEY).unwrap();
    let stranger = Cipher::new(&[1; 32]).unwrap();
    // 2,000 records sealed with another key, in each of three messages.
    let junk: Vec<ServerAffiliate> =
        (0..2000).map(|i| other(&stranger, &format!("x{i}"), "10.0.0.3:1")).collect();
    let mut snap = WatchResponse { affiliates: junk.clone(), deleted: false };
    snap.affiliates.push(other(&c, "a", "10.0.0.1:51820"));
    f.watch_send(watch, &snap, true);
    pump(&mut e, &mut f, now);
    for _ in 0..2 {
        f.watch_send(watch, &WatchResponse { affiliates: junk.clone(), deleted: false }, false);
        pump(&mut e, &mut f, now);
    }
    let errors = |acts: &[Action]| -> Vec<String> {
        acts.iter()
            .filter_map(|a| match a {
                Action::Notify(Event::Error(m)) => Some(m.clone()),
                _ => None,
            })
            .collect()
    };
    let acts = actions(&mut e);
    let said = errors(&acts);
    assert_eq!(said.len(), WARN_BURST as usize, "{said:?}");
    assert!(said[0].contains("affiliate x0: authentication failed"), "{said:?}");
    assert!(acts.iter().any(|a| matches!(a, Action::Notify(Event::Members(m)) if m.len() == 1)));
    // The summary is due at the end of the interval and comes with the tick.
    let later = now + WARN_INTERVAL;
    assert!(e.next_deadline().is_some_and(|d| d <= later));
    e.tick(later);
    let said = errors(&actions(&mut e));
    let held = 3 * 2000 - WARN_BURST as usize;
    assert_eq!(
        said,
        vec![format!(
            "{held} more affiliate(s) that could not be decrypted or decoded in the last 60 s"
        )]
    );
}
