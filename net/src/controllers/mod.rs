// SPDX-License-Identifier: Apache-2.0
//! Controllers of the network pipeline.
