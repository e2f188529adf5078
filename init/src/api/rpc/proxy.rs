// SPDX-License-Identifier: Apache-2.0
//! Calls for other nodes: talosctl's `-n a,b` through one endpoint. A request whose gRPC
//! metadata names `nodes` (or one `node`) is sent on to each named node's API (port 50000,
//! mutual TLS) and the answers come back on the caller's stream, as Talos's apid does
//! (siderolabs/talos `internal/app/apid/pkg/director` and `backend/apid.go`):
//!
//! - `node: X` (one value): the call goes to X as it is and its answer comes back unchanged,
//!   stream or unary, with X's status;
//! - `nodes: X,Y,...` (only `machine.`, `storage.`, `time.` and `cluster.` methods, as Talos
//!   allows): a unary call's answers are joined into one reply whose `messages` are every
//!   node's, each tagged `metadata.hostname` = the node as named; a node that fails gives a
//!   message with `metadata.error` and `metadata.status` instead. A stream's messages come
//!   as they arrive, tagged the same way, and the stream ends once every node's has;
//! - `proxyfrom` (set by a forwarding node) or neither: served here.
//!
//! Talos forwards with its own certificate and passes the caller's roles in metadata the next
//! node trusts from its peers; keelson's nodes all hold `machine.ca`'s key (they issue their
//! own server certificates from it), so a node forwards with a short-lived client certificate
//! carrying the caller's role, and the next node checks it like any client's. Nothing new is
//! trusted, and a caller never gains a role through a proxy.
//!
//! The calls run on worker threads (`api-proxy`, one per node), never on the loop: messages
//! come back on a bounded channel and ring the API's bell. Bounds: [`MAX_NODES`] per request,
//! [`MAX_WORKERS`] at once, [`UNARY_LIMIT`] for a unary call, [`MAX_MESSAGE`] per message.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use grpc::h2::Field;
use grpc::{code, Status};
use rustls::pki_types::CertificateDer;
use rustls::ClientConfig;
use talos_api::common::{Empty, EmptyResponse, Metadata, RpcStatus};
use talos_api::Message;

use super::dispatch::{Call, Feed, FeedCtx, Flow};
use crate::api::identity::Ca;
use crate::api::transport::Access;

/// Most nodes one request may name.
pub const MAX_NODES: usize = 16;
/// Most forwarding threads at once, over every connection.
pub const MAX_WORKERS: usize = 32;
/// A unary call's answers are joined once every node answered, or after this long (the nodes
/// that did not answer by then get `DeadlineExceeded`).
pub const UNARY_LIMIT: Duration = Duration::from_secs(30);
/// The largest message taken from a node.
pub const MAX_MESSAGE: usize = 4 << 20;
/// The largest joined reply of a unary call.
const MAX_JOINED: usize = 16 << 20;
/// Messages waiting between the threads of one request and the loop: a stream's client that
/// reads slowly holds its node's thread, not the node's memory.
const QUEUE: usize = 64;
/// The API port of the nodes named.
pub const PORT: u16 = 50000;
/// How long a forwarding client certificate is valid: it is made for one request.
const CERT_DAYS: i64 = 1;

/// Method prefixes Talos proxies to several nodes at once.
const ONE_TO_MANY: [&str; 5] = [
    "/machine.MachineService/",
    "/cluster.ClusterService/",
    "/inspect.InspectService/",
    "/storage.StorageService/",
    "/time.TimeService/",
];

/// Server-streaming methods among those served (their answers are not joined).
const STREAMING: [&str; 7] = [
    "/machine.MachineService/Dmesg",
    "/machine.MachineService/Logs",
    "/machine.MachineService/Events",
    "/machine.MachineService/Kubeconfig",
    "/machine.MachineService/Copy",
    "/cosi.resource.State/List",
    "/cosi.resource.State/Watch",
];

/// Forwarding threads running now.
static WORKERS: AtomicUsize = AtomicUsize::new(0);

/// Where a call is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Here.
    Local,
    /// On another node, as a plain proxy (`node`).
    One(String),
    /// On these nodes, answers tagged and joined (`nodes`).
    Many(Vec<String>),
}

/// Where the call with these request headers is served; Err: the status to refuse it with.
pub fn route(fields: &[Field], path: &str) -> Result<Route, Status> {
    if fields.iter().any(|(n, _)| n == b"proxyfrom") {
        // Already forwarded once: never further.
        return Ok(Route::Local);
    }
    let values = |name: &str| -> Vec<String> {
        fields
            .iter()
            .filter(|(n, _)| n == name.as_bytes())
            .flat_map(|(_, v)| {
                String::from_utf8_lossy(v)
                    .split(',')
                    .map(str::trim)
                    .map(String::from)
                    .collect::<Vec<_>>()
            })
            .filter(|s| !s.is_empty())
            .collect()
    };
    let nodes = values("nodes");
    let node = values("node");
    if node.len() > 1 {
        return Err(Status::new(code::INVALID_ARGUMENT, "node metadata must be single-valued"));
    }
    if !nodes.is_empty() {
        if !ONE_TO_MANY.iter().any(|p| path.starts_with(p)) {
            return Err(Status::new(
                code::INVALID_ARGUMENT,
                format!("one-2-many proxying is not supported for method {path}"),
            ));
        }
        if nodes.len() > MAX_NODES {
            return Err(Status::new(
                code::INVALID_ARGUMENT,
                format!("nodes: {} named, at most {MAX_NODES} per request", nodes.len()),
            ));
        }
        for n in &nodes {
            check_target(n)?;
        }
        return Ok(Route::Many(nodes));
    }
    match node.into_iter().next() {
        Some(n) => {
            check_target(&n)?;
            Ok(Route::One(n))
        }
        None => Ok(Route::Local),
    }
}

/// A node as metadata names it: an IP address or a DNS name, without a port (Talos refuses
/// one too: the port is the API's).
fn check_target(t: &str) -> Result<(), Status> {
    let bad = |why: &str| {
        let shown: String = t.chars().take(64).collect();
        Err(Status::new(
            code::INVALID_ARGUMENT,
            format!("invalid target {}: {why}", base::names::escape(&shown, 256)),
        ))
    };
    if t.parse::<IpAddr>().is_ok() {
        return Ok(());
    }
    if t.len() > 253 {
        return bad("longer than a DNS name");
    }
    if t.contains(':') || t.contains('[') {
        return bad("a node is named without a port");
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
    };
    if !t.trim_end_matches('.').split('.').all(label_ok) {
        return bad("not an IP address or a DNS name");
    }
    Ok(())
}

/// Is `path` a server stream (its answers are passed on, not joined)?
pub fn is_streaming(path: &str) -> bool {
    STREAMING.contains(&path)
}

/// The role whose certificate forwards a call of `access`; Err when it may not be forwarded.
fn role(access: Access) -> Result<&'static str, Status> {
    match access {
        Access::Admin => Ok("os:admin"),
        Access::Operator => Ok("os:operator"),
        Access::Reader => Ok("os:reader"),
        Access::Maintenance => Err(Status::new(
            code::PERMISSION_DENIED,
            "no request forwarding in maintenance mode (the node has no machine.ca yet)",
        )),
        Access::Pending | Access::Revoked | Access::Trustd => {
            Err(Status::new(code::UNAUTHENTICATED, "not authenticated"))
        }
    }
}

/// The TLS client to forward with: trusts `machine.ca`, presents a new certificate with
/// the caller's role, issued from it.
fn credentials(call: &Call<'_>, role: &str) -> Result<Arc<ClientConfig>, Status> {
    use net::config::MachineConfig;
    use net::controllers::MACHINE_CONFIG_ID;
    use net::resource::Namespace;
    let refuse = |why: String| Err(Status::new(code::FAILED_PRECONDITION, why));
    let config = call.rt.store().get_spec::<MachineConfig>(Namespace::Config, MACHINE_CONFIG_ID);
    let Some(ca) = config.and_then(|c| c.machine.ca.as_ref()) else {
        return refuse("no request forwarding: the machine config has no machine.ca".into());
    };
    let Some(key) = ca.key.as_deref() else {
        return refuse(
            "no request forwarding: this node has no machine.ca key to issue a forwarding certificate (call the node directly: -e NODE)"
                .into(),
        );
    };
    let pem = |b64: &str, what| crate::api::remote::decode(b64, what);
    let issued = pem(&ca.crt, "machine.ca.crt")
        .and_then(|crt| pem(key, "machine.ca.key").map(|k| (crt, k)))
        .and_then(|(crt, k)| Ca::from_pem(&crt, &k).map_err(|e| e.to_string()))
        .and_then(|ca| {
            ca.issue_client(role, CERT_DAYS).map(|id| (ca, id)).map_err(|e| e.to_string())
        });
    let (ca, id) = match issued {
        Ok(x) => x,
        Err(e) => return refuse(format!("no request forwarding: machine.ca: {e}")),
    };
    let mut roots = rustls::RootCertStore::empty();
    let config = roots
        .add(CertificateDer::clone(&ca.cert))
        .map_err(|e| e.to_string())
        .and_then(|()| {
            ClientConfig::builder_with_provider(cli::tls::provider())
                .with_protocol_versions(&[&rustls::version::TLS13])
                .map_err(|e| e.to_string())
        })
        .and_then(|b| {
            b.with_root_certificates(roots)
                .with_client_auth_cert(id.chain.clone(), id.private_key())
                .map_err(|e| e.to_string())
        });
    match config {
        Ok(c) => Ok(Arc::new(c)),
        Err(e) => refuse(format!("no request forwarding: TLS client: {e}")),
    }
}

/// What a forwarding thread reports.
#[derive(Debug)]
enum Up {
    /// A message from node `.0`.
    Message(usize, Vec<u8>),
    /// Node `.0`'s call ended.
    End(usize, Result<(), Status>),
}

/// Hold `n` of the [`MAX_WORKERS`] places; false when there are not that many free.
fn reserve(n: usize) -> bool {
    WORKERS
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |live| {
            (live + n <= MAX_WORKERS).then_some(live + n)
        })
        .is_ok()
}

/// Gives a worker's place back when its thread ends (or was never started).
struct Place;

impl Drop for Place {
    fn drop(&mut self) {
        WORKERS.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Send the call (its request message `req`) on to where `route` says; the feed of its
/// answers. `route` is never [`Route::Local`].
pub fn start(
    route: Route,
    path: &'static str,
    req: &[u8],
    call: &Call<'_>,
) -> Result<Box<dyn Feed>, Status> {
    let (targets, tagged) = match route {
        Route::Local => return Err(Status::new(code::INTERNAL, "not a forwarded call")),
        Route::One(t) => (vec![t], false),
        Route::Many(ts) => (ts, true),
    };
    let role = role(call.access)?;
    let tls = credentials(call, role)?;
    if !reserve(targets.len()) {
        return Err(Status::new(
            code::RESOURCE_EXHAUSTED,
            format!("at most {MAX_WORKERS} forwarded calls at once on this node: try again"),
        ));
    }
    let streaming = is_streaming(path);
    let (tx, rx) = mpsc::sync_channel(QUEUE);
    for (i, target) in targets.iter().enumerate() {
        let place = Place;
        let job = Job {
            index: i,
            target: target.clone(),
            path,
            req: req.to_vec(),
            tls: tls.clone(),
            streaming,
            tx: tx.clone(),
            bell: call.bell.cloned(),
        };
        let spawned = evloop::spawn_worker("api-proxy", move || {
            let _place = place;
            job.run();
        });
        if let Err(e) = spawned {
            log::warn!(target: "api", "proxy: no thread for {target}: {e}");
            let status = Status::new(code::UNAVAILABLE, format!("no thread to forward with: {e}"));
            // The closure went with the failed spawn, its place with it; the feed reports
            // the node as failed.
            let _ = tx.try_send(Up::End(i, Err(status)));
        }
    }
    log::debug!(target: "api", "proxy: {path} to {}", targets.join(", "));
    let n = targets.len();
    Ok(Box::new(ProxyFeed {
        rx,
        targets,
        tagged,
        streaming,
        replies: vec![None; n],
        open: n,
        pending: VecDeque::new(),
        joined: 0,
        deadline: (!streaming).then(|| call.now + UNARY_LIMIT),
        ended: None,
    }))
}

/// One node's share of a forwarded call, on its thread.
struct Job {
    index: usize,
    target: String,
    path: &'static str,
    req: Vec<u8>,
    tls: Arc<ClientConfig>,
    streaming: bool,
    tx: SyncSender<Up>,
    bell: Option<evloop::Ringer>,
}

impl Job {
    fn run(self) {
        let target = cli::connect::Target::Remote {
            name: self.target.clone(),
            host: self.target.clone(),
            port: PORT,
            tls: self.tls.clone(),
            insecure: false,
        };
        let result = cli::rpc::Channel::connect(&target, self.streaming).and_then(|mut ch| {
            ch.call_raw(self.path, &self.req, MAX_MESSAGE, &mut |m| {
                let sent = self.tx.send(Up::Message(self.index, m));
                self.ring();
                // The caller went away: stop reading from the node.
                sent.map_err(|_| cli::rpc::RpcError::Handler("the caller went away".into()))
            })
        });
        let status = result.map_err(|e| match e {
            cli::rpc::RpcError::Status(s) => s,
            other => Status::new(code::UNAVAILABLE, format!("{}: {other}", self.target)),
        });
        let _ = self.tx.send(Up::End(self.index, status));
        self.ring();
    }

    fn ring(&self) {
        if let Some(b) = &self.bell {
            b.ring();
        }
    }
}

/// The answers of a forwarded call, as the caller's stream takes them.
struct ProxyFeed {
    rx: Receiver<Up>,
    targets: Vec<String>,
    /// `nodes`: messages tagged with the node, unary answers joined.
    tagged: bool,
    streaming: bool,
    /// A joined unary call's reply from each node (in the order they were named).
    replies: Vec<Option<Vec<u8>>>,
    /// Nodes whose call has not ended.
    open: usize,
    /// Messages to pass on.
    pending: VecDeque<Vec<u8>>,
    /// Bytes in `replies`.
    joined: usize,
    deadline: Option<Instant>,
    /// How the caller's call ends, once known.
    ended: Option<Status>,
}

impl ProxyFeed {
    fn take(&mut self, up: Up) {
        match up {
            Up::Message(i, m) => {
                let Some(target) = self.targets.get(i) else { return };
                match (self.tagged, self.streaming) {
                    (false, _) => self.pending.push_back(m),
                    (true, true) => self.pending.push_back(tag_stream(m, target)),
                    (true, false) => {
                        let tagged = tag_unary(&m, target).unwrap_or_else(|why| {
                            error_unary(target, &Status::new(code::INTERNAL, why))
                        });
                        self.keep(i, tagged);
                    }
                }
            }
            Up::End(i, result) => {
                self.open = self.open.saturating_sub(1);
                let Some(target) = self.targets.get(i).cloned() else { return };
                match (self.tagged, self.streaming, result) {
                    (false, _, r) => self.ended = Some(r.err().unwrap_or_else(ok)),
                    (true, _, Ok(())) => {}
                    (true, true, Err(s)) => self.pending.push_back(error_stream(&target, &s)),
                    (true, false, Err(s)) => self.keep(i, error_unary(&target, &s)),
                }
            }
        }
    }

    /// A node's unary reply (its first: a unary call has one).
    fn keep(&mut self, i: usize, reply: Vec<u8>) {
        let Some(slot) = self.replies.get_mut(i) else { return };
        if slot.is_some() {
            return;
        }
        if self.joined + reply.len() > MAX_JOINED {
            let s = Status::new(code::RESOURCE_EXHAUSTED, "the nodes' replies exceed 16 MiB");
            *slot = Some(error_unary(self.targets.get(i).map_or("", String::as_str), &s));
            return;
        }
        self.joined += reply.len();
        *slot = Some(reply);
    }

    /// Every node answered (or time is up): the one joined reply.
    fn join(&mut self, now: Instant) -> Option<Vec<u8>> {
        let late = self.deadline.is_some_and(|d| now >= d);
        if self.open > 0 && !late {
            return None;
        }
        let mut out = Vec::with_capacity(self.joined);
        for (slot, target) in self.replies.iter_mut().zip(&self.targets) {
            let reply = slot.take().unwrap_or_else(|| {
                let why = format!("no answer within {} s", UNARY_LIMIT.as_secs());
                error_unary(target, &Status::new(code::DEADLINE_EXCEEDED, why))
            });
            out.extend_from_slice(&reply);
        }
        Some(out)
    }
}

fn ok() -> Status {
    Status::new(code::OK, "")
}

impl Feed for ProxyFeed {
    fn next(&mut self, ctx: &FeedCtx<'_>, room: usize, out: &mut Vec<Vec<u8>>) -> Flow {
        loop {
            match self.rx.try_recv() {
                Ok(up) => self.take(up),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    // Every thread is gone; any node that did not say how it ended failed.
                    if self.open > 0 && self.ended.is_none() && !self.tagged {
                        self.ended = Some(Status::new(code::UNAVAILABLE, "the forwarding ended"));
                    }
                    self.open = 0;
                    break;
                }
            }
        }
        let mut used = 0;
        while used < room {
            let Some(m) = self.pending.pop_front() else { break };
            used += m.len();
            out.push(m);
        }
        if !self.pending.is_empty() {
            return Flow::More;
        }
        if self.tagged && !self.streaming {
            return match self.join(ctx.now) {
                Some(reply) => {
                    out.push(reply);
                    Flow::Done(ok())
                }
                None => Flow::More,
            };
        }
        if let Some(status) = self.ended.take() {
            return Flow::Done(status);
        }
        if self.tagged && self.open == 0 {
            return Flow::Done(ok());
        }
        if !self.tagged && self.deadline.is_some_and(|d| ctx.now >= d) {
            let why = format!(
                "{}: no answer within {} s",
                self.targets.join(", "),
                UNARY_LIMIT.as_secs()
            );
            return Flow::Done(Status::new(code::DEADLINE_EXCEEDED, why));
        }
        Flow::More
    }

    fn poll_at(&self) -> Option<Instant> {
        self.deadline
    }

    fn ready(&self) -> bool {
        !self.pending.is_empty()
    }
}

/// `common.Metadata` naming `target` (and its failure), encoded as field 1 of a reply: what
/// every reply's `metadata` is, so appended to a message it merges into its `metadata`.
fn metadata_field(target: &str, failed: Option<&Status>) -> Vec<u8> {
    let metadata = Metadata {
        hostname: target.to_owned(),
        error: failed.map(|s| s.message.clone()).unwrap_or_default(),
        status: failed.map(|s| RpcStatus {
            code: i32::try_from(s.code).unwrap_or(i32::MAX),
            message: s.message.clone(),
        }),
    };
    Empty { metadata: Some(metadata) }.encode_to_vec()
}

/// A streamed message from `target`, its `metadata.hostname` set to `target` (fields of a
/// message given twice merge, the later value winning).
fn tag_stream(mut m: Vec<u8>, target: &str) -> Vec<u8> {
    m.extend_from_slice(&metadata_field(target, None));
    m
}

/// A stream's message for a node that failed.
fn error_stream(target: &str, s: &Status) -> Vec<u8> {
    metadata_field(target, Some(s))
}

/// A unary reply for a node that failed: `{messages: [{metadata: {hostname, error,
/// status}}]}`, which any reply type reads as one message with only its metadata set.
fn error_unary(target: &str, s: &Status) -> Vec<u8> {
    let e = Empty::decode(metadata_field(target, Some(s)).as_slice()).unwrap_or_default();
    EmptyResponse { messages: vec![e] }.encode_to_vec()
}

/// A unary reply from `target` (`{repeated Reply messages = 1}`), each message's
/// `metadata.hostname` set to `target`. Replies concatenate into one with every message.
fn tag_unary(reply: &[u8], target: &str) -> Result<Vec<u8>, String> {
    let meta = metadata_field(target, None);
    let mut out = Vec::with_capacity(reply.len() + 16 + meta.len());
    let mut rest = reply;
    while !rest.is_empty() {
        let (key, n) = varint(rest).ok_or("a bad field key")?;
        rest = rest.get(n..).ok_or("truncated")?;
        let (field, wire) = (key >> 3, key & 7);
        if field != 1 || wire != 2 {
            // Talos's replies have nothing but `messages`.
            return Err(format!("unexpected field {field} (wire type {wire}) in a reply"));
        }
        let (len, n) = varint(rest).ok_or("a bad length")?;
        let len = usize::try_from(len).map_err(|_| "a bad length")?;
        let body = rest.get(n..n.saturating_add(len)).ok_or("truncated")?;
        rest = rest.get(n + len..).unwrap_or_default();
        put_varint(&mut out, key);
        put_varint(&mut out, (body.len() + meta.len()) as u64);
        out.extend_from_slice(body);
        out.extend_from_slice(&meta);
    }
    Ok(out)
}

fn varint(b: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, byte) in b.iter().enumerate().take(10) {
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use talos_api::machine::{Version, VersionInfo, VersionResponse};

    fn fields(pairs: &[(&str, &str)]) -> Vec<Field> {
        pairs.iter().map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec())).collect()
    }

    const VERSION: &str = "/machine.MachineService/Version";

    #[test]
    fn the_route_follows_the_metadata_as_talos_does() {
        assert_eq!(route(&fields(&[]), VERSION), Ok(Route::Local));
        let many = route(&fields(&[("nodes", "10.0.0.1, 10.0.0.2"), ("nodes", "n3")]), VERSION);
        assert_eq!(many, Ok(Route::Many(vec!["10.0.0.1".into(), "10.0.0.2".into(), "n3".into()])));
        assert_eq!(
            route(&fields(&[("node", "fd00::1")]), VERSION),
            Ok(Route::One("fd00::1".into()))
        );
        // A forwarded call is never forwarded again.
        let again = fields(&[("nodes", "10.0.0.1"), ("proxyfrom", "10.0.0.9")]);
        assert_eq!(route(&again, VERSION), Ok(Route::Local));
        let code_of = |f: &[(&str, &str)], p: &str| route(&fields(f), p).err().map(|s| s.code);
        let inval = Some(code::INVALID_ARGUMENT);
        assert_eq!(code_of(&[("node", "a"), ("node", "b")], VERSION), inval);
        assert_eq!(code_of(&[("nodes", "a")], "/cosi.resource.State/Get"), inval);
        assert_eq!(code_of(&[("node", "a")], "/cosi.resource.State/Get"), None);
        assert_eq!(code_of(&[("nodes", "10.0.0.1:50000")], VERSION), inval);
        assert_eq!(code_of(&[("nodes", "[fd00::1]:1")], VERSION), inval);
        assert_eq!(code_of(&[("nodes", "a b")], VERSION), inval);
        assert_eq!(code_of(&[("nodes", "-a")], VERSION), inval);
        let seventeen = vec!["n"; MAX_NODES + 1].join(",");
        assert_eq!(code_of(&[("nodes", &seventeen)], VERSION), inval);
        let sixteen = vec!["n"; MAX_NODES].join(",");
        assert_eq!(code_of(&[("nodes", &sixteen)], VERSION), None);
    }

    fn version_reply(host: &str, tag: &str) -> Vec<u8> {
        VersionResponse {
            messages: vec![Version {
                metadata: Metadata::of(host),
                version: Some(VersionInfo { tag: tag.into(), ..VersionInfo::default() }),
                ..Version::default()
            }],
        }
        .encode_to_vec()
    }

    #[test]
    fn unary_replies_are_tagged_and_join_into_one_with_errors_as_messages() {
        let a = tag_unary(&version_reply("node-a", "v1"), "10.0.0.1").unwrap();
        let b = error_unary("10.0.0.2", &Status::new(code::UNAVAILABLE, "connection refused"));
        let joined = VersionResponse::decode([a, b].concat().as_slice()).unwrap();
        assert_eq!(joined.messages.len(), 2);
        let first = &joined.messages[0];
        let m = first.metadata.as_ref().unwrap();
        assert_eq!((m.hostname.as_str(), m.error.as_str()), ("10.0.0.1", ""));
        assert_eq!(first.version.as_ref().map(|v| v.tag.as_str()), Some("v1"));
        let m = joined.messages[1].metadata.as_ref().unwrap();
        assert_eq!(m.hostname, "10.0.0.2");
        assert_eq!(m.error, "connection refused");
        assert_eq!(m.status.as_ref().map(|s| s.code), Some(code::UNAVAILABLE as i32));
        assert!(joined.messages[1].version.is_none());
        // Anything but `messages` is not a reply.
        assert!(tag_unary(&[0x10, 0x01], "x").is_err());
        assert!(tag_unary(&[0x0a, 0x05, 0x00], "x").is_err());
    }

    #[test]
    fn a_streamed_message_keeps_its_fields_and_names_its_node() {
        let data =
            talos_api::common::Data { metadata: Metadata::of("node-a"), bytes: b"hi".to_vec() };
        let tagged = tag_stream(data.encode_to_vec(), "10.0.0.1");
        let got = talos_api::common::Data::decode(tagged.as_slice()).unwrap();
        assert_eq!(got.bytes, b"hi");
        assert_eq!(got.metadata.map(|m| m.hostname), Some("10.0.0.1".into()));
    }

    #[test]
    fn the_workers_are_bounded() {
        assert!(reserve(MAX_WORKERS - 1));
        assert!(!reserve(2));
        assert!(reserve(1));
        assert!(!reserve(1));
        WORKERS.fetch_sub(MAX_WORKERS, Ordering::SeqCst);
    }

    #[test]
    fn the_forwarding_role_is_the_callers() {
        assert_eq!(role(Access::Reader).ok(), Some("os:reader"));
        assert_eq!(role(Access::Operator).ok(), Some("os:operator"));
        assert_eq!(role(Access::Admin).ok(), Some("os:admin"));
        assert_eq!(role(Access::Maintenance).err().map(|s| s.code), Some(code::PERMISSION_DENIED));
    }
}
