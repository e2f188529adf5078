// SPDX-License-Identifier: Apache-2.0
//! `cosi.resource.State`: COSI's state service over the store, as `talosctl get` calls it.
//! The work is in [`crate::api::cosi`]; this decodes requests and turns lists and watches
//! into server streams.

use grpc::{code, Status};
use net::resource::Kind;
use talos_api::cosi as c;

use super::dispatch::{decode, Call, Feed, FeedCtx, Flow, Method, Reply, SMALL_REQUEST};
use crate::api::cosi::handlers::{self, ListFeed};
use crate::api::cosi::watch::{self, WatchFeed};

const fn method(
    path: &'static str,
    handler: fn(&mut Call<'_>, &[u8]) -> Result<Reply, Status>,
) -> Method {
    Method { path, max_request: SMALL_REQUEST, handler }
}

/// The methods served.
pub const METHODS: &[Method] = &[
    method(c::path::GET, get),
    method(c::path::LIST, list),
    method(c::path::WATCH, watch),
    method(c::path::CREATE, refuse),
    method(c::path::UPDATE, refuse),
    method(c::path::DESTROY, refuse),
];

fn get(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    let req: c::GetRequest = decode(req)?;
    Reply::unary(&handlers::get(call.rt.store(), call.access, &req)?)
}

fn list(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    let req: c::ListRequest = decode(req)?;
    let feed = ListFeed::start(call.rt.store(), call.access, &req)?;
    Ok(Reply::Stream(Box::new(ListStream(feed))))
}

fn watch(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    let req: c::WatchRequest = decode(req)?;
    let feed = WatchFeed::start(call.rt.store(), call.cosi, call.access, &req)?;
    Ok(Reply::Stream(Box::new(WatchStream(feed))))
}

/// Create, Update and Destroy: the request is not even decoded.
fn refuse(_: &mut Call<'_>, _: &[u8]) -> Result<Reply, Status> {
    Err(handlers::refuse_write())
}

struct ListStream(ListFeed);

impl Feed for ListStream {
    fn next(&mut self, ctx: &FeedCtx<'_>, room: usize, out: &mut Vec<Vec<u8>>) -> Flow {
        if self.0.fill(ctx.rt.store(), room, out) {
            Flow::Done(Status::new(code::OK, ""))
        } else {
            Flow::More
        }
    }

    fn ready(&self) -> bool {
        self.0.has_more()
    }
}

struct WatchStream(WatchFeed);

impl Feed for WatchStream {
    fn next(&mut self, ctx: &FeedCtx<'_>, room: usize, out: &mut Vec<Vec<u8>>) -> Flow {
        match self.0.fill(ctx.rt.store(), ctx.cosi, room, out) {
            watch::Flow::More => Flow::More,
            watch::Flow::Done(status) => Flow::Done(status),
        }
    }

    fn kinds(&self) -> Vec<Kind> {
        self.0.kind().into_iter().collect()
    }

    fn ready(&self) -> bool {
        self.0.has_more()
    }
}
