// SPDX-License-Identifier: Apache-2.0
//! The demo workload that stands in for the kubelet in the demo image (placeholder).

use std::ffi::OsString;
use std::process::ExitCode;

/// Entry point when invoked as `demo-kubelet`.
pub fn main(_args: Vec<OsString>) -> ExitCode {
    ExitCode::SUCCESS
}
