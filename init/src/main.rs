// SPDX-License-Identifier: Apache-2.0
//! keelson: PID 1 for Kubernetes nodes, with built-in networking.

fn main() {}
