// SPDX-License-Identifier: Apache-2.0
//! `storage.StorageService`: the node's disks.

use super::dispatch::Method;

/// The methods served.
pub const METHODS: &[Method] = &[];
