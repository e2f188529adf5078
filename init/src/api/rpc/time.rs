// SPDX-License-Identifier: Apache-2.0
//! `time.TimeService`: the node's clock and its time server, from keelson's time sync (the
//! `TimeStatus` it keeps). Talos asks the server while the call waits; keelson answers from
//! its last exchange with it, so the call never blocks the loop.

use std::time::{Duration, SystemTime};

use grpc::Status;
use net::resource::{Namespace, TimeStatus, TIME_STATUS_ID};
use talos_api::common::Metadata;
use talos_api::google::{Empty, Timestamp};
use talos_api::time::{Time, TimeResponse};

use super::dispatch::{decode, Call, Method, Reply, SMALL_REQUEST};

/// The methods served.
pub const METHODS: &[Method] =
    &[Method { path: "/time.TimeService/Time", max_request: SMALL_REQUEST, handler: time }];

fn time(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    let _: Empty = decode(req)?;
    let now = SystemTime::now();
    let status = call.rt.store().get_spec::<TimeStatus>(Namespace::Runtime, TIME_STATUS_ID);
    let (server, remote) = match status {
        Some(s) if !s.server.is_empty() => (s.server.clone(), Some(shifted(now, s.offset_ns))),
        _ => (String::new(), None),
    };
    Reply::unary(&TimeResponse {
        messages: vec![Time {
            metadata: Metadata::of(&call.hostname()),
            server,
            localtime: Some(Timestamp::from_system(now)),
            remotetime: remote.map(Timestamp::from_system),
        }],
    })
}

/// `now` moved by the server's offset (server minus local, in nanoseconds).
fn shifted(now: SystemTime, offset_ns: i64) -> SystemTime {
    let by = Duration::from_nanos(offset_ns.unsigned_abs());
    let moved = if offset_ns >= 0 { now.checked_add(by) } else { now.checked_sub(by) };
    moved.unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_remote_time_is_the_local_time_moved_by_the_offset() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(100);
        assert_eq!(shifted(t, 1_500_000_000), t + Duration::from_millis(1500));
        assert_eq!(shifted(t, -2_000_000_000), t - Duration::from_secs(2));
    }
}
