// SPDX-License-Identifier: Apache-2.0
//! `keelson bootstrap [NODE OPTIONS]`: Talos's `Bootstrap` on one control-plane node (start a
//! new etcd cluster there). Like talosctl, it prints nothing when the node accepts; the node's
//! refusal (a worker, etcd already has data, an existing cluster) is its gRPC status and
//! message. Recovery from an etcd snapshot (talosctl's `--recover-from`) is not offered.

use std::ffi::OsString;
use std::process::ExitCode;

use talos_api::machine::{BootstrapRequest, BootstrapResponse};

use crate::connect::{self, Common};
use crate::rpc::Channel;

/// `keelson bootstrap`.
pub fn main(raw: Vec<OsString>) -> ExitCode {
    crate::client::finish("bootstrap", run(raw))
}

fn run(raw: Vec<OsString>) -> Result<(), String> {
    let mut p = lexopt::Parser::from_args(raw);
    let mut common = Common::default();
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        if let Some(opt) = connect::option(&arg) {
            common.set(opt, &mut p)?;
            continue;
        }
        return Err(arg.unexpected().to_string());
    }
    let targets = common.targets()?;
    // One cluster starts on one node: bootstrapping several at once would make several.
    let [target] = targets.as_slice() else {
        return Err("one node at a time (-n NODE)".into());
    };
    let mut c = Channel::connect(target, false).map_err(|e| e.to_string())?;
    let _: BootstrapResponse = c
        .unary("/machine.MachineService/Bootstrap", &BootstrapRequest::default())
        .map_err(|e| format!("{}: {e}", target.name()))?;
    Ok(())
}
