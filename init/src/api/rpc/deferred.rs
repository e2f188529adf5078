// SPDX-License-Identifier: Apache-2.0
//! Unary calls whose answer needs blocking work (`TimeCheck` asks a time server): the work
//! runs on a worker thread, its one reply comes back on a channel and rings the API's bell,
//! and the call is answered from a feed, which is a unary answer on the wire (headers, one
//! message, trailers). Bounded: [`MAX_AT_ONCE`] such threads on the node, and the call ends
//! with `DeadlineExceeded` at its limit whatever the thread does.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::time::{Duration, Instant};

use grpc::{code, Status};

use super::dispatch::{Call, Feed, FeedCtx, Flow};

/// Most deferred calls running at once.
pub const MAX_AT_ONCE: usize = 4;

static RUNNING: AtomicUsize = AtomicUsize::new(0);

/// Gives the place back when the thread ends (or never started).
struct Place;

impl Drop for Place {
    fn drop(&mut self) {
        RUNNING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Run `work` on a worker thread (`api-deferred`); the feed that answers the call with its
/// reply.
pub fn run<F>(call: &Call<'_>, limit: Duration, work: F) -> Result<Box<dyn Feed>, Status>
where
    F: FnOnce() -> Result<Vec<u8>, Status> + Send + 'static,
{
    let held = RUNNING
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| (n < MAX_AT_ONCE).then_some(n + 1));
    if held.is_err() {
        return Err(Status::new(
            code::RESOURCE_EXHAUSTED,
            format!("at most {MAX_AT_ONCE} such calls at once on this node: try again"),
        ));
    }
    let place = Place;
    let (tx, rx) = mpsc::sync_channel(1);
    let bell = call.bell.cloned();
    evloop::spawn_worker("api-deferred", move || {
        let _place = place;
        let _ = tx.send(work());
        if let Some(b) = bell {
            b.ring();
        }
    })
    .map_err(|e| Status::new(code::UNAVAILABLE, format!("no thread for the call: {e}")))?;
    Ok(Box::new(Deferred { rx, deadline: call.now + limit, limit }))
}

struct Deferred {
    rx: Receiver<Result<Vec<u8>, Status>>,
    deadline: Instant,
    limit: Duration,
}

impl Feed for Deferred {
    fn next(&mut self, ctx: &FeedCtx<'_>, _room: usize, out: &mut Vec<Vec<u8>>) -> Flow {
        match self.rx.try_recv() {
            Ok(Ok(reply)) => {
                out.push(reply);
                Flow::Done(Status::new(code::OK, ""))
            }
            Ok(Err(status)) => Flow::Done(status),
            Err(TryRecvError::Disconnected) => {
                Flow::Done(Status::new(code::INTERNAL, "the call's thread ended without an answer"))
            }
            Err(TryRecvError::Empty) if ctx.now >= self.deadline => Flow::Done(Status::new(
                code::DEADLINE_EXCEEDED,
                format!("no answer within {} s", self.limit.as_secs()),
            )),
            Err(TryRecvError::Empty) => Flow::More,
        }
    }

    fn poll_at(&self) -> Option<Instant> {
        Some(self.deadline)
    }
}
