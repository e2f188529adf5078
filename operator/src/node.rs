// SPDX-License-Identifier: Apache-2.0
//! The [`NodeApi`] `serve` uses until the gRPC client (the `cli` crate's channel over the
//! `grpc` crate and `talos-api`) is wired in: every call answers that there is no client, so
//! each resource says why it does not move instead of appearing to.

use crate::reconcile::NodeApi;
use crate::states::{CallError, ServiceObs};

#[derive(Debug, Default, Clone, Copy)]
pub struct Unwired;

fn none() -> CallError {
    CallError::Unreachable("no Talos API client in this build yet".into())
}

impl NodeApi for Unwired {
    fn version(&mut self, _: &str) -> Result<String, CallError> {
        Err(none())
    }
    fn disks(&mut self, _: &str) -> Result<usize, CallError> {
        Err(none())
    }
    fn apply_configuration(
        &mut self,
        _: &str,
        _: bool,
        _: &str,
        _: bool,
    ) -> Result<bool, CallError> {
        Err(none())
    }
    fn service_info(&mut self, _: &str, _: &str) -> Result<ServiceObs, CallError> {
        Err(none())
    }
    fn bootstrap(&mut self, _: &str) -> Result<(), CallError> {
        Err(none())
    }
    fn kubeconfig(&mut self, _: &str) -> Result<String, CallError> {
        Err(none())
    }
    fn reset(&mut self, _: &str) -> Result<(), CallError> {
        Err(none())
    }
    fn upgrade(&mut self, _: &str, _: &str) -> Result<(), CallError> {
        Err(none())
    }
}
