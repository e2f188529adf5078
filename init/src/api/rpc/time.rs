// SPDX-License-Identifier: Apache-2.0
//! `time.TimeService`: the node's clock and its time server.

use super::dispatch::Method;

/// The methods served.
pub const METHODS: &[Method] = &[];
