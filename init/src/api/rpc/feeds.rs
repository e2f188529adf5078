// SPDX-License-Identifier: Apache-2.0
//! The sources of the server streams: the kernel log (`Dmesg`), the node's own log (`Logs`)
//! and its events (`Events`). Each gives what is there when asked, within the room it is
//! given, and keeps its place; none buffers for a slow client (the kernel and the log ring
//! hold the lines, the event log the events).

use std::fs::File;
use std::io::{ErrorKind, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use grpc::{code, Status};
use talos_api::common::Metadata;
use talos_api::machine as m;

use super::dispatch::{Feed, FeedCtx, Flow};
use crate::logring;

/// How often a follower looks for new lines when nothing else wakes the loop.
const FOLLOW_EVERY: Duration = Duration::from_millis(500);
/// Bytes of lines in one `Data` message.
const CHUNK: usize = 16 << 10;

/// `/dev/kmsg`, read without blocking.
pub struct DmesgFeed {
    kmsg: File,
    follow: bool,
    hostname: String,
    next: Instant,
}

impl DmesgFeed {
    /// Open the kernel log; with `tail` (and `follow`) only records from now on are sent.
    pub fn open(path: &Path, follow: bool, tail: bool, hostname: String) -> std::io::Result<Self> {
        let kmsg =
            std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
        if tail && follow {
            // SEEK_END on /dev/kmsg: the next read returns the next new record.
            // SAFETY: lseek on a file descriptor this struct owns; no memory is touched.
            unsafe { libc::lseek(std::os::fd::AsRawFd::as_raw_fd(&kmsg), 0, libc::SEEK_END) };
        }
        Ok(Self { kmsg, follow, hostname, next: Instant::now() })
    }
}

impl Feed for DmesgFeed {
    fn next(&mut self, ctx: &FeedCtx<'_>, room: usize, out: &mut Vec<Vec<u8>>) -> Flow {
        self.next = ctx.now + FOLLOW_EVERY;
        let mut chunk = Vec::new();
        let mut used = 0;
        // One record per read; a record is at most about 8 KiB.
        let mut buf = vec![0u8; 16 << 10];
        let drained = loop {
            if used >= room {
                break false;
            }
            match self.kmsg.read(&mut buf) {
                Ok(0) => break true,
                Ok(n) => {
                    let line = super::super::hostinfo::record(&String::from_utf8_lossy(&buf[..n]));
                    chunk.extend_from_slice(line.as_bytes());
                    chunk.push(b'\n');
                    if chunk.len() >= CHUNK {
                        used += chunk.len();
                        out.push(data(&self.hostname, std::mem::take(&mut chunk)));
                    }
                }
                // Records overwritten while we read: go on from the next one.
                Err(e) if e.raw_os_error() == Some(libc::EPIPE) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => break true,
                Err(e) => {
                    return Flow::Done(Status::new(code::INTERNAL, format!("/dev/kmsg: {e}")))
                }
            }
        };
        if !chunk.is_empty() {
            out.push(data(&self.hostname, chunk));
        }
        if drained && !self.follow {
            return Flow::Done(Status::new(code::OK, ""));
        }
        Flow::More
    }

    fn poll_at(&self) -> Option<Instant> {
        self.follow.then_some(self.next)
    }
}

/// The node's log ring (`machined`'s log).
pub struct LogsFeed {
    /// The sequence number of the next line to send.
    from: u64,
    follow: bool,
    hostname: String,
    next: Instant,
}

impl LogsFeed {
    /// From the last `tail_lines` lines (negative: all that are kept).
    pub fn new(follow: bool, tail_lines: i32, hostname: String) -> Self {
        let (lines, next) = logring::since(0);
        let kept = lines.len() as u64;
        let from = match u64::try_from(tail_lines) {
            Ok(n) => next.saturating_sub(n.min(kept)),
            Err(_) => next.saturating_sub(kept),
        };
        Self { from, follow, hostname, next: Instant::now() }
    }
}

impl Feed for LogsFeed {
    fn next(&mut self, ctx: &FeedCtx<'_>, room: usize, out: &mut Vec<Vec<u8>>) -> Flow {
        self.next = ctx.now + FOLLOW_EVERY;
        let (lines, next) = logring::since(self.from);
        let first = next.saturating_sub(lines.len() as u64);
        // Lines the ring dropped before this client took them are gone; it goes on from the
        // oldest kept.
        self.from = self.from.max(first);
        let mut chunk = Vec::new();
        let mut used = 0;
        for line in &lines {
            if used + chunk.len() >= room {
                break;
            }
            chunk.extend_from_slice(line.as_bytes());
            chunk.push(b'\n');
            self.from += 1;
            if chunk.len() >= CHUNK {
                used += chunk.len();
                out.push(data(&self.hostname, std::mem::take(&mut chunk)));
            }
        }
        if !chunk.is_empty() {
            out.push(data(&self.hostname, chunk));
        }
        if !self.follow && self.from >= next {
            return Flow::Done(Status::new(code::OK, ""));
        }
        Flow::More
    }

    fn poll_at(&self) -> Option<Instant> {
        self.follow.then_some(self.next)
    }
}

/// The node's events from a sequence number on.
pub struct EventsFeed {
    from: u64,
    actor: String,
    hostname: String,
}

impl EventsFeed {
    /// Events from `from` on; with `actor`, only those of that actor (keelson's events have
    /// none).
    pub fn new(from: u64, actor: String, hostname: String) -> Self {
        Self { from, actor, hostname }
    }
}

impl Feed for EventsFeed {
    fn next(&mut self, ctx: &FeedCtx<'_>, room: usize, out: &mut Vec<Vec<u8>>) -> Flow {
        let mut used = 0;
        for e in ctx.events.since(self.from) {
            if used >= room {
                break;
            }
            self.from = e.seq + 1;
            if !self.actor.is_empty() {
                continue;
            }
            let msg = m::Event {
                metadata: Metadata::of(&self.hostname),
                data: Some(e.data.clone()),
                id: e.id.clone(),
                actor_id: String::new(),
            };
            let bytes = talos_api::Message::encode_to_vec(&msg);
            used += bytes.len();
            out.push(bytes);
        }
        // The event log holds only so many: a client that fell behind it lost the rest.
        self.from = self.from.max(ctx.events.oldest_seq());
        Flow::More
    }
}

/// A `common.Data` message of the node's.
pub(super) fn data(hostname: &str, bytes: Vec<u8>) -> Vec<u8> {
    talos_api::Message::encode_to_vec(&talos_api::common::Data {
        metadata: Metadata::of(hostname),
        bytes,
    })
}
