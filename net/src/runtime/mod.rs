// SPDX-License-Identifier: Apache-2.0
//! The single-threaded resource runtime.
