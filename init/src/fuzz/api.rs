// SPDX-License-Identifier: Apache-2.0
//! What a client sends the API after the HTTP/2 preface, as it arrives over TLS or the
//! socket: HTTP/2 frames (HPACK headers, flow control) carrying gRPC calls, routed to the
//! handlers of Talos's machine API, COSI and keelson's extension, run against an empty
//! runtime as `os:admin` (the widest access).
//!
//! Oracles: no panic; what the server sends back is whole HTTP/2 frames, the first its
//! SETTINGS, and stays bounded (a 4 KiB input never makes more than 1 MiB of output).

use std::time::Instant;

use grpc::h2::{self, Connection, Role};
use talos_api::Message;
use testkit::fuzzkit::{run, Mutator, Target, Verdict};

use crate::api::cosi::watch::History;
use crate::api::rpc::dispatch::Call;
use crate::api::rpc::events::EventLog;
use crate::api::rpc::GrpcConn;
use crate::api::transport::Access;
use crate::machine::Machine;
use crate::verbs::Effects;

fn h2_config() -> h2::Config {
    h2::Config {
        stream_window: 1 << 20,
        conn_window: 1 << 20,
        max_header_list: 16 << 10,
        max_concurrent_streams: 16,
    }
}

/// A client's bytes for one call (after the preface, which the server's engine expects
/// first).
fn call(path: &str, msg: &[u8]) -> Vec<u8> {
    let mut c = Connection::new(Role::Client, h2_config());
    let head = grpc::request_headers(false, "localhost", path, "fuzz", None);
    if let Ok(id) = c.open_stream(&head, false) {
        let _ = c.send_data(id, &grpc::frame_message(msg), true);
    }
    c.take_output()
}

fn seeds() -> Vec<Vec<u8>> {
    use talos_api::cosi;
    use talos_api::machine as m;
    let get = cosi::GetRequest {
        namespace: "network".into(),
        r#type: "AddressStatuses.net.talos.dev".into(),
        id: "eth0/10.0.0.5/24\u{1b}".into(),
        options: None,
    };
    let list = cosi::ListRequest {
        namespace: "network-config".into(),
        r#type: "addressspecs".into(),
        options: None,
    };
    let apply = m::ApplyConfigurationRequest {
        data: b"version: v1alpha1\nmachine:\n  network: {}\n".to_vec(),
        mode: m::ApplyMode::Try as i32,
        dry_run: true,
        try_mode_timeout: Some(talos_api::google::Duration { seconds: 60, nanos: 0 }),
    };
    vec![
        call("/machine.MachineService/Version", &[]),
        call(cosi::path::GET, &get.encode_to_vec()),
        call(cosi::path::LIST, &list.encode_to_vec()),
        call("/machine.MachineService/ApplyConfiguration", &apply.encode_to_vec()),
        call(talos_api::keelson::path::MACHINE_STATUS, &[]),
        call("/machine.MachineService/Nope", &[0xff, 0x01]),
    ]
}

/// `out` is whole HTTP/2 frames (RFC 9113 §4.1), the first a SETTINGS frame on stream 0.
fn frames(out: &[u8]) -> Result<(), String> {
    const SETTINGS: u8 = 0x4;
    let mut rest = out;
    let mut first = true;
    while !rest.is_empty() {
        let Some(head) = rest.get(..9) else {
            return Err(format!("{} bytes of a frame header left over", rest.len()));
        };
        let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        if first && (head[3] != SETTINGS || stream != 0) {
            return Err(format!("the first frame is type {} on stream {stream}", head[3]));
        }
        first = false;
        rest = rest.get(9 + len..).ok_or_else(|| format!("a frame of {len} bytes is cut"))?;
    }
    Ok(())
}

#[test]
fn fuzz_target_grpcrequest() {
    let target = Target {
        name: "grpcrequest",
        crate_dir: super::CRATE_DIR,
        seeds: seeds(),
        mutator: Mutator {
            dict: &[
                b":path",
                b"/cosi.resource.State/Watch",
                b"/machine.MachineService/Logs",
                b"grpc-timeout",
                b"\x00\x00\x00\x00\x00",
                b"\xff\xff\xff\xff",
                b"\x00\x00\x04\x08\x00\x00\x00\x00\x01",
                b"\x00\x00\x08\x07\x00\x00\x00\x00\x00",
                b"\x7f\xff\xff\xff",
            ],
            lengths: None,
            max_len: 4096,
        },
        default_iters: 20_000,
    };
    let mut rt = runtime::Runtime::new();
    let (events, cosi) = (EventLog::default(), History::default());
    run(target, |b| {
        let mut server = GrpcConn::new();
        let mut effects = Effects::default();
        let now = Instant::now();
        let machine = Machine { started: now, settled: false };
        let mut call = Call {
            access: Access::Admin,
            rt: &mut rt,
            machine,
            effects: &mut effects,
            events: &events,
            cosi: &cosi,
            now,
            bell: None,
        };
        let mut input = h2::PREFACE.to_vec();
        input.extend_from_slice(b);
        server.recv(&input, &mut call);
        let out = server.take_output();
        if out.len() > 1 << 20 {
            return Err(format!("{} bytes of output for {} of input", out.len(), b.len()));
        }
        frames(&out)?;
        Ok(if server.busy() || !server.done() { Verdict::Accepted } else { Verdict::Refused })
    });
}
