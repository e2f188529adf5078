// SPDX-License-Identifier: Apache-2.0
//! The planner (pure), and the adapter on a kernel with VRF and VXLAN (the VM suite).

mod kernel;
mod plan;
