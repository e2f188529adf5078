// SPDX-License-Identifier: Apache-2.0
//! `machine.MachineService`: the calls keelson answers, with Talos's semantics.

use grpc::Status;
use talos_api::common::Metadata;
use talos_api::machine as m;

use super::dispatch::{decode, Call, Method, Reply, SMALL_REQUEST};

/// The methods served.
pub const METHODS: &[Method] = &[Method {
    path: "/machine.MachineService/Version",
    max_request: SMALL_REQUEST,
    handler: version,
}];

/// The platform keelson reports: Talos names the environment it runs in (`metal`, `aws`,
/// ...) and the mode (`metal`, `cloud`, `container`); keelson boots bare metal and VMs alike.
const PLATFORM: (&str, &str) = ("metal", "metal");

fn version(call: &mut Call<'_>, req: &[u8]) -> Result<Reply, Status> {
    let _: talos_api::google::Empty = decode(req)?;
    let maintenance = call.maintenance();
    let reply = m::Version {
        metadata: Metadata::of(&call.hostname()),
        version: Some(m::VersionInfo {
            tag: concat!("v", env!("CARGO_PKG_VERSION")).into(),
            os: std::env::consts::OS.into(),
            arch: arch().into(),
            ..m::VersionInfo::default()
        }),
        platform: Some(m::PlatformInfo { name: PLATFORM.0.into(), mode: PLATFORM.1.into() }),
        // Talos's maintenance service leaves the features out: there is no RBAC without a
        // config.
        features: (!maintenance).then_some(m::FeaturesInfo { rbac: true }),
    };
    Reply::unary(&m::VersionResponse { messages: vec![reply] })
}

/// The architecture as Go names it (Talos reports `runtime.GOARCH`).
fn arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}
