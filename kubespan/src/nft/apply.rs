// SPDX-License-Identifier: Apache-2.0
//! [`Nft`]: the kernel adapter. A blocking `NETLINK_NETFILTER` socket that sends the batches
//! [`super::compile`] builds and checks every message's ack.
//!
//! nfnetlink processes a batch inside `sendmsg`, so when `send` returns every ack and error is
//! already queued on the socket; reading them never waits on the kernel's work. The receive
//! timeout is only a guard against a kernel that stays silent.
//!
//! State kept between calls: the plan last applied and the kernel handle of the table it
//! created. Before a set-only update the table is looked up: if it is gone, was replaced (a new
//! handle) or lost a chain or set (its object count changed), the update becomes a full
//! replace. A failed update falls back to a full replace too.

use std::io;
use std::time::{Duration, Instant};

use log::{debug, info, warn};
use netlink_sys::{Socket, SocketAddr};
use nix::errno::Errno;
use nix::sys::socket::{setsockopt, sockopt, MsgFlags};
use nix::sys::time::TimeVal;

use super::compile::{drop_table, replace_batch, Delta};
use super::plan::{NftPlan, PlanError, Resolved};
use super::wire::*;

/// Socket buffers, both ways: 8 MiB, as Talos uses. A full table of 10,000 ranges is ~0.5 MiB
/// in one `sendmsg`, and netlink refuses a datagram larger than the send buffer (`EMSGSIZE`).
const SOCKET_BUFFER: usize = 8 << 20;
/// How long to wait for acks the kernel must already have queued.
const REPLY_TIMEOUT: Duration = Duration::from_secs(5);
/// Chains and sets in our table, as the kernel counts them in `NFTA_TABLE_USE`.
const TABLE_OBJECTS: u32 = 4;
/// `NLM_F_CAPPED` and `NLM_F_ACK_TLVS` on an `NLMSG_ERROR`.
const NLM_F_CAPPED: u16 = 0x100;
const NLM_F_ACK_TLVS: u16 = 0x200;
/// `NLMSGERR_ATTR_MSG`: the extended ack text.
const NLMSGERR_ATTR_MSG: u16 = 1;

/// A failure to program nftables.
#[derive(Debug, thiserror::Error)]
pub enum NftError {
    /// The plan itself is invalid; nothing was sent.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A message did not fit its length fields; nothing was sent.
    #[error(transparent)]
    Encode(#[from] TooLong),
    /// The socket failed (`op` says where).
    #[error("nftables {op}: {source}")]
    Io {
        /// The socket operation.
        op: &'static str,
        /// The error.
        source: io::Error,
    },
    /// The kernel rejected a message; the whole transaction was rolled back.
    #[error("nftables {what}: {errno}{}", message.as_deref().map(|m| format!(" ({m})")).unwrap_or_default())]
    Kernel {
        /// The message that failed, e.g. `NEWSETELEM kubespan_targets_ipv4 (3 ranges)`.
        what: String,
        /// The kernel's errno.
        errno: Errno,
        /// The kernel's extended ack text, when it gave one.
        message: Option<String>,
    },
    /// The kernel's answer was malformed or incomplete.
    #[error("nftables {op}: {why}")]
    Reply {
        /// The request.
        op: String,
        /// What was wrong.
        why: &'static str,
    },
}

/// What [`Nft::apply`] did.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Applied {
    /// The table was (re)built in one transaction: first apply, a structural change, or a
    /// repair. `messages` counts the transaction's messages.
    Full {
        /// Messages in the transaction (without the batch markers).
        messages: usize,
    },
    /// Only set elements changed.
    Delta {
        /// Ranges removed from the sets.
        removed: usize,
        /// Ranges added to the sets.
        added: usize,
    },
    /// The kernel already matched the plan; nothing was sent.
    Unchanged,
}

/// The table as the kernel reports it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct TableInfo {
    handle: u64,
    objects: u32,
}

/// What we last put into the kernel.
#[derive(Debug)]
struct Current {
    plan: Resolved,
    handle: u64,
}

/// Programs KubeSpan's nftables table in the network namespace it was opened in.
#[derive(Debug)]
pub struct Nft {
    sock: Socket,
    seq: u32,
    buf: Vec<u8>,
    current: Option<Current>,
    /// The table we last built and have not removed, kept across failures: a rename deletes
    /// it in the same transaction that builds the new one.
    built: Option<String>,
    last_transaction: Option<Duration>,
}

impl Nft {
    /// Opens a netfilter socket in the calling thread's network namespace.
    pub fn new() -> Result<Self, NftError> {
        let io = |op| move |source| NftError::Io { op, source };
        let mut sock = Socket::new(NETLINK_NETFILTER).map_err(io("socket"))?;
        sock.bind_auto().map_err(io("bind"))?;
        // The FORCE variants ignore net.core.{r,w}mem_max but need CAP_NET_ADMIN, which we
        // have whenever we may change nftables at all; the plain ones are the fallback.
        if setsockopt(&sock, sockopt::SndBufForce, &SOCKET_BUFFER).is_err() {
            setsockopt(&sock, sockopt::SndBuf, &SOCKET_BUFFER)
                .map_err(|e| NftError::Io { op: "SO_SNDBUF", source: e.into() })?;
        }
        if setsockopt(&sock, sockopt::RcvBufForce, &SOCKET_BUFFER).is_err() {
            setsockopt(&sock, sockopt::RcvBuf, &SOCKET_BUFFER)
                .map_err(|e| NftError::Io { op: "SO_RCVBUF", source: e.into() })?;
        }
        let timeout = TimeVal::new(REPLY_TIMEOUT.as_secs() as i64, 0);
        setsockopt(&sock, sockopt::ReceiveTimeout, &timeout)
            .map_err(|e| NftError::Io { op: "SO_RCVTIMEO", source: e.into() })?;
        sock.set_ext_ack(true).map_err(io("NETLINK_EXT_ACK"))?;
        sock.set_cap_ack(true).map_err(io("NETLINK_CAP_ACK"))?;
        Ok(Self {
            sock,
            seq: 1,
            buf: Vec::with_capacity(64 * 1024),
            current: None,
            built: None,
            last_transaction: None,
        })
    }

    /// Makes the kernel match `plan`, touching nothing but our table, in one transaction.
    ///
    /// The first call, a changed table name or MTU, and any sign that the table was changed
    /// behind our back rebuild the table; otherwise only the set elements that differ are
    /// sent. On error the kernel keeps its previous state (transactions are atomic) and the
    /// next call rebuilds.
    pub fn apply(&mut self, plan: &NftPlan) -> Result<Applied, NftError> {
        let want = plan.resolve()?;
        if let Some(cur) = self.current.take() {
            if cur.plan.shape == want.shape {
                match self.update(&cur, &want) {
                    Ok(Some(done)) => {
                        self.current = Some(Current { plan: want, handle: cur.handle });
                        return Ok(done);
                    }
                    Ok(None) => {}
                    Err(e) => {
                        warn!(target: "kubespan.nft", "set update failed, rebuilding the table: {e}");
                    }
                }
            }
        }
        let batch = replace_batch(&want, self.built.as_deref(), self.seq);
        let messages = batch.len();
        self.send(batch)?;
        let table = &want.shape.table;
        let info = self.table_info(table)?.ok_or_else(|| NftError::Reply {
            op: format!("GETTABLE {table}"),
            why: "table missing right after it was created",
        })?;
        info!(
            target: "kubespan.nft",
            "table inet {table} built: {} IPv4 and {} IPv6 ranges, {messages} messages",
            want.targets.v4.len(),
            want.targets.v6.len()
        );
        self.built = Some(table.clone());
        self.current = Some(Current { plan: want, handle: info.handle });
        Ok(Applied::Full { messages })
    }

    /// Deletes our table (the last one built, else the default name); an absent table is
    /// fine. Other tables are never touched. Returns whether a table was there.
    pub fn remove(&mut self) -> Result<bool, NftError> {
        let table = self.built.clone().unwrap_or_else(|| super::DEFAULT_TABLE.to_owned());
        self.remove_table(&table)
    }

    /// Deletes table `name` (family inet) if it exists; returns whether it did. An absent
    /// table costs one read-only lookup: no transaction and no log line, so a node that never
    /// enables KubeSpan leaves nf_tables alone.
    pub fn remove_table(&mut self, name: &str) -> Result<bool, NftError> {
        if self.current.as_ref().is_some_and(|c| c.plan.shape.table == name) {
            self.current = None;
        }
        if self.table_info(name)?.is_none() {
            if self.built.as_deref() == Some(name) {
                self.built = None;
            }
            return Ok(false);
        }
        let mut b = Batch::new(self.seq);
        drop_table(&mut b, name);
        self.send(b)?;
        if self.built.as_deref() == Some(name) {
            self.built = None;
        }
        info!(target: "kubespan.nft", "table inet {name} removed");
        Ok(true)
    }

    /// The set-only path: `Ok(None)` when the table is not as we left it.
    fn update(&mut self, cur: &Current, want: &Resolved) -> Result<Option<Applied>, NftError> {
        let table = &want.shape.table;
        match self.table_info(table)? {
            Some(t) if t.handle == cur.handle && t.objects == TABLE_OBJECTS => {}
            seen => {
                info!(target: "kubespan.nft", "table inet {table} changed outside keelson ({seen:?}); rebuilding");
                return Ok(None);
            }
        }
        let delta = Delta::between(&cur.plan.targets, &want.targets);
        let Some(batch) = delta.batch(table, self.seq) else {
            return Ok(Some(Applied::Unchanged));
        };
        let (removed, added) = (delta.removed(), delta.added());
        self.send(batch)?;
        debug!(target: "kubespan.nft", "table inet {table}: {removed} ranges out, {added} in");
        Ok(Some(Applied::Delta { removed, added }))
    }

    /// Looks our table up: its handle and object count, or `None` if it does not exist.
    fn table_info(&mut self, name: &str) -> Result<Option<TableInfo>, NftError> {
        let op = format!("GETTABLE {name}");
        let seq = self.seq;
        self.seq = self.seq.wrapping_add(1);
        let mut msg = Vec::with_capacity(64);
        let ty = (NFNL_SUBSYS_NFTABLES << 8) | u16::from(NFT_MSG_GETTABLE);
        msg.extend_from_slice(&0u32.to_ne_bytes());
        msg.extend_from_slice(&ty.to_ne_bytes());
        msg.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
        msg.extend_from_slice(&seq.to_ne_bytes());
        msg.extend_from_slice(&0u32.to_ne_bytes());
        msg.extend_from_slice(&[NFPROTO_INET, 0, 0, 0]);
        let name_len = u16::try_from(name.len() + 5)
            .map_err(|_| NftError::Reply { op: op.clone(), why: "table name too long" })?;
        msg.extend_from_slice(&name_len.to_ne_bytes());
        msg.extend_from_slice(&NFTA_TABLE_NAME.to_ne_bytes());
        msg.extend_from_slice(name.as_bytes());
        msg.push(0);
        while !msg.len().is_multiple_of(4) {
            msg.push(0);
        }
        let total = u32::try_from(msg.len()).unwrap_or(u32::MAX);
        if let Some(len) = msg.get_mut(..4) {
            len.copy_from_slice(&total.to_ne_bytes());
        }
        self.send_bytes(&msg)?;

        let mut info = None;
        loop {
            let replies = self.receive()?;
            for r in replies {
                if r.seq != seq {
                    continue;
                }
                match r.body {
                    Reply::Ack => return Ok(info),
                    Reply::Error(Errno::ENOENT, _) => return Ok(None),
                    Reply::Error(errno, message) => {
                        return Err(NftError::Kernel { what: op, errno, message });
                    }
                    Reply::Data(ty, attrs) if ty == (NFNL_SUBSYS_NFTABLES << 8) => {
                        info = Some(parse_table(&attrs).ok_or_else(|| NftError::Reply {
                            op: op.clone(),
                            why: "table reply without handle or use count",
                        })?);
                    }
                    Reply::Data(..) | Reply::Done => {}
                }
            }
        }
    }

    /// How long the last transaction took from `sendmsg` to its last ack: the kernel's share
    /// of an apply (for benchmarks and debug logs).
    pub fn last_transaction(&self) -> Option<Duration> {
        self.last_transaction
    }

    /// Sends a batch and checks that every message in it was acked.
    fn send(&mut self, batch: Batch) -> Result<(), NftError> {
        let (bytes, sent, next) = batch.finish()?;
        let started = Instant::now();
        let result = self.send_checked(&bytes, &sent);
        self.last_transaction = Some(started.elapsed());
        self.seq = next;
        result
    }

    fn send_checked(&mut self, bytes: &[u8], sent: &[Sent]) -> Result<(), NftError> {
        if bytes.len() > SOCKET_BUFFER / 2 {
            // The kernel wants the whole datagram to fit in the send buffer.
            let size = bytes.len().saturating_mul(2);
            if setsockopt(&self.sock, sockopt::SndBufForce, &size).is_err() {
                let _ = setsockopt(&self.sock, sockopt::SndBuf, &size);
            }
        }
        self.send_bytes(bytes)?;
        let first = sent.first().map_or(0, |s| s.seq);
        let mut pending = sent.len();
        let mut failure: Option<NftError> = None;
        while pending > 0 {
            let replies = match self.receive() {
                Ok(r) => r,
                // Every answer is queued before send returns; silence after an error means
                // the kernel has nothing more to say.
                Err(_) if failure.is_some() => break,
                Err(e) => return Err(e),
            };
            for r in replies {
                let msg = r.seq.checked_sub(first).and_then(|i| sent.get(i as usize));
                let Some(msg) = msg else {
                    // An error for a batch marker means the whole batch was refused (EPERM
                    // without CAP_NET_ADMIN arrives on BATCH_BEGIN).
                    if let Reply::Error(errno, message) = r.body {
                        let what = "batch".to_owned();
                        return Err(failure.unwrap_or(NftError::Kernel { what, errno, message }));
                    }
                    continue;
                };
                match r.body {
                    Reply::Ack => pending -= 1,
                    Reply::Error(errno, message) => {
                        pending -= 1;
                        // The first failure is the cause; later ones are often its echo.
                        if failure.is_none() {
                            failure =
                                Some(NftError::Kernel { what: msg.what.clone(), errno, message });
                        }
                    }
                    Reply::Data(..) | Reply::Done => {}
                }
            }
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn send_bytes(&mut self, bytes: &[u8]) -> Result<(), NftError> {
        let kernel = SocketAddr::new(0, 0);
        loop {
            match self.sock.send_to(bytes, &kernel, 0) {
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(source) => return Err(NftError::Io { op: "send", source }),
            }
        }
    }

    /// Reads one datagram and splits it into messages.
    fn receive(&mut self) -> Result<Vec<Message>, NftError> {
        let io = |source| NftError::Io { op: "recv", source };
        let peek = MsgFlags::MSG_PEEK.bits() | MsgFlags::MSG_TRUNC.bits();
        let len = loop {
            self.buf.clear();
            let size = match self.sock.recv(&mut self.buf, peek) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io(e)),
            };
            self.buf.clear();
            self.buf.reserve(size);
            match self.sock.recv(&mut self.buf, 0) {
                Ok(n) => break n.min(self.buf.len()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io(e)),
            }
        };
        parse_messages(self.buf.get(..len).unwrap_or_default())
            .ok_or_else(|| NftError::Reply { op: "recv".into(), why: "truncated netlink message" })
    }
}

/// One message from the kernel.
#[derive(Debug)]
struct Message {
    seq: u32,
    body: Reply,
}

#[derive(Debug)]
enum Reply {
    Ack,
    Error(Errno, Option<String>),
    Done,
    /// An nf_tables object: its message type and attribute area.
    Data(u16, Vec<u8>),
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Splits a datagram into messages; `None` if a length field points past the end.
fn parse_messages(data: &[u8]) -> Option<Vec<Message>> {
    let mut out = Vec::new();
    let mut off = 0;
    while off + 16 <= data.len() {
        let len = u32_at(data, off)? as usize;
        let msg = data.get(off..off + len)?;
        if len < 16 {
            return None;
        }
        let (ty, flags, seq) = (u16_at(msg, 4)?, u16_at(msg, 6)?, u32_at(msg, 8)?);
        let body = match ty {
            NLMSG_ERROR => {
                let code = i32::from_ne_bytes(msg.get(16..20)?.try_into().ok()?);
                if code == 0 {
                    Reply::Ack
                } else {
                    let rest = msg.get(20..)?;
                    Reply::Error(Errno::from_raw(code.saturating_abs()), ext_ack(flags, rest))
                }
            }
            NLMSG_DONE => Reply::Done,
            _ => Reply::Data(ty, msg.get(20..)?.to_vec()),
        };
        out.push(Message { seq, body });
        off += len.next_multiple_of(4);
    }
    Some(out)
}

/// The extended ack text after the echoed request header (16 bytes when capped).
fn ext_ack(flags: u16, rest: &[u8]) -> Option<String> {
    if flags & NLM_F_ACK_TLVS == 0 {
        return None;
    }
    let skip = if flags & NLM_F_CAPPED != 0 {
        16
    } else {
        (u32_at(rest, 0)? as usize).next_multiple_of(4)
    };
    let text = attrs(rest.get(skip..)?).find(|(ty, _)| *ty == NLMSGERR_ATTR_MSG)?.1;
    let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
    Some(String::from_utf8_lossy(text.get(..end)?).into_owned())
}

/// Iterates over `(type without flags, value)` of a TLV area, stopping at the first bad one.
fn attrs(mut area: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        let len = usize::from(u16_at(area, 0)?);
        let ty = u16_at(area, 2)? & 0x3fff;
        let value = area.get(4..len)?;
        area = area.get(len.next_multiple_of(4)..).unwrap_or_default();
        Some((ty, value))
    })
}

fn parse_table(area: &[u8]) -> Option<TableInfo> {
    let (mut handle, mut objects) = (None, None);
    for (ty, v) in attrs(area) {
        match ty {
            NFTA_TABLE_USE => objects = Some(u32::from_be_bytes(v.try_into().ok()?)),
            NFTA_TABLE_HANDLE => handle = Some(u64::from_be_bytes(v.try_into().ok()?)),
            _ => {}
        }
    }
    Some(TableInfo { handle: handle?, objects: objects? })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_error_with_ext_ack() {
        // NLMSG_ERROR, capped, with TLVs: errno -2, echoed 16-byte header, MSG "no set\0".
        let mut m = Vec::new();
        let body_len = 16 + 4 + 16 + 12;
        m.extend_from_slice(&(body_len as u32).to_ne_bytes());
        m.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
        m.extend_from_slice(&(NLM_F_CAPPED | NLM_F_ACK_TLVS).to_ne_bytes());
        m.extend_from_slice(&9u32.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(&(-2i32).to_ne_bytes());
        m.extend_from_slice(&[0u8; 16]);
        m.extend_from_slice(&11u16.to_ne_bytes());
        m.extend_from_slice(&1u16.to_ne_bytes());
        m.extend_from_slice(b"no set\0\0");
        let parsed = parse_messages(&m).unwrap();
        assert_eq!(parsed.len(), 1);
        assert_eq!(parsed[0].seq, 9);
        match &parsed[0].body {
            Reply::Error(e, msg) => {
                assert_eq!(*e, Errno::ENOENT);
                assert_eq!(msg.as_deref(), Some("no set"));
            }
            other => panic!("{other:?}"),
        }
        // A length that runs past the datagram is refused, not read past.
        assert!(parse_messages(&m[..m.len() - 4]).is_none());
    }

    #[test]
    fn parses_table_attributes() {
        let mut a = Vec::new();
        for (ty, v) in [
            (NFTA_TABLE_USE, 4u32.to_be_bytes().to_vec()),
            (NFTA_TABLE_HANDLE, 77u64.to_be_bytes().to_vec()),
        ] {
            a.extend_from_slice(&((4 + v.len()) as u16).to_ne_bytes());
            a.extend_from_slice(&ty.to_ne_bytes());
            a.extend_from_slice(&v);
        }
        assert_eq!(parse_table(&a), Some(TableInfo { handle: 77, objects: 4 }));
        assert_eq!(parse_table(&a[..8]), None);
    }
}
