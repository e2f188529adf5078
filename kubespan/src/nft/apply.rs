// SPDX-License-Identifier: Apache-2.0
//! [`Nft`]: the kernel adapter. A blocking `NETLINK_NETFILTER` socket (net's shared
//! [`NlSocket`], its raw request and batch calls) that sends the batches [`super::compile`]
//! builds and checks every message's ack.
//!
//! nfnetlink processes a batch inside `sendmsg`, so when `send` returns every ack and error is
//! already queued on the socket; reading them never waits on the kernel's work. The receive
//! timeout is only a guard against a kernel that stays silent.
//!
//! State kept between calls: the plan last applied and the kernel handle of the table it
//! created. Before a set-only update the table is looked up: if it is gone, was replaced (a new
//! handle) or lost a chain or set (its object count changed), the update becomes a full
//! replace. A failed update falls back to a full replace too.

use std::time::{Duration, Instant};

use log::{debug, info, warn};
use net::netlink::{NlError, NlOptions, NlSocket};
use nix::errno::Errno;

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
/// The socket: 8 MiB both ways, a receive timeout, no strict checking (rtnetlink only).
const OPTIONS: NlOptions = NlOptions {
    strict: false,
    rcvbuf: SOCKET_BUFFER,
    sndbuf: Some(SOCKET_BUFFER),
    recv_timeout: Some(REPLY_TIMEOUT),
};

/// A failure to program nftables.
#[derive(Debug, thiserror::Error)]
pub enum NftError {
    /// The plan itself is invalid; nothing was sent.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A message did not fit its length fields; nothing was sent.
    #[error(transparent)]
    Encode(#[from] TooLong),
    /// The socket failed, or a reply did not parse (the error says which call).
    #[error("nftables: {0}")]
    Netlink(NlError),
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

impl From<NlError> for NftError {
    /// A refusal names the message the kernel refused (the shared socket's target).
    fn from(e: NlError) -> Self {
        match e {
            NlError::Kernel { target, errno, message, .. } => {
                NftError::Kernel { what: target, errno, message }
            }
            other => NftError::Netlink(other),
        }
    }
}

/// The `op` of the shared socket's calls, as socket errors show them.
const LOOKUP: &str = "lookup";
const TRANSACTION: &str = "transaction";

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
    sock: NlSocket,
    current: Option<Current>,
    /// The table we last built and have not removed, kept across failures: a rename deletes
    /// it in the same transaction that builds the new one.
    built: Option<String>,
    last_transaction: Option<Duration>,
}

impl Nft {
    /// Opens a netfilter socket in the calling thread's network namespace.
    pub fn new() -> Result<Self, NftError> {
        // The FORCE buffer sizes ignore net.core.{r,w}mem_max but need CAP_NET_ADMIN, which we
        // have whenever we may change nftables at all; the plain ones are the fallback.
        let sock = NlSocket::with_options(NETLINK_NETFILTER, &OPTIONS)?;
        Ok(Self { sock, current: None, built: None, last_transaction: None })
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
        let batch = replace_batch(&want, self.built.as_deref(), self.sock.next_seq());
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
        let table = self.built.clone().unwrap_or_else(|| super::plan::DEFAULT_TABLE.to_owned());
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
        let mut b = Batch::new(self.sock.next_seq());
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
        let Some(batch) = delta.batch(table, self.sock.next_seq()) else {
            return Ok(Some(Applied::Unchanged));
        };
        let (removed, added) = (delta.removed(), delta.added());
        self.send(batch)?;
        debug!(target: "kubespan.nft", "table inet {table}: {removed} ranges out, {added} in");
        Ok(Some(Applied::Delta { removed, added }))
    }

    /// Looks our table up: its handle and object count, or `None` if it does not exist.
    fn table_info(&mut self, name: &str) -> Result<Option<TableInfo>, NftError> {
        let what = format!("GETTABLE {name}");
        let mut payload = Vec::with_capacity(name.len() + 12);
        payload.extend_from_slice(&[NFPROTO_INET, 0, 0, 0]);
        let name_len = u16::try_from(name.len() + 5)
            .map_err(|_| NftError::Reply { op: what.clone(), why: "table name too long" })?;
        payload.extend_from_slice(&name_len.to_ne_bytes());
        payload.extend_from_slice(&NFTA_TABLE_NAME.to_ne_bytes());
        payload.extend_from_slice(name.as_bytes());
        payload.push(0);
        let ty = (NFNL_SUBSYS_NFTABLES << 8) | u16::from(NFT_MSG_GETTABLE);
        let replies = match self.sock.request_raw(LOOKUP, &what, ty, 0, &payload) {
            Ok(r) => r,
            Err(NlError::Kernel { errno: Errno::ENOENT, .. }) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let mut info = None;
        for r in replies.iter().filter(|r| r.ty == (NFNL_SUBSYS_NFTABLES << 8)) {
            // The attributes follow the 4-byte nfgenmsg.
            let attrs = r.payload.get(4..).unwrap_or_default();
            info = Some(parse_table(attrs).ok_or_else(|| NftError::Reply {
                op: what.clone(),
                why: "table reply without handle or use count",
            })?);
        }
        Ok(info)
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
        let result = self.sock.send_batch(TRANSACTION, &bytes, &sent, next);
        self.last_transaction = Some(started.elapsed());
        Ok(result?)
    }
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
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
