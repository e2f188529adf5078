// SPDX-License-Identifier: Apache-2.0
//! The client against a real etcd (Debian's etcd-server), one private member per test on free
//! loopback ports with its data in a temporary directory. Without the `etcd` binary a test is
//! skipped, or fails when `KEELSON_REQUIRE_ROOT=1`.
#![allow(clippy::disallowed_methods)] // Tests drive the client from outside: plain threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd::local::{LocalEtcd, Options};
use etcd::request::{range_key, range_prefix};
use etcd::session::{self, CampaignError, Session};
use etcd::wire::*;
use etcd::{Client, ClientError};

struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn etcd_available() -> bool {
    std::process::Command::new("etcd").arg("--version").output().is_ok_and(|o| o.status.success())
}

/// A private etcd, or None (skip) when the binary is missing.
fn start(test: &str, fast: bool) -> Option<(LocalEtcd, Dir)> {
    if !etcd_available() {
        testkit::skip_or_fail(&format!("{test}: no etcd binary (Debian: etcd-server)"));
        return None;
    }
    let dir = std::env::temp_dir().join(format!("keelson-etcd-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut opts = Options::new(&dir.join("data"), &dir.join("etcd.log"));
    opts.fast = fast;
    opts.no_fsync = true;
    let etcd = LocalEtcd::start(&opts).unwrap();
    Some((etcd, Dir(dir)))
}

fn txn_put_if_version(key: &[u8], version: i64, value: &[u8]) -> TxnRequest {
    TxnRequest {
        compare: vec![Compare::version(key, CompareResult::Equal, version)],
        success: vec![RequestOp::Put(PutRequest {
            key: key.to_vec(),
            value: value.to_vec(),
            ..Default::default()
        })],
        failure: vec![RequestOp::Range(range_key(key))],
    }
}

#[test]
fn kv_txn_lease_and_status_round_trips() {
    let Some((etcd, _dir)) = start("kv", false) else { return };
    let mut c = etcd.client();
    assert!(c.health().unwrap());
    let st = c.status().unwrap();
    assert!(st.version.starts_with("3."), "{st:?}");
    // A single voting member leads itself; 3.4's fields decode (what EtcdStatus reports).
    assert_eq!(st.leader, st.header.member_id, "{st:?}");
    assert!(!st.is_learner && st.raft_applied_index > 0 && st.db_size_in_use > 0, "{st:?}");

    let put = c.put(b"/k/a", b"1", 0).unwrap();
    c.put(b"/k/b", b"", 0).unwrap();
    c.put(b"/k0", b"outside", 0).unwrap();
    let kv = c.get(b"/k/a").unwrap().unwrap();
    assert_eq!(
        (kv.value.as_slice(), kv.version, kv.create_revision),
        (&b"1"[..], 1, put.header.revision)
    );
    let all = c.range(&range_prefix(b"/k/", 0)).unwrap();
    let keys: Vec<_> = all.kvs.iter().map(|kv| kv.key.clone()).collect();
    assert_eq!(keys, vec![b"/k/a".to_vec(), b"/k/b".to_vec()]);
    assert_eq!(all.kvs[1].value, b"", "an empty value has no field but decodes");
    assert_eq!(c.get(b"/k/none").unwrap(), None);
    // A read at the first put's revision sees the state then.
    let old = c.range(&range_prefix(b"/k/", put.header.revision)).unwrap();
    assert_eq!(old.kvs.len(), 1);

    // Create-if-absent: once yes, then the failure branch shows the holder.
    let create = |v: &[u8]| TxnRequest {
        compare: vec![Compare::create_revision(b"/ids/5", CompareResult::Equal, 0)],
        success: vec![RequestOp::Put(PutRequest {
            key: b"/ids/5".to_vec(),
            value: v.to_vec(),
            ..Default::default()
        })],
        failure: vec![RequestOp::Range(range_key(b"/ids/5"))],
    };
    let first = c.txn(&create(b"node-a")).unwrap();
    assert!(first.succeeded);
    let second = c.txn(&create(b"node-b")).unwrap();
    assert!(!second.succeeded);
    let held = &second.range(0).unwrap().kvs[0];
    assert_eq!(
        (held.value.as_slice(), held.create_revision),
        (&b"node-a"[..], first.header.revision)
    );
    // Value and mod-revision compares.
    let t = TxnRequest {
        compare: vec![
            Compare::value(b"/ids/5", CompareResult::Equal, b"node-a"),
            Compare::mod_revision(b"/ids/5", CompareResult::Equal, first.header.revision),
        ],
        success: vec![RequestOp::DeleteRange(DeleteRangeRequest {
            key: b"/ids/5".to_vec(),
            ..Default::default()
        })],
        failure: vec![],
    };
    let r = c.txn(&t).unwrap();
    assert!(r.succeeded);
    assert!(matches!(&r.responses[0], ResponseOp::DeleteRange(d) if d.deleted == 1));

    let d = c
        .delete(&DeleteRangeRequest {
            key: b"/k/".to_vec(),
            range_end: etcd::request::prefix_end(b"/k/"),
            prev_kv: true,
        })
        .unwrap();
    assert_eq!((d.deleted, d.prev_kvs.len()), (2, 2));
    assert!(c.get(b"/k0").unwrap().is_some());

    // Leases: granted, bound keys listed, revoked keys gone; an unknown lease is an error.
    let l = c.lease_grant(30).unwrap();
    assert!(l.id > 0 && l.ttl == 30);
    c.put(b"/leased", b"x", l.id).unwrap();
    let ttl = c.lease_time_to_live(l.id).unwrap();
    assert_eq!((ttl.granted_ttl, ttl.keys.clone()), (30, vec![b"/leased".to_vec()]));
    assert!(c.lease_keep_alive(l.id).unwrap() > 0);
    c.lease_revoke(l.id).unwrap();
    assert_eq!(c.get(b"/leased").unwrap(), None);
    assert_eq!(c.lease_keep_alive(l.id).unwrap(), 0, "a gone lease answers TTL 0");
    assert_eq!(c.lease_time_to_live(l.id).unwrap().ttl, -1);
    let e = c.lease_revoke(l.id).unwrap_err();
    assert_eq!(e.server_code(), Some(5), "{e}");
    assert!(e.to_string().contains("lease not found"), "{e}");
}

#[test]
fn a_cas_conflict_from_a_second_writer_is_detected_and_a_retry_from_a_fresh_read_wins() {
    let Some((etcd, _dir)) = start("cas", false) else { return };
    let (mut a, mut b) = (etcd.client(), etcd.client());
    a.put(b"/r", b"v1", 0).unwrap();
    let seen_a = a.get(b"/r").unwrap().unwrap();
    let seen_b = b.get(b"/r").unwrap().unwrap();
    assert_eq!(seen_a.version, seen_b.version);
    // A writes first.
    assert!(a.txn(&txn_put_if_version(b"/r", seen_a.version, b"from-a")).unwrap().succeeded);
    // B's write on the version it read fails, and the failure branch shows what A wrote.
    let lost = b.txn(&txn_put_if_version(b"/r", seen_b.version, b"from-b")).unwrap();
    assert!(!lost.succeeded);
    let now = &lost.range(0).unwrap().kvs[0];
    assert_eq!((now.value.as_slice(), now.version), (&b"from-a"[..], seen_b.version + 1));
    // B reads again and retries: it wins, and nothing of A's was overwritten blindly.
    let fresh = b.get(b"/r").unwrap().unwrap();
    assert!(b.txn(&txn_put_if_version(b"/r", fresh.version, b"from-b")).unwrap().succeeded);
    let end = a.get(b"/r").unwrap().unwrap();
    assert_eq!((end.value.as_slice(), end.version), (&b"from-b"[..], 3));
}

#[test]
fn a_watch_resumed_from_a_revision_loses_nothing_written_while_disconnected() {
    let Some((etcd, _dir)) = start("watch", false) else { return };
    let mut c = etcd.client();
    let start_rev = c.put(b"/w/0", b"a", 0).unwrap().header.revision;
    let req = |from: i64| WatchCreateRequest {
        key: b"/w/".to_vec(),
        range_end: etcd::request::prefix_end(b"/w/"),
        start_revision: from,
        ..Default::default()
    };
    let mut events = Vec::new();
    let mut w = c.watch(&req(start_rev)).unwrap();
    while events.is_empty() {
        let r = w.next(Duration::from_secs(5)).unwrap().expect("the first event");
        events.extend(r.events);
    }
    let bookmark = events.last().unwrap().kv.mod_revision;
    drop(w);
    // Written while nobody watched.
    let mut writer = etcd.client();
    writer.put(b"/w/1", b"b", 0).unwrap();
    writer.put(b"/w/0", b"c", 0).unwrap();
    writer.put(b"/other", b"x", 0).unwrap();
    writer.delete(&DeleteRangeRequest { key: b"/w/1".to_vec(), ..Default::default() }).unwrap();
    let last = writer.put(b"/w/2", b"d", 0).unwrap().header.revision;
    let mut w = c.watch(&req(bookmark + 1)).unwrap();
    let mut resumed = Vec::new();
    let until = Instant::now() + Duration::from_secs(10);
    while resumed.last().is_none_or(|e: &Event| e.kv.mod_revision < last) {
        assert!(Instant::now() < until, "events missing: {resumed:?}");
        if let Some(r) = w.next(Duration::from_secs(1)).unwrap() {
            resumed.extend(r.events);
        }
    }
    let seen: Vec<(EventType, &[u8], &[u8])> =
        resumed.iter().map(|e| (e.kind, e.kv.key.as_slice(), e.kv.value.as_slice())).collect();
    assert_eq!(
        seen,
        vec![
            (EventType::Put, &b"/w/1"[..], &b"b"[..]),
            (EventType::Put, &b"/w/0"[..], &b"c"[..]),
            (EventType::Delete, &b"/w/1"[..], &b""[..]),
            (EventType::Put, &b"/w/2"[..], &b"d"[..]),
        ]
    );
    let revs: Vec<i64> = resumed.iter().map(|e| e.kv.mod_revision).collect();
    assert!(revs.windows(2).all(|p| p[0] < p[1]) && revs[0] == bookmark + 1, "{revs:?}");
}

#[test]
fn a_compacted_start_revision_is_reported() {
    let Some((etcd, _dir)) = start("compact", false) else { return };
    let mut c = etcd.client();
    let first = c.put(b"/c", b"1", 0).unwrap().header.revision;
    c.put(b"/c", b"2", 0).unwrap();
    let third = c.put(b"/c", b"3", 0).unwrap().header.revision;
    c.compact(third).unwrap();
    let req =
        WatchCreateRequest { key: b"/c".to_vec(), start_revision: first, ..Default::default() };
    // etcd confirms the watch, then cancels it: the stream reports the compaction.
    let mut w = c.watch(&req).unwrap();
    match w.next(Duration::from_secs(5)) {
        Err(ClientError::Compacted(rev)) => assert_eq!(rev, third),
        other => panic!("expected a compaction error, got {other:?}"),
    }
    let e = c.range(&RangeRequest { revision: first, ..range_key(b"/c") }).unwrap_err();
    match &e {
        ClientError::Decode(d) => assert!(d.is_compacted(), "{d}"),
        other => panic!("expected a server error, got {other:?}"),
    }
    // From the compaction revision on, watching works.
    let mut w = c.watch(&WatchCreateRequest { start_revision: third, ..req }).unwrap();
    let r = w.next(Duration::from_secs(5)).unwrap().unwrap();
    assert_eq!(r.events[0].kv.value, b"3");
}

fn campaign_in_thread(
    etcd: &LocalEtcd,
    session: Arc<Session>,
    name: &'static [u8],
    value: &'static [u8],
) -> std::thread::JoinHandle<Result<etcd::Election, CampaignError>> {
    let mut c = etcd.client();
    std::thread::spawn(move || {
        let stop = AtomicBool::new(false);
        session::campaign(&mut c, &session, name, value, &stop)
    })
}

#[test]
fn when_the_leaders_lease_expires_the_next_candidate_leads() {
    let Some((etcd, _dir)) = start("election", true) else { return };
    let name = b"talos:v1:vip:election:10.0.0.100";
    let mut c = etcd.client();
    let a = Session::grant(&c, 2, Duration::from_millis(500)).unwrap();
    let b = Arc::new(Session::grant(&c, 2, Duration::from_millis(500)).unwrap());
    let stop = AtomicBool::new(false);
    let mut ea = session::campaign(&mut c, &a, name, b"node-a", &stop).unwrap();
    assert!(ea.is_leader());
    assert_eq!(ea.key(), format!("talos:v1:vip:election:10.0.0.100/{:x}", a.id()).as_bytes());
    let waiting = campaign_in_thread(&etcd, b.clone(), name, b"node-b");
    // B queues behind A, and keeps waiting while A's lease is renewed (several TTLs).
    std::thread::sleep(Duration::from_secs(5));
    assert!(!waiting.is_finished(), "B must not lead while A's lease lives");
    let leader = session::leader(&mut c, name).unwrap().unwrap();
    assert_eq!((leader.value.as_slice(), leader.lease), (&b"node-a"[..], a.id()));
    let queue = c.range(&range_prefix(b"talos:v1:vip:election:10.0.0.100/", 0)).unwrap();
    assert_eq!(queue.kvs.len(), 2);
    // A's keep-alive dies (a crashed node): its key goes with the lease, B leads.
    let a_key = ea.key().to_vec();
    let killed = Instant::now();
    a.abandon();
    let eb = waiting.join().unwrap().unwrap();
    let took = killed.elapsed();
    eprintln!("failover after the leader's keep-alive stopped (2 s lease): {took:?}");
    assert!(eb.is_leader());
    assert!(took < Duration::from_secs(6), "failover took {took:?}");
    assert_eq!(c.get(&a_key).unwrap(), None);
    let leader = session::leader(&mut c, name).unwrap().unwrap();
    assert_eq!((leader.value.as_slice(), leader.lease), (&b"node-b"[..], b.id()));
    // A's stale resign changes nothing.
    assert!(!session::resign(&mut c, &mut ea).unwrap());
    assert!(session::leader(&mut c, name).unwrap().is_some());
}

#[test]
fn a_resign_hands_over_at_once_and_a_lost_lease_ends_a_waiting_campaign() {
    let Some((etcd, _dir)) = start("resign", true) else { return };
    let name = b"/keelson-operator/leader";
    let mut c = etcd.client();
    let a = Session::grant(&c, 10, Duration::from_secs(1)).unwrap();
    let b = Arc::new(Session::grant(&c, 10, Duration::from_secs(1)).unwrap());
    let stop = AtomicBool::new(false);
    let mut ea = session::campaign(&mut c, &a, name, b"a", &stop).unwrap();
    let waiting = campaign_in_thread(&etcd, b.clone(), name, b"b");
    std::thread::sleep(Duration::from_millis(500));
    assert!(!waiting.is_finished());
    // An observer sees the change of leader as it happens.
    let before = session::leader(&mut c, name).unwrap().unwrap();
    assert_eq!(before.value, b"a");
    let observer = {
        let mut o = etcd.client();
        let known = before.clone();
        std::thread::spawn(move || {
            session::observe(&mut o, name, Some(&known), Duration::from_secs(10)).unwrap()
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let resigned = Instant::now();
    assert!(session::resign(&mut c, &mut ea).unwrap());
    let seen = observer.join().unwrap().unwrap();
    eprintln!("resign to observed new leader: {:?}", resigned.elapsed());
    assert_eq!(seen.value, b"b");
    assert!(resigned.elapsed() < Duration::from_secs(2), "{:?}", resigned.elapsed());
    let eb = waiting.join().unwrap().unwrap();
    assert!(resigned.elapsed() < Duration::from_secs(2), "{:?}", resigned.elapsed());
    assert!(eb.is_leader());

    // A candidate whose lease is revoked while it waits loses instead of "winning".
    let c2 = Arc::new(Session::grant(&c, 10, Duration::from_secs(1)).unwrap());
    let waiting = campaign_in_thread(&etcd, c2.clone(), name, b"c");
    std::thread::sleep(Duration::from_millis(500));
    c.lease_revoke(c2.id()).unwrap();
    Arc::try_unwrap(b).unwrap().close(&mut c).unwrap();
    match waiting.join().unwrap() {
        Err(CampaignError::Lost(_)) | Err(CampaignError::LeaseLost(_)) => {}
        other => panic!("a candidate without its key must not lead: {other:?}"),
    }
    assert_eq!(session::leader(&mut c, name).unwrap(), None);
    drop(a);
}

/// A CA, a server certificate for 127.0.0.1 and a client certificate, as PEM files in `dir`.
fn certificates(dir: &std::path::Path) -> (PathBuf, PathBuf, PathBuf, PathBuf, PathBuf) {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, SanType,
    };
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::default();
    ca.distinguished_name.push(DnType::CommonName, "keelson test etcd CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, &ca_key);
    let issue = |usage: Vec<ExtendedKeyUsagePurpose>, name: &str| {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::default();
        p.distinguished_name.push(DnType::CommonName, name);
        p.subject_alt_names = vec![SanType::IpAddress("127.0.0.1".parse().unwrap())];
        p.extended_key_usages = usage;
        let cert = p.signed_by(&key, &issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    };
    // etcd's gateway dials etcd's own gRPC port with the server certificate as its client
    // certificate, so with --client-cert-auth that certificate needs clientAuth too (without
    // it every gateway call answers 503 "connection closed" while /health says true).
    let both = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
    let (server_pem, server_key) = issue(both, "etcd");
    let (client_pem, client_key) = issue(vec![ExtendedKeyUsagePurpose::ClientAuth], "operator");
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    (
        write("ca.pem", &ca_cert.pem()),
        write("server.pem", &server_pem),
        write("server-key.pem", &server_key),
        write("client.pem", &client_pem),
        write("client-key.pem", &client_key),
    )
}

#[test]
fn tls_with_a_client_certificate_and_without_one() {
    if !etcd_available() {
        testkit::skip_or_fail("tls: no etcd binary (Debian: etcd-server)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("keelson-etcd-tls-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let _cleanup = Dir(dir.clone());
    let (ca, cert, key, client, client_key) = certificates(&dir);
    let with_cert = etcd::client::tls_config(&ca, Some((&client, &client_key))).unwrap();
    let mut opts = Options::new(&dir.join("data"), &dir.join("etcd.log"));
    opts.no_fsync = true;
    opts.tls = Some(etcd::local::ServerTls { cert, key, client_ca: ca.clone() });
    opts.client_tls = Some(with_cert);
    let etcd = LocalEtcd::start(&opts).unwrap();
    assert!(etcd.client_url.starts_with("https://127.0.0.1:"));

    let mut c = etcd.client();
    c.put(b"/tls", b"yes", 0).unwrap();
    assert_eq!(c.get(b"/tls").unwrap().unwrap().value, b"yes");
    let mut w = c
        .watch(&WatchCreateRequest {
            key: b"/tls".to_vec(),
            start_revision: 1,
            ..Default::default()
        })
        .unwrap();
    let r = w.next(Duration::from_secs(5)).unwrap().unwrap();
    assert_eq!(r.events[0].kv.value, b"yes");

    // Without a client certificate etcd refuses the handshake.
    let no_cert = etcd::client::tls_config(&ca, None).unwrap();
    let mut c = Client::new(etcd::Config::new(&[&etcd.client_url], Some(no_cert)).unwrap());
    assert!(c.get(b"/tls").is_err());
    // Plain HTTP to a TLS port, and TLS without a CA, are errors too.
    let plain = etcd.client_url.replace("https://", "http://");
    assert!(Client::new(etcd::Config::new(&[&plain], None).unwrap()).get(b"/tls").is_err());
    let mut c = Client::new(etcd::Config::new(&[&etcd.client_url], None).unwrap());
    assert!(matches!(c.get(b"/tls"), Err(ClientError::TlsConfig(_))));
}

/// `etcdctl elect NAME VALUE`: etcd's Go `concurrency.Election`, the code Talos's VIP
/// operator runs. It prints its key and value once it leads, and resigns on SIGINT.
struct GoCandidate {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl GoCandidate {
    fn start(url: &str, name: &str, value: &str) -> Self {
        use std::io::BufRead;
        let mut child = std::process::Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .args(["--endpoints", url, "elect", name, value])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("etcdctl (Debian: etcd-client)");
        let out = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        Self { child, lines }
    }

    /// The key it printed on winning, if it won within `wait`.
    fn elected(&self, wait: Duration) -> Option<String> {
        self.lines.recv_timeout(wait).ok()
    }

    fn interrupt(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
        let _ = self.child.wait();
    }
}

impl Drop for GoCandidate {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn keelson_and_go_candidates_wait_in_one_queue() {
    let found = std::process::Command::new("etcdctl").arg("version").output();
    if !found.is_ok_and(|o| o.status.success()) {
        testkit::skip_or_fail("interop: no etcdctl (Debian: etcd-client)");
        return;
    }
    let Some((etcd, _dir)) = start("interop", true) else { return };
    let name = "talos:v1:vip:election:10.0.0.100";
    let mut c = etcd.client();

    // Go leads first; a keelson candidate queues behind it.
    let mut go = GoCandidate::start(&etcd.client_url, name, "go-node");
    let go_key = go.elected(Duration::from_secs(10)).expect("etcdctl leads");
    assert!(go_key.starts_with("talos:v1:vip:election:10.0.0.100/"), "{go_key}");
    let ours = Arc::new(Session::grant(&c, 5, Duration::from_secs(1)).unwrap());
    let waiting = campaign_in_thread(&etcd, ours.clone(), name.as_bytes(), b"keelson-node");
    std::thread::sleep(Duration::from_secs(1));
    assert!(!waiting.is_finished(), "keelson must wait behind the Go leader");
    let leader = session::leader(&mut c, name.as_bytes()).unwrap().unwrap();
    assert_eq!(
        (String::from_utf8_lossy(&leader.key), leader.value.as_slice()),
        (go_key.clone().into(), &b"go-node"[..])
    );
    // Go resigns (as Talos does on shutdown): keelson leads.
    go.interrupt();
    let mut e = waiting.join().unwrap().unwrap();
    assert!(e.is_leader());

    // Now keelson leads and a Go candidate waits behind it until keelson resigns.
    let go = GoCandidate::start(&etcd.client_url, name, "go-node-2");
    assert_eq!(go.elected(Duration::from_secs(2)), None, "Go must wait behind keelson");
    assert!(session::resign(&mut c, &mut e).unwrap());
    let go_key = go.elected(Duration::from_secs(5)).expect("etcdctl leads after the resign");
    let leader = session::leader(&mut c, name.as_bytes()).unwrap().unwrap();
    assert_eq!(
        (String::from_utf8_lossy(&leader.key), leader.value.as_slice()),
        (go_key.into(), &b"go-node-2"[..])
    );
}
