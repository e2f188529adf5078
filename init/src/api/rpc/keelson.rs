// SPDX-License-Identifier: Apache-2.0
//! `keelson.v1.NodeService` (`talos-api/proto/keelson.proto`): keelson's calls that Talos's
//! API has no equivalent of. Each translates to a verb of [`crate::verbs`].

use grpc::{code, Status};
use talos_api::common::Metadata;
use talos_api::google::Empty;
use talos_api::keelson::{self as k, path};
use talos_api::machine as m;

use super::dispatch::{decode, Call, Method, Reply, APPLY_REQUEST, SMALL_REQUEST};
use crate::verbs;

/// The methods served.
pub const METHODS: &[Method] = &[
    // The same bound as Talos's ApplyConfiguration (the request holds the config).
    Method { path: path::APPLY_CONFIGURATION, max_request: APPLY_REQUEST, handler: apply },
    Method { path: path::CONFIRM_CONFIGURATION, max_request: SMALL_REQUEST, handler: confirm },
    Method { path: path::STAGED_REBOOT, max_request: SMALL_REQUEST, handler: staged_reboot },
    Method { path: path::MACHINE_STATUS, max_request: SMALL_REQUEST, handler: machine_status },
];

fn apply(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    let req: k::ApplyConfigurationRequest = decode(req)?;
    let inner = req.request.unwrap_or_default();
    super::machine::apply(call, &inner, req.allow_partial)
}

fn confirm(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    let _: Empty = decode(req)?;
    let kept = verbs::confirm_config(call.effects)
        .map_err(|e| Status::new(code::FAILED_PRECONDITION, e))?;
    Reply::unary(&k::ConfirmConfigurationResponse {
        messages: vec![k::ConfirmConfiguration {
            metadata: Metadata::of(&call.hostname()),
            kept: kept.as_str().unwrap_or_default().to_owned(),
        }],
    })
}

fn staged_reboot(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    let _: Empty = decode(req)?;
    verbs::staged_reboot(call.effects).map_err(|e| Status::new(code::FAILED_PRECONDITION, e))?;
    log::warn!(target: "api", "reboot into the staged config requested over the gRPC API");
    Reply::unary(&m::RebootResponse {
        messages: vec![m::Reboot {
            metadata: Metadata::of(&call.hostname()),
            actor_id: super::machine::actor_id(call.now, call.machine.started),
        }],
    })
}

fn machine_status(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    let _: Empty = decode(req)?;
    let hostname = call.hostname();
    let v = verbs::machine_status(call.rt, call.machine, &hostname, call.now);
    Reply::unary(&k::MachineStatusResponse {
        messages: vec![k::MachineStatus {
            metadata: Metadata::of(&hostname),
            status_json: v.to_string(),
        }],
    })
}
