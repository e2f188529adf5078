// SPDX-License-Identifier: Apache-2.0
//! `ServiceStart` and `ServiceStop` of `machine.MachineService` for the supervised services
//! (the kubelet, and etcd on a control plane): a stopped service stays stopped, whatever its
//! restart policy, until `ServiceStart` (or `ServiceRestart`), as Talos's services do. The
//! node itself (`machined`) can be neither. Roles: `os:operator` and `os:admin`
//! (`talos_api::authz`, Talos's rules).

use grpc::{code, Status};
use net::resource::{Namespace, ServiceStatus};
use talos_api::common::Metadata;
use talos_api::machine as m;

use super::dispatch::{decode, Call, Method, Reply, SMALL_REQUEST};
use crate::supervisor::Op;

/// The methods served.
pub const METHODS: &[Method] = &[
    Method {
        path: "/machine.MachineService/ServiceStart",
        max_request: SMALL_REQUEST,
        handler: start,
    },
    Method {
        path: "/machine.MachineService/ServiceStop",
        max_request: SMALL_REQUEST,
        handler: stop,
    },
];

fn start(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    let req: m::ServiceStartRequest = decode(req)?;
    let resp = act(call, &req.id, Op::Start)?;
    let reply = m::ServiceStart { metadata: Metadata::of(&call.hostname()), resp };
    Reply::unary(&m::ServiceStartResponse { messages: vec![reply] })
}

fn stop(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    let req: m::ServiceStopRequest = decode(req)?;
    let resp = act(call, &req.id, Op::Stop)?;
    let reply = m::ServiceStop { metadata: Metadata::of(&call.hostname()), resp };
    Reply::unary(&m::ServiceStopResponse { messages: vec![reply] })
}

/// Check `id` and leave the start or stop for the loop; the reply's text.
fn act(call: &mut Call<'_>, id: &str, op: Op) -> Result<String, Status> {
    let verb = match op {
        Op::Start => "started",
        Op::Stop => "stopped",
    };
    if id == "machined" {
        return Err(Status::new(
            code::FAILED_PRECONDITION,
            "machined is the node itself: it is neither started nor stopped through the API",
        ));
    }
    let shown = net::names::escape(id, 64);
    let Some(status) = call.rt.store().get_spec::<ServiceStatus>(Namespace::Runtime, id) else {
        return Err(Status::new(code::NOT_FOUND, format!("service {shown:?} not found")));
    };
    if status.command.is_empty() && status.state == "stopped" {
        return Err(Status::new(
            code::FAILED_PRECONDITION,
            format!("service {shown:?} is not configured to run"),
        ));
    }
    call.effects.service_op = Some((id.to_owned(), op));
    log::info!(target: "api", "{op:?} of {id} requested over the gRPC API");
    Ok(format!("Service {id:?} {verb}"))
}
